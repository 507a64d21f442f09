"""split_heads(x, n_heads): cut the feature axis into heads and move the head axis before the tokens.

x is (..., n, d_model); the result is (..., n_heads, n, d_k) with d_k = d_model // n_heads, and head i
holds features i*d_k to (i+1)*d_k - 1 of every token (heads are numbered from 0). A width that
n_heads does not divide is a ValueError.
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import CASE_IDS, CASE_LIST, expect_clean_call, expect_float32, normal


@pytest.mark.points(6)
@pytest.mark.parametrize("case", CASE_LIST, ids=CASE_IDS)
def test_split_heads_matches_reference(student, expect, rng, case):
    """Does split_heads put every feature in the right head and token, for several shapes and head counts?"""
    expect.matches_reference(student.split_heads, (normal(rng, case.shape), case.h),
                             what=f"split_heads on x of shape {case.shape} with n_heads={case.h}")


@pytest.mark.points(0.5)
def test_split_heads_keeps_float32(student, expect, rng):
    """Given float32 x, does split_heads return float32 values?"""
    what = "split_heads on float32 x of shape (5, 12) with n_heads=3"
    out = expect.matches_reference(student.split_heads, (normal(rng, (5, 12), dtype=np.float32), 3), what=what)
    expect_float32(expect, out, what)


@pytest.mark.points(3)
@pytest.mark.parametrize("shape, n_heads", [((4, 10), 3), ((2, 3, 12), 5)],
                         ids=["d10_h3", "batch_axes_d12_h5"])
def test_split_heads_rejects_width_not_divisible_by_heads(student, expect, rng, shape, n_heads):
    """Does split_heads raise ValueError when d_model is not a multiple of n_heads?"""
    what = f"split_heads with d_model={shape[-1]}, n_heads={n_heads}"
    with expect.raises(ValueError, what=what, diagnose="split_heads.no_value_error"):
        student.split_heads(normal(rng, shape), n_heads)


@pytest.mark.points(0)
def test_split_heads_leaves_input_unchanged(student, expect, rng):
    """Does split_heads leave x untouched and run without numpy warnings?"""
    expect_clean_call(student, expect, student.split_heads, normal(rng, (2, 6, 8)), 4, what="split_heads")
