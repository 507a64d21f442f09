"""The feedback page as a student reads it: order, folding, grouping, new kinds of checks, safety.

The page is read here the way a browser shows it without scripts: text inside a closed `<details>`
(other than its `<summary>`) is folded away; everything else is on screen. The browser test
checks the same page in Chromium at phone and desktop widths.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import replace
from html.parser import HTMLParser

from autograder.reporting.feedback import breakable, render_feedback, rich

from .conftest import check, submission
from .feedback_samples import (
    MISSING_SPLIT,
    MUTATED,
    NAME_ERRORS,
    NEEDS_SPLIT,
    NOT_RUN_SPLIT,
    SECRET,
    SEED,
    SYNTAX,
    UPCAST,
    WARNED,
    dora_result,
    erin_result,
    partly_alike_result,
)


class Reader(HTMLParser):
    """Headings in order, on-screen text and folded text of a page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.headings: list[tuple[int, str]] = []
        self.shown: list[str] = []
        self.folded: list[str] = []
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.articles = 0
        self._heading: int | None = None
        self._text: list[str] = []
        self._details = 0          # depth of <details>
        self._summary = 0          # inside a <summary>
        self._skip = 0             # <style>, <title>

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href", "").startswith("#"):
            self.links.append(attrs["href"][1:])
        self.articles += tag == "article"
        self._details += tag == "details"
        self._summary += tag == "summary"
        self._skip += tag in ("style", "title")
        if re.fullmatch(r"h[1-6]", tag):
            self._heading, self._text = int(tag[1]), []

    def handle_endtag(self, tag):
        self._details -= tag == "details"
        self._summary -= tag == "summary"
        self._skip -= tag in ("style", "title")
        if re.fullmatch(r"h[1-6]", tag) and self._heading is not None:
            self.headings.append((self._heading, " ".join("".join(self._text).split())))
            self._heading = None

    def handle_data(self, data):
        if self._skip:
            return
        if self._heading is not None:
            self._text.append(data)
        (self.folded if self._details and not self._summary else self.shown).append(data)

    @property
    def on_screen(self) -> str:
        return " ".join("".join(self.shown).split())

    @property
    def hidden(self) -> str:
        return " ".join("".join(self.folded).split())


def read(result, assignment=None) -> Reader:
    r = Reader()
    r.feed(render_feedback(result, assignment))
    r.close()
    return r


def squash(text: str) -> str:
    return " ".join(text.replace("`", "").split())


def test_headings_descend_one_level_at_a_time(ada, bob, cy, assignment):
    """Does every page start with h1 and never skip a level (no h3 before the first h2)?"""
    for result in (ada, bob, cy, dora_result(), erin_result()):
        levels = [level for level, _ in read(result, assignment if result.student in "ada bob cy" else None).headings]
        assert levels[0] == 1 and levels.count(1) == 1, result.student
        assert all(b - a <= 1 for a, b in itertools.pairwise(levels)), (result.student, levels)


def test_failed_checks_come_first_and_passed_checks_are_folded():
    """Within a problem, are failures on screen before the folded list of passed checks?"""
    page = read(dora_result())
    shown = page.on_screen
    assert shown.index("Does layer_norm match the reference") < shown.index("1 passed check")
    assert "Given float32 x, does layer_norm return float32 values?" in page.hidden
    assert "Given float32 x, does layer_norm return float32 values?" not in shown


def test_problems_with_full_marks_are_folded_at_the_end_and_still_linked():
    """Are full-marks problems one folded line each after the problems to read, and every overview link live?"""
    page = read(dora_result())
    titles = [text for level, text in page.headings if level == 2]
    assert titles[-1] == "Full marks"
    assert not any(t.startswith(("3. merge_heads", "6. silu")) for t in titles)
    assert "3. merge_heads 5 / 5 points, 3 checks passed" in page.on_screen
    assert "Does merge_heads have property 1?" in page.hidden
    assert page.links and set(page.links) <= page.ids


