"""Grades into nbgrader's gradebook, through nbgrader's own API, so `nbgrader export` and the
formgrader see our scores; and what people entered there (overrides, comments) read back.

Layout in the gradebook: the assignment (course.yml name) has one notebook per notebook file
(named by its stem, as nbgrader names them) and one grade cell per problem (`Problem.grade_id`,
max_score = the problem's points). course.yml is the one source of these numbers:

- `sync_course` (run by `course release`, and by every `course autograde` before it records) puts
  the roster's students (names, emails), the due date and the course id on the assignment, and each
  grade cell's max_score = the problem's points, creating what is missing;
- `apply_release` (run by `course release`) copies the cells nbgrader's generate_assignment found in a
  scratch build (grade, solution, task and source cells) into the gradebook, also after students have
  submitted (adding a cell gives every submission its empty grade or comment); removing a cell that
  submissions have grades or comments for is refused (`check_release`), naming the cell.

Each submission is written in one transaction: nbgrader's `add_*`/`update_or_create_*` methods
commit after every call, so within a submission only its finders and its model classes are used
and the session is committed once; any failure rolls back that submission alone and is reported.
A grade that a person entered by hand (`manual_score`) is kept and flagged for review, as
`nbgrader autograde` does. A crashed submission's grades get no automatic score and are flagged
for manual grading. A student's extension (course.yml) is the submission's `extension`, so
nbgrader's own lateness (formgrader, `total_seconds_late`) counts from the student's due date.

A batch (`GradebookWriter`) writes its submissions the same way through plain SQL when it can
(reporting.gradebook_sql: an SQLite gradebook of nbgrader's schema that course.yml needs no change
in), without importing nbgrader.

Every entry point is a plain function of (course, assignment, ...) that opens the gradebook itself
(or a `GradebookWriter` held open for a batch), so it can run in any process.

Every course command that opens the gradebook first takes the course's gradebook lock (an flock on
`.gradebook.lock` in the course folder; `gradebook_lock`), so it waits for a commit still running
in the background (a one-student `course autograde` returns before its commit, see
autograder.batch.writer) and says so when the wait is long. A background commit that failed or was
interrupted leaves a record under `.gradebook-pending/`, which every later command reports
(`unfinished_commits`) until that student's grades are committed.
"""
from __future__ import annotations

import ast
import contextlib
import datetime as dt
import fcntl
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from autograder.config import SYNCED_COLUMNS, Assignment, Course, Problem
from autograder.errors import ConfigError, CourseError, ReleaseError
from autograder.grading.results import SubmissionResult
from autograder.layout import CONFIG_FILE
from autograder.text import first_few, first_ids, format_time
from autograder.toolpath import tools_on_path

from .review import ProblemReview, Review

if TYPE_CHECKING:
    from nbgrader.api import Gradebook

    from .gradebook_sql import SqlGradebook

T = TypeVar("T")

LOCK_FILE = ".gradebook.lock"         # in the course folder: held by whatever writes the gradebook
PENDING_DIR = ".gradebook-pending"    # <assignment>/<student>.json: a background commit not finished
LOCK_NOTICE_SECONDS = 2.0             # a wait for the lock longer than this is announced
_held: dict[str, int] = {}            # lock file -> the descriptor through which this process holds it


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def lock_file(course: Course) -> Path:
    return course.root / LOCK_FILE


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"process {text}" if text.isdigit() else "another process"


def acquire_gradebook_lock(course: Course, *, notice: Callable[[str], None] = _stderr) -> int:
    """Take the course's gradebook lock, waiting for whoever holds it (announced through `notice`
    when the wait is long); returns the descriptor holding it (closing it, in every process it was
    passed to, releases it). The holder's process id is written into the file."""
    path = lock_file(course)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise CourseError(f"{path}: cannot open the gradebook lock ({exc.strerror})") from None
    try:
        deadline = time.monotonic() + LOCK_NOTICE_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    notice(f"waiting for the gradebook: {_holder(fd)} is still writing it "
                           f"(a background commit, or another course command); lock {path.name}")
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    break
                time.sleep(0.02)
        mark_lock_holder(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def mark_lock_holder(fd: int, pid: int | None = None) -> None:
    """Write the holding process's id into the lock file (for the message of whoever waits):
    written over the old one, then cut to its length, so that a reader never sees it empty."""
    data = f"{pid or os.getpid()}\n".encode()
    with contextlib.suppress(OSError):
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))


def hold_inherited_lock(course: Course, fd: int) -> None:
    """This process holds the gradebook lock through `fd`, passed by the process that took it."""
    _held[str(lock_file(course))] = fd
    mark_lock_holder(fd)


@contextlib.contextmanager
def gradebook_lock(course: Course, *, notice: Callable[[str], None] = _stderr) -> Iterator[None]:
    """Hold the course's gradebook lock for the block (at once when this process already holds it)."""
    key = str(lock_file(course))
    if key in _held:
        yield
        return
    fd = acquire_gradebook_lock(course, notice=notice)
    _held[key] = fd
    try:
        yield
    finally:
        del _held[key]
        os.close(fd)


def pending_file(course: Course, assignment: str, student: str) -> Path:
    """The record of `student`'s background commit: written before it starts, removed when done."""
    return course.root / PENDING_DIR / assignment / f"{student}.json"


def clear_pending(course: Course, assignment: str, student: str) -> None:
    """The student's grades are in the gradebook: forget a background commit that did not finish."""
    record = pending_file(course, assignment, student)
    for path in (record, record.with_suffix(".failed"), record.with_suffix(".log")):
        with contextlib.suppress(OSError):
            path.unlink()
    for folder in (record.parent, record.parent.parent):    # gone when empty: commands look for it
        with contextlib.suppress(OSError):
            folder.rmdir()


