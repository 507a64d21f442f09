"""The graders judge what students really write fairly: a function that is not SiLU earns none of
silu's large-input points while SiLU in any correct form earns them all; a mask applied as float64
numbers is caught in float32; a norm computed in float32 is named for that, not for a stage it never
got wrong; a block's own mistake is named even when the layer_norm or attention it calls is wrong too,
and so is an attention's on wrong split_heads or merge_heads and a SwiGLU's on a wrong silu (and an
attention's property that only its wrong split_heads breaks is not charged to it);
a block that gives its LayerNorms eps = 1e-6 is named for it, and only the float64 checks see it.

No sandbox here: the release notebook's setup cell and the solutions, with the student's cell last,
run in-process (`InProcessStudent` of test_seed_independence), and the real graders run against it.
"""
from __future__ import annotations

import contextlib
import io
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from assignments.transformer_block import reference as ref
from assignments.transformer_block.graders._inputs import CASE_LIST
from autograder.config import load_course
from autograder.grading.diagnosis import LOWER_PRECISION
from autograder.grading.engine import score
from autograder.grading.session import GraderSession

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import graders_session  # noqa: E402
from submissions import (  # noqa: E402
    LN_FLOAT32,
    MHA_MASK_UPCAST,
    MISTAKE_FORMS,
    NOTEBOOK,
    SILU_RELU,
    Form,
    form_cell,
    mistake_cell,
    release_notebook,
    solution_code,
)
from test_seed_independence import InProcessStudent  # noqa: E402

with warnings.catch_warnings():      # the graders' `points` mark is registered by the grading plugin only
    warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
    from assignments.transformer_block.graders import test_count_block_params as count_graders
    from assignments.transformer_block.graders import test_pre_ln_block as block_graders

session = graders_session.fixture()
SEEDS = (17, 1_000_020)
ASSIGNMENT = load_course(ROOT).assignment("transformer-block")

SILU_IN_OTHER_CORRECT_FORMS = {
    "tanh": "def silu(x):\n    return x * 0.5 * (1.0 + np.tanh(0.5 * x))\n",
    "logaddexp": "def silu(x):\n    return x * np.exp(-np.logaddexp(0.0, -x))\n",
    "where_of_two_sigmoids": (
        "def silu(x):\n"
        "    with np.errstate(over='ignore', invalid='ignore'):\n"
        "        return np.where(x >= 0, x / (1.0 + np.exp(-x)), x * np.exp(x) / (1.0 + np.exp(x)))\n"),
    "clipped_exp": "def silu(x):\n    return x / (1.0 + np.exp(-np.clip(x, -500.0, 500.0)))\n",
}

NOT_SILU = {
    "relu": SILU_RELU,
    "gelu": "def silu(x):\n    return gelu(x)\n",
}

NORMS_IN_FLOAT32 = {
    "layer_norm_astype": ("layer_norm", LN_FLOAT32),
    "layer_norm_np_float32": ("layer_norm", (
        "def layer_norm(x, gamma, beta, eps=1e-5):\n"
        "    x = np.float32(x)\n"
        "    centred = x - x.mean(axis=-1, keepdims=True)\n"
        "    return gamma * centred / np.sqrt(np.mean(centred ** 2, axis=-1, keepdims=True) + eps) + beta\n")),
    "rms_norm_astype": ("rms_norm", (
        "def rms_norm(x, gamma, eps=1e-6):\n"
        "    x = x.astype(np.float32)\n"
        "    return gamma * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)\n")),
}


def _namespace(*cells: str) -> dict[str, Any]:
    """The notebook's globals after its setup cell, the solutions and then `cells`."""
    setup = next(c for c in release_notebook().cells if c.cell_type == "code")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):
        for source in (setup.source, *solution_code().values(), *cells):
            exec(compile(source, "<cell>", "exec"), namespace)
    return namespace


