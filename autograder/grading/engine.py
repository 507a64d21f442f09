"""Grading one submission: load its notebooks, start a sandbox per notebook, run the assignment's
graders (pytest, in this trusted process) against proxies to it, and return a SubmissionResult.

Nothing here imports or evaluates student code; the graders only see proxies.
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
from ..sandbox.launcher import Sandbox
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

    def __init__(self, reason: str):
        self.reason = reason

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)

        def unavailable(*args, **kwargs):
            raise NotebookFailed(self.reason)
        unavailable.__name__ = name
        return unavailable

    def using(self, **_: object) -> NoNotebook:
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


def _instructor_paths(course: Course) -> tuple[Path, ...]:
    """What student code must not see: everything in the course folder (instructor code, solutions
    in source/, other students' submissions, results, the secret, git history, ...) except the
    Python environment and the engine package the child runs from. When the engine is installed
    from another course folder (a scratch copy, the demo), that folder is covered the same way."""
    import autograder

    package = Path(autograder.__file__).resolve().parent
    keep = (Path(sys.prefix).resolve(), package)
    roots = {course.root.resolve()}
    if (package.parent / "course.yml").is_file():
        roots.add(package.parent)
    hide = []
    for root in sorted(roots):
        for entry in sorted(root.iterdir()):
            resolved = entry.resolve()
            if any(k == resolved or k.is_relative_to(resolved) for k in keep):
                continue
            hide.append(entry)
    for extra in (course.secret_file, _sqlite_path(course.gradebook_url)):
        if extra is not None and extra.exists() and not any(extra.resolve().is_relative_to(r) for r in roots):
            hide.append(extra)
    return tuple(hide)


def _sqlite_path(url: str) -> Path | None:
    return Path(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else None


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
                     seed: int, code: InstructorCode, on_roster: bool = True) -> SubmissionResult:
    """Grade submitted/<student>/<assignment>/ (only read, never modified)."""
    started = time.perf_counter()
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
        hide = _instructor_paths(course)
        for name, nb in loaded.items():
            if not nb.readable:
                reason = nb.notes[0] if nb.notes else f"{name} was not submitted"
                proxies[name] = NoNotebook(reason.rstrip("."))
                continue
            proxies[name] = StudentProxy(lambda cells=nb.cells: Sandbox(cells, limits, hide=hide),
                                         call_seconds=limits.call_seconds)
            report = proxies[name].start()
            notes.extend(f"{name}: {n}" for n in report.notes)

        plugin = GradingPlugin(assignment, proxies, seed=seed, reference=code.reference,
                               catalogue=code.catalogue)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exit_code = pytest.main(_pytest_args(code.graders), plugins=[plugin])
        restarts = sum(getattr(p, "restarts", 0) for p in proxies.values())
        if restarts:
            notes.append(f"Your notebook was restarted {restarts} time(s) after a function hung or crashed; "
                         f"only the checks that called it lost points.")
    finally:
        for p in proxies.values():
            p.close()

    submitted_at, stamp_note = submission_time(folder)
    late = lateness(assignment, submitted_at)
    if stamp_note:
        notes.append(stamp_note)
    files = tuple(str(p.relative_to(course.root)) if p.is_relative_to(course.root) else str(p)
                  for p in matched.values() if p is not None)
    common = dict(student=student, assignment=assignment.name, problems=tuple(p.name for p in assignment.problems),  # noqa: C408
                  notes=tuple(notes), seed=seed, on_roster=on_roster, files=files,
                  problem_points=tuple((p.name, p.points) for p in assignment.problems))
    tests = prune_subsumed(plugin.results())
    raw = sum(t.score for t in tests)
    penalty = round(raw * late.fraction, 6)
    if late.late_days:
        notes.append(late.note(penalty))
    common.update(tests=tests, notes=tuple(notes), late_penalty=penalty,
                  submitted_at=submitted_at.isoformat() if submitted_at else "")
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
