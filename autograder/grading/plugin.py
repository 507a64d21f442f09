"""The pytest plugin that runs an assignment's graders against submissions.

Graders are pytest modules `assignments/<pkg>/graders/test_<problem>.py`, run in the trusted
process. They see fixtures (`student`, `rng`, `seed`, `problem`, `tol`, `expect`, `ref`) and the
`points` marker. One plugin serves one grader session (`autograder.grading.session`): the graders
are collected once, and `begin(proxies, seed)` points the fixtures at the next submission. Each
check's outcome is classified here (`classify`), whether the check ran through pytest's own
runtest protocol or through the session's lean loop, so both give the same outcomes.
"""
from __future__ import annotations

import math
import numbers
import os
import re
import sys
import traceback
import zlib
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ..config import Assignment, Tolerance
from ..layout import GRADERS
from ..sandbox.outcomes import StudentCodeError
from ..text import truncate
from .checks import Expect, NotGraded, NotRun
from .diagnosis import Catalogue, Verdicts
from .results import CheckOutcome, TestStatus
from .rngs import SeededState, pcg64_states

INTERNAL_ERROR = ("The grader could not finish this check (an error on our side, not yours); "
                  "your instructor can see the details.")
FIXTURES = frozenset({"problem", "student", "seed", "rng", "tol", "ref", "expect"})
FIXTURE_ORDER = ("student", "expect", "rng", "ref", "tol", "seed", "problem")   # as a message lists them


@dataclass(frozen=True)
class InstructorFolder:
    """The assignment's instructor code, assignments/<package>/ (`path`; the graders below it), and
    how messages show it (`shown`, relative to the course folder; "" names its files alone)."""
    path: Path
    shown: str = ""

    def name(self, file: str) -> str:
        """How a message names one of its files: "assignments/activations/reference.py"."""
        return f"{self.shown}/{file}" if self.shown else file

    def locate(self, exc: BaseException) -> tuple[str, int, bool] | None:
        """Where in this folder `exc` arose: (its file relative to the folder, the line, whether the
        file is a grader's) of the innermost frame of its traceback inside the folder (a SyntaxError
        in one of its files: that file and line); None when nothing of it is inside."""
        folder = Path(os.path.realpath(self.path))
        frames = [(f.filename, f.lineno or 0) for f in traceback.extract_tb(exc.__traceback__)]
        if isinstance(exc, SyntaxError) and exc.filename:
            frames.append((str(exc.filename), exc.lineno or 0))
        for filename, line in reversed(frames):
            file = Path(os.path.realpath(filename))
            if file.is_relative_to(folder):
                return file.relative_to(folder).as_posix(), line, file.is_relative_to(folder / GRADERS)
        return None

    def origin(self, exc: BaseException) -> str:
        """Where an error a check met arose, when that is the assignment's own code outside the graders
        (reference.py, mistakes.py, a helper of theirs): "assignments/activations/reference.py, line 7"
        for the innermost frame of `exc`'s traceback inside this folder; "" when that frame is a
        grader's (the grader is at fault) or no frame is inside it."""
        found = self.locate(exc)
        if found is None or found[2]:
            return ""
        return f"{self.name(found[0])}, line {found[1]}"


def fixture_missing(exc: pytest.FixtureLookupError) -> str:
    """pytest's complaint about a fixture it could not give, in one line, the grading fixtures
    first among those available: "fixture 'rgn' not found; available: student, expect, rng, ..."."""
    try:
        text = exc.formatrepr().errorstring
    except Exception:  # noqa: BLE001 - a pytest whose internals differ: the fixture's name is enough
        return f"fixture {exc.argname!r} not found"
    lines = [line.strip() for line in text.splitlines() if line.strip() and "pytest --fixtures" not in line]
    available = next((line for line in lines if line.startswith("available fixtures:")), None)
    said = [line for line in lines if line is not available]
    if available is not None:
        names = [n.strip() for n in available.partition(":")[2].split(",") if n.strip()]
        ordered = [n for n in FIXTURE_ORDER if n in names] + [n for n in names if n not in FIXTURE_ORDER]
        said.append("available: " + ", ".join(ordered))
    return "; ".join(said) or f"fixture {exc.argname!r} not found"


