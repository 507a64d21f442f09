"""Known wrong answers to the transformer-block assignment, each with a hint a student can act on.

Every variant takes the same arguments as the student function it stands in for (its `problem`)
and returns what a student with that misconception would return; it is built from the
reference's pieces with one thing changed. When a grader's `expect.close` fails, the variants
registered for that problem are run on the same inputs, and those that reproduce the student's
output name the mistake. Variants keep the reference's output shape and stay finite, since
`Catalogue.match` skips anything else.

Mistakes that no numeric output reveals (a missing exception, an overflow warning, a mutated
input) are registered without a variant; graders record them with `expect.diagnose(id)`.

Ids are `<problem>.<snake_case>`, the problem being the one whose function holds the mistake (a
misconception that shows in two functions gets one id in each), or `general.<snake_case>` for the
few that any function can have. Hints say what the student probably did and what to do instead,
in one or two sentences, and never contain numbers or hidden inputs.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from autograder.grading.diagnosis import LOWER_PRECISION, Catalogue

from . import reference as ref
from .stages import register as _register_stages

catalogue = Catalogue()

_MASK_FILL = -1e9   # a student's "large negative" fill: finite even when a row is fully blocked


# =========================================================================== layer_norm
# Reference: (x - mean) / sqrt(var + eps) * gamma + beta, statistics over the last axis.

def _standardise(x, axis=-1, ddof=0, eps=1e-5):
    """(x - mean) / sqrt(var + eps) with statistics over `axis` (an int or None for all axes)."""
    mean = np.mean(x, axis=axis, keepdims=True)
    var = np.var(x, axis=axis, keepdims=True, ddof=ddof)
    return (x - mean) / np.sqrt(var + eps)


@catalogue.mistake("layer_norm.unbiased_variance", hint="""
    Your LayerNorm seems to use the sample variance, dividing by one less than the number of
    features (as the ddof option of np.var does). LayerNorm uses the population variance: the
    mean of the squared deviations over the last axis.""")
def layer_norm_unbiased_variance(x, gamma, beta, eps=1e-5):
    return _standardise(x, ddof=1, eps=eps) * gamma + beta


@catalogue.mistake("layer_norm.eps_outside_sqrt", hint="""
    It looks as if eps was added to the standard deviation, outside the square root. Add eps to
    the variance and then take the square root: sqrt(var + eps).""")
def layer_norm_eps_outside_sqrt(x, gamma, beta, eps=1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    std = np.std(x, axis=-1, keepdims=True)
    return (x - mean) / (std + eps) * gamma + beta


@catalogue.mistake("layer_norm.no_eps", hint="""
    Your LayerNorm seems to ignore eps, which changes tokens whose features barely vary. Divide by
    sqrt(var + eps) using the eps argument.""")
def layer_norm_no_eps(x, gamma, beta, eps=1e-5):
    return _standardise(x, eps=0.0) * gamma + beta


@catalogue.mistake("layer_norm.wrong_axis", hint="""
    You seem to have normalised each feature along the first axis (axis=0: across the tokens, or
    across a batch), which is what BatchNorm-style code does. LayerNorm normalises each token over
    its own features: use axis=-1 with keepdims=True.""")
def layer_norm_wrong_axis(x, gamma, beta, eps=1e-5):
    return _standardise(x, axis=0, eps=eps) * gamma + beta


@catalogue.mistake("layer_norm.missing_axis", hint="""
    The mean and variance seem to be taken over the whole array, as np.mean(x) without an axis
    does. Compute them per token with axis=-1 and keepdims=True.""")
def layer_norm_missing_axis(x, gamma, beta, eps=1e-5):
    return _standardise(x, axis=None, eps=eps) * gamma + beta


@catalogue.mistake("layer_norm.no_mean_subtraction", hint="""
    Your LayerNorm seems to divide by the root mean square without subtracting the mean first,
    which is RMSNorm. LayerNorm centres each token, (x - mean), and divides by sqrt(var + eps).""")
def layer_norm_no_mean_subtraction(x, gamma, beta, eps=1e-5):
    return x / np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + eps) * gamma + beta


@catalogue.mistake("layer_norm.divides_by_variance", hint="""
    You seem to divide by the variance instead of the standard deviation. Divide the centred
    features by np.sqrt(var + eps).""")
def layer_norm_divides_by_variance(x, gamma, beta, eps=1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)
    return (x - mean) / (var + eps) * gamma + beta


@catalogue.mistake("layer_norm.gamma_beta_swapped", hint="""
    Gamma and beta seem to be swapped. The normalised features are multiplied by gamma (the
    scale) and then beta (the shift) is added.""")
def layer_norm_gamma_beta_swapped(x, gamma, beta, eps=1e-5):
    return ref.layer_norm(x, beta, gamma, eps)


@catalogue.mistake("layer_norm.missing_gamma_beta", hint="""
    Your output looks standardised but never scaled by gamma or shifted by beta. Finish with
    x_hat * gamma + beta.""")
def layer_norm_missing_gamma_beta(x, gamma, beta, eps=1e-5):
    return _standardise(x, eps=eps)


catalogue.add("layer_norm.default_eps", hint="""
    Your layer_norm is right whenever eps is passed to it, but its def line gives eps another default than
    the notebook's eps=1e-5, so every call that leaves eps out (as the tests and pre_ln_block do) is off.
    Keep the signature as given: def layer_norm(x, gamma, beta, eps=1e-5).""")


# =========================================================================== rms_norm
# Reference: x / sqrt(mean(x^2) + eps) * gamma, the mean over the last axis; no centring, no shift.

def _rms(x, axis=-1, eps=1e-6, *, total=False):
    """sqrt(mean(x^2) + eps) over `axis` (an int or None); `total` sums the squares instead."""
    squares = np.sum if total else np.mean
    return np.sqrt(squares(x * x, axis=axis, keepdims=True) + eps)


@catalogue.mistake("rms_norm.subtracts_mean", hint="""
    Your RMSNorm seems to centre each token first, which makes it LayerNorm without beta. RMSNorm
    divides the features themselves by their root mean square, without subtracting the mean.""")
def rms_norm_subtracts_mean(x, gamma, eps=1e-6):
    return _standardise(x, eps=eps) * gamma


@catalogue.mistake("rms_norm.eps_outside_sqrt", hint="""
    It looks as if eps was added after the square root. Add eps to the mean of the squares and then
    take the square root: sqrt(mean(x ** 2) + eps).""")
def rms_norm_eps_outside_sqrt(x, gamma, eps=1e-6):
    return x / (_rms(x, eps=0.0) + eps) * gamma


@catalogue.mistake("rms_norm.no_eps", hint="""
    Your RMSNorm seems to ignore eps, which changes tokens whose features are all close to zero.
    Divide by sqrt(mean(x ** 2) + eps) using the eps argument.""")
def rms_norm_no_eps(x, gamma, eps=1e-6):
    return x / _rms(x, eps=0.0) * gamma


@catalogue.mistake("rms_norm.missing_square_root", hint="""
    You seem to divide by the mean of the squares itself. Take its square root: the root mean square
    has the units of the features.""")
def rms_norm_missing_square_root(x, gamma, eps=1e-6):
    return x / (np.mean(x * x, axis=-1, keepdims=True) + eps) * gamma


@catalogue.mistake("rms_norm.sum_of_squares", hint="""
    You seem to divide by the length of the vector (the root of the sum of squares) rather than the
    root mean square. Average the squares over the d features: np.mean, not np.sum.""")
def rms_norm_sum_of_squares(x, gamma, eps=1e-6):
    return x / _rms(x, eps=eps, total=True) * gamma


@catalogue.mistake("rms_norm.wrong_axis", hint="""
    The mean square seems taken along the first axis (axis=0), across tokens or a batch. RMSNorm
    works on each token's own features: use axis=-1 with keepdims=True.""")
