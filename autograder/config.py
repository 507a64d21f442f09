"""course.yml: declared once below, parsed once into typed, validated, frozen objects.

Each key is one `setting(...)` line on a dataclass: type (the annotation), default and help text.
The reader, its one-line errors naming the key path and the reference page `docs/config.md`
derive from these declarations (see `autograder.schema`):

    course.yml: assignments[0].problems.layer_norm.points: expected a positive number of at most 1000000, got "ten"

To add a key, add one field here, then regenerate the page: `python -m autograder.config > docs/config.md`.
"""
from __future__ import annotations

import contextlib
import csv
import datetime as dt
import difflib
import hashlib
import importlib.util
import io
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from . import schema, usercache
from .errors import ConfigError
from .layout import CONFIG_FILE, CourseLayout, separator_problem
from .schema import FRACTION, NON_EMPTY, NON_NEGATIVE, Check, Scope, pattern, setting, show
from .text import id_difference, id_key, lookalikes, shown_name, spelt_id

CONFIG_NAME = CONFIG_FILE
DTYPES = ("float64", "float32")
# The most notes about running a notebook that any report (results.json, the feedback page) shows:
# autograder.reporting.bounds cuts every result to it, so `limits.max_notes` may not ask for more.
MAX_NOTES = 40
UP_TO_MAX_NOTES = Check(f"a positive {{}} of at most {MAX_NOTES}", lambda v: 0 < v <= MAX_NOTES)
# Upper bounds of the numeric keys that have no natural one, each well past any real need and within what
# takes them: a time limit is waited for in calls that take milliseconds as a C int (poll: 24.8 days); a
# size in MB becomes a byte count set as an rlimit, a tmpfs size or a cgroup limit (a signed 64-bit number:
# memory_mb 2**43 was a sandbox that could not start); points are summed and averaged as floats (1e308
# points overflowed the batch's mean).
MAX_SECONDS = 7 * 24 * 3600         # a week
MAX_MB = 2**20                      # 1 TiB
MAX_OUTPUT_KB = 2**20               # 1 GiB of printed output per cell or call
MAX_PROCESSES = 2**22               # Linux's largest process id (PID_MAX_LIMIT)
MAX_RESTARTS = 1000
MAX_POINTS = 10**6


def up_to(bound: int, *, zero: bool = False) -> Check:
    """A positive number (with `zero`, one >= 0) of at most `bound`."""
    if zero:
        return Check(f"a {{}} between 0 and {bound}", lambda v: 0 <= v <= bound)
    return Check(f"a positive {{}} of at most {bound}", lambda v: 0 < v <= bound)


SECONDS = up_to(MAX_SECONDS)
MEGABYTES = up_to(MAX_MB)
FOLDER_NAME = pattern("a folder-safe name (letters, digits, - _ .)", r"[A-Za-z0-9][A-Za-z0-9_.-]*")
IDENTIFIER = pattern("a Python identifier", r"[A-Za-z_][A-Za-z0-9_]*")
NOTEBOOK_FILE = pattern("a notebook file name ending in .ipynb", r"[^/\\]+\.ipynb")


@dataclass(frozen=True)
class Tolerance:
    """How close a student's output must be to the reference's: |actual - expected| <= atol + rtol * |expected|."""
    rtol: float = setting(check=NON_NEGATIVE, help="relative tolerance")
    atol: float = setting(check=NON_NEGATIVE, help="absolute tolerance")


DEFAULT_TOLERANCES = {
    "float64": Tolerance(rtol=1e-7, atol=1e-9),
    "float32": Tolerance(rtol=1e-4, atol=1e-5),
}


