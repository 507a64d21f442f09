"""A batch's grades into nbgrader's SQLite gradebook through plain SQL, without nbgrader or SQLAlchemy.

nbgrader's ORM costs the batch's writer process about half a second of imports and several
milliseconds per submission; writing the same rows with `sqlite3` costs well under one. The rows are
the ones `reporting.gradebook.record_submission` writes through nbgrader's models (same tables,
columns, defaults and value formats, ids from uuid4 as nbgrader's `new_uuid`), so nbgrader's API,
`nbgrader export` and the formgrader read them as their own.

It is used only when it is sure to fit (`SqlGradebook.open` returns None otherwise, and
reporting.gradebook falls back to nbgrader's API):
- the gradebook is an SQLite file that exists, with the course's row;
- every table it writes has exactly the columns written here (a future nbgrader schema does not fit);
- and, checked by `in_sync`, course.yml needs no change in it (roster, due date, notebooks, grade
  cells, max scores, every submission complete): otherwise nbgrader's API makes those changes first.

Each submission is one transaction (`BEGIN IMMEDIATE` ... `COMMIT`): it lands whole or not at all, and
once `record` returns it is on disk. While the batch writes, the connection keeps SQLite's rollback
journal file between transactions (`journal_mode=PERSIST`, set only where the gradebook is in
nbgrader's default DELETE mode, and set back on closing, which removes the file): the same
guarantees (each commit is synced; a transaction cut short is rolled back by the next connection,
nbgrader's included), without creating, syncing and deleting the journal for every submission
(about half of a submission's SQL time). Other connections keep their own mode.

The ids the batch needs (assignment, notebooks, cells) are read once when opening: the writer holds
the course's gradebook lock for the whole batch. A submission the gradebook did not have is inserted
with its values, without reading rows that cannot be there yet (`_first_grades`).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import os
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.config import SYNCED_COLUMNS, Assignment, Course
from autograder.grading.results import SubmissionResult

from .gradebook import comment_problem, naive_utc, needs_manual_grade, submission_timestamp
from .review import ProblemReview, Review

# The columns of the tables written here, as nbgrader 0.9's schema has them (alembic head e43177bfe90b).
COLUMNS = {
    "student": ("id", "first_name", "last_name", "email", "lms_user_id"),
    "course": ("id",),
    "assignment": ("id", "name", "duedate", "course_id"),
    "notebook": ("id", "name", "assignment_id", "kernelspec"),
    "base_cell": ("id", "name", "notebook_id", "type"),
    "grade_cells": ("id", "max_score", "cell_type"),
    "source_cell": ("id", "name", "cell_type", "locked", "source", "checksum", "notebook_id"),
    "submitted_assignment": ("id", "assignment_id", "student_id", "timestamp", "extension"),
    "submitted_notebook": ("id", "assignment_id", "notebook_id", "flagged", "late_submission_penalty"),
    "grade": ("id", "notebook_id", "cell_id", "auto_score", "manual_score", "extra_credit", "needs_manual_grade"),
    "comment": ("id", "notebook_id", "cell_id", "auto_comment", "manual_comment"),
}
GRADED_TYPES = ("GradeCell", "TaskCell")      # cells a submitted notebook has a grade row for
COMMENTED_TYPES = ("SolutionCell", "TaskCell")  # ... and a comment row for
EPOCH = dt.datetime(1970, 1, 1)               # SQLAlchemy keeps an Interval as a DATETIME from the epoch
BUSY_MS = 30_000


def _new_id() -> str:
    return uuid.uuid4().hex


def sql_datetime(when: dt.datetime) -> str:
    """A naive datetime as SQLAlchemy's SQLite DateTime stores it (a four-digit year, which strftime's
    %Y does not give before the year 1000 and SQLAlchemy needs to read it back)."""
    return when.isoformat(" ", "microseconds")


def sql_interval(delta: dt.timedelta) -> str:
    """A timedelta as SQLAlchemy's Interval stores it in SQLite."""
    return sql_datetime(EPOCH + delta)


