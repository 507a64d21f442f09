"""The grades as a learning management system imports them: one row per student, one column per
assignment (`nbgrader export --CourseCsvExport.lms=canvas`, `=moodle` or `=blackboard`).

Built from the rows of the course's long export (`nbgrader_hooks.CourseCsvExport`: one per assignment
and student, the score after the late penalty, TA overrides included, 0 without a submission), so both
files always carry the same numbers. What each importer does with the file, as read in its source
(Canvas: `app/models/gradebook_importer.rb` in instructure/canvas-lms and the upload script that
creates new assignments; Moodle: `grade/import/csv/classes/load_data.php`, `grade/import/lib.php`,
`lib/csvlib.class.php` and the `get_record` of `lib/dml`), and what this module does about it:

- Canvas (Grades > Import). The header must start `Student`, `ID`, then either `SIS Login ID` or
  `SIS User ID`, `SIS Login ID`, and end its student columns with `Section`; every later column is an
  assignment, found by its exact title (a title Canvas does not know makes a new assignment, so the
  file has no other columns). A row whose first cell holds `Points Possible` is not a student: its
  cells give the points of the assignments the import creates (an existing assignment keeps its
  own), so the file writes it second, as Canvas's own export does. Each row's student is looked up
  on its own, in order: `ID` (read as a whole number: Canvas's own user id), then `SIS User ID`,
  then `SIS Login ID` (each exact, an empty cell skipped), then the `Student` name; a row matching
  nobody is offered as an unknown student. `SIS Login ID` is never empty here (the student id when
  the roster has no login). Two rows that find the same student both go to that student, the later
  row's grades standing, and the other student's are lost; so an `ID` or `SIS User ID` two students
  share (compared trimmed and ignoring case and Unicode normalisation, to be safe) is left empty for
  them (Canvas goes on to the next column), an `ID` that is not a number is left empty (Canvas would
  read "12ab" as 12, someone else), and a shared `SIS Login ID` stops the export (`ExportError`).
  `Student` is "Last, First", as Canvas's export writes it.
- Moodle (Grades > Import > CSV file): any columns; the import is told which one identifies the user
  (`Username`, `ID number` or `Email address` here) and which grade item each other column fills (or
  that it starts a new one). Every row must be a user: a row that matches none stops the whole
  import, so there is no `Points Possible` row. The importer looks a user up only when the mapped
  field is not empty to PHP ('' or '0') and keeps the user of the row before otherwise: a first such
  row stops the import, a later one gives its grades to the previous row's student. Two rows with the
  same value find the same user (with several users of that value Moodle takes one, noting it only
  in its debugging output), and the later row's grades replace the earlier's. So `Username` (never
  empty) is always written, and a shared or '0' `Username` stops the export; `ID number` and `Email
  address` are written only when every row has its own (`LmsFile.warnings` says which column was
  left out, and for whom; a column no row has a value for, as from a roster without it, is left out
  without a word). Values are compared trimmed and ignoring case, as Moodle's database usually
  compares them, and Unicode normalisation, to be safe. The file has no maximum: a grade item the
  import creates is out of 100, and Moodle caps a grade at its item's maximum (and refuses the whole
  file for a grade above 100 unless the site allows unlimited grades), so a warning names each
  assignment out of other points.
- Blackboard Learn (Original course view: Grade Center > Work Offline > Upload; Ultra: Gradebook >
  Upload grades), as its help pages describe the file (its source is not public): a header row,
  then a row per student, matched on `Username` alone (a row whose Username is not enrolled in the
  course is not processed, and changed names are not taken); the header's other columns are those of
  Blackboard's own download, `Last Name`, `First Name`, `Username`, `Student ID` (here the roster's
  sis_user_id, shown, never matched on), leaving out its `Last Access` and `Availability`. A column
  is tied to an existing gradable item only by the Column ID its download writes at the end of the
  header (`Name [Total Pts: 100 Score] |123456`), which the TA gives in
  `CourseCsvExport.blackboard_columns` (`blackboard_header`, checked by `blackboard_column_problem`);
  a column headed by a name alone is a new column at every upload (the Original view makes it a text
  column with 0 points possible), and a warning (`blackboard_columns_warning`) names those, with
  their points. A comma-delimited file must have every field quoted (`LmsFile.quote_all`);
  Blackboard's own download is tab-delimited (`.xls`) or comma-delimited, and its upload takes
  either. `Username` is written as the other logins are: never empty, a shared one stops the
  export (`ExportError`), compared trimmed and ignoring case and Unicode normalisation.

Both importers read UTF-8, with or without a byte-order mark (Moodle removes it; Canvas finds
`Student` within the first header cell), and quoted fields holding commas, quotes or newlines
(Blackboard's help pages name no encoding: its file is written as UTF-8 too). Two
readings differ from the CSV the file is written as:
- Canvas takes any row whose first cell contains `Points Possible` (that case) for the points row, so a
  student whose name contains it would be no row at all and their grades would become the points of new
  assignments: the name is written with `Points possible` (Canvas finds the row by its SIS Login ID,
  never empty) and a warning names the student.
- Moodle reads the file with PHP's `fgetcsv`, whose escape character is a backslash: inside a quoted
  field a backslash before a quote keeps the quote from closing it, so a field written quoted with a
  backslash before a quote or at its end swallows the cells after it, and Moodle refuses the file
  for its uneven rows (`php_misreads`). A name (never matched on) is written with `/` for its
  backslashes and a warning; `Username` stops the export (`ExportError`); `ID number` and `Email
  address` are left out, as for a shared value.
Scores are plain decimals (`number`: "0.00005", never "5e-05"). A student in the gradebook but not
on a roster the course has (one who joined late, or left) is left out of the file, with a warning naming
them: the LMS matches such a row only if their student id is their login, a Moodle row that matches no
user stops the whole import, and Canvas offers it as an unknown student. The warning tells how to add them
to the roster, how to take a student who left the course out of the gradebook, and how to write them all
the same (`include_unrostered`: the gradebook's name, and email, and their student id as the login, with
a warning). The columns written only when every row has its own value (Moodle's `ID number` and `Email
address`) are decided from the rows written. A student without a submission is exported with 0, as in
nbgrader's export; while their due date (or extension) is still ahead a warning names them, since
the LMS would show that 0 as their grade.

Cells a spreadsheet would run as a formula (starting with =, +, -, @, a tab or a carriage return): a
name, a section or Blackboard's `Student ID`, which nothing matches on, gets a leading apostrophe
(`spreadsheet_text`); an identifier the LMS matches on (`ID`, `SIS User ID`, `SIS Login ID`,
`Username`, `ID number`, `Email address`) is written exactly, since an apostrophe would become part
of it and match no user, and `LmsFile.warnings` names it (`formula_warning`).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import RosterStudent, roster_id_problem, roster_typo
from ..errors import ExportError
from ..text import first_few, id_difference, id_key, lookalikes, shown_name, sorted_ids, spelt_id

LMS_FORMATS = ("nbgrader", "canvas", "moodle", "blackboard")
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"
MOODLE_COLUMNS = ("First name", "Last name", "Username", "ID number", "Email address")
BLACKBOARD_COLUMNS = ("Last Name", "First Name", "Username", "Student ID")    # its download's, in its order
STUDENT_COLUMNS = {"canvas": CANVAS_COLUMNS, "moodle": MOODLE_COLUMNS, "blackboard": BLACKBOARD_COLUMNS}
MOODLE_OPTIONAL = ("ID number", "Email address")     # written only when every row has its own
# The columns an LMS matches a row's student on (written exactly, never with an apostrophe), each with
# the roster column it comes from.
ROSTER_FIELD = {"ID": "lms_user_id", "SIS User ID": "sis_user_id", "SIS Login ID": "sis_login_id",
                "Username": "sis_login_id", "ID number": "sis_user_id", "Email address": "email"}
IDENTIFIERS = frozenset(ROSTER_FIELD)
# The column each file has for the roster's sis_user_id (Blackboard's `Student ID`: shown, never matched on).
SIS_USER_COLUMN = {"canvas": "SIS User ID", "moodle": "ID number", "blackboard": "Student ID"}
# The login column, never empty (the student id without a login): the one every LMS here can match a row on.
LOGIN = {"canvas": "SIS Login ID", "moodle": "Username", "blackboard": "Username"}
MOODLE_MAX = 100.0                   # the maximum of a grade item Moodle's import creates
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")      # what makes a spreadsheet read a cell as a formula


@dataclass(frozen=True)
class LmsFile:
    """What `lms_table` gives: the CSV records (header first), a line per thing the TA should know, and
    whether every field is to be quoted (Blackboard asks that of a comma-delimited file; the others quote
    a field only when it must be)."""
    records: list[list[str]]
    warnings: tuple[str, ...]
    quote_all: bool = False


def lms_table(lms: str, assignments: Sequence[tuple[str, float]], rows: Sequence[Mapping[str, Any]],
              roster: Mapping[str, RosterStudent], lms_ids: Mapping[str, str],
              now: dt.datetime | None = None, include_unrostered: bool = False,
              column_ids: Mapping[str, str] | None = None) -> LmsFile:
    """The CSV records of the `lms` file ('canvas', 'moodle' or 'blackboard'), and its warnings.

    `assignments`: (name, max score) of each exported assignment, in order; `rows`: the long export's
    rows (raw values; `student_id`, `first_name`, `last_name`, `email`, `assignment`, `score`,
    `submitted` (whether the gradebook holds a submission: its `timestamp` may be empty all the same, when
    the student's timestamp.txt was missing or unreadable), and where known `duedate` and
    `extended_duedate`, naive UTC as nbgrader keeps them);
    `roster`: the roster's students by id (their SIS ids and section); `lms_ids`: the gradebook's
    `lms_user_id` by student id. A student on no roster has only their id as `SIS Login ID`/`Username`.
    Blackboard's file has the names, `Username` (the one column it matches on) and `Student ID`, every
    field quoted (`LmsFile.quote_all`); `column_ids` (`CourseCsvExport.blackboard_columns`, checked by
    `blackboard_column_problem`) gives the Column ID of an assignment's existing Blackboard column, whose
    header is then written as Blackboard's download writes it (`blackboard_header`).
    Moodle's `ID number` and `Email address` columns are left out unless every student has their own (with a
    warning, unless no student has one);
    Canvas's `ID` and `SIS User ID` are left empty where they cannot tell students apart. An
    ExportError (one line) when the login column cannot: no file would import right. `now` (naive
    UTC, default the clock) tells which students without a submission are not due yet. A student in the
    gradebook but not on `roster` (when there is one) is left out, with a warning, unless
    `include_unrostered`."""
    off_roster = [sid for sid in dict.fromkeys(r["student_id"] for r in rows) if roster and sid not in roster]
    typos = [*roster_clashes(roster, off_roster, include_unrostered), *roster_typos(rows, roster, off_roster)]
    if off_roster and not include_unrostered:
        rows = [r for r in rows if r["student_id"] not in set(off_roster)]
    scores: dict[tuple[str, str], Any] = {(r["student_id"], r["assignment"]): r["score"] for r in rows}
    students = {r["student_id"]: r for r in rows}          # one row each, for the name and email, in order
    names = [name for name, _ in assignments]
    columns: dict[str, list[str]] = {}                     # column -> a value per student, in order
    for sid, row in students.items():
        who = roster.get(sid) or RosterStudent(sid)
        login = who.sis_login_id or sid
        if lms == "canvas":
            ids = {"Student": spreadsheet_text(canvas_name(row).replace(CANVAS_POINTS_ROW, "Points possible")),
                   "ID": (lms_ids.get(sid) or who.lms_user_id).strip(), "SIS User ID": who.sis_user_id,
                   "SIS Login ID": login, "Section": spreadsheet_text(who.section)}
        elif lms == "moodle":
            ids = {"First name": moodle_name(str(row["first_name"] or "")),
                   "Last name": moodle_name(str(row["last_name"] or "")), "Username": login,
                   "ID number": who.sis_user_id, "Email address": str(row["email"] or "").strip()}
        else:                                              # Blackboard matches on Username alone
            ids = {"Last Name": spreadsheet_text(str(row["last_name"] or "")),
                   "First Name": spreadsheet_text(str(row["first_name"] or "")), "Username": login,
                   "Student ID": spreadsheet_text(who.sis_user_id)}
        for column, value in ids.items():
            columns.setdefault(column, []).append(value)
    sids = list(students)
    header = list(STUDENT_COLUMNS[lms])
    login_problem(lms, sids, columns.get(LOGIN[lms], []))
    warnings = list(filter(None, [name_warning(lms, sids, students)]))
    if lms == "moodle":
        for column in MOODLE_OPTIONAL:
            values = columns.get(column, [])
            if values and not any(value.strip() for value in values):
                header.remove(column)       # nobody has one (a roster without the column): nothing to match on
                continue
            line = moodle_column_problem(column, sids, values)
            if line:
                header.remove(column)
                warnings.append(line)
    elif lms == "canvas":
        warnings += canvas_blanked_ids(sids, columns)
    for column in header:
        if column in IDENTIFIERS:
            line = formula_warning(column, zip(sids, columns.get(column, [])), "the LMS matches on it")
            if line:
                warnings.append(line)
    unlisted = [sid for sid in off_roster if roster_id_problem(sid) is not None]    # no roster can hold them
    addable = [sid for sid in off_roster if sid not in unlisted]
    if addable and include_unrostered:
        held: dict[str, list[str]] = {
            column: [sid for sid, value in zip(sids, columns[column]) if sid in addable and value.strip()]
            for column in ("ID", "Email address") if column in header}
        warnings.append(off_roster_warning(lms, addable, held, roster))
    elif addable:
        warnings.append(left_out_warning(lms, addable, roster))
    warnings += [unlisted_warning(sid, include_unrostered) for sid in sorted_ids(unlisted)]
    warnings += typos
    if lms == "moodle":
        warnings += filter(None, [moodle_maxima_warning(assignments), moodle_over_warning(names, sids, scores)])
    elif lms == "blackboard":
        warnings += filter(None, [blackboard_columns_warning(assignments, column_ids or {})])
    warnings += not_due_yet(rows, now or dt.datetime.now(dt.UTC).replace(tzinfo=None))
    table = [[*header, *(blackboard_header(name, top, (column_ids or {}).get(name, "")) if lms == "blackboard"
                         else name for name, top in assignments)]]
    if lms == "canvas":
        table.append([CANVAS_POINTS_ROW, *[""] * (len(header) - 1), *(number(m) for _, m in assignments)])
    for i, sid in enumerate(sids):
        table.append([*(columns[c][i] for c in header), *(number(scores.get((sid, name), 0.0)) for name in names)])
    return LmsFile(table, tuple(warnings), quote_all=lms == "blackboard")


def same_text(value: str) -> str:
    """An identifier as an LMS's database compares it, to be safe: trimmed, ignoring case and Unicode
    normalisation (`text.id_key`: 'zoë' as one code point or as 'e' and a combining mark, which print alike
    and which a database may or may not take for one)."""
    return id_key(value.strip())


def shared_values(sids: Sequence[str], values: Sequence[str],
                  key: Callable[[str], Any] = same_text) -> list[tuple[str, list[str]]]:
    """(value, students) for each non-empty value more than one student has (compared by `key`), in order."""
    groups: dict[Any, tuple[str, list[str]]] = {}
    for sid, value in zip(sids, values):
        if value.strip():
            groups.setdefault(key(value), (value, []))[1].append(sid)
    return [(value, who) for value, who in groups.values() if len(who) > 1]


def shared_text(groups: Sequence[tuple[str, list[str]]], shown: int = 3, *, ids: bool = True) -> str:
    """"ada and bob share 'S1'; cy and dee share 'S2'" for a one-line message (`ids` false: the names of
    other things than students, listed in the order given)."""
    parts = [f"{listed(who, ids=ids)} share '{shown_name(value.strip())}'" for value, who in groups[:shown]]
    if len(groups) > shown:
        parts.append(f"{len(groups) - shown} more values are shared")
    return "; ".join(parts)


def php_empty(value: str) -> bool:
    """Whether Moodle's importer takes a (trimmed) cell for no value at all: PHP's empty() is true of
    '' and of '0'."""
    return value.strip() in ("", "0")


def login_problem(lms: str, sids: Sequence[str], logins: Sequence[str]) -> None:
    """An ExportError when the login column (`SIS Login ID`, `Username`: always written, the last
    identifier an LMS has) cannot tell the students apart: a value two share, or a Moodle '0'."""
    column, system = LOGIN[lms], lms.capitalize()
    groups = shared_values(sids, logins)
    if groups:
        raise ExportError(f"{column}: {shared_text(groups)} (the roster's sis_login_id, or the student id without "
                          f"one), so {system}'s import would give their rows to one student, the later row's grades "
                          f"replacing the other's; no file written: give each student their own sis_login_id")
    zero = [sid for sid, login in zip(sids, logins) if lms == "moodle" and php_empty(login)]
    if zero:
        raise ExportError(f"Username: {listed(zero)} {'is' if len(zero) == 1 else 'are'} '0', which Moodle's import "
                          f"takes for no username (the row's grades would go to the student above it); no file "
                          f"written: give them a sis_login_id in the roster")
    misread = [sid for sid, login in zip(sids, logins) if lms == "moodle" and php_misreads(login)]
    if misread:
        raise ExportError(f"Username: {listed(misread)} {'has' if len(misread) == 1 else 'have'} a backslash before "
                          f"a quote or at the end of a quoted value, which Moodle's CSV reader takes for an escape "
                          f"(the row's cells would run together); no file written: correct their sis_login_id")


def moodle_column_problem(column: str, sids: Sequence[str], values: Sequence[str]) -> str | None:
    """The warning for a Moodle identifier column that cannot be written (some student has none, or
    two share one), or None."""
    missing = [sid for sid, value in zip(sids, values) if php_empty(value)]
    groups = shared_values(sids, values)
    misread = [sid for sid, value in zip(sids, values) if php_misreads(value)]
    if misread:
        return (f"{column}: left out of the Moodle file, since {listed(misread)} "
                f"{'has' if len(misread) == 1 else 'have'} a backslash before a quote or at the end of a quoted "
                f"value, which Moodle's CSV reader takes for an escape (the row's cells would run together); "
                f"map Username, or correct the roster's {ROSTER_FIELD[column]} column")
    if not missing and not groups:
        return None
    reasons, effects = [], []
    if missing:
        zero = " ('0' is none to Moodle)" if any(value.strip() == "0" for value in values) else ""
        reasons.append(f"{listed(missing)} {'has' if len(missing) == 1 else 'have'} none{zero}")
        effects.append(f"gives a row whose {column} is empty the grades of the row before it")
    if groups:
        reasons.append(shared_text(groups))
        effects.append(f"gives the rows of one {column} to one user, the later row's grades replacing the earlier's")
    fix = " and ".join(verb for verb, wanted in (("fill", missing), ("correct", groups)) if wanted)
    return (f"{column}: left out of the Moodle file, since {' and '.join(reasons)} (Moodle's import "
            f"{' and '.join(effects)}); map Username, or {fix} the roster's {ROSTER_FIELD[column]} column")


def canvas_id_key(value: str) -> int:
    """A Canvas `ID` as Canvas's import reads it: a whole number."""
    return int(value)


