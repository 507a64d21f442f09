"""The page shows what people changed in the gradebook (overrides, extra credit, comments) and a
student's extension; without a review it is the autograder's page."""
from __future__ import annotations

import dataclasses
import html
import re

from autograder.reporting.feedback import feedback_view, render_feedback
from autograder.reporting.review import ProblemReview, Review

from .test_feedback import parse


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def review_for(result, late_penalty=None, **changes) -> Review:
    problems = []
    for p in result.problem_scores():
        manual, extra = changes.get(p.problem, (None, 0.0))
        problems.append(ProblemReview(p.problem, p.max_score, p.score, manual, extra))
    return Review(result.student, result.assignment, tuple(problems), changes.get("comments", ()), late_penalty)


def test_an_override_and_a_comment_reach_the_page(bob, assignment):
    """With a TA's 9 on split_heads (autograder 0) and a comment on it, do the total, the overview and
    the "From your instructor" box show them, escaped like every other text?"""
    review = review_for(bob, split_heads=(9.0, 0.0), comments=(("split_heads", "Shape right, <b>axes</b> swapped."),
                                                               ("", "See me in office hours.")))
    html = render_feedback(bob, assignment, review)
    text = text_of(html)
    assert "21.5 / 30 points" in text, "12.5 from the autograder, 9 more from the TA"
    assert "From your instructor" in text
    assert "Your instructor set the score to 9 of 10 points; the autograder gave 0." in text
    assert "Shape right, &lt;b&gt;axes&lt;/b&gt; swapped." in html
    assert "See me in office hours." in text
    assert "autograder: 0" in text
    assert not parse(html).errors


def test_no_review_and_an_unchanged_review_give_the_autograders_page(bob, assignment):
    """Is the page the same without a review as with a review that changed nothing?"""
    plain = render_feedback(bob, assignment)
    assert render_feedback(bob, assignment, review_for(bob)) == plain
    assert "From your instructor" not in plain


def test_extra_credit_and_the_late_penalty_combine(ada, assignment):
    """Does extra credit add to the problem, and the late penalty still come off the total?"""
    late = dataclasses.replace(ada, late_penalty=3.0)
    view = feedback_view(late, assignment, review_for(late, silu=(None, 2.0)))
    assert (view.score, view.raw_score, view.late_penalty) == ("29", "32", "3")
    silu = next(p for p in view.problems if p.name == "silu")
    assert (silu.score, silu.auto_score) == ("7", "5")
    assert view.instructor[0].text == ("Your instructor added 2 extra credit, for 7 of 5 points; the autograder "
                                       "gave 5.")


def test_extra_credit_on_an_override_is_counted_in_the_score_set(ada, assignment):
    """With an override and extra credit on one problem, does the note say the score was set, extra credit
    included (extra credit alone is "added", as above, no score having been set)?"""
    view = feedback_view(ada, assignment, review_for(ada, silu=(4.0, 1.5)))
    assert view.instructor[0].text == ("Your instructor set the score to 5.5 of 5 points (including 1.5 extra "
                                       "credit); the autograder gave 5.")


def test_a_full_marks_problem_whose_score_a_ta_lowered_leaves_full_marks(ada, assignment):
    """When a TA lowers the score of a problem whose checks all passed (silu, 5 -> 3), is it given a section
    of its own with the new score, rather than listed under "Full marks", while one raised by extra credit
    stays there?"""
    view = feedback_view(ada, assignment, review_for(ada, silu=(3.0, 0.0), split_heads=(None, 1.0)))
    assert [p.name for p in view.to_read] == ["silu"] and view.to_read[0].score == "3"
    assert "silu" not in [p.name for p in view.full_marks] and "split_heads" in [p.name for p in view.full_marks]
    html = render_feedback(ada, assignment, review_for(ada, silu=(3.0, 0.0)))
    full = html[html.index('id="full-title"'):]
    assert "<code>silu</code>" not in full and "3 / 5 points" in html[:html.index('id="full-title"')]
    assert not parse(html).errors