def _checks(session: GraderSession, seed: int, *cells: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each graded check (worth points): its status and the mistakes it names."""
    run = session.run({NOTEBOOK: InProcessStudent(_namespace(*cells))}, seed)
    assert not run.broken
    return {c.name.split("::")[1]: (c.status, c.diagnoses) for c in run.checks if c.weight > 0}


def _failed(checks: dict[str, tuple[str, tuple[str, ...]]], problem: str) -> dict[str, tuple[str, ...]]:
    return {name: diagnoses for name, (status, diagnoses) in checks.items()
            if status != "passed" and name.startswith(f"test_{problem}_")}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("form", SILU_IN_OTHER_CORRECT_FORMS, ids=list(SILU_IN_OTHER_CORRECT_FORMS))
def test_silu_in_another_correct_form_earns_every_silu_point(session, form, seed):
    """Does SiLU written another correct way (tanh, logaddexp, np.where of the two sigmoids, a clipped
    exp) pass every graded silu check, the large-input ones included?"""
    assert _failed(_checks(session, seed, SILU_IN_OTHER_CORRECT_FORMS[form]), "silu") == {}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("form", NOT_SILU, ids=list(NOT_SILU))
def test_a_silu_that_is_relu_or_gelu_earns_none_of_the_large_input_points(session, form, seed):
    """ReLU and GELU agree with SiLU to machine precision from |x| = 50 on: does a silu that is one of
    them still fail both large-input checks (and every other graded silu check)?"""
    failed = _failed(_checks(session, seed, NOT_SILU[form]), "silu")
    assert {"test_silu_survives_large_inputs[float64]", "test_silu_survives_large_inputs[float32]"} <= set(failed)
    assert len(failed) == 6, failed


def _split_heads_raising(statement: str) -> str:
    """The solution's split_heads with its divisibility check's raise replaced by `statement` ('' for no check)."""
    code = solution_code()["split_heads"]
    condition = "if n_heads < 1 or d_model % n_heads != 0:\n        "
    check = (condition + 'raise ValueError(f"d_model = {d_model} cannot be split into n_heads = {n_heads} '
             'equal heads")\n    ')
    assert code.count(check) == 1
    return code.replace(check, f"{condition}{statement}\n    " if statement else "")


_ERROR_TYPE = "test_split_heads_rejects_width_not_divisible_by_heads[{}]"
_ERROR_MESSAGE = "test_split_heads_error_names_the_problem"
_NO_VALUE_ERROR = ("split_heads.no_value_error",)
_UNCLEAR = ("split_heads.unclear_value_error",)
_WRONG_TYPE = {_ERROR_TYPE.format("d10_h3"): _NO_VALUE_ERROR, _ERROR_TYPE.format("batch_axes_d12_h5"): _NO_VALUE_ERROR}

SPLIT_HEADS_ERRORS = {      # name: (the raise, the split_heads checks that fail with what they name)
    "numbers": ('raise ValueError(f"cannot split {d_model} features into {n_heads} heads")', {}),
    "divisible": ('raise ValueError("d_model must be divisible by n_heads")', {}),
    "multiple": ('raise ValueError("the width is not a Multiple of the number of heads")', {}),
    "reshape_error": ("", {_ERROR_MESSAGE: _UNCLEAR}),
    "vague": ('raise ValueError("bad input")', {_ERROR_MESSAGE: _UNCLEAR}),
    "assert": ('assert False, "d_model must be divisible by n_heads"', _WRONG_TYPE),
    "assert_with_the_numbers": ('assert False, f"{d_model} % {n_heads} != 0"', _WRONG_TYPE),
    "bare_assert": ("assert False", {**_WRONG_TYPE, _ERROR_MESSAGE: _UNCLEAR}),
    "type_error": ('raise TypeError("d_model must be divisible by n_heads")', {**_WRONG_TYPE,
                                                                              _ERROR_MESSAGE: _NO_VALUE_ERROR}),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", SPLIT_HEADS_ERRORS, ids=list(SPLIT_HEADS_ERRORS))
def test_split_heads_error_is_judged_by_its_type_and_by_what_its_message_says(session, name, seed):
    """A ValueError giving both sizes or speaking of divisibility passes every split_heads check; numpy's own
    reshape error or a vague message fails only the message check, named as unclear; an assert (AssertionError)
    fails the type checks, named as no ValueError, and the message check too only when its message is unclear;
    another type (TypeError) fails all three, named as no ValueError."""
    statement, failing = SPLIT_HEADS_ERRORS[name]
    assert _failed(_checks(session, seed, _split_heads_raising(statement)), "split_heads") == failing


SPLIT_HEADS_POINTS = {      # the student: (the raise, the points of the error's 3.5 they earn)
    "no_check": ("", 1.0),
    "assert_with_a_clear_message": ('assert False, "d_model must be divisible by n_heads"', 2.5),
    "value_error_with_a_clear_message": ('raise ValueError(f"cannot split {d_model} features into {n_heads} heads")',
                                         3.5),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("who", SPLIT_HEADS_POINTS, ids=list(SPLIT_HEADS_POINTS))
def test_split_heads_error_points_follow_what_the_student_wrote(session, who, seed):
    """Of the 3.5 points of split_heads's error: does a split_heads without a check (numpy's reshape raises a
    ValueError that says nothing of the cause) earn the type's 1 only, an assert with a clear message the
    message's 2.5 only, and a ValueError with a clear message all 3.5, every other split_heads check passing?"""
    statement, points = SPLIT_HEADS_POINTS[who]
    run = session.run({NOTEBOOK: InProcessStudent(_namespace(_split_heads_raising(statement)))}, seed)
    tests = [t for t in score(run, ASSIGNMENT).tests if t.problem == "split_heads"]
    error = [t for t in tests if t.name.split("::")[1].startswith((_ERROR_TYPE.split("[")[0], _ERROR_MESSAGE))]
    assert len(error) == 3 and sum(t.max_score for t in error) == pytest.approx(3.5)
    assert sum(t.score for t in error) == pytest.approx(points)
    assert all(t.score == t.max_score for t in tests if t not in error)


def _split_heads_feedback(session: GraderSession, statement: str) -> dict[str, tuple[str, str]]:
    """split_heads's graded checks that did not pass with `statement` for its raise: their message and hints."""
    run = session.run({NOTEBOOK: InProcessStudent(_namespace(_split_heads_raising(statement)))}, SEEDS[0])
    return {c.name.split("::")[1]: (c.output, " ".join(" ".join(c.hints).split())) for c in run.checks
            if c.problem == "split_heads" and c.weight > 0 and c.status != "passed"}


def test_split_heads_error_feedback_tells_each_student_what_is_wrong(session):
    """Without a check, is a student told that numpy's reshape error does not say what is wrong; with an assert
    (clear message), that the error must be a ValueError raised, not an assert?"""
    no_check = _split_heads_feedback(session, "")
    assert list(no_check) == [_ERROR_MESSAGE], no_check
    output, hints = no_check[_ERROR_MESSAGE]
    assert "raised numpy's own reshape error" in output and "not what is wrong" in output, output
    assert "numpy's reshape error" in hints and "Check d_model % n_heads" in hints, hints
    asserted = _split_heads_feedback(session, 'assert False, "d_model must be divisible by n_heads"')
    assert set(asserted) == set(_WRONG_TYPE), asserted
    for output, hints in asserted.values():
        assert output.endswith("raised AssertionError; expected ValueError."), output
        assert "raise ValueError, not assert" in hints, hints


