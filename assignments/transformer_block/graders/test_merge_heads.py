"""merge_heads(x): the inverse of split_heads.

x is (..., n_heads, n, d_k); the result is (..., n, n_heads * d_k), each token's heads concatenated
in head order (head 0 first).
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import CASE_IDS, CASE_LIST, expect_clean_call, expect_float32, normal


@pytest.mark.points(3)
@pytest.mark.parametrize("case", CASE_LIST, ids=CASE_IDS)
def test_merge_heads_matches_reference(student, expect, rng, case):
    """Does merge_heads put every head's features back in the right token and position?"""
    expect.matches_reference(student.merge_heads, (normal(rng, case.heads_shape),),
                             what=f"merge_heads on an array of shape {case.heads_shape}")


@pytest.mark.points(1)
def test_merge_heads_undoes_split_heads(student, ref, expect, rng):
    """Does merge_heads(split_heads(x, h)) give back x exactly?"""
    heads = ref.split_heads(normal(rng, (3, 7, 12)), 4)
    expect.matches_reference(student.merge_heads, (heads,),
                             what="merge_heads after split_heads of x with shape (3, 7, 12) and n_heads=4")


@pytest.mark.points(0.5)
def test_merge_heads_keeps_float32(student, expect, rng):
    """Given float32 heads, does merge_heads return float32 values?"""
    what = "merge_heads on float32 heads of shape (2, 5, 3)"
    out = expect.matches_reference(student.merge_heads, (normal(rng, (2, 5, 3), dtype=np.float32),), what=what)
    expect_float32(expect, out, what)


@pytest.mark.points(0)
def test_merge_heads_leaves_input_unchanged(student, expect, rng):
    """Does merge_heads leave its input untouched and run without numpy warnings?"""
    expect_clean_call(student, expect, student.merge_heads, normal(rng, (2, 4, 6, 2)), what="merge_heads")