def test_changes_that_cancel_out_do_not_say_the_score_was_changed_to_itself(ada, assignment):
    """When a TA takes 2 points off one problem and gives 2 extra credit on another, does the page say the
    problems' scores changed and the total did not, rather than "gave 30; changed that to 30"?"""
    text = text_of(render_feedback(ada, assignment, review_for(ada, silu=(3.0, 0.0), split_heads=(None, 2.0))))
    assert "30 / 30 points" in text and "changed that to" not in text
    assert ("Your instructor changed the scores of some problems, which leaves the autograder's 30 points as they "
            "were (see below).") in text


def test_an_extension_shows_the_students_own_due_date(ada, assignment):
    """Does a student with an extension see their due date and the extension, and one without see
    the due date alone?"""
    extended = dataclasses.replace(ada, due="2026-12-16T23:59:00+00:00", extension="2 days")
    assert "due 2026-12-16 23:59:00 UTC (with your extension of 2 days)" in text_of(
        render_feedback(extended, assignment))
    plain = text_of(render_feedback(dataclasses.replace(ada, due="2026-12-14T23:59:00+00:00"), assignment))
    assert "due 2026-12-14 23:59:00 UTC" in plain and "extension" not in plain


def test_the_page_says_which_course_when_it_was_submitted_due_and_graded(ada, assignment):
    """Is there one short line under the student's name with the course's name, the submission's
    time, the due date and when it was graded, each left out when results.json does not hold it, the
    name escaped?"""
    timed = dataclasses.replace(ada, due="2026-12-14T23:59:00+00:00", submitted_at="2026-12-14T19:00:00+01:00",
                                graded_at="2026-12-15T08:30:59+00:00")
    text = html.unescape(text_of(render_feedback(timed, assignment, None, "Deep Learning <i>101</i>")))
    assert ("Student: ada Deep Learning <i>101</i> \u00b7 submitted 2026-12-14 18:00:00 UTC \u00b7 "
            "due 2026-12-14 23:59:00 UTC \u00b7 graded 2026-12-15 08:30:59 UTC 30 / 30 points") in text
    assert "<i>101" not in render_feedback(timed, assignment, None, "Deep Learning <i>101</i>")
    assert 'class="facts"' not in render_feedback(ada, assignment)
    assert "Student: ada submitted 2026-12-14 18:00:00 UTC \u00b7 due" in text_of(render_feedback(timed, assignment))
    graded_only = text_of(render_feedback(dataclasses.replace(ada, graded_at="2026-12-15T08:30:00+00:00"), assignment))
    assert "Student: ada graded 2026-12-15 08:30:00 UTC 30 / 30 points" in graded_only


def test_a_submission_seconds_late_shows_its_seconds_and_how_late(ada, assignment):
    """Does a submission 30 seconds after the due date show both times to the second (not the due date's
    minute twice, which reads as on time) and a late note saying "30 seconds", not a minute?"""
    import datetime as dt

    from autograder.config import LatePolicy
    from autograder.grading.lateness import lateness

    due = dt.datetime(2026, 12, 14, 23, 59, tzinfo=dt.UTC)
    policy = dataclasses.replace(assignment, due=due, late_policy=LatePolicy(penalty_per_day=0.1))
    note = lateness(policy, due + dt.timedelta(seconds=30)).note(3.0)
    assert note == "Submitted 30 seconds after the due date, counted as 1 day: late penalty of 10% (3 points)."
    late = dataclasses.replace(ada, due=due.isoformat(), submitted_at="2026-12-15T00:59:30+01:00", late_penalty=3.0,
                               notes=(note,))
    text = text_of(render_feedback(late, assignment))
    assert "Student: ada submitted 2026-12-14 23:59:30 UTC \u00b7 due 2026-12-14 23:59:00 UTC" in text
    assert note in text


def test_a_submission_under_a_second_late_does_not_show_the_due_second(ada, assignment):
    """Does a submission 0.4 s after the due date show its fraction of a second (cut to the second it would
    read as made on the due date itself) beside a late note of 1 second?"""
    import datetime as dt

    from autograder.config import LatePolicy
    from autograder.grading.lateness import lateness

    due = dt.datetime(2026, 12, 14, 23, 59, tzinfo=dt.UTC)
    policy = dataclasses.replace(assignment, due=due, late_policy=LatePolicy(penalty_per_day=0.1))
    when = due + dt.timedelta(seconds=0.4)
    note = lateness(policy, when).note(3.0)
    assert note.startswith("Submitted 1 second after the due date"), note
    late = dataclasses.replace(ada, due=due.isoformat(), submitted_at=when.isoformat(), late_penalty=3.0,
                               notes=(note,))
    text = text_of(render_feedback(late, assignment))
    assert "Student: ada submitted 2026-12-14 23:59:00.4 UTC \u00b7 due 2026-12-14 23:59:00 UTC" in text
    assert note in text


