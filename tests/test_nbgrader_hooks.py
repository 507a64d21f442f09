"""nbgrader_config.py routes nbgrader through the course: folders, course id and exchange from course.yml,
results.json kept out of feedback/, autograde/generate_feedback/export through this engine."""
from __future__ import annotations

from traitlets.config.loader import PyFileConfigLoader

from autograder.config import load_course
from autograder.layout import NBGRADER_CONFIG, CourseLayout
from autograder.nbgrader_hooks import CourseAutograde, CourseCsvExport, CourseFeedbackExporter, config_problems

# nbgrader's exchange keeps released pages in <exchange>/<course id>/feedback/: not a course step folder
EXCHANGE_FEEDBACK = "feedback"


def loaded(course_dir):
    return PyFileConfigLoader(NBGRADER_CONFIG, path=str(course_dir)).load_config()


def test_the_course_config_sets_nbgrader_from_course_yml(course_copy):
    """Does the shipped nbgrader_config.py give nbgrader the course's root, gradebook, course id and
    exchange (resolved), ignore results.json, and route autograde, feedback and export through us?"""
    config = load_course(course_copy).layout.config
    config.write_text(config.read_text() + "exchange: ../exchange\n")
    course = load_course(course_copy)
    cfg = loaded(course_copy)
    assert cfg.CourseDirectory.root == str(course.root)
    assert cfg.CourseDirectory.db_url == course.gradebook_url
    assert cfg.CourseDirectory.course_id == "dl-attention"
    assert cfg.Exchange.root == str(course_copy.resolve().parent / "exchange")
    assert "results.json" in cfg.CourseDirectory.ignore and ".ipynb_checkpoints" in cfg.CourseDirectory.ignore
    assert cfg.Autograde.autograde_preprocessors == [CourseAutograde]
    assert cfg.GenerateFeedback.exporter_class is CourseFeedbackExporter
    assert cfg.ExportApp.plugin_class is CourseCsvExport
    assert config_problems(course) == []


def test_a_config_that_bypasses_the_engine_is_reported(course_copy):
    """Is an nbgrader_config.py that only sets the folders, or none at all, reported by validate's check?"""
    course = load_course(course_copy)
    path = course_copy / NBGRADER_CONFIG
    path.write_text(f"c = get_config()\nc.CourseDirectory.root = {str(course_copy)!r}\n")
    problems = config_problems(course)
    assert len(problems) == 2
    assert problems[0].startswith("nbgrader_config.py: `nbgrader autograde` (and formgrader's Autograde button) "
                                  "would run nbgrader's own grading")
    assert "`nbgrader generate_feedback` would overwrite the feedback pages" in problems[1]
    path.unlink()
    assert config_problems(course)[0].startswith("nbgrader_config.py: missing")


def _export(course_dir, *options: str, to: str = "grades.csv"):
    import os
    import subprocess
    import sys
    from pathlib import Path

    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    return subprocess.run([str(bin_dir / "nbgrader"), "export", "--to", to, *options], cwd=course_dir, env=env,
                          capture_output=True, text=True, timeout=300)