def canvas_blanked_ids(sids: Sequence[str], columns: dict[str, list[str]]) -> list[str]:
    """Empties, in `columns`, each `ID` that is not a whole number and each `ID` or `SIS User ID` that
    two students share (Canvas goes on to the next identifier of a row whose cell is empty); a
    warning line for each column changed."""
    lines = []
    ids = columns.get("ID", [])
    odd = sorted((i for i, value in enumerate(ids) if value and not (value.isascii() and value.isdigit())),
                 key=lambda i: sids[i].casefold())            # as `listed` names them: the first one's shown
    if odd:
        lines.append(f"ID: left empty for {listed([sids[i] for i in odd])}, whose lms_user_id "
                     f"('{shown_name(ids[odd[0]])}'{', ...' if len(odd) > 1 else ''}) is not a whole number: Canvas "
                     f"reads ID as its own user id, a number (of '12ab' it keeps 12, another student), so these rows "
                     f"are matched on SIS User ID or SIS Login ID; correct the roster's lms_user_id column")
        for i in odd:
            ids[i] = ""
    for column, key, after in (("ID", canvas_id_key, "SIS User ID or SIS Login ID"),
                               ("SIS User ID", same_text, "SIS Login ID")):
        values = columns.get(column, [])
        groups = shared_values(sids, values, key)
        if not groups:
            continue
        blanked = {sid for _, who in groups for sid in who}
        lines.append(f"{column}: left empty for {listed([s for s in sids if s in blanked])}, since "
                     f"{shared_text(groups)} (Canvas's import would give their rows to one student, the later "
                     f"row's grades replacing the other's), so these rows are matched on {after}; correct the "
                     f"roster's {ROSTER_FIELD[column]} column")
        for i, sid in enumerate(sids):
            if sid in blanked:
                values[i] = ""
    return lines


