"""The `course` command: one-line errors with exit code 2, never a traceback."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.config import load_course
from autograder.layout import CourseLayout
from conftest import PROJECT, ROOT, course_with_students

KNOWN = ", ".join(a.name for a in load_course(ROOT).assignments)     # the course's assignments, as errors list them


def course(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("args, message", [
    (["autograde", "no-such-assignment"],
     f"course.yml: no assignment named 'no-such-assignment' (known: {KNOWN})"),
    (["autograde", "transformer-block", "--student", "nobody"],
     f"{CourseLayout(Path()).submission('nobody', 'transformer-block')}: no such submission folder"),
    (["validate", "transformer-block"], "release/transformer-block/transformer-block.ipynb: not found"),
    (["autograde", "transformer-block", "--scheduler", ""], "--scheduler: empty address (an unset variable?)"),
    (["autograde", "transformer-block"],
     "release/transformer-block/transformer-block.ipynb: not found (run `course release transformer-block` first)"),
])
def test_cli_user_errors_are_one_line(course_copy, args, message):
    """Does each mistake on the command line or in the course folder give one line and exit code 2
    (an assignment never released refused by `course autograde` as by `course validate`)?"""
    if "release/" in message:
        (CourseLayout(course_copy).release("transformer-block") / "transformer-block.ipynb").unlink()
    proc = course(*args, "--course-dir", str(course_copy))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_cli_a_student_id_differing_from_a_folder_by_case_or_normalisation_names_that_folder(course_copy):
    """`--student Ada` where submitted/ada/ holds the submission, or `zoë` typed as one code point where the
    folder's name has 'e' and a combining mark: is it still one line and exit code 2, naming the folder that
    matches (with its escapes when the two print alike), but no folder lacking the assignment?"""
    layout = CourseLayout(course_copy)
    nfc, nfd = "zo\u00eb", "zoe\u0308"

    def folder(sid: str) -> str:
        return layout.relative(layout.submission(sid, "transformer-block"))

    for sid in ("ada", nfd):
        layout.submission(sid, "transformer-block").mkdir(parents=True)
    (layout.submitted_dir / "ADA").mkdir()        # no submission of this assignment: not a match
    expected = {
        "Ada": f"{folder('Ada')}: no such submission folder; {folder('ada')} differs from Ada only by case: give "
               f"--student ada",
        nfc: f"{folder(nfc)}: no such submission folder; {folder(nfd)} ('zoe\\u0308') differs from {nfc} ('zo\\xeb') "
             f"only by Unicode normalisation: give --student as that folder's name is spelt"}
    for student, message in expected.items():
        proc = course("autograde", "transformer-block", "--student", student, "--course-dir", str(course_copy))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.strip().splitlines() == [f"course: error: {message}"]


def test_cli_course_dir_defaults_to_the_current_folder(course_copy):
    """Does the command find course.yml in the current folder when --course-dir is not given?"""
    proc = course("autograde", "transformer-block", cwd=course_copy)
    assert proc.returncode == 0, proc.stderr
    assert "no submissions found under submitted/<student>/transformer-block/" in proc.stdout


def test_cli_wait_without_student_says_it_changes_nothing(course_copy):
    """Is `--wait` on a whole-class autograde (which always commits before returning) named in a warning,
    rather than taken silently as if it did something?"""
    proc = course("autograde", "transformer-block", "--wait", "--course-dir", str(course_copy))
    assert proc.returncode == 0, proc.stderr
    assert "WARNING: --wait changes nothing without --student" in proc.stderr
    plain = course("autograde", "transformer-block", "--course-dir", str(course_copy))
    assert "--wait" not in plain.stderr


def test_cli_help_is_written_for_its_users():
    """Does `course --help` describe what the command does and list its commands, not the module's notes?"""
    proc = course("--help")
    assert proc.returncode == 0
    assert "Release, check and grade the notebook assignments" in proc.stdout
    for command in ("release", "validate", "autograde", "demo"):
        assert command in proc.stdout
    assert "argument parsing only" not in proc.stdout, "the module docstring is for developers"


def test_cli_every_argument_of_every_command_is_explained():
    """Does each command's --help say what each of its arguments is (none listed bare)?"""
    from autograder.cli import _parser

    commands = next(a for a in _parser()._actions if a.dest == "command").choices
    for name, sub in commands.items():
        bare = [a.dest for a in sub._actions if not a.help]
        assert not bare, f"course {name}: {bare} without help"


def _scores(folder: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.find_assignment("transformer-block").submissions}


def _outputs(folder: Path) -> dict[str, bytes]:
    layout = CourseLayout(folder)
    files = [*layout.autograded_dir.rglob("results.json"), *layout.feedback_dir.rglob("*.html")]
    return {str(f.relative_to(folder)): f.read_bytes() for f in files}


def _no_grader(folder: Path) -> None:
    config = folder / "course.yml"
    config.write_text(config.read_text().replace("silu: {points: 5}", "silu: {points: 5}\n      gelu: {points: 5}"))


def _grader_does_not_import(folder: Path) -> None:
    with open(CourseLayout(folder).graders("transformer_block") / "test_silu.py", "a") as fh:
        fh.write("\ndef broken(:\n")


# where _grader_does_not_import's broken line lands
BROKEN_LINE = len((PROJECT.graders("transformer_block") / "test_silu.py").read_text().splitlines()) + 2


def _points_mark_mistyped(folder: Path) -> None:
    grader = CourseLayout(folder).graders("transformer_block") / "test_silu.py"
    grader.write_text(grader.read_text().replace("@pytest.mark.points(", "@pytest.mark.point(", 1))


def _negative_weight(folder: Path) -> None:
    grader = CourseLayout(folder).graders("transformer_block") / "test_silu.py"
    grader.write_text(grader.read_text().replace("@pytest.mark.points(0.5)", "@pytest.mark.points(-1)", 1))


def _weights_all_zero(folder: Path) -> None:
    grader = CourseLayout(folder).graders("transformer_block") / "test_silu.py"
    grader.write_text(re.sub(r"@pytest\.mark\.points\([0-9.]+\)", "@pytest.mark.points(0)", grader.read_text()))


def _grader_for_no_problem(folder: Path) -> None:
    graders = CourseLayout(folder).graders("transformer_block")
    (graders / "test_gelu.py").write_text((graders / "test_silu.py").read_text())


