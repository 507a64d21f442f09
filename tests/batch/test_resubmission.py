"""A TA's overrides and comments on a submission stay in the gradebook when the student submits again
(nbgrader keeps a person's grades on a regrade): `course autograde` says so, once per student, when the
submission's content changed, and not when the same files are graded again; also when the earlier
submission's grading crashed and a TA graded it by hand."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from autograder.layout import CourseLayout
from tests.conftest import course_cmd, course_with_students

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
A = "transformer-block"
COMMENT = "Divide by the root of the mean of squares."
WARNING = ("WARNING: ada: a TA's score for rms_norm (4 of 5; the autograder now gives 5) and a comment were set on "
           "an earlier submission and still stand: review them in formgrader")


def _override(course: Path, sid: str, auto: float | None = 5.0) -> None:
    """As a TA saves them in formgrader: rms_norm's score set to 4 of 5, a comment on its solution cell."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
        grade = gb.find_grade("test_rms_norm", A, A, sid)
        assert grade.auto_score == auto
        grade.manual_score = 4.0
        gb.find_comment("rms_norm_solution", A, A, sid).manual_comment = COMMENT
        gb.db.commit()


def test_a_resubmission_warns_of_the_ta_review_that_still_stands(tmp_path):
    """After a TA's override and comment, does grading ada's changed submission (a newer timestamp.txt; a
    one-student run, which would commit in the background) print one WARNING line naming them while the
    gradebook keeps them, and do `--force` on the same files and a student without any review print none?"""
    course = course_with_students(tmp_path / "course", ("ada", "alan"))
    course_cmd(course, "release", A)
    course_cmd(course, "autograde", A)
    _override(course, "ada")
    (CourseLayout(course).submission("ada", A) / "timestamp.txt").write_text("2026-11-15 09:30:00.000000 UTC")
    (CourseLayout(course).submission("alan", A) / "timestamp.txt").write_text("2026-11-15 09:30:00.000000 UTC")
    out = course_cmd(course, "autograde", A, "--student", "ada")
    assert [line for line in out.splitlines() if "WARNING" in line] == [WARNING], out
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
        grade = gb.find_grade("test_rms_norm", A, A, "ada")
        assert (grade.auto_score, grade.manual_score, grade.needs_manual_grade) == (5.0, 4.0, True)
        assert gb.find_comment("rms_norm_solution", A, A, "ada").manual_comment == COMMENT
    again = course_cmd(course, "autograde", A, "--student", "ada", "--force")
    assert "graded    ada" in again and "WARNING" not in again, again
    alan = course_cmd(course, "autograde", A)
    assert "graded    alan" in alan and "WARNING" not in alan, alan


def test_a_hand_score_the_new_submission_happens_to_earn_is_still_named(tmp_path):
    """barbara's rms_norm earns 0 (it subtracts the mean) and a TA scores it 5 by hand; when she resubmits a
    notebook whose rms_norm the autograder gives 5, so that the hand score equals the automatic one, is the
    hand score still named in a WARNING (it was set for the other submission and still decides the grade),
    for a one-student run as for a class run, with the gradebook still flagging it for manual grading?"""
    from nbgrader.api import Gradebook

    course = course_with_students(tmp_path / "course", ("ada", "barbara"))
    layout = CourseLayout(course)
    course_cmd(course, "release", A)
    course_cmd(course, "autograde", A)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
        grade = gb.find_grade("test_rms_norm", A, A, "barbara")
        assert grade.auto_score == 0.0
        grade.manual_score = 5.0
        gb.db.commit()
    warning = ("WARNING: barbara: a TA's score for rms_norm (5 of 5; the autograder now gives 5) was set on an earlier "
               "submission and still stands: review it in formgrader")
    notebook = f"{A}.ipynb"
    # a new submission each time (a newer timestamp.txt): one graded alone, then one in a class run
    for args, stamp in ((("--student", "barbara"), "2026-11-15 09:30:00.000000 UTC"),
                        ((), "2026-11-15 10:30:00.000000 UTC")):
        folder = layout.submission("barbara", A)
        (folder / notebook).write_bytes((layout.submission("ada", A) / notebook).read_bytes())
        (folder / "timestamp.txt").write_text(stamp)
        out = course_cmd(course, "autograde", A, *args)
        assert "graded    barbara" in out and [ln for ln in out.splitlines() if "WARNING" in ln] == [warning], out
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
            grade = gb.find_grade("test_rms_norm", A, A, "barbara")
            assert (grade.auto_score, grade.manual_score, grade.needs_manual_grade) == (5.0, 5.0, True)