def _split_heads_error_points(session: GraderSession, cell: str, seed: int) -> tuple[float, dict[str, str]]:
    """The points of split_heads's error (of 3.5) that `cell` earns, and the output of each error check it fails."""
    run = session.run({NOTEBOOK: InProcessStudent(_namespace(cell))}, seed)
    error = [t for t in score(run, ASSIGNMENT).tests if t.problem == "split_heads"
             and t.name.split("::")[1].startswith((_ERROR_TYPE.split("[")[0], _ERROR_MESSAGE))]
    assert len(error) == 3 and sum(t.max_score for t in error) == pytest.approx(3.5)
    outputs = {c.name.split("::")[1]: c.output for c in run.checks if c.problem == "split_heads" and c.weight > 0
               and c.status != "passed"}
    return sum(t.score for t in error), {name: outputs[name] for name in outputs
                                         if name.startswith((_ERROR_TYPE.split("[")[0], _ERROR_MESSAGE))}


_CLEAR_RAISE = 'raise ValueError(f"d_model = {d_model} must be divisible by n_heads = {n_heads}")'
SPLITS_AND_ERRORS = {      # name: (split_heads's cell, the points of the error's 3.5 it earns)
    "raises_only_when_not_divisible": (_split_heads_raising(_CLEAR_RAISE), 3.5),
    "wrong_split_raising_only_when_not_divisible": (mistake_cell("split_heads.reshape_without_transpose")[1], 3.5),
    "raises_whatever_it_is_given": (f"def split_heads(x, n_heads):\n    d_model = x.shape[-1]\n"
                                    f"    {_CLEAR_RAISE}\n", 0.0),
    "checks_but_returns_nothing": (solution_code()["split_heads"].split("    d_k = d_model // n_heads")[0], 0.0),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", SPLITS_AND_ERRORS, ids=list(SPLITS_AND_ERRORS))
def test_split_heads_error_points_go_only_with_a_split(session, name, seed):
    """Does a split_heads that raises a clear ValueError on every width, the ones n_heads divides too, or that
    checks the width and then gives nothing, earn none of the error's 3.5 points, each failed check saying why;
    while one raising only when n_heads does not divide the width earns them all, even with its heads in the
    wrong order?"""
    cell, points = SPLITS_AND_ERRORS[name]
    earned, failed = _split_heads_error_points(session, cell, seed)
    assert earned == pytest.approx(points), failed
    assert len(failed) == (0 if points else 3), failed
    for output in failed.values():
        assert "a width that n_heads divides" in output, output
        assert ("it raised on a valid input" in output) == (name == "raises_whatever_it_is_given"), output


@pytest.mark.parametrize("seed", SEEDS)
def test_silu_before_the_gate_projection_is_named_for_it(session, seed):
    """A SwiGLU that applies silu to x before the gate projection (silu(x) @ W_gate): do its value checks fail,
    and does every swiglu_ffn check it fails name swiglu_ffn.silu_before_gate_projection, and nothing else?"""
    failed = _failed(_checks(session, seed, mistake_cell("swiglu_ffn.silu_before_gate_projection")[1]), "swiglu_ffn")
    assert {name for name in failed if name.startswith("test_swiglu_ffn_matches_reference[")}, failed
    assert set(failed.values()) == {("swiglu_ffn.silu_before_gate_projection",)}, failed


@pytest.mark.parametrize("seed", SEEDS)
def test_a_mask_applied_as_float64_numbers_fails_the_masked_float32_check_only(session, seed):
    """`scores + (1 - mask) * -1e9` with the documented boolean mask makes float32 scores float64: does
    exactly multi_head_attention's masked float32 check fail, naming the upcast, and pre_ln_block (which
    only passes the mask on) lose nothing?"""
    checks = _checks(session, seed, MHA_MASK_UPCAST)
    failed = {name: diagnoses for name, (status, diagnoses) in checks.items() if status != "passed"}
    assert failed == {"test_multi_head_attention_keeps_float32[causal_mask]": ("general.float32_upcast",)}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("form", NORMS_IN_FLOAT32, ids=list(NORMS_IN_FLOAT32))
def test_a_norm_computed_in_float32_is_named_for_that_and_for_no_stage(session, form, seed):
    """A norm that casts float64 x to float32 (its result float64 again through gamma) trips the probes'
    first precise property: is every check it fails named as computed in lower precision, and only that?"""
    problem, code = NORMS_IN_FLOAT32[form]
    failed = _failed(_checks(session, seed, code), problem)
    assert failed and set(failed.values()) == {(LOWER_PRECISION,)}, failed


def test_small_float64_mistakes_are_not_taken_for_lower_precision(session):
    """An error of float32's size made in float64 (eps doubled, eps left out) is not a lower precision:
    is it still named as its catalogued mistake or stage?"""
    doubled = solution_code()["layer_norm"].replace("np.sqrt(var + eps)", "np.sqrt(var + 2 * eps)")
    failed = _failed(_checks(session, SEEDS[0], doubled), "layer_norm")
    assert failed and all(LOWER_PRECISION not in d and d for d in failed.values()), failed
    failed = _failed(_checks(session, SEEDS[0], mistake_cell("layer_norm.no_eps")[1]), "layer_norm")
    assert failed and set(failed.values()) == {("layer_norm.no_eps",)}, failed


@pytest.mark.parametrize("mistake_id", sorted(set(MISTAKE_FORMS) - {LOWER_PRECISION}))
def test_no_catalogued_mistake_is_taken_for_lower_precision(session, mistake_id):
    """Is every other catalogued mistake's student form, computed in float64, never named as lower precision?"""
    checks = _checks(session, SEEDS[0], mistake_cell(mistake_id)[1])
    assert not [name for name, (_, diagnoses) in checks.items() if LOWER_PRECISION in diagnoses]


def test_the_correct_notebook_names_nothing(session):
    """Does the solution pass every graded check on both seeds, naming no mistake?"""
    for seed in SEEDS:
        assert set(_checks(session, seed).values()) == {("passed", ())}


PLACEHOLDERS = {
    "mha_zeros": ("multi_head_attention", "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):\n"
                                          "    return np.zeros_like(x)\n"),
    "mha_input": ("multi_head_attention", "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):\n"
                                          "    return x.copy()\n"),
    "swiglu_zeros": ("swiglu_ffn", "def swiglu_ffn(x, W_gate, W_up, W_down):\n    return np.zeros_like(x)\n"),
    # code that ignores the computation the property is about (QA): a multiple of x, an array of booleans,
    # unsigned or complex numbers, a row shared by every token, tokens that never meet, no gate,
    # no sublayer
    "mha_twice_input": ("multi_head_attention", "multi_head_attention = lambda x, *args, **kwargs: 2.0 * x\n"),
    "mha_bool": ("multi_head_attention", "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):\n"
                                         "    return np.ones(x.shape, dtype=bool)\n"),
    "mha_uint64": ("multi_head_attention", "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):\n"
                                           "    return np.full(x.shape, 3, dtype=np.uint64)\n"),
    "mha_complex": ("multi_head_attention", "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):\n"
                                            "    return x * 1j\n"),
    "mha_one_row": ("multi_head_attention", "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):\n"
                                            "    return np.broadcast_to(W_O[0], x.shape).astype(x.dtype)\n"),
    "mha_no_mixing": ("multi_head_attention", "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):\n"
                                              "    return 2.0 * (x @ W_V @ W_O)\n"),
    "layer_norm_fixed_pattern": ("layer_norm", (
        "def layer_norm(x, gamma, beta, eps=1e-5):\n"
        "    signs = np.where(np.arange(x.shape[-1]) % 2 == 0, 1.0, -1.0)\n"
        "    return np.broadcast_to(signs * gamma + beta, x.shape).astype(x.dtype)\n")),
    "swiglu_without_gate": ("swiglu_ffn", "def swiglu_ffn(x, W_gate, W_up, W_down):\n    return x @ W_up @ W_down\n"),
    "block_input": ("pre_ln_block", "def pre_ln_block(x, params, n_heads, mask=None):\n    return x\n"),
    "count_zero": ("count_block_params",
                   "def count_block_params(d_model, d_ff, ffn, norm='layernorm'):\n    return 0\n"),
    "count_constant": ("count_block_params",
                       "def count_block_params(d_model, d_ff, ffn, norm='layernorm'):\n    return 70_000\n"),
    # rejects every name, the allowed ones too: it holds the unknown-name check trivially
    "count_value_error": ("count_block_params", "def count_block_params(d_model, d_ff, ffn, norm='layernorm'):\n"
                                                "    raise ValueError(f'unknown ffn {ffn!r}')\n"),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("form", PLACEHOLDERS, ids=list(PLACEHOLDERS))
def test_a_placeholder_earns_no_point_of_a_property_it_holds_trivially(session, form, seed):
    """Does a placeholder that returns zeros or its input (unchanged by reordering the tokens, by later
    tokens under a causal mask, by doubling W_up), or other code that ignores the computation a property
    check is about, fail every graded check of its problem?"""
    problem, cell = PLACEHOLDERS[form]
    checks = _checks(session, seed, cell)
    graded = [name for name in checks if name.startswith(f"test_{problem}_")]
    assert graded and set(_failed(checks, problem)) == set(graded)


# --------------------------------------------------------------------------- the block on wrong building blocks
# A student's pre_ln_block calls their own layer_norm and multi_head_attention: when one of those is wrong
# too, the block's catalogued variants are run on the student's own (Expect._match_on_own_blocks).

BLOCK_MISTAKES = sorted(m for m, form in MISTAKE_FORMS.items() if form.function == "pre_ln_block")
# Wrong building blocks under a block: every catalogued layer_norm mistake but the one that modifies x in
# place (its caller's output shows it, and the caller is charged: tests/tools/test_public_checks.py), and
# a few of multi_head_attention's (masking, scale, heads).
WRONG_BLOCKS = sorted([m for m, form in MISTAKE_FORMS.items()
                       if form.function == "layer_norm" and m != "general.mutates_input"]
                      + ["multi_head_attention.mask_ignored", "multi_head_attention.missing_scale",
                         "multi_head_attention.reshape_without_transpose"])


def _named_in_block(session: GraderSession, seed: int, *cells: str) -> tuple[dict[str, tuple[str, ...]], set[str]]:
    """pre_ln_block's graded checks that did not pass (with what they name), and every id they name."""
    failed = _failed(_checks(session, seed, *cells), "pre_ln_block")
    return failed, {d for diagnoses in failed.values() for d in diagnoses}


@pytest.mark.parametrize("wrong", WRONG_BLOCKS)
def test_a_post_ln_block_on_a_wrong_building_block_is_named_post_ln(session, wrong):
    """A Post-LN block calling a wrong layer_norm (the sample variance, eps outside the root, ...) or a wrong
    multi_head_attention: is every pre_ln_block check it fails named Post-LN, and nothing else (no stage
    such as the residual path, which only the wrong building block made fail)?"""
    failed, named = _named_in_block(session, SEEDS[0], mistake_cell(wrong)[1], mistake_cell("pre_ln_block.post_ln")[1])
    assert failed and named == {"pre_ln_block.post_ln"}, failed
    assert all(failed.values()), failed


@pytest.mark.parametrize("mistake_id", BLOCK_MISTAKES)
@pytest.mark.parametrize("wrong", ["layer_norm.unbiased_variance", "multi_head_attention.missing_scale"])
def test_each_block_mistake_on_a_wrong_building_block_is_named_as_itself(session, mistake_id, wrong):
    """Is each catalogued block mistake, on a layer_norm with the sample variance or an attention without
    its scale, named as itself by every pre_ln_block check it fails, and no other mistake or stage?"""
    failed, named = _named_in_block(session, SEEDS[0], mistake_cell(wrong)[1], mistake_cell(mistake_id)[1])
    assert failed and named == {mistake_id}, failed
    assert all(failed.values()), failed


@pytest.mark.parametrize("wrong", WRONG_BLOCKS)
def test_a_right_block_on_a_wrong_building_block_is_charged_nothing(session, wrong):
    """Does a correctly wired block on a wrong layer_norm or attention pass every pre_ln_block check, with
    nothing named (the running of variants on the student's blocks finds no mistake where there is none)?"""
    assert _named_in_block(session, SEEDS[0], mistake_cell(wrong)[1]) == ({}, set())


@pytest.mark.parametrize("seed", SEEDS)
def test_a_block_giving_its_layer_norms_eps_1e_6_is_named_for_it_in_the_float64_checks(session, seed):
    """A block passing eps=1e-6 to its LayerNorms: does every pre_ln_block check it fails name that, the
    float32 check and the residual-path check (where eps cannot show) pass, and nothing else lose points?"""
    checks = _checks(session, seed, mistake_cell("pre_ln_block.smaller_layer_norm_eps")[1])
    failed = {name: diagnoses for name, (status, diagnoses) in checks.items() if status != "passed"}
    assert set(failed.values()) == {("pre_ln_block.smaller_layer_norm_eps",)}, failed
    assert set(failed) == {name for name in checks if name.startswith("test_pre_ln_block_")} - {
        "test_pre_ln_block_keeps_float32", "test_pre_ln_block_is_identity_when_sublayers_output_zero"}


def test_the_float32_check_of_the_block_cannot_see_the_layer_norms_eps():
    """On the float32 check's inputs, drawn 2000 times, does the block with its LayerNorms' eps 1e-6 (or
    none at all) stay within half the float32 tolerance of the reference, so that it passes that check on
    every student's inputs alike (with the spread of ordinary tokens it failed on about 15% of draws)?"""
    tol = {"rtol": 2e-4, "atol": 2e-5}         # course.yml: pre_ln_block's float32 tolerance
    worst = 0.0
    for seed in range(2000):
        x, params, h, mask = block_graders._args(ref, np.random.default_rng(seed), CASE_LIST[4], 64, np.float32,
                                                 masked=True, spread=(2.0, 3.0))
        expected = ref.pre_ln_block(x, params, h, mask).astype(np.float64)
        for eps in (1e-6, 0.0):
            out = ref.pre_ln_block(x, params, h, mask, layer_norm=lambda z, g, b, eps=eps: ref.layer_norm(z, g, b, eps))
            worst = max(worst, float(np.max(np.abs(out - expected) / (tol["atol"] + tol["rtol"] * np.abs(expected)))))
    assert worst < 0.5, worst


# --------------------------------------------------------------------------- attention, SwiGLU on wrong blocks
# The same for the other two composites: a student's multi_head_attention calls their own split_heads and
# merge_heads, their swiglu_ffn their own silu (softmax and gelu are given in the setup cell). A mistake of
# the composite's own, on a wrong building block, is named as itself, not as a stage the block made fail.

WRONG_HEADS = ["merge_heads.interleaved_features", "merge_heads.reshape_without_transpose",
               "split_heads.interleaved_features", "split_heads.reshape_without_transpose"]
# Attention's mistakes that leave the cutting and joining of heads to split_heads and merge_heads.
ATTENTION_ON_HEADS = ["multi_head_attention.mask_after_softmax", "multi_head_attention.mask_ignored",
                      "multi_head_attention.mask_inverted", "multi_head_attention.missing_output_projection",
                      "multi_head_attention.missing_scale", "multi_head_attention.scale_by_d_k",
                      "multi_head_attention.scale_by_d_model", "multi_head_attention.scale_by_sqrt_d_model",
                      "multi_head_attention.softmax_wrong_axis", "multi_head_attention.weights_transposed",
                      "multi_head_attention.only_q_k_v_transposed"]
# Attention's mistakes that cut or join the heads by a plain reshape of their own, calling the student's
# other heads function, here wrong in another way. (With that one wrong by a plain reshape too, the
# attention is the catalogued reshape both ways as written, and is named so.)
ATTENTION_ON_ONE_HEADS_FUNCTION = [
    ("multi_head_attention.reshape_without_transpose", "merge_heads.interleaved_features"),
    ("multi_head_attention.merge_without_transpose", "split_heads.interleaved_features"),
]
WRONG_SILU = ["silu.relu", "silu.sigmoid_only", "silu.sign_flipped"]
# SwiGLU's mistakes that still call silu (the others, a gate of no activation, sigmoid or gelu, do not).
SWIGLU_ON_SILU = ["swiglu_ffn.gate_on_up_branch", "swiglu_ffn.silu_after_product",
                  "swiglu_ffn.silu_before_gate_projection", "swiglu_ffn.silu_on_both_branches"]


def _named_as_on_right_blocks(session: GraderSession, problem: str, mistake_id: str, wrong: str) -> None:
    """The student forms of `mistake_id` and of the wrong building block `wrong` in one notebook: does every
    check of `problem` that fails name `mistake_id` and nothing else, or else name nothing (a check of a
    property that names nothing either with the building blocks right), and does at least one name it?"""
    failed = _failed(_checks(session, SEEDS[0], mistake_cell(wrong)[1], mistake_cell(mistake_id)[1]), problem)
    named_on_right_blocks = {name for name, diagnoses in
                             _failed(_checks(session, SEEDS[0], mistake_cell(mistake_id)[1]), problem).items()
                             if diagnoses}
    assert {d for diagnoses in failed.values() for d in diagnoses} == {mistake_id}, failed
    assert all(failed[name] for name in failed if name in named_on_right_blocks), failed


@pytest.mark.parametrize("wrong", WRONG_HEADS)
@pytest.mark.parametrize("mistake_id", ATTENTION_ON_HEADS)
def test_an_attention_mistake_on_wrong_heads_is_named_as_itself(session, mistake_id, wrong):
    """An attention without its scale, with its mask inverted, ... calling a split_heads or merge_heads that
    interleaves the features or reshapes without the transpose: is it named as that mistake, by every check
    that names it with the heads right, and nothing else (no stage such as the heads or the output projection)?"""
    _named_as_on_right_blocks(session, "multi_head_attention", mistake_id, wrong)


@pytest.mark.parametrize(("mistake_id", "wrong"), ATTENTION_ON_ONE_HEADS_FUNCTION)
def test_heads_cut_by_a_reshape_in_attention_on_the_other_wrong_heads_function_are_named_so(session, mistake_id, wrong):
    """An attention that splits (or merges) its heads by a plain reshape of its own, calling a merge_heads
    (or split_heads) that interleaves the features: is it named for its own reshape, and only that?"""
    _named_as_on_right_blocks(session, "multi_head_attention", mistake_id, wrong)


@pytest.mark.parametrize("wrong", WRONG_SILU)
@pytest.mark.parametrize("mistake_id", SWIGLU_ON_SILU)
def test_a_swiglu_mistake_on_a_wrong_silu_is_named_as_itself(session, mistake_id, wrong):
    """A SwiGLU that gates the up branch, or applies silu after the product or to both branches, calling a
    silu that is ReLU, the sigmoid alone or x * sigmoid(-x): is it named as that mistake, by every check that
    names it with silu right, and nothing else (no stage such as the gate's activation or the up branch)?"""
    _named_as_on_right_blocks(session, "swiglu_ffn", mistake_id, wrong)


# --------------------------------------------------------------------------- a property a wrong building block breaks
# A property of a composite that the reference wiring on the student's own building blocks breaks too is the
# building block's fault (charged in its own problem): the composite's property check does not charge it,
# even when the composite has a small mistake of its own (charged by the value checks).

ATTENTION_PROPERTIES = ["test_multi_head_attention_is_equivariant_to_token_order",
                        "test_multi_head_attention_causal_mask_hides_later_tokens"]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mistake_id", ["multi_head_attention.missing_scale", "multi_head_attention.scale_by_d_k"])
def test_a_property_only_a_wrong_split_heads_breaks_is_not_charged_to_attention(session, seed, mistake_id):
    """An attention without its scale (or scaled by d_k), calling a split_heads that reshapes without the
    transpose (mixing tokens): do the equivariance and causal-mask checks pass, as they do with split_heads
    right, while the value checks still fail and name the attention's own mistake?"""
    wrong = mistake_cell("split_heads.reshape_without_transpose")[1]
    checks = _checks(session, seed, wrong, mistake_cell(mistake_id)[1])
    on_right_heads = _checks(session, seed, mistake_cell(mistake_id)[1])
    assert all(on_right_heads[name][0] == "passed" for name in ATTENTION_PROPERTIES), on_right_heads
    assert {name: checks[name][0] for name in ATTENTION_PROPERTIES} == dict.fromkeys(ATTENTION_PROPERTIES, "passed")
    failed = _failed(checks, "multi_head_attention")
    assert failed and {d for diagnoses in failed.values() for d in diagnoses} == {mistake_id}, failed


def test_a_right_block_on_a_layer_norm_that_modifies_its_argument_names_the_layer_norm(session):
    """A correct pre_ln_block over a layer_norm that normalises x in place (x -= mean): its residual adds
    the normalised x, so the block's value checks fail; does each say that the student's layer_norm
    modifies its argument, with no stage (the residual path) or mistake of the block's own named?"""
    in_place = ("def layer_norm(x, gamma, beta, eps=1e-5):\n"
                "    x -= x.mean(axis=-1, keepdims=True)\n"
                "    x /= np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps)\n"
                "    return gamma * x + beta\n")
    run = session.run({NOTEBOOK: InProcessStudent(_namespace(in_place))}, SEEDS[0])
    failed = [c for c in run.checks if c.weight > 0 and c.status != "passed"]
    assert failed and {c.problem for c in failed} == {"pre_ln_block"}, [(c.name, c.status) for c in failed]
    for c in failed:
        assert "your `layer_norm` modifies its argument in place (argument)" in c.output, (c.name, c.output)
        assert not c.diagnoses and not c.stages, (c.name, c.diagnoses, c.stages)


def test_an_attention_with_its_mask_parameter_renamed_loses_points_in_its_own_problem(session):
    """Does a multi_head_attention whose `mask` parameter is renamed fail a check of its own (the mask
    given by keyword, as the released def line names it), with every other attention check passed?"""
    renamed = re.sub(r"\bmask\b", "causal_mask", solution_code()["multi_head_attention"])
    assert "causal_mask=None" in renamed
    failed = _failed(_checks(session, SEEDS[0], renamed), "multi_head_attention")
    assert list(failed) == ["test_multi_head_attention_follows_any_boolean_mask"], failed


COUNT_MISTAKES = [m for m, form in MISTAKE_FORMS.items() if form.function == "count_block_params"]


@pytest.mark.parametrize("mistake_id", COUNT_MISTAKES)
def test_a_miscount_is_not_charged_again_as_a_wrong_default_norm(session, mistake_id):
    """A count that is wrong whatever the norm (a bias forgotten, ...) but keeps norm="layernorm" as its
    default: does the check of the default pass, the miscount charged by the count checks alone?"""
    checks = _checks(session, SEEDS[0], mistake_cell(mistake_id)[1])
    assert checks["test_count_block_params_uses_layernorm_by_default"][0] == "passed"
    assert _failed(checks, "count_block_params")


def test_a_count_defaulting_to_rmsnorm_fails_the_check_of_the_default(session):
    """A right count whose norm defaults to "rmsnorm": does the check of the default (alone) fail?"""
    cell = solution_code()["count_block_params"].replace('norm="layernorm"', 'norm="rmsnorm"', 1)
    assert 'norm="rmsnorm"' in cell
    failed = _failed(_checks(session, SEEDS[0], cell), "count_block_params")
    assert list(failed) == ["test_count_block_params_uses_layernorm_by_default"], failed


@pytest.mark.parametrize("seed", SEEDS)
def test_a_constant_count_earns_only_the_figure_it_gives(session, seed):
    """A count_block_params that returns the 64-wide GELU block's 49,728 whatever it is given: does it pass the
    check of that figure alone, the check of the default norm (where 49,728 is also the answer) failing for hidden
    widths?"""
    cell = "def count_block_params(d_model, d_ff, ffn, norm='layernorm'):\n    return 49_728\n"
    run = session.run({NOTEBOOK: InProcessStudent(_namespace(cell))}, seed)
    checks = {c.name.split("::")[1]: c for c in run.checks if c.problem == "count_block_params" and c.weight > 0}
    passed = {name for name, c in checks.items() if c.status == "passed"}
    assert passed == {"test_count_block_params_matches_chapter_figures[d64_gelu_dff256]"}, passed
    default = checks["test_count_block_params_uses_layernorm_by_default"].output
    assert default.startswith("count_block_params(d_model, d_ff, 'gelu') for hidden widths is not right."), default


def test_a_wrong_count_shows_the_answer_only_where_the_notebook_prints_it(session):
    """A count off by a term: does a failure on the notebook's own call (64, 256, "gelu") show the student's
    count and the notebook's; on another public figure (512, 2048) the student's count alone; and on hidden
    widths neither (the student's count would give the widths away)?"""
    cell = "def count_block_params(d_model, d_ff, ffn, norm='layernorm'):\n    return 4 * d_model ** 2 + 7 * d_ff\n"
    run = session.run({NOTEBOOK: InProcessStudent(_namespace(cell))}, SEEDS[0])
    out = {c.name.split("::")[-1]: c.output for c in run.checks if c.problem == "count_block_params"}

    def output(name):
        return next(text for key, text in out.items() if key.endswith(name))
    assert output("[d64_gelu_dff256]").startswith(
        "count_block_params(64, 256, 'gelu', 'layernorm') returned 18,176; expected 49,728, as the notebook says."), out
    public = output("[d512_gelu_dff2048]")
    assert public.startswith("count_block_params(512, 2048, 'gelu', 'layernorm') returned 1,062,912, which is not "
                             "right."), public
    assert f"{ref.count_block_params(512, 2048, 'gelu'):,}" not in public
    hidden = output("[gelu_layernorm]")
    assert hidden.startswith("count_block_params(d_model, d_ff, 'gelu', 'layernorm') for hidden widths is not "
                             "right."), hidden
    assert "returned" not in hidden


def test_the_counts_shown_with_their_answer_are_the_ones_the_released_notebook_prints():
    """Is every call whose expected count a failure may show (`PUBLISHED`) made by the released notebook's
    public checks (through their checked_count, which calls count_block_params with the same arguments), with
    that very count written in the same cell?"""
    code = "\n".join(cell.source for cell in release_notebook().cells if cell.cell_type == "code"
                     and cell.source.startswith("# Public checks for count_block_params"))
    assert "return count_block_params(*args, **kwargs)" in code
    for d_model, d_ff, ffn, norm in count_graders.PUBLISHED:
        call = f'checked_count({d_model}, {d_ff}, "{ffn}"' + ("" if norm == "layernorm" else f', norm="{norm}"')
        assert call + ")" in code, call
        assert f" {ref.count_block_params(d_model, d_ff, ffn, norm=norm):,} = " in code, call   # "... is 49,728 = ..."


def test_the_public_checks_leave_no_names_of_their_own_in_the_notebook():
    """Run on the solution, does each of the released notebook's public-check cells pass, printing each of its
    "ok: " lines, and leave at most underscore-private names behind (its arrays and helpers kept inside a function
    of its own, such as `_check_count_block_params`), so that none can clash with a student's names, be read by
    the student's code or keep the cell in grading?"""
    checks = {cell.source.split("\n", 1)[0]: cell.source for cell in release_notebook().cells
              if cell.cell_type == "code" and cell.source.startswith("# Public checks for ")}
    assert len(checks) == len(solution_code()), list(checks)
    left_behind = {}
    for first_line, code in checks.items():
        namespace = _namespace()
        before = set(namespace)
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            exec(compile(code, "<cell>", "exec"), namespace)
        oks = len(re.findall(r'print\(f?"ok: ', code))
        assert oks and printed.getvalue().count("ok: ") == oks, (first_line, printed.getvalue())
        left = set(namespace) - before
        if not left or not all(name.startswith("_") for name in left):
            left_behind[first_line] = sorted(left)
    assert not left_behind, left_behind


NORM_DEFAULTS = {
    "layer_norm_default_1e_6": ("layer_norm", "eps=1e-5)", "eps=1e-6)"),
    "layer_norm_default_1e_8": ("layer_norm", "eps=1e-5)", "eps=1e-8)"),
    "rms_norm_default_1e_5": ("rms_norm", "eps=1e-6)", "eps=1e-5)"),
    "rms_norm_default_0": ("rms_norm", "eps=1e-6)", "eps=0.0)"),
}


@pytest.mark.parametrize("form", NORM_DEFAULTS, ids=list(NORM_DEFAULTS))
def test_a_norm_right_but_for_the_default_of_its_eps_is_named_for_that_default(session, form):
    """A norm right whenever eps is passed but whose def line gives eps another default: does every check it
    fails name `<norm>.default_eps` alone (never the eps stage, which is right), and does it fail some?"""
    function, old, new = NORM_DEFAULTS[form]
    cell = solution_code()[function].replace(old, new, 1)
    assert new in cell
    failed = _failed(_checks(session, SEEDS[0], cell), function)
    assert failed and set(failed.values()) == {(f"{function}.default_eps",)}, failed


@pytest.mark.parametrize("which", ["ln1", "ln2"])
def test_a_block_giving_one_layer_norm_another_eps_is_told_the_eps_may_be_it(session, which):
    """A block passing eps=1e-6 to one of its LayerNorms only: whatever its failed checks name, does every
    hint they give mention eps, so that the student can find the one wrong argument?"""
    cell = solution_code()["pre_ln_block"]
    old = f'p["{which}_gamma"], p["{which}_beta"])'
    assert old in cell
    cell = cell.replace(old, f'p["{which}_gamma"], p["{which}_beta"], eps=1e-6)', 1)
    run = session.run({NOTEBOOK: InProcessStudent(_namespace(cell))}, SEEDS[0])
    failed = [c for c in run.checks if c.weight > 0 and c.status != "passed"]
    assert failed and all(c.hints and all("eps" in hint for hint in c.hints) for c in failed), \
        [(c.name, c.diagnoses, c.hints) for c in failed]


# --------------------------------------------------------------------------- count_block_params: type and bad names
# The notebook asks for a Python int and a ValueError for an ffn or norm it does not know (QA: a count that
# asserted its names and gave a float for RMSNorm scored 8 of 8).

_NORM_TEST = """if norm not in ("layernorm", "rmsnorm"):
        raise ValueError(f"norm must be 'layernorm' or 'rmsnorm', got {norm!r}")
    """
_FFN_TEST = """if ffn not in ("gelu", "swiglu"):
        raise ValueError(f"ffn must be 'gelu' or 'swiglu', got {ffn!r}")
    """
_UNKNOWN_NAME = "test_count_block_params_rejects_an_unknown_ffn_or_norm[{}]"
_NO_VALUE_ERROR = ("count_block_params.no_value_error",)

COUNT_FORMS = {      # name: (the edits of the solution's count, its graded checks that fail with what they name)
    "asserts": (MISTAKE_FORMS["count_block_params.no_value_error"].edits,
                {_UNKNOWN_NAME.format("ffn"): _NO_VALUE_ERROR, _UNKNOWN_NAME.format("norm"): _NO_VALUE_ERROR}),
    "any_other_norm_is_rmsnorm": (((_NORM_TEST, ""),), {_UNKNOWN_NAME.format("norm"): _NO_VALUE_ERROR}),
    "names_looked_up_in_a_dict": (((_FFN_TEST, ""), (
        'per_norm = 2 * d_model if norm == "layernorm" else d_model',
        'per_norm = {"layernorm": 2 * d_model, "rmsnorm": d_model}[norm]')),
        {_UNKNOWN_NAME.format("ffn"): _NO_VALUE_ERROR}),
    "float_for_rmsnorm": ((("else d_model", "else 2 * d_model / 2"), (
        "return int(attention + 2 * per_norm + feed_forward)", "return attention + 2 * per_norm + feed_forward")),
        {"test_count_block_params_returns_an_int[swiglu_rmsnorm]": (),
         "test_count_block_params_returns_an_int[gelu_rmsnorm]": ()}),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("form", COUNT_FORMS, ids=list(COUNT_FORMS))
def test_a_count_without_its_value_error_or_its_int_fails_those_checks_only(session, form, seed):
    """A count right in its figures that asserts its names, counts any other norm as RMSNorm, looks its ffn up in a
    dictionary (KeyError) or gives a float for RMSNorm: does it fail exactly the unknown-name checks it should (named
    count_block_params.no_value_error) or the int checks of the RMSNorm kinds, and no other check?"""
    edits, failing = COUNT_FORMS[form]
    _, code = form_cell(Form("count_block_params", edits=edits), form)
    assert _failed(_checks(session, seed, code), "count_block_params") == failing


# --------------------------------------------------------------------------- pre_ln_block: one half right
# A block wrong in one half only earns the check of its other half (the notebook's "FFN off" and "attention
# off" checks), so that a one-key typo or a wrongly fed LN2 no longer costs nearly the whole problem (QA).

_ATTENTION_HALF = "test_pre_ln_block_is_attention_half_when_feed_forward_is_zero"
_FEED_FORWARD_HALF = "test_pre_ln_block_is_feed_forward_half_when_attention_output_is_zero"
_LN1 = 'layer_norm(x, p["ln1_gamma"], p["ln1_beta"])'
_LN2 = 'layer_norm(h, p["ln2_gamma"], p["ln2_beta"])'
_ATTENTION = 'h = x + multi_head_attention(attn_in,'

ONE_HALF_WRONG = {   # name: (edits of the solution's block, the half's check it passes, the half's check it fails)
    "ln2_given_ln1_beta": (((_LN2, 'layer_norm(h, p["ln2_gamma"], p["ln1_beta"])'),),
                           _ATTENTION_HALF, _FEED_FORWARD_HALF),
    "ln2_given_the_attention_output": (((_ATTENTION, "a = multi_head_attention(attn_in,"),
                                        (_LN2, 'h = x + a\n    ffn_in = layer_norm(a, p["ln2_gamma"], p["ln2_beta"])')),
                                       _ATTENTION_HALF, _FEED_FORWARD_HALF),
    "ln1_given_ln2_gamma": (((_LN1, 'layer_norm(x, p["ln2_gamma"], p["ln1_beta"])'),),
                            _FEED_FORWARD_HALF, _ATTENTION_HALF),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("form", ONE_HALF_WRONG, ids=list(ONE_HALF_WRONG))
def test_a_block_right_in_one_half_earns_that_halfs_check(session, form, seed):
    """A block with one half wrong (LN2 given LN1's beta or the attention output, LN1 given LN2's gamma): does it pass
    its right half's check and the residual path's, and fail its wrong half's check, naming what it finds there?"""
    edits, right, wrong = ONE_HALF_WRONG[form]
    _, code = form_cell(Form("pre_ln_block", edits=edits), form)
    failed = _failed(_checks(session, seed, code), "pre_ln_block")
    assert right not in failed and "test_pre_ln_block_is_identity_when_sublayers_output_zero" not in failed, failed
    assert failed.get(wrong), failed          # failed, naming a mistake or a stage
