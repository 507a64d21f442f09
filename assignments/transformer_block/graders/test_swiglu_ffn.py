"""swiglu_ffn(x, W_gate, W_up, W_down): the SwiGLU feed-forward network, without biases.

    out = (silu(x @ W_gate) * (x @ W_up)) @ W_down

x is (..., n, d_model), W_gate and W_up are (d_model, d_ff), W_down is (d_ff, d_model); the result
is (..., n, d_model) in the dtype of x. Most checks run your function with the reference silu in
place of yours, so a mistake there is not charged twice; one integration check uses your own silu.
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import (
    CASE_LIST,
    expect_clean_call,
    expect_float32,
    swiglu_weights,
    tokens,
)

# (case, d_ff): the chapter's 8/3 expansion (int(8 d / 3)), a square one and a narrow one
SIZES = [(CASE_LIST[0], 21), (CASE_LIST[1], 8), (CASE_LIST[4], 42), (CASE_LIST[5], 170)]
SIZE_IDS = ["n5_d8_dff21", "one_token_dff8", "batch_axes_2x3_dff42", "n12_d64_dff170"]


@pytest.fixture
def ffn(student, ref):
    """The student's swiglu_ffn with the trusted silu."""
    return student.using(silu=ref.silu).swiglu_ffn


def _args(rng, case, d_ff, dtype=np.float64):
    return (tokens(rng, case.shape, dtype), *swiglu_weights(rng, case.d, d_ff, dtype))


def _agrees(fn, ref, expect, args, what):
    expected, out = ref.swiglu_ffn(*args), fn(*args)
    expect.shape(out, args[0].shape, what)
    expect.close(out, expected, what=what, call=("swiglu_ffn", args, {}))
    return out


@pytest.mark.points(8)
@pytest.mark.parametrize("case, d_ff", SIZES, ids=SIZE_IDS)
def test_swiglu_ffn_matches_reference(ffn, ref, expect, rng, case, d_ff):
    """Does swiglu_ffn agree with the reference for several shapes and hidden widths?"""
    _agrees(ffn, ref, expect, _args(rng, case, d_ff),
            f"swiglu_ffn on x of shape {case.shape} with d_ff={d_ff}")


@pytest.mark.points(2)
def test_swiglu_ffn_keeps_float32(ffn, ref, expect, rng):
    """Given float32 inputs, does swiglu_ffn return float32 values that agree with the reference?"""
    out = _agrees(ffn, ref, expect, _args(rng, CASE_LIST[4], 42, np.float32),
                  "swiglu_ffn on float32 inputs")
    expect_float32(expect, out, "swiglu_ffn on float32 inputs")


@pytest.mark.points(2.5)
def test_swiglu_ffn_gates_only_the_W_gate_branch(ffn, expect, rng):
    """Is silu applied to x @ W_gate only, so that doubling W_up exactly doubles the output?"""
    x, W_gate, W_up, W_down = _args(rng, CASE_LIST[0], 21)
    out = ffn(x, W_gate, W_up, W_down)
    out_doubled = ffn(x, W_gate, 2.0 * W_up, W_down)
    what = "swiglu_ffn with W_up doubled"
    expect.shape(out, x.shape, "swiglu_ffn on x of shape (5, 8)")
    expect.shape(out_doubled, x.shape, what)
    expect.close(out_doubled, 2.0 * out, what=what + " (compared with twice your output for W_up)")


@pytest.mark.points(1)
def test_swiglu_ffn_leaves_inputs_unchanged(ffn, student, expect, rng):
    """Does swiglu_ffn leave x and the weights untouched and run without numpy warnings?"""
    case = CASE_LIST[4]
    out = ffn(*_args(rng, case, 42))
    expect_clean_call(student, expect, "swiglu_ffn on ordinary inputs")
    expect.shape(out, case.shape, f"swiglu_ffn on x of shape {case.shape}")
    expect.finite(out, "swiglu_ffn on ordinary inputs")


@pytest.mark.points(1.5)
def test_swiglu_ffn_integration_with_your_own_functions(student, ref, expect, rng):
    """Using your own silu, does swiglu_ffn agree with the reference?"""
    case = CASE_LIST[4]
    _agrees(student.swiglu_ffn, ref, expect, _args(rng, case, 42),
            f"swiglu_ffn (with your own silu) on x of shape {case.shape}")