def sqlite_path(url: str) -> Path | None:
    """The file of a `sqlite:///<path>` URL (None for any other database, or in memory)."""
    if not url.startswith("sqlite:///") or "?" in url:
        return None
    path = url[len("sqlite:///"):]
    return Path(path) if path and path != ":memory:" else None


@dataclass(frozen=True)
class _Cells:
    """The assignment's rows this batch needs, read once."""
    assignment_id: str
    notebooks: tuple[tuple[str, str], ...]               # (name, id), by name
    graded: dict[str, tuple[str, ...]]                   # notebook id -> cells with a grade row per submission
    commented: dict[str, tuple[str, ...]]                # notebook id -> cells with a comment row
    problem_cells: tuple[tuple[str, str], ...]           # per problem, in order: (notebook id, grade cell id)


def _rows(db: sqlite3.Connection, query: str, ids: list[str], *before: str,
          cell_ids: list[str] | None = None) -> list[tuple[Any, ...]]:
    """The rows of `query` (ending with the column `ids` are of) whose column is one of `ids` and, with
    `cell_ids`, whose cell_id is one of them; `before` are the values of the query's own parameters."""
    if not ids or cell_ids == []:
        return []
    text = f"{query} IN ({', '.join('?' * len(ids))})"
    values = [*before, *ids]
    if cell_ids is not None:
        text += f" AND cell_id IN ({', '.join('?' * len(cell_ids))})"
        values += cell_ids
    return db.execute(text, values).fetchall()


