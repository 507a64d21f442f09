"""What people changed in the gradebook for one submission (a TA's overrides, extra credit and
comments in formgrader), as the feedback page shows it. Read by `reporting.gradebook.read_review`;
plain data, so rendering a page never needs nbgrader."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProblemReview:
    """One problem's grade as the gradebook holds it, a person's changes included."""
    problem: str
    max_score: float
    auto_score: float | None
    manual_score: float | None = None     # a TA's override (formgrader), or None
    extra_credit: float = 0.0

    @property
    def score(self) -> float:
        base = self.manual_score if self.manual_score is not None else (self.auto_score or 0.0)
        return round(base + self.extra_credit, 6)

    @property
    def overridden(self) -> bool:
        return (self.manual_score is not None and self.manual_score != self.auto_score) or bool(self.extra_credit)


@dataclass(frozen=True)
class Review:
    """What people added in the gradebook for one submission: overrides and comments."""
    student: str
    assignment: str
    problems: tuple[ProblemReview, ...]
    comments: tuple[tuple[str, str], ...] = ()    # (problem name, or "" for the notebook, comment text)
    late_penalty: float | None = None   # the gradebook's late_submission_penalty, in points (None: not read)

    def problem(self, name: str) -> ProblemReview | None:
        return next((p for p in self.problems if p.problem == name), None)

    @property
    def raw_score(self) -> float:
        return round(sum(p.score for p in self.problems), 6)

    @property
    def scores_changed(self) -> bool:
        """A person changed a score (an override or extra credit), not only commented."""
        return any(p.overridden for p in self.problems)

    @property
    def changed(self) -> bool:
        return any(p.overridden for p in self.problems) or bool(self.comments)