@dataclass(frozen=True)
class Limits:
    """What one student's notebook may use while it is graded."""
    cell_seconds: float = setting(30.0, check=SECONDS, help=(
        "wall-clock seconds for one notebook cell (also for each cell of the source and release notebooks that "
        "`course validate` runs in a Jupyter kernel: one still running then is stopped, named in a PROBLEM line, "
        "and the cells below it are not run)"))
    total_seconds: float = setting(180.0, check=SECONDS,
                                   help="wall-clock seconds for all cells of one notebook (past it, the notebook is "
                                        "run once more, up to the cell the time ran out in or, when reruns after "
                                        "stopped cells used the time, to the end, within half of what is left of "
                                        "submission_seconds: see docs/grading.md)")
    call_seconds: float = setting(10.0, check=SECONDS,
                                  help="seconds for one call from a grader into a student function")
    memory_mb: int = setting(2048, check=MEGABYTES, help="address space of the student's process, in MB")
    notebook_mb: float = setting(20.0, check=MEGABYTES, help="a submitted notebook larger than this is not loaded")
    submission_seconds: float = setting(300.0, check=SECONDS,
                                        help="wall-clock seconds for one submission: notebook runs, restarts and "
                                             "calls together")
    max_restarts: int = setting(5, check=up_to(MAX_RESTARTS, zero=True),
                                help="fresh processes per submission after a student function hung or crashed")
    return_mb: float = setting(16.0, check=MEGABYTES, help="the largest value a student function may return, in MB")
    output_kb: int = setting(8, check=up_to(MAX_OUTPUT_KB, zero=True),
                             help="printed output kept per cell or call, in KB (the rest is dropped in the sandbox)")
    max_notes: int = setting(MAX_NOTES, check=UP_TO_MAX_NOTES,
                             help=f"notes about running the notebook kept per submission (the reports show at "
                                  f"most {MAX_NOTES}, so no more may be asked for)")
    processes: int = setting(64, check=up_to(MAX_PROCESSES), help="processes the student's code may have at once")
    scratch_mb: int = setting(64, check=MEGABYTES,
                              help="size of the student's private scratch folders (tmpfs), in MB")


@dataclass(frozen=True)
class LatePolicy:
    """How lateness (nbgrader's `timestamp.txt` against the due date) costs points."""
    grace_minutes: float = setting(0.0, check=NON_NEGATIVE, help="minutes after `due` that still count as on time")
    penalty_per_day: float = setting(0.0, check=FRACTION, help="share of the score lost per started late day")
    max_late_days: float | None = setting(None, check=NON_NEGATIVE,
                                          help="later than this many days scores 0; unset: no cut-off")


@dataclass(frozen=True)
class Extension:
    """More time for one student: their due date is the assignment's plus this (as nbgrader's
    `grant_extension` gives it)."""
    days: float = setting(0.0, check=NON_NEGATIVE, help="extra days")
    hours: float = setting(0.0, check=NON_NEGATIVE, help="extra hours (added to the days)")

    @property
    def delta(self) -> dt.timedelta:
        return dt.timedelta(days=self.days, hours=self.hours)

    def describe(self) -> str:
        """"2 days", "1 day and 6 hours", "12 hours"."""
        parts = [f"{n:g} {unit}{'' if n == 1 else 's'}" for n, unit in ((self.days, "day"), (self.hours, "hour")) if n]
        return " and ".join(parts) or "no extra time"


def _problem_notebook(value: str, path: str, scope: Scope) -> None:
    notebooks = scope["notebooks"]
    if value not in notebooks:
        raise ConfigError(f"{path}: expected one of the assignment's notebooks ({', '.join(notebooks)}), "
                          f"got {schema.show(value)}")


@dataclass(frozen=True)
class Problem:
    """One student function, graded by `assignments/<package>/graders/test_<problem>.py`."""
    name: str = setting(check=IDENTIFIER, help="the student function, e.g. `layer_norm`")
    points: float = setting(check=up_to(MAX_POINTS), help="the problem's points, shared among its graders' tests")
    grade_id: str = setting(check=FOLDER_NAME, derive=lambda s: f"test_{s['name']}", default_doc="`test_<problem>`",
                            help="the nbgrader grade cell that holds the problem's score in the gradebook")
    notebook: str = setting(derive=lambda s: s["notebooks"][0], default_doc="the assignment's first notebook",
                            check_scope=_problem_notebook, help="the notebook that defines the function")
    tolerances: dict[str, Tolerance] = setting(
        keys=DTYPES, derive=lambda s: s["defaults"].tolerances, default_doc="`defaults.tolerances`",
        help="numeric agreement with the reference, by the dtype of the input; unset keys inherit the defaults")

    def tolerance(self, dtype: Any) -> Tolerance:
        import numpy as np

        name = np.dtype(dtype).name if dtype is not None else "float64"
        return self.tolerances.get(name, self.tolerances["float64"])


def _package_importable(value: str, path: str, scope: Scope) -> None:
    """Whether its folder exists is asked of the assignment alone (`Course.setup_problems`)."""
    if not IDENTIFIER.holds(value):      # a package derived from the name is not checked as a value given is
        raise ConfigError(f"{path}: {show(value)} (the assignment's name with - as _) is not a Python identifier, "
                          f"which graders import it as: set `package:` to one "
                          f"(letters, digits and _, not first a digit)")


def _grade_ids_unique(value: tuple[Problem, ...], path: str, scope: Scope) -> None:
    owner: dict[str, str] = {}
    for p in value:
        if p.grade_id in owner:
            raise ConfigError(f"{path}.{p.name}.grade_id: {p.grade_id!r} is already used by problem "
                              f"{owner[p.grade_id]!r}")
        owner[p.grade_id] = p.name


