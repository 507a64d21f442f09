"""multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None): multi-head self-attention.

x is (..., n, d_model), the four projections are (d_model, d_model), mask is an optional boolean
(n, n) where True means "query i may look at key j". Per head: softmax(Q K^T / sqrt(d_k)) V; the
heads are merged and projected by W_O. The result is (..., n, d_model) in the dtype of x.

Most checks run your function with the reference split_heads, merge_heads and softmax in place of
the notebook's, so a mistake in split_heads or merge_heads is not charged twice; one integration
check uses your own pieces.
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import (
    CASE_IDS,
    CASE_LIST,
    causal_mask,
    expect_clean_call,
    expect_float32,
    permutation_not_identity,
    projections,
    random_mask,
    tokens,
)


@pytest.fixture
def mha(student, ref):
    """The student's multi_head_attention with trusted head and softmax helpers."""
    return student.using(split_heads=ref.split_heads, merge_heads=ref.merge_heads,
                         softmax=ref.softmax).multi_head_attention


def _args(rng, case, dtype=np.float64, masked=False):
    args = (tokens(rng, case.shape, dtype), *projections(rng, case.d, dtype), case.h)
    return (*args, causal_mask(case.n)) if masked else args


def _agrees(mha, ref, expect, args, what):
    expected, out = ref.multi_head_attention(*args), mha(*args)
    expect.shape(out, args[0].shape, what)
    expect.close(out, expected, what=what, call=("multi_head_attention", args, {}))
    return out


@pytest.mark.points(6)
@pytest.mark.parametrize("case", CASE_LIST, ids=CASE_IDS)
def test_multi_head_attention_matches_reference(mha, ref, expect, rng, case):
    """Without a mask, does multi_head_attention agree with the reference for several shapes and head counts?"""
    _agrees(mha, ref, expect, _args(rng, case),
            f"multi_head_attention on x of shape {case.shape} with n_heads={case.h}")


@pytest.mark.points(3)
@pytest.mark.parametrize("case", CASE_LIST[::2], ids=CASE_IDS[::2])
def test_multi_head_attention_with_causal_mask_matches_reference(mha, ref, expect, rng, case):
    """With a causal mask, does multi_head_attention agree with the reference?"""
    _agrees(mha, ref, expect, _args(rng, case, masked=True),
            f"multi_head_attention with a causal mask on x of shape {case.shape}, n_heads={case.h}")


@pytest.mark.points(1.5)
def test_multi_head_attention_follows_any_boolean_mask(mha, ref, expect, rng):
    """With a mask that is not causal, does each query attend to exactly the keys its row of the mask allows?"""
    case = CASE_LIST[4]
    args = (*_args(rng, case), random_mask(rng, case.n))
    _agrees(mha, ref, expect, args,
            f"multi_head_attention with a random (non-causal) mask on x of shape {case.shape}")


@pytest.mark.points(1)
def test_multi_head_attention_keeps_float32(mha, ref, expect, rng):
    """Given float32 inputs, does multi_head_attention return float32 values that agree with the reference?"""
    args = _args(rng, CASE_LIST[0], np.float32)
    out = _agrees(mha, ref, expect, args, "multi_head_attention on float32 inputs")
    expect_float32(expect, out, "multi_head_attention on float32 inputs")


@pytest.mark.points(1.5)
def test_multi_head_attention_is_equivariant_to_token_order(mha, expect, rng):
    """Without a mask, does reordering the tokens just reorder the outputs the same way?"""
    x, *weights = _args(rng, CASE_LIST[0])
    perm = permutation_not_identity(rng, x.shape[0])
    out = mha(x, *weights)
    out_perm = mha(x[perm], *weights)
    what = "multi_head_attention on reordered tokens"
    expect.shape(out, x.shape, f"multi_head_attention on x of shape {x.shape}")
    expect.shape(out_perm, x.shape, what)
    expect.close(out_perm, out[perm], what=what + " (compared with your outputs, reordered)")


@pytest.mark.points(1.5)
def test_multi_head_attention_causal_mask_hides_later_tokens(mha, expect, rng):
    """With a causal mask, do a token's outputs stay the same when only later tokens change?"""
    case = CASE_LIST[4]                                   # batch axes (2, 3), n = 4
    x, *weights, mask = _args(rng, case, masked=True)
    k = int(rng.integers(0, case.n - 1))                  # tokens 0..k stay, the rest change
    changed = x.copy()
    changed[..., k + 1:, :] = tokens(rng, changed[..., k + 1:, :].shape)
    out, out_changed = mha(x, *weights, mask), mha(changed, *weights, mask)
    what = "multi_head_attention with a causal mask"
    expect.shape(out, x.shape, what)
    expect.shape(out_changed, x.shape, what)
    expect.close(out_changed[..., :k + 1, :], out[..., :k + 1, :],
                 what=f"{what}: the outputs of tokens 0..{k} after changing only the later tokens")


@pytest.mark.points(2.5)
def test_multi_head_attention_survives_large_scores(student, ref, expect, rng):
    """With scores big enough to overflow a naive exp, is multi_head_attention still finite, quiet and right?"""
    case = CASE_LIST[0]
    x, *weights = _args(rng, case)
    args = (1e3 * x, *weights)
    expected = ref.multi_head_attention(*args)
    out = student.using(split_heads=ref.split_heads, merge_heads=ref.merge_heads).multi_head_attention(*args)
    what = "multi_head_attention on tokens scaled by 1000"
    expect.shape(out, x.shape, what)
    if student.last_call.warnings or not np.all(np.isfinite(out)):
        expect.diagnose("multi_head_attention.softmax_overflow")
    expect.finite(out, what)
    expect.no_warnings(what)
    expect.close(out, expected, what=what, call=("multi_head_attention", args, {}))


@pytest.mark.points(2)
def test_multi_head_attention_integration_with_your_own_functions(student, ref, expect, rng):
    """With your own split_heads and merge_heads, does masked multi_head_attention agree with the reference?"""
    case = CASE_LIST[4]
    args = _args(rng, case, masked=True)
    _agrees(student.multi_head_attention, ref, expect, args,
            f"multi_head_attention (with your own helpers) on x of shape {case.shape}")


@pytest.mark.points(1)
def test_multi_head_attention_leaves_inputs_unchanged(mha, student, expect, rng):
    """Does multi_head_attention leave x, the weights and the mask untouched, without numpy warnings?"""
    case = CASE_LIST[0]
    out = mha(*_args(rng, case, masked=True))
    expect_clean_call(student, expect, "multi_head_attention on ordinary inputs")
    expect.shape(out, case.shape, f"multi_head_attention on x of shape {case.shape}")
    expect.finite(out, "multi_head_attention on ordinary inputs")
