"""autograder.api's own helpers (the commands themselves are tested through the CLI)."""
from __future__ import annotations

from pathlib import Path

from autograder.api import case_clashes, future_stamp, released_line, run_line, summarise_changes
from autograder.config import load_course
from autograder.layout import CourseLayout
from autograder.validate import CellError, NotebookRun


def test_ids_that_differ_only_by_case_are_each_one_warning(course_copy):
    """Is a folder off the roster that the roster has in another case (`ada` for `Ada`: graded as a
    stranger while Ada gets nothing) one line, as are two folders differing only by case and two
    roster ids that do, while exact matches and unrelated ids say nothing?"""
    (course_copy / "roster.csv").write_text("id,first_name\nAda,Ada\nbob,Bob\nCy,Cy\ncy,Cyan\n")
    course = load_course(course_copy)
    assert case_clashes(course, ["ada", "bob", "zed"]) == [
        "roster.csv: line 5: id 'cy' differs from 'Cy' (line 4) only by case: they are two students, each graded "
        "from the folder of that exact name; if they are one, remove a line",
        "submitted/ada matches roster id Ada except for case: graded as a student off the roster, and Ada as one "
        "without a submission; rename the folder to Ada (or correct the roster) and run `course autograde` again"]
    (course_copy / "roster.csv").write_text("id\nAda\nbob\n")
    assert case_clashes(course, ["Ada", "bob"]) == []
    assert case_clashes(course, ["Zed", "bob", "zed"]) == [
        "submitted/Zed and submitted/zed differ only by case: graded as two students; if they are one, keep one folder"]


def test_ids_that_differ_only_by_unicode_normalisation_are_warned_of_as_a_case_clash_is_with_their_escapes(
        course_copy):
    """Is a folder 'zoë' written as 'e' and a combining diaeresis (NFD, as a Mac names files) beside the roster's
    'zoë' as one code point (NFC) warned of as a case clash is, each named with its escapes since they print
    alike, as are two such folders and two such roster lines, with case and form both differing said so?"""
    nfc, nfd = "zo\u00eb", "zoe\u0308"
    (course_copy / "roster.csv").write_text(f"id\n{nfc}\nRen\u00e9\nrene\u0301\n", encoding="utf-8")
    course = load_course(course_copy)
    roster_line = ("roster.csv: line 4: id 'rene\\u0301' differs from 'Ren\\xe9' (line 3) only by case and Unicode "
                   "normalisation: they are two students, each graded from the folder of that exact name; if they are "
                   "one, remove a line")
    sub = course.layout.relative(course.layout.submitted_dir)
    assert case_clashes(course, [nfd]) == [
        roster_line,
        f"{sub}/{nfd} ('zoe\\u0308') matches roster id {nfc} ('zo\\xeb') except for Unicode normalisation: "
        f"graded as a student off the roster, and {nfc} as one without a submission; rename the folder to {nfc} "
        f"('zo\\xeb') (or correct the roster) and run `course autograde` again"]
    (course_copy / "roster.csv").write_text("id\nada\n")
    assert case_clashes(course, [nfc, "ada"]) == []
    assert case_clashes(course, [nfd, nfc]) == [
        f"{sub}/{nfd} ('zoe\\u0308') and {sub}/{nfc} ('zo\\xeb') differ only by Unicode normalisation: "
        f"graded as two students; if they are one, keep one folder"]


def test_a_case_clash_with_both_folders_says_the_rostered_one_has_its_own(course_copy):
    """With submitted/Bob.Smith (the roster's) and submitted/bob.smith both there, does the warning about
    bob.smith say it is graded beside Bob.Smith's folder, never that Bob.Smith has no submission, in a
    run of the class and in one of bob.smith alone (Bob.Smith's folder found on disk), while a rostered id
    whose folder lacks the assignment is still one without a submission?"""
    layout = CourseLayout(course_copy)
    (course_copy / "roster.csv").write_text("id\nBob.Smith\n")
    course = load_course(course_copy)
    for sid in ("Bob.Smith", "bob.smith"):
        layout.submission(sid, "hw").mkdir(parents=True)
    beside = ("submitted/bob.smith matches roster id Bob.Smith except for case: graded as a student off the roster, "
              "beside submitted/Bob.Smith, the roster's; if they are one student, keep one folder, named Bob.Smith "
              "(or correct the roster), and run `course autograde` again")
    assert case_clashes(course, ["Bob.Smith", "bob.smith"]) == [
        beside, "submitted/Bob.Smith and submitted/bob.smith differ only by case: graded as two students; if they are "
                "one, keep one folder"]
    assert case_clashes(course, ["bob.smith"], "hw") == [beside]
    assert "Bob.Smith as one without a submission" in case_clashes(course, ["bob.smith"], "other")[0]


