"""What people changed in the gradebook for one submission (a TA's overrides, extra credit and
comments in formgrader), as the feedback page shows it. Read by `reporting.gradebook.read_review`;
plain data, so rendering a page never needs nbgrader."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..text import plural, sorted_ids


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

    def final_score(self, late_penalty: float) -> float:
        """What the student gets: the gradebook's scores (a person's changes included) less the late
        penalty, the gradebook's when it was read (else `late_penalty`, the result's), never below 0:
        the feedback page's total and `nbgrader export`'s score."""
        penalty = self.late_penalty if self.late_penalty is not None else late_penalty
        return round(max(0.0, self.raw_score - penalty), 6)


def scores_to_plain(review: Review) -> dict[str, object]:
    """The scores of `review` (not its comments) as plain JSON data, for the batch's writer to send back."""
    return {"student": review.student, "assignment": review.assignment, "late_penalty": review.late_penalty,
            "problems": [[p.problem, p.max_score, p.auto_score, p.manual_score, p.extra_credit]
                         for p in review.problems]}


def scores_from_plain(data: object) -> Review:
    """`scores_to_plain`'s data back as a Review without comments; ValueError when it is not such data."""
    def number(value: object, *, optional: bool = False) -> float | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"review scores: expected a number, got {value!r}"[:200])
        return float(value)

    if not isinstance(data, dict) or not isinstance(data.get("problems"), list):
        raise ValueError("review scores: expected a mapping with a list of problems")
    problems = []
    for row in data["problems"]:
        if not isinstance(row, list) or len(row) != 5 or not isinstance(row[0], str):
            raise ValueError(f"review scores: not a problem's row: {row!r}"[:200])
        problems.append(ProblemReview(row[0], number(row[1]) or 0.0, number(row[2], optional=True),
                                      number(row[3], optional=True), number(row[4]) or 0.0))
    return Review(str(data.get("student", "")), str(data.get("assignment", "")), tuple(problems),
                  late_penalty=number(data.get("late_penalty"), optional=True))


def resubmission_warning(review: Review) -> str | None:
    """The line telling a TA that what people set in the gradebook on a student's earlier submission
    (an override, extra credit, a comment) still stands on the new one `review` was committed for
    (its auto scores the new submission's), or None when nothing was set. nbgrader keeps them on a
    regrade, as it should; the TA decides whether they still apply. Every hand score is named, also
    one equal to what the autograder now gives: it was set for the earlier submission and still
    decides the grade (a later regrade, `--force` after a grader fix, would not change it), so the TA
    reviews it as any other (the gradebook flags it too, `needs_manual_grade`)."""
    set_by_people = people_set(review)
    if set_by_people is None:
        return None
    items, one = set_by_people
    return (f"{review.student}: {items} {'was' if one else 'were'} set on an earlier submission and "
            f"still {'stands' if one else 'stand'}: review {'it' if one else 'them'} in formgrader")


def people_set(review: Review) -> tuple[str, bool] | None:
    """What people set in the gradebook on the submission `review` was committed for, in words ("a
    TA's score for rms_norm (4 of 5; the autograder now gives 5) and a comment"), and whether it is a
    single thing; None when nothing was set."""
    scores = [p for p in review.problems if p.manual_score is not None]
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
    return _joined(items), len(scores) + len(extra) + len(review.comments) == 1


def regrade_kept_warning(kept: Mapping[str, str]) -> str | None:
    """The one line for students graded again, their submission unchanged, because the graders changed:
    what people set in the gradebook for each (`kept`: student -> `people_set`'s words) is kept, as
    nbgrader keeps it on a regrade, for the TA to review against the new automatic scores; None when
    there is nothing to say."""
    if not kept:
        return None
    who = _joined([f"{sid} ({kept[sid]})" for sid in sorted_ids(kept)])
    return (f"the TA's overrides, extra credit and comments of {plural(len(kept), 'student')} graded again under "
            f"the changed graders are kept: {who}; review them in formgrader")


def _joined(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