def _lock_free(course: Course) -> bool:
    key = str(lock_file(course))
    if key in _held:
        return True
    try:
        fd = os.open(key, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def unfinished_commits(course: Course) -> list[str]:
    """One line per background commit that failed (with the reason its writer left beside its record),
    or was interrupted (its record is there, no reason, and no one holds the lock): those students'
    grades are not in the gradebook, and their results.json has no grading key, so the next
    `course autograde` grades them again."""
    base = course.root / PENDING_DIR
    if not base.is_dir():
        return []
    lines = []
    free: bool | None = None
    for record in sorted(base.glob("*/*.json")):
        assignment, student = record.parent.name, record.stem
        failed = record.with_suffix(".failed")
        try:
            why = failed.read_text(encoding="utf-8", errors="replace").strip().splitlines()[0][:300]
            what = f"failed ({why})"
        except (OSError, IndexError):
            if free is None:
                free = _lock_free(course)
            if not free:
                continue                      # still running
            what = "did not finish (it was interrupted)"
        lines.append(f"gradebook: the background commit of {student}'s grades for {assignment} {what}; they are "
                     f"not in the gradebook: run `course autograde {assignment} --student {student}` (details: "
                     f"{course.layout.relative(record.with_suffix('.log'))})")
    return lines


def write_pending(course: Course, assignment: str, student: str, job: dict[str, Any]) -> Path:
    """Record a background commit before it starts (the job it is given)."""
    record = pending_file(course, assignment, student)
    clear_pending(course, assignment, student)
    record.parent.mkdir(parents=True, exist_ok=True)
    tmp = record.with_name(f".{record.name}.tmp")
    tmp.write_text(json.dumps(job), encoding="utf-8")
    os.replace(tmp, record)
    return record


@dataclass(frozen=True)
class GradebookReport:
    recorded: tuple[str, ...] = ()                 # student ids whose grades landed
    failed: tuple[tuple[str, str], ...] = ()       # (student id, why) for those rolled back
    created: tuple[str, ...] = ()                  # gradebook entries created or updated from course.yml

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def messages(self) -> tuple[str, ...]:
        """One line per failed submission: "<student>: <why>"; a reason shared by three or more (a
        gradebook that cannot be opened at all, a full disk) is one line naming them together."""
        students: dict[str, list[str]] = {}
        for student, why in self.failed:
            students.setdefault(why, []).append(student)
        lines = []
        for student, why in self.failed:
            same = students[why]
            if len(same) < 3:
                lines.append(f"{student}: {why}")
            elif same[0] == student:
                lines.append(f"{len(same)} students ({first_ids(same)}): {why}")
        return tuple(lines)


def notebook_name(notebook_file: str) -> str:
    """nbgrader's name for a notebook: the file name without .ipynb."""
    return Path(notebook_file).stem


def naive_utc(when: dt.datetime) -> dt.datetime:
    """nbgrader keeps naive UTC times."""
    return when.astimezone(dt.UTC).replace(tzinfo=None) if when.tzinfo else when


def submission_timestamp(result: SubmissionResult) -> dt.datetime | None:
    """The time `result` was submitted as nbgrader keeps it (naive UTC), or None when it has none.
    lateness.parse_timestamp gives times in UTC, so any it read converts; a results.json written
    before it did may hold one that does not (out of range once in UTC), which is left out too.
    The gradebook's timestamp is always this one, None included: nbgrader's autograde keeps an earlier
    grading's time when the folder has none, but the late penalty here is judged from the folder
    alone, and formgrader would otherwise show a regraded submission late that was graded on time."""
    if not result.submitted_at:
        return None
    try:
        return naive_utc(dt.datetime.fromisoformat(result.submitted_at))
    except (ValueError, OverflowError):
        return None


def shown_url(url: str) -> str:
    """The gradebook's URL for messages, its password (if any) as ***."""
    if "@" not in url:
        return url
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: whatever stands before the @ goes
        return re.sub(r"//[^/]*@", "//***@", url)


def check_gradebook_url(course: Course) -> None:
    """Refuse (ConfigError naming course.yml's `gradebook`) a gradebook the writer could not open,
    before anything is graded: a URL SQLAlchemy cannot read, a database whose driver is not installed,
    an SQLite file in a folder that does not exist or cannot be written. Nothing is connected to."""
    from .gradebook_sql import sqlite_path

    url = course.gradebook_url
    path = sqlite_path(url)
    problem = _sqlite_file_problem(path) if path is not None else _url_problem(url)
    if problem is not None:
        raise ConfigError(f"{CONFIG_FILE}: gradebook: {shown_url(url)}: {problem}")


def check_gradebook_opens(course: Course) -> None:
    """Refuse (CourseError, the line `open_gradebook` gives) an SQLite gradebook file that is no database
    or a damaged one, before anything is graded: its header and schema read with plain SQL, without
    importing nbgrader."""
    from .gradebook_sql import unreadable_file

    exc = unreadable_file(course)
    if exc is not None:
        raise CourseError(f"gradebook {shown_url(course.gradebook_url)}: cannot open ({db_error(exc)})")


def _sqlite_file_problem(path: Path) -> str | None:
    if path.exists():
        if not path.is_file():
            return "not a file"
        if not os.access(path, os.R_OK | os.W_OK):
            return "the file cannot be written"
        if not os.access(path.parent, os.W_OK | os.X_OK):
            return f"the folder {path.parent} cannot be written (SQLite keeps its journal beside the file)"
        return None
    if not path.parent.is_dir():
        return f"the folder {path.parent} does not exist (the gradebook is created in it)"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return f"the folder {path.parent} cannot be written (the gradebook is created in it)"
    return None


def _url_problem(url: str) -> str | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return "not a database URL (e.g. sqlite:///gradebook.db, or postgresql://user@host/db)"
    try:
        parsed.get_dialect().import_dbapi()
    except NoSuchModuleError:
        return f"no database of the kind {parsed.drivername!r} is known to SQLAlchemy"
    except ImportError as exc:
        return f"the driver for {parsed.drivername!r} is not installed ({exc})"
    return None


@contextlib.contextmanager
def open_gradebook(course: Course) -> Iterator[Gradebook]:
    """nbgrader's Gradebook for the course's database (created if new), under the course's
    gradebook lock; closed afterwards."""
    from nbgrader.api import Gradebook

    with gradebook_lock(course), _opened(course, Gradebook) as gb:
        yield gb


def db_error(exc: BaseException) -> str:
    """An error of the gradebook's database in one short line: for SQLAlchemy's, the driver's own
    error ("OperationalError: database or disk is full"), without the statement and link it adds."""
    orig = getattr(exc, "orig", None)
    shown = orig if isinstance(orig, BaseException) else exc
    return f"{type(shown).__name__}: {shown}".splitlines()[0][:500]


@contextlib.contextmanager
def _opened(course: Course, factory: Callable[[str, str], Gradebook]) -> Iterator[Gradebook]:
    try:
        with tools_on_path():      # nbgrader may run `alembic` to create a new gradebook
            quick_alembic_version()
            gb = factory(course.gradebook_url, course.course_id)
    except Exception as exc:  # noqa: BLE001 - nbgrader raises SQLAlchemy and subprocess errors here
        raise CourseError(f"gradebook {shown_url(course.gradebook_url)}: cannot open ({db_error(exc)})") from None
    try:
        yield gb
    finally:
        gb.close()


_MIGRATION_NAMES = ("revision", "down_revision", "branch_labels", "depends_on")


def alembic_head(versions: Path | None = None) -> str | None:
    """The revision `alembic heads` names first for nbgrader's migration scripts (`versions`: its
    alembic/versions folder), read from the scripts' text: each script that alembic would load (a
    .py file of that folder not named .#* or __init__*) assigns its revision and down_revision as
    plain literals, and branch_labels and depends_on as None. None when they are anything but such a
    history with exactly one head (nbgrader's own `alembic heads` then answers)."""
    if versions is None:
        try:
            from nbgrader.dbutil import ALEMBIC_DIR
        except ImportError:
            return None
        versions = Path(ALEMBIC_DIR) / "versions"
    revisions: set[str] = set()
    downs: set[str] = set()
    try:
        scripts = sorted(p for p in versions.iterdir()
                         if p.name.endswith(".py") and not p.name.startswith((".#", "__init__")) and p.is_file())
        for script in scripts:
            values: dict[str, Any] = {}
            for node in ast.parse(script.read_text(encoding="utf-8")).body:
                target: ast.expr | None = None
                value: ast.expr | None = None
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target, value = node.targets[0], node.value
                elif isinstance(node, ast.AnnAssign):
                    target, value = node.target, node.value
                if isinstance(target, ast.Name) and target.id in _MIGRATION_NAMES and value is not None:
                    if target.id in values:
                        return None                  # assigned twice: left to alembic
                    values[target.id] = ast.literal_eval(value)
                elif any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in _MIGRATION_NAMES
                         for n in ast.walk(node)):
                    return None                      # set some other way: left to alembic
            revision, down = values.get("revision"), values.get("down_revision")
            if type(revision) is not str or not revision or revision in revisions \
                    or values.get("branch_labels") is not None or values.get("depends_on") is not None:
                return None
            if down is None:
                down = ()
            elif type(down) is str:
                down = (down,)
            elif type(down) not in (tuple, list) or not all(type(d) is str for d in down):
                return None
            revisions.add(revision)
            downs.update(down)
    except (OSError, SyntaxError, ValueError, TypeError, UnicodeDecodeError, RecursionError, MemoryError):
        return None
    heads = revisions - downs
    return next(iter(heads)) if len(heads) == 1 and downs <= revisions else None