def test_cli_a_misspelt_roster_id_is_named_beside_the_submitter_it_likely_means(tmp_path):
    """When the roster has adaa for ada (and Alan for alan), does `course autograde` pair ada, graded off the
    roster, with adaa, who has no submission, in one WARNING line, leaving alan to the case warning alone?"""
    folder = course_with_students(tmp_path / "course", ("ada", "alan"))
    (folder / "roster.csv").write_text("id\nadaa\nAlan\n")
    proc = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no submission from 2 roster students, each scored 0 in the gradebook: adaa, Alan" in proc.stdout
    hints = [line for line in proc.stdout.splitlines() if "(a typo?)" in line]
    assert hints == ["WARNING: ada (not on the roster) may be the roster's adaa (a typo?): if so, correct the roster "
                     "(or rename the submission folder) and run `course autograde transformer-block` again"], (
        proc.stdout)
    assert "matches roster id Alan except for case" in proc.stdout


@pytest.mark.parametrize("breakage, args, message", [
    (_no_grader, ["--force"], "gelu: no grader file assignments/transformer_block/graders/test_gelu.py"),
    (_grader_does_not_import, ["--force"], f"test_silu.py, line {BROKEN_LINE}: SyntaxError: invalid syntax, "
                                           f"at 'def broken(:'"),
    (_grader_does_not_import, ["--force", "--student", "ada"], f"test_silu.py, line {BROKEN_LINE}: SyntaxError"),
    (_points_mark_mistyped, ["--force"], "test_silu.py::test_silu_matches_reference: unknown mark @pytest.mark.point "
                                         "(a check's weight is @pytest.mark.points(w)"),
    (_negative_weight, ["--force"], "test_silu.py::test_silu_keeps_float32: @pytest.mark.points(-1): a check's "
                                    "weight is a finite number, 0 or more"),
    (_weights_all_zero, ["--force", "--student", "ada"], "test_silu.py: all checks of problem silu weigh 0"),
    (_grader_for_no_problem, ["--force", "--workers", "2"],
     "assignments/transformer_block/graders: graders could not be collected: test_gelu.py: no problem named 'gelu'"),
])
def test_cli_broken_graders_refuse_before_any_student_is_touched(tmp_path, breakage, args, message):
    """When the graders do not match course.yml (a problem without its grader file, a grader that does
    not import, a mistyped points mark, a weight below 0, a problem whose checks all weigh 0, a grader
    for no problem), does `course autograde` refuse in
    one line (exit 2), leaving every student's results.json, page and gradebook grades as they were,
    rather than grading the whole class as crashed with 0?"""
    folder = course_with_students(tmp_path / "course", ("ada", "katherine"))
    first = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert first.returncode == 0, first.stdout + first.stderr
    scores, outputs = _scores(folder), _outputs(folder)
    assert scores == {"ada": 100.0, "katherine": 88.0} and len(outputs) == 4

    breakage(folder)
    proc = course("autograde", "transformer-block", *args, "--course-dir", str(folder))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # (on a one-core machine `--workers 2` is brought down to 1, in a line of its own)
    lines = [line for line in proc.stderr.strip().splitlines() if not line.startswith("course autograde: --workers")]
    assert len(lines) == 1 and message in lines[0] and "nothing was graded" in lines[0], proc.stderr
    assert len(set(lines[0].split("; "))) == len(lines[0].split("; ")), "a reason said twice: " + lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert _outputs(folder) == outputs
    assert _scores(folder) == scores


@pytest.mark.parametrize("module, text, error", [
    ("reference.py", "\ndef broken(:\n", "SyntaxError: invalid syntax"),
    ("reference.py", "\nraise ValueError('oops')\n", "ValueError: oops"),
    ("mistakes.py", "\nimport torch_is_not_installed_here\n",
     "ModuleNotFoundError: No module named 'torch_is_not_installed_here'"),
], ids=["syntax", "raises", "missing-module"])
@pytest.mark.parametrize("command", [["autograde"], ["autograde", "--student", "ada"], ["validate"]],
                         ids=["autograde", "student", "validate"])
def test_cli_an_instructor_module_that_does_not_import_is_one_line_naming_its_file_and_line(
        tmp_path, module, text, error, command):
    """When reference.py or mistakes.py fails on import, do `course autograde` (a batch, one student)
    and `course validate` say so in one line naming the file relative to the course and the line at
    fault, with exit code 2, rather than a traceback or the error without its file?"""
    folder = course_with_students(tmp_path / "course", ("ada",))
    path = CourseLayout(folder).package("transformer_block") / module
    line = len(path.read_text().splitlines()) + 2
    with open(path, "a") as fh:
        fh.write(text)
    proc = course(command[0], "transformer-block", *command[1:], "--course-dir", str(folder))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    shown = CourseLayout(Path()).package("transformer_block") / module
    assert proc.stderr == f"course: error: {shown}, line {line}: {error}\n", proc.stderr
    assert "Traceback" not in proc.stdout


def test_cli_a_check_whose_grader_code_fails_is_named_once_in_the_summary(tmp_path):
    """When a grader check fails in its own code for every student (an undefined name), does `course
    autograde` exit 1 and say so once at the end, naming the check, the error's reason and how many
    submissions it cost points, and flag each of those rows in the class table?"""
    folder = course_with_students(tmp_path / "course", ("ada", "katherine"))
    with open(CourseLayout(folder).graders("transformer_block") / "test_silu.py", "a") as fh:
        fh.write("\n\ndef test_x(student):\n    student.silu(np2.ones(3))\n")
    proc = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [ln for ln in proc.stdout.splitlines() if "GRADER ERROR in" in ln]
    graders = CourseLayout(Path()).graders("transformer_block")
    assert len(errors) == 1, proc.stdout
    assert errors[0].startswith(f"GRADER ERROR in {graders}/test_silu.py::test_x (all 2 submissions): "
                                f"NameError: name 'np2' is not defined; that check scored 0: "), errors[0]
    for sid in ("ada", "katherine"):
        row = next(ln for ln in proc.stdout.splitlines() if ln.startswith(sid + " "))
        assert "grader error" in row, row


def _grade_cells(folder: Path) -> set[str]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gb:
        return {c.name for nb in gb.find_assignment("transformer-block").notebooks for c in nb.grade_cells}


