"""The pytest plugin that runs an assignment's graders against one submission.

Graders are pytest modules `assignments/<pkg>/graders/test_<problem>.py`, run in the trusted
process. They see fixtures (`student`, `rng`, `seed`, `problem`, `tol`, `expect`, `ref`) and the
`points` marker; results are read in `pytest_runtest_logreport` and turned into TestResults.
"""
from __future__ import annotations

import traceback
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ..config import Assignment
from ..sandbox.outcomes import StudentCodeError
from .checks import Expect, NotGraded
from .diagnosis import Catalogue
from .results import TestResult, TestStatus

INTERNAL_ERROR = ("The grader could not finish this check (an error on our side, not yours); "
                  "your instructor can see the details.")


@dataclass
class _Outcome:
    nodeid: str
    problem: str
    weight: float
    description: str
    passed: bool = False
    not_graded: bool = False
    output: str = ""
    detail: str = ""
    diagnoses: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    duration: float = 0.0
    internal_error: bool = False


def problem_of(path: Path) -> str:
    """test_layer_norm.py -> layer_norm"""
    stem = Path(path).stem
    return stem[len("test_"):] if stem.startswith("test_") else stem


class GradingPlugin:
    """One instance per graded submission."""

    def __init__(self, assignment: Assignment, proxies: Mapping[str, Any], *, seed: int,
                 reference: ModuleType | None, catalogue: Catalogue | None):
        self.assignment = assignment
        self.proxies = proxies              # notebook file name -> StudentProxy
        self._seed = seed
        self.reference = reference
        self.catalogue = catalogue
        self.outcomes: dict[str, _Outcome] = {}
        self.collection_errors: list[str] = []
        self._problems = {p.name: p for p in assignment.problems}
        self._localised: dict[str, Any] = {}    # what probes found, per problem, shared by the tests
        self._confirmations: dict[tuple[str, int], Any] = {}   # the student's outputs on fixed inputs

    # ------------------------------------------------------------------ collection
    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", "points(weight): the test's weight within its problem")

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        groups: dict[tuple[str, str], list[pytest.Item]] = {}
        for item in items:
            problem = problem_of(item.path)
            if problem not in self._problems:
                self.collection_errors.append(
                    f"{item.path.name}: no problem named {problem!r} in course.yml")
                continue
            func = getattr(item, "originalname", None) or item.name
            groups.setdefault((str(item.path), func), []).append(item)
        for (_, _), members in groups.items():
            marker = members[0].get_closest_marker("points")
            weight = float(marker.args[0]) if marker and marker.args else 1.0
            for item in members:
                doc = (getattr(getattr(item, "function", None), "__doc__", None) or "").strip()
                self.outcomes[item.nodeid] = _Outcome(
                    nodeid=item.nodeid, problem=problem_of(item.path),
                    weight=weight / len(members), description=doc.splitlines()[0] if doc else "")

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            last = report.longreprtext.strip().splitlines()[-1]
            self.collection_errors.append(f"{report.nodeid or 'graders'}: {last}")

    # ------------------------------------------------------------------ fixtures
    @pytest.fixture
    def problem(self, request: pytest.FixtureRequest) -> str:
        return problem_of(request.node.path)

    @pytest.fixture
    def student(self, problem: str) -> Any:
        """The notebook's proxy, switched to this problem's own process (forked from the state
        the notebook left, so nothing another problem's checks did is seen here)."""
        return self.proxies[self._problems[problem].notebook].for_problem(problem)

    @pytest.fixture
    def seed(self) -> int:
        return self._seed

    @pytest.fixture
    def rng(self, request: pytest.FixtureRequest) -> np.random.Generator:
        return np.random.default_rng([self._seed, zlib.crc32(request.node.nodeid.encode())])

    @pytest.fixture
    def tol(self, problem: str):
        return self._problems[problem].tolerance

    @pytest.fixture
    def ref(self) -> ModuleType:
        if self.reference is None:
            raise RuntimeError("this assignment has no reference module")
        return self.reference

    @pytest.fixture
    def expect(self, request: pytest.FixtureRequest, problem: str, student: Any) -> Expect:
        ex = Expect(problem=problem, tolerance_for=self._problems[problem].tolerance,
                    catalogue=self.catalogue, last_call=lambda: getattr(student, "last_call", None),
                    student=student, reference=self.reference, localised=self._localised,
                    confirmations=self._confirmations)
        request.node.stash[_EXPECT_KEY] = ex
        return ex

    # ------------------------------------------------------------------ results
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        outcome = self.outcomes.get(item.nodeid)
        if outcome is None:
            return report
        if call.when == "call" or (call.when == "setup" and report.failed):
            outcome.duration += call.duration
            ex = item.stash.get(_EXPECT_KEY, None)
            if ex is not None:
                outcome.diagnoses = tuple(m.id for m in ex.found)
                outcome.hints = tuple(m.hint for m in ex.found)
            if report.passed:
                outcome.passed = True
            elif call.excinfo is not None:
                exc = call.excinfo.value
                if isinstance(exc, NotGraded):
                    outcome.not_graded = True
                    outcome.output = exc.feedback
                    outcome.detail = exc.feedback
                elif isinstance(exc, StudentCodeError):
                    outcome.output = exc.feedback
                    outcome.detail = exc.feedback
                elif isinstance(exc, AssertionError):
                    outcome.output = str(exc).split("\nassert ")[0].strip() or "A check failed."
                    outcome.detail = outcome.output
                else:
                    outcome.internal_error = True
                    outcome.output = INTERNAL_ERROR
                    outcome.detail = "".join(traceback.format_exception(exc)).strip()[-4000:]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome = self.outcomes.get(report.nodeid)
        if outcome is None:
            return
        if report.when == "teardown" and report.failed and outcome.passed:
            outcome.passed = False
            outcome.internal_error = True
            outcome.output = INTERNAL_ERROR
            outcome.detail = report.longreprtext[-4000:]

    # ------------------------------------------------------------------ summary
    def results(self) -> tuple[TestResult, ...]:
        """TestResults with points shared out per problem in proportion to weights."""
        totals: dict[str, float] = {}
        for o in self.outcomes.values():
            totals[o.problem] = totals.get(o.problem, 0.0) + o.weight
        out = []
        for o in self.outcomes.values():
            points = self._problems[o.problem].points
            max_score = points * o.weight / totals[o.problem] if totals[o.problem] else 0.0
            out.append(TestResult(
                name=o.nodeid, problem=o.problem, score=max_score if o.passed else 0.0,
                max_score=max_score, status=_status(o),
                output=o.output, description=o.description, diagnoses=o.diagnoses,
                hints=o.hints, detail=o.detail, duration=round(o.duration, 4)))
        order = {p.name: i for i, p in enumerate(self.assignment.problems)}
        return tuple(sorted(out, key=lambda t: order.get(t.problem, len(order))))

    @property
    def internal_errors(self) -> tuple[str, ...]:
        return tuple(f"{o.nodeid}: {o.detail.splitlines()[-1] if o.detail else 'error'}"
                     for o in self.outcomes.values() if o.internal_error)

    def problems_without_tests(self) -> tuple[str, ...]:
        covered = {o.problem for o in self.outcomes.values()}
        return tuple(p for p in self._problems if p not in covered)


def _status(outcome: _Outcome) -> TestStatus:
    if outcome.passed:
        return "passed"
    return "not_graded" if outcome.not_graded else "failed"


_EXPECT_KEY = pytest.StashKey[Expect]()