def _extensions_fit(value: dict[str, Extension], path: str, scope: Scope) -> None:
    """An extension whose due date cannot be computed (1e12 days, or past the year 9999) is an error
    naming it, rather than an OverflowError when a submission is graded."""
    due = scope["due"]
    for sid, extension in value.items():
        try:
            _ = extension.delta if due is None else due + extension.delta
        except OverflowError:
            raise ConfigError(f"{path}.{sid}: {extension.describe()} is beyond the last date that can be "
                              f"represented (the year 9999)") from None


@dataclass(frozen=True)
class Assignment:
    """One assignment: its notebooks, problems, limits and due date."""
    name: str = setting(check=FOLDER_NAME, help="the folder name under source/, release/ and submitted/<student>/")
    package: str = setting(check=IDENTIFIER, derive=lambda s: s["name"].replace("-", "_"),
                           default_doc="the name with - as _", check_scope=_package_importable,
                           help="`assignments/<package>/`: the reference, mistakes catalogue and graders")
    notebooks: tuple[str, ...] = setting(check=NON_EMPTY, item_check=NOTEBOOK_FILE,
                                         help="the notebook files students submit, in source/<name>/")
    problems: tuple[Problem, ...] = setting(keyed_by="name", check_scope=_grade_ids_unique,
                                            help="one entry per student function, in the order reports list them")
    limits: Limits = setting(derive=lambda s: s["defaults"].limits, default_doc="`defaults.limits`",
                             help="limits for this assignment; unset keys inherit the defaults")
    due: dt.datetime | None = setting(None, help="the deadline (no timezone: UTC); a date alone (`2026-12-14`, "
                                           "quoted or not) is the end of that day, 23:59:59 UTC; unset: nothing "
                                           "is late")
    late_policy: LatePolicy = setting(LatePolicy(), help="what lateness costs")
    extensions: dict[str, Extension] = setting(
        factory=dict, check_scope=_extensions_fit,
        help="per-student extensions by student id, e.g. `{ada: {days: 2}}`: the late policy counts "
             "from the assignment's due date plus the extension; an id on neither the roster nor "
             "the submissions is named by `course validate` and `course autograde`")

    def due_for(self, student: str) -> dt.datetime | None:
        """The student's due date: `due` plus their extension (None when the assignment has none)."""
        if self.due is None:
            return None
        extension = self.extensions.get(student)
        return self.due + extension.delta if extension is not None else self.due

    @property
    def max_score(self) -> float:
        return sum(p.points for p in self.problems)

    def problem(self, name: str) -> Problem:
        for p in self.problems:
            if p.name == name:
                return p
        raise KeyError(name)


@dataclass(frozen=True)
class Defaults:
    """Settings every assignment and problem inherits unless it sets its own."""
    tolerances: dict[str, Tolerance] = setting(factory=lambda: dict(DEFAULT_TOLERANCES), keys=DTYPES,
                                               help="numeric agreement with the reference, by dtype")
    limits: Limits = setting(Limits(), help="what a student's notebook may use")


def _names_unique(value: tuple[Assignment, ...], path: str, scope: Scope) -> None:
    """Two entries of one name (most likely an entry copied for a new assignment and not renamed)
    would share every folder named after it; said before anything asks for those folders. So would
    two names that differ only in case (`HW1`, `hw1`) on a file system that ignores case (macOS,
    Windows), where source/HW1 and source/hw1 are one folder: refused on every machine, so a course
    folder works wherever it is copied."""
    layout = CourseLayout(scope["root"])
    first: dict[str, int] = {}
    for i, a in enumerate(value):
        j = first.setdefault(a.name.casefold(), i)
        if j == i:
            continue
        source, release, submitted = (f"{layout.relative(p)}/" for p in (
            layout.source(a.name), layout.release(a.name), layout.submission("<student>", a.name)))
        if value[j].name == a.name:
            raise ConfigError(f"{path}[{i}].name: {a.name!r} is used twice (also {path}[{j}].name): "
                              f"each assignment needs a name of its own, as both would use {source}, {release} "
                              f"and {submitted}")
        raise ConfigError(f"{path}[{i}].name: {a.name!r} differs from {path}[{j}].name {value[j].name!r} only in "
                          f"case: on a file system that ignores case (macOS, Windows) both would use {source}, "
                          f"{release} and {submitted}; give each assignment a name of its own")