def test_export_of_an_empty_gradebook_keeps_nbgraders_columns(course_copy):
    """Does `nbgrader export` through the course's plugin write nbgrader's header plus the extension
    columns when there is nothing to list yet, and put the roster in the gradebook?"""
    import csv

    from nbgrader.api import Gradebook

    (course_copy / "roster.csv").write_text("id,first_name,last_name,email\nada,Ada,Lovelace,ada@example.edu\n")
    done = _export(course_copy)
    assert done.returncode == 0, done.stderr
    with open(course_copy / "grades.csv", newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    assert header[:4] == ["assignment", "duedate", "timestamp", "student_id"]
    assert header[-2:] == ["extension", "extended_duedate"]
    with Gradebook(load_course(course_copy).gradebook_url) as gb:
        assert gb.find_student("ada").email == "ada@example.edu"


def test_a_broken_course_yml_keeps_nbgrader_routed_through_the_engine(tmp_path):
    """When course.yml cannot be read (a typo'd key), does nbgrader_config.py still route autograde,
    generate_feedback, export and generate_assignment through the engine, and do those commands stop at
    once with course.yml's error in one line (exit 2), instead of nbgrader going on with its own defaults
    (its own feedback page over ours, results.json copied into feedback/) or, with --force, deleting every
    autograded/ folder before failing each student with a traceback?"""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ada",))
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    graded = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block", "--course-dir",
                             str(folder)], capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    config = folder / "course.yml"
    config.write_text(config.read_text().replace("late_policy:", "late_polcy:"))

    cfg = loaded(folder)
    assert cfg.Autograde.autograde_preprocessors == [CourseAutograde]
    assert cfg.GenerateFeedback.exporter_class is CourseFeedbackExporter
    assert cfg.ExportApp.plugin_class is CourseCsvExport
    assert "results.json" in cfg.CourseDirectory.ignore
    error = "nbgrader_config.py: course.yml: assignments[0].late_polcy: unknown key"
    layout = CourseLayout(folder)
    kept = {p: p.read_bytes() for p in [*layout.autograded_dir.rglob("*"), *layout.feedback_dir.rglob("*")]
            if p.is_file()}
    assert layout.results_json("ada", "transformer-block") in kept
    for args in (["generate_feedback", "transformer-block", "--student", "ada", "--force"],
                 ["export", "--to", "grades.csv"], ["autograde", "transformer-block", "--force"],
                 ["generate_assignment", "transformer-block", "--force"]):
        proc = subprocess.run([str(bin_dir / "nbgrader"), *args], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines()[0].startswith(error) and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert {p: p.read_bytes() for p in kept if p.is_file()} == kept
    feedback = layout.feedback_dir
    assert not list(feedback.rglob("results.json"))
    assert not [p for p in feedback.rglob("*.html") if "nbgrader" in p.read_text().lower()[:20000]]
    assert not (folder / "grades.csv").exists()


def test_generate_feedback_keeps_the_page_of_a_submission_that_is_not_notebook_json(tmp_path):
    """For ken, whose notebook is not valid JSON (its autograded copy is the file as submitted), does
    `nbgrader generate_feedback --force` (formgrader's button) exit 0 and write the page `course feedback`
    writes, rather than fail on reading the notebook and delete his feedback folder?"""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from autograder.api import student_page
    from conftest import ROOT, course_with_students

    folder = course_with_students(tmp_path / "course", ("ken",))
    graded = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block", "--course-dir",
                             str(folder)], capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    layout = CourseLayout(folder)
    page = layout.feedback("ken", "transformer-block") / "transformer-block.html"
    page.unlink()
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    proc = subprocess.run([str(bin_dir / "nbgrader"), "generate_feedback", "transformer-block", "--student", "ken",
                           "--force"], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    course = load_course(folder)
    assert page.read_text(encoding="utf-8") == student_page(course, course.assignment("transformer-block"), "ken")
    assert "not valid notebook JSON" in page.read_text(encoding="utf-8")
    examples = CourseLayout(ROOT / "examples")
    assert (layout.submission("ken", "transformer-block") / "transformer-block.ipynb").read_bytes() == \
        (examples.submission("ken", "transformer-block") / "transformer-block.ipynb").read_bytes()


def test_formgrader_opens_the_placeholder_of_a_submission_that_is_not_notebook_json(tmp_path):
    """For ken, whose notebook is not valid JSON: is his autograded copy a notebook nbformat reads and
    validates, saying in its first cell why his file could not be read, with a score box for each grade
    cell and a comment box for each answer the gradebook holds for him (nbgrader's GetGrades finds every
    one, and formgrader's page renders them), while his submitted file is left as it was?"""
    import subprocess
    import sys

    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import GetGrades
    from reporting.test_feedback_formgrader import formgrader_html

    from conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ken",))
    layout = CourseLayout(folder)
    submitted = (layout.submission("ken", "transformer-block") / "transformer-block.ipynb").read_bytes()
    for step in ("release", "autograde"):      # the release puts the answer cells in the gradebook
        done = subprocess.run([sys.executable, "-m", "autograder.cli", step, "transformer-block", "--course-dir",
                               str(folder)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (layout.submission("ken", "transformer-block") / "transformer-block.ipynb").read_bytes() == submitted
    copy = layout.autograded("ken", "transformer-block") / "transformer-block.ipynb"
    nb = nbformat.read(copy, as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].cell_type == "markdown"
    assert ("course autograde: the submitted file `transformer-block.ipynb` could not be read as a notebook**: "
            "transformer-block.ipynb is not valid notebook JSON (") in nb.cells[0].source
    marked = {kind: {c.metadata.nbgrader.grade_id for c in nb.cells if c.metadata.get("nbgrader", {}).get(kind)}
              for kind in ("grade", "solution")}
    url = load_course(folder).gradebook_url
    with Gradebook(url) as gb:
        snb = gb.find_submission_notebook("transformer-block", "transformer-block", "ken")
        assert marked["grade"] == {g.name for g in snb.grades} and len(marked["grade"]) == 9
        assert marked["solution"] == {c.name for c in snb.comments} and len(marked["solution"]) == 9
        assert all(g.needs_manual_grade for g in snb.grades)      # formgrader lists it as needing a hand
    assert all(not c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    resources = {"nbgrader": {"notebook": "transformer-block", "assignment": "transformer-block", "student": "ken",
                              "db_url": url}}
    got, _ = GetGrades().preprocess(nb, resources)
    assert {c.metadata.nbgrader.grade_id: c.metadata.nbgrader["score"] for c in got.cells
            if c.metadata.get("nbgrader", {}).get("grade")} == dict.fromkeys(marked["grade"], 0.0)
    html = formgrader_html(copy)
    assert all(f'id="{g}"' in html for g in marked["grade"])
    assert all(f'id="{s}-comment"' in html for s in marked["solution"])
    assert "could not be read as a notebook" in html


def test_nbgrader_autograde_of_a_submission_that_is_not_notebook_json_grades_it_as_course_autograde_does(tmp_path):
    """For ken, whose notebook is not valid JSON, does `nbgrader autograde --force --student ken` (formgrader's
    Autograde button) exit 0 with one warning line naming his file and no traceback, and leave what `course
    autograde` leaves: his placeholder notebook and results.json (graded 0, with the reason), his grade cells
    flagged for grading by hand, and a page `course feedback` writes again?"""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import nbformat
    from nbgrader.api import Gradebook

    from autograder import api
    from conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ken",))
    layout = CourseLayout(folder)
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "release", "transformer-block", "--course-dir",
                           str(folder)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    proc = subprocess.run([str(bin_dir / "nbgrader"), "autograde", "transformer-block", "--force", "--student", "ken"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if "WARNING" in ln and "Removing existing" not in ln] == [
        "[AutogradeApp | WARNING] submitted/ken/transformer-block/transformer-block.ipynb: not a notebook nbformat "
        "can read (Notebook does not appear to be JSON: '{\"nbformat\": 4, \"cells\": ['); graded as `course "
        "autograde` grades it"], proc.stderr
    course = load_course(folder)
    a = course.assignment("transformer-block")
    result = api.graded_result(course, a, "ken")
    assert result is not None and result.score == 0 and result.unreadable_notebooks == ("transformer-block.ipynb",)
    copy = nbformat.read(layout.autograded("ken", "transformer-block") / "transformer-block.ipynb", as_version=4)
    assert "could not be read as a notebook" in copy.cells[0].source
    with Gradebook(course.gradebook_url) as gb:
        grades = gb.find_submission_notebook("transformer-block", "transformer-block", "ken").grades
        assert len(grades) == 9 and all(g.needs_manual_grade and g.auto_score == 0 for g in grades)
    lines: list[str] = []
    api.feedback(folder, "transformer-block", student="ken", log=lines.append)
    page = layout.feedback("ken", "transformer-block") / "transformer-block.html"
    assert "not valid notebook JSON" in page.read_text(encoding="utf-8")


def test_nbgrader_autograde_skips_a_folder_no_student_id_can_name_as_course_autograde_does(tmp_path):
    """With ken's submission copied into submitted/a b/ (no roster id holds a space), and into folders named with
    a newline and a terminal escape, does `nbgrader autograde` exit 0 having graded ken, say of each the one line
    `course autograde` says (control characters written out), with no traceback, and leave no gradebook student
    nor autograded/ folder of theirs?"""
    import shutil
    import subprocess
    import sys

    from nbgrader.api import Gradebook

    from conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ken",))
    layout = CourseLayout(folder)
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "release", "transformer-block", "--course-dir",
                           str(folder)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("a b", "a\nb", "a\x1b[31mRED"):
        shutil.copytree(layout.submission("ken", "transformer-block"), layout.submission(name, "transformer-block"))
    warnings = _nbgrader(folder, "autograde", "transformer-block")
    assert "[AutogradeApp | WARNING] not graded: submitted/a b: the folder's name holds a space, which no roster " \
           "id may hold, so nothing in it was graded; rename it to the student's id" in warnings, warnings
    assert not [w for w in warnings if "a b" in w and "not graded" not in w], warnings
    # a newline, which nbgrader's own pattern cannot read back, and a terminal escape: named, written out
    assert sorted(w.split(": ")[1] for w in warnings if "WARNING] not graded" in w) == [
        "submitted/a b", "submitted/a\\x0ab", "submitted/a\\x1b[31mRED"], warnings
    assert sorted(p.name for p in layout.autograded_dir.iterdir()) == ["ken"]
    assert layout.results_json("ken", "transformer-block").is_file()
    with Gradebook(load_course(folder).gradebook_url) as gb:
        assert [s.id for s in gb.students] == ["ken"]


def test_nbgrader_generate_assignment_releases_as_course_release_does(course_copy):
    """With silu changed from 5 to 6 points in course.yml, does `nbgrader generate_assignment --force` (formgrader's
    Generate button) release as `course release` does: 6 points in the released grade cell, the intro table and
    the gradebook's maximum? And with a marker typo in the source, does it fail in one error line, exit 1, no
    traceback, the previous release kept?"""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from nbgrader.api import Gradebook

    layout = CourseLayout(course_copy)
    layout.config.write_text(layout.config.read_text().replace("silu: {points: 5}", "silu: {points: 6}"))
    released = layout.release("transformer-block") / "transformer-block.ipynb"
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))

    def generate():
        return subprocess.run([str(bin_dir / "nbgrader"), "generate_assignment", "transformer-block", "--force"],
                              cwd=course_copy, env=env, capture_output=True, text=True, timeout=600)

    proc = generate()
    assert proc.returncode == 0, proc.stderr
    cells = json.loads(released.read_text(encoding="utf-8"))["cells"]
    silu = [c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_silu"]
    assert [c["metadata"]["nbgrader"]["points"] for c in silu] == [6]
    assert any("| `silu` | 6 |" in "".join(c["source"]) for c in cells)
    with Gradebook(load_course(course_copy).gradebook_url) as gb:
        assert gb.find_assignment("transformer-block").max_score == 101
        assert gb.find_grade_cell("test_silu", "transformer-block", "transformer-block").max_score == 6

    source = layout.source("transformer-block") / "transformer-block.ipynb"
    source.write_text(source.read_text(encoding="utf-8").replace("### END SOLUTION", "### END SOLUTON", 1),
                      encoding="utf-8")
    before = released.read_bytes()
    proc = generate()
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if "ERROR" in ln]
    assert len(errors) == 1 and "'### END SOLUTON' (for END SOLUTION)" in errors[0], proc.stderr
    assert released.read_bytes() == before


def _warns(folder, warning: str | None) -> None:
    """That `nbgrader export` and `course feedback` on `folder` succeed with `warning` as their one
    warning line, or with none."""
    from autograder import api

    done = _export(folder)
    assert done.returncode == 0, done.stderr
    expected = [] if warning is None else [f"[ExportApp | WARNING] {warning}"]
    assert [ln for ln in done.stderr.splitlines() if "WARNING" in ln] == expected, done.stderr
    lines: list[str] = []
    api.feedback(folder, "transformer-block", log=lines.append)
    assert [ln for ln in lines if ln.startswith("WARNING")] == ([] if warning is None else [f"WARNING: {warning}"])


def test_export_and_feedback_warn_when_course_yml_changed_the_due_date_since_grading(tmp_path):
    """With an extension for alan (late by 10 hours) added to course.yml after his penalty was taken, do
    `nbgrader export` and `course feedback` say once that the penalty is from before and to run `course
    autograde`, and, once it has, no longer (the penalty gone)? And with that extension changed in course.yml
    afterwards (the gradebook holding the one graded with), is that still their one line, with no other
    claiming that the penalty follows course.yml already?"""
    import subprocess
    import sys

    from autograder import api
    from conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("alan", "ada"))
    autograde = [sys.executable, "-m", "autograder.cli", "autograde", "transformer-block", "--course-dir", str(folder)]
    graded = subprocess.run(autograde, capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    config = folder / "course.yml"
    config.write_text(config.read_text().replace("    late_policy:",
                                                 "    extensions: {alan: {days: 1}}\n    late_policy:", 1))
    warning = ("transformer-block: course.yml's due date or extensions changed since alan was graded; the late "
               "penalty in the gradebook, the export and the feedback pages is from before until `course autograde "
               "transformer-block` grades again")
    _warns(folder, warning)
    graded = subprocess.run(autograde, capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    _warns(folder, None)
    assert api.graded_result(load_course(folder), load_course(folder).assignment("transformer-block"),
                             "alan").late_penalty == 0
    config.write_text(config.read_text().replace("extensions: {alan: {days: 1}}", "extensions: {alan: {hours: 2}}"))
    _warns(folder, warning)


def test_export_and_feedback_warn_of_grades_taken_while_a_grader_failed(tmp_path):
    """With a grader that raises for every submission (GRADER ERROR in `course autograde`), do `nbgrader
    export` and `course feedback` say afterwards whose grades count 0 for it, and, once the grader is fixed
    and `course autograde --force` has run, no longer?"""
    import subprocess
    import sys

    from conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ada",))
    grader = CourseLayout(folder).graders("transformer_block") / "test_silu.py"
    fixed = grader.read_text()
    broken = 'def test_silu_is_checked(student):\n    """Broken on purpose."""\n    raise RuntimeError("a bug")\n'
    grader.write_text(f"{fixed}\n\n{broken}")
    autograde = [sys.executable, "-m", "autograder.cli", "autograde", "transformer-block", "--course-dir", str(folder)]
    graded = subprocess.run(autograde, capture_output=True, text=True, timeout=600)
    assert graded.returncode == 1 and "GRADER ERROR" in graded.stdout + graded.stderr, graded.stdout + graded.stderr
    warning = ("transformer-block: the grade of ada counts 0 for checks whose grader code failed (GRADER ERROR); "
               "the gradebook, the export and the feedback pages show this until the graders are fixed and `course "
               "autograde transformer-block --force` grades again (or a TA grades by hand in formgrader)")
    _warns(folder, warning)
    grader.write_text(fixed)
    graded = subprocess.run([*autograde, "--force"], capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    _warns(folder, None)


def _graded_with_an_exchange(tmp_path, students: tuple[str, ...], through_exchange: tuple[str, ...],
                             untimed: tuple[str, ...] = (), capitals: tuple[str, ...] = ()):
    """A course of `students` with an exchange, graded by `course autograde`; those `through_exchange`
    have the submission_secret.txt that `nbgrader submit` leaves, those `untimed` no timestamp.txt, those
    `capitals` their notebook named `transformer-block.IPYNB`."""
    import subprocess
    import sys

    from conftest import course_with_students

    folder = course_with_students(tmp_path / "course", students)
    layout = CourseLayout(folder)
    for sid in through_exchange:
        (layout.submission(sid, "transformer-block") / "submission_secret.txt").write_text(f"secret-{sid}")
    for sid in untimed:
        (layout.submission(sid, "transformer-block") / "timestamp.txt").unlink()
    for sid in capitals:
        notebook = layout.submission(sid, "transformer-block") / "transformer-block.ipynb"
        notebook.rename(notebook.with_suffix(".IPYNB"))
    config = folder / "course.yml"
    config.write_text(config.read_text() + "exchange: ../exchange\n")
    (tmp_path / "exchange").mkdir()
    (tmp_path / "exchange").chmod(0o777)              # nbgrader's exchange is writable by all
    for args in (("release",), ("autograde",)):
        done = subprocess.run([sys.executable, "-m", "autograder.cli", *args, "transformer-block", "--course-dir",
                               str(folder)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    return folder


def _nbgrader(folder, *args: str):
    """`nbgrader <args>` (the venv's) in the course `folder`; its WARNING lines, once it succeeded."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    proc = subprocess.run([str(bin_dir / "nbgrader"), *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [ln for ln in proc.stderr.splitlines() if "WARNING" in ln]


def _release_feedback(folder):
    return _nbgrader(folder, "release_feedback", "transformer-block")


def test_release_feedback_leaves_out_a_submission_that_did_not_come_through_the_exchange(tmp_path):
    """When one student's notebook was put in submitted/ by hand (no submission_secret.txt), does `nbgrader
    release_feedback` release everyone else's page and name that student's folder in a warning, instead of
    stopping at them with a FileNotFoundError?"""
    folder = _graded_with_an_exchange(tmp_path, ("ada", "alan", "grace"), ("ada", "grace"))
    layout = CourseLayout(folder)
    warnings = _release_feedback(folder)
    alan = layout.relative(layout.feedback("alan", "transformer-block"))
    assert len(warnings) == 1 and f"{alan}: no submission_secret.txt" in warnings[0]
    released = sorted((tmp_path / "exchange" / "dl-attention" / EXCHANGE_FEEDBACK).iterdir())
    assert len(released) == 2 and all(p.suffix == ".html" for p in released)


def test_release_feedback_of_a_misspelt_assignment_or_student_says_nothing_was_found(tmp_path):
    """When `nbgrader release_feedback` is given an assignment or a student with no feedback page, does it still
    exit 0, release nothing, and warn naming the folder it looked in and the assignments or students that have
    pages, rather than saying nothing?"""
    folder = _graded_with_an_exchange(tmp_path, ("ada", "alan"), ("ada", "alan"))
    layout = CourseLayout(folder)
    released = tmp_path / "exchange" / "dl-attention" / EXCHANGE_FEEDBACK
    misspelt, nobody = (layout.relative(layout.feedback(*ids)) for ids in (("*", "transformer-blok"),
                                                                          ("katt", "transformer-block")))
    assert _nbgrader(folder, "release_feedback", "transformer-blok") == [
        f"[ReleaseFeedbackApp | WARNING] no feedback page under {misspelt}/, so nothing was released; the "
        f"assignments with feedback pages: transformer-block"]
    assert _nbgrader(folder, "release_feedback", "transformer-block", "--student=katt") == [
        f"[ReleaseFeedbackApp | WARNING] no feedback page under {nobody}/, so nothing was released; the students "
        f"with one for transformer-block: ada and alan"]
    assert not released.exists() or not any(released.iterdir())
    assert _nbgrader(folder, "release_feedback", "transformer-block", "--student=ada") == []
    assert len(list(released.iterdir())) == 1


def test_release_feedback_warns_of_a_page_that_fetch_feedback_will_not_find(tmp_path):
    """When ada submitted her notebook as transformer-block.IPYNB, does `nbgrader release_feedback` still
    release every page, and warn, naming her notebook and her page, that nbgrader's fetch_feedback (lower-case
    .ipynb only) will not hand it to her, with no such warning for alan?"""
    folder = _graded_with_an_exchange(tmp_path, ("ada", "alan"), ("ada", "alan"), capitals=("ada",))
    layout = CourseLayout(folder)
    assert (layout.feedback("ada", "transformer-block") / "transformer-block.html").is_file()
    notebook = layout.relative(layout.submission("ada", "transformer-block") / "transformer-block.IPYNB")
    page = layout.relative(layout.feedback("ada", "transformer-block") / "transformer-block.html")
    warning = (f"[ReleaseFeedbackApp | WARNING] {notebook}: nbgrader fetch_feedback finds lower-case .ipynb only, "
               f"so ada will not fetch {page}; hand that page over another way")
    assert _release_feedback(folder) == [warning]
    released = sorted((tmp_path / "exchange" / "dl-attention" / EXCHANGE_FEEDBACK).iterdir())
    assert len(released) == 2


def test_a_submission_with_its_secret_and_no_timestamp_gets_its_feedback_released(tmp_path):
    """When ada's submission holds nbgrader's submission_secret.txt but no timestamp.txt, and the secret
    reached submitted/ only after her notebook was graded, does the next `course autograde` copy it into
    autograded/ (her notebook unchanged), do nbgrader's generate_feedback and release_feedback then put her
    page where `nbgrader fetch_feedback` looks (the md5 of the secret and the notebook's name), beside
    alan's, while grace, whose secret was emptied, is left out with one warning naming her folder?"""
    import hashlib
    import shutil
    import subprocess
    import sys

    folder = _graded_with_an_exchange(tmp_path, ("ada", "alan", "grace"), ("alan", "grace"), untimed=("ada",))
    layout = CourseLayout(folder)
    (layout.submission("ada", "transformer-block") / "submission_secret.txt").write_text("secret-ada")
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block", "--course-dir",
                           str(folder)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "unchanged" in done.stdout, done.stdout + done.stderr
    copied = layout.autograded("ada", "transformer-block") / "submission_secret.txt"
    assert copied.read_text() == "secret-ada"
    shutil.rmtree(layout.feedback_dir)              # written by nbgrader afresh, from autograded/
    assert _nbgrader(folder, "generate_feedback", "transformer-block") == []
    feedback = layout.feedback("ada", "transformer-block")
    assert sorted(p.name for p in feedback.iterdir()) == ["submission_secret.txt", "transformer-block.html"]
    grace = layout.feedback("grace", "transformer-block")
    (grace / "submission_secret.txt").write_text("")
    warning = (f"[ReleaseFeedbackApp | WARNING] {layout.relative(grace)}: submission_secret.txt is empty, so its "
               f"feedback cannot be released; left out")
    assert _release_feedback(folder) == [warning]
    exchange = tmp_path / "exchange" / "dl-attention" / EXCHANGE_FEEDBACK
    expected = {hashlib.md5(f"secret-{sid}transformer-block".encode()).hexdigest() + ".html" for sid in ("ada", "alan")}
    assert {p.name for p in exchange.iterdir()} == expected
    ada = hashlib.md5(b"secret-adatransformer-block").hexdigest() + ".html"
    assert (exchange / ada).read_bytes() == (feedback / "transformer-block.html").read_bytes()


def test_release_feedback_writes_afresh_a_page_older_than_the_gradebook(tmp_path):
    """When a TA overrides a score and comments in formgrader after `course feedback`, and runs `nbgrader
    release_feedback` without `course feedback` again, is the released page the one with the override and
    comment (written afresh, with one warning line naming the student's page), and the next release silent?"""
    from nbgrader.api import Gradebook

    from autograder import api

    folder = _graded_with_an_exchange(tmp_path, ("ada", "alan"), ("ada", "alan"))
    api.feedback(folder, "transformer-block")
    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}", "dl-attention") as gb:
        gb.find_grade("test_rms_norm", "transformer-block", "transformer-block", "ada").manual_score = 4.0
        gb.find_comment("rms_norm_solution", "transformer-block", "transformer-block", "ada").manual_comment = \
            "Divide by the root of the mean of squares."
        gb.db.commit()
    page = CourseLayout(folder).feedback("ada", "transformer-block") / "transformer-block.html"
    assert "Divide by the root" not in page.read_text(encoding="utf-8")
    warnings = _release_feedback(folder)
    assert len(warnings) == 1 and warnings[0].endswith(
        "ada: feedback/ada/transformer-block/transformer-block.html was not the page of results.json and the "
        "gradebook (changed since `course feedback`): written afresh before release"), warnings
    exchange = tmp_path / "exchange" / "dl-attention" / EXCHANGE_FEEDBACK
    released = {p.read_text(encoding="utf-8") for p in exchange.iterdir()}
    ada = [text for text in released if "Divide by the root of the mean of squares." in text]
    assert len(released) == 2 and len(ada) == 1 and "Your instructor set the score to 4 of 5 points" in ada[0]
    assert _release_feedback(folder) == []


def test_export_warns_of_an_assignment_the_gradebook_has_and_course_yml_does_not(course_copy):
    """When the gradebook still holds an assignment removed from course.yml, does the export say so,
    naming it and how to take it out, while still exporting its rows?"""
    import csv

    from nbgrader.api import Gradebook

    (course_copy / "roster.csv").write_text("id\nada\n")
    with Gradebook(load_course(course_copy).gradebook_url) as gb:
        gb.add_assignment("old-homework")
    done = _export(course_copy)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("old-homework: in the gradebook but not in course.yml; its rows are exported as the gradebook holds them "
            "(`nbgrader db assignment remove old-homework` takes it out of the gradebook)") in done.stderr
    with open(course_copy / "grades.csv", newline="", encoding="utf-8") as fh:
        assert [(r["assignment"], r["student_id"]) for r in csv.DictReader(fh)] == [("old-homework", "ada")]


def test_export_keeps_formulas_out_of_names(course_copy):
    """Does `nbgrader export` write names a spreadsheet would run as formulas as plain text, while
    student ids and emails (rows are matched on them) stay exactly as the roster has them, with one
    warning line naming the student whose email a spreadsheet would run?"""
    import csv

    from nbgrader.api import Gradebook

    (course_copy / "roster.csv").write_text(
        'id,first_name,last_name,email\n'
        'eve,=HYPERLINK("http://x"),+Smith,@eve\n'
        'ann,Ann,-Lee,ann@example.edu\n', encoding="utf-8")
    with Gradebook(load_course(course_copy).gradebook_url) as gb:
        gb.add_assignment("transformer-block")
    done = _export(course_copy)
    assert done.returncode == 0, done.stderr[-2000:]
    with open(course_copy / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = {row["student_id"]: row for row in csv.DictReader(fh)}
    assert (rows["eve"]["first_name"], rows["eve"]["last_name"], rows["eve"]["email"]) == (
        "'=HYPERLINK(\"http://x\")", "'+Smith", "@eve")
    warned = [ln for ln in done.stderr.splitlines() if "a carriage return" in ln]
    assert len(warned) == 1 and "email: eve starts with =, +, -, @" in warned[0], done.stderr
    assert rows["ann"]["last_name"] == "'-Lee" and rows["ann"]["first_name"] == "Ann"
    assert rows["ann"]["email"] == "ann@example.edu"
    assert {row["score"] for row in rows.values()} == {"0.0"}


def test_export_writes_scores_without_float_noise():
    """Is a gradebook sum such as 97.10924299999999 exported as 97.109243, and a whole score as before?"""
    from autograder.nbgrader_hooks import _cell

    assert _cell("score", 97.10924299999999) == "97.109243"
    assert _cell("raw_score", 0.1 + 0.2) == "0.3"
    assert _cell("score", 100.0) == "100.0"
    assert _cell("student_id", "-x") == "-x"


def test_export_quotes_names_with_commas_quotes_and_accents(course_copy):
    """Does `nbgrader export` give every roster student one row whose names read back exactly, when the
    names hold a comma, double quotes and letters outside ASCII?"""
    import csv

    from nbgrader.api import Gradebook

    (course_copy / "roster.csv").write_text(
        'id,first_name,last_name,email\n'
        'ana,Ana,"O\'Neil, Jr.",ana@example.edu\n'
        'bob,"Bob ""The Builder""",Smith,bob@example.edu\n'
        'zoe,Zoë,Ångström,zoe@example.edu\n'
        'chen,Chen,李,chen@example.edu\n', encoding="utf-8")
    with Gradebook(load_course(course_copy).gradebook_url) as gb:
        gb.add_assignment("transformer-block")
    done = _export(course_copy)
    assert done.returncode == 0, done.stderr[-2000:]
    with open(course_copy / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert all(None not in row for row in rows), rows          # no row with more fields than the header
    names = {row["student_id"]: (row["first_name"], row["last_name"]) for row in rows}
    assert names == {"ana": ("Ana", "O'Neil, Jr."), "bob": ('Bob "The Builder"', "Smith"),
                     "zoe": ("Zoë", "Ångström"), "chen": ("Chen", "李")}
    assert {row["score"] for row in rows} == {"0.0"}


def test_export_for_excel_starts_with_a_byte_order_mark_and_the_default_has_none(course_copy):
    """Does `nbgrader export --CourseCsvExport.excel=True` write the same CSV with a UTF-8 byte-order
    mark in front (so Excel shows "Zoë", not "ZoÃ«"), while plain `nbgrader export` (what LMS importers
    read) and the same option in nbgrader_config.py, overridden on the command line, stay without one?"""
    from nbgrader.api import Gradebook

    (course_copy / "roster.csv").write_text("id,first_name,last_name,email\nzoe,Zoë,Ångström,zoe@example.edu\n",
                                            encoding="utf-8")
    with Gradebook(load_course(course_copy).gradebook_url) as gb:
        gb.add_assignment("transformer-block")
    runs = {"plain": _export(course_copy, to="plain.csv"),
            "excel": _export(course_copy, "--CourseCsvExport.excel=True", to="excel.csv")}
    config = course_copy / "nbgrader_config.py"
    config.write_text(config.read_text() + "c.CourseCsvExport.excel = True\n")
    runs["configured"] = _export(course_copy, to="configured.csv")
    runs["overridden"] = _export(course_copy, "--CourseCsvExport.excel=False", to="overridden.csv")
    for name, done in runs.items():
        assert done.returncode == 0, (name, done.stderr[-2000:])
    data = {name: (course_copy / f"{name}.csv").read_bytes() for name in runs}
    bom = "\ufeff".encode()
    assert not data["plain"].startswith(bom) and not data["overridden"].startswith(bom)
    assert data["excel"] == data["configured"] == bom + data["plain"] and data["overridden"] == data["plain"]
    assert data["plain"].decode("utf-8").splitlines()[1].split(",")[4:7] == ["Ångström", "Zoë", "zoe@example.edu"]


def _course_with_an_assignment(course_dir):
    from nbgrader.api import Gradebook

    (course_dir / "roster.csv").write_text("id,first_name,last_name,email\nada,Ada,Lovelace,ada@example.edu\n",
                                           encoding="utf-8")
    with Gradebook(load_course(course_dir).gradebook_url) as gb:
        gb.add_assignment("transformer-block")
    return course_dir


def test_export_to_a_symlink_replaces_its_target_and_keeps_the_link(course_copy):
    """Does `nbgrader export --to LINK` write the CSV into the file the link points to (replaced whole,
    nothing left beside it) and leave the link a link, also when the target does not exist yet?"""
    import os

    _course_with_an_assignment(course_copy)
    folder = course_copy / "lms"
    folder.mkdir()
    target = folder / "grades.csv"
    target.write_text("old\n")
    link = course_copy / "grades-link.csv"
    link.symlink_to(target)
    dangling = course_copy / "new-link.csv"
    dangling.symlink_to(folder / "new.csv")
    for name in (link.name, dangling.name):
        done = _export(course_copy, to=name)
        assert done.returncode == 0, done.stderr[-2000:]
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert dangling.is_symlink() and (folder / "new.csv").is_file()
    for path in (target, folder / "new.csv"):
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith("assignment,duedate,") and lines[1].startswith("transformer-block,")
    assert sorted(p.name for p in folder.iterdir()) == ["grades.csv", "new.csv"]
    assert not list(course_copy.glob("*.tmp"))


def test_export_to_stdout_or_a_fifo_writes_into_it_and_replaces_nothing(course_copy):
    """Does `nbgrader export --to /dev/stdout` send the CSV down the pipe (and into the file a shell
    redirected stdout to), and `--to FIFO` into the FIFO, with /dev/stdout and the FIFO left as they were?"""
    import os
    import stat
    import subprocess
    import sys
    import threading
    from pathlib import Path

    _course_with_an_assignment(course_copy)
    piped = _export(course_copy, to="/dev/stdout")
    assert piped.returncode == 0, piped.stderr[-2000:]
    assert piped.stdout.splitlines()[0].startswith("assignment,duedate,")
    assert piped.stdout.splitlines()[1].startswith("transformer-block,")
    assert not stat.S_ISREG(os.stat("/dev/stdout", follow_symlinks=False).st_mode)

    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    redirected = course_copy / "redirected.csv"
    with open(redirected, "w") as out:
        done = subprocess.run([str(bin_dir / "nbgrader"), "export", "--to", "/dev/stdout"], cwd=course_copy,
                              env=env, stdout=out, stderr=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert redirected.read_text(encoding="utf-8") == piped.stdout

    fifo = course_copy / "grades.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = _export(course_copy, to=str(fifo))
    reader.join(timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert received and received[0].decode("utf-8") == piped.stdout
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and not (course_copy / "grades.fifo.tmp").exists()


def test_export_to_a_folder_or_into_a_missing_folder_is_refused_in_one_line(course_copy):
    """Does `nbgrader export --to` a folder, or a file in a folder that does not exist, exit 2 with one line
    naming the path given (no traceback), write nothing and make no folder?"""
    _course_with_an_assignment(course_copy)
    (course_copy / "out").mkdir()
    for to, why in (("out", "is a folder"), ("no/such/grades.csv", "its folder")):
        done = _export(course_copy, "--CourseCsvExport.lms=canvas", to=to)
        assert done.returncode == 2, done.stderr[-2000:]
        assert "Traceback" not in done.stderr, done.stderr
        lines = [ln for ln in done.stderr.splitlines() if ln.startswith("nbgrader export:")]
        assert len(lines) == 1 and lines[0].startswith(f"nbgrader export: --to {to}: {why}"), done.stderr
        assert lines[0].endswith("; no file written")
    assert list((course_copy / "out").iterdir()) == [] and not (course_copy / "no").exists()


def test_export_of_an_assignment_the_gradebook_does_not_hold_is_refused_naming_those_it_does(course_copy):
    """Does `nbgrader export --assignment` with a name the gradebook does not hold (a typo; one in course.yml
    not yet released) exit 2 with one line naming it and the gradebook's assignments, writing no file,
    rather than a header-only file with exit code 0?"""
    (course_copy / "roster.csv").write_text("id\nada\n")
    done = _export(course_copy, "--assignment=transformer-block")
    assert done.returncode == 2, done.stderr[-2000:]
    assert ("nbgrader export: --assignment transformer-block: not in the gradebook (transformer-block is in "
            "course.yml, but nothing of it has been released or graded yet), which holds no assignment yet; no file "
            "written") in done.stderr.splitlines(), done.stderr
    _course_with_an_assignment(course_copy)
    done = _export(course_copy, "--assignment=nosuch", "--CourseCsvExport.lms=canvas")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr
    assert [ln for ln in done.stderr.splitlines() if ln.startswith("nbgrader export:")] == [
        "nbgrader export: --assignment nosuch: not in the gradebook, which holds transformer-block; no file written"]
    assert not (course_copy / "grades.csv").exists()
    assert _export(course_copy, "--assignment=transformer-block").returncode == 0


def test_export_of_a_student_on_neither_the_roster_nor_the_gradebook_is_refused_naming_those_it_holds(course_copy):
    """Does `nbgrader export --student` with an id the gradebook does not hold once the roster is synced (a typo)
    exit 2 with one line naming it and the students there are, writing no file, rather than a header-only file
    with exit code 0; and does a roster student's id still export?"""
    _course_with_an_assignment(course_copy)
    done = _export(course_copy, "--student=nosuch")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr
    assert [ln for ln in done.stderr.splitlines() if ln.startswith("nbgrader export:")] == [
        "nbgrader export: --student nosuch: not in the gradebook nor on the roster (roster.csv), which hold ada; "
        "no file written"]
    assert not (course_copy / "grades.csv").exists()
    done = _export(course_copy, "--student=ada")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = (course_copy / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 2 and rows[1].split(",")[3] == "ada"


def test_export_warns_of_an_extension_given_in_the_gradebook_and_not_in_course_yml(course_copy):
    """When a TA gave ada an extension through nbgrader's gradebook (course.yml gives her none), does the
    export say that extensions are course.yml's and that it follows course.yml, naming her and the
    gradebook's extension?"""
    import datetime as dt

    from nbgrader.api import Gradebook

    (course_copy / "roster.csv").write_text("id\nada\n")
    with Gradebook(load_course(course_copy).gradebook_url) as gb:
        gb.add_assignment("transformer-block")
        gb.add_student("ada")
        with gb.db.no_autoflush:             # nbgrader's add_submission would warn of its own half-made rows
            gb.add_submission("transformer-block", "ada")
        gb.find_submission("transformer-block", "ada").extension = dt.timedelta(days=10, hours=12)
        gb.db.commit()
    done = _export(course_copy)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("transformer-block: the gradebook gives ada (10 days and 12 hours) another extension than course.yml; "
            "extensions are course.yml's") in done.stderr


def test_a_student_taken_out_of_the_course_gets_no_page_written_nor_released(tmp_path):
    """After alan (graded, submitted through the exchange) is taken off the roster and out of the gradebook, does
    `course feedback` leave his page as it was and name him, and `nbgrader release_feedback` release only ada's
    page, with one warning naming alan?"""
    import os
    import subprocess
    import sys
    from pathlib import Path

    folder = _graded_with_an_exchange(tmp_path, ("ada", "alan"), ("ada", "alan"))
    (folder / "roster.csv").write_text("id\nada\n")
    config = folder / "course.yml"
    if "roster:" not in config.read_text():
        config.write_text(config.read_text() + "roster: roster.csv\n")
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    removed = subprocess.run([str(bin_dir / "nbgrader"), "db", "student", "remove", "alan", "--force"], cwd=folder,
                             env=env, capture_output=True, text=True, timeout=300)
    assert removed.returncode == 0, removed.stderr
    page = CourseLayout(folder).feedback("alan", "transformer-block") / "transformer-block.html"
    before = page.stat().st_mtime_ns
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "feedback", "transformer-block", "--course-dir",
                           str(folder)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 feedback page written" in done.stdout and "taken out of the course" in done.stdout, done.stdout
    assert "so no page was written: alan;" in done.stdout and page.stat().st_mtime_ns == before
    warnings = _release_feedback(folder)
    assert len(warnings) == 1 and "alan: taken out of the course" in warnings[0], warnings
    released = list((tmp_path / "exchange" / "dl-attention" / EXCHANGE_FEEDBACK).iterdir())
    assert len(released) == 1 and "ada" in released[0].read_text(encoding="utf-8")


def test_the_engines_warnings_reach_nbgraders_log_as_warnings():
    """Under `nbgrader autograde`, is a progress line the engine marks 'WARNING: ' (a student taken out of
    the course, --insecure, a timestamp without a late penalty) logged at warning level, and the rest as info?"""
    import logging

    from autograder.nbgrader_hooks import leveled

    records: list[logging.LogRecord] = []
    logger = logging.getLogger("test-leveled")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        log = leveled(logger)
        log("WARNING: alan: not graded, taken out of the gradebook")
        log("ERROR: the writer failed")
        log("grading 2 submissions with 1 worker")
    finally:
        logger.removeHandler(handler)
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.WARNING, "alan: not graded, taken out of the gradebook"),
        (logging.ERROR, "the writer failed"),
        (logging.INFO, "grading 2 submissions with 1 worker")]


def test_nbgrader_reads_the_courses_timestamps_as_the_engine_does(course_copy, tmp_path):
    """Once the course's nbgrader_config.py is loaded, does nbgrader's own stamp reader (CourseDirectory's, and
    NbGraderAPI's for formgrader's list) give the engine's time in naive UTC, a byte-order mark skipped; an
    unreadable stamp count as none with one warning naming the folder, not a traceback; and another course
    folder keep nbgrader's reader?"""
    import datetime as dt
    import logging

    from dateutil.parser import ParserError
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    cfg = loaded(course_copy)
    layout = CourseLayout(course_copy)
    stamps = {"ada": b"2026-12-15 00:30:00.000000 UTC", "tbom": b"\xef\xbb\xbf2026-12-15 00:30:00.000000 UTC",
              "tlower": b"2026-12-15 01:30:00.000000 cet", "lbad": b"yesterday at noon"}
    for sid, data in stamps.items():
        layout.submission(sid, "transformer-block").mkdir(parents=True)
        (layout.submission(sid, "transformer-block") / "timestamp.txt").write_bytes(data)
    coursedir = CourseDirectory(config=cfg)
    api = NbGraderAPI(coursedir, config=cfg)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    coursedir.log.addHandler(handler)
    api.log.addHandler(handler)
    try:
        for sid in ("ada", "tbom", "tlower"):
            folder = str(layout.submission(sid, "transformer-block"))
            assert coursedir.get_existing_timestamp(folder) == dt.datetime(2026, 12, 15, 0, 30), sid
            assert api.get_submitted_timestamp("transformer-block", sid) == dt.datetime(2026, 12, 15, 0, 30), sid
        assert not records
        for _ in range(2):
            assert coursedir.get_existing_timestamp(str(layout.submission("lbad", "transformer-block"))) is None
            assert api.get_submitted_timestamp("transformer-block", "lbad") is None
    finally:
        coursedir.log.removeHandler(handler)
        api.log.removeHandler(handler)
    assert [(r.levelno, r.getMessage()) for r in records] == [(logging.WARNING, (
        "submitted/lbad/transformer-block: timestamp.txt could not be read as a time ('yesterday at noon': "
        "not a time (nbgrader writes '2026-12-14 23:59:00.000000 UTC')); the submission was treated as on time."))]
    other = CourseLayout(tmp_path / "other").submission("lbad", "hw")
    other.mkdir(parents=True)
    (other / "timestamp.txt").write_text("yesterday at noon")
    elsewhere = CourseDirectory(root=str(tmp_path / "other"))
    try:
        elsewhere.get_existing_timestamp(str(other))
    except (ParserError, AttributeError):    # nbgrader's own reader, as nbgrader 0.9.6 fails on such a stamp
        pass
    else:
        raise AssertionError("a folder that is not the course's should keep nbgrader's own reader")


def test_nbgraders_commands_keep_the_results_and_page_of_a_submission_with_an_unreadable_stamp(tmp_path):
    """With lbad's timestamp.txt 'yesterday at noon' and tbom's saved with a byte-order mark: does `course autograde`
    grade lbad as on time with its warning and take tbom's late penalty, and do `nbgrader generate_feedback` and
    `nbgrader autograde --student lbad` (formgrader's button) exit 0 with one warning naming lbad's stamp, instead of
    a traceback after which nbgrader deleted lbad's feedback/ and autograded/ folders (results.json, the page)?
    Are the submissions left as they were?"""
    import json
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ada",))
    layout = CourseLayout(folder)
    for sid, data in (("lbad", b"yesterday at noon"), ("tbom", b"\xef\xbb\xbf2026-11-17 00:30:00.000000 UTC")):
        shutil.copytree(layout.submission("ada", "transformer-block"), layout.submission(sid, "transformer-block"))
        (layout.submission(sid, "transformer-block") / "timestamp.txt").write_bytes(data)
    (folder / "roster.csv").write_text("id\nada\nlbad\ntbom\n")
    submitted = {p: p.read_bytes() for p in layout.submitted_dir.rglob("*") if p.is_file()}
    graded = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block", "--course-dir",
                             str(folder)], capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "WARNING: lbad: timestamp.txt could not be read as a time ('yesterday at noon'" in graded.stdout
    assert "WARNING: tbom" not in graded.stdout, "tbom's stamp is read"
    results = {sid: json.loads(layout.results_json(sid, "transformer-block").read_text()) for sid in ("lbad", "tbom")}
    assert results["lbad"]["extra_data"]["late_penalty"] == 0 and results["tbom"]["extra_data"]["late_penalty"] == 10
    kept = {p: p.read_bytes() for sid in ("lbad", "tbom")
            for p in [*layout.autograded(sid, "transformer-block").iterdir(),
                      *layout.feedback(sid, "transformer-block").iterdir()]}
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    warning = ("WARNING] {}/lbad/transformer-block: timestamp.txt could not be read as a time ('yesterday at noon': "
               "not a time (nbgrader writes '2026-12-14 23:59:00.000000 UTC')); the submission was treated as "
               "on time.")
    for args, step in ((["generate_feedback", "transformer-block"], "autograded"),
                       (["autograde", "transformer-block", "--student", "lbad"], "submitted")):
        proc = subprocess.run([str(bin_dir / "nbgrader"), *args], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr and "Removing failed" not in proc.stderr, proc.stderr
        assert [ln for ln in proc.stderr.splitlines() if "timestamp.txt" in ln] == [
            f"[{'GenerateFeedbackApp' if step == 'autograded' else 'AutogradeApp'} | {warning.format(step)}"], \
            proc.stderr
        assert {p: p.read_bytes() for p in kept if p.is_file()} == kept
    assert {p: p.read_bytes() for p in layout.submitted_dir.rglob("*") if p.is_file()} == submitted


def test_what_nbgrader_autograde_warned_of_is_kept_for_the_command_not_for_the_process():
    """Do the preprocessors nbgrader makes for each notebook of one command (one exporter, their parent) share
    what the engine warned of, while the next command, or the next press of formgrader's Autograde button in
    the same server (another converter, so another exporter), starts afresh and says it again?"""
    from nbconvert.exporters import NotebookExporter

    command, next_command = NotebookExporter(), NotebookExporter()
    first = CourseAutograde(parent=command)._warned()
    first.add("alan: his timestamp.txt says 2026-12-14 18:00:00 UTC")
    assert CourseAutograde(parent=command)._warned() is first
    assert CourseAutograde(parent=next_command)._warned() == set()


def test_nbgrader_autograde_says_the_rosters_case_clash_once_not_once_per_student(tmp_path):
    """With `Ada` beside `ada` on the roster, does `nbgrader autograde` (which grades each student through a call
    of the engine's own) warn of the two ids once for the class, as `course autograde` does, not once per
    student graded, while still saying it; and of alan's timestamp.txt, two days ahead of the clock, once,
    naming him and the file, as `course autograde` does?"""
    import datetime as dt
    import subprocess
    import sys

    from conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ada", "alan"))
    (folder / "roster.csv").write_text("id\nada\nalan\nAda\n")
    stamp = CourseLayout(folder).submission("alan", "transformer-block") / "timestamp.txt"
    stamp.write_text(f"{dt.datetime.now(dt.UTC) + dt.timedelta(days=2):%Y-%m-%d %H:%M:%S}.000000 UTC")
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "release", "transformer-block", "--course-dir",
                           str(folder)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    clash = "roster.csv: line 4: id 'Ada' differs from 'ada' (line 2) only by case"
    warnings = _nbgrader(folder, "autograde", "transformer-block")
    assert len([ln for ln in warnings if clash in ln]) == 1, warnings
    ahead = f"alan: {CourseLayout(folder).relative(stamp)} says {stamp.read_text()[:19]} UTC, 1 day 23 hours ahead of"
    assert len([ln for ln in warnings if ahead in ln]) == 1, warnings
    assert all(CourseLayout(folder).results_json(sid, "transformer-block").is_file() for sid in ("ada", "alan"))


def test_the_page_of_a_notebook_named_in_capitals_is_released_under_its_name_but_not_fetched(tmp_path):
    """Is the page of `hw.IPYNB` named hw.html, as that of hw.ipynb (what `nbgrader release_feedback` hashes with
    the secret), and does nbgrader's own fetch_feedback find that page for a student's hw.ipynb but not for their
    hw.IPYNB, as the README says (should nbgrader come to match any case, that note is to go)?"""
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default.fetch_feedback import ExchangeFetchFeedback
    from nbgrader.utils import notebook_hash
    from reporting.conftest import submission
    from traitlets.config import Config

    from autograder.reporting.feedback import feedback_filename

    layout = CourseLayout(tmp_path / "course")
    names = [layout.relative(layout.submission("ada", "hw") / f"hw.{ext}") for ext in ("ipynb", "IPYNB")]
    pages = {feedback_filename(submission("ada", files=(name,))) for name in names}
    assert pages == {"hw.html"}
    found = {}
    for ext in ("ipynb", "IPYNB"):
        exchange, cache = tmp_path / ext / "exchange", tmp_path / ext / "cache"
        copy = cache / "c1" / "ada+hw+2026-12-14 18:00:00.000000 UTC"        # as `nbgrader submit` keeps it
        copy.mkdir(parents=True)
        (copy / f"hw.{ext}").write_text("{}")
        (copy / "submission_secret.txt").write_text("s3cret")
        released = exchange / "c1" / EXCHANGE_FEEDBACK
        released.mkdir(parents=True)
        (released / f"{notebook_hash(secret='s3cret', notebook_id='hw')}.html").write_text("the page")
        cfg = Config()
        cfg.CourseDirectory.course_id, cfg.CourseDirectory.assignment_id = "c1", "hw"
        cfg.CourseDirectory.student_id = "ada"
        cfg.Exchange.root, cfg.Exchange.cache = str(exchange), str(cache)
        fetch = ExchangeFetchFeedback(coursedir=CourseDirectory(config=cfg), config=cfg)
        fetch.init_src()
        found[ext] = [notebook for notebook, _, _ in fetch.feedback_files]
    assert found == {"ipynb": ["hw"], "IPYNB": []}


def test_a_tas_graded_submission_stays_graded_until_resubmitted_and_nbgrader_autograde_warns_of_it(tmp_path):
    """After a TA saves a score for ada in formgrader (manual score set, needs_manual_grade cleared), does `course
    autograde --student ada` on her unchanged submission leave her graded in formgrader's list (NbGraderAPI)? When
    she submits again, does `nbgrader autograde` (which deletes her autograded/ folder, results.json with it, first)
    warn, as `course autograde` does, that the TA's score still stands, flag it for review again, and log her total
    in the gradebook, the TA's score in it, beside the autograder's?"""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from nbgrader.api import Gradebook
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    from autograder.text import format_points
    from conftest import course_cmd, course_with_students

    a = "transformer-block"
    folder = course_with_students(tmp_path / "course", ("ada",))
    layout = CourseLayout(folder)
    course_cmd(folder, "release", a)
    course_cmd(folder, "autograde", a)
    url = f"sqlite:///{folder / 'gradebook.db'}"
    with Gradebook(url, "dl-attention") as gb:                     # what formgrader's save does
        grade = gb.find_grade("test_rms_norm", a, a, "ada")
        assert grade.auto_score == 5.0
        grade.manual_score, grade.needs_manual_grade = 4.0, False
        gb.db.commit()

    def listed() -> bool:
        """ada's needs_manual_grade as formgrader's list of submissions reads it."""
        cfg = loaded(folder)
        cfg.Exchange.root = str(tmp_path / "exchange")
        (tmp_path / "exchange").mkdir(mode=0o777, exist_ok=True)
        coursedir = CourseDirectory(config=cfg)
        (submission,) = NbGraderAPI(coursedir, config=cfg).get_submissions(a)
        return bool(submission["needs_manual_grade"])

    assert not listed()
    out = course_cmd(folder, "autograde", a, "--student", "ada")
    assert "unchanged ada" in out and "WARNING" not in out, out
    assert not listed()
    (layout.submission("ada", a) / "timestamp.txt").write_text("2026-11-16 20:00:00.000000 UTC")   # newer: again
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    done = subprocess.run([str(bin_dir / "nbgrader"), "autograde", a, "--student", "ada"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert ("[AutogradeApp | WARNING] ada: a TA's score for rms_norm (4 of 5; the autograder now gives 5) was set on "
            "an earlier submission and still stands: review it in formgrader") in done.stderr, done.stderr
    assert listed()
    with Gradebook(url, "dl-attention") as gb:
        total = gb.find_submission(a, "ada").score - gb.find_submission(a, "ada").late_submission_penalty
    graded = json.loads(layout.results_json("ada", a).read_text())
    line = (f"ada: {format_points(total)}/{format_points(graded['max_score'])} points in the gradebook, with the "
            f"TA's changes (course autograde alone: {format_points(graded['score'])})")
    assert line in done.stderr, done.stderr