def test_a_new_roster_is_counted_in_the_gradebook_line_not_listed():
    """Do many students added to the gradebook make one short count naming a few, while a handful
    are listed, with cells counted by kind and other changes kept as they are?"""
    many = tuple(f"student s{i:03d}" for i in range(1, 151))
    line = summarise_changes(("assignment hw", *many, "autograder cell test_silu", "student ada: email"))
    assert line == ("assignment hw; 150 students (s001, s002, s003, ..., s150); student ada: email; "
                    "1 autograder cell added")
    assert summarise_changes(("student ada", "assignment hw", "student bo")) == "student ada; assignment hw; student bo"


def test_counts_in_the_release_and_validate_lines_agree_with_their_nouns():
    """Does one of anything read "1 cell", "1 line", "1 error" in the lines `course release` and
    `course validate` print, while other counts keep their plural?"""
    layout = CourseLayout(Path("/course"))
    notebook = layout.release("hw1") / "hw1.ipynb"
    assert released_line(Path(layout.relative(notebook)), 1) == (
        "released release/hw1/hw1.ipynb (leak check: 1 instructor-only line absent)")
    assert released_line(Path(layout.relative(notebook)), 12).endswith("(leak check: 12 instructor-only lines absent)")
    stub = CellError(index=3, ename="NotImplementedError", evalue="", grade_id="silu")
    one = NotebookRun(path=notebook, cells=1, errors=(stub,), seconds=2.0)
    assert run_line("release", one, layout.root) == (
        "release release/hw1/hw1.ipynb: 1 cell ran in 2.0 s, 1 cell stopped at unfinished stubs (NotImplementedError)")
    assert run_line("source", one, layout.root) == (
        "source  release/hw1/hw1.ipynb: 1 cell ran in a Jupyter kernel in 2.0 s, 1 error")
    many = NotebookRun(path=notebook, cells=9, errors=(), seconds=2.0)
    assert run_line("release", many, layout.root).endswith(
        "9 cells ran in 2.0 s, 0 cells stopped at unfinished stubs (none)")
    assert run_line("source", many, layout.root).endswith("9 cells ran in a Jupyter kernel in 2.0 s, 0 errors")


def test_the_validate_line_of_a_run_stopped_at_the_time_limit_counts_only_the_cells_that_ran():
    """When cell 5 of 44 ran out of time, does the line say 4 of 44 cells ran and cell 5 was stopped?"""
    layout = CourseLayout(Path("/course"))
    notebook = layout.source("hw1") / "hw1.ipynb"
    stopped = NotebookRun(path=notebook, cells=44, errors=(), seconds=31.3, timed_out=4)
    assert run_line("source", stopped, layout.root) == (
        "source  source/hw1/hw1.ipynb: 4 of 44 cells ran in a Jupyter kernel in 31.3 s, cell 5 stopped at the time "
        "limit, 0 errors")