def quick_alembic_version() -> None:
    """Have nbgrader's `get_alembic_version` (which runs `alembic heads` in a new process when it
    creates a gradebook: seconds of CPU, most of it alembic loading every migration script) answer
    from `alembic_head` when that can tell, and run `alembic heads` as before when not. The gradebook
    gets the same alembic_version row either way."""
    try:
        import nbgrader.api as nbgrader_api
    except ImportError:
        return
    real = nbgrader_api.get_alembic_version
    if getattr(real, "_quick", False):
        return

    def get_alembic_version() -> str:
        head = alembic_head()
        return head if head is not None else real()

    get_alembic_version._quick = True            # type: ignore[attr-defined]
    get_alembic_version.__wrapped__ = real       # type: ignore[attr-defined]
    nbgrader_api.get_alembic_version = get_alembic_version


def _commit(gb: Gradebook, work: Callable[[], T]) -> T:
    """Run `work()` and commit once; roll everything back on failure."""
    try:
        out = work()
        gb.db.commit()
        return out
    except BaseException:
        gb.db.rollback()
        raise


# --------------------------------------------------------------------------- course.yml -> gradebook

def sync_roster(gb: Gradebook, course: Course) -> list[str]:
    """Create or update every roster student (id, first and last name, email, LMS user id). A blank cell
    clears the gradebook's value (a wrong email or LMS id taken out of the roster no longer reaches the
    exports); a column the roster does not have leaves the gradebook's values alone. Students who are not
    on the roster are left as they are. Not committed here; returns one line per change."""
    from nbgrader.api import Student

    changes = []
    known = {row.id: row for row in gb.db.query(Student)}     # what find_student gives, in one query
    columns, students = course.roster_columns()
    for s in students:
        student = known.get(s.id)
        if student is None:
            gb.db.add(Student(id=s.id, first_name=s.first_name or None, last_name=s.last_name or None,
                              email=s.email or None, lms_user_id=s.lms_user_id or None))
            changes.append(f"student {s.id}")
            continue
        for key in SYNCED_COLUMNS:
            value = getattr(s, key) or None
            if key in columns and (getattr(student, key) or None) != value:
                setattr(student, key, value)
                changes.append(f"student {s.id}: {key}" + ("" if value else " cleared"))
    gb.db.flush()
    return changes


