"""pre_ln_block(x, params, n_heads, mask=None): one Pre-LN transformer block.

    h   = x + multi_head_attention(layer_norm(x, ln1_gamma, ln1_beta), W_Q, W_K, W_V, W_O, n_heads, mask)
    out = h + FFN(layer_norm(h, ln2_gamma, ln2_beta)),   FFN(z) = gelu(z @ W1 + b1) @ W2 + b2

x is (..., n, d_model) and so is the result, in the dtype of x. Every check accepts the reference's
answer or the answer of the reference wiring built from your own layer_norm and
multi_head_attention, so a mistake in those is charged in their problems only; what is checked here
is the wiring: the order, the residuals, which parameters go where, the mask and the FFN. With the
FFN's weights zero the block is its attention half alone, x + MHA(LN1(x)), and with W_O zero its
feed-forward half alone, x + FFN(LN2(x)) (the notebook's "FFN off" and "attention off" checks): a
block right in one half earns that half's checks even when the other half is wrong.
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import (
    CASE_IDS,
    CASE_LIST,
    causal_mask,
    expect_a_dependence,
    expect_clean_call,
    expect_float32,
    tokens,
    tokens_with_spread,
)


def _args(ref, rng, case, d_ff, dtype=np.float64, masked=False, spread=None):
    """x, params, n_heads, mask; with `spread` (low, high), each token's standard deviation is drawn from it."""
    params = ref.init_block_params(rng, case.d, d_ff, dtype)
    x = tokens(rng, case.shape, dtype) if spread is None else tokens_with_spread(rng, case.shape, *spread, dtype)
    return x, params, case.h, causal_mask(case.n) if masked else None


# The two halves' checks take one sequence without batch axes (12 tokens of 64 features, 8 heads): a building
# block that fails on batch axes leaves the checks that have them not graded, and need not cost these too.
HALVES_CASE = CASE_LIST[5]


def _with_zeros(params, names):
    """`params` with the arrays `names` replaced by zeros of their shape and dtype."""
    return {**params, **{name: np.zeros_like(params[name]) for name in names}}


@pytest.mark.points(5)
@pytest.mark.parametrize("case", CASE_LIST, ids=CASE_IDS)
def test_pre_ln_block_matches_reference(student, ref, expect, rng, case):
    """Without a mask, does pre_ln_block agree with the reference for several shapes and head counts?"""
    expect.matches_reference(student.pre_ln_block, _args(ref, rng, case, 4 * case.d),
                             what=f"pre_ln_block on x of shape {case.shape} with n_heads={case.h}")


@pytest.mark.points(3)
@pytest.mark.parametrize("case", CASE_LIST[1::2], ids=CASE_IDS[1::2])
def test_pre_ln_block_with_causal_mask_matches_reference(student, ref, expect, rng, case):
    """With a causal mask (and d_ff not a multiple of d_model), does pre_ln_block agree with the reference?"""
    expect.matches_reference(
        student.pre_ln_block, _args(ref, rng, case, 3 * case.d + 1, masked=True),
        what=f"pre_ln_block with a causal mask on x of shape {case.shape}, n_heads={case.h}")


@pytest.mark.points(1.5)
def test_pre_ln_block_keeps_float32(student, ref, expect, rng):
    """Given float32 inputs and parameters, does pre_ln_block return float32 values that agree with the reference?"""
    # Tokens with a standard deviation of 2 to 3: there the LayerNorms' eps (1e-5, or the 1e-6 of
    # pre_ln_block.smaller_layer_norm_eps) moves the block's output by under 0.3 of this tolerance (at
    # most 0.28 times it over 20 000 draws), so an eps mistake is charged by the float64 checks, on every
    # student's inputs alike; with the spread of `tokens` (from 0.5) it failed here on 15% of draws.
    what = "pre_ln_block on float32 inputs"
    out = expect.matches_reference(student.pre_ln_block,
                                   _args(ref, rng, CASE_LIST[4], 64, np.float32, masked=True, spread=(2.0, 3.0)),
                                   what=what)
    with expect.excused_if_wired_right():
        expect_float32(expect, out, what)


@pytest.mark.points(2.5)
def test_pre_ln_block_is_identity_when_sublayers_output_zero(student, ref, expect, rng):
    """With W_O, W2 and b2 all zero, does pre_ln_block return x unchanged (the residual path alone)?"""
    case = CASE_LIST[0]
    x, params, h, mask = _args(ref, rng, case, 4 * case.d)
    zeroed = _with_zeros(params, ("W_O", "W2", "b2"))
    what = "pre_ln_block with W_O, W2 and b2 all zero"
    out = expect.matches_reference(student.pre_ln_block, (x, zeroed, h, mask), what=what)
    # `return x` holds this property too: the sublayers must change the answer once they are not zero
    expect_a_dependence(out, expect.call(student.pre_ln_block, x, params, h, mask), what,
                        "W_O, W2 and b2 took ordinary values")


@pytest.mark.points(4)
def test_pre_ln_block_is_attention_half_when_feed_forward_is_zero(student, ref, expect, rng):
    """With W1, b1, W2 and b2 all zero (the FFN off), does pre_ln_block give x + MHA(LN1(x)), its attention half?"""
    case = HALVES_CASE
    x, params, h, mask = _args(ref, rng, case, 4 * case.d)
    expect.matches_reference(student.pre_ln_block, (x, _with_zeros(params, ("W1", "b1", "W2", "b2")), h, mask),
                             what=f"pre_ln_block with W1, b1, W2 and b2 all zero on x of shape {case.shape}")


@pytest.mark.points(4)
def test_pre_ln_block_is_feed_forward_half_when_attention_output_is_zero(student, ref, expect, rng):
    """With W_O zero (the attention off), does pre_ln_block give x + FFN(LN2(x)), its feed-forward half?"""
    case = HALVES_CASE
    x, params, h, mask = _args(ref, rng, case, 4 * case.d)
    expect.matches_reference(student.pre_ln_block, (x, _with_zeros(params, ("W_O",)), h, mask),
                             what=f"pre_ln_block with W_O zero on x of shape {case.shape}")


@pytest.mark.points(0)
def test_pre_ln_block_leaves_inputs_unchanged(student, ref, expect, rng):
    """Does pre_ln_block leave x and every parameter untouched (no `x += ...`), without numpy warnings?"""
    case = CASE_LIST[4]
    expect_clean_call(student, expect, student.pre_ln_block, *_args(ref, rng, case, 4 * case.d, masked=True),
                      what="pre_ln_block on ordinary inputs")