def off_roster_warning(lms: str, students: Sequence[str], held: Mapping[str, Sequence[str]],
                       roster: Iterable[str] = ()) -> str:
    """The line for students in the gradebook but not on the course's roster, written all the same
    (`include_unrostered`), saying what their rows hold: the gradebook's name, the student id as the login,
    no SIS id, and where the file has the column and the gradebook the value (`held`: the students of
    `students` with one, by column) Canvas's `ID` (the gradebook's lms_user_id) or Moodle's email. An id
    that prints like one of `roster` (the roster's ids) is named with its escapes."""
    def whose(column: str, what: str) -> list[str]:
        who = held.get(column, [])
        if not who:
            return []
        return [what + ("" if len(who) == len(students) else f" (for {listed(who)})")]

    given = ["the gradebook's name", *whose("Email address", "the gradebook's email"),
             *whose("ID", "the gradebook's lms_user_id as ID")]
    login = f"the student id as {LOGIN[lms]}, no {SIS_USER_COLUMN[lms]}"
    if lms == "blackboard":
        match = ("which Blackboard matches only if it is the login (it processes no row whose Username is not "
                 "enrolled in the course)")
    elif lms == "moodle":
        by_email = ", or by the email where Email address is mapped" if held.get("Email address") else ""
        match = (f"which Moodle matches only if it is the login{by_email}, and a row that matches no user stops the "
                 f"whole Moodle import")
    elif held.get("ID"):
        match = "which Canvas matches only if it is the login when the row has no ID (a row with one is matched by it)"
    else:
        match = "which Canvas matches only if it is the login"
    return (f"{listed(students, beside=roster)}: in the gradebook but not on the roster, written (include_unrostered) "
            f"with {', '.join(given)} and {login}, {match}; add them to the roster with their LMS ids, or "
            f"take a student who left the course out of the gradebook with `nbgrader db student remove <id> --force` "
            f"(--force: their grades are deleted too)")


