"""autograder.api's own helpers (the commands themselves are tested through the CLI)."""
from __future__ import annotations

from autograder.api import case_clashes, summarise_changes
from autograder.config import load_course


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


def test_a_new_roster_is_counted_in_the_gradebook_line_not_listed():
    """Do many students added to the gradebook make one short count naming a few, while a handful
    are listed, with cells counted by kind and other changes kept as they are?"""
    many = tuple(f"student s{i:03d}" for i in range(1, 151))
    line = summarise_changes(("assignment hw", *many, "autograder cell test_silu", "student ada: email"))
    assert line == ("assignment hw; 150 students (s001, s002, s003, ..., s150); student ada: email; "
                    "1 autograder cell added")
    assert summarise_changes(("student ada", "assignment hw", "student bo")) == "student ada; assignment hw; student bo"
