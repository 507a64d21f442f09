"""The terminal summary: one row per student, scores per problem, flags, diagnoses, class statistics."""
from __future__ import annotations

from pathlib import Path

from autograder.layout import CourseLayout
from autograder.reporting.summary import StudentRow, format_summary, not_submitted_lines

from .conftest import check, make_assignment, submission

GOLDEN = Path(__file__).parent / "files" / "summary.txt"
ALL_PROBLEMS = (("layer_norm", 15.0), ("split_heads", 10.0), ("merge_heads", 5.0),
                ("multi_head_attention", 20.0), ("pre_ln_block", 20.0), ("silu", 5.0),
                ("swiglu_ffn", 15.0), ("count_block_params", 10.0))


def pages(root: Path, assignment) -> str:
    """Where the feedback pages are, as the summary's last line shows it."""
    return f"{CourseLayout(root).feedback('<student>', assignment.name)}/"


def rows(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines()[2:] if line.strip()}


def test_summary_matches_the_golden_file(ada, bob, cy, assignment):
    """Is the table for ada, bob and cy exactly the reviewed one in files/summary.txt?"""
    text = format_summary([bob, cy, ada], assignment, feedback_pages=pages(Path("."), assignment))
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_every_student_has_one_row_in_order(ada, bob, cy, assignment):
    """Does every student get exactly one row, sorted by id?"""
    lines = format_summary([cy, bob, ada], assignment).splitlines()
    assert [ln.split()[0] for ln in lines[2:5]] == ["ada", "bob", "cy"]


def test_a_row_shows_problem_scores_total_state_flags_and_diagnoses(bob, assignment):
    """Does bob's row show each problem's score, total/max, state, roster and notes flags, diagnosis?"""
    row = rows(format_summary([bob], assignment))["bob"]
    assert row.split()[1:6] == ["7.5", "0", "5", "12.5/30", "graded"]
    assert "not on roster" in row and "2 notes" in row
    assert row.endswith("layer_norm.unbiased_variance")


def test_a_crashed_row_says_so_and_has_no_problem_scores(cy, assignment):
    """Is a crashed submission flagged, scored 0 and shown without per-problem scores?"""
    row = rows(format_summary([cy], assignment))["cy"]
    assert row.split()[1:6] == ["-", "-", "-", "0/30", "crashed"]
    assert row.rstrip().endswith("crashed")


def test_last_line_gives_mean_median_and_where_the_feedback_is(ada, bob, cy, assignment):
    """Does the closing line give the class mean and median (crash excluded) and the feedback folder?"""
    last = format_summary([ada, bob, cy], assignment, feedback_pages=pages(Path("out"), assignment)).splitlines()[-1]
    assert "3 students, 2 graded" in last
    assert "mean 21.25" in last and "median 21.25 of 30" in last and "crashed excluded" in last
    assert f"{pages(Path('out'), assignment)}" in last and last.endswith("/transformer-block/")


def test_median_and_mean_differ_when_they_should(ada, assignment):
    """With totals 0, 5 and 30, is the mean 11.67 and the median 5?"""
    results = [ada,
               submission("b", [check("silu", "test_silu_a", 5.0, 5.0)]),
               submission("c", [check("silu", "test_silu_a", 0.0, 5.0)])]
    last = format_summary(results, assignment).splitlines()[-1]
    assert "mean 11.67" in last and "median 5 of 30" in last


def test_wide_assignments_get_numbered_columns_and_a_legend(ada):
    """With all eight problems, are columns headed P1..P8 and named in a legend line?"""
    text = format_summary([ada], make_assignment(points=ALL_PROBLEMS))
    header = text.splitlines()[0].split()
    assert header[1:9] == [f"P{i}" for i in range(1, 9)]
    assert "P4 multi_head_attention (20)" in text
    assert max(len(line) for line in text.splitlines() if not line.startswith("Problems:")) <= 120