def roster_typos(rows: Sequence[Mapping[str, Any]], roster: Mapping[str, RosterStudent],
                 off_roster: Sequence[str]) -> list[str]:
    """A line for each student of `off_roster` whose id is close to that of a roster student without a
    submission of an assignment they submitted (config.roster_typo): most likely one student, whose
    grade the LMS file would leave out and give the other a 0 for."""
    submitted: dict[str, set[str]] = {}
    for row in rows:
        if row.get("submitted"):
            submitted.setdefault(row["student_id"], set()).add(row["assignment"])
    lines = []
    for sid in sorted_ids(off_roster):
        theirs = submitted.get(sid, set())
        missing = [other for other in roster if theirs - submitted.get(other, set())]
        line = roster_typo(sid, missing, case_only=False)           # those are `roster_clashes`
        if line:
            lines.append(f"{line}: if so, correct the roster and export again")
    return lines


def roster_clashes(roster: Mapping[str, RosterStudent], off_roster: Sequence[str], written: bool) -> list[str]:
    """A line for each student of `off_roster` whose id is a roster id but for case or Unicode
    normalisation (`text.id_key`): nbgrader graded them as a student of their own, so their grades are left
    out of the file (or, `written`, in a row of their own, which the LMS matches only by its login), most
    likely one student's work filed under two ids. Ids that print alike are named with their escapes."""
    folded: dict[str, str] = {}
    for sid in roster:
        folded.setdefault(id_key(sid), sid)
    lines = []
    for sid in sorted_ids(off_roster):
        meant = folded.get(id_key(sid))
        if meant is None:
            continue
        how = id_difference(sid, meant)
        names = [spelt_id(s) if "Unicode" in how else shown_name(s) for s in (sid, meant)]
        where = "written in a row of their own" if written else "left out of the file"
        lines.append(f"{names[0]} (in the gradebook, not on the roster) matches the roster's {names[1]} except for "
                     f"{how}: two students to nbgrader, so their grades are {where}; if they are one, rename the "
                     f"submission folder to the roster's id (or correct the roster), autograde again and export again")
    return lines


