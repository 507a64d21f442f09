"""The grades as a learning management system imports them: one row per student, one column per
assignment (`nbgrader export --CourseCsvExport.lms=canvas` or `=moodle`).

Built from the rows of the course's long export (`nbgrader_hooks.CourseCsvExport`: one per assignment
and student, the score after the late penalty, TA overrides included, 0 without a submission), so both
files always carry the same numbers. What each LMS needs:

- Canvas (Grades > Import): the columns `Student`, `ID`, `SIS User ID`, `SIS Login ID`, `Section`,
  then one per assignment, titled with its name in Canvas (a title Canvas does not know makes a new
  assignment, so the file has no other columns), and a second row `Points Possible` giving each
  assignment's maximum. Canvas finds each row's student by `ID`, `SIS User ID` or `SIS Login ID`, row
  by row; `SIS Login ID` is never empty here (the student id when the roster has no login), so every
  row names its student. `Student` is the name as Canvas writes it, "Last, First".
- Moodle (Grades > Import > CSV file): any columns; the import is told which one identifies the user
  (`Username`, `ID number` or `Email address` here) and which grade item each other column fills (or
  that it starts a new one). Every row must be a user: a row that matches none stops the whole
  import, so there is no `Points Possible` row. Moodle's importer (grade/import/csv/classes/load_data.php)
  looks a user up only when the mapped field is not empty and keeps the user of the row before
  otherwise: a first row with an empty field stops the import, a later one gives its grades to the
  previous row's student. So `Username` (never empty) is always written, and `ID number` and `Email
  address` only when every row has one (`LmsFile.warnings` says which column was left out, and for whom).

Cells a spreadsheet would run as a formula (starting with =, +, -, @, a tab or a carriage return): a
name or a section, which nothing matches on, gets a leading apostrophe (`spreadsheet_text`); an
identifier the LMS matches on (`ID`, `SIS User ID`, `SIS Login ID`, `Username`, `ID number`, `Email
address`) is written exactly, since an apostrophe would become part of it and match no user, and
`LmsFile.warnings` names it (`formula_warning`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import RosterStudent
from ..text import shown_name

LMS_FORMATS = ("nbgrader", "canvas", "moodle")
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"
MOODLE_COLUMNS = ("First name", "Last name", "Username", "ID number", "Email address")
MOODLE_OPTIONAL = {"ID number": "sis_user_id", "Email address": "email"}   # written only when every row has one
# The columns an LMS matches a row's student on: written exactly, never with an apostrophe.
IDENTIFIERS = frozenset({"ID", "SIS User ID", "SIS Login ID", "Username", "ID number", "Email address"})
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")      # what makes a spreadsheet read a cell as a formula


@dataclass(frozen=True)
class LmsFile:
    """What `lms_table` gives: the CSV records (header first) and a line per thing the TA should know."""
    records: list[list[str]]
    warnings: tuple[str, ...]


def lms_table(lms: str, assignments: Sequence[tuple[str, float]], rows: Sequence[Mapping[str, Any]],
              roster: Mapping[str, RosterStudent], lms_ids: Mapping[str, str]) -> LmsFile:
    """The CSV records of the `lms` file ('canvas' or 'moodle'), and its warnings.

    `assignments`: (name, max score) of each exported assignment, in order; `rows`: the long export's
    rows (raw values; `student_id`, `first_name`, `last_name`, `email`, `assignment`, `score`);
    `roster`: the roster's students by id (their SIS ids and section); `lms_ids`: the gradebook's
    `lms_user_id` by student id. A student on no roster has only their id as `SIS Login ID`/`Username`.
    Moodle's `ID number` and `Email address` columns are left out unless every student has one."""
    scores: dict[tuple[str, str], Any] = {(r["student_id"], r["assignment"]): r["score"] for r in rows}
    students = {r["student_id"]: r for r in rows}          # one row each, for the name and email, in order
    names = [name for name, _ in assignments]
    columns: dict[str, list[str]] = {}                     # column -> a value per student, in order
    for sid, row in students.items():
        who = roster.get(sid) or RosterStudent(sid)
        login = who.sis_login_id or sid
        if lms == "canvas":
            ids = {"Student": spreadsheet_text(canvas_name(row)), "ID": lms_ids.get(sid) or who.lms_user_id,
                   "SIS User ID": who.sis_user_id, "SIS Login ID": login, "Section": spreadsheet_text(who.section)}
        else:
            ids = {"First name": spreadsheet_text(str(row["first_name"] or "")),
                   "Last name": spreadsheet_text(str(row["last_name"] or "")), "Username": login,
                   "ID number": who.sis_user_id, "Email address": str(row["email"] or "").strip()}
        for column, value in ids.items():
            columns.setdefault(column, []).append(value)
    sids = list(students)
    warnings = []
    header = list(CANVAS_COLUMNS if lms == "canvas" else MOODLE_COLUMNS)
    for column in MOODLE_OPTIONAL if lms == "moodle" else ():
        missing = [sid for sid, value in zip(sids, columns.get(column, [])) if not value.strip()]
        if missing:
            header.remove(column)
            warnings.append(f"{column}: left out of the Moodle file, since {listed(missing)} "
                            f"{'has' if len(missing) == 1 else 'have'} none (Moodle's import gives a row whose "
                            f"{column} is empty the grades of the row before it); map Username, or fill the "
                            f"roster's {MOODLE_OPTIONAL[column]} column")
    for column in header:
        if column in IDENTIFIERS:
            line = formula_warning(column, zip(sids, columns.get(column, [])), "the LMS matches on it")
            if line:
                warnings.append(line)
    table = [[*header, *names]]
    if lms == "canvas":
        table.append([CANVAS_POINTS_ROW, *[""] * (len(header) - 1), *(number(m) for _, m in assignments)])
    for i, sid in enumerate(sids):
        table.append([*(columns[c][i] for c in header), *(number(scores.get((sid, name), 0.0)) for name in names)])
    return LmsFile(table, tuple(warnings))


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
    """A name (text nothing matches on) that a spreadsheet would take for a formula (starting with =, +, -,
    @, a tab or a carriage return) with a leading apostrophe, which spreadsheets show as text."""
    return "'" + text if text.startswith(FORMULA_START) else text


def formula_warning(column: str, values: Iterable[tuple[str, str]], why: str) -> str | None:
    """One line naming the students whose `column` (an identifier, written exactly because `why`) a
    spreadsheet would run as a formula, or None. `values`: (student id, value) pairs."""
    risky = [sid for sid, value in values if value.startswith(FORMULA_START)]
    if not risky:
        return None
    return (f"{column}: {listed(risky)} {'starts' if len(risky) == 1 else 'start'} with =, +, -, @, a tab or a "
            f"carriage return, and {'is' if len(risky) == 1 else 'are'} written exactly since {why}: import the "
            f"file as written, without opening and saving it in a spreadsheet, which would run it as a formula")


def listed(students: Sequence[str], shown: int = 5) -> str:
    """Student ids for a one-line message: "ada, bob and 3 more", control characters written out."""
    names = [shown_name(s) for s in students[:shown]]
    if len(students) > shown:
        names.append(f"{len(students) - shown} more")
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