def test_a_grade_id_renamed_after_grading_is_refused_naming_both_ids_until_released(tmp_path):
    """When course.yml gives silu another grade_id after the class was graded (and no release since), does
    `course autograde` (the class, and one student) refuse in one line naming the notebook, the old and new
    ids and what to do, leaving the gradebook with the old cell alone and every output as it was, instead of
    adding the new cell beside the old one (the gradebook then counting silu twice)? And once the cell is
    renamed in source/ too and released with --drop-grades, as the line says, is the class graded again?"""
    import json

    folder = course_with_students(tmp_path / "course", ("ada", "katherine"))
    assert course("autograde", "transformer-block", "--course-dir", str(folder)).returncode == 0
    scores, outputs = _scores(folder), _outputs(folder)
    config = folder / "course.yml"
    assert config.read_text().count("silu: {points: 5}") == 1
    config.write_text(config.read_text().replace("silu: {points: 5}", "silu: {points: 5, grade_id: test_silu_v2}"))
    for args in ([], ["--student", "ada"]):
        proc = course("autograde", "transformer-block", "--force", *args, "--course-dir", str(folder))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.splitlines() == [
            "course: error: transformer-block.ipynb: problem silu's grade cell is test_silu_v2 in course.yml, but the "
            "gradebook holds the scores of the submissions graded before under test_silu (a grade_id renamed after "
            "grading?), so grading now would keep both in the gradebook; give the grade_id test_silu back in "
            "course.yml, or rename the cell in source/transformer-block/transformer-block.ipynb too and run `course "
            "release transformer-block --drop-grades` (which drops the scores under test_silu), then `course "
            "autograde transformer-block`; nothing was graded"], proc.stderr
        cells = _grade_cells(folder)
        assert "test_silu" in cells and "test_silu_v2" not in cells, cells
        assert _outputs(folder) == outputs and _scores(folder) == scores

    source = CourseLayout(folder).source("transformer-block") / "transformer-block.ipynb"
    nb = json.loads(source.read_text(encoding="utf-8"))
    [cell] = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_silu"]
    cell["metadata"]["nbgrader"]["grade_id"] = "test_silu_v2"
    source.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    released = course("release", "transformer-block", "--drop-grades", "--course-dir", str(folder))
    assert released.returncode == 0, released.stdout + released.stderr
    graded = course("autograde", "transformer-block", "--force", "--course-dir", str(folder))
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "test_silu_v2" in _grade_cells(folder) and "test_silu" not in _grade_cells(folder)
    assert _scores(folder) == scores


def _autograde_unreadable(target: Path, folder: Path, *args: str) -> subprocess.CompletedProcess:
    """`course autograde transformer-block *args` of the course `folder` while `target` (a submission's
    notebook or folder) has no permissions, which are then put back."""
    import os

    # root reads anything: without these two capabilities its permissions hold for it too
    drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    mode = target.stat().st_mode
    target.chmod(0)
    try:
        return subprocess.run([*drop, sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                               "--course-dir", str(folder), *args], capture_output=True, text=True, timeout=300)
    finally:
        target.chmod(mode)


@pytest.mark.parametrize("what", ["notebook", "folder"])
def test_cli_a_submission_the_grader_cannot_read_is_not_graded_and_its_grades_stand(tmp_path, what):
    """When the grader cannot read a graded student's notebook or submission folder (its permissions),
    does `course autograde --force` grade the others, leave that student's grades, results.json and
    page as they were (rather than score a 0 for the machine's fault or call the notebook not
    submitted), name the file in one line and exit 1?"""
    folder = course_with_students(tmp_path / "course", ("ada", "katherine"))
    first = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert first.returncode == 0, first.stdout + first.stderr
    scores, outputs = _scores(folder), _outputs(folder)
    submission = CourseLayout(folder).submission("katherine", "transformer-block")
    target = submission / "transformer-block.ipynb" if what == "notebook" else submission
    proc = _autograde_unreadable(target, folder, "--force")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    relative = CourseLayout(Path())
    shown = relative.submission("katherine", "transformer-block")
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("not graded:")] == [
        f"not graded: {shown / 'transformer-block.ipynb' if what == 'notebook' else shown} could not be read "
        f"(Permission denied), so {shown} was not graded and its student's earlier grades stand; make it readable "
        f"to the grader and run `course autograde` again"]
    assert any(ln.startswith("graded    ada ") for ln in proc.stdout.splitlines()), proc.stdout
    assert "katherine" not in proc.stdout, proc.stdout
    assert _scores(folder) == scores
    assert {k: v for k, v in _outputs(folder).items() if "katherine" in k} == \
        {k: v for k, v in outputs.items() if "katherine" in k}


def test_cli_a_batch_whose_every_submission_is_unreadable_says_so_not_that_none_was_found(tmp_path):
    """When the grader cannot read the one submission found (graded before), does `course autograde` end
    by saying it found one and graded none, naming why, rather than that it found no submission?"""
    folder = course_with_students(tmp_path / "course", ("ada",))
    first = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert first.returncode == 0, first.stdout + first.stderr
    notebook = CourseLayout(folder).submission("ada", "transformer-block") / "transformer-block.ipynb"
    proc = _autograde_unreadable(notebook, folder, "--force")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "no submissions found" not in proc.stdout, proc.stdout
    where = f"{CourseLayout(Path()).submission('<student>', 'transformer-block')}/"
    assert proc.stdout.splitlines()[-1] == (f"nothing was graded: 1 submission found under {where}, none gradable: "
                                            f"1 could not be read (earlier grades stand); each is named above")


@pytest.mark.parametrize("unreadable, removed, line", [
    (0, 0, "no submissions found under {where}"),
    (0, 1, "nothing was graded: 1 submission found under {where}, none gradable: 1 of a student taken out of the "
           "course; each is named above"),
    (0, 2, "nothing was graded: 2 submissions found under {where}, none gradable: 2 of students taken out of the "
           "course; each is named above"),
    (2, 1, "nothing was graded: 3 submissions found under {where}, none gradable: 2 could not be read (earlier "
           "grades stand) and 1 of a student taken out of the course; each is named above"),
])
def test_cli_the_closing_line_of_a_batch_that_graded_nobody_says_why(unreadable, removed, line):
    """Does a batch that graded nobody end with "no submissions found" only when none was, and else say
    how many it found and why none was graded (unreadable, students taken out of the course)?"""
    from autograder.cli import nothing_graded

    where = f"{CourseLayout(Path()).submission('<student>', 'hw')}/"
    assert nothing_graded(where, unreadable=unreadable, removed=removed) == line.format(where=where)


