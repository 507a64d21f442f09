"""Grades into nbgrader's gradebook, through nbgrader's own API, so `nbgrader export` and the
formgrader see our scores.

Layout in the gradebook: the assignment (course.yml name) has one notebook per notebook file
(named by its stem, as nbgrader names them) and one grade cell per problem (`Problem.grade_id`,
max_score = the problem's points). `course release` normally creates all of these by running
`nbgrader generate_assignment`; whatever is missing is created here from course.yml, and what
exists is left as it is.

Each submission is written in one transaction: nbgrader's `add_*`/`update_or_create_*` methods
commit after every call, so within a submission only its finders and its model classes are used
and the session is committed once; any failure rolls back that submission alone and is reported.
A grade that a person entered by hand (`manual_score`) is kept and flagged for review, as
`nbgrader autograde` does. A crashed submission's grades get no automatic score and are flagged
for manual grading.
"""
from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder.config import Assignment, Course
from autograder.errors import CourseError
from autograder.grading.results import SubmissionResult
from autograder.toolpath import tools_on_path

if TYPE_CHECKING:
    from nbgrader.api import Gradebook


@dataclass(frozen=True)
class GradebookReport:
    recorded: tuple[str, ...] = ()                 # student ids whose grades landed
    failed: tuple[tuple[str, str], ...] = ()       # (student id, why) for those rolled back
    created: tuple[str, ...] = ()                  # gradebook entries created from course.yml

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def messages(self) -> tuple[str, ...]:
        """One line per failed submission: "<student>: <why>"."""
        return tuple(f"{student}: {why}" for student, why in self.failed)


def notebook_name(notebook_file: str) -> str:
    """nbgrader's name for a notebook: the file name without .ipynb."""
    return Path(notebook_file).stem


@contextlib.contextmanager
def open_gradebook(course: Course) -> Iterator[Gradebook]:
    """nbgrader's Gradebook for the course's database (created if new); closed afterwards."""
    from nbgrader.api import Gradebook

    try:
        with tools_on_path():      # nbgrader runs `alembic` to create a new gradebook
            gb = Gradebook(course.gradebook_url, course.course_id)
    except Exception as exc:  # noqa: BLE001 - nbgrader raises SQLAlchemy and subprocess errors here
        raise CourseError(f"gradebook {course.gradebook_url}: cannot open ({type(exc).__name__}: {exc})") from None
    try:
        yield gb
    finally:
        gb.close()


def ensure_assignment(gb: Gradebook, course: Course, assignment: Assignment) -> tuple[str, ...]:
    """Create the assignment, its notebooks and one grade cell per problem where missing.
    Returns a description of each entry created."""
    from nbgrader.api import MissingEntry

    created = []
    try:
        gb.find_assignment(assignment.name)
    except MissingEntry:
        kwargs: dict[str, Any] = {"course_id": course.course_id}
        if assignment.due is not None:
            kwargs["duedate"] = assignment.due
        gb.add_assignment(assignment.name, **kwargs)
        created.append(f"assignment {assignment.name}")
    stems = dict.fromkeys([notebook_name(n) for n in assignment.notebooks]
                          + [notebook_name(p.notebook) for p in assignment.problems])
    for stem in stems:
        try:
            gb.find_notebook(stem, assignment.name)
        except MissingEntry:
            gb.add_notebook(stem, assignment.name)
            created.append(f"notebook {assignment.name}/{stem}")
    for p in assignment.problems:
        stem = notebook_name(p.notebook)
        try:
            gb.find_grade_cell(p.grade_id, stem, assignment.name)
        except MissingEntry:
            gb.add_grade_cell(p.grade_id, stem, assignment.name, max_score=p.points, cell_type="code")
            created.append(f"grade cell {assignment.name}/{stem}/{p.grade_id}")
    return tuple(created)