def rms_norm_wrong_axis(x, gamma, eps=1e-6):
    return x / _rms(x, axis=0, eps=eps) * gamma


@catalogue.mistake("rms_norm.missing_axis", hint="""
    The mean square seems taken over the whole array, as np.mean without an axis does. Take it per
    token with axis=-1 and keepdims=True.""")
def rms_norm_missing_axis(x, gamma, eps=1e-6):
    return x / _rms(x, axis=None, eps=eps) * gamma


@catalogue.mistake("rms_norm.missing_gamma", hint="""
    Your output looks normalised but never scaled by gamma. Multiply the normalised features by
    gamma, one scale per feature.""")
def rms_norm_missing_gamma(x, gamma, eps=1e-6):
    return x / _rms(x, eps=eps)


catalogue.add("rms_norm.default_eps", hint="""
    Your rms_norm is right whenever eps is passed to it, but its def line gives eps another default than
    the notebook's eps=1e-6, so every call that leaves eps out is off. Keep the signature as given:
    def rms_norm(x, gamma, eps=1e-6).""")


# =========================================================================== heads
# Reference split: (..., n, d) -> reshape (..., n, h, d_k) -> swap axes -> (..., h, n, d_k).
# Like the reference, the attention variants take split_heads and merge_heads as keyword-only parameters,
# the reference's by default: the engine also runs them on the student's own, so that an attention without
# its scale that calls a split_heads interleaving the features is still named for the scale. A variant whose
# mistake is a plain reshape in place of one of them takes both all the same and calls the other only.
_SPLIT, _MERGE = ref.split_heads, ref.merge_heads