def test_a_late_submission_changed_by_a_ta_states_the_penalty_fixed_at_autograde_time(ada, assignment):
    """After a TA lowers a late submission's grade, does the page say the autograder's score was changed,
    and give the penalty in points as the gradebook holds it (fixed when autograded), tied to the
    autograder's score rather than to the changed one?"""
    late = dataclasses.replace(ada, late_penalty=6.0, notes=(
        "Submitted 2 days after the due date: late penalty of 20% (6 points).",))
    text = text_of(render_feedback(late, assignment, review_for(late, late_penalty=6.0, split_heads=(7.0, 0.0))))
    assert "21 / 30 points" in text
    assert "The autograder gave 30 points; your instructor changed that to 27 (see below)." in text
    assert ("27 points less a late penalty of 6 points, fixed when your submission was autograded (20% of the "
            "autograder's 30 points).") in text
    assert "Includes your instructor's review" not in text
    # the gradebook's penalty is the one taken off (what `nbgrader export` takes off), even if it differs
    view = feedback_view(late, assignment, review_for(late, late_penalty=5.0, split_heads=(7.0, 0.0)))
    assert (view.score, view.raw_score, view.late_penalty, view.late_share) == ("22", "27", "5", "")
    # a comment alone changes no figure
    commented = text_of(render_feedback(late, assignment, review_for(late, 6.0, comments=(("", "Well done."),))))
    assert "24 / 30 points" in commented and "30 points less a late penalty of 6 points." in commented
    assert "The autograder gave" not in commented and "Includes your instructor's review (see below)." in commented


def test_the_late_note_and_the_ta_sentence_give_the_penalty_in_the_same_figures(ada, assignment):
    """With a penalty of 8.38235 points (10% of an autograder's 83.8235), do the late note written at autograde
    time and the sentence under a TA's change both say "8.38 points", as every other figure on the page is
    rounded, rather than "8.38235" in one and "8.38" in the other?"""
    import datetime as dt

    from autograder.config import LatePolicy
    from autograder.grading.lateness import lateness

    due = dt.datetime(2026, 12, 14, 23, 59, tzinfo=dt.UTC)
    policy = dataclasses.replace(assignment, due=due, late_policy=LatePolicy(grace_minutes=15, penalty_per_day=0.1))
    note = lateness(policy, due + dt.timedelta(minutes=16, seconds=1)).note(8.38235)
    assert note == ("Submitted 16 minutes 1 second after the due date, counted as 1 day: late penalty of 10% "
                    "(8.38 points).")
    late = dataclasses.replace(ada, late_penalty=8.38235, notes=(note,))
    text = text_of(render_feedback(late, assignment, review_for(late, late_penalty=8.38235, split_heads=(7.0, 0.0))))
    assert note in text and "less a late penalty of 8.38 points, fixed when your submission was autograded" in text
    assert "8.38235" not in text


def test_the_every_check_failed_card_gives_the_autograder_s_score_beside_a_ta_s_change(assignment):
    """When every check failed alike (an unreadable notebook) and a TA then gave points, does the one
    failure card give the autograder's 0 as the autograder's, the total above it the TA's score?"""
    from .conftest import check, submission

    why = "Your notebook could not be run (nb.ipynb is not valid notebook JSON)."
    ike = submission("ike", [check(p, f"test_{p}_{i}", 0.0, 2.0, output=why)
                             for p in ("layer_norm", "split_heads", "silu") for i in range(3)])
    text = text_of(render_feedback(ike, assignment, review_for(ike, silu=(4.0, 0.0))))
    card = text[text.index("Every check failed with the same error"):]
    assert "0 / 30 points from the autograder" in card and "4 / 30" not in card
