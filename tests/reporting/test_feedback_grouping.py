"""Grouping for reading (autograder.reporting.digest): cases into checks, identical failures, note cascades."""
from __future__ import annotations

from autograder.reporting.digest import (
    case_label,
    digest_problems,
    function_name,
    group_checks,
    group_notes,
    parse_note,
)

from .conftest import check, submission
from .feedback_samples import MISSING_SPLIT, NAME_ERRORS, SYNTAX, dora_result


def numbered(tests):
    return [(f"1.{i}", t) for i, t in enumerate(tests, start=1)]


def test_case_labels_and_function_names_come_from_the_test_id():
    """Are `test_x[a_b]` and `test_y` split into function and parameters?"""
    t = check("layer_norm", "test_layer_norm_matches_reference[n5_d8]", 1.0, 1.0)
    plain = check("layer_norm", "test_layer_norm_keeps_float32", 1.0, 1.0)
    assert (function_name(t), case_label(t)) == ("test_layer_norm_matches_reference", "n5_d8")
    assert (function_name(plain), case_label(plain)) == ("test_layer_norm_keeps_float32", "")


def test_cases_of_one_grader_function_form_one_check_in_first_seen_order():
    """Do the cases of a parametrised test become one check, in the order the graders ran?"""
    tests = [check("silu", "test_b[x]", 1.0, 1.0), check("silu", "test_a", 1.0, 1.0),
             check("silu", "test_b[y]", 0.0, 1.0, output="off")]
    checks = group_checks(numbered(tests))
    assert [c.function for c in checks] == ["test_b", "test_a"]
    assert [len(c.cases) for c in checks] == [2, 1]
    assert checks[0].kind == "failed" and checks[1].kind == "passed"
    assert checks[0].score == 1.0 and checks[0].max_score == 2.0


def test_kinds_put_failure_before_not_graded_before_advice():
    """Is a check failed if any case failed, not graded if a case could not run, advice if it has no points?"""
    ng = check("pre_ln_block", "test_i[a]", 0.0, 1.0, status="not_graded", output="needs split_heads")
    failed = check("pre_ln_block", "test_i[b]", 0.0, 1.0, output="off")
    advice = check("pre_ln_block", "test_w", 0.0, 0.0, status="failed", output="a warning")
    quiet_advice = check("pre_ln_block", "test_m", 0.0, 0.0, status="passed")
    checks = {c.function: c for c in group_checks(numbered([ng, failed, advice, quiet_advice]))}
    assert checks["test_i"].kind == "failed"
    assert group_checks(numbered([ng]))[0].kind == "not_graded"
    assert checks["test_w"].kind == "advice" and checks["test_m"].kind == "passed"


def test_failed_checks_with_one_identical_message_are_grouped_where_the_first_stands():
    """Do checks that all said the same thing become one group, and checks with other messages stay apart?"""
    same = [check("split_heads", f"test_{n}", 0.0, 1.0, output=MISSING_SPLIT) for n in "abc"]
    other = check("split_heads", "test_d", 0.0, 1.0, output="shape (3, 4); expected (4, 3)")
    mixed = [check("split_heads", "test_e[p]", 0.0, 1.0, output=MISSING_SPLIT),
             check("split_heads", "test_e[q]", 0.0, 1.0, output="something else")]
    result = submission("gus", [other, *same[:2], *mixed, same[2]])
    (problem,) = [p for p in digest_problems(result) if p.name == "split_heads"]
    groups = problem.failures
    assert [[c.function for c in g.checks] for g in groups] == [["test_d"], ["test_a", "test_b", "test_c"], ["test_e"]]
    assert groups[1].same_error and groups[1].message == MISSING_SPLIT
    assert not groups[0].same_error and not groups[2].same_error


def test_problem_counts_leave_advice_out_of_graded_cases():
    """Are advice cases (no points) kept out of the graded count, and not-graded cases counted apart?"""
    problems = {p.name: p for p in digest_problems(dora_result())}
    ln, block = problems["layer_norm"], problems["pre_ln_block"]
    assert (ln.count("failed"), ln.graded_cases, ln.count("advice")) == (1, 7, 1)
    assert (block.count("failed"), block.count("not_graded"), block.count("advice")) == (1, 1, 1)
    assert problems["merge_heads"].full_marks and not problems["merge_heads"].needs_reading
    assert ln.needs_reading and ln.diagnoses[0][0] == "layer_norm.eps_outside_sqrt"