def _split_reshape_only(x, n_heads):
    """(..., n, d) reshaped straight to (..., h, n, d_k): each 'head' gets a block of tokens."""
    *lead, n, d = x.shape
    return x.reshape(*lead, n_heads, n, d // n_heads)              # (..., h, n, d_k), scrambled


def _merge_reshape_only(x):
    """(..., h, n, d_k) reshaped straight to (..., n, h*d_k) without moving the head axis."""
    *lead, h, n, d_k = x.shape
    return x.reshape(*lead, n, h * d_k)                            # (..., n, d), scrambled


def _split_interleaved(x, n_heads):
    """Head i gets features i, i+h, i+2h, ... (reshape to (..., n, d_k, h))."""
    *lead, n, d = x.shape
    x = x.reshape(*lead, n, d // n_heads, n_heads)                 # (..., n, d_k, h)
    return np.moveaxis(x, -1, -3)                                  # (..., h, n, d_k)


def _merge_interleaved(x):
    """Concatenates with the head axis last, so head features interleave."""
    *lead, h, n, d_k = x.shape
    return np.moveaxis(x, -3, -1).reshape(*lead, n, h * d_k)       # (..., n, d)


_PROJECTIONS = ("W_Q", "W_K", "W_V", "W_O")


@catalogue.shared
def _transposed(W):
    """W.T: shared, so that the variants of one check transposing the same matrix get the same view, and
    `_heads` of it is computed once for them all."""
    return W.T


@catalogue.shared
def _heads(x, W, n_heads, split):
    """x projected by W and cut into heads by `split`: (..., n, d) -> (..., h, n, d_k). Shared, so that
    the variants of one check call a student's split_heads once per projection, not once per variant."""
    return split(x @ W, n_heads)


def _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *, split=_SPLIT, merge=_MERGE,
               scale=lambda d_model, d_k: math.sqrt(d_k), softmax_axis=-1,
               masking="before_softmax", project_out=True, transposed=()):
    """The reference attention with one knob turned; defaults reproduce the reference. `transposed` names
    the projections (of `_PROJECTIONS`) used as W.T."""
    W_Q, W_K, W_V, W_O = (_transposed(W) if name in transposed else W
                          for name, W in zip(_PROJECTIONS, (W_Q, W_K, W_V, W_O)))
    d_model = x.shape[-1]
    d_k = d_model // n_heads
    Q, K, V = (_heads(x, W, n_heads, split) for W in (W_Q, W_K, W_V))   # (..., h, n, d_k)
    scores = Q @ np.swapaxes(K, -1, -2) / scale(d_model, d_k)       # (..., h, n, n)
    if mask is not None and masking == "before_softmax":
        scores = np.where(mask, scores, -np.inf)
    elif mask is not None and masking == "inverted":
        scores = np.where(mask, _MASK_FILL, scores)
    weights = ref.softmax(scores, axis=softmax_axis)                 # (..., h, n, n)
    if mask is not None and masking == "after_softmax":
        weights = weights * mask
    out = merge(weights @ V)                                         # (..., n, d)
    return out @ W_O if project_out else out


@catalogue.mistake("split_heads.reshape_without_transpose", hint="""
    Your heads look like a plain reshape of (n, d_model) into (n_heads, n, d_k), which mixes
    tokens into the wrong heads. Reshape to (..., n, n_heads, d_k) first, then swap the token and
    head axes.""")
def split_heads_reshape_without_transpose(x, n_heads):
    return _split_reshape_only(np.asarray(x), n_heads)


@catalogue.mistake("multi_head_attention.reshape_without_transpose", hint="""
    Your attention seems to split the heads by a plain reshape of (n, d_model) into
    (n_heads, n, d_k), which mixes tokens into the wrong heads. Split with split_heads, or reshape
    to (..., n, n_heads, d_k) and swap the token and head axes.""")
def mha_reshape_without_transpose(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                                  split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, split=_split_reshape_only, merge=merge_heads)


@catalogue.mistake("merge_heads.reshape_without_transpose", hint="""
    The heads seem to be merged by reshaping (n_heads, n, d_k) straight to (n, d_model), which
    interleaves tokens. Swap the head and token axes back first, then reshape to (..., n, d_model).""")
def merge_heads_without_transpose(x):
    return _merge_reshape_only(np.asarray(x))


@catalogue.mistake("multi_head_attention.merge_without_transpose", hint="""
    Your attention seems to merge the heads by reshaping (n_heads, n, d_k) straight to
    (n, d_model), which interleaves tokens. Merge with merge_heads, or swap the head and token axes
    back before the reshape.""")
def mha_merge_without_transpose(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                                split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, split=split_heads, merge=_merge_reshape_only)


@catalogue.mistake("multi_head_attention.reshape_without_transpose_both_ways", hint="""
    Your attention seems to split and merge heads by plain reshapes, so each head attends over a
    block of tokens instead of a slice of features. Split with a reshape to (..., n, n_heads, d_k)
    and an axis swap, and undo both when merging.""")
def mha_reshape_without_transpose_both_ways(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, split=_split_reshape_only,
                      merge=_merge_reshape_only)


@catalogue.mistake("split_heads.interleaved_features", hint="""
    Your heads seem to take every n_heads-th feature, as a reshape to (..., n, d_k, n_heads)
    does. Each head should own a contiguous slice of d_k features: reshape to
    (..., n, n_heads, d_k) before moving the head axis.""")
def split_heads_interleaved_features(x, n_heads):
    return _split_interleaved(np.asarray(x), n_heads)


@catalogue.mistake("merge_heads.interleaved_features", hint="""
    The merged features seem interleaved across heads, as when the head axis ends up last before
    the reshape. Move the head axis next to d_k, as (..., n, n_heads, d_k), so each head's features
    stay together.""")
def merge_heads_interleaved_features(x):
    return _merge_interleaved(np.asarray(x))


# The error for a width that n_heads does not divide is graded in two parts (graders/test_split_heads.py):
# its type, named no_value_error when it is not ValueError (an assert's AssertionError, or no error at all),
# and its message, named unclear_value_error when it does not say what is wrong (numpy's own reshape error,
# what a split_heads without a check of its own raises, or a vague or missing message of the student's own).
catalogue.add("split_heads.no_value_error", hint="""
    split_heads should raise ValueError when d_model is not divisible by n_heads: raise ValueError, not assert,
    which raises AssertionError instead (and is skipped altogether under python -O). Check d_model % n_heads
    before reshaping and raise ValueError yourself, with a message that names both numbers.""")

catalogue.add("split_heads.unclear_value_error", hint="""
    The error your split_heads raises when d_model is not divisible by n_heads does not say what is wrong:
    numpy's reshape error (all that a split_heads without a check of its own gives) names only the array's
    size and the shape asked for, and a vague message or a bare assert says no more. Check d_model % n_heads
    before reshaping and raise ValueError yourself, with a message that gives both numbers.""")

catalogue.add("general.mutates_input", hint="""
    Your function changed one of its input arrays in place, as an augmented assignment to an argument
    (x -= ..., x *= ...) or an assignment into its elements (x[...] = ...) does. Compute into new arrays
    (y = x * ...) and leave the caller's arrays alone.""")

catalogue.add("general.float32_upcast", hint="""
    Float32 inputs came back as float64: under NumPy 2's promotion rules anything float64 in the
    computation (an explicit cast such as np.asarray(x, dtype=float) or .astype(np.float64), a NumPy
    float64 scalar such as np.float64(eps) or np.sqrt(d_k), a float64 array such as a boolean mask
    turned into numbers by (1 - mask) * -1e9) turns a float32 array into float64. Keep the input's
    dtype: Python floats for constants (math.sqrt(d_k)), .astype(x.dtype) where a cast is needed, and
    np.where(mask, scores, -np.inf) for masks.""")

catalogue.add(LOWER_PRECISION, hint="""
    Your function seems to compute in float32 (or another lower precision) although its inputs are
    float64: its answer does not change when x changes by less than float32 can tell apart, and is
    off by about float32's rounding. Keep the input's dtype: drop the .astype(np.float32) or
    np.float32(...) and compute with the arrays as they are given.""")

# The engine recognises LOWER_PRECISION itself (autograder.grading.checks.Expect._lower_precision), before
# the catalogue's variants and the probes of stages.py: a norm computed in float32 would otherwise trip the
# probes' first precise property and be named as some stage (eps handling).


# =========================================================================== multi_head_attention

@catalogue.mistake("multi_head_attention.missing_scale", hint="""
    The attention scores seem unscaled. Divide Q K^T by sqrt(d_k) before the softmax.""")
def mha_missing_scale(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                      split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, scale=lambda d, d_k: 1.0,
                      split=split_heads, merge=merge_heads)


@catalogue.mistake("multi_head_attention.scale_by_d_k", hint="""
    The scores seem divided by d_k itself. Scale them by the square root of d_k.""")
def mha_scale_by_d_k(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                     split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, scale=lambda d, d_k: d_k,
                      split=split_heads, merge=merge_heads)


@catalogue.mistake("multi_head_attention.scale_by_d_model", hint="""
    The scores seem divided by d_model. Each head's dot products run over d_k features, so divide
    by sqrt(d_k).""")
def mha_scale_by_d_model(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                         split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, scale=lambda d, d_k: d,
                      split=split_heads, merge=merge_heads)


@catalogue.mistake("multi_head_attention.scale_by_sqrt_d_model", hint="""
    The scores seem divided by sqrt(d_model), the single-head scale. With several heads each dot
    product has only d_k terms: divide by sqrt(d_k) with d_k = d_model // n_heads.""")
def mha_scale_by_sqrt_d_model(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                              split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, scale=lambda d, d_k: math.sqrt(d),
                      split=split_heads, merge=merge_heads)


@catalogue.mistake("multi_head_attention.softmax_wrong_axis", hint="""
    The softmax seems to run down the columns of the score matrix (over queries). Normalise each
    query's row over the keys: softmax along the last axis.""")
def mha_softmax_wrong_axis(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                           split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, softmax_axis=-2,
                      split=split_heads, merge=merge_heads)


@catalogue.mistake("multi_head_attention.mask_inverted", hint="""
    Your mask seems inverted: True entries were blocked. In this assignment True means the query
    may attend to that key, so set the scores where the mask is False to -inf.""")
def mha_mask_inverted(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                      split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, masking="inverted",
                      split=split_heads, merge=merge_heads)


@catalogue.mistake("multi_head_attention.mask_ignored", hint="""
    The mask argument seems to have no effect. Where mask is False, replace the score with -inf
    before the softmax.""")
def mha_mask_ignored(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                     split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, None, split=split_heads, merge=merge_heads)


@catalogue.mistake("multi_head_attention.mask_after_softmax", hint="""
    The blocked weights seem zeroed after the softmax, so the remaining weights no longer sum to
    one. Apply the mask to the scores (set them to -inf) before the softmax.""")
def mha_mask_after_softmax(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                           split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, masking="after_softmax",
                      split=split_heads, merge=merge_heads)


@catalogue.mistake("multi_head_attention.missing_output_projection", hint="""
    Your output looks like the merged heads without the output projection. Multiply the merged
    heads by W_O.""")
def mha_missing_output_projection(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                                  split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, project_out=False,
                      split=split_heads, merge=merge_heads)


@catalogue.mistake("multi_head_attention.weights_transposed", hint="""
    The projections seem to use W.T, the nn.Linear convention. Here weights multiply from the
    right: Q = x @ W_Q, and likewise for K, V and the output.""")
def mha_weights_transposed(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                           split_heads=_SPLIT, merge_heads=_MERGE):
    return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, transposed=_PROJECTIONS,
                      split=split_heads, merge=merge_heads)


