"""rms_norm(x, gamma, eps=1e-6): divide each token by the root mean square of its d features, then scale.

x is (..., d), gamma is (d,); the result has the shape and dtype of x. Nothing is subtracted and
nothing is added: the mean of the squares is taken per token, and eps is added to it inside the root.
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import (
    expect_an_answer,
    expect_clean_call,
    expect_float32,
    normal,
    tokens,
)
from autograder.config import Tolerance

SHAPES = {
    "one_vector": (10,),
    "n5_d8": (5, 8),
    "one_token": (1, 16),
    "batch_axes_2x3": (2, 3, 4, 12),
    "n12_d64": (12, 64),
}


def _tokens(rng, shape, dtype=np.float64):
    """Tokens as `tokens` draws them, each rescaled to a root mean square between 1 and 1.5.

    There eps = 1e-6 changes the output by 2e-7 to 5e-7 of its size, whether it is left out or added
    outside the root: more than the float64 rtol (1e-7) on every token, so such a mistake fails these
    comparisons on every student's inputs, never on some students' only."""
    x = tokens(rng, shape)
    rms = rng.uniform(1.0, 1.5, size=(*shape[:-1], 1))
    return (x * (rms / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)))).astype(dtype)


def _args(rng, shape, dtype=np.float64):
    return _tokens(rng, shape, dtype), normal(rng, (shape[-1],), scale=0.3, loc=1.0, dtype=dtype)


@pytest.mark.points(5)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_rms_norm_matches_reference(student, expect, rng, shape):
    """Does rms_norm agree with the reference on random tokens of several shapes?"""
    expect.matches_reference(student.rms_norm, _args(rng, shape), what=f"rms_norm on x of shape {shape}")


@pytest.mark.points(1.5)
def test_rms_norm_keeps_float32(student, expect, rng):
    """Given float32 inputs, does rms_norm return float32 values that agree with the reference?"""
    out = expect.matches_reference(student.rms_norm, _args(rng, (2, 5, 16), np.float32),
                                   what="rms_norm on float32 x of shape (2, 5, 16)")
    expect_float32(expect, out, "rms_norm on float32 x")


@pytest.mark.points(1.5)
def test_rms_norm_rows_have_unit_mean_square_and_keep_their_offset(student, expect, rng):
    """With gamma = 1, does every token come out with mean square 1, without being centred?"""
    d = 32
    x = tokens(rng, (6, d))
    out = expect.call(student.rms_norm, x, np.ones(d))
    expect.shape(out, (6, d), "rms_norm on x of shape (6, 32)")
    expect_an_answer(out, x, "rms_norm on x of shape (6, 32)")
    # eps shifts the mean square by at most eps / mean(x^2), far below 1e-4 for these tokens
    expect.close(np.mean(out * out, axis=-1), np.ones(6), what="the per-token mean square of rms_norm's output",
                 tol=Tolerance(rtol=0.0, atol=1e-4))
    expect.close(out.mean(axis=-1), x.mean(axis=-1) / np.sqrt(np.mean(x * x, axis=-1)),
                 what="the per-token mean of rms_norm's output (RMSNorm does not centre)",
                 tol=Tolerance(rtol=1e-4, atol=1e-6))


@pytest.mark.points(1.5)
def test_rms_norm_handles_tiny_tokens(student, expect, rng):
    """On tokens whose features are close to zero, does eps keep rms_norm in agreement with the reference?"""
    d = 16
    x = 1e-4 * rng.standard_normal((5, d))
    expect.matches_reference(student.rms_norm, (x, normal(rng, (d,), scale=0.3, loc=1.0)),
                             what="rms_norm on tokens with features near 1e-4")


@pytest.mark.points(0.5)
def test_rms_norm_applies_gamma_per_feature(student, expect, rng):
    """Does each feature get its own scale gamma[j]?"""
    d = 8
    expect.matches_reference(student.rms_norm, (_tokens(rng, (4, d)), normal(rng, (d,), scale=2.0)),
                             what="rms_norm with a strong gamma")


@pytest.mark.points(0)
def test_rms_norm_leaves_inputs_unchanged_without_warnings(student, expect, rng):
    """Does rms_norm leave x and gamma untouched and run without numpy warnings?"""
    expect_clean_call(student, expect, student.rms_norm, *_args(rng, (3, 4, 8)),
                      what="rms_norm on ordinary tokens")