def test_no_results_is_a_header_and_a_count(assignment):
    """With no submissions, is there still a header and a closing count?"""
    text = format_summary([], assignment)
    assert text.splitlines()[0].startswith("student")
    assert text.rstrip().endswith("0 students, 0 graded.")


def test_compact_rows_give_the_same_table_as_full_results(ada, bob, cy, assignment):
    """Is the table from a batch's compact rows (StudentRow) the same as the one from full results?"""
    full = format_summary([bob, cy, ada], assignment, feedback_pages="out/")
    compact = format_summary([StudentRow.of(r) for r in (bob, cy, ada)], assignment, feedback_pages="out/")
    assert compact == full


def test_a_row_keeps_the_figures_callers_read(bob, cy):
    """Does a row keep the score, state, flags and files of its result, and 0 as cy's crashed score?"""
    row = StudentRow.of(bob)
    assert (row.student, row.state, row.score, row.max_score) == ("bob", "graded", bob.score, bob.max_score)
    assert (row.on_roster, row.notes, row.diagnoses, row.files) == (False, 2, bob.diagnoses, bob.files)
    assert dict(row.problems)["layer_norm"] == bob.problem_score("layer_norm")
    crashed = StudentRow.of(cy)
    assert crashed.crashed and crashed.grader_failed and crashed.reported_score == 0.0


def test_a_grader_error_is_flagged_and_named_once_with_its_reason_and_reach(ada, assignment):
    """When a grader check fails in its own code, is each such row flagged, and does the summary name
    each distinct grader error once (not once per student) with its check, its one-line reason and
    how many submissions it cost points, telling the instructor to fix the grader and regrade?"""
    broken = "test_silu.py::test_x: NameError: name 'np2' is not defined"
    other = "test_silu.py::test_y[float32]: AttributeError: module 'reference' has no attribute 'gelu'"
    results = [ada,
               submission("b", [check("silu", "test_x", 0.0, 5.0)], grader_errors=(broken,)),
               submission("c", [check("silu", "test_x", 0.0, 5.0)], grader_errors=(broken, other))]
    text = format_summary(results, assignment, graders="assignments/transformer_block/graders")
    table = rows(text)
    assert "grader error" in table["b"] and "grader error" in table["c"] and "grader error" not in table["ada"]
    errors = [ln for ln in text.splitlines() if ln.startswith("GRADER ERROR")]
    assert errors == [
        "GRADER ERROR in assignments/transformer_block/graders/test_silu.py::test_x (2 of 3 submissions): "
        "NameError: name 'np2' is not defined; that check scored 0: fix the grader and run "
        "`course autograde transformer-block --force`",
        "GRADER ERROR in assignments/transformer_block/graders/test_silu.py::test_y[float32] (1 of 3 submissions): "
        "AttributeError: module 'reference' has no attribute 'gelu'; that check scored 0: fix the grader and run "
        "`course autograde transformer-block --force`"]
    compact = format_summary([StudentRow.of(r) for r in results], assignment,
                             graders="assignments/transformer_block/graders")
    assert compact == text


def test_a_grader_error_in_every_submission_says_all(assignment):
    """Does a grader error that every submission met say 'all N submissions', under graders/ by default?"""
    broken = "test_silu.py::test_x: NameError: name 'np2' is not defined"
    results = [submission(s, [check("silu", "test_x", 0.0, 5.0)], grader_errors=(broken,)) for s in "abc"]
    errors = [ln for ln in format_summary(results, assignment).splitlines() if ln.startswith("GRADER ERROR")]
    assert len(errors) == 1
    assert errors[0].startswith("GRADER ERROR in graders/test_silu.py::test_x (all 3 submissions): NameError: ")