def _gradebook_url(url: str, scope: Scope) -> str:
    """A relative SQLite path starts at the course folder."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        return f"sqlite:///{(Path(scope['root']) / url[len('sqlite:///'):]).resolve()}"
    return url


def _in_course(path: Path | None, scope: Scope) -> Path | None:
    """A relative path starts at the course folder."""
    return None if path is None else Path(scope["root"]) / path


@dataclass(frozen=True)
class RosterStudent:
    """One row of the roster file. The last four are what an LMS knows the student by, for `nbgrader
    export --CourseCsvExport.lms=canvas|moodle|blackboard`: `lms_user_id` the LMS's own user id (Canvas's
    `ID`; nbgrader's Student.lms_user_id), `sis_user_id` the institution's student number (Canvas's `SIS
    User ID`, Moodle's `ID number`, Blackboard's `Student ID`), `sis_login_id` the login (Canvas's `SIS
    Login ID`, Moodle's and Blackboard's `Username`; the student id when empty), `section` the course
    section."""
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""


def roster_id_problem(student: str) -> str | None:
    """Why `student` cannot be an id on a roster (whitespace, `;`, `/`, `\\` or `,` in it: most likely a
    CSV separated by `;` or tabs, read as one id per line), naming the first such character, or None."""
    why = separator_problem(student)
    return f"it {why}" if why is not None else None


# The roster's optional columns, each a RosterStudent field of the same name.
ROSTER_COLUMNS = ("first_name", "last_name", "email", "lms_user_id", "sis_user_id", "sis_login_id", "section")
# Those the gradebook keeps for each student (nbgrader's Student fields of the same name), synced from the roster.
SYNCED_COLUMNS = ("first_name", "last_name", "email", "lms_user_id")


# How alike (difflib's ratio, ids compared ignoring case) a submitter off the roster and a roster student
# without a submission must be to be named as a likely typo of one for the other: strict, so that two
# students' ids are seldom taken for one ('katherine' and 'katherin' are 0.94, 'ada' and 'alan' 0.57).
TYPO_CUTOFF = 0.8


def roster_typo(student: str, without_submission: Sequence[str], *, case_only: bool = True) -> str | None:
    """The line saying that `student`, who submitted and is not on the roster, may be one of the roster
    students `without_submission` under a misspelt id (the closest, by difflib, at `TYPO_CUTOFF`), or None
    when none is that close. `case_only`: also name an id equal to `student` but for case or Unicode
    normalisation (`text.id_key`; False where those are said already, api.case_clashes). Ids that print
    alike are named with their escapes."""
    folded: dict[str, list[str]] = {}
    for sid in without_submission:
        if sid != student and (case_only or id_key(sid) != id_key(student)):
            folded.setdefault(id_key(sid), []).append(sid)
    close = difflib.get_close_matches(id_key(student), list(folded), n=3, cutoff=TYPO_CUTOFF)
    meant = [sid for key in close for sid in folded[key]]
    if not meant:
        return None
    alike = lookalikes([student, *meant])
    names = [spelt_id(sid) if sid in alike else shown_name(sid) for sid in (student, *meant)]
    return f"{names[0]} (not on the roster) may be the roster's {' or '.join(names[1:])} (a typo?)"


@dataclass(frozen=True, kw_only=True)
class Course:
    """The course: the top level of course.yml."""
    root: Path                      # the course folder (not a key: where course.yml was found)
    name: str = setting(help="the course's title")
    course_id: str = setting("course", check=FOLDER_NAME, help="nbgrader's course id")
    assignments: tuple[Assignment, ...] = setting(check=NON_EMPTY, check_scope=_names_unique,
                                                  help="the assignments, each a mapping (see below)")
    roster_file: Path | None = setting(None, key="roster", resolve=_in_course,
                                       help="CSV with an `id` column (optional: `first_name`, `last_name`, `email`, "
                                            "and for an LMS's grade import `lms_user_id`, `sis_user_id`, "
                                            "`sis_login_id` (default: the id), `section`; a blank cell of a column "
                                            "the file has clears the gradebook's name, email or LMS user id; other "
                                            "columns are left alone, but one spelt like these, as `firstname` or "
                                            "`SIS User ID`, is an error), or one student id per line")
    gradebook_url: str = setting("sqlite:///gradebook.db", key="gradebook", resolve=_gradebook_url,
                                 help="nbgrader's gradebook: any SQLAlchemy URL; a relative SQLite path starts at "
                                      "the course folder")
    secret_file: Path = setting(Path(".course_secret"), resolve=_in_course,
                                help="seeds each student's hidden inputs; created by the first command that "
                                     "needs it (`course autograde`, `course gradescope`), never committed")
    exchange: Path | None = setting(None, resolve=_in_course,
                                    help="nbgrader's exchange folder (`Exchange.root`), shared by instructors and "
                                         "students; a relative path starts at the course folder; unset: nbgrader's "
                                         "default")
    defaults: Defaults = setting(Defaults(), help="what assignments and problems inherit unless they set their own")
    sandbox_cpus: Literal["spread", "off"] = setting(
        "spread", help="`spread`: each worker's sandbox is held on one CPU, and the workers of one batch each get "
                       "their own (worker i on the i-th CPU the command may use, in turn when there are more workers "
                       "than CPUs, the worker process held there with its sandbox once warm; a lone worker takes "
                       "the CPU with the fewest processes held to it), so that a call "
                       "into student code and its reply do not wake a process on another CPU; `off`: the system's "
                       "scheduler places every process (try it where grading measures faster so)")

    @property
    def layout(self) -> CourseLayout:
        return CourseLayout(self.root)

    def assignment(self, name: str) -> Assignment:
        """The assignment `name`, set up in the course folder: a ConfigError in one line when course.yml
        has no such assignment, or when it lacks its folder of instructor code or a source notebook
        (the first of `setup_problems`). Only what concerns that assignment stops a command: an
        assignment declared before its files are written leaves the others' commands alone."""
        a = self.entry(name)
        problems = self.setup_problems(a)
        if problems:
            raise ConfigError(problems[0])
        return a

    def entry(self, name: str) -> Assignment:
        """The assignment `name` as course.yml declares it, whether or not its files exist yet."""
        for a in self.assignments:
            if a.name == name:
                return a
        known = ", ".join(a.name for a in self.assignments) or "none"
        raise ConfigError(f"{CONFIG_NAME}: no assignment named {name!r} (known: {known})")

    def setup_problems(self, a: Assignment) -> tuple[str, ...]:
        """What the course folder lacks of assignment `a`, one line each naming the assignment, its key in
        course.yml and the path: its folder of instructor code (`assignments/<package>/`), then each
        source notebook. Empty when it is set up."""
        layout = self.layout
        index = next(i for i, other in enumerate(self.assignments) if other.name == a.name)
        where = f"{CONFIG_NAME}: assignments[{index}]"
        out = []
        if not layout.package(a.package).is_dir():
            out.append(f"{where}.package: assignment {a.name}: folder {layout.relative(layout.package(a.package))} "
                       f"does not exist (its reference and graders go there)")
        for i, notebook in enumerate(a.notebooks):
            source = layout.source(a.name) / notebook
            if not source.is_file():
                out.append(f"{where}.notebooks[{i}]: assignment {a.name}: source notebook {layout.relative(source)} "
                           f"does not exist")
        return tuple(out)

    def roster(self) -> tuple[str, ...]:
        """Student ids from the roster file (CSV with an `id` column, or one id per line)."""
        return tuple(s.id for s in self.students())

    def students(self) -> tuple[RosterStudent, ...]:
        """The roster: each student's id, and name, email and LMS ids where the CSV has those columns
        (`roster_columns`)."""
        return self.roster_columns()[1]

    def roster_columns(self) -> tuple[frozenset[str], tuple[RosterStudent, ...]]:
        """The optional columns (of ROSTER_COLUMNS) the roster file has, none for one id per line or no
        roster, and its students (`students`): a blank cell of such a column is a value (none), where a
        column the file lacks says nothing.
        A ConfigError as `_roster_lines` says."""
        columns, lines = self._roster_lines()
        return columns, tuple(student for _, student in lines)

    def roster_case_clashes(self) -> tuple[str, ...]:
        """One line for each roster id that differs from an earlier one only by case (`Ada`, `ada`) or
        by Unicode normalisation (`text.id_key`: 'zoë' as one code point or as 'e' and a combining mark),
        naming both lines: ids are case-sensitive and compared code point by code point (nbgrader's, and
        folder names on Linux), so they are two students, which is more likely a mistake than not. Ids
        differing by normalisation are written with their escapes ('zo\\xeb', 'zoe\\u0308'), since they
        print alike. A warning, not an error."""
        first: dict[str, tuple[int, str]] = {}
        out = []
        for n, student in self._roster_lines()[1]:
            seen = first.setdefault(id_key(student.id), (n, student.id))
            if seen[0] != n:
                name = self.roster_file.name if self.roster_file is not None else "roster"
                how = id_difference(student.id, seen[1])
                ids = [ascii(s) if "Unicode" in how else repr(s) for s in (student.id, seen[1])]
                out.append(f"{name}: line {n}: id {ids[0]} differs from {ids[1]} (line {seen[0]}) "
                           f"only by {how}: they are two students, each graded from the folder of that exact name; "
                           f"if they are one, remove a line")
        return tuple(out)

    def _roster_lines(self) -> tuple[frozenset[str], list[tuple[int, RosterStudent]]]:
        """The optional columns the roster file has (`roster_columns`), and (line, student) for each of
        its students.

        A ConfigError names the line of an id given twice (a later row would silently replace the
        name and email of the first) or of one that cannot be a student's folder under submitted/
        (whitespace, `;`, `/`: most likely a CSV separated by `;` or tabs, read as one id per line;
        or a leading '.', a hidden folder nobody grades).
        A byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name."""
        if self.roster_file is None:
            return frozenset(), []
        if not self.roster_file.exists():
            raise ConfigError(f"{CONFIG_NAME}: roster: file {self.roster_file} does not exist")
        if not self.roster_file.is_file():
            raise ConfigError(f"{CONFIG_NAME}: roster: {self.roster_file} is not a file (give the roster's CSV file, "
                              f"e.g. roster.csv)")
        name = self.roster_file.name
        text = utf8_text(self.roster_file.read_bytes(), name).removeprefix("\ufeff")
        lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
        out: list[tuple[int, RosterStudent]] = []
        columns: frozenset[str] = frozenset()
        if lines and ("," in lines[0][1] or lines[0][1].strip() == "id"):
            rows = _csv_rows(text, name)
            header = [h.strip() for h in rows[0][1]]
            columns = frozenset(header) & frozenset(ROSTER_COLUMNS)
            if "id" not in header:
                raise ConfigError(f"{name}: line {lines[0][0]}: expected an 'id' column in the comma-separated header "
                                  f"(optional: {', '.join(ROSTER_COLUMNS)}), got {schema.show(lines[0][1])}")
            for column in header:
                meant = _roster_column_meant(column)
                if meant is not None:
                    raise ConfigError(f"{name}: line {lines[0][0]}: column {schema.show(column)} is not one the "
                                      f"roster reads; did you mean {meant!r}? (its columns: id, "
                                      f"{', '.join(ROSTER_COLUMNS)}; other columns are left alone)")
            for n, fields in rows[1:]:
                if len(fields) > len(header) and any(v.strip() for v in fields[len(header):]):
                    # zip would drop the extra values, or put each in the column of the one before it
                    raise ConfigError(f"{name}: line {n}: {len(fields)} values for the header's {len(header)} "
                                      f"columns ({', '.join(header)}); add the missing column to line "
                                      f"{lines[0][0]}, or quote a value that holds a comma")
                row = dict(zip(header, (v.strip() for v in fields), strict=False))
                if row.get("id") == "id":       # two rosters pasted together: not a student called "id"
                    raise ConfigError(f"{name}: line {n}: the header row again (id 'id'), not a student; remove the "
                                      f"line")
                if row.get("id"):
                    out.append((n, RosterStudent(row["id"], **{c: row.get(c) or "" for c in ROSTER_COLUMNS})))
                elif any(row.values()):         # a row of empty cells (a spreadsheet's) is no student
                    given = ", ".join(f"{k} {schema.show(v)}" for k, v in row.items() if v and k != "id")
                    raise ConfigError(f"{name}: line {n}: a student with no id ({given}); give each student an "
                                      f"id, or remove the line")
        else:
            out = [(n, RosterStudent(ln.strip())) for n, ln in lines]
        first: dict[str, int] = {}
        for n, student in out:
            if student.id.startswith("."):
                raise ConfigError(f"{name}: line {n}: {schema.show(student.id)} is not a student id: it starts with "
                                  f"'.', and a hidden folder under submitted/ is never graded (nbgrader skips it); "
                                  f"remove the '.'")
            if roster_id_problem(student.id) is not None:
                raise ConfigError(f"{name}: line {n}: {schema.show(student.id)} is not a student id: "
                                  f"{roster_id_problem(student.id)}; a CSV roster is comma-separated, with an "
                                  f"'id' column, otherwise one id per line")
            if first.setdefault(student.id, n) != n:
                raise ConfigError(f"{name}: line {n}: student {student.id!r} is listed twice (first on line "
                                  f"{first[student.id]})")
        return columns, out


def _roster_column_meant(column: str) -> str | None:
    """The roster column a header cell that is not one was most likely meant to be ("firstname",
    "First Name", "SIS User ID", "e-mail": a typo or an LMS's spelling, which would leave that column
    silently unread), or None for one of the roster's own or a column nothing like them (left alone)."""
    if column in ("id", *ROSTER_COLUMNS):
        return None
    squeezed = "".join(c for c in column.casefold() if c.isalnum())
    for known in ("id", *ROSTER_COLUMNS):
        plain = known.replace("_", "")
        if squeezed == plain or (len(squeezed) > 4 and difflib.SequenceMatcher(None, squeezed, plain).ratio() >= 0.85):
            return known
    return None


def _csv_rows(text: str, name: str) -> list[tuple[int, list[str]]]:
    """(line, fields) of each CSV record of `text` that is not blank, `line` the one it starts on: a
    quoted field may hold a line break (a name typed on two lines in a spreadsheet's cell)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    rows, start = [], 1
    try:
        for fields in reader:
            if any(f.strip() for f in fields):
                rows.append((start, fields))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise ConfigError(f"{name}: line {start}: not valid CSV ({exc})") from None
    return rows


def utf8_text(data: bytes, name: str) -> str:
    """`data`, the contents of the file `name`, decoded as UTF-8; ConfigError naming the line and the
    first byte that is not (a file saved as Latin-1 or Windows-1252)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{name}: line {line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                          f"save it as UTF-8") from None


# --------------------------------------------------------------------------- reading and describing

def parse_course(data: Any, root: Path) -> Course:
    """Validate the loaded YAML of course.yml (rooted at `root`) into a Course."""
    try:
        course = schema.read(Course, data if data is not None else {}, given={"root": root})
    except ConfigError as exc:
        raise ConfigError(f"{CONFIG_NAME}: {exc}") from None
    assert isinstance(course, Course)
    return course


def load_course(course_dir: str | Path = ".") -> Course:
    """Read and validate DIR/course.yml."""
    root = Path(course_dir).resolve()
    path = CourseLayout(root).config
    if not path.is_file():
        if path.exists():
            raise ConfigError(f"{path}: not a file")
        raise ConfigError(f"{path}: not found (run from the course folder or pass --course-dir)")
    return parse_course(course_data(utf8_text(path.read_bytes(), CONFIG_NAME)), root)


YAML_CACHE = "course-yml"           # usercache kind of course.yml's data
_PARSER = "unique-text-keys+exponent-floats"  # in the cache key: data cached by an older reading is not used
# A number written with an exponent but no dot or no exponent sign (`1e-07`, `1E5`, `2.5e3`), as Python prints
# it and docs/config.md shows defaults: YAML 1.1, which PyYAML follows, reads it as text
_EXPONENT_FLOAT = r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"
_TAG = "\0yaml"                      # the key marking a date or time in the cached data


def course_data(text: str) -> Any:
    """course.yml's YAML data. Kept in the user's cache (autograder.usercache) when JSON gives it
    back exactly (dates and times tagged), under a hash of the text and of the installed PyYAML:
    every command, grading worker and gradebook writer reads course.yml on its way to its first
    result, and importing PyYAML alone costs more CPU than the rest of reading it."""
    key = _yaml_cache_key(text)
    cached = usercache.read_entry(YAML_CACHE, key) if key else None
    if isinstance(cached, dict) and "data" in cached:
        with contextlib.suppress(ValueError, TypeError, KeyError):
            return _from_json(cached["data"])
    data = parse_yaml(text)
    plain = _to_json(data)
    if key and plain is not _NOT_PLAIN:
        usercache.write_entry(YAML_CACHE, key, {"data": plain})
    return data


def _unique_keys(base: Any) -> Any:
    """`base` (a PyYAML loader class) refusing a mapping that gives a key twice: PyYAML keeps the
    last silently, so an edit that adds `layer_norm: {points: 3}` below the old line would change
    the points without a word (and "unknown keys are errors" could not see it). Every key of
    course.yml is a name (a problem, a dtype, a student id), so a plain key is read as the text
    written: an extension for student `0042` is for "0042", not the octal number 34 (nor `012345`
    5349, `yes` True, `2026-01-01` a date), as the roster's ids are text too. A plain value written as a
    number with an exponent (`1e-07`, see _EXPONENT_FLOAT) is read as that number, as YAML 1.2 reads it."""
    import re

    import yaml

    class UniqueKeys(base):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: dict[tuple[str, str], yaml.Mark] = {}
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    if not key_node.style:          # plain, not quoted: its text, whatever it looks like
                        key_node.tag = "tag:yaml.org,2002:str"
                    first = seen.setdefault((key_node.tag, key_node.value), key_node.start_mark)
                    if first is not key_node.start_mark:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {key_node.value!r} given twice, first on line {first.line + 1}",
                            key_node.start_mark)
            return super().construct_mapping(node, deep=deep)

        def construct_yaml_timestamp(self, node: Any) -> Any:
            """A date or date-time that YAML reads as one but that does not exist (2026-02-30,
            T24:00, month 13, an offset of +99:00): its text, which the schema then refuses in one
            line naming the key, rather than PyYAML's ValueError."""
            try:
                return super().construct_yaml_timestamp(node)
            except (ValueError, OverflowError):
                return self.construct_scalar(node)

    UniqueKeys.add_constructor("tag:yaml.org,2002:timestamp", UniqueKeys.construct_yaml_timestamp)
    UniqueKeys.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(_EXPONENT_FLOAT), list("-+0123456789."))
    return UniqueKeys


def parse_yaml(text: str, loader: Any = None) -> Any:
    """YAML `text` read by libyaml's safe loader where PyYAML has it (the same documents, ~7x less
    CPU than the pure-Python one), or by `loader`; invalid YAML, or a key given twice in one
    mapping, is a ConfigError naming the line."""
    import yaml

    try:
        return yaml.load(text, Loader=_unique_keys(loader or getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if mark is not None and _is_tab(text, mark.index):
            problem = f"a tab character at column {mark.column + 1}; YAML indents with spaces"
        raise ConfigError(f"{CONFIG_NAME}:{where}: not valid YAML ({problem})") from None


def _is_tab(text: str, index: object) -> bool:
    """Whether the character at `index` of `text` (a YAML error's mark) is a tab, which YAML refuses
    where it takes indentation, with a message that does not say so (libyaml's: "found character that
    cannot start any token")."""
    return isinstance(index, int) and 0 <= index < len(text) and text[index] == "\t"


def _yaml_cache_key(text: str) -> str | None:
    """A hash of `text` and of the installed PyYAML (its file's path, size and time), or None
    when PyYAML cannot be found."""
    try:
        spec = importlib.util.find_spec("yaml")
        origin = spec.origin if spec is not None else None
        st = os.stat(origin) if origin else None
    except (ImportError, OSError, ValueError):
        return None
    if st is None:
        return None
    version = f"{origin}:{st.st_size}:{st.st_mtime_ns}:{sys.version_info[:2]}:{_PARSER}\0"
    return hashlib.sha256(version.encode() + text.encode("utf-8", "surrogatepass")).hexdigest()


_NOT_PLAIN = object()


def _to_json(value: Any) -> Any:
    """`value` as JSON data that `_from_json` gives back exactly, or _NOT_PLAIN (sets, bytes,
    non-string keys, NaN or infinities, ...)."""
    if value is None or type(value) in (str, bool, int):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else _NOT_PLAIN
    if type(value) in (dt.datetime, dt.date):
        kind = "datetime" if type(value) is dt.datetime else "date"
        back = _from_json({_TAG: kind, "iso": value.isoformat()})
        return {_TAG: kind, "iso": value.isoformat()} if repr(back) == repr(value) else _NOT_PLAIN
    if type(value) is list:
        items = [_to_json(v) for v in value]
        return _NOT_PLAIN if any(v is _NOT_PLAIN for v in items) else items
    if type(value) is dict and all(type(k) is str for k in value) and _TAG not in value:
        out = {k: _to_json(v) for k, v in value.items()}
        return _NOT_PLAIN if any(v is _NOT_PLAIN for v in out.values()) else out
    return _NOT_PLAIN


def _from_json(value: Any) -> Any:
    if type(value) is list:
        return [_from_json(v) for v in value]
    if type(value) is dict:
        if _TAG in value:
            cls = dt.datetime if value[_TAG] == "datetime" else dt.date
            return cls.fromisoformat(value["iso"])
        return {k: _from_json(v) for k, v in value.items()}
    return value


def reference() -> str:
    """The Markdown reference of every course.yml key (docs/config.md)."""
    return schema.reference(Course, title="course.yml reference", intro=f"""
Every key of `course.yml`, generated from the declarations in `autograder/config.py`
(`python -m autograder.config > docs/config.md`; a test fails when this page is out of date).
Keys not listed here are errors, and so are a key given twice in one mapping (`course` names both
lines) and a value of the wrong type: `course` names the key path
in one line, e.g. `course.yml: assignments[0].limits.cell_seconds: expected a positive number of at most
{MAX_SECONDS}, got -1`. A number is finite (not `.inf` or `.nan`) and within the range its type gives: at most
a week for a time limit, 1 TiB for a size in MB, what the sandbox can set and the reports can add up.
A key left out, or set to nothing (`key:` or `key: null`), takes its default; a mapping given in
part keeps the defaults of the keys it leaves out. Dtype keys: {", ".join(DTYPES)}. A key is the text
written, whatever YAML would make of it as a value: student `0042` in `extensions` is "0042" (as in
the roster), not the number 34. Each assignment's `name` must be its own. That its folder
`assignments/<package>/` and its source notebooks exist is checked when a command asks for that
assignment: one declared before its files are written stops only the commands about it.
""")


if __name__ == "__main__":
    sys.stdout.write(reference())