def test_a_parametrised_check_is_shown_once_with_its_cases():
    """Is a check with 6 cases one card saying 1 of 6 failed, naming the failing and the passing cases?"""
    page = read(dora_result())
    shown = page.on_screen
    assert shown.count("Does layer_norm match the reference for several shapes?") == 1
    assert "1 of 6 cases failed" in shown
    assert "Failed nearly_constant" in shown
    assert "Passed one_vector, n5_d8, one_token, batch_axes_2x3, n12_d64" in shown


def test_checks_failing_with_one_message_are_shown_once():
    """Do all split_heads checks, failing with one message, give one card with the message once?"""
    page = read(dora_result())
    assert "All 3 checks failed with the same error" in page.on_screen
    assert squash(page.on_screen).count(squash(MISSING_SPLIT)) == 1
    assert "Does split_heads refuse a width that heads cannot share?" in page.hidden


def test_a_grouped_check_says_how_many_of_its_cases_the_error_covers():
    """When a check failed in 2 of its 6 cases with another check's message, is the group not called 'All'?"""
    page = read(partly_alike_result())
    assert "2 checks failed with the same error" in page.on_screen
    assert "All 2 checks" not in page.on_screen
    assert "(2 of 6 cases)" in page.hidden


def test_a_cascade_of_name_errors_is_folded_under_its_first_cause():
    """Is the syntax error on screen and the eight NameErrors it caused folded beneath it?"""
    page = read(dora_result())
    assert squash(SYNTAX) in squash(page.on_screen)
    assert "Because of this, 8 later cells stopped: split_heads was never defined" in page.on_screen
    for note in NAME_ERRORS:
        assert squash(note) in squash(page.hidden)
    assert "NameError" not in page.on_screen


def test_notes_stay_in_the_order_of_their_cells_when_an_error_comes_back_later():
    """Cells 10, 13, 16 and 19 raised, 10, 16 and 19 the same error: are the notes shown in the cells'
    order (the 10th's error not folded together with the 16th's and 19th's above the 13th's), the
    16th's and 19th's, in a row, still one note?"""
    def note(cell, error):
        return f"nb.ipynb: The {cell}th code cell (`x = {cell}`) raised {error} (line 2: `y = f(x)`)"
    same = "AttributeError: 'list' object has no attribute 'shape'"
    notes = (note(10, same), note(13, "AssertionError: shapes differ"), note(16, same), note(19, same))
    page = read(submission("hal", [check("layer_norm", "test_a", 15.0, 15.0)], notes=notes))
    shown = squash(page.on_screen)
    places = [shown.index(f"The {cell}th code cell") for cell in (10, 13, 16)]
    assert places == sorted(places), shown
    assert "The same error in 1 more cell" in shown, shown
    assert "The 19th code cell" in page.hidden and "The 19th code cell" not in page.on_screen


def test_repeated_errors_in_notes_are_folded():
    """Are the unfinished-stub errors of several cells one note with the others folded?"""
    notes = tuple(f"nb.ipynb: cell {i} raised NotImplementedError "
                  f"(cell {i - 1}, line 25: `raise NotImplementedError()`)" for i in (5, 9, 13, 17))
    page = read(submission("hal", [check("layer_norm", "test_a", 15.0, 15.0)], notes=notes))
    assert "The same error in 3 more cells" in page.on_screen
    assert "cell 5 raised NotImplementedError" in page.on_screen
    assert "cell 17 raised" in page.hidden and "cell 17 raised" not in page.on_screen


def test_a_check_that_could_not_run_shows_its_reason_and_is_not_a_failure():
    """Is a "not_graded" check shown with its reason and counted apart from failures?"""
    page = read(dora_result())
    shown = squash(page.on_screen)
    assert shown.count(squash(NEEDS_SPLIT)) == 2
    assert "With your own split_heads and merge_heads, does attention agree? Not graded" in shown
    assert "4. multi_head_attention 18 / 20 1 not graded (no points)" in shown
    assert "5. pre_ln_block 16 / 20 \u2717 1 of 4 checks failed 1 not graded (no points)" in shown
    assert "2 could not be graded" in shown