def test_a_grader_error_that_arose_in_the_reference_says_to_fix_that_file(assignment):
    """When the grader error's reason names the reference file and line it arose at, does the GRADER
    ERROR line keep naming the check, and tell the instructor to fix that file rather than the grader?"""
    error = ("test_silu.py::test_x: assignments/transformer_block/reference.py, line 7: AttributeError: "
             "'numpy.ndarray' object has no attribute 'dtyp'")
    results = [submission("a", [check("silu", "test_x", 0.0, 5.0)], grader_errors=(error,))]
    errors = [ln for ln in format_summary(results, assignment).splitlines() if ln.startswith("GRADER ERROR")]
    assert errors == [
        "GRADER ERROR in graders/test_silu.py::test_x (1 submission): assignments/transformer_block/reference.py, "
        "line 7: AttributeError: 'numpy.ndarray' object has no attribute 'dtyp'; that check scored 0: fix "
        "assignments/transformer_block/reference.py and run `course autograde transformer-block --force`"]


def test_grader_errors_that_differ_by_student_take_a_bounded_number_of_lines(assignment):
    """When a grader error's reason differs from student to student, are the lines capped, the last
    one saying how many more there were and where they are?"""
    results = [submission(f"s{i:02}", [check("silu", "test_x", 0.0, 5.0)],
                          grader_errors=(f"test_silu.py::test_x: ValueError: shape ({i},) is wrong",))
               for i in range(25)]
    text = format_summary(results, assignment)
    errors = [ln for ln in text.splitlines() if ln.startswith("GRADER ERROR")]
    assert len(errors) == 10 and "(1 of 25 submissions)" in errors[0]
    assert text.rstrip().splitlines()[-1] == ("... and 15 more grader errors (each results.json names its own "
                                              "in extra_data.grader_errors)")


def _due(assignment):
    import dataclasses
    import datetime as dt

    return dataclasses.replace(assignment, due=dt.datetime(2026, 12, 14, 23, 59, tzinfo=dt.UTC))


def test_submissions_without_a_timestamp_are_named_when_there_is_a_due_date(assignment):
    """With a due date, are the graded submissions that had no timestamp.txt (so could not be judged
    late) named in one line, those with one or with an unreadable one (flagged on their row) left out?"""
    stamped = submission("ada", submitted_at="2026-12-10T10:00:00+00:00")
    unread = submission("bob", timestamp_problem="timestamp.txt could not be read as a time")
    text = format_summary([stamped, unread, submission("cy"), submission("dee")], _due(assignment))
    line = [ln for ln in text.splitlines() if ln.startswith("Late policy:")]
    assert line == ["Late policy: 2 submissions without a timestamp.txt (nbgrader's collect and submit write one), "
                    "graded as on time: cy, dee."]
    assert "Late policy" not in format_summary([stamped, unread, submission("cy")], assignment)   # no due date


def test_students_without_a_submission_before_their_due_date_are_said_not_due_yet(assignment):
    """With the clock given (before the due date, between it and an extension's end, after both), are the
    roster students without a submission named sorted ignoring case, those whose due date (their extension's)
    is still ahead apart as "not due yet" with that date to the second, so no TA chases them before it?"""
    import dataclasses
    import datetime as dt

    from autograder.config import Extension

    a = dataclasses.replace(_due(assignment), extensions={"kat": Extension(days=2)})
    due = a.due
    missing = ("zed", "kat", "Bob", "ada")
    assert not_submitted_lines(missing, a, now=due - dt.timedelta(hours=1)) == [
        "no submission (not due yet: each one's due date, extensions included, is still ahead) from 4 roster "
        "students, each scored 0 in the gradebook until they submit and are graded: ada, Bob, kat, zed"]
    assert not_submitted_lines(missing, a, now=due + dt.timedelta(seconds=1)) == [
        "no submission from 3 roster students, each scored 0 in the gradebook: ada, Bob, zed",
        "no submission (not due yet: due 2026-12-16 23:59:00 UTC) from 1 roster student, each scored 0 in the "
        "gradebook until they submit and are graded: kat"]
    after = ["no submission from 4 roster students, each scored 0 in the gradebook: ada, Bob, kat, zed"]
    assert not_submitted_lines(missing, a, now=due + dt.timedelta(days=3)) == after
    assert not_submitted_lines(missing, assignment, now=due - dt.timedelta(days=30)) == after    # no due date
    assert not_submitted_lines((), a, now=due) == []


