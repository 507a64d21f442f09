"""pre_ln_block(x, params, n_heads, mask=None): one Pre-LN transformer block.

    h   = x + multi_head_attention(layer_norm(x, ln1_gamma, ln1_beta), W_Q, W_K, W_V, W_O, n_heads, mask)
    out = h + FFN(layer_norm(h, ln2_gamma, ln2_beta)),   FFN(z) = gelu(z @ W1 + b1) @ W2 + b2

x is (..., n, d_model) and so is the result, in the dtype of x. Most checks run your block with the
reference layer_norm, multi_head_attention and gelu in place of yours, so a mistake there is not
charged twice; one integration check uses your own pieces.
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import (
    CASE_IDS,
    CASE_LIST,
    causal_mask,
    expect_clean_call,
    expect_float32,
    tokens,
)


@pytest.fixture
def block(student, ref):
    """The student's pre_ln_block with trusted normalisation, attention and activation."""
    return student.using(layer_norm=ref.layer_norm, multi_head_attention=ref.multi_head_attention,
                         gelu=ref.gelu).pre_ln_block


def _args(ref, rng, case, d_ff, dtype=np.float64, masked=False):
    params = ref.init_block_params(rng, case.d, d_ff, dtype)
    return tokens(rng, case.shape, dtype), params, case.h, causal_mask(case.n) if masked else None


def _agrees(fn, ref, expect, args, what):
    expected, out = ref.pre_ln_block(*args), fn(*args)
    expect.shape(out, args[0].shape, what)
    expect.close(out, expected, what=what, call=("pre_ln_block", args, {}))
    return out


@pytest.mark.points(9)
@pytest.mark.parametrize("case", CASE_LIST, ids=CASE_IDS)
def test_pre_ln_block_matches_reference(block, ref, expect, rng, case):
    """Without a mask, does pre_ln_block agree with the reference for several shapes and head counts?"""
    _agrees(block, ref, expect, _args(ref, rng, case, 4 * case.d),
            f"pre_ln_block on x of shape {case.shape} with n_heads={case.h}")


@pytest.mark.points(3)
@pytest.mark.parametrize("case", CASE_LIST[1::2], ids=CASE_IDS[1::2])
def test_pre_ln_block_with_causal_mask_matches_reference(block, ref, expect, rng, case):
    """With a causal mask (and d_ff not a multiple of d_model), does pre_ln_block agree with the reference?"""
    _agrees(block, ref, expect, _args(ref, rng, case, 3 * case.d + 1, masked=True),
            f"pre_ln_block with a causal mask on x of shape {case.shape}, n_heads={case.h}")


@pytest.mark.points(1.5)
def test_pre_ln_block_keeps_float32(block, ref, expect, rng):
    """Given float32 inputs and parameters, does pre_ln_block return float32 values that agree with the reference?"""
    args = _args(ref, rng, CASE_LIST[4], 64, np.float32, masked=True)
    out = _agrees(block, ref, expect, args, "pre_ln_block on float32 inputs")
    expect_float32(expect, out, "pre_ln_block on float32 inputs")


@pytest.mark.points(2.5)
def test_pre_ln_block_is_identity_when_sublayers_output_zero(block, ref, expect, rng):
    """With W_O, W2 and b2 all zero, does pre_ln_block return x unchanged (the residual path alone)?"""
    case = CASE_LIST[0]
    x, params, h, mask = _args(ref, rng, case, 4 * case.d)
    params = {**params, "W_O": np.zeros_like(params["W_O"]), "W2": np.zeros_like(params["W2"]),
              "b2": np.zeros_like(params["b2"])}
    args = (x, params, h, mask)
    out = block(*args)
    what = "pre_ln_block with W_O, W2 and b2 all zero"
    expect.shape(out, x.shape, what)
    expect.close(out, x, what=what, call=("pre_ln_block", args, {}))


@pytest.mark.points(2)
def test_pre_ln_block_leaves_inputs_unchanged(block, student, ref, expect, rng):
    """Does pre_ln_block leave x and every parameter untouched (no `x += ...`), without numpy warnings?"""
    case = CASE_LIST[4]
    out = block(*_args(ref, rng, case, 4 * case.d, masked=True))
    expect_clean_call(student, expect, "pre_ln_block on ordinary inputs")
    expect.shape(out, case.shape, f"pre_ln_block on x of shape {case.shape}")
    expect.finite(out, "pre_ln_block on ordinary inputs")


@pytest.mark.points(2)
def test_pre_ln_block_integration_with_your_own_functions(student, ref, expect, rng):
    """With your own layer_norm and multi_head_attention, does masked pre_ln_block agree with the reference?"""
    case = CASE_LIST[4]
    _agrees(student.pre_ln_block, ref, expect, _args(ref, rng, case, 3 * case.d, masked=True),
            f"pre_ln_block (with your own pieces) on x of shape {case.shape}")
