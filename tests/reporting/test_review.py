"""The warnings for a resubmission whose earlier submission got a TA's review in the gradebook, and for
reviewed students graded again under changed graders."""
from __future__ import annotations

from autograder.reporting.review import ProblemReview, Review, people_set, regrade_kept_warning, resubmission_warning


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


def test_nothing_set_gives_no_line():
    """No line when people set nothing (the autograder's scores alone, whatever they are)."""
    assert resubmission_warning(_review(ProblemReview("rms_norm", 5.0, 0.0))) is None
    assert resubmission_warning(_review(ProblemReview("rms_norm", 5.0, 5.0), ProblemReview("silu", 5.0, None))) is None


def test_a_hand_score_equal_to_the_new_autograde_is_named_all_the_same():
    """When the TA's score from the earlier submission happens to be what the autograder now gives, is it
    still named (it was set for another submission and still decides the grade), beside one that differs?"""
    same = _review(ProblemReview("rms_norm", 5.0, 5.0, 5.0))
    assert resubmission_warning(same) == (
        "ada: a TA's score for rms_norm (5 of 5; the autograder now gives 5) was set on an earlier submission and "
        "still stands: review it in formgrader")
    both = _review(ProblemReview("rms_norm", 5.0, 5.0, 5.0), ProblemReview("silu", 5.0, 0.0, 2.0))
    assert resubmission_warning(both) == (
        "ada: a TA's scores for rms_norm (5 of 5; the autograder now gives 5) and silu (2 of 5; the autograder now "
        "gives 0) were set on an earlier submission and still stand: review them in formgrader")


def test_a_reviews_scores_cross_as_plain_data_without_its_comments():
    """Do a review's scores survive the trip through JSON (the writer's acknowledgement), comments left out,
    and is data that is not such a review refused in one line?"""
    import json

    import pytest

    from autograder.reporting.review import scores_from_plain, scores_to_plain

    review = Review("ada", "transformer-block", (ProblemReview("rms_norm", 5.0, None, 4.0),
                                                 ProblemReview("silu", 5.0, 2.5, None, 1.0)),
                    comments=(("", "Nice."),), late_penalty=1.5)
    back = scores_from_plain(json.loads(json.dumps(scores_to_plain(review))))
    assert back == Review("ada", "transformer-block", review.problems, (), late_penalty=1.5)
    assert back.final_score(0.0) == review.final_score(0.0) == 6.0
    for bad in (None, {"problems": "x"}, {"problems": [["silu", 5.0, "5", None, 0.0]]}, {"problems": [[1, 2]]},
                {"problems": [["silu", 5.0, True, None, 0.0]]}):
        with pytest.raises(ValueError, match=r"^review scores: "):
            scores_from_plain(bad)


def test_the_final_score_takes_the_gradebooks_penalty_else_the_given_one_never_below_zero():
    """Is the final score the gradebook's scores less its late penalty (the result's when the gradebook's
    was not read), and 0 rather than less?"""
    problems = (ProblemReview("rms_norm", 5.0, 5.0, 4.0), ProblemReview("silu", 5.0, 1.0, None, 0.5))
    assert Review("ada", "a", problems, late_penalty=2.0).final_score(9.0) == 3.5
    assert Review("ada", "a", problems).final_score(1.0) == 4.5
    assert Review("ada", "a", problems).final_score(10.0) == 0.0


def test_reviews_kept_on_a_regrade_are_one_line_counting_and_naming_the_students():
    """When the graders changed and reviewed students were graded again, is what people set named in one line
    with their count and names (the same words as a resubmission's), and no line when nobody was reviewed?"""
    ada = people_set(_review(ProblemReview("rms_norm", 5.0, 5.0, 4.0), comments=(("", "Nice."),)))
    bob = people_set(Review("bob", "transformer-block", (ProblemReview("silu", 5.0, 5.0, None, 1.0),)))
    assert ada == ("a TA's score for rms_norm (4 of 5; the autograder now gives 5) and a comment", False)
    assert bob == ("extra credit on silu (+1)", True)
    assert regrade_kept_warning({"ada": ada[0], "bob": bob[0]}) == (
        "the TA's overrides, extra credit and comments of 2 students graded again under the changed graders are "
        "kept: ada (a TA's score for rms_norm (4 of 5; the autograder now gives 5) and a comment) and bob (extra "
        "credit on silu (+1)); review them in formgrader")
    assert regrade_kept_warning({}) is None
    assert people_set(_review(ProblemReview("silu", 5.0, 5.0))) is None
