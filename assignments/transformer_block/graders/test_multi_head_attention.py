"""multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None): multi-head self-attention.

x is (..., n, d_model), the four projections are (d_model, d_model), mask is an optional boolean
(n, n) where True means "query i may look at key j". Per head: softmax(Q K^T / sqrt(d_k)) V; the
heads are merged and projected by W_O. The result is (..., n, d_model) in the dtype of x.

Every check accepts the reference's answer or the answer of the reference wiring built from your
own split_heads and merge_heads, so a mistake in those is charged in their problems only. Likewise a
property (token order, the causal mask) that this wiring breaks too is not charged here: it fails
because of your split_heads or merge_heads.
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import (
    CASE_IDS,
    CASE_LIST,
    causal_mask,
    expect_a_dependence,
    expect_an_answer,
    expect_clean_call,
    expect_float32,
    projections,
    random_mask,
    tokens,
)


def _args(rng, case, dtype=np.float64, masked=False):
    args = (tokens(rng, case.shape, dtype), *projections(rng, case.d, dtype), case.h)
    return (*args, causal_mask(case.n)) if masked else args


def _first_token_changed(rng, x):
    """x with its first token (of each sequence) drawn again: every later token attends to it, so
    attention's outputs for them change; a function that never looks across tokens gives the same."""
    changed = x.copy()
    changed[..., :1, :] = tokens(rng, changed[..., :1, :].shape, x.dtype)
    return changed


@pytest.mark.points(6)
@pytest.mark.parametrize("case", CASE_LIST, ids=CASE_IDS)
def test_multi_head_attention_matches_reference(student, expect, rng, case):
    """Without a mask, does multi_head_attention agree with the reference for several shapes and head counts?"""
    expect.matches_reference(student.multi_head_attention, _args(rng, case),
                             what=f"multi_head_attention on x of shape {case.shape} with n_heads={case.h}")


@pytest.mark.points(3)
@pytest.mark.parametrize("case", CASE_LIST[::2], ids=CASE_IDS[::2])
def test_multi_head_attention_with_causal_mask_matches_reference(student, expect, rng, case):
    """With a causal mask, does multi_head_attention agree with the reference?"""
    expect.matches_reference(
        student.multi_head_attention, _args(rng, case, masked=True),
        what=f"multi_head_attention with a causal mask on x of shape {case.shape}, n_heads={case.h}")


@pytest.mark.points(1.5)
def test_multi_head_attention_follows_any_boolean_mask(student, expect, rng):
    """With a non-causal mask given as mask=, does each query attend to exactly the keys its row allows?"""
    # by keyword, as the released def line names it and a block may pass it: a renamed parameter is
    # charged here, in attention's own points, not only in those of a block that calls it so
    case = CASE_LIST[4]
    args = _args(rng, case)
    expect.matches_reference(
        student.multi_head_attention, args, {"mask": random_mask(rng, case.n)},
        what=f"multi_head_attention with a random (non-causal) mask passed as mask= on x of shape {case.shape}")


@pytest.mark.points(1)
@pytest.mark.parametrize("masked", [False, True], ids=["no_mask", "causal_mask"])
def test_multi_head_attention_keeps_float32(student, expect, rng, masked):
    """Given float32 inputs, with and without a boolean mask, does multi_head_attention stay float32 and right?"""
    # the masked case catches a boolean mask turned into float64 numbers, as `scores + (1 - mask) * -1e9`
    # does: without a mask such code never runs, and the result stays float32
    what = "multi_head_attention on float32 inputs" + (" with a boolean causal mask" if masked else "")
    out = expect.matches_reference(student.multi_head_attention, _args(rng, CASE_LIST[0], np.float32, masked=masked),
                                   what=what)
    with expect.excused_if_wired_right():
        expect_float32(expect, out, what)


@pytest.mark.points(1.5)
def test_multi_head_attention_is_equivariant_to_token_order(student, expect, rng):
    """Without a mask, does reordering the tokens just reorder the outputs the same way?"""
    x, *weights = _args(rng, CASE_LIST[0])
    # a cyclic shift: every token moves (a reordering that swaps two tokens can leave a split of the
    # features across heads that mixes tokens unseen)
    perm = np.roll(np.arange(x.shape[0]), int(rng.integers(1, x.shape[0])))
    out, out_perm, out_first = expect.call_each(student.multi_head_attention, (x, *weights), (x[perm], *weights),
                                                (_first_token_changed(rng, x), *weights))
    what = "multi_head_attention on reordered tokens"

    def equivariant(out, out_perm, *_):                      # (the third call's answer is not used)
        expect.close(out_perm, out[perm], what=what + " (compared with your outputs, reordered)")
    with expect.excused_if_wired_right():
        expect.shape(out, x.shape, f"multi_head_attention on x of shape {x.shape}")
        expect.shape(out_perm, x.shape, what)
        expect_an_answer(out, x, f"multi_head_attention on x of shape {x.shape}")
        expect_a_dependence(out[1:], out_first[1:], "multi_head_attention (the other tokens' outputs)",
                            "only the first token")
    with expect.excused_if_wired_right(holds=equivariant):      # not when only split_heads or merge_heads breaks it
        equivariant(out, out_perm)


@pytest.mark.points(1.5)
def test_multi_head_attention_causal_mask_hides_later_tokens(student, expect, rng):
    """With a causal mask, do a token's outputs stay the same when only later tokens change?"""
    case = CASE_LIST[4]                                   # batch axes (2, 3), n = 4
    x, *weights, mask = _args(rng, case, masked=True)
    k = int(rng.integers(0, case.n - 1))                  # tokens 0..k stay, the rest change
    changed = x.copy()
    changed[..., k + 1:, :] = tokens(rng, changed[..., k + 1:, :].shape)
    out, out_changed, out_first = expect.call_each(student.multi_head_attention, (x, *weights, mask),
                                                   (changed, *weights, mask),
                                                   (_first_token_changed(rng, x), *weights, mask))
    what = "multi_head_attention with a causal mask"

    def hides_later_tokens(out, out_changed, *_):             # likewise
        expect.close(out_changed[..., :k + 1, :], out[..., :k + 1, :],
                     what=f"{what} (earlier tokens' outputs, once only later tokens change)")
    with expect.excused_if_wired_right():
        expect.shape(out, x.shape, what)
        expect.shape(out_changed, x.shape, what)
        expect_an_answer(out, x, what)
        expect_a_dependence(out[..., 1:, :], out_first[..., 1:, :], f"{what} (the later tokens' outputs)",
                            "only the first token")
    with expect.excused_if_wired_right(holds=hides_later_tokens):   # likewise
        hides_later_tokens(out, out_changed)


@pytest.mark.points(2.5)
def test_multi_head_attention_survives_large_scores(student, expect, rng):
    """With scores big enough to overflow a naive exp, is multi_head_attention still finite and right?"""
    x, *weights = _args(rng, CASE_LIST[0])
    expect.matches_reference(student.multi_head_attention, (1e3 * x, *weights),
                             what="multi_head_attention on tokens scaled by 1000",
                             if_not_finite="multi_head_attention.softmax_overflow")


@pytest.mark.points(0)
def test_multi_head_attention_leaves_inputs_unchanged(student, expect, rng):
    """Does multi_head_attention leave x, the weights and the mask untouched, without numpy warnings?"""
    expect_clean_call(student, expect, student.multi_head_attention, *_args(rng, CASE_LIST[0], masked=True),
                      what="multi_head_attention on ordinary inputs")
