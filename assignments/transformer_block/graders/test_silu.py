"""silu(x): the SiLU (Swish) activation x * sigmoid(x), elementwise.

x has any shape; the result has the same shape and dtype, and stays finite and warning-free for any
finite x, however large.
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import expect_clean_call, expect_float32, normal

SHAPES = {"vector": (9,), "n5_d8": (5, 8), "batch_axes_2x3": (2, 3, 4, 6)}


@pytest.mark.points(1.5)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_silu_matches_reference(student, ref, expect, rng, shape):
    """Does silu agree with the reference on ordinary inputs of several shapes?"""
    x = normal(rng, shape, scale=3.0)
    expected, out = ref.silu(x), student.silu(x)
    expect.shape(out, shape, f"silu on x of shape {shape}")
    expect.close(out, expected, what=f"silu on x of shape {shape}", call=("silu", (x,), {}))


@pytest.mark.points(0.5)
def test_silu_keeps_float32(student, ref, expect, rng):
    """Given float32 x, does silu return float32 values that agree with the reference?"""
    x = normal(rng, (4, 8), scale=3.0, dtype=np.float32)
    expected, out = ref.silu(x), student.silu(x)
    expect.shape(out, x.shape, "silu on float32 x of shape (4, 8)")
    expect_float32(expect, out, "silu on float32 x")
    expect.close(out, expected, what="silu on float32 x", call=("silu", (x,), {}))


@pytest.mark.points(2.5)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_silu_survives_large_inputs(student, ref, expect, rng, dtype):
    """For |x| up to 10,000, does silu stay finite, raise no overflow warnings and agree with the reference?"""
    x = np.concatenate([rng.uniform(-1e3, 1e3, size=12), [-1e4, -1e3, 1e3, 1e4]]).astype(dtype)
    rng.shuffle(x)
    expected, out = ref.silu(x), student.silu(x)
    what = f"silu on {np.dtype(dtype).name} inputs as large as 10,000 in size"
    expect.shape(out, x.shape, what)
    if student.last_call.warnings or not np.all(np.isfinite(out)):
        expect.diagnose("silu.exp_overflow")
    expect.finite(out, what)
    expect.no_warnings(what)
    expect.close(out, expected, what=what, call=("silu", (x,), {}))


@pytest.mark.points(0.5)
def test_silu_leaves_input_unchanged(student, expect, rng):
    """Does silu leave x untouched and run without numpy warnings on ordinary inputs?"""
    out = student.silu(normal(rng, (3, 5)))
    expect_clean_call(student, expect, "silu on ordinary inputs")
    expect.shape(out, (3, 5), "silu on x of shape (3, 5)")
