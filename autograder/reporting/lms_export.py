"""The grades as a learning management system imports them: one row per student, one column per
assignment (`nbgrader export --CourseCsvExport.lms=canvas` or `=moodle`).

Built from the rows of the course's long export (`nbgrader_hooks.CourseCsvExport`: one per assignment
and student, the score after the late penalty, TA overrides included, 0 without a submission), so both
files always carry the same numbers. What each LMS needs:

- Canvas (Grades > Import): the columns `Student`, `ID`, `SIS User ID`, `SIS Login ID`, `Section`,
  then one per assignment, titled with its name in Canvas (a title Canvas does not know makes a new
  assignment, so the file has no other columns), and a second row `Points Possible` giving each
  assignment's maximum. Canvas finds the student by `ID`, `SIS User ID` or `SIS Login ID`; `Student`
  is the name as Canvas writes it, "Last, First".
- Moodle (Grades > Import > CSV file): any columns; the import is told which one identifies the user
  (`Username`, `ID number` or `Email address` here) and which grade item each other column fills (or
  that it starts a new one). Every row must be a user: a row that matches none stops the whole
  import, so there is no `Points Possible` row.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config import RosterStudent

LMS_FORMATS = ("nbgrader", "canvas", "moodle")
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"
MOODLE_COLUMNS = ("First name", "Last name", "Username", "ID number", "Email address")


def lms_table(lms: str, assignments: Sequence[tuple[str, float]], rows: Sequence[Mapping[str, Any]],
              roster: Mapping[str, RosterStudent], lms_ids: Mapping[str, str]) -> list[list[str]]:
    """The CSV records (header first) of the `lms` file ('canvas' or 'moodle').

    `assignments`: (name, max score) of each exported assignment, in order; `rows`: the long export's
    rows (raw values; `student_id`, `first_name`, `last_name`, `email`, `assignment`, `score`);
    `roster`: the roster's students by id (their SIS ids and section); `lms_ids`: the gradebook's
    `lms_user_id` by student id. A student on no roster has only their id as `SIS Login ID`/`Username`."""
    scores: dict[tuple[str, str], Any] = {(r["student_id"], r["assignment"]): r["score"] for r in rows}
    students = {r["student_id"]: r for r in rows}          # one row each, for the name and email, in order
    names = [name for name, _ in assignments]
    if lms == "canvas":
        table = [[*CANVAS_COLUMNS, *names],
                 [CANVAS_POINTS_ROW, *[""] * (len(CANVAS_COLUMNS) - 1), *(number(m) for _, m in assignments)]]
    else:
        table = [[*MOODLE_COLUMNS, *names]]
    for sid, row in students.items():
        who = roster.get(sid) or RosterStudent(sid)
        login = who.sis_login_id or sid
        if lms == "canvas":
            ids = [spreadsheet_text(canvas_name(row)), lms_ids.get(sid) or who.lms_user_id, who.sis_user_id, login,
                   who.section]
        else:
            ids = [spreadsheet_text(str(row["first_name"] or "")), spreadsheet_text(str(row["last_name"] or "")),
                   login, who.sis_user_id, spreadsheet_text(str(row["email"] or ""))]
        table.append([*ids, *(number(scores.get((sid, name), 0.0)) for name in names)])
    return table


def canvas_name(row: Mapping[str, Any]) -> str:
    """The student as Canvas's own gradebook file names them: "Last, First", or the one name there is,
    or the student id."""
    last, first = str(row["last_name"] or ""), str(row["first_name"] or "")
    return ", ".join(n for n in (last, first) if n) or str(row["student_id"])


def number(value: Any) -> str:
    """A score as written in the exports: rounded to 6 decimals (the gradebook's sums of fractional
    points read like 97.10924299999999 otherwise)."""
    return str(round(float(value), 6))


def spreadsheet_text(text: str) -> str:
    """A name or email that a spreadsheet would take for a formula (starting with =, +, -, @, a tab or a
    carriage return) with a leading apostrophe, which spreadsheets show as text."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