def _crash(course: Path, sid: str, monkeypatch: pytest.MonkeyPatch, *, background: bool) -> None:
    """Grade `sid` alone in this process with the sandbox failing under it, as a killed sandbox process
    makes a submission `crashed`: results.json and a gradebook row without automatic scores (committed
    by a detached writer when `background`, as `course autograde --student` does; waited for here)."""
    from autograder import api
    from autograder.config import load_course
    from autograder.grading import engine
    from autograder.reporting.gradebook import acquire_gradebook_lock
    from autograder.sandbox.outcomes import SandboxError

    def killed(*args: object, **kwargs: object) -> None:
        raise SandboxError("the sandbox's process was killed")

    with monkeypatch.context() as patch:
        patch.setattr(engine, "grade_submission", killed)
        patch.setenv("PATH", os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
        batch = api.autograde(course, A, student=sid, workers=1, background_commit=background)
    assert [row.state for row in batch.results] == ["crashed"], batch.results
    assert batch.committing == ((sid,) if background else ())
    os.close(acquire_gradebook_lock(load_course(course)))     # the detached writer has committed


def test_a_resubmission_after_a_crash_warns_of_the_ta_grade_that_still_stands(tmp_path, monkeypatch):
    """When a student's grading crashed and a TA scored it by hand, does their next, changed submission
    get the WARNING line (the TA's score still stands on it), while a student whose same files are
    graded again after the crash gets none?"""
    course = course_with_students(tmp_path / "course", ("ada", "alan"))
    course_cmd(course, "release", A)
    for sid in ("ada", "alan"):
        _crash(course, sid, monkeypatch, background=sid == "ada")
        _override(course, sid, auto=None)
    (CourseLayout(course).submission("ada", A) / "timestamp.txt").write_text("2026-11-15 09:30:00.000000 UTC")
    out = course_cmd(course, "autograde", A)
    assert "graded    ada" in out and "graded    alan" in out, out
    assert [line for line in out.splitlines() if "WARNING" in line] == [WARNING], out
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
        for sid in ("ada", "alan"):
            grade = gb.find_grade("test_rms_norm", A, A, sid)
            assert (grade.auto_score, grade.manual_score) == (5.0, 4.0), sid


def test_a_regrade_under_changed_graders_says_so_and_names_the_reviews_it_keeps(tmp_path):
    """After a hidden grader changes, does `course autograde` say before grading that the graders changed so
    every submission graded before is graded again, and after it name in one WARNING line the reviewed students
    whose (unchanged) submission was graded again, with what the TA set, kept; leaving a resubmitted student to
    their own WARNING, and saying neither when nothing changed, on --force, or (one line each) for one student?"""
    course = course_with_students(tmp_path / "course", ("ada", "alan", "grace"))
    layout = CourseLayout(course)
    course_cmd(course, "release", A)
    course_cmd(course, "autograde", A)
    _override(course, "ada")
    _override(course, "grace")
    (layout.submission("grace", A) / "timestamp.txt").write_text("2026-11-15 09:30:00.000000 UTC")
    grader = layout.graders("transformer_block") / "test_layer_norm.py"
    grader.write_text(grader.read_text() + "# a fix\n")
    changed = (f"{A}: the graders changed since the last grading (the engine, "
               f"{layout.relative(layout.package('transformer_block'))}/ or a file under "
               f"{layout.relative(layout.package('transformer_block').parent)}/ it imports, the release in "
               f"{layout.relative(layout.release(A))}/, or the assignment's course.yml settings: "
               f"problems, points, tolerances, limits, due date, late policy), so ")
    kept = ("WARNING: the TA's overrides, extra credit and comments of 1 student graded again under the changed "
            "graders are kept: ada (a TA's score for rms_norm (4 of 5; the autograder now gives 5) and a comment); "
            "review them in formgrader")
    out = course_cmd(course, "autograde", A)
    lines = out.splitlines()
    assert lines[0] == changed + "all 3 submissions graded before are graded again", out
    assert [ln for ln in lines if "WARNING" in ln] == [WARNING.replace("ada:", "grace:"), kept], out
    assert all(f"graded    {sid}" in out for sid in ("ada", "alan", "grace")), out
    for args in ((), ("--force",)):
        again = course_cmd(course, "autograde", A, *args)
        assert "graders changed" not in again and "WARNING" not in again, again
    grader.write_text(grader.read_text() + "# another fix\n")
    one = course_cmd(course, "autograde", A, "--student", "ada")
    assert [ln for ln in one.splitlines() if "graders changed" in ln or "WARNING" in ln] == [
        changed + "1 submission graded before is graded again", kept], one


def test_a_resubmission_whose_commit_failed_is_graded_again_on_the_next_run(tmp_path):
    """When the gradebook refuses a resubmission's grades (rolled back), is the submission left without its
    grading key (not marked as graded), so that the next run grades it again, still as a resubmission (the
    WARNING for the TA's review, the flag raised), and commits its grades, rather than calling it unchanged?"""
    import sqlite3
    import subprocess

    course = course_with_students(tmp_path / "course", ("ada", "alan"))
    course_cmd(course, "release", A)
    course_cmd(course, "autograde", A)
    _override(course, "ada")
    (CourseLayout(course).submission("ada", A) / "timestamp.txt").write_text("2026-11-15 09:30:00.000000 UTC")
    with sqlite3.connect(course / "gradebook.db") as db:
        db.execute("CREATE TRIGGER refuse BEFORE UPDATE ON grade BEGIN SELECT RAISE(ABORT, 'refused'); END")
    failed = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", A, "--course-dir", str(course)],
                            capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")])))
    assert failed.returncode != 0 and "refused" in failed.stdout + failed.stderr, failed.stdout + failed.stderr
    with sqlite3.connect(course / "gradebook.db") as db:
        db.execute("DROP TRIGGER refuse")
    out = course_cmd(course, "autograde", A)
    assert "graded    ada" in out and "unchanged alan" in out, out
    assert [line for line in out.splitlines() if "WARNING" in line] == [WARNING], out
    again = course_cmd(course, "autograde", A)
    assert "unchanged ada" in again and "WARNING" not in again, again
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
        grade = gb.find_grade("test_rms_norm", A, A, "ada")
        assert (grade.auto_score, grade.manual_score, grade.needs_manual_grade) == (5.0, 4.0, True)


def _flags(course: Path, sid: str) -> set[bool]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
        return {g.needs_manual_grade for nb in gb.find_submission(A, sid).notebooks for g in nb.grades}


def test_a_one_student_run_flags_an_unreadable_resubmission_again_after_the_ta_cleared_it(tmp_path):
    """When a TA cleared the flag on an unreadable notebook's grades (formgrader's save of an empty score) and
    the student submits another unreadable notebook, does a one-student run (committed in the background)
    raise the flag again, as a batch does?"""
    course = course_with_students(tmp_path / "course", ("ada", "alan"))
    course_cmd(course, "release", A)
    folder = CourseLayout(course).submission("ada", A)
    notebook = next(folder.glob("*.ipynb"))
    notebook.write_text("{not json", encoding="utf-8")
    course_cmd(course, "autograde", A)
    assert _flags(course, "ada") == {True}
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
        for nb in gb.find_submission(A, "ada").notebooks:
            for grade in nb.grades:
                grade.needs_manual_grade = False
        gb.db.commit()
    course_cmd(course, "autograde", A, "--student", "ada", "--wait")
    assert _flags(course, "ada") == {False}              # the same submission: the TA's flag stands
    notebook.write_text("{still not json", encoding="utf-8")
    (folder / "timestamp.txt").write_text("2026-11-15 09:30:00.000000 UTC")
    from tests.batch.test_background_commit import _wait_for_the_writer

    course_cmd(course, "autograde", A, "--student", "ada")      # committed by a detached writer
    _wait_for_the_writer(course)
    assert _flags(course, "ada") == {True}


def test_a_results_json_whose_commit_went_in_is_not_taken_for_a_resubmission(tmp_path):
    """When results.json lost its grading key after the gradebook took its grades (the keyed rewrite failed),
    is its `gradebook_key` (the earlier result's) ignored, so that the next run grades it again without
    warning of a TA's review of an earlier submission and without flagging the TA's review of this one?"""
    import json

    course = course_with_students(tmp_path / "course", ("ada", "alan"))
    course_cmd(course, "release", A)
    course_cmd(course, "autograde", A)
    results = CourseLayout(course).results_json("ada", A)
    first = json.loads(results.read_text(encoding="utf-8"))["extra_data"]["grading_key"]
    (CourseLayout(course).submission("ada", A) / "timestamp.txt").write_text("2026-11-15 09:30:00.000000 UTC")
    course_cmd(course, "autograde", A)
    _override(course, "ada")
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
        gb.find_grade("test_rms_norm", A, A, "ada").needs_manual_grade = False
        gb.db.commit()
    doc = json.loads(results.read_text(encoding="utf-8"))
    doc["extra_data"].pop("grading_key")
    doc["extra_data"]["gradebook_key"] = first
    results.write_text(json.dumps(doc), encoding="utf-8")
    out = course_cmd(course, "autograde", A)
    assert "graded    ada" in out and "WARNING" not in out, out
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
        assert gb.find_grade("test_rms_norm", A, A, "ada").needs_manual_grade is False


def _extension(course: Path, extensions: dict[str, dict[str, float]] | None) -> None:
    """course.yml's extensions for the assignment set to `extensions` (None: the key taken out)."""
    import yaml

    config = yaml.safe_load((course / "course.yml").read_text())
    entry = config["assignments"][0]
    entry.pop("extensions", None)
    if extensions is not None:
        entry["extensions"] = extensions
    (course / "course.yml").write_text(yaml.safe_dump(config, sort_keys=False))


def _reviewed(course: Path, sid: str) -> None:
    """As formgrader saves a TA's score: rms_norm set to 4 of 5 and taken off "needs manual grade"."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
        grade = gb.find_grade("test_rms_norm", A, A, sid)
        grade.manual_score, grade.needs_manual_grade = 4.0, False
        gb.db.commit()


def _flag(course: Path, sid: str) -> bool:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:
        return bool(gb.find_grade("test_rms_norm", A, A, sid).needs_manual_grade)


def test_one_students_extension_grades_that_student_alone_again(tmp_path):
    """When course.yml gives alan (late by a day) an extension, changes it and takes it away, does each
    `course autograde` grade alan alone again, saying why (his extension then and now), with his late
    penalty following it, leave the others unchanged, never say the graders changed, and leave the TAs'
    reviewed scores (his and ada's) off formgrader's "needs manual grade"; while a tolerance changed in
    course.yml still grades everyone again and flags ada's review?"""
    course = course_with_students(tmp_path / "course", ("ada", "alan", "grace"))
    course_cmd(course, "release", A)
    course_cmd(course, "autograde", A)
    for sid in ("ada", "alan"):
        _reviewed(course, sid)
    steps = (({"days": 2}, "none", "2 days", "100.00"), ({"days": 3}, "2 days", "3 days", "100.00"),
             (None, "3 days", "none", "90.00"))
    for given, then, now, score in steps:
        _extension(course, {"alan": given} if given is not None else None)
        out = course_cmd(course, "autograde", A)
        assert (f"alan: their extension changed since the last grading ({then} then, {now} now), so they are graded "
                f"again") in out.splitlines(), out
        assert "graded    alan" in out and "unchanged ada" in out and "unchanged grace" in out, out
        assert f"{score}/100" in next(ln for ln in out.splitlines() if ln.startswith("graded    alan")), out
        assert "graders changed" not in out and "WARNING" not in out, out
        assert not _flag(course, "ada") and not _flag(course, "alan")
    again = course_cmd(course, "autograde", A)
    assert not any(ln.startswith("graded ") for ln in again.splitlines()) and "extension" not in again, again
    import yaml

    config = yaml.safe_load((course / "course.yml").read_text())
    config["assignments"][0]["problems"]["pre_ln_block"]["tolerances"]["float32"]["rtol"] = 3.0e-4
    (course / "course.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    shared = course_cmd(course, "autograde", A)
    assert "graders changed" in shared and "all 3 submissions graded before are graded again" in shared, shared
    assert all(f"graded    {sid}" in shared for sid in ("ada", "alan", "grace")), shared
    assert _flag(course, "ada") and _flag(course, "alan")