def _in_words(names):
    """'W_Q', 'W_Q and W_K', 'W_Q, W_K and W_V'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _letters(names):
    """'q_k_v' for W_Q, W_K and W_V."""
    return "_".join(name[-1].lower() for name in names)


def _some_weights_transposed(names):
    """The variant with the projections `names` (some of the four, not all) used as W.T."""
    def variant(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *, split_heads=_SPLIT, merge_heads=_MERGE):
        return _attention(x, W_Q, W_K, W_V, W_O, n_heads, mask, transposed=names,
                          split=split_heads, merge=merge_heads)
    variant.__name__ = variant.__qualname__ = f"mha_only_{_letters(names)}_transposed"
    return variant


# Some of the projections used as W.T and the others not (the transposes copied into some lines only, or
# W_O, which multiplies the merged heads, written apart from the three that make Q, K and V): each subset
# is a mistake of its own, whose id and hint name the transposed ones. Id -> the transposed projections.
SOME_WEIGHTS_TRANSPOSED = {
    f"multi_head_attention.only_{_letters(names)}_transposed": names
    for size in (3, 2, 1) for names in itertools.combinations(_PROJECTIONS, size)
}


def _register_some_weights_transposed():
    for mistake_id, names in SOME_WEIGHTS_TRANSPOSED.items():
        rest = tuple(name for name in _PROJECTIONS if name not in names)
        catalogue.add(mistake_id, variant=_some_weights_transposed(names), hint=f"""
            Your attention seems to use {_in_words(names)} transposed (W.T, the nn.Linear convention) but not
            {_in_words(rest)}. Here every weight multiplies from the right, as in Q = x @ W_Q and merged @ W_O:
            drop the .T wherever you wrote it.""")


_register_some_weights_transposed()


catalogue.add("multi_head_attention.softmax_overflow", hint="""
    Large attention scores overflowed in exp, giving warnings or non-finite weights. Subtract each
    row's maximum from the scores before exponentiating.""")


