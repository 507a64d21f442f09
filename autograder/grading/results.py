"""Results of grading one submission: small frozen dataclasses, totals derived.

Every output (results.json, feedback HTML, gradebook, terminal summary) is rendered from these:
problem scores, the raw score and the score after the late penalty are computed here, once.
`result_to_dict`/`result_from_dict` carry a result between the trusted processes of a batch (a
worker, a Dask worker and the process that writes the outputs) as plain JSON data, losslessly.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

# not_graded: the check could not be graded because a building block it needs (another problem's
# function) fails on its inputs; it earns no points and its output names that building block.
# not_run: the check had nothing to look at, since the function gave no result (raised, missing,
# returned None): advice about a function not written yet; no points, never shown as passed.
TestStatus = Literal["passed", "failed", "not_graded", "not_run"]
TEST_STATUSES: tuple[TestStatus, ...] = ("passed", "failed", "not_graded", "not_run")
# graded: the graders ran (whatever the student scored).
# crashed: the grader itself failed for this submission; scores are not to be trusted.
SubmissionState = Literal["graded", "crashed"]


def graded_now() -> str:
    """The time now, for a result's `graded_at`: ISO 8601 in UTC, to the second ('2026-12-06T11:20:03+00:00')."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class CheckOutcome:
    """What running one grader check against a submission gave, before points are shared out."""
    name: str                 # pytest node id relative to the graders folder
    problem: str
    weight: float             # the check's share of its problem's `points` weights
    status: TestStatus
    output: str = ""          # student-safe message
    description: str = ""     # the check's docstring, first line
    diagnoses: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    detail: str = ""          # instructor-only detail
    duration: float = 0.0
    internal_error: bool = False   # the grader's own code failed in this check (not the student's)
    stages: tuple[str, ...] = ()   # the diagnoses that are a probe's localised stage, not a catalogued mistake
    needs: str = ""           # not_graded: the building block (another problem's function) it waits for
    error: str = ""           # internal_error: why, in one line (instructor-only), when known


@dataclass(frozen=True)
class TestResult:
    __test__ = False          # not a pytest test class, despite the name
    name: str                 # pytest node id relative to the graders folder,
                              # e.g. "test_layer_norm.py::test_layer_norm_matches_reference[seed0]"
    problem: str              # e.g. "layer_norm"
    score: float
    max_score: float
    status: TestStatus
    output: str = ""          # student-safe message: never hidden inputs or expected values
    description: str = ""     # the test's one-line question (its docstring), shown to students
    diagnoses: tuple[str, ...] = ()   # ids from the mistakes catalogue, e.g. "layer_norm.unbiased_variance"
    hints: tuple[str, ...] = ()       # one sentence per diagnosis, same order
    detail: str = ""          # instructor-only detail (full assertion text, replay info)
    duration: float = 0.0
    stages: tuple[str, ...] = ()      # those diagnoses that are a probe's guess of the stage where the output first
                                      # goes wrong (`Mistake.stage`), not a catalogued mistake reproduced exactly

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def tags(self) -> tuple[str, ...]:
        return (f"problem:{self.problem}",) + tuple(f"diagnosis:{d}" for d in self.diagnoses)


@dataclass(frozen=True)
class ProblemScore:
    problem: str
    score: float
    max_score: float