@dataclass(frozen=True)
class CheckInfo:
    """What collection tells about a check: its problem, weight and one-line question."""
    problem: str
    weight: float
    description: str


@dataclass
class _Outcome:
    passed: bool = False
    not_graded: bool = False
    not_run: bool = False
    output: str = ""
    detail: str = ""
    diagnoses: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    needs: str = ""
    duration: float = 0.0
    internal_error: bool = False
    error: str = ""                 # an internal error in one line, for instructors (`internal_reason`)
    ran: bool = False


@dataclass
class _Submission:
    """The state one submission's checks share: its proxies, seed, and what diagnosis found once."""
    proxies: Mapping[str, Any]
    seed: int
    seed_words: list[int] | None = None       # the seed as SeedSequence takes it in (on first use)
    rng_states: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # node id -> PCG64 state, words
    outcomes: dict[str, _Outcome] = field(default_factory=dict)
    localised: dict[str, Any] = field(default_factory=dict)         # what probes found, per problem
    confirmations: dict[tuple[str, int], Any] = field(default_factory=dict)   # outputs on fixed inputs
    verdicts: Verdicts = field(default_factory=dict)               # variants against those
    wirings: dict[str, Any] = field(default_factory=dict)          # composite -> its wiring's verdict
    precision: dict[str, bool] = field(default_factory=dict)       # function -> blind below float32's resolution


def problem_of(path: Path) -> str:
    """test_layer_norm.py -> layer_norm"""
    stem = Path(path).stem
    return stem[len("test_"):] if stem.startswith("test_") else stem


def weight_problem(weight: float) -> str:
    """Why a number cannot be a check's weight ("" when it can): a weight is finite and not negative (0:
    the check counts for nothing); a negative one would give the problem's other checks more than its points."""
    return "" if math.isfinite(weight) and weight >= 0 else "a check's weight is a finite number, 0 or more"


def points_weight(marker: pytest.Mark | None) -> tuple[float, str]:
    """A test's weight from its `points` mark (1 without one), and why the mark gives none ("" when it
    does): one positional number (a bool or a string is not one), finite and not negative."""
    if marker is None:
        return 1.0, ""
    given = [repr(a) for a in marker.args] + [f"{k}={v!r}" for k, v in marker.kwargs.items()]
    shown = truncate(f"@pytest.mark.points({', '.join(given)})", 120)
    if len(marker.args) != 1 or marker.kwargs:
        return 0.0, f"{shown}: a check's weight is one number, as @pytest.mark.points(2)"
    value = marker.args[0]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return 0.0, f"{shown}: a check's weight is a number, not a {type(value).__name__}"
    try:
        weight = float(value) or 0.0        # -0.0 as 0.0
    except (OverflowError, ValueError):
        weight = math.inf
    why = weight_problem(weight)
    return (0.0, f"{shown}: {why}") if why else (weight, "")


def check_name(item: pytest.Item, *, case: bool = False) -> str:
    """A check as a grader's errors name it: its file and test, class included (`test_x.py::TestX::test_x_y`),
    without the case of a parametrised test (the cases of one check share its weight) unless `case`."""
    base = item.nodeid
    original = getattr(item, "originalname", None)
    if not case and original and original != item.name and base.endswith(item.name):
        base = base[:-len(item.name)] + original
    return "::".join([item.path.name, *base.split("::")[1:]])


def case_weight(item: pytest.Item) -> tuple[float, str, bool]:
    """A check's (or one case's) weight and why its mark gives none, as `points_weight`, and whether the
    mark is the case's own (`pytest.param(..., marks=pytest.mark.points(w))`, read before the test's)."""
    case = [m for m in getattr(getattr(item, "callspec", None), "marks", ()) if m.name == "points"]
    weighed = [points_weight(mark) for mark in case] or [points_weight(item.get_closest_marker("points"))]
    bad = next((w for w in weighed if w[1]), None)
    if bad is None and len({weight for weight, _ in weighed}) > 1:
        bad = (0.0, "several @pytest.mark.points on one case, weighing otherwise: give it one")
    return *(bad or weighed[0]), bool(case)