def test_a_note_keeps_its_error_without_the_place_it_happened():
    """Is the location stripped from a note, whatever the cell is called and with brackets inside code?"""
    old = parse_note("nb.ipynb: cell 28 raised NameError: name 'silu' is not defined (line 2: `out = silu(x)`)")
    new = parse_note("nb.ipynb: the 8th code cell (`out = silu(x)`) raised NameError: name 'silu' is not "
                     "defined (the 8th code cell (`out = silu(x)`), line 2: `out = silu(x`)")
    assert old.error == new.error == "NameError: name 'silu' is not defined"
    assert old.undefined == new.undefined == "silu"
    assert parse_note("Submitted 1 day after the due date").error == ""


def test_a_cascade_of_name_errors_goes_under_the_cell_that_failed_to_define_the_name():
    """Do eight NameErrors for split_heads follow the SyntaxError in the cell that defines it?"""
    magic, *rest = group_notes(dora_result().notes)
    (syntax,) = rest
    assert magic.first.startswith("transformer-block.ipynb: skipped the line magic")
    assert syntax.first == SYNTAX and syntax.undefined == "split_heads"
    assert syntax.consequences == NAME_ERRORS and syntax.repeats == ()


def test_a_name_error_without_a_failed_definition_is_its_own_group():
    """With no earlier failed cell defining the name, are the NameErrors one group of their own?"""
    notes = ["cell 3 raised ValueError: bad (line 1: `def other(x):`)"] + [
        f"cell {i} raised NameError: name 'lost' is not defined (line 1: `lost()`)" for i in (4, 5, 6)]
    first, second = group_notes(notes)
    assert first.consequences == () and second.first == notes[1] and second.repeats == tuple(notes[2:])


def test_bare_errors_are_the_same_only_when_the_same_statement_raised_them():
    """Are stub NotImplementedErrors grouped while bare asserts on different lines stay apart?"""
    stubs = [f"cell {i} raised NotImplementedError (cell {i - 1}, line 25: `raise NotImplementedError()`)"
             for i in (5, 9, 13)]
    asserts = ["cell 6 raised AssertionError (line 2: `assert f(1) == 2`)",
               "cell 10 raised AssertionError (line 2: `assert g(1) == 3`)"]
    groups = group_notes(stubs + asserts)
    assert [len(g.repeats) for g in groups] == [2, 0, 0]


def test_other_notes_are_kept_and_exact_repeats_merged():
    """Are notes that report no error kept as written, with an exact repeat folded into the first?"""
    groups = group_notes(["skipped `%time`", "late by 1 day", "skipped `%time`"])
    assert [(g.first, g.repeats) for g in groups] == [("skipped `%time`", ("skipped `%time`",)),
                                                       ("late by 1 day", ())]


def test_checks_not_graded_for_one_reason_are_grouped_and_repeated_advice_dropped():
    """Are not-graded checks with one reason grouped, and advice that only repeats a failure left out?"""
    why = "Not graded: this check needs your `multi_head_attention`, which failed on its inputs."
    raised = "`pre_ln_block` raised NotImplementedError"
    tests = [check("pre_ln_block", f"test_ng_{i}", 0.0, 1.0, status="not_graded", output=why) for i in range(3)]
    tests += [check("pre_ln_block", "test_shape", 0.0, 1.0, output=raised),
              check("pre_ln_block", "test_untouched", 0.0, 0.0, status="failed", output=raised),
              check("pre_ln_block", "test_no_warnings", 0.0, 0.0, status="failed", output="overflow in exp")]
    (problem,) = [p for p in digest_problems(submission("ivy", tests)) if p.name == "pre_ln_block"]
    (group,) = problem.not_graded
    assert group.same_error and group.message == why and len(group.checks) == 3
    assert [c.function for c in problem.advice] == ["test_no_warnings"]


def test_cells_named_by_their_first_line_link_a_cascade_too():
    """With notes that name cells "The 7th code cell (`def silu`)", is the NameError cascade still linked?"""
    notes = ["The 7th code cell (`def silu`) raised SyntaxError: invalid syntax (line 2: `return x * (1 /`)",
             "The 8th code cell (`out = silu(x)`) raised NameError: name 'silu' is not defined "
             "(line 1: `out = silu(x)`)",
             "The 10th code cell (`def swiglu_ffn`) raised NameError: name 'silu' is not defined "
             "(the 10th code cell (`def swiglu_ffn`), line 3: `gate = silu(x @ W_gate)`)"]
    (group,) = group_notes(notes)
    assert group.first == notes[0] and group.consequences == tuple(notes[1:]) and group.undefined == "silu"