def test_advice_worth_no_points_is_shown_as_advice():
    """Are checks with max_score 0 shown under "Advice (no points)" with their message, not as failures?"""
    page = read(dora_result())
    shown = squash(page.on_screen)
    assert shown.count("Advice (no points)") == 2
    assert squash(MUTATED) in shown and squash(WARNED) in shown
    assert "1. layer_norm 13.5 / 15 \u2717 1 of 2 checks failed" in shown
    assert "18 of 25 checks passed" in shown


def test_advice_with_nothing_to_look_at_is_shown_as_not_run_never_passed():
    """Is an advice check whose function gave no result shown under "Not run (no points)" with its
    reason, in its problem's section, and never among the passed checks or as advice?"""
    page = read(dora_result())
    shown, folded = squash(page.on_screen), squash(page.hidden)
    assert shown.count("Not run (no points)") == 1
    section = shown[shown.index("2. split_heads 0 / 10 points"):shown.index("4. multi_head_attention 18 / 20 points")]
    assert "Not run (no points) Does split_heads leave x untouched?" in section
    assert squash(NOT_RUN_SPLIT) in section
    assert "leave x untouched" not in folded and shown.count("Advice (no points)") == 2



def test_advice_that_found_nothing_is_never_counted_as_a_passed_check():
    """A 0-point check that passed (nothing to advise) beside failed checks: do the header, the
    overview and the problem's section all count 0 passed checks, the check shown as advice with
    nothing to say? And beside passed checks, is it listed but not counted among them?"""
    quiet = {"status": "passed", "description": "Does layer_norm leave its inputs unchanged?"}
    failing = submission("fay", [
        check("layer_norm", "test_layer_norm_a", 0.0, 7.5, output="wrong values"),
        check("layer_norm", "test_layer_norm_b", 0.0, 7.5, output="wrong shape"),
        check("layer_norm", "test_layer_norm_leaves_inputs_unchanged", 0.0, 0.0, **quiet),
        check("split_heads", "test_split_heads_a", 10.0, 10.0),
        check("split_heads", "test_split_heads_leaves_inputs_unchanged", 0.0, 0.0, **quiet),
        check("silu", "test_silu_a", 5.0, 5.0),
    ])
    page = read(failing)
    shown, folded = squash(page.on_screen), squash(page.hidden)
    assert "2 of 4 checks passed." in shown
    assert "\u2717 2 of 2 checks failed" in shown
    section = shown[shown.index("1. layer_norm 0 / 15 points"):shown.index("Full marks")]
    assert "passed check" not in section
    assert "1 advice check with nothing to say (no points)" in section
    assert "2. split_heads 10 / 10 points, 1 check passed" in shown
    assert "No advice Does layer_norm leave its inputs unchanged?" in folded
    assert folded.count("No advice") == 2 and folded.count("Passed") == 2

def test_terminal_colours_in_student_text_are_dropped_other_control_characters_written_out():
    """An exception message printed in colour (ESC [31m ... ESC [0m), in a check's message, a note
    and a crash reason: does the page show the plain words, with no `\x1b[31m` left, while another
    control character (NUL, an ESC that is not a colour) is still written out?"""
    coloured = "raised RuntimeError: \x1b[31mRED\x1b[0m \x1b[1;4mbold\x1b[0m nul \x00 erase \x1b[2K end"
    failed = check("layer_norm", "test_layer_norm_a", 0.0, 15.0, output=f"`layer_norm` {coloured}")
    graded = submission("ansi", [failed],
                        notes=(f"transformer-block.ipynb: The 3rd code cell (`f()`) {coloured}",))
    crashed = submission("ansi", [], state="crashed", crash_reason=f"the notebook {coloured}")
    for result in (graded, crashed):
        html = render_feedback(result)
        assert "[31m" not in html and "[0m" not in html and "[1;4m" not in html
        assert "RuntimeError: RED bold nul \\x00 erase \\x1b[2K end" in html.replace("<wbr>", ""), result.state