def test_cli_an_unreadable_first_submission_is_graded_with_its_reason_and_named_to_the_ta(tmp_path):
    """When the grader cannot read the notebook of a student with no earlier result (a student may
    submit it so), is it graded 0 with the reason on their page, as any unusable file is, the batch
    exiting 0, and is the TA told in a WARNING line naming the file?"""
    folder = course_with_students(tmp_path / "course", ("ada", "katherine"))
    notebook = CourseLayout(folder).submission("katherine", "transformer-block") / "transformer-block.ipynb"
    proc = _autograde_unreadable(notebook, folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = CourseLayout(Path()).submission("katherine", "transformer-block") / "transformer-block.ipynb"
    assert f"WARNING: katherine: {shown} could not be read (Permission denied); graded 0 with that reason on " \
           f"their page" in proc.stdout, proc.stdout
    assert _scores(folder)["katherine"] == 0 and _scores(folder)["ada"] > 0
    page = CourseLayout(folder).feedback("katherine", "transformer-block") / "transformer-block.html"
    assert "could not be read" in page.read_text(encoding="utf-8")


def test_cli_an_extension_for_no_student_is_named_and_the_batch_goes_on(tmp_path):
    """Does an extension in course.yml for an id that is neither on the roster nor among the submissions (a
    typo: the student meant then pays the late penalty) get a warning naming the key, while the batch
    grades everyone and exits 0; and does an extension for a real student raise no warning?"""
    folder = course_with_students(tmp_path / "course", ("ada", "alan"))
    config = folder / "course.yml"
    config.write_text(config.read_text().replace(
        "    late_policy:", "    extensions: {alna: {days: 1}, ada: {days: 2}}\n    late_policy:", 1))
    proc = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = [ln for ln in proc.stdout.splitlines() if ln.startswith("WARNING")]
    assert warnings == ["WARNING: course.yml: assignments[0].extensions.alna: no student 'alna' on the roster "
                        "(roster.csv) or in submitted/, so this extension applies to nobody"]
    assert "late -10" in next(ln for ln in proc.stdout.splitlines() if ln.startswith("alan "))


# A second assignment declared in course.yml before its instructor code or source notebook exist.
NOT_SET_UP = "  - name: activations\n    notebooks: [activations.ipynb]\n    problems:\n      relu: {points: 4}\n"
NOT_SET_UP_ERROR = ("course.yml: assignments[1].package: assignment activations: folder assignments/activations "
                    "does not exist (its reference and graders go there)")


def declare_an_assignment_not_set_up(folder: Path) -> None:
    config = CourseLayout(folder).config
    config.write_text(config.read_text(encoding="utf-8") + NOT_SET_UP, encoding="utf-8")


def test_cli_an_assignment_not_set_up_leaves_the_live_assignments_commands_alone(tmp_path):
    """With a second assignment declared in course.yml before its package and notebook exist, do
    `course autograde`, `course feedback` and `course gradescope` of the live assignment, and `nbgrader
    export`, work as before (exit 0, ada graded, her page written, her row exported)?"""
    import csv
    import os

    folder = course_with_students(tmp_path / "course", ("ada",))
    declare_an_assignment_not_set_up(folder)
    graded = course("autograde", "transformer-block", "--student", "ada", "--wait", "--course-dir", str(folder))
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert CourseLayout(folder).results_json("ada", "transformer-block").is_file()
    fed = course("feedback", "transformer-block", "--course-dir", str(folder))
    assert fed.returncode == 0, fed.stdout + fed.stderr
    assert "1 feedback page written under feedback/<student>/transformer-block/" in fed.stdout
    bundled = course("gradescope", "transformer-block", "--to", str(tmp_path / "tb.zip"), "--course-dir", str(folder))
    assert bundled.returncode == 0, bundled.stdout + bundled.stderr
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    exported = subprocess.run([str(bin_dir / "nbgrader"), "export", "--to", "grades.csv"], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=300)
    assert exported.returncode == 0, exported.stderr
    with open(folder / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["assignment"], r["student_id"]) for r in rows if float(r["score"]) > 0] == [("transformer-block", "ada")]


@pytest.mark.parametrize("args", [["autograde", "activations"], ["feedback", "activations"],
                                  ["release", "activations"], ["validate", "activations"],
                                  ["gradescope", "activations"], ["serve", "activations"], ["release"]])
def test_cli_a_command_about_an_assignment_not_set_up_is_one_line_naming_it(course_copy, args):
    """Is a command about the assignment not set up, or `course release` of every assignment, one line
    naming the assignment, its key in course.yml and the missing folder (exit 2), with nothing released?"""
    declare_an_assignment_not_set_up(course_copy)
    release = CourseLayout(course_copy).release("transformer-block") / "transformer-block.ipynb"
    before = release.stat().st_mtime_ns
    proc = course(*args, "--course-dir", str(course_copy))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"course: error: {NOT_SET_UP_ERROR}"), proc.stderr
    if args == ["release"]:
        assert lines[0].endswith("; without an assignment the command does every one in course.yml: name one to do "
                                 "it alone (set up: transformer-block)")
    assert release.stat().st_mtime_ns == before


@pytest.mark.slow
def test_cli_validate_of_every_assignment_names_what_one_not_set_up_lacks(course_copy):
    """Does `course validate` with no assignment validate the live one (ok) and report each missing part
    of the one not set up as a PROBLEM naming its key and path, exiting 1?"""
    declare_an_assignment_not_set_up(course_copy)
    proc = course("validate", "--course-dir", str(course_copy))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "validate transformer-block: ok" in lines
    assert [ln for ln in lines if ln.startswith("PROBLEM:")] == [
        f"PROBLEM: {NOT_SET_UP_ERROR}",
        "PROBLEM: course.yml: assignments[1].notebooks[0]: assignment activations: source notebook "
        "source/activations/activations.ipynb does not exist"]
    assert lines[-1] == "validate activations: 2 problems"


def test_a_batch_forks_one_early_worker_per_submission_folder_up_to_its_workers(tmp_path):
    """`course autograde` sizes the workers it forks before its imports by the student folders that
    hold the assignment (a folder or a link, not a dot folder, not another assignment's), never more
    than the workers asked for: is that count right?"""
    from autograder.cli import _submission_folders

    layout = CourseLayout(tmp_path)
    assert _submission_folders(layout, "a1", limit=8) == 0           # no submitted/ at all
    for student in ("ann", "bob", ".hidden"):
        layout.submission(student, "a1").mkdir(parents=True)
    layout.submission("cy", "a2").mkdir(parents=True)                   # another assignment only
    (layout.submitted_dir / "dee").mkdir()
    (layout.submission("dee", "a1")).symlink_to(tmp_path)               # a link: graded (and refused) too
    (layout.submitted_dir / "notes.txt").write_text("x")
    assert _submission_folders(layout, "a1", limit=8) == 3
    assert _submission_folders(layout, "a1", limit=2) == 2
    assert _submission_folders(layout, "a2", limit=8) == 1