def _submission(gb: Gradebook, assignment: str, student_id: str):
    """The student's submission, created (with the student) if missing, holding a notebook,
    grade and comment row for every cell of the assignment. Nothing is committed here."""
    from nbgrader.api import Comment, Grade, MissingEntry, Student, SubmittedAssignment, SubmittedNotebook

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
    return submission


def _problem_score(result: SubmissionResult, problem: str) -> float:
    return result.problem_score(problem)


def record_submission(gb: Gradebook, assignment: Assignment, result: SubmissionResult) -> None:
    """Write one submission's problem scores as the grade cells' auto_score, in one transaction."""
    if result.assignment != assignment.name:
        raise ValueError(f"result is for assignment {result.assignment!r}, not {assignment.name!r}")
    crashed = result.state == "crashed"
    try:
        submission = _submission(gb, assignment.name, result.student)
        if result.submitted_at:
            # nbgrader keeps naive UTC times
            submission.timestamp = (dt.datetime.fromisoformat(result.submitted_at)
                                    .astimezone(dt.UTC).replace(tzinfo=None))
        for i, snb in enumerate(sorted(submission.notebooks, key=lambda n: n.name)):
            snb.late_submission_penalty = (result.late_penalty or None) if i == 0 else None
        for p in assignment.problems:
            grade = gb.find_grade(p.grade_id, notebook_name(p.notebook), assignment.name, result.student)
            grade.auto_score = None if crashed else _problem_score(result, p.name)
            grade.needs_manual_grade = crashed or grade.manual_score is not None
        gb.db.commit()
    except BaseException:
        gb.db.rollback()
        raise


class GradebookWriter:
    """The course's gradebook held open for a batch, so each submission is committed as soon as
    it is graded (a batch stopped half-way keeps every grade written so far):

        with GradebookWriter(course, assignment) as gb:
            for result in ...:
                error = gb.record(result)    # None, or "<why>" (that submission rolled back)

    Opening raises CourseError when the gradebook itself is unusable."""

    def __init__(self, course: Course, assignment: Assignment):
        self.course = course
        self.assignment = assignment
        self.created: tuple[str, ...] = ()
        self._stack = contextlib.ExitStack()
        self._gb: Gradebook | None = None

    def __enter__(self) -> GradebookWriter:
        from nbgrader.api import InvalidEntry, MissingEntry

        with contextlib.ExitStack() as stack:
            gb = stack.enter_context(open_gradebook(self.course))
            try:
                self.created = ensure_assignment(gb, self.course, self.assignment)
            except (InvalidEntry, MissingEntry) as exc:
                raise CourseError(f"gradebook {self.course.gradebook_url}: cannot set up assignment "
                                  f"{self.assignment.name!r} ({exc})") from None
            self._stack = stack.pop_all()
        self._gb = gb
        return self

    def __exit__(self, *exc: object) -> None:
        self._gb = None
        self._stack.close()

    def record(self, result: SubmissionResult) -> str | None:
        """Commit one submission's grades; returns None, or why it was rolled back (one line)."""
        if self._gb is None:
            raise RuntimeError("GradebookWriter used outside its with-block")
        try:
            record_submission(self._gb, self.assignment, result)
        except Exception as exc:  # noqa: BLE001 - that submission is rolled back and reported; the others land
            return f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        return None


def record_grades(course: Course, assignment: Assignment, results: Iterable[SubmissionResult]) -> GradebookReport:
    """Record every result in the course's gradebook; students not on the roster are recorded too.

    A submission that cannot be written is rolled back and listed in the report's `failed`;
    the others still land. Raises CourseError only when the gradebook itself is unusable.
    """
    recorded, failed = [], []
    with GradebookWriter(course, assignment) as writer:
        for result in results:
            why = writer.record(result)
            if why is None:
                recorded.append(result.student)
            else:
                failed.append((result.student, why))
    return GradebookReport(recorded=tuple(recorded), failed=tuple(failed), created=writer.created)
