"""The warning for a resubmission whose earlier submission got a TA's review in the gradebook."""
from __future__ import annotations

from autograder.reporting.review import ProblemReview, Review, resubmission_warning


def _review(*problems: ProblemReview, comments: tuple[tuple[str, str], ...] = ()) -> Review:
    return Review("ada", "transformer-block", problems, comments)


def test_a_standing_override_and_comment_are_named_in_one_line():
    """Does the line name the problem, the TA's score of its points, what the autograder now gives, and the
    comment, in the singular or plural as they come?"""
    one = _review(ProblemReview("rms_norm", 5.0, 5.0, 4.0), ProblemReview("silu", 5.0, 5.0),
                  comments=(("rms_norm", "Use the mean of squares."),))
    assert resubmission_warning(one) == (
        "ada: a TA's score for rms_norm (4 of 5; the autograder now gives 5) and a comment were set on an earlier "
        "submission and still stand: review them in formgrader")
    only_comment = _review(ProblemReview("silu", 5.0, 5.0), comments=(("", "Nice."),))
    assert resubmission_warning(only_comment) == (
        "ada: a comment was set on an earlier submission and still stands: review it in formgrader")
    many = _review(ProblemReview("rms_norm", 5.0, None, 4.0), ProblemReview("silu", 5.0, 0.0, 2.5, 1.0),
                   comments=(("", "a"), ("silu", "b")))
    assert resubmission_warning(many) == (
        "ada: a TA's scores for rms_norm (4 of 5; the autograder now gives none) and silu (2.5 of 5; the "
        "autograder now gives 0), extra credit on silu (+1) and 2 comments were set on an earlier submission and "
        "still stand: review them in formgrader")


def test_nothing_set_or_a_score_the_autograder_now_agrees_with_gives_no_line():
    """No line when people set nothing, or when the TA's score is what the autograder now gives too."""
    assert resubmission_warning(_review(ProblemReview("rms_norm", 5.0, 0.0))) is None
    assert resubmission_warning(_review(ProblemReview("rms_norm", 5.0, 5.0, 5.0))) is None