def test_cell_names_and_code_are_shown_as_students_see_them():
    """Are "the 5th code cell (`def ...`)" names kept, with backticked code shown as code?"""
    html = render_feedback(dora_result()).replace("<wbr>", "")
    assert "the 5th code cell (<code>def split_heads(x, n_heads):</code>) raised SyntaxError" in html
    assert "a float64 constant such as <code>np.sqrt(d_k)</code> upcasts it" in html
    assert squash(UPCAST) in squash(read(dora_result()).on_screen)


def test_a_nearly_perfect_page_is_short():
    """Does a 99.5/100 page show one failure card and fold everything that passed?"""
    page = read(erin_result())
    assert page.articles == 1
    assert [t for level, t in page.headings if level == 2] == [
        "Overview", "1. layer_norm 14.5 / 15 points", "Full marks"]
    assert len(page.on_screen) < 2000, len(page.on_screen)


def test_a_late_penalty_is_shown_beside_the_total():
    """Does a late submission's total say what it scored before the penalty and what was taken off?"""
    late = replace(erin_result(), late_penalty=9.95)
    shown = read(late).on_screen
    assert "89.55 / 100 points" in shown
    assert "99.5 points less a late penalty of 9.95" in shown


def test_instructor_detail_and_seed_stay_off_a_full_page():
    """With instructor detail on every check, does the page hold neither the detail nor the seed?"""
    html = render_feedback(dora_result())
    assert SECRET not in html and str(SEED) not in html and "replay" not in html


def test_text_helpers_escape_first_and_break_only_long_identifiers():
    """Do rich/breakable escape markup, turn `code` into <code>, and add breaks only inside long names?"""
    assert str(rich("a `<b>` and <i>")) == "a <code>&lt;b&gt;</code> and &lt;i&gt;"
    assert str(rich("uses d_k and n_heads")) == "uses d_k and n_heads"
    assert str(breakable("test_multi_head_attention")) == "test_<wbr>multi_<wbr>head_<wbr>attention"
    assert str(rich("np.sqrt(d_k) of 0.0012345678901234")) == "np.sqrt(d_k) of 0.0012345678901234"
    assert "<wbr>" not in str(rich("ValueError: <script>alert('pwned')</script>"))
    # doubled and mixed joints, a joint before a space or an entity, a dot before a digit
    assert str(breakable("a__b._c,d e_ f_<g 1.5")) == "a_<wbr>_<wbr>b.<wbr>_<wbr>c,<wbr>d e_ f_&lt;g 1.5"
    assert str(rich("see `params.W_Q_projection_weights` or x_really_long_name_here.")) == (
        "see <code>params.<wbr>W_<wbr>Q_<wbr>projection_<wbr>weights</code> or "
        "x_<wbr>really_<wbr>long_<wbr>name_<wbr>here.")


def test_a_submission_where_every_check_failed_alike_gets_one_message():
    """When every check failed with one message (an unreadable notebook), is it said once, not per problem?"""
    why = "Your notebook could not be run (nb.ipynb is not valid notebook JSON)."
    tests = [check(p, f"test_{p}_{i}", 0.0, 2.0, output=why) for p in ("layer_norm", "split_heads", "silu")
             for i in range(3)]
    page = read(submission("ike", tests))
    assert [t for level, t in page.headings if level == 2] == ["Overview", "Every check failed with the same error"]
    assert page.on_screen.count(why) == 1 and page.articles == 1
    assert "All 9 checks stopped here" in page.on_screen
    assert set(page.links) <= page.ids


