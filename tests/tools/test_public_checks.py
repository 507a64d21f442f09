"""Every catalogued mistake, written the way a student writes it and graded for real by `course
autograde`: points are lost only in the problem that holds the mistake, real grading names it, and
docs/public-checks.md (which public check catches it, what it costs) is up to date."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import public_checks  # noqa: E402
from submissions import (  # noqa: E402
    MISTAKE_FORMS,
    SILU_NAIVE,
    UNCAUGHT_ON_PURPOSE,
    Case,
    build,
    mistake_cell,
    solution_code,
)

from assignments.transformer_block.mistakes import catalogue  # noqa: E402

pytestmark = pytest.mark.slow

# A building block that modifies its argument in place changes what its caller computes, and only the
# caller's output shows it: the child's own report of the modification can be forged, so it carries
# no points, and the caller whose output is wrong loses them (its public checks catch it at the source).
CHARGED_TO_CALLERS = {"general.mutates_input": {"pre_ln_block"}}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return {row.mistake: row for row in public_checks.rows(tmp_path_factory.mktemp("mistakes"))}


def test_every_catalogued_mistake_has_a_student_form():
    """Does tools/submissions.py write every mistake of the catalogue the way a student would, and nothing else?"""
    assert set(MISTAKE_FORMS) == {m.id for m in catalogue.mistakes()}
    assert set(UNCAUGHT_ON_PURPOSE) <= set(MISTAKE_FORMS)


def test_each_mistake_costs_points_only_in_its_own_problem(rows):
    """Graded for real, does every catalogued mistake lose points only in the problem whose function holds it?"""
    wrong = {m: row.lost_elsewhere for m, row in rows.items()
             if set(row.lost_elsewhere) - CHARGED_TO_CALLERS.get(m, set())}
    assert wrong == {}
    assert all(row.lost > 0 or m in ("silu.exp_overflow",) for m, row in rows.items()), \
        [m for m, row in rows.items() if row.lost == 0]


def test_each_wrong_variant_is_named_by_real_grading(rows):
    """Does real grading name every catalogued wrong variant (whose student form loses points) by its id?"""
    unnamed = [m.id for m in catalogue.mistakes() if m.variant is not None and rows[m.id].lost > 0
               and m.id not in rows[m.id].diagnoses]
    assert unnamed == []


def test_every_mistake_of_three_points_or_more_is_caught_by_a_public_check_or_explained(rows):
    """Is every mistake costing 3 points or more caught by a public check, or is the reason written down?"""
    missed = [m for m, row in rows.items() if row.lost >= public_checks.THRESHOLD and not row.caught_by
              and m not in UNCAUGHT_ON_PURPOSE]
    assert missed == []


def test_the_table_in_docs_is_up_to_date(rows):
    """Is docs/public-checks.md what tools/public_checks.py writes today?"""
    assert public_checks.DOC.read_text() == public_checks.table(list(rows.values())), \
        "stale: run .venv/bin/python tools/public_checks.py"


def _block_failures(*edits: tuple[str, str]) -> list[tuple[str, str]]:
    """The public cells that raise for the release notebook with the solution's pre_ln_block so edited."""
    code = solution_code()["pre_ln_block"]
    for old, new in edits:
        assert old in code, old
        code = code.replace(old, new, 1)
    return public_checks.public_failures(build(Case("block", variants=(("pre_ln_block", code),))))


def test_a_block_modifying_x_is_told_so_by_its_public_checks_and_not_blamed_on_b2():
    """A right block that adds the sublayers onto x in place (h = x; h += ...): does the first message of its
    public checks name the modification of x, rather than an earlier call's changed x failing a later check?"""
    in_place_ffn = 'h += hidden @ p["W2"] + p["b2"]\n    return h\n    h + hidden'
    failures = _block_failures(("h = x + multi_head_attention(", "h = x\n    h += multi_head_attention("),
                               ("return h + hidden", in_place_ffn))
    assert [label for label, _ in failures] == ["public checks of `pre_ln_block`"], failures
    assert "changed its input x in place" in failures[0][1] and "b2" not in failures[0][1], failures