def test_cli_workers_beyond_the_cores_are_brought_down_to_them_in_one_line(course_copy, monkeypatch, capsys):
    """`course autograde --workers N` with N above the cores the command may use (a class size, a typo):
    are the workers forked early and the pool's sized by those cores, said in one line on stderr, while
    N within them is kept as given, without a line, as is N for one student (graded by one worker)?"""
    from autograder import cli, cpus

    seen: list[tuple[str, int | None]] = []
    monkeypatch.setattr(cpus, "available_cores", lambda: 2)
    monkeypatch.setattr(cli, "_early_workers", lambda args: seen.append(("early", args.workers)) or ())
    monkeypatch.setattr(cli, "_run", lambda args, early: seen.append(("pool", args.workers)) or 0)
    for workers in ("100000000000000000000", "2"):
        assert cli.main(["autograde", "transformer-block", "--workers", workers, "--course-dir", str(course_copy)]) == 0
    assert cli.main(["autograde", "transformer-block", "--student", "ada", "--workers", "9", "--course-dir",
                     str(course_copy)]) == 0
    assert seen == [("early", 2), ("pool", 2), ("early", 2), ("pool", 2), ("early", 9), ("pool", 9)]
    assert capsys.readouterr().err.splitlines() == [
        "course autograde: --workers 100000000000000000000: this command may use 2 cores (workers sharing a core "
        "grade no faster, and each holds its own memory); grading with 2"]


@pytest.mark.parametrize("args, message", [
    (["autograde", "transformer-block", "--student", "ada", "--seed", "-5", "--wait"],
     "argument --seed: expected a whole number >= 0 and below 2**63 (a seed from results.json), not '-5'"),
    (["autograde", "transformer-block", "--student", "ada", "--seed", str(2**63)], "argument --seed: expected"),
    (["autograde", "transformer-block", "--student", ""], "argument --student: '' is not a student id: it is empty"),
    (["feedback", "transformer-block", "--student", ""], "argument --student: '' is not a student id: it is empty"),
    (["autograde", "transformer-block", "--student", ".."], "'..' is not a student id: it starts with '.'"),
    (["feedback", "transformer-block", "--student", "../ada"], "'../ada' is not a student id: it holds a '/'"),
])
def test_cli_a_seed_or_student_that_cannot_be_is_a_usage_error_and_nothing_is_graded(tmp_path, args, message):
    """Is a negative --seed (every check of the submission would fail, and a correct student get 5/100
    in the gradebook), or a --student that cannot be a student's folder (empty, `..`, a path), a usage
    error (exit 2, no traceback) before anything is graded or written?"""
    folder = course_with_students(tmp_path / "course", ("ada",))
    proc = course(*args, "--course-dir", str(folder))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr.strip().splitlines()[-1], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    layout = CourseLayout(folder)
    assert not layout.autograded_dir.exists() and not layout.feedback_dir.exists()
    assert not (folder / "gradebook.db").exists()


@pytest.mark.parametrize("kwargs, message", [
    ({"student": "ada", "seed": -5}, "seed: expected a whole number >= 0"),
    ({"student": "ada", "seed": True}, "seed: expected a whole number >= 0"),
    ({"student": ""}, "student '': not a student id (it is empty)"),
    ({"student": "."}, "student '.': not a student id (it starts with '.')"),
    ({"student": "a\0b"}, "student 'a\\x00b': not a student id (it holds a '/' or a NUL character)"),
    ({"student": "\udce9"}, "student '\\udce9': not a student id (it is not valid UTF-8)"),
    ({"student": "a\x1b[2Kb"}, "student 'a\\x1b[2Kb': not a student id (it holds a control character)"),
])
def test_api_refuses_a_seed_or_student_that_cannot_be_before_anything_is_touched(tmp_path, kwargs, message):
    """Do the Python API's autograde and feedback refuse such a seed or student (CourseError, one line)
    before the course secret, the gradebook or any output is created?"""
    from autograder import api
    from autograder.errors import CourseError

    folder = course_with_students(tmp_path / "course", ("ada",))
    calls = [api.autograde] + ([api.feedback] if "seed" not in kwargs else [])
    for call in calls:
        with pytest.raises(CourseError) as info:
            call(folder, "transformer-block", **kwargs)
        assert str(info.value).startswith(message) and "\n" not in str(info.value)
    assert not (folder / ".course_secret").exists() and not (folder / "gradebook.db").exists()
    assert not CourseLayout(folder).autograded_dir.exists()


@pytest.mark.parametrize("args", [[], ["--student", "ada"]])
def test_cli_a_secret_file_in_a_folder_that_does_not_exist_is_one_line_and_nothing_is_graded(tmp_path, args):
    """Is `secret_file: secrets/course_secret` (a folder that does not exist) one line naming the key (exit 2,
    no traceback) before anything is graded, the gradebook included?"""
    folder = course_with_students(tmp_path / "course", ("ada", "alan"))
    config = CourseLayout(folder).config
    config.write_text(config.read_text().replace("secret_file: .course_secret", "secret_file: secrets/course_secret"))
    proc = course("autograde", "transformer-block", *args, "--course-dir", str(folder))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"course: error: course.yml: secret_file: {folder / 'secrets' / 'course_secret'}: the folder "
        f"{folder / 'secrets'} does not exist (create it, or change `secret_file`)"]
    assert not CourseLayout(folder).autograded_dir.exists() and not (folder / "gradebook.db").exists()


def test_cli_feedback_names_a_results_json_that_is_not_valid_and_writes_the_other_pages(tmp_path):
    """When a graded student's results.json is corrupt (cut short, not UTF-8, not ours), does `course feedback`
    name the file and why in one line each and exit 1, rather than call her "not graded yet" and exit 0, while
    the other students' pages are still written?"""
    folder = course_with_students(tmp_path / "course", ("ada", "alan", "grace", "katherine"))
    first = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert first.returncode == 0, first.stdout + first.stderr
    layout = CourseLayout(folder)
    layout.results_json("ada", "transformer-block").write_text('{"cut')
    layout.results_json("alan", "transformer-block").write_bytes(b"\xff")
    layout.results_json("grace", "transformer-block").write_text("{}")
    page = layout.feedback("katherine", "transformer-block") / "transformer-block.html"
    page.unlink()
    proc = course("feedback", "transformer-block", "--course-dir", str(folder))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    where = {sid: layout.relative(layout.results_json(sid, "transformer-block")) for sid in ("ada", "alan", "grace")}
    assert proc.stderr.splitlines() == [
        f"feedback: {where['ada']}: not valid JSON (Unterminated string starting at: line 1 column 2 (char 1))",
        f"feedback: {where['alan']}: not valid JSON ('utf-8' codec can't decode byte 0xff in position 0: invalid "
        f"start byte)",
        f"feedback: {where['grace']}: not a results.json written by this grader (KeyError: 'extra_data')"]
    assert "not graded yet" not in proc.stdout and "Traceback" not in proc.stdout + proc.stderr
    assert page.is_file() and "1 feedback page written" in proc.stdout