def _sync_assignment(gb: Gradebook, course: Course, assignment: Assignment, *, releasing: bool = False) -> list[str]:
    """The assignment with its due date, notebooks and one grade cell per problem (max_score = points):
    created where missing, corrected where they differ from course.yml; every submission completed
    with rows for every cell. Not committed here. `releasing`: a changed max score's line also says
    what stays from before (`_regrade_note`), which a batch, grading again, need not."""
    from nbgrader.api import Assignment as GbAssignment
    from nbgrader.api import GradeCell, MissingEntry
    from nbgrader.api import Notebook as GbNotebook

    changes = []
    due = naive_utc(assignment.due) if assignment.due is not None else None
    try:
        row = gb.find_assignment(assignment.name)
    except MissingEntry:
        row = GbAssignment(assignment.name, duedate=due, course_id=course.course_id)
        gb.db.add(row)
        gb.db.flush()
        changes.append(f"assignment {assignment.name}" + (f" (due {format_time(due)})" if due else ""))
    else:
        if due is not None and row.duedate != due:     # course.yml without a due date leaves nbgrader's alone
            old = format_time(row.duedate) if row.duedate else "none"
            changes.append(f"assignment {assignment.name}: due date {old} -> {format_time(due)}")
            row.duedate = due
    stems = dict.fromkeys([notebook_name(n) for n in assignment.notebooks]
                          + [notebook_name(p.notebook) for p in assignment.problems])
    notebooks = {nb.name: nb for nb in row.notebooks}
    for stem in stems:
        if stem not in notebooks:
            notebooks[stem] = GbNotebook(name=stem, assignment=row)
            gb.db.add(notebooks[stem])
            changes.append(f"notebook {assignment.name}/{stem}")
    gb.db.flush()
    for p in assignment.problems:
        stem = notebook_name(p.notebook)
        cell = next((c for c in notebooks[stem].grade_cells if c.name == p.grade_id), None)
        if cell is None:
            gb.db.add(GradeCell(name=p.grade_id, notebook=notebooks[stem], max_score=p.points, cell_type="code"))
            changes.append(f"grade cell {assignment.name}/{stem}/{p.grade_id}")
        elif cell.max_score != p.points:
            changes.append(f"grade cell {assignment.name}/{stem}/{p.grade_id}: max score "
                           f"{cell.max_score:g} -> {p.points:g}"
                           + (_regrade_note(row, cell, assignment, p.points) if releasing else ""))
            cell.max_score = p.points
    gb.db.flush()
    for submission in _incomplete(gb, row):
        _complete(gb, submission)
    return changes


def _regrade_note(row: Any, cell: Any, assignment: Assignment, points: float) -> str:
    """What a changed max score leaves behind: the submissions already graded keep scores out of the
    old points until they are graded again, and a TA's score above the new points stays as it is
    (named, for a TA to look at again)."""
    if not row.submissions:
        return ""
    n = len(row.submissions)
    who = "the 1 submission graded before keeps its" if n == 1 else f"the {n} submissions graded before keep their"
    note = f"; {who} old scores until `course autograde {assignment.name}`"
    above = sorted(((g.student.id, g.manual_score) for g in cell.grades
                    if g.manual_score is not None and g.manual_score > points), key=lambda a: a[0].casefold())
    if above:
        shown = first_few([f"{sid} ({score:g})" for sid, score in above])
        note += f"; TA scores above {points:g} points, left as they are: {shown}"
    return note


def _incomplete(gb: Gradebook, row: Any) -> list[Any]:
    """The submissions of the gradebook assignment `row` that lack a notebook, grade or comment row
    for one of its cells: those `_complete` would add to. A few queries for the whole assignment,
    instead of loading every submission's rows."""
    from nbgrader.api import Comment, Grade, SubmittedAssignment, SubmittedNotebook

    graded = {nb.id: {c.id for c in [*nb.grade_cells, *nb.task_cells]} for nb in row.notebooks}
    commented = {nb.id: {c.id for c in [*nb.solution_cells, *nb.task_cells]} for nb in row.notebooks}
    ours = SubmittedAssignment.assignment_id == row.id
    submitted: dict[Any, set[Any]] = {sid: set() for (sid,) in gb.db.query(SubmittedAssignment.id).filter(ours)}
    where: dict[Any, tuple[Any, Any]] = {}          # submitted notebook -> (its submission, its notebook)
    for snb, sid, nid in (gb.db.query(SubmittedNotebook.id, SubmittedNotebook.assignment_id,
                                      SubmittedNotebook.notebook_id)
                          .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
                          .filter(ours)):
        where[snb] = (sid, nid)
        submitted[sid].add(nid)
    missing = {sid for sid, have in submitted.items() if set(graded) - have}
    for model, wanted in ((Grade, graded), (Comment, commented)):
        have_cells: dict[Any, set[Any]] = {snb: set() for snb in where}
        for snb, cell in (gb.db.query(model.notebook_id, model.cell_id)
                          .join(SubmittedNotebook, SubmittedNotebook.id == model.notebook_id)
                          .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
                          .filter(ours)):
            have_cells[snb].add(cell)
        missing |= {where[snb][0] for snb, cells in have_cells.items()
                    if wanted.get(where[snb][1], set()) - cells}
    return [submission for submission in row.submissions if submission.id in missing]


def ensure_assignment(gb: Gradebook, course: Course, assignment: Assignment) -> tuple[str, ...]:
    """Create the assignment, its notebooks and one grade cell per problem where missing, and bring
    the due date and max scores in line with course.yml (one transaction). Returns one line per
    entry created or changed."""
    return tuple(_commit(gb, lambda: _sync_assignment(gb, course, assignment)))


