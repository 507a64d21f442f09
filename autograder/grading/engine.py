"""Grading one submission, as a pipeline of named steps with a typed value between each two:

    load -> run notebooks -> run graders -> score -> apply late policy -> result
    Submission  Execution     GraderRun      Scored    LatePenalty       SubmissionResult

- `load` reads submitted/<student>/<assignment>/ (only read, never modified): the notebooks, the
  notes about what could not be used, the submission time.
- `run_notebooks` runs each notebook in the sandbox (a SubmissionRun of the warm host) and hands
  out proxies to its functions; the notebook's own autograder-test cells are not run when the
  hidden graders replace them, nor unchanged released cells that nothing graded can depend on
  (see docs/grading.md).
- `run_graders` runs the assignment's graders (a GraderSession: pytest, collected once, in this
  trusted process) against those proxies.
- `score` shares each problem's points out among its checks and settles diagnoses.
- `apply_late_policy` computes the penalty from course.yml's late policy.
- `build_result` puts the SubmissionResult together.

`grade_submission` chains them. Nothing here imports or evaluates student code; the graders only
see proxies. Nothing here takes the child's word for anything either: the only data from the child
used in a verdict are the values its functions return (the child's own reports on argument
mutation and warnings are shown as advice, worth no points; cell outcomes and crash reasons only
shape the notes).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import cellplan
from ..config import Assignment, Course, Limits
from ..layout import CourseLayout
from ..notebooks import CodeCell, LoadedNotebook, find_submission_notebooks, load_notebook
from ..sandbox.host import MAX_FAILURES_PER_FUNCTION, SandboxHost
from ..sandbox.outcomes import NotebookFailed
from ..text import plural, times
from .diagnosis import prune_subsumed
from .lateness import lateness, submission_time
from .plugin import total_weight_problem, weight_problem
from .proxy import StudentProxy
from .results import CheckOutcome, SubmissionResult, TestResult, graded_now
from .session import GraderRun, GraderSession, InstructorCode, load_instructor_code

__all__ = ["Submission", "Execution", "Scored", "LatePenalty", "NoNotebook", "InstructorCode",
           "load", "run_notebooks", "run_graders", "score", "apply_late_policy", "build_result",
           "crashed_result", "grade_submission", "load_instructor_code"]


# --------------------------------------------------------------------------- load

@dataclass(frozen=True)
class Submission:
    """What was read from one submission folder."""
    student: str
    folder: Path
    notebooks: tuple[tuple[str, LoadedNotebook], ...]   # (the assignment's notebook name, what was read)
    files: tuple[str, ...]                              # the notebooks graded, relative to the course folder
    notes: tuple[str, ...]                              # what could not be used, for the student
    submitted_at: dt.datetime | None
    time_note: str = ""                                 # why the timestamp could not be used, if so
    # the assignment's notebooks whose file was there but could not be read as a notebook: refused (a
    # folder or link in its place), empty, not JSON, too big... (not one that is missing, nor a valid
    # notebook without code cells)
    unread: tuple[str, ...] = ()


def load(course: Course, assignment: Assignment, student: str, folder: Path) -> Submission:
    """Read the submission's notebooks and timestamp (never modifying anything)."""
    matched, found_notes = find_submission_notebooks(folder, assignment.notebooks)
    notes = list(found_notes)
    notebooks = []
    release = course.layout.release(assignment.name)
    for name, path in matched.items():
        graded = tuple(p.name for p in assignment.problems if p.notebook == name)
        nb = (load_notebook(path, max_mb=assignment.limits.notebook_mb, release=release / name, functions=graded,
                            replaced=replaced_test_cells(assignment))
              if path else LoadedNotebook(None, (), (), False))
        notebooks.append((name, nb))
        notes.extend(nb.notes)
    submitted_at, stamp_note = submission_time(folder, course.root)
    unread = tuple(name for name, nb in notebooks
                   if nb.unread or (matched[name] is None and os.path.lexists(folder / name)))
    files = tuple(str(p.relative_to(course.root)) if p.is_relative_to(course.root) else str(p)
                  for p in matched.values() if p is not None)
    return Submission(student=student, folder=folder, notebooks=tuple(notebooks), files=files,
                      notes=tuple(notes), submitted_at=submitted_at, time_note=stamp_note, unread=unread)


# --------------------------------------------------------------------------- run notebooks