@pytest.mark.parametrize("url, message", [
    ("notaurl", "course.yml: gradebook: notaurl: not a database URL"),
    ("sqlite:///nodir/gb.db",
     "course.yml: gradebook: sqlite:///{folder}/nodir/gb.db: the folder {folder}/nodir does not exist (the gradebook "
     "is created in it)"),
    ("mysql+pymysql://bob:hunter2@db.example/gb", "course.yml: gradebook: mysql+pymysql://bob:***@db.example/gb: the "
                                                  "driver for 'mysql+pymysql' is not installed"),
    ("nosuchdb://bob:hunter2@db.example/gb", "course.yml: gradebook: nosuchdb://bob:***@db.example/gb: no database of "
                                             "the kind 'nosuchdb' is known to SQLAlchemy"),
])
def test_cli_a_gradebook_the_writer_could_not_open_is_one_line_before_anything_is_graded(tmp_path, url, message):
    """Is a `gradebook` URL that cannot be read, names a driver that is not installed, or an SQLite file in a
    folder that does not exist, one line naming the key (exit 2, the URL's password hidden) before any student
    is graded, rather than a batch graded in full with "the gradebook writer stopped" for each student?"""
    if "pymysql" in url and importlib.util.find_spec("pymysql") is not None:
        pytest.skip("pymysql is installed here")
    folder = course_with_students(tmp_path / "course", ("ada", "alan"))
    config = CourseLayout(folder).config
    config.write_text(config.read_text().replace("gradebook: sqlite:///gradebook.db", f"gradebook: {url}"))
    proc = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("course: error: " + message.format(folder=folder)), lines
    assert "hunter2" not in proc.stdout + proc.stderr
    assert not CourseLayout(folder).autograded_dir.exists() and not CourseLayout(folder).feedback_dir.exists()


def test_cli_a_gradebook_file_that_is_no_database_is_refused_before_anything_is_graded(tmp_path):
    """Is a gradebook.db that is not a database (random bytes) refused by `course autograde` up front, in the
    line `course feedback` gives (exit 2, nothing graded), rather than the whole class graded and each student's
    commit failing at the end?"""
    folder = course_with_students(tmp_path / "course", ("ada", "alan"))
    (folder / "gradebook.db").write_bytes(bytes(range(256)) * 20)
    proc = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = (f"course: error: gradebook sqlite:///{folder}/gradebook.db: cannot open (DatabaseError: file is not a "
            f"database)")
    assert proc.stderr.splitlines() == [line], proc.stderr
    assert not CourseLayout(folder).autograded_dir.exists() and not CourseLayout(folder).feedback_dir.exists()
    feedback = course("feedback", "transformer-block", "--course-dir", str(folder))
    assert (feedback.returncode, feedback.stderr.splitlines()) == (2, [line])


@pytest.mark.parametrize("content, why", [
    (b"", "Expecting value: line 1 column 1 (char 0)"),
    (b'{"cells": [{"cell_type": "code", "sou', "Unterminated string starting at: line 1 column 34 (char 33)"),
    (b'{"metadata": {}}', "no list of cells"),
], ids=["empty", "cut-short", "no-cells"])
def test_cli_a_release_notebook_that_is_no_notebook_is_refused_before_anything_is_graded(tmp_path, content, why):
    """With the released notebook empty, cut short or JSON without cells, does `course autograde` refuse in one
    line naming that file and `course release` (exit 2), with no result, page or gradebook written, rather than
    grade the class as if no cell had been released (every cell of each submission run)?"""
    folder = course_with_students(tmp_path / "course", ("ada", "alan"))
    layout = CourseLayout(folder)
    released = layout.release("transformer-block") / "transformer-block.ipynb"
    released.write_bytes(content)
    before = sorted(p.relative_to(folder) for p in folder.rglob("*") if "__pycache__" not in p.parts)
    proc = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = (f"course: error: {layout.relative(released)}: not a readable notebook ({why}); run `course release "
            f"transformer-block` to write it again")
    assert proc.stderr.splitlines() == [line], proc.stderr
    assert sorted(p.relative_to(folder) for p in folder.rglob("*") if "__pycache__" not in p.parts) == before
    assert not (folder / "gradebook.db").exists()
    assert released.read_bytes() == content


def test_cli_a_student_whose_output_folder_is_blocked_is_one_line_and_gets_no_grades(tmp_path):
    """With a file where alan's autograded/ folder goes and one where grace's feedback folder goes, is each of
    them one line naming that file, with nothing else of their result written (no grades in the gradebook that
    no results.json or page shows, no copy), while ada is graded and written in full?"""
    import sqlite3

    folder = course_with_students(tmp_path / "course", ("ada", "alan", "grace"))
    layout = CourseLayout(folder)
    blocked = {"alan": layout.autograded_dir / "alan", "grace": layout.feedback("grace", "transformer-block")}
    for path in blocked.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("in the way\n")
    proc = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for sid, path in blocked.items():
        lines = [ln for ln in proc.stderr.splitlines() if sid in ln]
        assert len(lines) == 1 and f"{layout.relative(path)} is not a folder" in lines[0], proc.stderr
        assert lines[0].endswith(f"the next `course autograde` grades {sid} again"), lines[0]
    assert "gradebook writer stopped" not in proc.stderr
    db = sqlite3.connect(folder / "gradebook.db")
    try:
        graded = {sid for (sid,) in db.execute("SELECT student_id FROM submitted_assignment")}
    finally:
        db.close()
    assert graded == {"ada"}
    assert "grading_key" in json.loads(layout.results_json("ada", "transformer-block").read_text())["extra_data"]
    assert "grading_key" not in json.loads(layout.results_json("grace", "transformer-block").read_text())["extra_data"]
    assert not list(layout.autograded("grace", "transformer-block").glob("*.ipynb"))


def _row(stdout: str, sid: str) -> list[str]:
    return next(ln for ln in stdout.splitlines() if ln.startswith(sid + " ")).split()


def _progress(stdout: str, sid: str) -> str:
    """The student's progress line ("graded    ada   100.00/100  1.23 s")."""
    return next(ln for ln in stdout.splitlines() if ln.split()[:2] in (["graded", sid], ["unchanged", sid]))