def total_weight_problem(problem: str, points: float, total: float) -> str:
    """Why a problem's points cannot be shared out among checks whose weights add up to `total` (""
    when they can): every check weighs nothing, or the sum is past what a float holds."""
    if total == 0:
        return (f"all checks of problem {problem} weigh 0, so none of its {points:g} points can be scored; "
                f"give one of them @pytest.mark.points(w) with w above 0")
    if not math.isfinite(total):
        return f"the weights of problem {problem}'s checks add up to more than can be shared out (keep them small)"
    return ""


def classify(exc: BaseException | None, expect: Expect | None, folder: InstructorFolder | None = None) -> _Outcome:
    """A check's outcome from the exception it ended with (None: it passed); `folder`: the
    assignment's instructor code, for where an internal error arose (`internal_reason`)."""
    outcome = _Outcome(ran=True)
    if expect is not None:
        outcome.diagnoses = tuple(m.id for m in expect.found)
        outcome.hints = tuple(m.hint for m in expect.found)
        outcome.stages = tuple(m.id for m in expect.found if m.stage)
    if exc is None:
        outcome.passed = True
    elif isinstance(exc, NotGraded):
        outcome.not_graded = True
        outcome.needs = exc.block
        outcome.output = outcome.detail = exc.feedback
    elif isinstance(exc, NotRun):
        outcome.not_run = True
        outcome.output = outcome.detail = exc.feedback
    elif isinstance(exc, StudentCodeError):
        outcome.output = outcome.detail = exc.feedback
    elif isinstance(exc, AssertionError):
        outcome.output = str(exc).split("\nassert ")[0].strip() or "A check failed."
        outcome.detail = outcome.output
    else:
        outcome.internal_error = True
        outcome.output = INTERNAL_ERROR
        outcome.detail = "".join(traceback.format_exception(exc)).strip()[-4000:]
        outcome.error = internal_reason(exc, outcome.detail, folder)
    return outcome


def internal_reason(exc: BaseException, detail: str, folder: InstructorFolder | None) -> str:
    """An error of the grader's side in one line, for the instructor alone (results.json's
    extra_data, the command's output; the student is told only INTERNAL_ERROR): a fixture pytest
    could not give, or the error as its traceback `detail` ends, after the file and line where it
    arose when that is the assignment's code outside the graders (the reference, the mistakes
    catalogue): "assignments/activations/reference.py, line 7: AttributeError: ..."."""
    if isinstance(exc, pytest.FixtureLookupError):
        return fixture_missing(exc)
    error = detail.splitlines()[-1] if detail else type(exc).__name__
    where = folder.origin(exc) if folder is not None else ""
    return f"{where}: {error}" if where else error


# where a report names a file and line: Python's traceback and syntax error, pytest's short traceback
_FILE_LINE = (re.compile(r'^(?:E)?\s*File "(?P<path>[^"]+)", line (?P<line>\d+)'),
              re.compile(r"^(?P<path>[^\s:][^:]*):(?P<line>\d+): in "))


def _location(line: str) -> re.Match[str] | None:
    return next((m for m in (p.match(line) for p in _FILE_LINE) if m is not None), None)


def registered_marks(config: pytest.Config) -> set[str]:
    """The marks a grader may carry: `points` and pytest's own (parametrize, skip, xfail, ...), as
    registered in the session's `markers` ini lines ("name(args): what it does")."""
    return {line.split(":", 1)[0].split("(", 1)[0].strip() for line in config.getini("markers")}


def collection_error(nodeid: str, report: str, graders: Path | None) -> str:
    """One line for a grader file that could not be collected, from pytest's report of it: the error
    (the report's last line), and where it arose when that is a file of the assignment (the folder
    above `graders`): the line of a syntax error, or of the last such file's frame, with its text
    (a relative path is the invocation folder's, as pytest's short traceback gives it).

    "test_silu.py, line 57: SyntaxError: invalid syntax, at 'def broken(:'"
    """
    lines = report.strip().splitlines() or ["error"]
    error = re.sub(r"^E\s+", "", lines[-1].strip())
    if graders is not None:
        graders = Path(os.path.realpath(graders))
        for i in range(len(lines) - 1, -1, -1):
            found = _location(lines[i])
            if found is None:
                continue
            path = Path(os.path.realpath(found["path"]))
            if not path.is_relative_to(graders.parent):
                continue
            name = os.path.relpath(path, graders)
            where = f"{name}, line {found['line']}" if name == nodeid else f"{nodeid}: {name}, line {found['line']}"
            text = _source_text(lines, i)
            return f"{where}: {error}" + (f", at {truncate(text, 120)!r}" if text else "")
    return f"{nodeid}: {error}"


