"""One pytest session per worker: the graders are collected once and re-run for each submission.

    session = GraderSession(assignment, load_instructor_code(course, assignment))
    run = session.run(proxies, seed)          # GraderRun: one CheckOutcome per collected check
    ...                                       # the next submission, same collected items
    session.close()

The session is started the way `pytest.main` starts one (plugin autoload off, no cache, native
tracebacks, the project's own ini ignored), but it stays open: collection (importing the grader
modules, parametrising) happens once per worker, not once per submission.

Each check then runs through one of two loops that give the same outcomes (tested):
- the lean loop (the default, for every check that asks only for the plugin's fixtures and its own
  parameters, and carries no marker but `points`/`parametrize`): the fixture values are built by
  the plugin's plain methods and the test function is called directly; its exception is
  classified by `plugin.classify`. pytest's per-item machinery (setup/teardown state, reports,
  hook calls, and for a failed check the formatting of its traceback) is not paid.
- pytest's own runtest protocol, for any other check (one using another fixture, a skip/xfail
  marker, ...), so graders may use whatever pytest offers.

Calls made ahead, in waves. A problem's consecutive lean checks start together: each runs, in its
own greenlet (kept by the session for later checks once its check ends), up to its first call of a
student function and waits there; those first calls are made together, in the checks' order, in
one round trip to the problem's fresh process. Then each check goes on in turn up to its next call
(its call answered by what was made ahead when that answer still stands, ProblemHandle.take, else
made then) and waits there again: the checks' second calls are the next wave, made together in one
round trip to the problem's running process, and so on until every check has ended. A call made
then, not answered ahead (not made ahead, no longer standing, several at once, alone in a fresh
process), and the taking of a hang or crash made ahead, wait until the checks before have ended
(StudentProxy._in_turn): what a hang or crash costs (a failure count, a restart) is charged after
every call of the checks before it, as one by one. What a check sees is what calls made one by
one give, unless a student function keeps hidden state between calls: the order in which the
problem's process answers them changes (docs/grading.md). The checks' code runs interleaved,
between their calls, so a check must not depend on the others (each draws its inputs from its
own rng); what they share for the submission (diagnosis outputs, the wiring's trust, ...) is read
and filled only once the checks before have ended (`StudentProxy.after_earlier_checks`, called by
Expect). Once the replies read for a run's checks come to more bytes than answers made ahead may
hold (`ahead_bytes`), each check goes on to its end in turn: checks that wait may hold every reply
they were given.
"""
from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import os
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _pytest.config import _prepareconfig
from _pytest.runner import runtestprotocol
from greenlet import GreenletExit, getcurrent, greenlet

from .. import usercache
from ..config import Assignment, Course
from ..errors import CourseError
from ..text import truncate
from .diagnosis import Catalogue
from .plugin import FIXTURES, GradingPlugin, InstructorFolder, TestCaseFixtures, classify, problem_of
from .proxy import AFTER_EARLIER_CHECKS, StudentProxy
from .results import CheckOutcome


@dataclass(frozen=True)
class InstructorCode:
    """The assignment's trusted code: reference module, mistakes catalogue, graders folder (and its
    package folder, assignments/<package>/ above it, as messages name it: relative to the course)."""
    reference: ModuleType | None
    catalogue: Catalogue | None
    graders: Path
    shown: str = ""

    @property
    def folder(self) -> InstructorFolder:
        return InstructorFolder(self.graders.parent, self.shown)