def unlisted_warning(student: str, written: bool) -> str:
    """The line for a gradebook student whose id no roster can hold (`config.roster_id_problem`: a folder
    under submitted/ named by hand, "smith,j", graded before such folders were skipped): no roster can
    list them, so the line says to rename the folder and grade it again rather than to add them."""
    where = "written (include_unrostered) with it as the login" if written else "left out of the file"
    return (f"{shown_name(student)}: in the gradebook, but no roster can list this id ({roster_id_problem(student)}), "
            f"so it is {where}; rename the folder under submitted/ to the student's roster id, run `course "
            f"autograde` again, and take {shown_name(student)} out of the gradebook with `nbgrader db student "
            f"remove <id> --force` (--force: their grades under that id are deleted too)")


def left_out_warning(lms: str, students: Sequence[str], roster: Iterable[str] = ()) -> str:
    """The line for students in the gradebook but not on the course's roster, left out of the file: how to
    add them, take them out of the gradebook, or write them all the same. An id that prints like one of
    `roster` (the roster's ids) is named with its escapes."""
    system = lms.capitalize()
    why = {"moodle": "a row that matches no Moodle user stops the whole import",
           "canvas": "Canvas matches such a row only if the student id is the login, and offers it as an unknown "
                     "student otherwise",
           "blackboard": "Blackboard matches a row on its Username alone, so such a row counts only if the student "
                         "id is the login, and is not processed otherwise"}[lms]
    return (f"{listed(students, beside=roster)}: in the gradebook but not on the roster, so left out of the {system} "
            f"file ({why}); add them to the roster with their LMS ids, take a student who left the course out of the "
            f"gradebook with `nbgrader db student remove <id> --force` (--force: their grades are deleted too), or "
            f"write them with their student id as {LOGIN[lms]} with --CourseCsvExport.include_unrostered=True")


