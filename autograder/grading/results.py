"""Results of grading one submission: small frozen dataclasses, totals derived.

Every output (results.json, feedback HTML, gradebook, terminal summary) is rendered from these.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# not_graded: the check could not be graded because a building block it needs (another problem's
# function) fails on its inputs; it earns no points and its output names that building block.
TestStatus = Literal["passed", "failed", "not_graded"]
# graded: the graders ran (whatever the student scored).
# crashed: the grader itself failed for this submission; scores are not to be trusted.
SubmissionState = Literal["graded", "crashed"]


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
    error: str = ""                   # why the grader crashed (state == "crashed")
    on_roster: bool = True
    files: tuple[str, ...] = ()       # the notebooks graded, relative to the course folder
    problem_points: tuple[tuple[str, float], ...] = ()  # (problem, points) from course.yml
    submitted_at: str = ""            # ISO time from the submission's timestamp.txt, if any
    late_penalty: float = 0.0         # points taken off by the late policy
    due: str = ""                     # ISO time of this student's due date (extension included), if any
    extension: str = ""               # the student's extension in words ("2 days"), "" when none
    isolation: tuple[str, ...] = ()   # sandbox layers that applied (instructor view): "bubblewrap", "seccomp", ...

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
        out = []
        for problem, points in self.problem_points:
            got = sum(t.score for t in self.tests if t.problem == problem)
            out.append(ProblemScore(problem, round(got, 6), points))
        return tuple(out)

    @property
    def diagnoses(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for t in self.tests:
            for d in t.diagnoses:
                seen.setdefault(d, None)
        return tuple(seen)