def test_cli_the_summary_shows_a_tas_change_and_an_unchanged_student_is_said_to_be_already_graded(tmp_path):
    """After a TA lowered one of ada's scores in the gradebook, does `course autograde` (one student, and the
    class) show her total as the student gets it (the gradebook's, as `nbgrader export` has it), marked, with
    the autograder's own beside it, and her progress line's total marked as the autograder's (alan's, without
    a review, not); and does a run for alan, unchanged and without a review, say he was already graded and
    write nothing at all (no background commit, no "1 graded")?"""
    from nbgrader.api import Gradebook

    from autograder.reporting.gradebook import PENDING_DIR

    a = "transformer-block"
    folder = course_with_students(tmp_path / "course", ("ada", "alan"))
    first = course("autograde", a, "--course-dir", str(folder))
    assert first.returncode == 0, first.stdout + first.stderr
    auto = float(next(cell for cell in _row(first.stdout, "ada") if "/" in cell).split("/")[0])
    assert "(autograder)" not in _progress(first.stdout, "ada") + _progress(first.stdout, "alan"), first.stdout
    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}", "dl-attention") as gb:
        grade = gb.find_grade("test_rms_norm", a, a, "ada")
        assert grade.auto_score == 5.0
        grade.manual_score = 4.0
        gb.db.commit()
    final = f"{auto - 1:g}/"
    one = course("autograde", a, "--student", "ada", "--course-dir", str(folder))
    assert one.returncode == 0, one.stdout + one.stderr
    row = _row(one.stdout, "ada")
    assert "4*" in row and any(cell.startswith(final) and cell.endswith("*") for cell in row), one.stdout
    assert f"TA changed, autograder {auto:g}" in " ".join(row), one.stdout
    assert f"{auto:.2f}/100  (autograder)" in _progress(one.stdout, "ada"), one.stdout
    assert "in the background" not in one.stdout and "Already graded" not in one.stdout
    assert _scores(folder)["ada"] == auto - 1
    outputs, book = _outputs(folder), (folder / "gradebook.db").read_bytes()
    alan = course("autograde", a, "--student", "alan", "--course-dir", str(folder))
    assert alan.returncode == 0, alan.stdout + alan.stderr
    assert ("Already graded: alan (submission and graders unchanged since the last run): nothing was graded or "
            "written; --force grades again") in alan.stdout, alan.stdout
    assert "1 student, already graded, unchanged since the last run (not graded again)" in alan.stdout
    assert "1 graded" not in alan.stdout and "in the background" not in alan.stdout
    assert "Not graded again" not in alan.stdout and "unchanged" in " ".join(_row(alan.stdout, "alan"))
    assert _outputs(folder) == outputs and (folder / "gradebook.db").read_bytes() == book
    assert not (folder / PENDING_DIR).exists()
    batch = course("autograde", a, "--course-dir", str(folder))
    assert batch.returncode == 0, batch.stdout + batch.stderr
    assert any(cell.startswith(final) and cell.endswith("*") for cell in _row(batch.stdout, "ada")), batch.stdout
    assert f"{auto:.2f}/100  (autograder)" in _progress(batch.stdout, "ada"), batch.stdout
    assert "(autograder)" not in _progress(batch.stdout, "alan"), batch.stdout
    assert "2 students, all 2 already graded, unchanged since the last run (not graded again)" in batch.stdout
    assert "Not graded again (submission and graders unchanged since the last run: results kept, grades " \
           "written to the gradebook again; --force to regrade): ada, alan" in batch.stdout


def test_cli_after_a_tas_change_results_json_keeps_the_autograders_score_and_says_so(tmp_path):
    """After a TA lowered one of ada's scores in the gradebook and `course feedback` wrote her page with the
    TA's total, does her results.json still give the autograder's score (its tests adding up to it), say in
    extra_data that every score in it is the autograder's only and where the final one is, and stay so
    through another `course autograde` of her unchanged submission?"""
    from nbgrader.api import Gradebook

    from autograder.reporting.results_json import SCORE_NOTE

    a = "transformer-block"
    folder = course_with_students(tmp_path / "course", ("ada",))
    graded = course("autograde", a, "--course-dir", str(folder))
    assert graded.returncode == 0, graded.stdout + graded.stderr
    results = CourseLayout(folder).results_json("ada", a)
    auto = json.loads(results.read_text(encoding="utf-8"))["score"]
    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}", "dl-attention") as gb:
        grade = gb.find_grade("test_rms_norm", a, a, "ada")
        assert grade.auto_score == 5.0
        grade.manual_score = 4.0
        gb.db.commit()
    fed = course("feedback", a, "--course-dir", str(folder))
    assert fed.returncode == 0, fed.stdout + fed.stderr
    assert f"The autograder gave {auto:g} points; your instructor changed that to {auto - 1:g}" in \
        _page_text(folder, "ada")

    def autograders_only(step: str) -> None:
        doc = json.loads(results.read_text(encoding="utf-8"))
        assert doc["score"] == auto == pytest.approx(sum(t["score"] for t in doc["tests"])), step
        assert doc["extra_data"]["raw_score"] == auto and doc["extra_data"]["score_note"] == SCORE_NOTE, step

    autograders_only("after course feedback")
    again = course("autograde", a, "--student", "ada", "--wait", "--course-dir", str(folder))
    assert again.returncode == 0, again.stdout + again.stderr
    assert any(cell.startswith(f"{auto - 1:g}/") and cell.endswith("*") for cell in _row(again.stdout, "ada"))
    autograders_only("after course autograde")


def _page_text(folder: Path, sid: str) -> str:
    from autograder.reporting.feedback import shows_review

    page = CourseLayout(folder).feedback(sid, "transformer-block") / "transformer-block.html"
    return ("REVIEWED " if shows_review(page) else "") + page.read_text(encoding="utf-8")


@pytest.mark.parametrize("run", ["student", "batch"])
def test_cli_a_page_is_written_again_when_the_ta_takes_a_change_back(tmp_path, run):
    """When a TA overrides a score and later takes the override back (manual score None again), does the next
    `course autograde` (one student, or the class) write the student's page again without the review, so it
    shows the autograder's total as the summary and the gradebook do, not the override?"""
    from nbgrader.api import Gradebook

    a = "transformer-block"
    args = ("--student", "ada") if run == "student" else ()
    folder = course_with_students(tmp_path / "course", ("ada", "alan"))
    first = course("autograde", a, "--course-dir", str(folder))
    assert first.returncode == 0, first.stdout + first.stderr
    plain = _page_text(folder, "ada")
    assert not plain.startswith("REVIEWED ")

    def override(score: float | None) -> None:
        with Gradebook(f"sqlite:///{folder / 'gradebook.db'}", "dl-attention") as gb:
            gb.find_grade("test_rms_norm", a, a, "ada").manual_score = score
            gb.db.commit()

    override(4.0)
    wait = ("--wait",) if args else ()            # a whole class always waits
    changed = course("autograde", a, *args, *wait, "--course-dir", str(folder))
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert _page_text(folder, "ada").startswith("REVIEWED ") and "your instructor changed that" in \
        _page_text(folder, "ada")
    override(None)
    back = course("autograde", a, *args, *wait, "--course-dir", str(folder))
    assert back.returncode == 0, back.stdout + back.stderr
    assert "*" not in " ".join(_row(back.stdout, "ada")), back.stdout
    assert _page_text(folder, "ada") == plain