def test_a_silu_whose_exp_overflows_is_told_by_its_public_checks_that_this_costs_no_points():
    """A silu right in value whose exp overflows: does its public check say the warning is advice costing no
    points, as the hidden check does, and how to avoid it, rather than stopping on numpy's bare warning?"""
    failures = public_checks.public_failures(build(Case("silu", variants=(("silu", SILU_NAIVE),))))
    assert [label for label, _ in failures] == ["public checks of `silu`"], failures
    assert "costs no points" in failures[0][1] and "overflow" in failures[0][1], failures


def test_a_block_with_a_parameter_before_mask_is_caught_by_its_public_checks():
    """A block with an extra parameter between n_heads and mask (right when the mask is passed by name, as
    the other public calls do, wrong as the graders call it): do its public checks say to keep mask fourth?"""
    failures = _block_failures(("def pre_ln_block(x, params, n_heads, mask=None):",
                                "def pre_ln_block(x, params, n_heads, causal=False, mask=None):"))
    assert [label for label, _ in failures] == ["public checks of `pre_ln_block`"], failures
    assert "with mask fourth" in failures[0][1], failures


def test_a_split_heads_error_without_the_numbers_is_told_so_by_its_public_checks():
    """A split_heads raising ValueError with a message that names neither number: is it told (as advice, since
    the hidden tests ask only that the message say what is wrong, as "divisible" does)?"""
    code = solution_code()["split_heads"]
    old = 'f"d_model = {d_model} cannot be split into n_heads = {n_heads} equal heads"'
    assert old in code
    case = Case("split", variants=(("split_heads", code.replace(old, '"d_model must be divisible by n_heads"')),))
    failures = public_checks.public_failures(build(case))
    assert [label for label, _ in failures] == ["public checks of `split_heads`"], failures
    assert "both numbers" in failures[0][1] and "only ask that it say what is wrong" in failures[0][1], failures


def _count_failures(code: str) -> list[tuple[str, str]]:
    """The public cells that raise for the release notebook with `code` for count_block_params."""
    return public_checks.public_failures(build(Case("count", variants=(("count_block_params", code),))))


def test_a_count_whose_own_assert_fails_is_told_the_error_came_from_its_function():
    """A count that asserts d_ff == 4 * d_model and so fails on the chapter's SwiGLU figure: does its public check
    say that the error came from the student's count_block_params, naming the call and giving their message,
    instead of letting their AssertionError through as if the check itself had failed?"""
    code = solution_code()["count_block_params"]
    old = "attention = 4 * d_model * d_model"
    assert old in code
    asserting = code.replace(old, f'assert d_ff == 4 * d_model, "d_ff should be 4 * d_model"\n    {old}')
    failures = _count_failures(asserting)
    assert [label for label, _ in failures] == ["public checks of `count_block_params`"], failures
    assert failures[0][1] == ("AssertionError: count_block_params(64, 170, 'swiglu') failed inside your "
                              "count_block_params, not in these checks: it raised AssertionError: d_ff should be "
                              "4 * d_model"), failures


def test_a_count_asserting_its_names_is_told_to_raise_value_error_and_shown_its_own_message():
    """A count that asserts its ffn and norm names (AssertionError for "relu"): does its public check name the
    student's function, give the student's own message and ask for a ValueError?"""
    failures = _count_failures(mistake_cell("count_block_params.no_value_error")[1])
    assert [label for label, _ in failures] == ["public checks of `count_block_params`"], failures
    assert failures[0][1].startswith(
        "AssertionError: count_block_params(..., ffn='relu') should raise ValueError, but your count_block_params "
        "raised AssertionError: unknown ffn 'relu' (an assert raises AssertionError)"), failures


SWIGLU_MISTAKES = sorted(m for m, form in MISTAKE_FORMS.items() if form.function == "swiglu_ffn")


@pytest.mark.parametrize("mistake_id", SWIGLU_MISTAKES)
def test_every_swiglu_mistake_fails_the_visible_test_of_swiglu(mistake_id):
    """Does the visible test in swiglu_ffn's graded cell (one feature, a gate weight other than 1, so that
    silu(x) @ W_gate is not silu(x @ W_gate), nor silu(z) the sigmoid of z) fail for every catalogued swiglu_ffn
    mistake, silu applied before the gate projection included?"""
    failures = public_checks.public_failures(build(Case(mistake_id, variants=(mistake_cell(mistake_id),))))
    assert "visible test of `swiglu_ffn`" in [label for label, _ in failures], failures
