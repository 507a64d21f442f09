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


def resubmission_warning(review: Review) -> str | None:
    """The line telling a TA that what people set in the gradebook on a student's earlier submission
    (an override, extra credit, a comment) still stands on the new one `review` was committed for
    (its auto scores the new submission's), or None when nothing was set. nbgrader keeps them on a
    regrade, as it should; the TA decides whether they still apply."""
    scores = [p for p in review.problems if p.manual_score is not None and p.manual_score != p.auto_score]
    extra = [p for p in review.problems if p.extra_credit]
    items = []
    if scores:
        each = [f"{p.problem} ({p.manual_score:g} of {p.max_score:g}; the autograder now gives "
                f"{'none' if p.auto_score is None else format(p.auto_score, 'g')})" for p in scores]
        items.append(f"a TA's score{'s' if len(scores) > 1 else ''} for {_joined(each)}")
    if extra:
        items.append(f"extra credit on {_joined([f'{p.problem} ({p.extra_credit:+g})' for p in extra])}")
    if review.comments:
        items.append("a comment" if len(review.comments) == 1 else f"{len(review.comments)} comments")
    if not items:
        return None
    one = len(scores) + len(extra) + len(review.comments) == 1
    return (f"{review.student}: {_joined(items)} {'was' if one else 'were'} set on an earlier submission and "
            f"still {'stands' if one else 'stand'}: review {'it' if one else 'them'} in formgrader")


def _joined(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