# =========================================================================== pre_ln_block
# Reference: h = x + MHA(LN1(x)); out = h + FFN(LN2(h)). Most variants share LN1(x) and the attention
# on it: the helpers are `shared`, so a check's variants compute them once.
# Like the reference, each variant takes the block's building blocks as keyword-only parameters, the
# reference's by default: the engine also runs it on the student's own layer_norm and
# multi_head_attention, so that a Post-LN block built on a wrong layer_norm is still named Post-LN.
_LN, _MHA = ref.layer_norm, ref.multi_head_attention
_OTHER_LN_EPS = 1e-6     # the LayerNorm epsilon of several libraries' transformer configurations


@catalogue.shared
def _ln(x, p, which, layer_norm=_LN, eps=None):
    gamma, beta = p[f"ln{which}_gamma"], p[f"ln{which}_beta"]
    return layer_norm(x, gamma, beta) if eps is None else layer_norm(x, gamma, beta, eps=eps)


@catalogue.shared
def _mha(x, p, n_heads, mask, multi_head_attention=_MHA):
    return multi_head_attention(x, p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask)


@catalogue.shared
def _ffn(x, p, activation=ref.gelu):
    return activation(x @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]


def _exact_gelu(x):
    """x * Phi(x) with the normal CDF from erf."""
    x = np.asarray(x)
    return 0.5 * x * (1.0 + np.vectorize(math.erf, otypes=[x.dtype])(x / math.sqrt(2.0)))