def test_a_stamp_ahead_of_the_clock_is_one_line_naming_the_student_the_file_and_the_time(course_copy):
    """Is a submission whose time lies days ahead of this machine's clock one line naming the student, their
    timestamp.txt and the time (in UTC), how far ahead, the late penalty judged from it and how to grade it
    again; and are a time in the past, one within the tolerance for clock skew, and none at all not?"""
    import datetime as dt

    from autograder.grading.lateness import TIMESTAMP_FILE
    from autograder.grading.results import SubmissionResult

    course = load_course(course_copy)
    a = course.assignment("transformer-block")
    now = dt.datetime(2026, 12, 6, 19, 0, tzinfo=dt.UTC)
    stamp = course.layout.relative(course.layout.submission("ada", a.name) / TIMESTAMP_FILE)

    def result(submitted_at: str, late_penalty: float = 0.0) -> SubmissionResult:
        return SubmissionResult(student="ada", assignment=a.name, state="graded", submitted_at=submitted_at,
                                late_penalty=late_penalty)

    what, line = future_stamp(course, a, result("2026-12-14T19:00:00+01:00", 30.0), now)
    assert what == f"ada: {stamp} says 2026-12-14 18:00:00 UTC"
    assert line == (f"{what}, 7 days 23 hours ahead of this machine's clock (more than the 5 minutes allowed for "
                    f"clock skew): the clock of the machine that collected it was ahead (or this one's is behind), "
                    f"or the file was edited. Graded as usual with that time (a late penalty of 30 points); once "
                    f"the file is corrected, `course autograde transformer-block --student ada` grades it again "
                    f"(see docs/grading.md, Late submissions).")
    assert "(no late penalty)" in future_stamp(course, a, result("2026-12-06T20:00:00+00:00"), now)[1]
    for quiet in ("2026-11-16T18:00:00+00:00", "2026-12-06T19:04:00+00:00", "", "not a time"):
        assert future_stamp(course, a, result(quiet), now) == ("", ""), quiet


def test_a_resubmission_without_timestamp_or_secret_leaves_no_earlier_copy_of_them(course_copy):
    """A new submission without timestamp.txt and submission_secret.txt, graded after one with them: does its
    copy in autograded/ lose the earlier submission's two files (its time and secret would pass for this
    one's), and the feedback folder the copies taken from them, while a file a TA put in either folder and
    this submission's notebook stay; and does an unchanged submission that lost its secret get a new copy?"""
    import shutil

    from autograder import api
    from autograder.grading.lateness import TIMESTAMP_FILE
    from autograder.grading.results import SubmissionResult
    from autograder.intake import SECRET_FILE

    course = load_course(course_copy)
    a = course.assignment("transformer-block")
    layout = course.layout
    notebook = f"{a.name}.ipynb"
    folder = layout.submission("ada", a.name)
    folder.mkdir(parents=True)
    shutil.copy(layout.release(a.name) / notebook, folder / notebook)
    (folder / TIMESTAMP_FILE).write_text("2026-11-16 20:00:00.000000 UTC\n")
    (folder / SECRET_FILE).write_text("earlier-secret\n")
    result = SubmissionResult(student="ada", assignment=a.name, state="graded", files=(str(folder / notebook),))
    copies, pages = layout.autograded("ada", a.name), layout.feedback("ada", a.name)
    copies.mkdir(parents=True)
    pages.mkdir(parents=True)
    api.write_formgrader_copy(course, a, "ada", folder, result)
    api._copy_bookkeeping(course, a, "ada", pages)
    assert {p.name for p in copies.iterdir()} == {notebook, TIMESTAMP_FILE, SECRET_FILE}
    assert {p.name for p in pages.iterdir()} == {TIMESTAMP_FILE, SECRET_FILE}
    (copies / "ta-notes.txt").write_text("see the office-hours notes\n")
    (pages / "ta-notes.txt").write_text("to discuss in class\n")

    (folder / SECRET_FILE).unlink()            # the notebook and stamp unchanged: not graded afresh
    assert api.needs_formgrader_copy(course, a, "ada", folder, fresh=False, refused=False)
    (folder / TIMESTAMP_FILE).unlink()
    api.write_formgrader_copy(course, a, "ada", folder, result)
    api._copy_bookkeeping(course, a, "ada", pages)
    assert {p.name for p in copies.iterdir()} == {notebook, "ta-notes.txt"}
    assert {p.name for p in pages.iterdir()} == {"ta-notes.txt"}
    assert not api.needs_formgrader_copy(course, a, "ada", folder, fresh=False, refused=False)
