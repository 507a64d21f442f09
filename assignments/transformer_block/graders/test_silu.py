"""silu(x): the SiLU (Swish) activation x * sigmoid(x), elementwise.

x has any shape; the result has the same shape and dtype, and stays finite for any finite x, however
large (and, as advice, without numpy warnings).
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import expect_clean_call, expect_float32, normal

SHAPES = {"vector": (9,), "n5_d8": (5, 8), "batch_axes_2x3": (2, 3, 4, 6)}


def _large(rng, dtype=np.float64):
    """Inputs from 50 to 10,000 in size, of both signs, in random order. None is near 0, where the
    ordinary inputs already look: drawn there, they would catch some students' wrong shapes near 0
    (a ReLU, say) and not others'."""
    drawn = rng.choice([-1.0, 1.0], size=12) * rng.uniform(50.0, 1e3, size=12)
    x = np.concatenate([drawn, [-1e4, -1e3, 1e3, 1e4]]).astype(dtype)
    rng.shuffle(x)
    return x


def _large_and_ordinary(rng, dtype=np.float64):
    """The large inputs of `_large` with eight ordinary ones among them, four of each sign, from 0.5 to
    8 in size.

    From 50 on, ReLU, GELU and SiLU agree to machine precision, so large inputs alone would pay the
    large-input points to a function that is not SiLU at all. Between 0.5 and 8 in size every one of
    those (and every other catalogued silu mistake) is off by far more than the tolerance, at each of
    the eight inputs, so they fail here on every draw; a correct SiLU in any form (the tanh form, a
    stable sigmoid built with np.where or np.exp(-np.logaddexp(0, -x))) agrees with the reference there."""
    ordinary = np.repeat([-1.0, 1.0], 4) * rng.uniform(0.5, 8.0, size=8)
    x = np.concatenate([_large(rng), ordinary]).astype(dtype)
    rng.shuffle(x)
    return x


@pytest.mark.points(1.5)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_silu_matches_reference(student, expect, rng, shape):
    """Does silu agree with the reference on ordinary inputs of several shapes?"""
    expect.matches_reference(student.silu, (normal(rng, shape, scale=3.0),), what=f"silu on x of shape {shape}")


@pytest.mark.points(0.5)
def test_silu_keeps_float32(student, expect, rng):
    """Given float32 x, does silu return float32 values that agree with the reference?"""
    out = expect.matches_reference(student.silu, (normal(rng, (4, 8), scale=3.0, dtype=np.float32),),
                                   what="silu on float32 x of shape (4, 8)")
    expect_float32(expect, out, "silu on float32 x")


@pytest.mark.points(2.5)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_silu_survives_large_inputs(student, expect, rng, dtype):
    """For |x| up to 10,000 (ordinary inputs among them), does silu stay finite and agree with the reference?"""
    expect.matches_reference(student.silu, (_large_and_ordinary(rng, dtype),),
                             what=f"silu on {np.dtype(dtype).name} inputs as large as 10,000 in size "
                                  "(and a few ordinary ones)",
                             if_not_finite="silu.exp_overflow")


@pytest.mark.points(0)
def test_silu_runs_without_warnings_and_leaves_input_unchanged(student, expect, rng):
    """For |x| up to 10,000, does silu run without numpy warnings and leave x untouched?"""
    expect_clean_call(student, expect, student.silu, _large(rng), what="silu on inputs as large as 10,000 in size",
                      if_warned="silu.exp_overflow")