def _source_text(lines: list[str], i: int) -> str:
    """The source line a report shows below its `File "...", line N` line i ("" when none)."""
    if i + 1 >= len(lines) - 1:             # the next line is the error itself
        return ""
    text = re.sub(r"^E\s+", "", lines[i + 1].strip())
    return "" if _location(lines[i + 1]) or set(text) <= set("^~ ") else text


class GradingPlugin:
    """One instance per grader session; `begin` before each submission, `outcomes` after."""

    def __init__(self, assignment: Assignment, *, reference: ModuleType | None, catalogue: Catalogue | None,
                 folder: InstructorFolder | None = None):
        self.assignment = assignment
        self.reference = reference
        self.catalogue = catalogue
        self.folder = folder            # assignments/<package>/: where errors of its code are named
        self.checks: dict[str, CheckInfo] = {}     # node id -> what collection found, in run order
        self.collection_errors: list[str] = []
        self._rootpath: Path | None = None
        self._problems = {p.name: p for p in assignment.problems}
        self._current: _Submission | None = None
        self._salts: dict[str, list[int]] = {}
        self._tolerances: dict[str, Callable[[Any], Tolerance]] = {}

    # ------------------------------------------------------------------ per submission
    def begin(self, proxies: Mapping[str, Any], seed: int) -> None:
        """Point the fixtures at a submission (notebook file name -> its proxy)."""
        self._current = _Submission(proxies=proxies, seed=seed)

    @property
    def current(self) -> _Submission:
        if self._current is None:
            raise RuntimeError("no submission: call begin(proxies, seed) first")
        return self._current

    def record(self, nodeid: str, outcome: _Outcome) -> None:
        self.current.outcomes[nodeid] = outcome

    def outcomes(self) -> tuple[CheckOutcome, ...]:
        """Every collected check's outcome for the current submission, in collection order (a
        check that did not run is an internal error: it must not pass unseen)."""
        out = []
        for nodeid, info in self.checks.items():
            o = self.current.outcomes.get(nodeid)
            if o is None or not o.ran:
                o = _Outcome(internal_error=True, output=INTERNAL_ERROR, detail="the check did not run",
                             error="the check did not run")
            out.append(CheckOutcome(
                name=nodeid, problem=info.problem, weight=info.weight, status=_status(o), output=o.output,
                description=info.description, diagnoses=o.diagnoses, hints=o.hints, detail=o.detail,
                duration=round(o.duration, 4), internal_error=o.internal_error, stages=o.stages, needs=o.needs,
                error=o.error))
        return tuple(out)

    def problems_without_tests(self) -> tuple[str, ...]:
        covered = {info.problem for info in self.checks.values()}
        return tuple(p for p in self._problems if p not in covered)

    # ------------------------------------------------------------------ collection
    def pytest_configure(self, config: pytest.Config) -> None:
        self._rootpath = config.rootpath            # the graders' folder (session.pytest_args)
        config.addinivalue_line("markers", "points(weight): the test's weight within its problem")

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        # one check per test (its class included), a parametrised test's cases sharing its weight
        groups: dict[tuple[str, str], list[pytest.Item]] = {}
        known = registered_marks(config)
        for item in items:
            problem = problem_of(item.path)
            if problem not in self._problems:
                self.collection_errors.append(
                    f"{item.path.name}: no problem named {problem!r} in course.yml")
                continue
            name = check_name(item)
            unknown = sorted({m.name for m in item.iter_markers()} - known)
            if unknown:
                # a mistyped `points` would otherwise leave the check at the default weight, unseen
                self.collection_errors.append(
                    f"{name}: unknown mark {', '.join(f'@pytest.mark.{n}' for n in unknown)} "
                    f"(a check's weight is @pytest.mark.points(w); graders may use {', '.join(sorted(known))})")
            groups.setdefault((str(item.path), name), []).append(item)
        totals: dict[str, float] = {}               # problem -> its tests' weights added up (nan: a faulty mark)
        files: dict[str, str] = {}
        for (_, name), members in groups.items():
            problem = problem_of(members[0].path)
            files.setdefault(problem, members[0].path.name)
            # every case's own weight is checked: a refused weight, not one taken as it is (a negative one
            # would score the others past the points), and the cases of one check weigh alike
            weights, why = set(), ""
            for item in members:
                weight, why, own = case_weight(item)
                if why:
                    self.collection_errors.append(f"{check_name(item, case=own)}: {why}")
                    break
                weights.add(weight)
            if not why and len(weights) > 1:
                why = ("a weight on one case of a parametrised check: put @pytest.mark.points on the test "
                       "function")
                self.collection_errors.append(f"{name}: {why}")
            weight = weights.pop() if not why else 0.0
            totals[problem] = totals.get(problem, 0.0) + (math.nan if why else weight)
            for item in members:
                doc = (getattr(getattr(item, "function", None), "__doc__", None) or "").strip()
                self.checks[item.nodeid] = CheckInfo(problem=problem, weight=0.0 if why else weight / len(members),
                                                     description=doc.splitlines()[0] if doc else "")
        for problem, total in totals.items():
            if math.isnan(total):
                continue                            # its faulty weight is named above
            why = total_weight_problem(problem, self._problems[problem].points, total)
            if why:
                self.collection_errors.append(f"{files[problem]}: {why}")

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors.append(collection_error(report.nodeid or "graders", report.longreprtext,
                                                           self._rootpath))

    # ------------------------------------------------------------------ fixture values
    # Plain methods, used by the pytest fixtures below and by the session's lean loop alike.
    def student_for(self, problem: str) -> Any:
        """The notebook's proxy, switched to this problem's own process (forked from the state
        the notebook left, so nothing another problem's checks did is seen here)."""
        return self.current.proxies[self._problems[problem].notebook].for_problem(problem)

    def rng_for(self, nodeid: str) -> np.random.Generator:
        """The check's own generator: seeded by the submission's seed and the check's node id,
        `np.random.default_rng([seed, zlib.crc32(nodeid)])` (the same numbers). The first one a
        submission asks for seeds every collected check's at once (`rngs.pcg64_states`: NumPy's
        SeedSequence hashing done for all of them together); each generator is then a PCG64
        started from its share."""
        current = self.current
        if current.seed_words is None:
            current.seed_words = uint32_words(current.seed)     # a negative seed: ValueError, as NumPy's
        states = current.rng_states
        found = states.get(nodeid)
        if found is None:
            self._seed_rngs(current, [nodeid] if states else list(dict.fromkeys([*self.checks, nodeid])))
            found = states[nodeid]
        return np.random.Generator(np.random.PCG64(SeededState(*found)))

    def _seed_rngs(self, current: _Submission, nodeids: list[str]) -> None:
        """The PCG64 states of these checks' generators, for the current submission."""
        assert current.seed_words is not None
        by_length: dict[int, list[tuple[str, list[int]]]] = {}
        for nodeid in nodeids:
            salt = self._salts.get(nodeid)
            if salt is None:
                salt = self._salts[nodeid] = uint32_words(zlib.crc32(nodeid.encode()))
            words = current.seed_words + salt
            by_length.setdefault(len(words), []).append((nodeid, words))
        for group in by_length.values():
            entropy = np.array([words for _, words in group], dtype=np.uint32)
            for (nodeid, _), state, words in zip(group, pcg64_states(entropy), entropy):
                current.rng_states[nodeid] = (state, words)

    def expect_for(self, problem: str, student: Any) -> Expect:
        current = self.current
        return Expect(problem=problem, tolerance_for=self._tolerance_for(problem),
                      catalogue=self.catalogue, last_call=lambda: getattr(student, "last_call", None),
                      student=student, reference=self.reference, localised=current.localised,
                      confirmations=current.confirmations, verdicts=current.verdicts, wirings=current.wirings,
                      precision=current.precision, reference_file=self.reference_file,
                      seed=current.seed)

    def _tolerance_for(self, problem: str) -> Callable[[Any], Tolerance]:
        """The problem's tolerance by dtype, each dtype looked up in course.yml's settings once."""
        memo = self._tolerances.get(problem)
        if memo is None:
            memo = self._tolerances[problem] = _memoised(self._problems[problem].tolerance)
        return memo

    @property
    def reference_file(self) -> str:
        """The reference module's file as messages name it."""
        return self.folder.name("reference.py") if self.folder is not None else "reference.py"

    def reference_module(self) -> ModuleType:
        if self.reference is None:
            raise RuntimeError(f"{self.reference_file} does not exist (the `ref` fixture is that module)")
        return self.reference

    # ------------------------------------------------------------------ fixtures
    @pytest.fixture
    def problem(self, request: pytest.FixtureRequest) -> str:
        return problem_of(request.node.path)

    @pytest.fixture
    def student(self, problem: str) -> Any:
        return self.student_for(problem)

    @pytest.fixture
    def seed(self) -> int:
        return self.current.seed

    @pytest.fixture
    def rng(self, request: pytest.FixtureRequest) -> np.random.Generator:
        return self.rng_for(request.node.nodeid)

    @pytest.fixture
    def tol(self, problem: str) -> Callable[[Any], Tolerance]:
        return self._problems[problem].tolerance

    @pytest.fixture
    def ref(self) -> ModuleType:
        return self.reference_module()

    @pytest.fixture
    def expect(self, request: pytest.FixtureRequest, problem: str, student: Any) -> Expect:
        ex = self.expect_for(problem, student)
        request.node.stash[_EXPECT_KEY] = ex
        return ex

    # ------------------------------------------------------------------ pytest's own protocol
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if item.nodeid not in self.checks or self._current is None:
            return report
        if call.when == "call" or (call.when == "setup" and report.failed):
            exc = None if report.passed else (call.excinfo.value if call.excinfo is not None else None)
            if report.passed or exc is not None:
                outcome = classify(exc, item.stash.get(_EXPECT_KEY, None), self.folder)
                outcome.duration = call.duration
                self.record(item.nodeid, outcome)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self._current is None:
            return
        outcome = self._current.outcomes.get(report.nodeid)
        if outcome is None:
            return
        if report.when == "teardown" and report.failed and outcome.passed:
            outcome.passed = False
            outcome.internal_error = True
            outcome.output = INTERNAL_ERROR
            outcome.detail = report.longreprtext[-4000:]


