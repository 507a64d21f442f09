"""Grading one submission: load its notebooks, run each in the sandbox (a SubmissionRun of the
host), run the assignment's graders (pytest, in this trusted process) against proxies to them,
and return a SubmissionResult.

Nothing here imports or evaluates student code; the graders only see proxies. Nothing here takes
the child's word for anything either: the only data from the child used in a verdict are the
values its functions return (the child's own reports on argument mutation and warnings are
shown as advice, worth no points; cell outcomes and crash reasons only shape the notes).
"""
from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from ..config import Assignment, Course
from ..notebooks import LoadedNotebook, find_submission_notebooks, load_notebook
from ..sandbox.host import SandboxHost
from ..sandbox.outcomes import NotebookFailed
from .diagnosis import Catalogue, prune_subsumed
from .lateness import lateness, submission_time
from .plugin import GradingPlugin
from .proxy import StudentProxy
from .results import SubmissionResult


@dataclass(frozen=True)
class InstructorCode:
    """The assignment's trusted code: reference module, mistakes catalogue, graders folder."""
    reference: ModuleType | None
    catalogue: Catalogue | None
    graders: Path


class NoNotebook:
    """Stands in for a notebook that could not be read: every call fails with the reason,
    without starting a process."""

    last_call = None
    restarts = 0
    isolation: tuple[str, ...] = ()

    def __init__(self, reason: str):
        self.reason = reason

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)

        def unavailable(*args, **kwargs):
            raise NotebookFailed(self.reason)
        unavailable.__name__ = name
        return unavailable

    def for_problem(self, problem: str) -> NoNotebook:
        return self

    def close(self) -> None:
        pass


def load_instructor_code(course: Course, assignment: Assignment) -> InstructorCode:
    """Import assignments/<package>/{reference,mistakes}.py with the course folder on sys.path."""
    root = str(course.root)
    if root not in sys.path:
        sys.path.insert(0, root)
    base = f"assignments.{assignment.package}"

    def optional(name: str) -> ModuleType | None:
        try:
            return importlib.import_module(f"{base}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name in (f"{base}.{name}",):
                return None
            raise

    mistakes = optional("mistakes")
    graders = course.layout.graders(assignment.package)
    return InstructorCode(reference=optional("reference"),
                          catalogue=getattr(mistakes, "catalogue", None) if mistakes else None,
                          graders=graders)


def _capped(notes: list[str], limit: int) -> tuple[str, ...]:
    """At most `limit` notes; the last one says how many more there were."""
    if len(notes) <= limit:
        return tuple(notes)
    keep = max(limit - 1, 0)
    return tuple(notes[:keep]) + (f"... and {len(notes) - keep} more notes like these (not shown).",)


def _pytest_args(graders: Path) -> list[str]:
    return [
        str(graders),
        "-c", os.devnull,                    # ignore any project ini: graders are configured here
        "--rootdir", str(graders),
        "--import-mode=importlib",
        "-p", "no:cacheprovider",
        "-p", "no:randomly",
        "-p", "no:cov",
        "-q", "--no-header", "-rN",
        "-W", "ignore::pytest.PytestAssertRewriteWarning",
    ]


def grade_submission(course: Course, assignment: Assignment, student: str, folder: Path, *,
                     seed: int, code: InstructorCode, on_roster: bool = True,
                     host: SandboxHost | None = None) -> SubmissionResult:
    """Grade submitted/<student>/<assignment>/ (only read, never modified). `host` is the warm
    sandbox to use (one per worker); without it a host is started and closed for this call."""
    if host is None:
        with SandboxHost() as own:
            return grade_submission(course, assignment, student, folder, seed=seed, code=code,
                                    on_roster=on_roster, host=own)
    started = time.perf_counter()
    budget_end = time.monotonic() + assignment.limits.submission_seconds
    limits = assignment.limits
    matched, notes = find_submission_notebooks(folder, assignment.notebooks)
    notes = list(notes)
    loaded: dict[str, LoadedNotebook] = {}
    for name, path in matched.items():
        nb = load_notebook(path, max_mb=limits.notebook_mb) if path else LoadedNotebook(None, (), (), False)
        loaded[name] = nb
        notes.extend(nb.notes)

    proxies: dict[str, StudentProxy | NoNotebook] = {}
    try:
        for name, nb in loaded.items():
            if not nb.readable:
                reason = nb.notes[0] if nb.notes else f"{name} was not submitted"
                proxies[name] = NoNotebook(reason.rstrip("."))
                continue
            proxies[name] = StudentProxy(host.submission(nb.cells, limits, deadline=budget_end))
            notes.extend(f"{name}: {n}" for n in proxies[name].execution.notes)

        plugin = GradingPlugin(assignment, proxies, seed=seed, reference=code.reference,
                               catalogue=code.catalogue)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exit_code = pytest.main(_pytest_args(code.graders), plugins=[plugin])
        restarts = sum(getattr(p, "restarts", 0) for p in proxies.values())
        if restarts:
            notes.append(f"Your functions were restarted {restarts} time(s) after one hung or crashed (from the "
                         f"state your notebook left, without running it again); only the checks that called "
                         f"it lost points.")
        layers = tuple(sorted({layer for p in proxies.values() for layer in p.isolation}))
        if not layers and host.info is not None:
            layers = host.info.layers
    finally:
        for p in proxies.values():
            p.close()

    submitted_at, stamp_note = submission_time(folder)
    late = lateness(assignment, submitted_at, student)
    if stamp_note:
        notes.append(stamp_note)
    files = tuple(str(p.relative_to(course.root)) if p.is_relative_to(course.root) else str(p)
                  for p in matched.values() if p is not None)
    common = dict(student=student, assignment=assignment.name, problems=tuple(p.name for p in assignment.problems),  # noqa: C408
                  notes=_capped(notes, limits.max_notes), seed=seed, on_roster=on_roster, files=files,
                  isolation=layers,
                  problem_points=tuple((p.name, p.points) for p in assignment.problems))
    tests = prune_subsumed(plugin.results())
    raw = sum(t.score for t in tests)
    penalty = round(raw * late.fraction, 6)
    if late.late_days:
        notes.append(late.note(penalty))
    common.update(tests=tests, notes=_capped(notes, limits.max_notes), late_penalty=penalty,
                  submitted_at=submitted_at.isoformat() if submitted_at else "",
                  due=late.due.isoformat() if late.due else "", extension=late.extension)
    problems = []
    if plugin.collection_errors:
        problems.append("graders could not be collected: " + "; ".join(plugin.collection_errors))
    if exit_code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        problems.append(f"pytest ended with {pytest.ExitCode(exit_code).name}: {out.getvalue().strip()[-1500:]}")
    missing = plugin.problems_without_tests()
    if missing:
        problems.append("no graders for problem(s) " + ", ".join(missing))
    if problems:
        return SubmissionResult(state="crashed", error=" | ".join(problems),
                                execution_time=round(time.perf_counter() - started, 3), **common)
    return SubmissionResult(state="graded",
                            error="; ".join(plugin.internal_errors),
                            execution_time=round(time.perf_counter() - started, 3), **common)