def load_instructor_code(course: Course, assignment: Assignment) -> InstructorCode:
    """Import assignments/<package>/{reference,mistakes}.py with the course folder on sys.path (each
    optional); one that fails to import is a CourseError naming its file and line (`import_failure`)."""
    root = str(course.root)
    if root in sys.path:
        sys.path.remove(root)
    sys.path.insert(0, root)            # first: another course's folder may be on the path too
    forget_stale_instructor_modules(course.root)
    base = f"assignments.{assignment.package}"
    package = course.layout.package(assignment.package)
    folder = InstructorFolder(package, course.layout.relative(package))

    def optional(name: str) -> ModuleType | None:
        try:
            return importlib.import_module(f"{base}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name in (f"{base}.{name}",):
                return None
            raise import_failure(exc, f"{name}.py", folder) from None
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the instructor's module raised, in one line
            raise import_failure(exc, f"{name}.py", folder) from None

    with usercache.bytecode():
        mistakes = optional("mistakes")
        reference = optional("reference")
    remember_instructor_modules()
    return InstructorCode(reference=reference,
                          catalogue=getattr(mistakes, "catalogue", None) if mistakes else None,
                          graders=course.layout.graders(assignment.package), shown=folder.shown)


_IMPORTED: dict[str, tuple[str, int]] = {}    # instructor module -> (its file, that file's mtime) when imported


def _instructor_modules() -> list[str]:
    return [name for name in list(sys.modules) if name == "assignments" or name.startswith("assignments.")]


def _file_state(module: object) -> tuple[str, int] | None:
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return None                                  # a namespace package (a folder without __init__.py)
    try:
        return file, os.stat(file).st_mtime_ns
    except OSError:
        return file, -1


def forget_stale_instructor_modules(root: Path) -> None:
    """A process that lives on (a Dask worker grading batch after batch, perhaps of several courses)
    must not grade with instructor code it imported before: when any `assignments` module it holds
    comes from another folder than this course's, or from a file changed since it was imported,
    every one of them is forgotten, to be imported afresh (together: mistakes.py imports the
    reference, the graders both)."""
    names = _instructor_modules()
    for name in names:
        module = sys.modules.get(name)
        state = _file_state(module)
        if state is None:
            folders = [Path(p) for p in getattr(module, "__path__", ()) or ()]
            stale = not all(f.is_relative_to(root) for f in folders)
        else:
            stale = not Path(state[0]).is_relative_to(root) or _IMPORTED.setdefault(name, state) != state
        if stale:
            for gone in names:
                sys.modules.pop(gone, None)
                _IMPORTED.pop(gone, None)
            return


def remember_instructor_modules() -> None:
    """Note the file of each `assignments` module now imported (`forget_stale_instructor_modules`)."""
    for name in _instructor_modules():
        state = _file_state(sys.modules.get(name))
        if state is not None:
            _IMPORTED.setdefault(name, state)


def import_failure(exc: BaseException, module: str, folder: InstructorFolder) -> CourseError:
    """An instructor module (`module`, a file of `folder`) that failed to import, in one line: the
    file of the folder where the error arose (the module itself, or one it imports, such as the
    reference imported by mistakes.py) and the line of its innermost frame there, then the error:
    "assignments/activations/reference.py, line 3: SyntaxError: '(' was never closed"."""
    found = folder.locate(exc)
    text = exc.msg if isinstance(exc, SyntaxError) and found is not None else str(exc)
    lines = text.strip().splitlines()
    why = truncate(f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__, 300)
    return CourseError(f"{folder.name(found[0])}, line {found[1]}: {why}" if found else f"{folder.name(module)}: {why}")


_CHECK_ENDED = object()     # what a check greenlet hands its parent when its check has ended


@dataclass(frozen=True)
class _LeanPlan:
    """A lean check's problem, parameters, fixture names and function, fixed at collection."""
    problem: str
    needs: tuple[str, ...]
    params: Mapping[str, Any]
    tolerance: Any
    function: Any


@dataclass(frozen=True)
class GraderRun:
    """The graders' verdict on one submission, before points are shared out."""
    checks: tuple[CheckOutcome, ...]
    broken: tuple[str, ...]        # why the graders themselves could not run (the submission is then crashed)


# pytest's own plugins that give a test nothing but fixtures, or options this session never
# sets, with the names by which a grader would ask for them: each is left out unless a file of
# the graders' folder names one of them. Every plugin registered costs the collection a scan of
# its module for fixtures (pytest's FixtureManager.parsefactories), and these ten about a sixth of
# a worker's collection, which a cold `course autograde --student` waits for.
OPTIONAL_PLUGINS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("setuponly", ()),                       # --setup-only / --setup-show
    ("setupplan", ()),                       # --setup-plan
    ("python_path", ()),                     # the `pythonpath` ini key (no ini is read: -c devnull)
    ("legacypath", ("tmpdir", "testdir")),
    ("tmpdir", ("tmp_path", "tmpdir", "testdir")),   # legacypath's fixtures are built on tmp_path's
    ("monkeypatch", ("monkeypatch",)),
    ("recwarn", ("recwarn",)),
    ("logging", ("caplog",)),
    ("capture", ("capsys", "capfd", "capteesys")),   # stdout and stderr are the session's own anyway
    ("subtests", ("subtests",)),
)