def test_a_class_without_any_timestamp_is_told_once(assignment):
    """When no submission has a timestamp.txt (copied in by hand, say), does one line say all were on time?"""
    text = format_summary([submission(s) for s in ("ada", "bob", "cy")], _due(assignment))
    assert "Late policy: none of the 3 submissions has a timestamp.txt" in text and "ada," not in text


def test_wide_characters_keep_the_columns_aligned(assignment):
    """Does a student id of wide characters (two terminal columns each) keep every later column where
    the others have it?"""
    from autograder.text import display_width

    text = format_summary([submission("\u674e\u96f7"), submission("ada")], assignment)
    lines = text.splitlines()[:4]
    starts = {display_width(ln[: ln.index(" 0/")]) for ln in lines[2:4]}
    assert len(starts) == 1, lines


def _reviewed(bob, *problems, late_penalty=None):
    """bob's row with the gradebook's review of his submission: his own auto scores, a person's changes."""
    from autograder.reporting.review import ProblemReview, Review

    auto = dict(StudentRow.of(bob).problems)
    changes = {name: rest for name, *rest in problems}
    return Review("bob", "transformer-block", tuple(
        ProblemReview(name, points, auto[name], *changes.get(name, ())) for name, points in
        (("layer_norm", 15.0), ("split_heads", 10.0), ("silu", 5.0))), late_penalty=late_penalty)


def test_a_tas_change_shows_what_the_student_gets_marked_with_the_autograders_total(bob, assignment):
    """With a TA's override (split_heads 0 -> 8) and extra credit (silu +1) in the gradebook, does bob's row
    show those problems' scores and the total the student gets, marked *, the autograder's own total in the
    flags, a line saying what * means, and the class mean of what students get?"""
    row = StudentRow.of(bob).with_review(_reviewed(bob, ("split_heads", 8.0), ("silu", None, 1.0)))
    text = format_summary([row], assignment)
    line = rows(text)["bob"]
    assert line.split()[1:6] == ["7.5", "8*", "6*", "21.5/30*", "graded"]
    assert "TA changed, autograder 12.5, not on roster, 2 notes" in line
    assert [ln for ln in text.splitlines() if ln.startswith("* ")] == [
        "* a TA's change in the gradebook (an override or extra credit in formgrader): what the student gets, as on "
        "their feedback page and in `nbgrader export`; flags give the autograder's total."]
    assert "mean 21.5, median 21.5 of 30" in text.splitlines()[-1]


def test_the_final_score_is_the_feedback_pages_with_the_gradebooks_late_penalty(bob, assignment):
    """With a TA's override and the gradebook's late penalty, is the row's total the one bob's feedback page
    shows (the gradebook's scores less its penalty)?"""
    from autograder.reporting.feedback import feedback_view

    review = _reviewed(bob, ("split_heads", 8.0), late_penalty=2.0)
    row = StudentRow.of(bob).with_review(review)
    assert row.final_score == 18.5
    assert feedback_view(bob, assignment, review).score == "18.5"
    assert rows(format_summary([row], assignment))["bob"].split()[4] == "18.5/30*"


def test_a_review_without_a_changed_score_leaves_the_row_as_the_autograder_gave_it(bob, assignment):
    """A comment alone, a TA's score equal to the autograder's, or no review: is the row unmarked, as it was?"""
    from autograder.reporting.review import Review

    plain = format_summary([bob], assignment)
    same = _reviewed(bob, ("split_heads", 0.0))
    commented = Review("bob", "transformer-block", same.problems, (("split_heads", "Check the axes."),))
    for review in (same, commented, None):
        row = StudentRow.of(bob).with_review(review)
        assert row.final_score is None and row.reviewed == ()
        assert format_summary([row], assignment) == plain
    changed = StudentRow.of(bob).with_review(_reviewed(bob, ("split_heads", 8.0)))
    assert changed.with_review(None) == StudentRow.of(bob), "a review taken back leaves the autograder's row"