def uint32_words(n: int) -> list[int]:
    """A non-negative int as NumPy's SeedSequence reads it: its 32-bit words, least significant
    first (0 is one word)."""
    if n < 0:
        raise ValueError(f"expected non-negative integer, got {n}")
    words = [n & 0xFFFFFFFF]
    n >>= 32
    while n:
        words.append(n & 0xFFFFFFFF)
        n >>= 32
    return words


def _memoised(lookup: Callable[[Any], Tolerance]) -> Callable[[Any], Tolerance]:
    known: dict[Any, Tolerance] = {}

    def tolerance(dtype: Any) -> Tolerance:
        try:
            return known[dtype]
        except KeyError:
            found = known[dtype] = lookup(dtype)
            return found
        except TypeError:                     # not hashable: look it up every time
            return lookup(dtype)
    return tolerance


class TestCaseFixtures:
    """Graders written as `unittest.TestCase` classes: pytest hands a TestCase no fixtures as
    arguments, so each check's instance gets the plugin's fixtures as attributes (`self.student`,
    `self.rng`, `self.expect`, ...; `self.ref` when the assignment has a reference module), set
    before its `setUp` runs (not in `setUpClass`, which belongs to no one submission's check).
    Registered beside the `GradingPlugin` only when a grader file names `unittest`
    (`session.pytest_args`); plain test functions ignore it."""

    def __init__(self, plugin: GradingPlugin):
        self.names = sorted(FIXTURES - ({"ref"} if plugin.reference is None else set()))

    @pytest.fixture(autouse=True)
    def grading_fixtures_as_attributes(self, request: pytest.FixtureRequest) -> None:
        unittest = sys.modules.get("unittest")
        instance = request.instance
        if unittest is not None and isinstance(instance, unittest.TestCase):
            for name in self.names:
                setattr(instance, name, request.getfixturevalue(name))


def _status(outcome: _Outcome) -> TestStatus:
    if outcome.passed:
        return "passed"
    if outcome.not_graded:
        return "not_graded"
    return "not_run" if outcome.not_run else "failed"


_EXPECT_KEY = pytest.StashKey[Expect]()