def pytest_args(graders: Path, *, unittest: bool | None = None, sources: str | None = None) -> list[str]:
    """The session's command line; `unittest`: whether a grader may be a TestCase, and `sources`:
    the text of the graders' Python files, which names the optional plugins' fixtures they use
    (both worked out from the graders' files when not given)."""
    if sources is None:
        sources = _grader_sources(graders)
    if unittest is None:
        unittest = _may_use_unittest(sources)
    unused = [] if sources is None else [name for name, names in OPTIONAL_PLUGINS
                                         if not any(n in sources for n in names)]
    return [
        str(graders),
        "-c", os.devnull,                    # ignore any project ini: graders are configured here
        "--rootdir", str(graders),
        # Collection starts at the graders' folder, and conftest.py files are read from there and
        # below only. Without it (`-c os.devnull` puts the limit at /dev) pytest collects every
        # folder above the graders', listing each one's entries (all of /tmp for a course there),
        # and imports any conftest.py it finds in them.
        "--confcutdir", str(graders),
        "--import-mode=importlib",
        "--disable-plugin-autoload",         # only pytest's own plugins and ours
        "-p", "no:cacheprovider",
        "-p", "no:randomly",
        "-p", "no:cov",
        "-p", "no:stepwise",
        "-p", "no:junitxml",
        "-p", "no:pastebin",
        "-p", "no:doctest",
        # --pdb/--trace are never used here, and the debugging plugin's set-up imports pdb; but
        # pytest's unittest plugin reads its options, so both stay when a TestCase may be a grader
        *([] if unittest else ["-p", "no:debugging", "-p", "no:unittest"]),
        *(arg for name in unused for arg in ("-p", f"no:{name}")),
        "--tb=native",                       # a failing check's traceback without pytest's source analysis
        "-q", "--no-header", "-rN",
        "-W", "ignore::pytest.PytestAssertRewriteWarning",
    ]


def _grader_sources(graders: Path) -> str | None:
    """The text of the Python files of the graders' folder (and below), for the plugins they may
    need: only when one names `unittest` can a unittest.TestCase be among the graders, and pytest's
    unittest plugin is kept (it otherwise asks, for every object of every grader module, whether
    it is a TestCase subclass: ~10-15% of a worker's collection time); the OPTIONAL_PLUGINS are
    kept for the fixtures named. Unreadable: None (every plugin is kept)."""
    try:
        return "\n".join(f.read_text(encoding="utf-8", errors="replace") for f in sorted(graders.rglob("*.py")))
    except OSError:
        return None


def _may_use_unittest(sources: str | None) -> bool:
    """Whether a unittest.TestCase may be among the graders whose files read `sources` (None:
    unreadable, so it may)."""
    return sources is None or "unittest" in sources


@contextlib.contextmanager
def _quiet() -> Iterator[io.StringIO]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        yield out