def not_due_yet(rows: Iterable[Mapping[str, Any]], now: dt.datetime, lms: str = "canvas") -> list[str]:
    """A line per assignment naming the students without a submission (a row whose `submitted` is
    false; not the timestamp, which a submission without a readable timestamp.txt lacks) whose due date
    (their extension's, when they have one) is still ahead of `now`: their 0 is not a grade yet, but the
    LMS would show it as one (`lms` 'nbgrader', the plain export: whoever reads the file would take it
    for one)."""
    waiting: dict[str, list[str]] = {}
    for row in rows:
        due = row.get("extended_duedate") or row.get("duedate")
        if not row.get("submitted") and isinstance(due, dt.datetime) and due > now:
            waiting.setdefault(row["assignment"], []).append(row["student_id"])
    shown = ("which reads as the grade (an LMS or spreadsheet importing the file takes it for one)"
             if lms == "nbgrader" else "which the LMS will show as the grade")
    lines = []
    for name, who in waiting.items():
        has, is_ = ("has", "is") if len(who) == 1 else ("have", "are")
        lines.append(f"{name}: {listed(who)} {has} not submitted and {is_} not due yet (the due date, or an "
                     f"extension, is still ahead), but {is_} exported with 0, {shown}; "
                     f"export after the due date, or without this assignment (--assignment)")
    return lines