class NoNotebook:
    """Stands in for a notebook that could not be read: every call fails with the reason,
    without starting a process."""

    last_call = None
    restarts = 0
    isolation: tuple[str, ...] = ()

    def __init__(self, reason: str):
        self.reason = reason

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise NotebookFailed(self.reason)
        unavailable.__name__ = name
        return unavailable

    def for_problem(self, problem: str) -> NoNotebook:
        return self

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class Execution:
    """The submission's notebooks, run: a proxy (or a stand-in) per notebook, and the notes about
    their cells. Holds the sandbox processes until `run_notebooks`' block ends."""
    proxies: tuple[tuple[str, StudentProxy | NoNotebook], ...]
    notes: tuple[str, ...]
    skipped_cells: int = 0       # autograder-test cells not run (the hidden graders replace them)

    @property
    def by_notebook(self) -> Mapping[str, StudentProxy | NoNotebook]:
        return dict(self.proxies)

    def restarts(self) -> int:
        """Fresh problem processes started so far after a call hung or crashed."""
        return sum(p.restarts for _, p in self.proxies)

    def isolation(self) -> tuple[str, ...]:
        return tuple(sorted({layer for _, p in self.proxies for layer in p.isolation}))


def cells_to_run(nb: LoadedNotebook, replaced: frozenset[str],
                 released: cellplan.Released | None = None) -> tuple[CodeCell, ...]:
    """The notebook's code cells less its autograder-test cells whose grade_id a hidden grader
    replaces and, given what was released, less the unchanged released cells nothing graded can
    depend on (see `autograder.cellplan`)."""
    cells = tuple(c for c in nb.cells if not (c.test_of and c.test_of in replaced))
    if released is None:
        return cells
    skip = cellplan.cells_to_skip([c.source for c in cells], released)
    return tuple(c for i, c in enumerate(cells) if i not in skip)


@contextlib.contextmanager
def run_notebooks(submission: Submission, host: SandboxHost, limits: Limits, *, deadline: float,
                  replaced: frozenset[str] = frozenset(),
                  released: Mapping[str, cellplan.Released] | None = None) -> Iterator[Execution]:
    """Run each readable notebook in its own sandboxed submission run (until `deadline`, a
    time.monotonic()); the processes end when the block does. `replaced`: grade ids of the
    autograder-test cells that are not run; `released`: per notebook name, what its release
    holds (its unchanged cells that nothing graded reads are not run)."""
    proxies: list[tuple[str, StudentProxy | NoNotebook]] = []
    notes: list[str] = []
    skipped = 0
    try:
        for name, nb in submission.notebooks:
            if not nb.readable:
                reason = nb.notes[0] if nb.notes else f"{name} was not submitted"
                proxies.append((name, NoNotebook(reason.rstrip("."))))
                continue
            cells = cells_to_run(nb, replaced, (released or {}).get(name))
            skipped += len(nb.cells) - len(cells)
            proxy = StudentProxy(host.submission(cells, limits, deadline=deadline))
            proxies.append((name, proxy))
            notes.extend(f"{name}: {n}" for n in proxy.execution.notes)
        yield Execution(proxies=tuple(proxies), notes=tuple(notes), skipped_cells=skipped)
    finally:
        for _, p in proxies:
            p.close()


# --------------------------------------------------------------------------- run graders

def run_graders(execution: Execution, session: GraderSession, seed: int) -> GraderRun:
    """Every collected grader check against the submission's proxies."""
    return session.run(execution.by_notebook, seed)


# --------------------------------------------------------------------------- score

@dataclass(frozen=True)
class Scored:
    """The checks with their points; why grading broke, if it did."""
    tests: tuple[TestResult, ...]
    grader_errors: tuple[str, ...] = ()    # checks whose grader code failed (the student is not blamed)
    broken: tuple[str, ...] = ()           # the graders could not run: the submission is crashed

    @property
    def raw_score(self) -> float:
        return round(sum(t.score for t in self.tests), 6)