@dataclass(frozen=True)
class SubmissionResult:
    student: str
    assignment: str
    state: SubmissionState
    tests: tuple[TestResult, ...] = ()
    problems: tuple[str, ...] = ()    # every problem of the assignment, in course.yml order
    notes: tuple[str, ...] = ()       # execution notes for the student: cell errors, skipped magics, unreadable file
    seed: int | None = None           # the hidden-input seed, for replaying a failure (instructor only)
    execution_time: float = 0.0
    crash_reason: str = ""            # why grading could not be completed (state == "crashed" only)
    grader_errors: tuple[str, ...] = ()   # "<check>: <error>" for checks whose grader code failed (state graded)
    on_roster: bool = True
    files: tuple[str, ...] = ()       # the notebooks graded, relative to the course folder
    problem_points: tuple[tuple[str, float], ...] = ()  # (problem, points) from course.yml
    submitted_at: str = ""            # ISO time from the submission's timestamp.txt, if any
    timestamp_problem: str = ""       # why its timestamp.txt was not used (so not late), for the instructor too
    unreadable_notebooks: tuple[str, ...] = ()   # the assignment's notebooks there but not readable as one
    late_penalty: float = 0.0         # points taken off by the late policy
    due: str = ""                     # ISO time of this student's due date (extension included), if any
    extension: str = ""               # the student's extension in words ("2 days"), "" when none
    isolation: tuple[str, ...] = ()   # sandbox layers that applied (instructor view): "bubblewrap", "seccomp", ...
    graded_at: str = ""               # when it was graded: ISO time in UTC (`graded_now`), "" when not known

    @cached_property
    def _by_problem(self) -> dict[str, float]:
        totals = {problem: 0.0 for problem, _ in self.problem_points}
        for t in self.tests:
            totals[t.problem] = totals.get(t.problem, 0.0) + t.score
        return {problem: round(total, 6) for problem, total in totals.items()}

    def problem_score(self, problem: str) -> float:
        """Points earned in one problem (its tests' scores), before any late penalty."""
        return self._by_problem.get(problem, 0.0)

    def has_tests(self, problem: str) -> bool:
        return any(t.problem == problem for t in self.tests)

    @property
    def raw_score(self) -> float:
        """Points earned by the tests, before any late penalty."""
        return round(sum(t.score for t in self.tests), 6)

    @property
    def score(self) -> float:
        """The score given: test points less the late penalty."""
        return round(max(0.0, self.raw_score - self.late_penalty), 6)

    @property
    def max_score(self) -> float:
        return round(sum(p for _, p in self.problem_points), 6)

    def problem_scores(self) -> tuple[ProblemScore, ...]:
        return tuple(ProblemScore(problem, self.problem_score(problem), points)
                     for problem, points in self.problem_points)

    @property
    def crashed(self) -> bool:
        return self.state == "crashed"

    @property
    def grader_failed(self) -> bool:
        """The grader (not the student) failed somewhere in this submission."""
        return self.crashed or bool(self.grader_errors)

    @property
    def diagnoses(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for t in self.tests:
            for d in t.diagnoses:
                seen.setdefault(d, None)
        return tuple(seen)


def grader_error_parts(grader_error: str) -> tuple[str, str]:
    """The check a grader error ("<check>: <error>", SubmissionResult.grader_errors) is about, and
    the error's one-line reason."""
    check, _, reason = grader_error.partition(": ")
    return check, reason or "error"


# --------------------------------------------------------------------------- plain data

_TEST_FIELDS = tuple(f.name for f in dataclasses.fields(TestResult))
# a test's fields may be set directly (`_test_from_dict`) while its class checks nothing as it is made
_SET_DIRECTLY = not hasattr(TestResult, "__post_init__") and not hasattr(TestResult, "__slots__")


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple([_tuples(v) if isinstance(v, list) else v for v in value])
    return value


def result_to_dict(result: SubmissionResult) -> dict[str, Any]:
    """`result` as JSON-ready data (lists for tuples), every field kept exactly."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(result):
        if not f.init:
            continue
        value = getattr(result, f.name)
        if f.name == "tests":
            value = [_test_to_dict(t) for t in value]
        out[f.name] = _plain(value)
    return out


def _test_to_dict(test: TestResult) -> dict[str, Any]:
    if type(test) is not TestResult:
        return {g.name: _plain(getattr(test, g.name)) for g in dataclasses.fields(test)}
    fields = test.__dict__
    if tuple(fields) == _TEST_FIELDS:        # as its __init__ set them, in field order (the usual case)
        out = fields.copy()
        for name, value in fields.items():
            if isinstance(value, (tuple, list)):
                out[name] = _plain(value)
        return out
    return {name: _plain(getattr(test, name)) for name in _TEST_FIELDS}


def result_from_dict(data: dict[str, Any]) -> SubmissionResult:
    """The SubmissionResult `result_to_dict` gave (TypeError/ValueError on anything else)."""
    if not isinstance(data, dict):
        raise TypeError("a result must be a mapping")
    known = {f.name for f in dataclasses.fields(SubmissionResult) if f.init}
    values = {k: _tuples(v) for k, v in data.items() if k in known and k != "tests"}
    tests = tuple(_test_from_dict(t) for t in data.get("tests", ()))
    return SubmissionResult(tests=tests, **values)


def _test_from_dict(data: dict[str, Any]) -> TestResult:
    """`TestResult(**data)` with lists made tuples. A mapping of exactly its fields, in field order
    (what `result_to_dict` gives) is set as the instance's fields without the frozen class's
    __init__, which sets each field through object.__setattr__ (a result has about a hundred
    tests, read by two processes): the same object. Anything else goes through __init__."""
    if _SET_DIRECTLY and type(data) is dict and tuple(data) == _TEST_FIELDS:
        test = object.__new__(TestResult)
        fields = test.__dict__
        fields.update(data)
        for name, value in data.items():
            if isinstance(value, list):
                fields[name] = _tuples(value)
        return test
    if not isinstance(data, dict):
        raise TypeError("a test must be a mapping")
    return TestResult(**{k: _tuples(v) if isinstance(v, list) else v for k, v in data.items()})