BLACKBOARD_COLUMNS_KEY = "CourseCsvExport.blackboard_columns"


def blackboard_header(name: str, top: float, column_id: str) -> str:
    """An assignment's column header in the Blackboard file: as Blackboard's download heads an existing
    column, `Name [Total Pts: 100 Score] |123456`, the upload matching it by the Column ID after `|`; the
    name alone (a new column at each upload) without a Column ID."""
    if not column_id:
        return name
    return f"{name} [Total Pts: {number(top).removesuffix('.0')} Score] |{column_id.strip()}"


def blackboard_column_problem(column_ids: Mapping[str, str], held: Sequence[str]) -> str | None:
    """Why `column_ids` (assignment -> the Column ID of its Blackboard column, `CourseCsvExport.
    blackboard_columns`) cannot be written, in one line, or None: an assignment the gradebook does not hold
    (`held`: a typo would leave its column new), a Column ID that is not a whole number, or one that two
    assignments share (both would be uploaded into one column)."""
    unknown = [name for name in column_ids if name not in held]
    if unknown:
        return (f"{BLACKBOARD_COLUMNS_KEY}: {', '.join(shown_name(n) for n in unknown)} "
                f"{'is' if len(unknown) == 1 else 'are'} not in the gradebook, which holds "
                f"{', '.join(held) if held else 'no assignment yet'}; no file written")
    odd = [name for name, cid in column_ids.items() if not (cid.strip().isascii() and cid.strip().isdigit())]
    if odd:
        return (f"{BLACKBOARD_COLUMNS_KEY}: the Column ID of {shown_name(odd[0])} ('{shown_name(column_ids[odd[0]])}') "
                f"is not a whole number: it is the number after '|' in the column's header in Blackboard's download "
                f"('Name [Total Pts: 100 Score] |123456'); no file written")
    groups = shared_values(list(column_ids), list(column_ids.values()), key=int)
    if groups:
        return (f"{BLACKBOARD_COLUMNS_KEY}: {shared_text(groups, ids=False)}, so both would be uploaded into one "
                f"Blackboard column; no file written")
    return None


def blackboard_columns_warning(assignments: Sequence[tuple[str, float]], column_ids: Mapping[str, str]) -> str | None:
    """The line saying that each upload of the Blackboard file creates a column for each assignment without
    a Column ID (`column_ids`), and with what points, or None when there is none: the file heads such a
    column with the assignment's name alone, and Blackboard updates an existing column only by its ID."""
    new = [(name, top) for name, top in assignments if not column_ids.get(name, "").strip()]
    if not new:
        return None
    points = ", ".join(f"{name} {number(top)}" for name, top in new)
    return (f"Points possible: the Blackboard file heads the column of {', '.join(name for name, _ in new)} with "
            f"the name alone, so each upload creates a new column for it (in the Original course view a text column "
            f"with 0 points possible, left out of totals) rather than updating one; after the first upload set each "
            f"new column's points ({points}), and from then on give each its Column ID in {BLACKBOARD_COLUMNS_KEY} "
            f"(the number after '|' in the column's header in Blackboard's download, as 'Name [Total Pts: 100 "
            f"Score] |123456')")


def moodle_maxima_warning(assignments: Sequence[tuple[str, float]]) -> str | None:
    """The line naming the assignments out of other points than a grade item Moodle's import creates
    (100), or None: Moodle caps a grade at its item's maximum, and the file carries none."""
    other = [(name, top) for name, top in assignments if float(top) != MOODLE_MAX]
    if not other:
        return None
    over = any(float(top) > MOODLE_MAX for _, top in other)
    return (f"Maximum grade: {', '.join(f'{name} is out of {number(top)}' for name, top in other)}, not 100: the "
            f"Moodle file carries no maximum, a grade item Moodle's import creates is out of 100, and Moodle caps a "
            f"grade at its item's maximum; create the grade item with this maximum before importing and map the "
            f"column to it" + ("; a grade above 100 also stops the whole import unless the site allows unlimited "
                               "grades" if over else ""))


