"""swiglu_ffn(x, W_gate, W_up, W_down): the SwiGLU feed-forward network, without biases.

    out = (silu(x @ W_gate) * (x @ W_up)) @ W_down

x is (..., n, d_model), W_gate and W_up are (d_model, d_ff), W_down is (d_ff, d_model); the result
is (..., n, d_model) in the dtype of x. Every check accepts the reference's answer or the answer of
the reference wiring built from your own silu, so a mistake in silu is charged there only.
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import (
    CASE_LIST,
    expect_a_dependence,
    expect_an_answer,
    expect_clean_call,
    expect_float32,
    swiglu_weights,
    tokens,
)

# (case, d_ff): the chapter's 8/3 expansion (int(8 d / 3)), a square one and a narrow one
SIZES = [(CASE_LIST[0], 21), (CASE_LIST[1], 8), (CASE_LIST[4], 42), (CASE_LIST[5], 170)]
SIZE_IDS = ["n5_d8_dff21", "one_token_dff8", "batch_axes_2x3_dff42", "n12_d64_dff170"]


def _args(rng, case, d_ff, dtype=np.float64):
    return (tokens(rng, case.shape, dtype), *swiglu_weights(rng, case.d, d_ff, dtype))


@pytest.mark.points(8)
@pytest.mark.parametrize("case, d_ff", SIZES, ids=SIZE_IDS)
def test_swiglu_ffn_matches_reference(student, expect, rng, case, d_ff):
    """Does swiglu_ffn agree with the reference for several shapes and hidden widths?"""
    expect.matches_reference(student.swiglu_ffn, _args(rng, case, d_ff),
                             what=f"swiglu_ffn on x of shape {case.shape} with d_ff={d_ff}")


@pytest.mark.points(2)
def test_swiglu_ffn_keeps_float32(student, expect, rng):
    """Given float32 inputs, does swiglu_ffn return float32 values that agree with the reference?"""
    what = "swiglu_ffn on float32 inputs"
    out = expect.matches_reference(student.swiglu_ffn, _args(rng, CASE_LIST[4], 42, np.float32), what=what)
    with expect.excused_if_wired_right():
        expect_float32(expect, out, what)


@pytest.mark.points(2.5)
def test_swiglu_ffn_gates_only_the_W_gate_branch(student, expect, rng):
    """Is silu applied to x @ W_gate only, so that doubling W_up exactly doubles the output?"""
    x, W_gate, W_up, W_down = _args(rng, CASE_LIST[0], 21)
    out, out_doubled, out_gate = expect.call_each(student.swiglu_ffn, (x, W_gate, W_up, W_down),
                                                  (x, W_gate, 2.0 * W_up, W_down), (x, 2.0 * W_gate, W_up, W_down))
    what = "swiglu_ffn with W_up doubled"
    with expect.excused_if_wired_right():
        expect.shape(out, x.shape, "swiglu_ffn on x of shape (5, 8)")
        expect.shape(out_doubled, x.shape, what)
        expect_an_answer(out, x, "swiglu_ffn on x of shape (5, 8)")
        expect_a_dependence(out, out_gate, "swiglu_ffn", "W_gate (doubled)")    # x @ W_up @ W_down is linear in W_up
        expect.close(out_doubled, 2.0 * out, what=what + " (compared with twice your output for W_up)")


@pytest.mark.points(0)
def test_swiglu_ffn_leaves_inputs_unchanged(student, expect, rng):
    """Does swiglu_ffn leave x and the weights untouched and run without numpy warnings?"""
    expect_clean_call(student, expect, student.swiglu_ffn, *_args(rng, CASE_LIST[4], 42),
                      what="swiglu_ffn on ordinary inputs")