def test_the_overview_the_headline_and_the_cards_count_the_same_checks():
    """Do the overview's badge, the total's line and the cards count checks (grader functions, not
    their cases), so that "3 of 3 checks failed" stands beside "All 3 checks failed"?"""
    page = read(dora_result())
    shown = squash(page.on_screen)
    assert "2. split_heads 0 / 10 \u2717 3 of 3 checks failed" in shown
    assert "All 3 checks failed with the same error" in shown
    assert "1. layer_norm 13.5 / 15 \u2717 1 of 2 checks failed" in shown     # one check, 1 of its 6 cases
    assert "1 of 6 cases failed" in shown
    assert "18 of 25 checks passed. 2 could not be graded (no points)." in shown
    assert " cases failed" not in shown[:shown.index("1. layer_norm 13.5 / 15 points")]


def test_checks_not_graded_say_they_earned_no_points():
    """Does the overview's badge for checks that could not be graded say they earned no points?"""
    shown = squash(read(dora_result()).on_screen)
    assert "4. multi_head_attention 18 / 20 1 not graded (no points)" in shown
    assert re.search(r"\d+ not graded(?! \(no points\))", shown) is None


STAGE = "layer_norm.statistics_across_tokens"
STAGE_HINT = "The mean and variance must be taken over each token's features (the last axis)."
KNOWN = "layer_norm.unbiased_variance"
KNOWN_HINT = "Divide by d, not d - 1."


def staged_result():
    """layer_norm: one check whose error a probe localised to a stage; rms_norm: a catalogued mistake."""
    return submission("fay", [
        check("layer_norm", "test_layer_norm_matches_reference", 0.0, 12.0, output="off in 40 of 40 entries",
              diagnoses=(STAGE,), hints=(STAGE_HINT,), stages=(STAGE,)),
        check("rms_norm", "test_rms_norm_matches_reference", 0.0, 5.0, output="off in 8 of 40 entries",
              diagnoses=(KNOWN,), hints=(KNOWN_HINT,)),
    ])


def test_a_probes_guess_is_headed_as_where_it_first_goes_wrong_not_as_recognised():
    """Is a stage a probe localised the error to headed "Where it first goes wrong", while a catalogued
    mistake reproduced exactly keeps "Recognised misconception"?"""
    shown = squash(read(staged_result()).on_screen)
    assert "Where it first goes wrong: Statistics across tokens" in shown
    assert "Recognised misconception: Statistics across tokens" not in shown
    assert "Recognised misconception: Unbiased variance" in shown
    assert squash(STAGE_HINT) in shown and squash(KNOWN_HINT) in shown


def test_a_check_partly_not_graded_counts_its_cases_beside_its_points():
    """When some cases of a check passed and the others could not be graded, does its badge count the cases
    not graded (not a bare "Not graded" beside points earned); and a group of such checks say where its points
    came from?"""
    why = "Not graded: this check needs your layer_norm, which fails on these inputs."
    one = submission("gil", [
        check("pre_ln_block", f"test_pre_ln_block_matches_reference[{case}]", score, 2.0,
              status="passed" if score else "not_graded", output="" if score else why)
        for case, score in (("a", 2.0), ("b", 0.0), ("c", 2.0))])
    shown = squash(read(one).on_screen)
    assert "1 of 3 cases not graded" in shown and "4 / 6 points" in shown
    two = submission("gil", [
        check("pre_ln_block", f"test_pre_ln_block_{name}[{case}]", score, 2.0,
              status="passed" if score else "not_graded", output="" if score else why)
        for name in ("matches_reference", "with_causal_mask_matches_reference")
        for case, score in (("a", 2.0), ("b", 0.0))])
    shown = squash(read(two).on_screen)
    assert "2 checks could not be graded in full, for one reason" in shown, shown
    assert "Partly graded 4 / 8 points (from the cases that passed)" in shown, shown
    assert "Not graded 4 / 8" not in shown and "(no points)" not in shown, shown   # the overview and total as well
    assert "4. pre_ln_block 4 / 8 2 not graded in full" in shown, shown
    assert "0 of 2 checks passed. 2 could not be graded in full." in shown, shown