def moodle_over_warning(names: Sequence[str], sids: Sequence[str],
                        scores: Mapping[tuple[str, str], Any]) -> str | None:
    """The line naming the grades above 100 (extra credit, say), or None: Moodle's import stops at such a
    grade, refusing the whole file, unless the site allows unlimited grades."""
    over = [f"{shown_name(sid)} {number(scores[sid, name])} in {name}" for name in names for sid in sorted_ids(sids)
            if float(scores.get((sid, name), 0.0)) > MOODLE_MAX]
    if not over:
        return None
    return (f"Grade above 100: {first_few(over)}: Moodle's import refuses the whole file for a grade above 100 "
            f"unless the site allows unlimited grades (Site administration > Grades > General settings), and caps "
            f"a grade at its grade item's maximum")


def canvas_name(row: Mapping[str, Any]) -> str:
    """The student as Canvas's own gradebook file names them: "Last, First", or the one name there is,
    or the student id."""
    last, first = str(row["last_name"] or ""), str(row["first_name"] or "")
    return ", ".join(n for n in (last, first) if n) or str(row["student_id"])


def php_misreads(value: str) -> bool:
    """Whether PHP's `fgetcsv` (Moodle's reader; escape character a backslash) reads `value` otherwise than
    written by Python's csv writer: the writer encloses it in quotes (it holds a comma, a quote or a line
    break) and a backslash stands before a quote in it or at its end, where the closing quote follows."""
    quoted = any(c in value for c in ',"\r\n')
    return quoted and ('\\"' in value or value.endswith("\\"))


def moodle_name(text: str) -> str:
    """A Moodle file's first or last name: as `spreadsheet_text`, with `/` for its backslashes where PHP
    would misread them (`php_misreads`); Moodle's import never reads a name, so nothing is lost."""
    text = text.replace("\\", "/") if php_misreads(text) else text
    return spreadsheet_text(text)


def name_warning(lms: str, sids: Sequence[str], students: Mapping[str, Mapping[str, Any]]) -> str | None:
    """One line naming the students whose name the file writes otherwise than the gradebook holds it so
    the LMS reads the file right (`Points Possible` for Canvas, a backslash PHP misreads for Moodle), or None
    (always for Blackboard, which reads every name as written)."""
    if lms == "canvas":
        changed = [sid for sid in sids if CANVAS_POINTS_ROW in canvas_name(students[sid])]
        why = (f"contains '{CANVAS_POINTS_ROW}', which makes Canvas's import take a row for the points row; "
               f"written with 'Points possible' (Canvas finds the row by its SIS Login ID)")
    elif lms == "moodle":
        changed = [sid for sid in sids if any(php_misreads(str(students[sid][key] or ""))
                                              for key in ("first_name", "last_name"))]
        why = ("has a backslash before a quote or at the end of a quoted value, which Moodle's CSV reader takes for "
               "an escape; written with '/' for it (Moodle's import matches on Username, never on a name)")
    else:                                       # Blackboard reads every name as written
        return None
    if not changed:
        return None
    whose = f"the name of {listed(changed)}" if len(changed) == 1 else f"the names of {listed(changed)}"
    if len(changed) > 1:
        why = why.replace("contains '", "contain '", 1).replace("has a backslash", "have a backslash", 1)
    return f"{'Student' if lms == 'canvas' else 'Name'}: {whose} {why}"


def number(value: Any) -> str:
    """A score as written in the exports: rounded to 6 decimals (the gradebook's sums of fractional
    points read like 97.10924299999999 otherwise), in plain decimals ("0.00005", never Python's
    "5e-05", which no LMS reads as a number), with at least one decimal ("100.0")."""
    text = f"{round(float(value), 6) + 0.0:.6f}".rstrip("0")      # + 0.0: no "-0.0"
    return text + "0" if text.endswith(".") else text


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


def listed(students: Sequence[str], shown: int = 5, *, ids: bool = True, beside: Iterable[str] = ()) -> str:
    """Student ids for a one-line message, sorted (`text.sorted_ids`): "ada, Bob and 3 more", control
    characters written out, and ids that print like another of them or of `beside` (differing only by
    Unicode normalisation) followed by their escapes (`text.spelt_id`); other names (`ids` false:
    assignments) in the order given."""
    students = sorted_ids(students) if ids else list(students)
    alike = lookalikes([*students, *beside])
    names = [spelt_id(s) if s in alike else shown_name(s) for s in students[:shown]]
    if len(students) > shown:
        names.append(f"{len(students) - shown} more")
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
