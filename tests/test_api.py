"""autograder.api's own helpers (the commands themselves are tested through the CLI)."""
from __future__ import annotations

from autograder.api import summarise_changes


def test_a_new_roster_is_counted_in_the_gradebook_line_not_listed():
    """Do many students added to the gradebook make one short count naming a few, while a handful
    are listed, with cells counted by kind and other changes kept as they are?"""
    many = tuple(f"student s{i:03d}" for i in range(1, 151))
    line = summarise_changes(("assignment hw", *many, "autograder cell test_silu", "student ada: email"))
    assert line == ("assignment hw; 150 students (s001, s002, s003, ..., s150); student ada: email; "
                    "1 autograder cell added")
    assert summarise_changes(("student ada", "assignment hw", "student bo")) == "student ada; assignment hw; student bo"