def sync_course(course: Course, assignment: Assignment) -> tuple[str, ...]:
    """Roster, due date, notebooks and max scores from course.yml into the gradebook (one transaction)."""
    with open_gradebook(course) as gb:
        return tuple(_commit(gb, lambda: sync_roster(gb, course) + _sync_assignment(gb, course, assignment)))


def max_score_problems(course: Course, assignment: Assignment) -> list[str]:
    """Grade cells of the gradebook whose max score is not the problem's points in course.yml (a
    gradebook that does not exist yet, or has no such assignment, has none)."""
    from nbgrader.api import MissingEntry

    url = course.gradebook_url
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        return []
    out = []
    with open_gradebook(course) as gb:
        for p in assignment.problems:
            try:
                cell = gb.find_grade_cell(p.grade_id, notebook_name(p.notebook), assignment.name)
            except MissingEntry:
                continue
            if cell.max_score != p.points:
                out.append(f"gradebook: {p.name}: grade cell {p.grade_id} has max score {cell.max_score:g}, "
                           f"course.yml gives {p.points:g} (run `course release` or `course autograde`)")
    return out


# --------------------------------------------------------------------------- release -> gradebook

CELL_KINDS = ("grade", "solution", "task", "source")


@dataclass(frozen=True)
class NotebookCells:
    """What generate_assignment recorded for one notebook: kind -> cell name -> its attributes."""
    name: str
    kernelspec: str | None
    cells: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