def _scored_by_hand(result, **manual):
    """The gradebook's review of a crashed `result` whose problems a TA scored by hand (no automatic score)."""
    from autograder.reporting.review import ProblemReview, Review

    return Review(result.student, "transformer-block", tuple(
        ProblemReview(name, points, None, manual.get(name)) for name, points in
        (("layer_norm", 15.0), ("split_heads", 10.0), ("silu", 5.0))))


def test_a_crashed_submission_a_ta_scored_by_hand_counts_in_the_mean_as_on_its_feedback_page(ada, bob, cy,
                                                                                              assignment):
    """When a TA scored cy's crashed submission by hand (10 + 5 + 0), does the class mean and median count
    cy's 15, the total on cy's feedback page, and does the closing line say the mean includes cy?"""
    from autograder.reporting.feedback import feedback_view

    review = _scored_by_hand(cy, layer_norm=10.0, split_heads=5.0, silu=0.0)
    row = StudentRow.of(cy).with_review(review)
    assert feedback_view(cy, assignment, review).score == "15"
    text = format_summary([ada, bob, row], assignment)
    assert rows(text)["cy"].split()[1:6] == ["10*", "5*", "0*", "15/30*", "crashed"]
    last = text.splitlines()[-1]
    assert last == "3 students, 2 graded: mean 19.17, median 15 of 30 (including crashed cy, scored by a TA)."


def test_the_closing_line_tells_crashed_scored_by_a_ta_from_crashed_left_out(ada, cy, assignment):
    """With cy's crashed submission scored by a TA and dan's crashed and not, does the mean count ada and cy
    only, and does the closing line name cy and count dan as excluded; with dan alone crashed, is it the
    plain "crashed excluded"?"""
    dan = submission("dan", [], state="crashed", crash_reason="the notebook could not be run")
    cy_row = StudentRow.of(cy).with_review(_scored_by_hand(cy, layer_norm=15.0, split_heads=3.0))
    last = format_summary([ada, cy_row, dan], assignment).splitlines()[-1]
    assert last == ("3 students, 1 graded: mean 24, median 24 of 30 (including crashed cy, scored by a TA; "
                    "1 other crashed excluded).")
    assert format_summary([ada, dan], assignment).splitlines()[-1] == (
        "2 students, 1 graded: mean 30, median 30 of 30 (crashed excluded).")
    alone = format_summary([cy_row], assignment).splitlines()[-1]
    assert alone == "1 student, 0 graded: mean 18, median 18 of 30 (including crashed cy, scored by a TA)."


def test_unchanged_submissions_are_flagged_and_counted_apart_from_those_graded_now(ada, bob, cy, assignment):
    """Are submissions not graded again (unchanged since the last run) flagged "unchanged" and counted
    apart in the closing line, for one student alone, for a whole class, and for a mix?"""
    from dataclasses import replace

    def unchanged(result):
        return replace(StudentRow.of(result), unchanged=True)

    alone = format_summary([unchanged(ada)], assignment)
    assert "unchanged" in rows(alone)["ada"]
    assert alone.splitlines()[-1].startswith(
        "1 student, already graded, unchanged since the last run (not graded again): mean 30"), alone
    assert "1 graded" not in alone
    everyone = format_summary([unchanged(ada), unchanged(bob)], assignment).splitlines()[-1]
    assert everyone.startswith("2 students, all 2 already graded, unchanged since the last run (not graded again):")
    mixed = format_summary([unchanged(ada), bob, cy], assignment).splitlines()[-1]
    assert mixed.startswith("3 students, 1 graded now, 1 already graded (unchanged since the last run): "
                            "mean 21.25"), mixed
    assert "unchanged" not in rows(format_summary([bob], assignment))["bob"]