class SqlGradebook:
    """An open SQLite gradebook for one assignment (see the module's docstring)."""

    def __init__(self, conn: sqlite3.Connection, course: Course, assignment: Assignment):
        self.conn = conn
        self.course = course
        self.assignment = assignment
        self._cells: _Cells | None = None
        self._persisted = False             # journal_mode PERSIST set here, for the batch (see open)

    @classmethod
    def open(cls, course: Course, assignment: Assignment) -> SqlGradebook | None:
        """The gradebook, when plain SQL fits it (see the module's docstring); else None."""
        path = sqlite_path(course.gradebook_url)
        if path is None or not path.is_file():
            return None
        try:
            conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_MS / 1000)
        except sqlite3.Error:
            return None
        try:
            for table, columns in COLUMNS.items():
                have = tuple(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
                if sorted(have) != sorted(columns):
                    conn.close()
                    return None
            if conn.execute("SELECT 1 FROM course WHERE id = ?", (course.course_id,)).fetchone() is None:
                conn.close()
                return None
            persist = conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
            if persist:
                conn.execute("PRAGMA journal_mode=PERSIST")
        except sqlite3.Error:
            conn.close()
            return None
        gradebook = cls(conn, course, assignment)
        gradebook._persisted = persist
        return gradebook

    def close(self) -> None:
        if self._persisted:                 # back to nbgrader's mode: SQLite removes the journal file
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("PRAGMA journal_mode=DELETE")
        self.conn.close()

    # ---- course.yml against the gradebook

    def in_sync(self) -> bool:
        """Whether course.yml needs no change in the gradebook: what `reporting.gradebook.sync_roster`
        and `_sync_assignment` would change is all there already. Reads the batch's ids when it is."""
        db = self.conn
        a = self.assignment
        known = {row[0]: row[1:] for row in
                 db.execute(f"SELECT id, {', '.join(SYNCED_COLUMNS)} FROM student")}  # our own column names
        columns, students = self.course.roster_columns()
        for s in students:
            row = known.get(s.id)
            if row is None:
                return False
            if any(key in columns and (have or None) != (getattr(s, key) or None)
                   for key, have in zip(SYNCED_COLUMNS, row)):
                return False
        found = db.execute("SELECT id, duedate FROM assignment WHERE name = ?", (a.name,)).fetchone()
        if found is None:
            return False
        assignment_id, duedate = found
        if a.due is not None:
            try:
                if duedate is None or dt.datetime.fromisoformat(duedate) != naive_utc(a.due):
                    return False
            except ValueError:
                return False
        notebooks = dict(db.execute("SELECT name, id FROM notebook WHERE assignment_id = ?", (assignment_id,)))
        cells: dict[str, dict[str, list[tuple[str, str]]]] = {nid: {} for nid in notebooks.values()}
        grade_cells: dict[tuple[str, str], tuple[str, float]] = {}
        for cid, name, nid, kind, max_score in db.execute(
                "SELECT c.id, c.name, c.notebook_id, c.type, g.max_score FROM base_cell c "
                "JOIN notebook n ON n.id = c.notebook_id LEFT JOIN grade_cells g ON g.id = c.id "
                "WHERE n.assignment_id = ? ORDER BY c.rowid", (assignment_id,)):
            cells[nid].setdefault(kind, []).append((cid, name))
            if kind == "GradeCell":
                grade_cells[(nid, name)] = (cid, max_score)
        problem_cells = []
        for p in a.problems:
            nid = notebooks.get(Path(p.notebook).stem)
            if nid is None:
                return False
            cell = grade_cells.get((nid, p.grade_id))
            if cell is None or cell[1] != p.points:
                return False
            problem_cells.append((nid, cell[0]))
        stems = {Path(n).stem for n in a.notebooks}
        if any(stem not in notebooks for stem in stems):
            return False
        if self._incomplete(assignment_id):
            return False

        def ids(nid: str, kinds: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(cid for kind in kinds for cid, _ in cells[nid].get(kind, ()))

        self._cells = _Cells(assignment_id, tuple(sorted(notebooks.items())),
                             {nid: ids(nid, GRADED_TYPES) for nid in notebooks.values()},
                             {nid: ids(nid, COMMENTED_TYPES) for nid in notebooks.values()},
                             tuple(problem_cells))
        return True

    def _incomplete(self, assignment_id: str) -> bool:
        """Does a submission of the assignment lack a notebook, grade or comment row for one of its cells?"""
        db = self.conn
        if db.execute("SELECT 1 FROM submitted_assignment s JOIN notebook n ON n.assignment_id = s.assignment_id "
                      "LEFT JOIN submitted_notebook sn ON sn.assignment_id = s.id AND sn.notebook_id = n.id "
                      "WHERE s.assignment_id = ? AND sn.id IS NULL LIMIT 1", (assignment_id,)).fetchone():
            return True
        for table, kinds in (("grade", GRADED_TYPES), ("comment", COMMENTED_TYPES)):
            if db.execute(f"SELECT 1 FROM submitted_assignment s "
                          f"JOIN submitted_notebook sn ON sn.assignment_id = s.id "
                          f"JOIN base_cell c ON c.notebook_id = sn.notebook_id AND c.type IN (?, ?) "
                          f"LEFT JOIN {table} r ON r.notebook_id = sn.id AND r.cell_id = c.id "
                          f"WHERE s.assignment_id = ? AND r.id IS NULL LIMIT 1", (*kinds, assignment_id)).fetchone():
                return True
        return False

    # ---- submissions

    def record(self, result: SubmissionResult, *, review_again: bool = False) -> Review:
        """Write one submission's problem scores as its grade cells' auto_score, in one transaction, as
        `reporting.gradebook.record_submission` does (`review_again` as there); returns the gradebook's
        review of it as committed."""
        cells = self._cells
        if cells is None:
            raise RuntimeError("SqlGradebook.record before in_sync()")
        a = self.assignment
        if result.assignment != a.name:
            raise ValueError(f"result is for assignment {result.assignment!r}, not {a.name!r}")
        db = self.conn
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("INSERT OR IGNORE INTO student (id) VALUES (?)", (result.student,))
            found = db.execute("SELECT id FROM submitted_assignment WHERE assignment_id = ? AND student_id = ?",
                               (cells.assignment_id, result.student)).fetchone()
            extension = a.extensions.get(result.student)
            delta = sql_interval(extension.delta) if extension is not None and extension.delta else None
            stamp = submission_timestamp(result)
            when = sql_datetime(stamp) if stamp is not None else None
            if found is None:
                sub = _new_id()
                db.execute("INSERT INTO submitted_assignment (id, assignment_id, student_id, timestamp, extension) "
                           "VALUES (?, ?, ?, ?, ?)", (sub, cells.assignment_id, result.student, when, delta))
                review = self._first_grades(cells, sub, result)
            else:
                sub = found[0]
                db.execute("UPDATE submitted_assignment SET extension = ?, timestamp = ? WHERE id = ?",
                           (delta, when, sub))
                review = self._grades_again(cells, sub, result, review_again=review_again)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return review

    def _first_grades(self, cells: _Cells, sub: str, result: SubmissionResult) -> Review:
        """The rows of a submission the gradebook did not have (`sub` just inserted): what
        `_grades_again` writes for it, without reading what cannot be there yet, each row inserted
        with its values."""
        db, a = self.conn, self.assignment
        crashed = result.state == "crashed"
        snbs = [(nid, _new_id()) for _, nid in cells.notebooks]
        penalty = result.late_penalty or None
        db.executemany("INSERT INTO submitted_notebook (id, assignment_id, notebook_id, flagged, "
                       "late_submission_penalty) VALUES (?, ?, ?, 0, ?)",
                       [(snb, sub, nid, penalty if i == 0 else None) for i, (nid, snb) in enumerate(snbs)])
        scores: dict[tuple[str, str], float | None] = {}
        flagged: set[tuple[str, str]] = set()       # problem cells to grade by hand: their notebook was not read
        problems = []
        for p, cell in zip(a.problems, cells.problem_cells, strict=True):
            scores[cell] = None if crashed else result.problem_score(p.name)
            if crashed or p.notebook in result.unreadable_notebooks:
                flagged.add(cell)
            problems.append(ProblemReview(p.name, p.points, scores[cell], None, 0.0))
        db.executemany("INSERT INTO grade (id, notebook_id, cell_id, auto_score, needs_manual_grade) "
                       "VALUES (?, ?, ?, ?, ?)",
                       [(_new_id(), snb, cid, scores[(nid, cid)], int((nid, cid) in flagged)) if (nid, cid) in scores
                        else (_new_id(), snb, cid, None, 1)
                        for nid, snb in snbs for cid in cells.graded.get(nid, ())])
        db.executemany("INSERT INTO comment (id, notebook_id, cell_id) VALUES (?, ?, ?)",
                       [(_new_id(), snb, cid) for nid, snb in snbs for cid in cells.commented.get(nid, ())])
        return Review(result.student, a.name, tuple(problems), (), late_penalty=result.late_penalty)

    def _grades_again(self, cells: _Cells, sub: str, result: SubmissionResult, *, review_again: bool) -> Review:
        """A submission's rows when the gradebook has it already: missing notebook, grade and comment
        rows added, the scores set, a person's grades and comments kept (and returned in the review),
        and the flags `needs_manual_grade` sets (a TA's left as they are unless `review_again`)."""
        db, a = self.conn, self.assignment
        crashed = result.state == "crashed"
        # Each row is looked up through the tables' unique indexes, by the ids of the assignment's
        # notebooks and cells (what the rows read here are used for): looked up by the submission
        # alone, SQLite reads every submission's rows (no index starts with those columns), for
        # each submission of a batch.
        nids = [nid for _, nid in cells.notebooks]
        snbs = dict(_rows(db, "SELECT notebook_id, id FROM submitted_notebook WHERE assignment_id = ? AND notebook_id",
                          nids, sub))
        new_snbs = [(nid, _new_id()) for nid in nids if nid not in snbs]
        db.executemany("INSERT INTO submitted_notebook (id, assignment_id, notebook_id, flagged) "
                       "VALUES (?, ?, ?, 0)", [(snb, sub, nid) for nid, snb in new_snbs])
        snbs.update(new_snbs)
        mine = list(snbs.values())
        graded = sorted({cid for nid in snbs for cid in cells.graded.get(nid, ())})
        grades = {(nb, cell): (gid, manual, extra, auto, flag) for gid, nb, cell, manual, extra, auto, flag in _rows(
            db, "SELECT id, notebook_id, cell_id, manual_score, extra_credit, auto_score, needs_manual_grade "
            "FROM grade WHERE notebook_id", mine, cell_ids=graded)}
        commented = set(_rows(db, "SELECT notebook_id, cell_id FROM comment WHERE notebook_id", mine,
                              cell_ids=sorted({cid for nid in snbs for cid in cells.commented.get(nid, ())})))
        new_grades = []
        for nid, snb in snbs.items():
            for cid in cells.graded.get(nid, ()):
                if (snb, cid) not in grades:
                    grades[(snb, cid)] = (_new_id(), None, None, None, None)
                    new_grades.append((grades[(snb, cid)][0], snb, cid))
        db.executemany("INSERT INTO grade (id, notebook_id, cell_id, needs_manual_grade) VALUES (?, ?, ?, 1)",
                       new_grades)
        db.executemany("INSERT INTO comment (id, notebook_id, cell_id) VALUES (?, ?, ?)",
                       [(_new_id(), snb, cid) for nid, snb in snbs.items()
                        for cid in cells.commented.get(nid, ()) if (snb, cid) not in commented])
        penalty = result.late_penalty or None
        db.executemany("UPDATE submitted_notebook SET late_submission_penalty = ? WHERE id = ?",
                       [(penalty if i == 0 else None, snbs[nid]) for i, (_, nid) in enumerate(cells.notebooks)
                        if nid in snbs])
        updates, problems = [], []
        for p, (nid, cid) in zip(a.problems, cells.problem_cells, strict=True):
            gid, manual, extra, auto_before, flag_before = grades[(snbs[nid], cid)]
            auto = None if crashed else result.problem_score(p.name)
            flag = needs_manual_grade(crashed=crashed, auto_score=auto, manual_score=manual, auto_before=auto_before,
                                      flag_before=None if flag_before is None else bool(flag_before),
                                      review_again=review_again, unreadable=p.notebook in result.unreadable_notebooks,
                                      extra_credit=extra)
            updates.append((auto, int(flag), gid))
            problems.append(ProblemReview(p.name, p.points, auto, manual, float(extra or 0.0)))
        db.executemany("UPDATE grade SET auto_score = ?, needs_manual_grade = ? WHERE id = ?", updates)
        comments = self._comments(cells, snbs)
        return Review(result.student, a.name, tuple(problems), comments, late_penalty=result.late_penalty)

    def _comments(self, cells: _Cells, snbs: dict[str, str]) -> tuple[tuple[str, str], ...]:
        """(problem, text) for every comment a person wrote on the submission (its notebooks' rows
        `snbs`: notebook id -> submitted notebook id), by notebook (as `reporting.gradebook._comments`).
        Read through the comment table's unique index (cell, notebook), like the grades: by the
        submitted notebooks alone, SQLite would read every submission's comments."""
        names = {nid: name for name, nid in cells.notebooks}
        of_snb = {snb: nid for nid, snb in snbs.items()}
        rows = _rows(self.conn, "SELECT r.notebook_id, c.name, r.manual_comment, r.rowid FROM comment r "
                     "JOIN base_cell c ON c.id = r.cell_id WHERE r.manual_comment != '' AND r.notebook_id",
                     list(snbs.values()),
                     cell_ids=sorted({cid for nid in snbs for cid in cells.commented.get(nid, ())}))
        rows.sort(key=lambda row: (names[of_snb[row[0]]], row[3]))
        out = []
        for snb, name, text, _ in rows:
            if not text.strip():
                continue
            source = self.conn.execute("SELECT source FROM source_cell WHERE name = ? AND notebook_id = ?",
                                       (name, of_snb[snb])).fetchone()
            out.append((comment_problem(self.assignment, name, (source and source[0]) or ""), text.strip()))
        return tuple(out)


# The rows of one student's submission of one assignment (`{0}`: the table whose notebook_id is the
# submitted notebook's), for the plain reads below; parameters: assignment name, course id, student.
_OF_ASSIGNMENT = ("JOIN submitted_assignment sa ON sa.id = sn.assignment_id JOIN assignment a ON a.id = "
                  "sa.assignment_id WHERE a.name = ? AND a.course_id = ?")      # of submitted notebooks `sn`
_OF_STUDENT = _OF_ASSIGNMENT + " AND sa.student_id = ?"
_SUBMITTED = "JOIN submitted_notebook sn ON sn.id = {0}.notebook_id " + _OF_STUDENT
# the students (of `{0}`: _OF_ASSIGNMENT or _OF_STUDENT) with anything a person set: a manual score, extra
# credit, a comment
_REVIEWED = ("SELECT sa.student_id FROM grade g JOIN submitted_notebook sn ON sn.id = g.notebook_id {0} AND "
             "(g.manual_score IS NOT NULL OR COALESCE(g.extra_credit, 0) != 0) UNION ALL SELECT sa.student_id "
             "FROM comment c JOIN submitted_notebook sn ON sn.id = c.notebook_id {0} AND "
             "TRIM(COALESCE(c.manual_comment, '')) != ''")


def _read_only(course: Course) -> sqlite3.Connection | None:
    """The course's SQLite gradebook opened for reading, without the course's lock; None when it is not
    an SQLite file or cannot be opened."""
    path = sqlite_path(course.gradebook_url)
    if path is None or not path.is_file():
        return None
    try:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return None


def unreadable_file(course: Course) -> sqlite3.Error | None:
    """The error SQLite gives on the course's SQLite gradebook when the file is no database or a damaged
    one (its header and schema read, as every statement does first), so that a
    batch can refuse before grading rather than each student's commit failing after; None when it reads,
    when it does not exist yet, is not SQLite, or cannot tell (busy, locked)."""
    conn = _read_only(course)
    if conn is None:
        return None
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        damaged = getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT)
        return exc if damaged else None
    finally:
        conn.close()
    return None


def has_person_review(course: Course, assignment: str, student: str) -> bool | None:
    """Whether the gradebook holds, for `student`'s submission of `assignment`, anything a person set
    (a manual score, extra credit, a comment), read with plain SQL without taking the course's lock;
    None when it cannot tell (not an SQLite gradebook of nbgrader's schema, or busy). False when the
    SQLite gradebook does not exist yet (a course's first grading): no one can have changed anything."""
    found = _reviewed(course, (assignment, course.course_id, student), _OF_STUDENT, " LIMIT 1")
    return None if found is None else bool(found)


def person_reviewed(course: Course, assignment: str) -> frozenset[str] | None:
    """The students whose submission of `assignment` holds anything a person set in the gradebook, in one
    read for a whole batch (as `has_person_review` tells of one student); empty when the SQLite gradebook
    does not exist yet, None when it cannot tell."""
    found = _reviewed(course, (assignment, course.course_id), _OF_ASSIGNMENT)
    return None if found is None else frozenset(found)


def _reviewed(course: Course, ids: tuple[str, ...], of: str, limit: str = "") -> set[str] | None:
    """The students `_REVIEWED` finds among the submissions `of` picks (`ids` its parameters), read with plain
    SQL without taking the course's lock; empty without a gradebook file, None when it cannot tell."""
    path = sqlite_path(course.gradebook_url)
    if path is not None and not os.path.lexists(path):
        return set()
    conn = _read_only(course)
    if conn is None:
        return None
    try:
        return {str(row[0]) for row in conn.execute(_REVIEWED.format(of) + limit, ids + ids)}
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def holds_grades(course: Course, assignment: Assignment, result: SubmissionResult, *, stamped: bool = False) -> bool:
    """Whether the gradebook already holds `result`'s grades as `SqlGradebook.record` writes them (each
    problem's auto score and the late penalty; with `stamped`, the submission's time too, which tells
    a resubmission's commit from its earlier one's when their scores are the same), read with plain SQL
    without taking the course's lock; False when it does not or cannot tell."""
    conn = _read_only(course)
    if conn is None:
        return False
    ids = (assignment.name, course.course_id, result.student)
    try:
        scores = {(notebook, cell): auto for notebook, cell, auto in conn.execute(
            f"SELECT n.name, c.name, g.auto_score FROM grade g JOIN base_cell c ON c.id = g.cell_id "
            f"JOIN notebook n ON n.id = c.notebook_id {_SUBMITTED.format('g')}", ids)}
        penalty = conn.execute(f"SELECT SUM(COALESCE(sn.late_submission_penalty, 0)) FROM submitted_notebook sn "
                               f"{_OF_STUDENT}", ids).fetchone()[0]
        when = conn.execute("SELECT sa.timestamp FROM submitted_assignment sa JOIN assignment a ON a.id = "
                            "sa.assignment_id WHERE a.name = ? AND a.course_id = ? AND sa.student_id = ?",
                            ids).fetchone() if stamped else None
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    crashed = result.state == "crashed"
    for p in assignment.problems:
        key = (Path(p.notebook).stem, p.grade_id)
        if key not in scores or scores[key] != (None if crashed else result.problem_score(p.name)):
            return False
    if stamped:
        stamp = submission_timestamp(result)
        if when is None or when[0] != (sql_datetime(stamp) if stamp is not None else None):
            return False
    return bool(penalty is not None and abs(penalty - (result.late_penalty or 0.0)) < 1e-9)


def gradebook_students(course: Course, assignment: str) -> frozenset[str] | None:
    """The ids of every student the gradebook holds, read with plain SQL without taking the course's
    lock; None when it cannot tell (not an SQLite gradebook of nbgrader's schema, or busy), and when it
    holds no submission of `assignment` at all (a gradebook started afresh, which nobody was taken
    out of)."""
    conn = _read_only(course)
    if conn is None:
        return None
    try:
        any_submission = conn.execute("SELECT 1 FROM submitted_assignment sa JOIN assignment a ON a.id = "
                                      "sa.assignment_id WHERE a.name = ? AND a.course_id = ? LIMIT 1",
                                      (assignment, course.course_id)).fetchone()
        if any_submission is None:
            return None
        return frozenset(str(row[0]) for row in conn.execute("SELECT id FROM student"))
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def graded_cells(course: Course, assignment: str) -> dict[str, dict[str, bool]] | None:
    """The grade cells the gradebook holds for `assignment`, notebook name -> cell name -> whether some
    submission has a score for it (automatic or a person's, or extra credit), read with plain SQL without
    taking the course's lock; None when it cannot tell (not an SQLite gradebook of nbgrader's schema, or
    busy) and empty when the gradebook or the assignment is not there yet."""
    conn = _read_only(course)
    if conn is None:
        return None
    try:
        rows = conn.execute(
            "SELECT n.name, c.name, EXISTS (SELECT 1 FROM grade g WHERE g.cell_id = c.id AND (g.auto_score IS NOT "
            "NULL OR g.manual_score IS NOT NULL OR COALESCE(g.extra_credit, 0) != 0)) FROM base_cell c JOIN "
            "notebook n ON n.id = c.notebook_id JOIN assignment a ON a.id = n.assignment_id WHERE a.name = ? AND "
            "a.course_id = ? AND c.type = 'GradeCell'", (assignment, course.course_id)).fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    cells: dict[str, dict[str, bool]] = {}
    for notebook, cell, graded in rows:
        cells.setdefault(str(notebook), {})[str(cell)] = bool(graded)
    return cells