def read_release_cells(build_gradebook_url: str, assignment: Assignment) -> tuple[NotebookCells, ...]:
    """The cells of `assignment` as nbgrader's generate_assignment wrote them into a scratch gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    quick_alembic_version()
    with tools_on_path(), Gradebook(build_gradebook_url) as gb:
        try:
            row = gb.find_assignment(assignment.name)
        except MissingEntry:
            raise ReleaseError(f"nbgrader generate_assignment recorded no assignment {assignment.name!r}") from None
        out = []
        for nb in row.notebooks:
            cells: dict[str, dict[str, dict[str, Any]]] = {
                "grade": {c.name: {"max_score": c.max_score, "cell_type": c.cell_type} for c in nb.grade_cells},
                "solution": {c.name: {} for c in nb.solution_cells},
                "task": {c.name: {"max_score": c.max_score, "cell_type": c.cell_type} for c in nb.task_cells},
                "source": {c.name: {"cell_type": c.cell_type, "locked": c.locked, "source": c.source,
                                    "checksum": c.checksum} for c in nb.source_cells},
            }
            out.append(NotebookCells(nb.name, nb.kernelspec, cells))
        return tuple(out)


def _cells_of(nb: Any, kind: str) -> list[Any]:
    return list({"grade": nb.grade_cells, "solution": nb.solution_cells, "task": nb.task_cells,
                 "source": nb.source_cells}[kind])


def _removals(gb: Gradebook, assignment: Assignment, release: tuple[NotebookCells, ...]) -> list[tuple[Any, str]]:
    """(cell or notebook row, its description) for what the gradebook has and the release does not."""
    from nbgrader.api import MissingEntry

    try:
        row = gb.find_assignment(assignment.name)
    except MissingEntry:
        return []
    wanted = {n.name: n for n in release}
    out: list[tuple[Any, str]] = []
    for nb in row.notebooks:
        if nb.name not in wanted:
            out.append((nb, f"notebook {nb.name}"))
            continue
        for kind in CELL_KINDS:
            for cell in _cells_of(nb, kind):
                if cell.name not in wanted[nb.name].cells[kind]:
                    out.append((cell, f"{kind} cell {nb.name}/{cell.name}"))
    return out


def _holds_data(row: Any) -> bool:
    """Does a grade or comment row hold a score or text (not just the empty row every submission gets)?"""
    keys = ("auto_score", "manual_score", "extra_credit", "auto_comment", "manual_comment")
    return any(getattr(row, key, None) not in (None, "") for key in keys)


def _rows_of(cell: Any) -> list[Any]:
    """The grade and comment rows submissions have for a cell (a source cell has none)."""
    return [*(getattr(cell, "grades", None) or ()), *(getattr(cell, "comments", None) or ())]


def _has_submission_data(row: Any) -> bool:
    """Do submissions hold grades or comments for this cell (or for any cell of this notebook)?"""
    if hasattr(row, "submissions"):             # a notebook
        return any(_holds_data(x) for snb in row.submissions for x in [*snb.grades, *snb.comments])
    return any(_holds_data(x) for x in _rows_of(row))


def _delete_cell(gb: Gradebook, cell: Any) -> None:
    """Delete a cell with the empty grade and comment rows submissions have for it."""
    for x in _rows_of(cell):
        gb.db.delete(x)
    gb.db.delete(cell)


def check_release(course: Course, assignment: Assignment, release: tuple[NotebookCells, ...]) -> None:
    """Raise ReleaseError (naming them) when the release drops cells that submissions have grades or
    comments for: recording the release would lose what was graded."""
    from nbgrader.api import Notebook as GbNotebook

    with open_gradebook(course) as gb:
        blocked = [(row, what) for row, what in _removals(gb, assignment, release) if _has_submission_data(row)]
    if blocked:
        # a cell is put back in the source notebook, a notebook (gradebook name: its file's stem) in course.yml
        files = [f"{row.name}.ipynb" for row, _ in blocked if isinstance(row, GbNotebook)]
        them = "them" if len(blocked) > 1 else "it"
        back = []
        if len(files) < len(blocked):
            back.append(("the cells" if files else them) + " back in the source notebook")
        if files:
            back.append(f"{', '.join(files)} back in the `notebooks` of assignment {assignment.name} in course.yml")
        raise ReleaseError(
            f"gradebook {shown_url(course.gradebook_url)}: {assignment.name}: the new release no longer has "
            f"{', '.join(what for _, what in blocked)}, which submissions have grades or comments for; put "
            f"{' and '.join(back)}, or run `course release {assignment.name} --drop-grades` to remove "
            f"{them} with those grades and comments (nothing was changed)")


def apply_release(course: Course, assignment: Assignment, release: tuple[NotebookCells, ...], *,
                  drop_grades: bool = False) -> tuple[str, ...]:
    """Record the release's cells in the gradebook, with the roster, due date and max scores from
    course.yml, in one transaction; returns one line per entry created, changed or removed. A cell
    (or notebook) the release no longer has that submissions have grades or comments for is refused,
    unless `drop_grades`: then it goes with them, and its line says so."""
    from nbgrader.api import GradeCell, SolutionCell, SourceCell, TaskCell
    from nbgrader.api import Notebook as GbNotebook

    models = {"grade": GradeCell, "solution": SolutionCell, "task": TaskCell, "source": SourceCell}

    def work() -> list[str]:
        changes = sync_roster(gb, course) + _sync_assignment(gb, course, assignment, releasing=True)
        for row, what in _removals(gb, assignment, release):
            graded = _has_submission_data(row)
            if graded and not drop_grades:
                raise ReleaseError(f"{what}: submissions have grades or comments for it")
            if isinstance(row, GbNotebook):
                for kind in CELL_KINDS:
                    for cell in _cells_of(row, kind):
                        _delete_cell(gb, cell)
                for snb in row.submissions:
                    gb.db.delete(snb)
            else:
                _delete_cell(gb, row)
            if isinstance(row, GbNotebook):
                gb.db.delete(row)
            changes.append(f"removed {what}" + (" with the grades and comments submissions had for it" * graded))
        gb.db.flush()
        gb.db.expire_all()
        a = gb.find_assignment(assignment.name)
        notebooks = {nb.name: nb for nb in a.notebooks}
        for spec in release:
            nb = notebooks.get(spec.name)
            if nb is None:
                nb = GbNotebook(name=spec.name, assignment=a, kernelspec=spec.kernelspec)
                gb.db.add(nb)
                changes.append(f"notebook {assignment.name}/{spec.name}")
            elif spec.kernelspec and nb.kernelspec != spec.kernelspec:
                nb.kernelspec = spec.kernelspec
            for kind in CELL_KINDS:
                have = {c.name: c for c in _cells_of(nb, kind)}
                for name, attrs in spec.cells[kind].items():
                    cell = have.get(name)
                    if cell is None:
                        gb.db.add(models[kind](name=name, notebook=nb, **attrs))
                        changes.append(f"{kind} cell {assignment.name}/{spec.name}/{name}")
                        continue
                    for key, value in attrs.items():
                        if getattr(cell, key) != value:
                            if kind == "grade" and key == "max_score":
                                changes.append(f"grade cell {assignment.name}/{spec.name}/{name}: max score "
                                               f"{cell.max_score:g} -> {value:g}")
                            setattr(cell, key, value)
        gb.db.flush()
        gb.db.expire_all()
        # course.yml has the last word on max scores; every submission gets rows for new cells
        changes += [c for c in _sync_assignment(gb, course, assignment) if c not in changes]
        return changes

    with open_gradebook(course) as gb:
        return tuple(_commit(gb, work))


# --------------------------------------------------------------------------- submissions

def _complete(gb: Gradebook, submission: Any) -> None:
    """Give `submission` a notebook, grade and comment row for every cell of its assignment."""
    from nbgrader.api import Comment, Grade, SubmittedNotebook

    with gb.db.no_autoflush:   # the rows below are linked before they are complete
        have = {snb.notebook_id: snb for snb in submission.notebooks}
        for notebook in submission.assignment.notebooks:
            snb = have.get(notebook.id)
            if snb is None:
                snb = SubmittedNotebook(notebook=notebook, assignment=submission)
                gb.db.add(snb)
            graded = {g.cell_id for g in snb.grades}
            commented = {c.cell_id for c in snb.comments}
            for cell in list(notebook.grade_cells) + list(notebook.task_cells):
                if cell.id not in graded:
                    gb.db.add(Grade(cell_id=cell.id, notebook=snb))
            for cell in list(notebook.solution_cells) + list(notebook.task_cells):
                if cell.id not in commented:
                    gb.db.add(Comment(cell_id=cell.id, notebook=snb))
    gb.db.flush()


def _submission(gb: Gradebook, assignment: str, student_id: str) -> Any:
    """The student's submission, created (with the student) if missing, holding a notebook,
    grade and comment row for every cell of the assignment. Nothing is committed here."""
    from nbgrader.api import MissingEntry, Student, SubmittedAssignment

    try:
        student = gb.find_student(student_id)
    except MissingEntry:
        student = Student(id=student_id)
        gb.db.add(student)
    try:
        submission = gb.find_submission(assignment, student_id)
    except MissingEntry:
        submission = SubmittedAssignment(assignment=gb.find_assignment(assignment), student=student)
        gb.db.add(submission)
    _complete(gb, submission)
    return submission


def _grades_of(gb: Gradebook, assignment: str, student: str) -> dict[tuple[str, str], Any]:
    """(notebook name, grade cell name) -> the student's Grade row, for every grade cell of their
    submission, in one query (the joins of nbgrader's `find_grade`, without its filter on the names)."""
    from nbgrader.api import Assignment as GbAssignment
    from nbgrader.api import Grade, GradeCell, Notebook, Student, SubmittedAssignment, SubmittedNotebook

    rows = (gb.db.query(Grade, GradeCell.name, Notebook.name)
            .join(GradeCell, GradeCell.id == Grade.cell_id)
            .join(SubmittedNotebook, SubmittedNotebook.id == Grade.notebook_id)
            .join(Notebook, Notebook.id == SubmittedNotebook.notebook_id)
            .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
            .join(GbAssignment, GbAssignment.id == SubmittedAssignment.assignment_id)
            .join(Student, Student.id == SubmittedAssignment.student_id)
            .filter(GbAssignment.name == assignment, Student.id == student))
    return {(notebook, cell): grade for grade, cell, notebook in rows}


def _grade(gb: Gradebook, grades: dict[tuple[str, str], Any], problem: Problem, assignment: str, student: str) -> Any:
    """What `gb.find_grade` gives for the problem's grade cell: from `grades` (see `_grades_of`), else
    (a task cell of that name, or none: MissingEntry) from `find_grade` itself."""
    stem = notebook_name(problem.notebook)
    found = grades.get((stem, problem.grade_id))
    return found if found is not None else gb.find_grade(problem.grade_id, stem, assignment, student)


def _problem_score(result: SubmissionResult, problem: str) -> float:
    return result.problem_score(problem)


def needs_manual_grade(*, crashed: bool, auto_score: float | None, manual_score: float | None,
                       auto_before: float | None, flag_before: bool | None, review_again: bool,
                       unreadable: bool = False, extra_credit: float | None = None) -> bool:
    """A problem's grade row's `needs_manual_grade` (formgrader's "needs manual grade") once a result is
    recorded over it (`auto_score`; `auto_before` and `flag_before` as the row held them, None for a new
    row). Set when grading crashed and no person scored it (no automatic score to go by). Set, too, when
    a person reviewed it (a score, or extra credit) or its notebook could not be read (`unreadable`:
    formgrader's placeholder is for grading it by hand), and it is to be reviewed against a new result:
    a new row, `review_again` (a resubmission, or new graders: what the batch warns of), or an automatic
    score under it that changed. Otherwise the flag stays as the TA left it (formgrader clears it on
    saving a score, an empty one included), so a run that grades nothing anew (an unchanged submission,
    read back) does not put a reviewed submission back in formgrader's list."""
    reviewed = manual_score is not None or bool(extra_credit)
    if not reviewed and (crashed or not unreadable):
        return crashed
    if review_again or flag_before is None or auto_score != auto_before:
        return True
    return bool(flag_before)


def record_submission(gb: Gradebook, assignment: Assignment, result: SubmissionResult, *,
                      review_again: bool = False) -> Review:
    """Write one submission's problem scores as the grade cells' auto_score, in one transaction, and
    each grade cell's `needs_manual_grade` (see `needs_manual_grade`).
    Returns the gradebook's review of the submission as committed (what `read_review` would read
    next), taken from the rows already loaded. `review_again`: see `needs_manual_grade`."""
    if result.assignment != assignment.name:
        raise ValueError(f"result is for assignment {result.assignment!r}, not {assignment.name!r}")
    crashed = result.state == "crashed"
    try:
        submission = _submission(gb, assignment.name, result.student)
        submission.timestamp = submission_timestamp(result)     # the graded folder's time, None if it had none
        extension = assignment.extensions.get(result.student)
        submission.extension = extension.delta if extension is not None and extension.delta else None
        for i, snb in enumerate(sorted(submission.notebooks, key=lambda n: n.name)):
            snb.late_submission_penalty = (result.late_penalty or None) if i == 0 else None
        grades = _grades_of(gb, assignment.name, result.student)
        problems = []
        for p in assignment.problems:
            grade = _grade(gb, grades, p, assignment.name, result.student)
            auto_before, flag_before = grade.auto_score, grade.needs_manual_grade
            grade.auto_score = None if crashed else _problem_score(result, p.name)
            grade.needs_manual_grade = needs_manual_grade(
                crashed=crashed, auto_score=grade.auto_score, manual_score=grade.manual_score,
                auto_before=auto_before, flag_before=flag_before, review_again=review_again,
                unreadable=p.notebook in result.unreadable_notebooks, extra_credit=grade.extra_credit)
            problems.append(_problem_review(p, grade))
        review = Review(result.student, assignment.name, tuple(problems), _comments(assignment, submission),
                        late_penalty=result.late_penalty)
        gb.db.commit()
    except BaseException:
        gb.db.rollback()
        raise
    return review


# --------------------------------------------------------------------------- gradebook -> feedback

def comment_problem(assignment: Assignment, cell_name: str, source: str) -> str:
    """The problem a commented cell belongs to: the function it defines, else a problem named at the
    start of its grade id (`layer_norm_solution`), else "" (the notebook as a whole)."""
    names = [p.name for p in assignment.problems]
    for name in names:
        if re.search(rf"^\s*def\s+{re.escape(name)}\s*\(", source, re.M):
            return name
    return next((n for n in sorted(names, key=len, reverse=True) if cell_name.startswith(n)), "")


def read_review(gb: Gradebook, assignment: Assignment, student: str) -> Review | None:
    """The gradebook's view of `student`'s submission (None when it has none)."""
    from nbgrader.api import MissingEntry

    try:
        submission = gb.find_submission(assignment.name, student)
    except MissingEntry:
        return None
    problems = []
    grades = _grades_of(gb, assignment.name, student)
    for p in assignment.problems:
        try:
            grade = _grade(gb, grades, p, assignment.name, student)
        except MissingEntry:
            continue
        problems.append(_problem_review(p, grade))
    return Review(student, assignment.name, tuple(problems), _comments(assignment, submission),
                  late_penalty=float(submission.late_submission_penalty or 0.0))


def _problem_review(problem: Problem, grade: Any) -> ProblemReview:
    return ProblemReview(problem.name, problem.points, grade.auto_score, grade.manual_score,
                         float(grade.extra_credit or 0.0))


def _comments(assignment: Assignment, submission: Any) -> tuple[tuple[str, str], ...]:
    """(problem, text) for every comment a person wrote on the submission, by notebook."""
    comments = []
    for snb in sorted(submission.notebooks, key=lambda n: n.name):
        sources: dict[str, str] | None = None           # loaded for the first comment with text
        for comment in snb.comments:
            text = (comment.manual_comment or "").strip()
            if text:
                if sources is None:
                    sources = {c.name: c.source or "" for c in snb.notebook.source_cells}
                name = comment.cell.name
                comments.append((comment_problem(assignment, name, sources.get(name, "")), text))
    return tuple(comments)


def review_of(course: Course, assignment: Assignment, student: str) -> Review | None:
    """`read_review` on the course's gradebook."""
    with open_gradebook(course) as gb:
        return read_review(gb, assignment, student)


# --------------------------------------------------------------------------- batches

class GradebookWriter:
    """The course's gradebook held open for a batch, so each submission is committed as soon as
    it is graded (a batch stopped half-way keeps every grade written so far):

        with GradebookWriter(course, assignment) as gb:
            for result in ...:
                error = gb.record(result)    # None, or "<why>" (that submission rolled back)
                review = gb.review(student)  # overrides and comments, for the feedback page

    Opening syncs the roster, due date and max scores from course.yml (`created` lists what
    changed), and raises CourseError when the gradebook itself is unusable. Submissions are written
    through plain SQL (reporting.gradebook_sql) when the gradebook is an SQLite file of nbgrader's
    schema that course.yml needs no change in; otherwise (and for what course.yml changes) through
    nbgrader's API, imported then, after `before_nbgrader()` (the writer process's quick import)."""

    def __init__(self, course: Course, assignment: Assignment, *,
                 before_nbgrader: Callable[[], object] | None = None):
        self.course = course
        self.assignment = assignment
        self.created: tuple[str, ...] = ()
        self.plain_sql = False                      # whether submissions go through gradebook_sql
        self._before_nbgrader = before_nbgrader
        self._stack = contextlib.ExitStack()
        self._gb: Gradebook | None = None
        self._sql: SqlGradebook | None = None
        self._reviews: dict[str, Review] = {}       # from `record`, until `review` hands it out

    def __enter__(self) -> GradebookWriter:
        from .gradebook_sql import SqlGradebook

        with contextlib.ExitStack() as stack:
            stack.enter_context(gradebook_lock(self.course))
            sql = SqlGradebook.open(self.course, self.assignment)
            if sql is None or not sql.in_sync():
                if sql is not None:
                    sql.close()
                self._sync()                        # course.yml's changes, through nbgrader's API
                sql = SqlGradebook.open(self.course, self.assignment)
                if sql is not None and not sql.in_sync():
                    sql.close()
                    sql = None
            if sql is not None:
                stack.callback(sql.close)
                self._sql = sql
                self.plain_sql = True
            else:                                   # another database, or another schema: nbgrader's API
                self._gb = stack.enter_context(_opened(self.course, self._nbgrader_gradebook()))
            self._stack = stack.pop_all()
        return self

    def _nbgrader_gradebook(self) -> Callable[[str, str], Gradebook]:
        if self._before_nbgrader is not None:
            self._before_nbgrader()
            self._before_nbgrader = None
        from nbgrader.api import Gradebook

        return cast("Callable[[str, str], Gradebook]", Gradebook)

    def _sync(self) -> None:
        """Roster, due date, notebooks and max scores from course.yml, through nbgrader's API."""
        factory = self._nbgrader_gradebook()
        from nbgrader.api import InvalidEntry, MissingEntry

        with _opened(self.course, factory) as gb:
            try:
                self.created = tuple(_commit(gb, lambda: sync_roster(gb, self.course)
                                             + _sync_assignment(gb, self.course, self.assignment)))
            except (InvalidEntry, MissingEntry, ValueError) as exc:
                raise CourseError(f"gradebook {shown_url(self.course.gradebook_url)}: cannot set up assignment "
                                  f"{self.assignment.name!r} ({exc})") from None

    def __exit__(self, *exc: object) -> None:
        self._gb = None
        self._sql = None
        self._stack.close()

    def record(self, result: SubmissionResult, *, review_again: bool = False) -> str | None:
        """Commit one submission's grades; returns None, or why it was rolled back (one line).
        `review_again`: the result is of a resubmission or of new graders, so a TA's scores on it are
        flagged for review again (`needs_manual_grade`); else their flags stay as the TA left them."""
        if self._gb is None and self._sql is None:
            raise RuntimeError("GradebookWriter used outside its with-block")
        self._reviews.pop(result.student, None)
        try:
            if self._sql is not None:
                self._reviews[result.student] = self._sql.record(result, review_again=review_again)
            else:
                assert self._gb is not None
                self._reviews[result.student] = record_submission(self._gb, self.assignment, result,
                                                                  review_again=review_again)
        except Exception as exc:  # noqa: BLE001 - that submission is rolled back and reported; the others land
            return db_error(exc)
        clear_pending(self.course, self.assignment.name, result.student)
        return None

    def review(self, student: str) -> Review | None:
        """The gradebook's overrides and comments for `student` as `record` committed them (None
        when it has none, was not recorded, or is unreadable)."""
        if self._gb is None and self._sql is None:
            raise RuntimeError("GradebookWriter used outside its with-block")
        recorded = self._reviews.pop(student, None)     # as just committed by `record`
        if recorded is not None or self._gb is None:
            return recorded
        try:
            return read_review(self._gb, self.assignment, student)
        except Exception:  # noqa: BLE001 - the page is still written, without the review
            self._gb.db.rollback()
            return None


def record_grades(course: Course, assignment: Assignment, results: Iterable[SubmissionResult], *,
                  review_again: bool = False) -> GradebookReport:
    """Record every result in the course's gradebook; students not on the roster are recorded too.

    A submission that cannot be written is rolled back and listed in the report's `failed`;
    the others still land. Raises CourseError only when the gradebook itself is unusable.
    `review_again`: as `GradebookWriter.record`'s, for every result.
    """
    recorded, failed = [], []
    with GradebookWriter(course, assignment) as writer:
        for result in results:
            why = writer.record(result, review_again=review_again)
            if why is None:
                recorded.append(result.student)
            else:
                failed.append((result.student, why))
    return GradebookReport(recorded=tuple(recorded), failed=tuple(failed), created=writer.created)