def test_checks_not_graded_in_any_case_keep_their_no_points_wording():
    """A group of checks none of whose cases were graded: is it still "Not graded" and "(no points)", the
    partly graded wording kept for checks that earned points?"""
    why = "Not graded: this check needs your layer_norm, which fails on these inputs."
    none = submission("gil", [check("pre_ln_block", f"test_pre_ln_block_{name}[a]", 0.0, 2.0, status="not_graded",
                                    output=why) for name in ("matches_reference", "keeps_float32")])
    shown = squash(read(none).on_screen)
    assert "2 checks could not be graded, for one reason Not graded 0 / 4 points" in shown, shown
    assert "4. pre_ln_block 0 / 4 2 not graded (no points)" in shown, shown
    assert "2 could not be graded (no points)." in shown and "Partly graded" not in shown, shown


def test_folded_cases_are_summed_up_by_what_became_of_them():
    """Beyond the first two cases of a check, are the folded ones summed up as what they were (not graded,
    failed, or each counted when mixed), never as cases that merely "did not pass"?"""
    why = "Not graded: this check needs your split_heads, which fails on these inputs."
    not_graded = submission("ivy", [
        check("multi_head_attention", f"test_multi_head_attention_matches_reference[{case}]", 0.0, 1.0,
              status="not_graded", output=f"{why} ({case})") for case in "abcde"])
    page = read(not_graded)
    assert "3 more cases not graded" in squash(page.on_screen), page.on_screen
    failed = submission("ivy", [
        check("multi_head_attention", f"test_multi_head_attention_matches_reference[{case}]", 0.0, 1.0,
              output=f"off in {n} entries") for n, case in enumerate("abc")])
    assert "1 more case that failed" in squash(read(failed).on_screen)
    mixed = submission("ivy", [
        check("multi_head_attention", f"test_multi_head_attention_matches_reference[{case}]", 0.0, 1.0,
              output=f"off in {n} entries") for n, case in enumerate("abc")] + [
        check("multi_head_attention", f"test_multi_head_attention_matches_reference[{case}]", 0.0, 1.0,
              status="not_graded", output=f"{why} ({case})") for case in "de"])
    shown = squash(read(mixed).on_screen)
    assert "3 more cases: 1 failed, 2 not graded" in shown, shown
    for page_text in (page.on_screen, shown):
        assert "did not pass" not in page_text


def test_backticks_in_a_checks_question_show_as_code():
    """Is a check's question with `backticked` code shown with the code set as code, not with raw backticks?"""
    page = render_feedback(submission("hal", [
        check("pre_ln_block", "test_pre_ln_block_leaves_inputs_unchanged", 0.0, 0.0, status="failed",
              description="Does pre_ln_block leave x untouched (no `x += ...`)?", output="it modified x")]))
    assert "<code>x += ...</code>" in page and "`x +=" not in page


def test_right_to_left_student_text_is_isolated_so_the_words_around_it_keep_their_order():
    """A message, a note and a student id holding Arabic and Hebrew: is each run of right-to-left
    words put in <bdi> (so the browser does not move the English words beside it), code included,
    while text with none gets no <bdi>?"""
    rtl = "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd"
    message = f"`layer_norm` raised RuntimeError: {rtl} 42 (at line 3: `print('\u05e9\u05dc\u05d5\u05dd')`)"
    result = submission("\u05e9\u05e8\u05d4", [check("layer_norm", "test_layer_norm_a", 0.0, 15.0, output=message)],
                        notes=(f"transformer-block.ipynb: The 2nd code cell (`x = 1`) raised ValueError: {rtl}",))
    html = render_feedback(result)
    assert html.count(f"RuntimeError: <bdi>{rtl}</bdi> 42 (at line 3: ") == 1
    assert f"raised ValueError: <bdi>{rtl}</bdi>" in html
    assert "print(&#39;<bdi>\u05e9\u05dc\u05d5\u05dd</bdi>&#39;)" in html
    assert "<strong><bdi>\u05e9\u05e8\u05d4</bdi></strong>" in html
    assert str(rich("plain English, no RTL")) == "plain English, no RTL"