def test_cli_course_dir_may_come_before_the_command(course_copy, tmp_path):
    """Does `course --course-dir DIR autograde ...` (the option before the command) find the course, as
    `course autograde ... --course-dir DIR` does?"""
    proc = course("--course-dir", str(course_copy), "autograde", "transformer-block", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no submissions found under submitted/<student>/transformer-block/" in proc.stdout


def test_cli_a_class_graded_on_points_the_released_notebook_does_not_show_is_warned(tmp_path):
    """When course.yml's points were changed after `course release`, does a class's `course autograde`
    warn that the released notebook shows students other points, naming the notebook, the problem
    and both numbers, and grade on course.yml's?"""
    folder = course_with_students(tmp_path / "course", ("ada",))
    yml = folder / "course.yml"
    text = yml.read_text()
    assert "layer_norm: {points: 12}" in text and "rms_norm: {points: 5}" in text
    yml.write_text(text.replace("layer_norm: {points: 12}", "layer_norm: {points: 10}")
                   .replace("rms_norm: {points: 5}", "rms_norm: {points: 7}"))
    proc = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = [ln for ln in proc.stdout.splitlines() if ln.startswith("WARNING: ") and "course.yml gives" in ln]
    release = CourseLayout(Path()).release("transformer-block")
    assert any(ln.startswith(f"WARNING: {release}/") and ": layer_norm: grade cell " in ln
               and "gives 12 points, course.yml gives 10 (run `course release`); graded on course.yml's points"
               in ln for ln in warnings), proc.stdout
    assert any(": rms_norm: " in ln and "course.yml gives 7" in ln for ln in warnings), proc.stdout
    released = course("release", "transformer-block", "--course-dir", str(folder))
    assert released.returncode == 0, released.stdout + released.stderr
    again = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert again.returncode == 0 and "course.yml gives" not in again.stdout, again.stdout + again.stderr


def test_cli_autograde_of_one_student_prints_its_report_on_stdout_and_notices_on_stderr(tmp_path):
    """While another process holds the gradebook's lock, does `course autograde --student` say that it waits on
    stderr, and is its stdout its report alone: the student's line, the summary and the closing lines naming
    results.json, the pages and the commit, with no notice, progress or server line among them?"""
    import fcntl
    import os
    import threading

    from autograder.reporting.gradebook import lock_file

    a = "transformer-block"
    folder = course_with_students(tmp_path / "course", ("ada",))
    held = os.open(lock_file(load_course(folder)), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(held, fcntl.LOCK_EX)
    client = subprocess.Popen([sys.executable, "-m", "autograder.cli", "autograde", a, "--student", "ada",
                               "--course-dir", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert client.stderr is not None and client.stdout is not None
    err: list[str] = []
    waiting = threading.Event()

    def read_stderr() -> None:
        for line in client.stderr:
            err.append(line)
            if line.startswith("waiting for the gradebook: "):
                waiting.set()
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        waited = waiting.wait(timeout=240)
    finally:
        os.close(held)                       # releases the lock
    out = client.stdout.read()
    assert client.wait(timeout=300) == 0, out + "".join(err)
    reader.join(timeout=30)
    assert waited, "".join(err)
    lines = out.splitlines()
    assert lines[0].startswith("graded    ada "), out
    assert lines[1] == "" and any(line.startswith("results.json: ") for line in lines), out
    assert lines[-1].startswith("gradebook: ada's grades are being committed in the background"), out
    for notice in ("waiting for the gradebook", "progress: ", "course serve", "grading on the warm worker"):
        assert notice not in out, out


def test_cli_a_stamp_ahead_of_the_clock_is_warned_of_once_and_graded_as_usual(tmp_path):
    """With the due date tomorrow and one notebook submitted by three students, stamped 3 days ahead of this
    machine's clock, 2 minutes ahead (within the tolerance for clock skew) and yesterday: does `course autograde`
    warn once, naming the first student, their timestamp.txt and its time, and grade all three as usual (the
    late penalty judged from each stamp); and does a process that grades through a call per notebook
    (`nbgrader autograde`, sharing `warned`) say it once, not once per call?"""
    import datetime as dt

    from autograder import api
    from autograder.grading.lateness import TIMESTAMP_FILE

    folder = course_with_students(tmp_path / "course", ("ada",))
    layout = CourseLayout(folder)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    config = layout.config.read_text()
    assert "    due: 2026-11-16T23:59:00+00:00\n" in config
    layout.config.write_text(config.replace("2026-11-16T23:59:00+00:00", (now + dt.timedelta(days=1)).isoformat()))
    stamps = {"ahead": now + dt.timedelta(days=3), "skew": now + dt.timedelta(minutes=2),
              "past": now - dt.timedelta(days=1)}
    for sid, when in stamps.items():
        shutil.copytree(layout.submission("ada", "transformer-block"), layout.submission(sid, "transformer-block"))
        stamp = layout.submission(sid, "transformer-block") / TIMESTAMP_FILE
        stamp.write_text(f"{when:%Y-%m-%d %H:%M:%S}.000000 UTC")
    shutil.rmtree(layout.submitted_dir / "ada")
    (folder / "roster.csv").write_text("id\n" + "\n".join(stamps) + "\n")
    proc = course("autograde", "transformer-block", "--course-dir", str(folder))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stamp = layout.relative(layout.submission("ahead", "transformer-block") / TIMESTAMP_FILE)
    ahead = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "ahead of this machine's clock" in ln]
    assert len(ahead) == 1 and ahead[0].startswith(
        f"WARNING: ahead: {stamp} says {stamps['ahead']:%Y-%m-%d %H:%M:%S} UTC, 2 days 23 hours ahead of "), ahead
    assert "(a late penalty of 20 points)" in ahead[0]
    results = {sid: json.loads(layout.results_json(sid, "transformer-block").read_text()) for sid in stamps}
    assert {sid: (r["extra_data"]["raw_score"], r["extra_data"]["late_penalty"], r["score"])
            for sid, r in results.items()} == {"ahead": (100, 20, 80), "skew": (100, 0, 100), "past": (100, 0, 100)}
    for sid, when in stamps.items():
        assert dt.datetime.fromisoformat(results[sid]["extra_data"]["submitted_at"]) == when, sid
        assert layout.feedback(sid, "transformer-block").is_dir(), sid
    warned: set[str] = set()
    for call in range(2):               # as nbgrader autograde's call for each notebook of the submission
        lines: list[str] = []
        api.autograde(folder, "transformer-block", student="ahead", log=lines.append, warned=warned)
        said = [ln for ln in lines if "ahead of this machine's clock" in ln]
        assert said == ([ahead[0]] if call == 0 else []), lines
