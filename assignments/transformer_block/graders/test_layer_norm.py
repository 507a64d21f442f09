"""layer_norm(x, gamma, beta): normalise each token over its d features, then scale and shift.

x is (..., d), gamma and beta are (d,); the result has the shape and dtype of x. The mean and the
population variance are taken per token, and eps = 1e-5 is added to the variance inside the root.
"""
import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import (
    expect_an_answer,
    expect_clean_call,
    expect_float32,
    normal,
    scale_and_shift,
    tokens,
    tokens_with_spread,
)
from autograder.config import Tolerance

SHAPES = {
    "one_vector": (10,),
    "n5_d8": (5, 8),
    "one_token": (1, 16),
    "batch_axes_2x3": (2, 3, 4, 12),
    "n12_d64": (12, 64),
}


def _args(rng, shape, dtype=np.float64):
    gamma, beta = scale_and_shift(rng, shape[-1], dtype)
    return tokens(rng, shape, dtype), gamma, beta


def _float32_args(rng, shape):
    """Float32 tokens as `tokens` draws them, each rescaled to a standard deviation between 4 and 6,
    with gamma and beta as usual.

    There eps = 1e-5, left out or added outside the root, moves an output entry gamma * z + beta by at
    most eps / std <= 2.5e-6 of |gamma * z|: within the float32 atol (1e-5) while |gamma * z| <= 4,
    and within its rtol (1e-4) beyond, since beta (about N(0, 0.3)) cannot bring such an entry near 0.
    So those mistakes agree here on every student's inputs, not on some students' only (with the
    spread of `tokens`, std down to about 0.3, leaving eps out failed this check on ~3% of draws);
    they are charged by the float64 checks and the nearly-constant tokens, on every draw."""
    x = tokens_with_spread(rng, shape, 4.0, 6.0, np.float32)
    gamma, beta = scale_and_shift(rng, shape[-1], np.float32)
    return x, gamma, beta


@pytest.mark.points(6)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_layer_norm_matches_reference(student, expect, rng, shape):
    """Does layer_norm agree with the reference on random tokens of several shapes?"""
    expect.matches_reference(student.layer_norm, _args(rng, shape), what=f"layer_norm on x of shape {shape}")


@pytest.mark.points(2)
def test_layer_norm_keeps_float32(student, expect, rng):
    """Given float32 inputs, does layer_norm return float32 values that agree with the reference?"""
    out = expect.matches_reference(student.layer_norm, _float32_args(rng, (2, 5, 16)),
                                   what="layer_norm on float32 x of shape (2, 5, 16)")
    expect_float32(expect, out, "layer_norm on float32 x")


@pytest.mark.points(2)
def test_layer_norm_rows_have_mean_zero_and_unit_variance(student, expect, rng):
    """With gamma = 1 and beta = 0, does every token come out with mean 0 and variance 1?"""
    d = 32
    x = tokens(rng, (6, d))
    out = expect.call(student.layer_norm, x, np.ones(d), np.zeros(d))
    expect.shape(out, (6, d), "layer_norm on x of shape (6, 32)")
    expect_an_answer(out, x, "layer_norm on x of shape (6, 32)")     # a fixed pattern of ±1 has these statistics
    # eps shifts the variance by at most eps / var(x) < 1e-4 for these tokens
    expect.close(out.mean(axis=-1), np.zeros(6), what="the per-token mean of layer_norm's output",
                 tol=Tolerance(rtol=0.0, atol=1e-6))
    expect.close(out.var(axis=-1), np.ones(6), what="the per-token variance of layer_norm's output",
                 tol=Tolerance(rtol=0.0, atol=1e-4))


@pytest.mark.points(3)
def test_layer_norm_handles_nearly_constant_tokens(student, expect, rng):
    """On tokens whose features are almost all equal, does eps keep layer_norm in agreement with the reference?"""
    d = 16
    gamma, beta = scale_and_shift(rng, d)
    x = rng.uniform(-3.0, 3.0, size=(5, 1)) + 1e-4 * rng.standard_normal((5, d))
    expect.matches_reference(student.layer_norm, (x, gamma, beta), what="layer_norm on nearly constant tokens")


@pytest.mark.points(1)
def test_layer_norm_applies_gamma_and_beta_per_feature(student, expect, rng):
    """Does each feature get its own scale gamma[j] and shift beta[j]?"""
    d = 8
    args = (tokens(rng, (4, d)), normal(rng, (d,), scale=2.0), normal(rng, (d,), scale=2.0))
    expect.matches_reference(student.layer_norm, args, what="layer_norm with a strong gamma and beta")


@pytest.mark.points(0)
def test_layer_norm_leaves_inputs_unchanged_without_warnings(student, expect, rng):
    """Does layer_norm leave x, gamma and beta untouched and run without numpy warnings?"""
    expect_clean_call(student, expect, student.layer_norm, *_args(rng, (3, 4, 8)),
                      what="layer_norm on ordinary tokens")
