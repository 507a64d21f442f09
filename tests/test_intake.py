"""Every file under submitted/ that a batch does not grade is named, with the reason."""
from __future__ import annotations

from autograder.config import load_course
from autograder.grading.results import SubmissionResult
from autograder.intake import ungraded_files

ASSIGNMENT = "transformer-block"
NB = "transformer-block.ipynb"


def graded(course, student: str, *files: str) -> SubmissionResult:
    layout = course.layout
    return SubmissionResult(student=student, assignment=ASSIGNMENT, state="graded",
                            files=tuple(layout.relative(layout.submission(student, ASSIGNMENT) / f) for f in files))


def test_each_ungraded_entry_is_named_with_its_reason(course_copy):
    """Are a notebook one level too high, a file in submitted/, an unknown assignment, and extra files
    inside a submission reported, while the graded notebook, nbgrader's bookkeeping files, a renamed
    notebook that was graded in its place and nbgrader's ignored names are not?"""
    course = load_course(course_copy)
    layout = course.layout
    for student, name in [("ada", NB), ("ada", "timestamp.txt"), ("ada", "submission_secret.txt"),
                          ("ada", "scratch.ipynb"), ("ada", "data.csv"), ("bo", "transformer-block (1).ipynb")]:
        (layout.submission(student, ASSIGNMENT)).mkdir(parents=True, exist_ok=True)
        (layout.submission(student, ASSIGNMENT) / name).write_text("{}")
    (layout.submission("ada", ASSIGNMENT) / ".ipynb_checkpoints").mkdir()
    (layout.submission("ada", ASSIGNMENT) / "figures").mkdir()
    (layout.submitted_dir / "xu").mkdir()
    (layout.submitted_dir / "xu" / NB).write_text("{}")
    (layout.submitted_dir / "xu" / "homework-9").mkdir()
    (layout.submitted_dir / "stray.ipynb").write_text("{}")
    results = [graded(course, "ada", NB), graded(course, "bo", "transformer-block (1).ipynb")]
    found = {u.path: u.reason for u in ungraded_files(course, course.assignment(ASSIGNMENT), results)}
    assert found == {
        "submitted/stray.ipynb": "a file directly in submitted; expected "
                                 "submitted/<student>/transformer-block/<notebook>",
        "submitted/xu/transformer-block.ipynb": "a notebook directly in the student's folder; expected "
                                                "submitted/xu/transformer-block/transformer-block.ipynb",
        "submitted/xu/homework-9": "no assignment 'homework-9' in course.yml (it has: transformer-block)",
        "submitted/ada/transformer-block/scratch.ipynb": "not one of the assignment's notebooks "
                                                         "(transformer-block.ipynb), so it was not graded",
        "submitted/ada/transformer-block/data.csv": "not a notebook of the assignment, so it was not graded",
        "submitted/ada/transformer-block/figures": "a folder inside the submission; only the assignment's "
                                                  "notebooks are graded",
    }


def test_one_students_run_reports_only_their_folder(course_copy):
    """With --student, is only that student's folder looked at?"""
    course = load_course(course_copy)
    layout = course.layout
    (layout.submitted_dir / "xu").mkdir(parents=True)
    (layout.submitted_dir / "xu" / NB).write_text("{}")
    (layout.submitted_dir / "stray.ipynb").write_text("{}")
    layout.submission("ada", ASSIGNMENT).mkdir(parents=True)
    assert ungraded_files(course, course.assignment(ASSIGNMENT), [], "ada") == ()
    assert [u.path for u in ungraded_files(course, course.assignment(ASSIGNMENT), [], "xu")] == [
        "submitted/xu/transformer-block.ipynb"]