def score(run: GraderRun, assignment: Assignment) -> Scored:
    """Each problem's points shared out among its checks in proportion to their weights (all or
    nothing per check); diagnoses that another explains better are dropped; a check not graded
    for a building block that itself waits for a failing one names that one (`root_cause_note`)."""
    totals: dict[str, float] = {}
    for c in run.checks:
        totals[c.problem] = totals.get(c.problem, 0.0) + c.weight
    points = {p.name: p.points for p in assignment.problems}
    # the session refuses such weights when it collects the graders; checks weighed otherwise are
    # refused here alike, rather than scored past (or below) their problem's points
    refused = [f"{c.name}: weight {c.weight!r}: {why}" for c in run.checks if (why := weight_problem(c.weight))] \
        or [why for p, total in totals.items() if (why := total_weight_problem(p, points.get(p, 0.0), total))]
    if refused:
        return Scored(tests=(), broken=(*run.broken, "the checks' weights cannot share out the points: "
                                        + "; ".join(refused)))
    tests = []
    for c in run.checks:
        max_score = points.get(c.problem, 0.0) * c.weight / totals[c.problem]
        note = root_cause_note(c, run.checks, assignment) if c.needs and c.status == "not_graded" else ""
        tests.append(TestResult(
            name=c.name, problem=c.problem, score=max_score if c.status == "passed" else 0.0,
            max_score=max_score, status=c.status, output=f"{c.output} {note}" if note else c.output,
            description=c.description, diagnoses=c.diagnoses, hints=c.hints, detail=c.detail,
            duration=c.duration, stages=c.stages))
    order = {p.name: i for i, p in enumerate(assignment.problems)}
    tests.sort(key=lambda t: order.get(t.problem, len(order)))
    errors = tuple(f"{c.name}: {c.error or (c.detail.splitlines()[-1] if c.detail else 'error')}"
                   for c in run.checks if c.internal_error)
    return Scored(tests=prune_subsumed(tests), grader_errors=errors, broken=run.broken)


def root_cause_note(check: CheckOutcome, checks: tuple[CheckOutcome, ...], assignment: Assignment) -> str:
    """For a check not graded because its building block `check.needs` failed: when checks of that
    block were not graded in turn, for a block of its own that fails its own checks (and so on
    down), a sentence naming the deepest such block and its problem's number ("Your `split_heads`
    also fails its own checks (problem 3), and `multi_head_attention` builds on it: fix that
    first."), else "". Read from this submission's outcomes alone: no call is made for it."""
    numbers = {p.name: i for i, p in enumerate(assignment.problems, start=1)}
    failing = {c.problem for c in checks if c.status == "failed" and c.weight > 0 and not c.internal_error}
    waits: dict[str, str] = {}               # problem -> the first block its not-graded checks wait for
    for c in checks:
        if c.status == "not_graded" and c.needs:
            waits.setdefault(c.problem, c.needs)
    chain = [check.needs]                    # the block, the block it waits for, ...
    while waits.get(chain[-1], check.problem) not in (check.problem, *chain):
        chain.append(waits[chain[-1]])
    deepest = max((i for i, block in enumerate(chain) if block in failing and block in numbers), default=0)
    if deepest == 0:
        return ""
    block, above = chain[deepest], chain[deepest - 1]
    return (f"Your `{block}` also fails its own checks (problem {numbers[block]}), and `{above}` builds on it: "
            f"fix that first.")


# --------------------------------------------------------------------------- late policy

@dataclass(frozen=True)
class LatePenalty:
    points: float          # taken off the raw score
    note: str = ""         # for the student ("" when on time)
    due: str = ""          # ISO time of this student's due date (extension included), "" when none
    extension: str = ""    # the student's extension in words ("2 days"), "" when none


def apply_late_policy(raw_score: float, assignment: Assignment, submitted_at: dt.datetime | None,
                      student: str) -> LatePenalty:
    """What the late policy takes off a raw score for `student`'s submission made at `submitted_at`
    (against their own due date: course.yml's `due` plus their extension)."""
    late = lateness(assignment, submitted_at, student)
    points = round(raw_score * late.fraction, 6)
    return LatePenalty(points=points, note=late.note(points) if late.late_days else "",
                       due=late.due.isoformat() if late.due else "", extension=late.extension)


# --------------------------------------------------------------------------- result

def capped(notes: list[str] | tuple[str, ...], limit: int) -> tuple[str, ...]:
    """At most `limit` notes; the last one says how many more there were."""
    if len(notes) <= limit:
        return tuple(notes)
    keep = max(limit - 1, 0)
    return tuple(notes[:keep]) + (f"... and {len(notes) - keep} more notes like these (not shown).",)


def restart_note(restarts: int) -> str:
    """The note on restarts: their number for the whole submission, which is not what the checks
    count (how often one function hung or crashed), so it says so."""
    return (f"The process running your functions was restarted {plural(restarts, 'time')} in all after a call "
            f"hung or crashed, from the state your notebook left, without running it again. A function that hung "
            f"or crashed {times(MAX_FAILURES_PER_FUNCTION)} was not called again; only the checks that called "
            f"such a function lost points.")