class GraderSession:
    """The assignment's graders, collected once, run against one submission after another.
    Not thread-safe: one session per worker process."""

    def __init__(self, assignment: Assignment, code: InstructorCode, *, lean: bool = True, ahead: bool = True):
        self.assignment = assignment
        self.code = code
        self.lean = lean
        self.ahead = ahead          # each problem's first calls made ahead, together (module docstring)
        self.plugin = GradingPlugin(assignment, reference=code.reference, catalogue=code.catalogue,
                                    folder=code.folder)
        self.runs = 0
        self._closed = False
        self._idle: list[greenlet] = []             # check greenlets parked between checks (_check_greenlet)
        self._idle_parent: greenlet | None = None   # ... under this greenlet
        _forget_grader_modules(code.graders)
        with _quiet() as out, usercache.bytecode():
            sources = _grader_sources(code.graders)            # the graders' files read once
            unittest = _may_use_unittest(sources)
            plugins: list[object] = [self.plugin, *([TestCaseFixtures(self.plugin)] if unittest else [])]
            self.config = _prepareconfig(pytest_args(code.graders, unittest=unittest, sources=sources), plugins)
            self.session = pytest.Session.from_config(self.config)
            self.session.exitstatus = pytest.ExitCode.OK
            self.config._do_configure()
            self.config.hook.pytest_sessionstart(session=self.session)
            try:
                self.config.hook.pytest_collection(session=self.session)
            except pytest.UsageError as exc:
                self.plugin.collection_errors.append(f"pytest: {exc}")
        self._modules = {name for name, m in list(sys.modules.items()) if _under(m, code.graders)}
        remember_instructor_modules()                  # what the graders imported (their helpers, stages.py)
        self.items: list[pytest.Item] = [i for i in self.session.items if i.nodeid in self.plugin.checks]
        self._argnames = {i.nodeid: _argnames(i) for i in self.items}
        self._lean = {i.nodeid: lean and _lean_eligible(i, self._argnames[i.nodeid]) for i in self.items}
        self._plans = {i.nodeid: self._plan(i) for i in self.items if self._lean[i.nodeid]}
        self._runs = self._runs_of_checks()
        broken = list(dict.fromkeys(self.plugin.collection_errors))     # once per file, not per check
        if not self.items and not broken:
            broken.append(f"no grader checks collected from {code.graders} ({out.getvalue().strip()[-500:]})")
        missing = self.plugin.problems_without_tests()
        if missing:
            broken.append(f"no graders for {'problem' if len(missing) == 1 else 'problems'} " + ", ".join(missing))
        self.broken = tuple(("graders could not be collected: " + "; ".join(broken),) if broken else ())

    def _plan(self, item: pytest.Item) -> _LeanPlan:
        """What the lean loop needs of a check, worked out once for every submission."""
        problem = problem_of(item.path)
        return _LeanPlan(problem=problem, needs=self._argnames[item.nodeid],
                         params=dict(getattr(getattr(item, "callspec", None), "params", {})),
                         tolerance=self.plugin.assignment.problem(problem).tolerance,   # a collected check has one
                         function=item.obj)                               # type: ignore[attr-defined]

    def _runs_of_checks(self) -> list[list[pytest.Item]]:
        """The items in order, cut into runs: consecutive lean checks of one problem (made
        together, `_run_together`), and every other item alone."""
        runs: list[list[pytest.Item]] = []
        for item in self.items:
            last = runs[-1] if runs else None
            if last is not None and self._lean[item.nodeid] and self._lean[last[-1].nodeid] \
                    and problem_of(item.path) == problem_of(last[-1].path):
                last.append(item)
            else:
                runs.append([item])
        return runs

    def __enter__(self) -> GraderSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def lean_checks(self) -> int:
        return sum(self._lean.values())

    def run(self, proxies: Mapping[str, Any], seed: int) -> GraderRun:
        """Run every collected check against the submission behind `proxies` (notebook file name
        -> StudentProxy or a stand-in), with hidden inputs from `seed`."""
        if self._closed:
            raise RuntimeError("this grader session was closed")
        self.runs += 1
        self.plugin.begin(proxies, seed)
        if self.broken:
            return GraderRun(checks=(), broken=self.broken)
        with _quiet(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for run in self._runs:
                if len(run) > 1 and self.ahead:
                    self._run_together(run)
                    continue
                for item in run:
                    if self._lean[item.nodeid]:
                        self._run_lean(item)
                    else:
                        runtestprotocol(item, nextitem=None, log=True)
        return GraderRun(checks=self.plugin.outcomes(), broken=())

    def _run_lean(self, item: pytest.Item) -> None:
        plugin = self.plugin
        nodeid = item.nodeid
        plan = self._plans[nodeid]
        problem = plan.problem
        needs = plan.needs
        values: dict[str, Any] = dict(plan.params)
        expect = None
        started = time.perf_counter()
        try:
            if "problem" in needs:
                values["problem"] = problem
            if "seed" in needs:
                values["seed"] = plugin.current.seed
            if "tol" in needs:
                values["tol"] = plan.tolerance
            if "ref" in needs:
                values["ref"] = plugin.reference_module()
            if "rng" in needs:
                values["rng"] = plugin.rng_for(nodeid)
            if "student" in needs or "expect" in needs:
                student = plugin.student_for(problem)
                values["student"] = student
                if "expect" in needs:
                    expect = values["expect"] = plugin.expect_for(problem, student)
            plan.function(**{name: values[name] for name in needs})
        except (KeyboardInterrupt, SystemExit, GreenletExit):
            raise                       # GreenletExit: a check greenlet ended while it waited (_end_waiting)
        except BaseException as exc:  # noqa: BLE001 - pytest.fail/skip are BaseExceptions; classified as pytest would
            outcome = classify(exc, expect, plugin.folder)
        else:
            outcome = classify(None, expect)
        outcome.duration = time.perf_counter() - started
        plugin.record(nodeid, outcome)

    def _run_together(self, checks: list[pytest.Item]) -> None:
        """One problem's consecutive lean checks, their calls made ahead in waves, one round trip
        each (see the module's docstring)."""
        try:
            student = self.plugin.student_for(self._plans[checks[0].nodeid].problem)
        except Exception:  # noqa: BLE001 - the checks meet the same error themselves, and report it
            student = None
        if not isinstance(student, StudentProxy):
            for item in checks:
                self._run_lean(item)
            return
        here = getcurrent()
        waiting: list[tuple[int, greenlet, Any]] = []   # (index, greenlet, its call or AFTER_EARLIER_CHECKS)
        going_on: list[tuple[int, greenlet, Any]] = []
        spent = [0.0] * len(checks)
        student.gather(here.switch)             # a check's call comes back here, and waits for its wave
        try:
            for i, item in enumerate(checks):
                check = self._check_greenlet(here)
                started = time.perf_counter()
                call = check.switch(item)
                while call is AFTER_EARLIER_CHECKS and not waiting:
                    call = check.switch(None)   # every check before it has ended: it goes on
                spent[i] = time.perf_counter() - started
                if call is _CHECK_ENDED:
                    self._idle.append(check)
                else:
                    waiting.append((i, check, call))
            start, budget = student.received, student.ahead_bytes
            first = True
            while waiting:
                calls = [call for _, _, call in waiting if isinstance(call, tuple)]
                left = budget - (student.received - start)
                try:                            # a later wave of a single call: made in turn, as alike
                    aheads = iter(student.prefetch(calls) if first else
                                  student.prefetch(calls, running=True, keep_bytes=left) if len(calls) > 1 else ())
                except Exception:  # noqa: BLE001 - the checks make their calls themselves, and meet the error
                    aheads = iter(())
                first, going_on = False, []
                for n, (i, check, call) in enumerate(waiting):     # each to its next call, in order
                    if student.received - start > budget:
                        # the replies read for these checks, which they may hold while they wait, come to
                        # the bytes answers made ahead may: from here on each check goes on to its end in turn
                        student.gather(None)
                        self._to_their_ends(going_on, iter(()), spent)     # asked since the wave went out
                        self._to_their_ends(waiting[n:], aheads, spent)
                        going_on = []
                        break
                    if call is AFTER_EARLIER_CHECKS and going_on:
                        going_on.append((i, check, call))      # a check before it has not ended yet
                        continue
                    started = time.perf_counter()
                    asked = check.switch(next(aheads, None) if isinstance(call, tuple) else None)
                    # a check waiting for those before it to end (to read what the checks share, to
                    # make a call not made ahead) goes on when they have
                    while asked is AFTER_EARLIER_CHECKS and not going_on:
                        asked = check.switch(None)
                    spent[i] += time.perf_counter() - started
                    if asked is _CHECK_ENDED:
                        self._idle.append(check)
                    else:
                        going_on.append((i, check, asked))
                waiting = going_on
        except BaseException:
            _end_waiting([check for _, check, _ in waiting + going_on if check not in self._idle])
            raise
        finally:
            student.gather(None)
        outcomes = self.plugin.current.outcomes
        for item, seconds in zip(checks, spent):    # a check's duration: its own time, not its wait
            if item.nodeid in outcomes:
                outcomes[item.nodeid].duration = seconds

    def _to_their_ends(self, checks: list[tuple[int, greenlet, Any]], aheads: Iterator[Any],
                       spent: list[float]) -> None:
        """Each of `checks` (waiting, in order) goes on to its end in turn, nothing more gathered:
        its pending call answered by what `aheads` made ahead for it, else made now."""
        for i, check, call in checks:
            started = time.perf_counter()
            if check.switch(next(aheads, None) if isinstance(call, tuple) else None) is _CHECK_ENDED:
                self._idle.append(check)
            spent[i] += time.perf_counter() - started

    def _check_greenlet(self, here: greenlet) -> greenlet:
        """A greenlet to run checks in, under `here`: one parked after its last check when there
        is one (a fresh greenlet costs a new frame stack each time, a 16 KB mapping made and
        unmapped: ~100 per submission), else a new one. Parked greenlets belong to the greenlet
        (and thread) they were made under, and are switched to from there only."""
        if self._idle_parent is not here:
            self._idle = []
            self._idle_parent = here
        while self._idle:
            parked = self._idle.pop()
            if not parked.dead:
                return parked
        return greenlet(self._run_checks, parent=here)

    def _run_checks(self, item: pytest.Item) -> None:
        """A check greenlet's life: a check to its end, then _CHECK_ENDED to its parent, which
        parks it until the next check it is given (an exception that escapes a check, such as
        KeyboardInterrupt, ends the greenlet and goes on in the parent)."""
        while True:
            self._run_lean(item)
            item = getcurrent().parent.switch(_CHECK_ENDED)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._idle = []                     # parked check greenlets end when collected
        with _quiet():
            try:
                self.config.hook.pytest_sessionfinish(session=self.session, exitstatus=self.session.exitstatus)
            finally:
                self.config._ensure_unconfigure()
                for name in self._modules:          # another course's graders may use the same names
                    sys.modules.pop(name, None)


def _end_waiting(checks: list[greenlet]) -> None:
    """End the check greenlets still waiting for their first call's answer when the checks of a run are
    abandoned (KeyboardInterrupt, SIGTERM's SystemExit, a failure of the session itself): each gets
    GreenletExit where it waits, which `_run_lean` lets through, so it ends now, in its own thread,
    rather than when collected (greenlet then prints "GreenletExit did not kill" for each one that
    caught it and went on, or cannot end it at all from another thread)."""
    for check in checks:
        if not check.dead:
            with contextlib.suppress(Exception):
                check.throw()


def _under(module: object, folder: Path) -> bool:
    file = getattr(module, "__file__", None)
    # every part of a path is in its text: the folder's name is a quick test before the path's own
    return isinstance(file, str) and folder.name in file and Path(file).is_relative_to(folder)


def _forget_grader_modules(graders: Path) -> None:
    """pytest's importlib mode reuses a module of the same name already imported: drop every
    `test_<problem>` module of that name, so that a session collects the graders as their files are
    now (another course's in this process, or this one's changed since an earlier session)."""
    for path in graders.glob("*.py"):
        sys.modules.pop(path.stem, None)


def _argnames(item: pytest.Item) -> tuple[str, ...]:
    """The test function's own parameters (fixtures and parametrised arguments)."""
    func = getattr(item, "obj", None)
    if func is None:
        return ()
    try:
        return tuple(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return ()


def _lean_eligible(item: pytest.Item, argnames: tuple[str, ...]) -> bool:
    """A plain test function asking only for the plugin's fixtures and its own parameters."""
    if type(item) is not pytest.Function or inspect.iscoroutinefunction(item.obj):
        return False
    params = set(getattr(getattr(item, "callspec", None), "params", {}))
    # `request` is in every closure: the plugin's own fixtures ask for it; TestCaseFixtures'
    # autouse fixture sets attributes of TestCase instances only (they are never lean)
    allowed = FIXTURES | params | {"request", "grading_fixtures_as_attributes"}
    if not set(item.fixturenames) <= allowed or not set(argnames) <= FIXTURES | params:
        return False
    return all(m.name in ("points", "parametrize") for m in item.iter_markers())