@catalogue.mistake("pre_ln_block.post_ln", hint="""
    Your block normalises after each residual addition, which is the Post-LN ordering. In a Pre-LN
    block the LayerNorm goes inside each branch: h = x + MHA(LN1(x)) and out = h + FFN(LN2(h)).""")
def block_post_ln(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    h = _ln(x + _mha(x, params, n_heads, mask, multi_head_attention), params, 1, layer_norm)
    return _ln(h + _ffn(h, params), params, 2, layer_norm)


@catalogue.mistake("pre_ln_block.missing_residual", hint="""
    Neither sublayer's output seems added back to its input. Keep both residual connections:
    h = x + MHA(LN1(x)) and out = h + FFN(LN2(h)).""")
def block_missing_residual(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    h = _mha(_ln(x, params, 1, layer_norm), params, n_heads, mask, multi_head_attention)
    return _ffn(_ln(h, params, 2, layer_norm), params)


@catalogue.mistake("pre_ln_block.missing_attention_residual", hint="""
    The attention output seems to replace x instead of being added to it. Compute
    h = x + MHA(LN1(x)).""")
def block_missing_attention_residual(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    h = _mha(_ln(x, params, 1, layer_norm), params, n_heads, mask, multi_head_attention)
    return h + _ffn(_ln(h, params, 2, layer_norm), params)


@catalogue.mistake("pre_ln_block.missing_feed_forward_residual", hint="""
    The feed-forward output seems to replace h instead of being added to it. Return
    h + FFN(LN2(h)).""")
def block_missing_ffn_residual(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    h = x + _mha(_ln(x, params, 1, layer_norm), params, n_heads, mask, multi_head_attention)
    return _ffn(_ln(h, params, 2, layer_norm), params)


@catalogue.mistake("pre_ln_block.residual_adds_normalised_input", hint="""
    The residual seems to add the normalised input (LN(x) + MHA(LN(x))) rather than x itself.
    Normalise only the branch input and add the branch output to the un-normalised stream.""")
def block_residual_adds_normalised_input(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    a = _ln(x, params, 1, layer_norm)
    h = a + _mha(a, params, n_heads, mask, multi_head_attention)
    f = _ln(h, params, 2, layer_norm)
    return f + _ffn(f, params)


@catalogue.mistake("pre_ln_block.post_ln_feed_forward_only", hint="""
    The attention half looks Pre-LN but the feed-forward half looks Post-LN (LN2 applied after
    adding the residual). Use the same Pre-LN pattern in both halves: out = h + FFN(LN2(h)).""")
def block_ln_after_residual_in_ffn_only(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    h = x + _mha(_ln(x, params, 1, layer_norm), params, n_heads, mask, multi_head_attention)
    return _ln(h + _ffn(h, params), params, 2, layer_norm)


@catalogue.mistake("pre_ln_block.shared_layer_norm", hint="""
    Both sublayers seem to use the first LayerNorm's gamma and beta. The feed-forward branch has
    its own LayerNorm: use ln2_gamma and ln2_beta there.""")
def block_shared_layer_norm(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    h = x + _mha(_ln(x, params, 1, layer_norm), params, n_heads, mask, multi_head_attention)
    return h + _ffn(_ln(h, params, 1, layer_norm), params)


@catalogue.mistake("pre_ln_block.relu_instead_of_gelu", hint="""
    The feed-forward network seems to use ReLU. This block uses GELU (the tanh form) between the
    two linear layers.""")
def block_relu_instead_of_gelu(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    h = x + _mha(_ln(x, params, 1, layer_norm), params, n_heads, mask, multi_head_attention)
    return h + _ffn(_ln(h, params, 2, layer_norm), params, lambda z: np.maximum(z, 0.0))


@catalogue.mistake("pre_ln_block.no_activation", hint="""
    The feed-forward network seems to have no activation between its two linear layers. Apply
    gelu to x @ W1 + b1 before multiplying by W2.""")
def block_no_ffn_activation(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    h = x + _mha(_ln(x, params, 1, layer_norm), params, n_heads, mask, multi_head_attention)
    return h + _ffn(_ln(h, params, 2, layer_norm), params, lambda z: z)


@catalogue.mistake("pre_ln_block.mask_not_passed", hint="""
    The block's attention seems to ignore the mask. Pass the block's mask argument on to
    multi_head_attention.""")
def block_mask_not_passed(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    return ref.pre_ln_block(x, params, n_heads, None, layer_norm=layer_norm,
                            multi_head_attention=multi_head_attention)


@catalogue.mistake("pre_ln_block.exact_gelu", hint="""
    The feed-forward network seems to use the exact erf-based GELU. This assignment uses the tanh
    approximation of GELU, the form your notebook's gelu implements.""")
def gelu_exact_instead_of_tanh(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    h = x + _mha(_ln(x, params, 1, layer_norm), params, n_heads, mask, multi_head_attention)
    return h + _ffn(_ln(h, params, 2, layer_norm), params, _exact_gelu)


@catalogue.mistake("pre_ln_block.smaller_layer_norm_eps", hint="""
    Your block seems to give its LayerNorms a smaller eps than the course's, as some libraries' transformer
    settings do. Call layer_norm without an eps argument, so that both LayerNorms use the eps it defaults to.""")
def block_smaller_layer_norm_eps(x, params, n_heads, mask=None, *, layer_norm=_LN, multi_head_attention=_MHA):
    h = x + _mha(_ln(x, params, 1, layer_norm, _OTHER_LN_EPS), params, n_heads, mask, multi_head_attention)
    return h + _ffn(_ln(h, params, 2, layer_norm, _OTHER_LN_EPS), params)


# =========================================================================== silu

@catalogue.mistake("silu.sigmoid_only", hint="""
    Your silu seems to return sigmoid(x) alone. SiLU multiplies the input by its sigmoid:
    x * sigmoid(x).""")
def silu_sigmoid_only(x):
    return ref._sigmoid(np.asarray(x))


@catalogue.mistake("silu.relu", hint="""
    Your silu behaves like ReLU. SiLU is the smooth x * sigmoid(x), slightly negative for
    negative inputs.""")
def silu_relu(x):
    return np.maximum(np.asarray(x), 0.0)


@catalogue.mistake("silu.sign_flipped", hint="""
    Your silu seems to use sigmoid(-x), as x / (1 + exp(x)) does. The sigmoid is
    1 / (1 + exp(-x)).""")
def silu_sign_flipped(x):
    x = np.asarray(x)
    return x * ref._sigmoid(-x)


catalogue.add("silu.exp_overflow", hint="""
    exp overflowed for inputs of large magnitude, giving a warning or a non-finite value; choosing
    between two formulas with np.where does not help, since np.where evaluates both of them for every
    element. Compute e = exp(-|x|) once, which never overflows, and build both forms of the sigmoid
    from it.""")


# =========================================================================== swiglu_ffn
# Reference: (silu(x W_gate) * (x W_up)) W_down. The variants that call silu take it as a keyword-only
# parameter, as the reference does, so that the engine also runs them on the student's own silu.
_SILU = ref.silu


@catalogue.mistake("swiglu_ffn.gate_on_up_branch", hint="""
    SiLU seems to be applied to the up branch instead of the gate branch. Use
    silu(x @ W_gate) * (x @ W_up).""")
def swiglu_gate_on_up_branch(x, W_gate, W_up, W_down, *, silu=_SILU):
    return ((x @ W_gate) * silu(x @ W_up)) @ W_down


@catalogue.mistake("swiglu_ffn.no_silu", hint="""
    The gate branch seems to have no activation. Apply silu to x @ W_gate before multiplying by
    the up branch.""")
def swiglu_no_silu(x, W_gate, W_up, W_down):
    return ((x @ W_gate) * (x @ W_up)) @ W_down


@catalogue.mistake("swiglu_ffn.sigmoid_instead_of_silu", hint="""
    The gate seems to use a plain sigmoid, which is GLU. SwiGLU's gate is silu(z) = z * sigmoid(z).""")
def swiglu_sigmoid_instead_of_silu(x, W_gate, W_up, W_down):
    return (ref._sigmoid(x @ W_gate) * (x @ W_up)) @ W_down


@catalogue.mistake("swiglu_ffn.gelu_instead_of_silu", hint="""
    The gate seems to use GELU, which is GeGLU. SwiGLU's gate uses silu.""")
def swiglu_gelu_instead_of_silu(x, W_gate, W_up, W_down):
    return (ref.gelu(x @ W_gate) * (x @ W_up)) @ W_down


@catalogue.mistake("swiglu_ffn.silu_on_both_branches", hint="""
    SiLU seems to be applied to both branches. Only the gate branch goes through silu; the up
    branch stays linear.""")
def swiglu_silu_on_both_branches(x, W_gate, W_up, W_down, *, silu=_SILU):
    return (silu(x @ W_gate) * silu(x @ W_up)) @ W_down


@catalogue.mistake("swiglu_ffn.silu_before_gate_projection", hint="""
    SiLU seems to be applied to x before the gate projection, as silu(x) @ W_gate. Project first and apply
    silu to the result: silu(x @ W_gate).""")
def swiglu_silu_before_gate_projection(x, W_gate, W_up, W_down, *, silu=_SILU):
    return ((silu(x) @ W_gate) * (x @ W_up)) @ W_down


@catalogue.mistake("swiglu_ffn.silu_after_product", hint="""
    SiLU seems to be applied after multiplying the two branches. Apply silu to the gate branch
    first, then multiply by the up branch.""")
def swiglu_silu_after_product(x, W_gate, W_up, W_down, *, silu=_SILU):
    return silu((x @ W_gate) * (x @ W_up)) @ W_down


# =========================================================================== count_block_params
# Reference: 4 d^2 + (4 d | 2 d for RMSNorm) + (2 d d_ff + d_ff + d | 3 d d_ff).

def _count(d, f, ffn, norm="layernorm", *, attention=None, norms=None, gelu_ffn=None, swiglu_ffn=None):
    """The reference count with any of its four terms replaced."""
    if ffn not in ("gelu", "swiglu"):
        raise ValueError(f"ffn must be 'gelu' or 'swiglu', got {ffn!r}")
    if norm not in ("layernorm", "rmsnorm"):
        raise ValueError(f"norm must be 'layernorm' or 'rmsnorm', got {norm!r}")
    d, f = int(d), int(f)
    attention = 4 * d * d if attention is None else attention
    norms = _norm_count(d, norm) if norms is None else norms
    if ffn == "gelu":
        return attention + norms + (2 * d * f + f + d if gelu_ffn is None else gelu_ffn)
    return attention + norms + (3 * d * f if swiglu_ffn is None else swiglu_ffn)


def _norm_count(d, norm):
    """Two norms: gamma and beta each for LayerNorm, gamma only for RMSNorm."""
    return 4 * int(d) if norm == "layernorm" else 2 * int(d)


@catalogue.mistake("count_block_params.missing_norm_params", hint="""
    Your count seems to leave out the two norms. Each LayerNorm has a gamma and a beta of d_model
    entries, each RMSNorm a gamma of d_model entries.""")
def count_missing_norm_params(d_model, d_ff, ffn, norm="layernorm"):
    return _count(d_model, d_ff, ffn, norm, norms=0)


@catalogue.mistake("count_block_params.one_norm", hint="""
    Your count seems to include only half the norm parameters. The block has two norms, one before
    each sublayer, and each has its own parameters of d_model entries.""")
def count_one_norm(d_model, d_ff, ffn, norm="layernorm"):
    return _count(d_model, d_ff, ffn, norm, norms=_norm_count(d_model, norm) // 2)


@catalogue.mistake("count_block_params.rmsnorm_with_beta", hint="""
    Your RMSNorm count seems to include a beta. RMSNorm has no shift: each of the two norms has
    only gamma, of d_model entries.""")
def count_rmsnorm_with_beta(d_model, d_ff, ffn, norm="layernorm"):
    return _count(d_model, d_ff, ffn, norm, norms=_norm_count(d_model, "layernorm"))


@catalogue.mistake("count_block_params.missing_feed_forward_biases", hint="""
    The GELU feed-forward count seems to leave out its biases. It has b1 of d_ff entries and b2 of
    d_model entries besides W1 and W2.""")
def count_missing_ffn_biases(d_model, d_ff, ffn, norm="layernorm"):
    return _count(d_model, d_ff, ffn, norm, gelu_ffn=2 * int(d_model) * int(d_ff))


@catalogue.mistake("count_block_params.attention_biases", hint="""
    Your count seems to give the attention projections biases. In this block W_Q, W_K, W_V and W_O
    have no biases, so attention is four d_model by d_model matrices.""")
def count_attention_biases(d_model, d_ff, ffn, norm="layernorm"):
    d = int(d_model)
    return _count(d_model, d_ff, ffn, norm, attention=4 * d * d + 4 * d)


@catalogue.mistake("count_block_params.missing_output_projection", hint="""
    The attention count seems to stop at W_Q, W_K and W_V. Add the output projection W_O, another
    d_model by d_model matrix.""")
def count_missing_output_projection(d_model, d_ff, ffn, norm="layernorm"):
    d = int(d_model)
    return _count(d_model, d_ff, ffn, norm, attention=3 * d * d)


@catalogue.mistake("count_block_params.swiglu_two_matrices", hint="""
    The SwiGLU feed-forward seems counted with two matrices, like the GELU one. SwiGLU has three:
    W_gate and W_up of shape (d_model, d_ff) and W_down of shape (d_ff, d_model).""")
def count_swiglu_two_matrices(d_model, d_ff, ffn, norm="layernorm"):
    return _count(d_model, d_ff, ffn, norm, swiglu_ffn=2 * int(d_model) * int(d_ff))


@catalogue.mistake("count_block_params.ignores_d_ff", hint="""
    Your count seems to assume the hidden width is four times d_model. Use the d_ff argument for
    the feed-forward matrices.""")
def count_ignores_d_ff(d_model, d_ff, ffn, norm="layernorm"):
    return _count(d_model, 4 * int(d_model), ffn, norm)


catalogue.add("count_block_params.no_value_error", hint="""
    count_block_params should raise ValueError for an ffn other than "gelu" or "swiglu" and for a norm other
    than "layernorm" or "rmsnorm". An assert raises AssertionError instead (and is skipped altogether under
    python -O), a dictionary lookup raises KeyError, and an else branch that takes any other name for the
    second allowed one raises nothing: compare each argument with its two names and raise ValueError
    yourself, with a message that gives the name it got.""")


# =========================================================================== when nothing here matches
# Probes that localise the stage a function gets wrong (assignments/transformer_block/stages.py).
_register_stages(catalogue)
