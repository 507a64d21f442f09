"""Every file under submitted/ that a batch does not grade is named, with the reason."""
from __future__ import annotations

from autograder.api import submissions
from autograder.config import load_course
from autograder.grading.results import SubmissionResult
from autograder.intake import ungraded_files
from autograder.text import NAME_CONTROL, shown_name

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
        "submitted/xu/homework-9": f"no assignment 'homework-9' in course.yml (it has: "
                                   f"{', '.join(sorted(a.name for a in course.assignments))})",
        "submitted/ada/transformer-block/scratch.ipynb": "not one of the assignment's notebooks "
                                                         "(transformer-block.ipynb), so it was not graded",
        "submitted/ada/transformer-block/data.csv": "not a notebook of the assignment, so it was not graded",
        "submitted/ada/transformer-block/figures": "a folder inside the submission; only the assignment's "
                                                  "notebooks are graded",
    }


def test_a_notebook_with_its_extension_in_capitals_is_a_notebook(course_copy):
    """Is `transformer-block.IPYNB`, graded in place of the notebook, left out of the ungraded files,
    and one directly in the student's folder called a notebook, as a lower-case one is?"""
    course = load_course(course_copy)
    layout = course.layout
    layout.submission("ada", ASSIGNMENT).mkdir(parents=True)
    (layout.submission("ada", ASSIGNMENT) / "transformer-block.IPYNB").write_text("{}")
    (layout.submitted_dir / "ada" / "Extra.IPYNB").write_text("{}")
    results = [graded(course, "ada", "transformer-block.IPYNB")]
    found = {u.path: u.reason for u in ungraded_files(course, course.assignment(ASSIGNMENT), results)}
    assert found == {"submitted/ada/Extra.IPYNB": "a notebook directly in the student's folder; expected "
                                                  "submitted/ada/transformer-block/Extra.IPYNB"}


def test_a_hidden_folder_in_submitted_is_named_but_jupyters_are_not(course_copy):
    """Is a hidden folder under submitted/ (`.ada`, never graded: no student id starts with '.') named
    with the reason, while the hidden folders of nbgrader, Jupyter or a desktop stay unnamed?"""
    course = load_course(course_copy)
    layout = course.layout
    for name in (".ada", ".ipynb_checkpoints", ".virtual_documents", ".Trash-1000"):
        layout.submission(name, ASSIGNMENT).mkdir(parents=True)
        (layout.submission(name, ASSIGNMENT) / NB).write_text("{}")
    assert [sid for sid, _ in submissions(course, ASSIGNMENT)] == []
    found = {u.path: u.reason for u in ungraded_files(course, course.assignment(ASSIGNMENT), [])}
    assert found == {"submitted/.ada": "a hidden folder (its name starts with '.'): no student id does, and nbgrader "
                                       "skips it, so nothing in it was graded; rename it to the student's id"}


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


def test_names_with_control_characters_are_written_out(course_copy):
    """Are a submitted file, a notebook one level too high and a student folder whose names hold
    control characters (escape sequences that would erase and rewrite the TA's terminal lines, a
    newline that would forge one) reported with them written out, the folder as no student id, and
    a renamed notebook graded in place (as results.json names it) not reported?"""
    course = load_course(course_copy)
    layout = course.layout
    fake = "x\x1b[2K\x1b[1A\x1b[32mFAKE\x1b[0m\x1b]0;pwned\x07.txt"
    stand_in = "tb\n\x1b[31m.ipynb"
    layout.submission("ada", ASSIGNMENT).mkdir(parents=True)
    for name in (NB, fake, "nl\nforged.txt"):
        (layout.submission("ada", ASSIGNMENT) / name).write_text("{}")
    layout.submission("bo", ASSIGNMENT).mkdir(parents=True)
    (layout.submission("bo", ASSIGNMENT) / stand_in).write_text("{}")
    layout.submission("ev\x1b[2Kil", ASSIGNMENT).mkdir(parents=True)
    (layout.submission("ev\x1b[2Kil", ASSIGNMENT) / NB).write_text("{}")
    (layout.submitted_dir / "xu").mkdir()
    (layout.submitted_dir / "xu" / "a\x1b[2K.ipynb").write_text("{}")
    bo = graded(course, "bo", stand_in)
    results = [graded(course, "ada", NB), SubmissionResult(student="bo", assignment=ASSIGNMENT, state="graded",
                                                           files=tuple(shown_name(f) for f in bo.files))]
    ungraded = ungraded_files(course, course.assignment(ASSIGNMENT), results)
    shown = {str(u) for u in ungraded}
    ada = layout.relative(layout.submission("ada", ASSIGNMENT))
    assert shown == {
        f"{ada}/x\\x1b[2K\\x1b[1A\\x1b[32mFAKE\\x1b[0m\\x1b]0;pwned\\x07.txt: not a notebook of the assignment, "
        f"so it was not graded",
        f"{ada}/nl\\x0aforged.txt: not a notebook of the assignment, so it was not graded",
        f"{layout.relative(layout.submitted_dir)}/ev\\x1b[2Kil: the folder's name holds a control character, so "
        f"nothing in it was graded; rename it to the student's id",
        f"{layout.relative(layout.submitted_dir / 'xu')}/a\\x1b[2K.ipynb: a notebook directly in the student's "
        f"folder; expected {layout.relative(layout.submission('xu', ASSIGNMENT))}/a\\x1b[2K.ipynb",
    }
    assert not any(NAME_CONTROL.search(line) for line in shown)
    assert [sid for sid, _ in submissions(course, ASSIGNMENT)] == ["ada", "bo"]     # ev... is no student


def test_a_folder_named_as_no_roster_id_can_be_is_named_and_not_graded(course_copy):
    """A folder laid out by hand from an LMS download, "smith,j" or "a b", names an id the roster refuses: is
    each reported once, saying which character and to rename it, and left out of the submissions graded?"""
    course = load_course(course_copy)
    layout = course.layout
    for sid in ("ada", "smith,j", "a b", "semi;colon", "back\\slash"):
        layout.submission(sid, ASSIGNMENT).mkdir(parents=True)
        (layout.submission(sid, ASSIGNMENT) / NB).write_text("{}")
    assert [sid for sid, _ in submissions(course, ASSIGNMENT)] == ["ada"]
    results = [graded(course, "ada", NB)]
    found = {u.path: u.reason for u in ungraded_files(course, course.assignment(ASSIGNMENT), results)}
    why = "which no roster id may hold, so nothing in it was graded; rename it to the student's id"
    assert found == {layout.relative(layout.submitted_dir / sid): f"the folder's name holds {what}, {why}"
                     for sid, what in (("smith,j", "a ','"), ("a b", "a space"), ("semi;colon", "a ';'"),
                                       ("back\\slash", "a '\\\\'"))}