def build_result(assignment: Assignment, submission: Submission, scored: Scored, late: LatePenalty, *,
                 seed: int, on_roster: bool, notes: tuple[str, ...], isolation: tuple[str, ...],
                 seconds: float) -> SubmissionResult:
    """The SubmissionResult: crashed when the graders could not run, graded otherwise."""
    all_notes = list(notes) + ([late.note] if late.note else [])
    common: dict[str, Any] = dict(  # noqa: C408 - keyword form reads as the result's fields
        student=submission.student, assignment=assignment.name, problems=tuple(p.name for p in assignment.problems),
        notes=capped(all_notes, assignment.limits.max_notes), seed=seed, on_roster=on_roster,
        files=submission.files, isolation=isolation,
        problem_points=tuple((p.name, p.points) for p in assignment.problems),
        submitted_at=submission.submitted_at.isoformat() if submission.submitted_at else "",
        timestamp_problem=submission.time_note, unreadable_notebooks=submission.unread,
        due=late.due, extension=late.extension, execution_time=round(seconds, 3), graded_at=graded_now())
    if scored.broken:
        return SubmissionResult(state="crashed", crash_reason=" | ".join(scored.broken), **common)
    return SubmissionResult(state="graded", tests=scored.tests, grader_errors=scored.grader_errors,
                            late_penalty=late.points, **common)


def crashed_result(assignment: Assignment, student: str, seed: int, on_roster: bool, reason: str,
                   isolation: tuple[str, ...] = ()) -> SubmissionResult:
    """A submission whose grading failed outside the graders (the engine or a worker broke)."""
    return SubmissionResult(
        student=student, assignment=assignment.name, state="crashed", seed=seed, on_roster=on_roster,
        problems=tuple(p.name for p in assignment.problems), isolation=isolation,
        problem_points=tuple((p.name, p.points) for p in assignment.problems), crash_reason=reason,
        graded_at=graded_now())


# --------------------------------------------------------------------------- the pipeline

def replaced_test_cells(assignment: Assignment) -> frozenset[str]:
    """Grade ids of the notebook test cells the hidden graders replace: one per problem."""
    return frozenset(p.grade_id for p in assignment.problems)


def released_cells(course: Course, assignment: Assignment) -> dict[str, cellplan.Released]:
    """Per notebook of the assignment, its released cells and the names grading may read
    (`cellplan.Released`); a notebook whose release cannot be read is left out (all its cells run)."""
    layout = CourseLayout(course.root)
    names = cellplan.grader_names(layout.package(assignment.package), tuple(p.name for p in assignment.problems))
    out = {}
    for name in assignment.notebooks:
        sources = cellplan.released_sources(layout.release(assignment.name) / name)
        if sources is not None:
            out[name] = cellplan.Released(sources=sources, grader_names=names,
                                          facts=cellplan.released_facts(sources))
    return out


def grade_submission(course: Course, assignment: Assignment, student: str, folder: Path, *,
                     seed: int, code: InstructorCode | None = None, on_roster: bool = True,
                     host: SandboxHost | None = None, session: GraderSession | None = None,
                     released: Mapping[str, cellplan.Released] | None = None) -> SubmissionResult:
    """Grade submitted/<student>/<assignment>/ (only read, never modified). `host` is the warm
    sandbox and `session` the grader session to use (one each per worker); without them they are
    started and closed for this call. `released`: `released_cells` of the course, when the caller
    has it already (a worker reads it once, beside the graders it collected once); else read now."""
    with contextlib.ExitStack() as stack:
        if host is None:
            host = stack.enter_context(SandboxHost(memory_mb=assignment.limits.memory_mb,
                                                   processes=assignment.limits.processes))
        if session is None:
            session = stack.enter_context(GraderSession(assignment, code or load_instructor_code(course, assignment)))
        started = time.perf_counter()
        deadline = time.monotonic() + assignment.limits.submission_seconds
        submission = load(course, assignment, student, folder)
        if released is None:
            released = released_cells(course, assignment)
        with run_notebooks(submission, host, assignment.limits, deadline=deadline,
                           replaced=replaced_test_cells(assignment), released=released) as execution:
            run = run_graders(execution, session, seed)
            restarts = execution.restarts()
            layers = execution.isolation() or (host.info.layers if host.info is not None else ())
        scored = score(run, assignment)
        late = apply_late_policy(scored.raw_score, assignment, submission.submitted_at, student)
        notes = list(submission.notes) + list(execution.notes)
        if restarts:
            notes.append(restart_note(restarts))
        if submission.time_note:
            notes.append(submission.time_note)
        return build_result(assignment, submission, scored, late, seed=seed, on_roster=on_roster,
                            notes=tuple(notes), isolation=layers, seconds=time.perf_counter() - started)
