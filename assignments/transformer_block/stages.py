"""Where a wrong function goes wrong, when no catalogued mistake explains it.

Each problem has a probe: it calls the student's own function (through the proxy) on inputs built so
that one stage at a time can be wrong while the others are trivial or already shown right, and yields
the id of each stage whose property fails, earliest stage first. The inputs are fixed here (their
own seeds), never the hidden ones, so a localisation does not depend on the student's hidden seed.
Hints name the stage and the property, never an expected value.

Composites (multi_head_attention, pre_ln_block, swiglu_ffn) are judged the way the graders judge
them: an answer is right when it is the reference's or the wiring of the student's own building
blocks (`context.accepts`), so a stage is never blamed for a building block's mistake.
"""
from __future__ import annotations

import inspect
import math

import numpy as np

from autograder.grading.diagnosis import Catalogue, ProbeContext

from . import reference as ref

STAGES = {
    # layer_norm
    "layer_norm.statistics_across_tokens": """
        Changing one token changes the output of another: the mean and variance must come from each
        token's own features only, over the last axis (axis=-1, keepdims=True), whatever the leading axes.""",
    "layer_norm.not_centred": """
        With gamma = 1 and beta = 0 your tokens do not come out with mean zero: the centring stage,
        subtracting each token's own mean, is off.""",
    "layer_norm.spread_off_by_constant_factor": """
        Centred correctly, but every token's spread is off by the same factor: the scaling stage should
        divide by the square root of the population variance (divide by d) plus eps.""",
    "layer_norm.spread_not_normalised": """
        Centred correctly, but the tokens do not come out with variance one: the scaling stage should
        divide each centred token by the square root of its own variance plus eps.""",
    "layer_norm.eps_handling": """
        Ordinary tokens come out right but nearly constant ones do not (or the eps argument has no
        effect): eps must be added to the variance inside the square root, using the eps argument.""",
    "layer_norm.scale_and_shift": """
        The output does not follow gamma and beta as it should: the last stage multiplies the normalised
        tokens by gamma, then adds beta, each with one entry per feature, and adds nothing else (eps
        belongs inside the square root).""",
    # rms_norm
    "rms_norm.statistics_across_tokens": """
        Changing one token changes the output of another: the mean of the squares must come from each
        token's own features only, over the last axis (axis=-1, keepdims=True).""",
    "rms_norm.shifts_tokens": """
        With gamma = 1 each token should only be rescaled (every feature divided by the same number):
        RMSNorm does not subtract the mean or shift the features in any other way.""",
    "rms_norm.scale_off_by_constant_factor": """
        Every token's root mean square comes out off by the same factor: divide by the square root of
        the mean (not the sum) of the squared features, plus eps.""",
    "rms_norm.scale_not_normalised": """
        With gamma = 1 the tokens do not come out with mean square one: divide each token by the root
        of the mean of its squared features (plus eps), without centring it first.""",
    "rms_norm.eps_handling": """
        Ordinary tokens come out right but tokens near zero do not (or the eps argument has no
        effect): eps must be added to the mean of the squares inside the square root.""",
    "rms_norm.gamma": """
        The output does not follow gamma as it should: the last stage multiplies the normalised tokens by
        gamma, one entry per feature, and adds nothing (eps belongs inside the square root).""",
    # split_heads / merge_heads
    "split_heads.values_changed": """
        The result holds numbers that are not entries of x: split_heads only moves entries, with a
        reshape and an axis swap, and never computes new ones.""",
    "split_heads.axes_in_wrong_order": """
        The result holds x's entries, but its axes are not (..., n_heads, n, d_k): reshape the last axis
        into (n_heads, d_k), then swap the token and head axes.""",
    "split_heads.batch_axes_mixed": """
        Without leading axes the heads come out right, but leading (batch) axes are moved or mixed:
        use negative axes (-3, -2, -1) so any leading axes stay where they are.""",
    "split_heads.tokens_mixed_into_heads": """
        A head's rows hold entries of other tokens: each (head, token) row must come from that token
        only, which a reshape to (..., n, n_heads, d_k) followed by an axis swap gives.""",
    "split_heads.features_in_wrong_heads": """
        Each token stays in its row, but the features go to the wrong heads: head i must hold the
        contiguous slice of features from i*d_k up to (i+1)*d_k, in order.""",
    "merge_heads.values_changed": """
        The result holds numbers that are not entries of the input: merge_heads only moves entries.""",
    "merge_heads.axes_in_wrong_order": """
        The result holds the input's entries, but its axes are not (..., n, n_heads * d_k): swap the head
        and token axes back, then reshape the last two axes into one.""",
    "merge_heads.batch_axes_mixed": """
        Without leading axes the heads are merged right, but leading (batch) axes are moved or mixed:
        use negative axes so any leading axes stay where they are.""",
    "merge_heads.tokens_mixed": """
        A token's merged row holds entries of other tokens: bring the token axis in front of the head
        axis before reshaping.""",
    "merge_heads.heads_not_side_by_side": """
        Each token's row holds its own entries, but not head after head: features from i*d_k up to
        (i+1)*d_k must be head i's, in order.""",
    # multi_head_attention
    "multi_head_attention.output_projection": """
        The output projection stage is off: changing W_O does not act as one final matrix product
        merged @ W_O on the merged heads.""",
    "multi_head_attention.averaging_values": """
        With equal scores every query should get the plain average of the value vectors: the stage that
        projects the values (x @ W_V) and weights them with rows that sum to one over the keys is off.""",
    "multi_head_attention.masking": """
        Without a mask the attention is right, with one it is not: where mask is False the score must
        become -inf before the softmax, so that query gives that key weight exactly zero.""",
    "multi_head_attention.scores_scaled_by_another_constant": """
        Your attention equals the right one computed with a different scale: the scores must be divided
        by sqrt(d_k), the width of one head.""",
    "multi_head_attention.scores": """
        With equal scores the attention is right, with real ones it is not: the scores stage should be
        Q K^T (queries from W_Q, keys from W_K) divided by sqrt(d_k), softmaxed over the keys.""",
    "multi_head_attention.heads": """
        With one head the attention is right, with several it is not: each head must attend with its own
        slice of Q, K and V (split_heads), and the heads' outputs must be put back side by side (merge_heads).""",
    "multi_head_attention.batch_axes": """
        For a single sequence the attention is right, with leading (batch) axes it is not: keep every
        operation on the last axes (negative axes, np.swapaxes(K, -1, -2) rather than K.T).""",
    # pre_ln_block
    "pre_ln_block.residual_path": """
        With both sublayers switched off (W_O, W2 and b2 zero) the block must return x unchanged: the
        residual stage, x + ... then h + ..., with no normalisation after the sums, is off.""",
    "pre_ln_block.norm_parameters_mixed_up": """
        The block is right when both norms have the same gamma and beta, but not otherwise: LN1
        (ln1_gamma, ln1_beta) goes before the attention, LN2 (ln2_gamma, ln2_beta) before the FFN.""",
    "pre_ln_block.attention_half": """
        With the FFN switched off the block should be x + MHA(LN1(x)): the attention half (its input
        LN1(x), with layer_norm's own default eps and no other, its parameters, and adding its output to x
        itself) is off.""",
    "pre_ln_block.mask_not_reaching_attention": """
        The block is right without a mask but not with one: pass the block's mask on to
        multi_head_attention.""",
    "pre_ln_block.feed_forward_residual": """
        With the attention switched off and an FFN that outputs a constant, the block should be x plus
        that constant: the FFN's output must be added to its input h, with nothing after the sum.""",
    "pre_ln_block.feed_forward_half": """
        With the attention switched off the block should be h + FFN(LN2(h)): the feed-forward half (its
        input LN2(h), with layer_norm's own default eps and no other, gelu between W1 + b1 and W2 + b2) is off.""",
    "pre_ln_block.halves_not_chained": """
        Each half is right on its own but the whole block is not: the FFN must read h = x + MHA(LN1(x)),
        the attention half's result, and the block returns h + FFN(LN2(h)).""",
    "pre_ln_block.batch_axes": """
        For a single sequence the block is right, with leading (batch) axes it is not: keep every
        operation on the last axes.""",
    # silu
    "silu.sigmoid_part": """
        silu(x) / x is not a sigmoid of x (between 0 and 1, with sigmoid(x) + sigmoid(-x) = 1): the
        sigmoid stage, 1 / (1 + exp(-x)), is off, or x is not multiplied by it.""",
    "silu.negative_inputs": """
        silu is right for positive inputs but not for negative ones: use a form of the sigmoid that is
        right on both sides (for x < 0, exp(x) / (1 + exp(x)) = e / (1 + e) with e = exp(-|x|)).""",
    "silu.positive_inputs": """
        silu is right for negative inputs but not for positive ones: use a form of the sigmoid that is
        right on both sides (for x >= 0, 1 / (1 + e) with e = exp(-|x|)).""",
    "silu.large_inputs": """
        silu is right for ordinary inputs but not for inputs of large magnitude: compute the sigmoid
        from e = exp(-|x|), which stays exact and finite however large |x| is.""",
    # swiglu_ffn
    "swiglu_ffn.down_projection": """
        The down projection stage is off: changing W_down does not act as one final matrix product
        (gate * up) @ W_down.""",
    "swiglu_ffn.gate_not_multiplied": """
        With W_up = 0 the output should be zero, since the gate multiplies the up branch: combine the
        two branches with an element-wise product.""",
    "swiglu_ffn.up_branch_not_linear": """
        Doubling W_up should exactly double the output: the up branch x @ W_up must stay linear, with
        no activation on it or after the product.""",
    "swiglu_ffn.gate_activation": """
        The gate stage is off: the gate is silu(x @ W_gate), your own silu applied to the gate branch.""",
    # count_block_params
    "count_block_params.feed_forward_term": """
        The count is off by an amount that changes with d_ff: recount the feed-forward network's weight
        matrices (and, for GELU, its hidden bias).""",
    "count_block_params.attention_term": """
        The count is off by an amount that grows like d_model squared: recount the attention projections
        W_Q, W_K, W_V and W_O.""",
    "count_block_params.per_feature_terms": """
        The count is off by an amount that grows at most like d_model: recount the per-feature vectors
        (each norm's gamma, and beta for LayerNorm, and the GELU network's output bias).""",
    "count_block_params.norm_option": """
        The LayerNorm count is right but the RMSNorm one is not: with norm="rmsnorm" each of the two norms
        has a gamma of d_model entries and no beta.""",
}


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _tokens(rng, shape, low=0.5, high=3.0):
    """Tokens with their own offset and a spread between `low` and `high`."""
    shift = rng.uniform(-2.0, 2.0, size=(*shape[:-1], 1))
    scale = rng.uniform(low, high, size=(*shape[:-1], 1))
    return shift + scale * rng.standard_normal(shape)


def _close(a, b, rtol=1e-6, atol=1e-8) -> bool:
    """Every entry of `a` close to `b` (b broadcast to a's shape: a number, a row, a column)."""
    a, b = np.asarray(a), np.asarray(b)
    try:
        b = np.broadcast_to(b, a.shape)
    except ValueError:
        return False
    return bool(np.all(np.isclose(a, b, rtol=rtol, atol=atol)))


def _array(value) -> np.ndarray:
    """The student's output as a float array, or a ValueError that ends the probe."""
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
        raise ValueError("not a numeric array")
    return value.astype(np.float64)


def _answers(context: ProbeContext, *args) -> bool:
    """Does the student's function give an acceptable answer here? Raising counts as no (for inputs
    with leading axes, where code written for one sequence raises)."""
    try:
        return context.accepts(context.call(*args), args, {})
    except Exception:  # noqa: BLE001 - the student's function failed on these inputs
        return False


def _independent_tokens(call, x, *params) -> bool:
    """Is each token's output the same alone, inside x, and inside a batch of two copies? An output of
    another shape than x ends the probe (a ValueError): the shape check's own message says what is
    wrong, and no stage is guessed from it."""
    whole = _array(call(x, *params))
    if whole.shape != x.shape:
        raise ValueError(f"returned shape {whole.shape} for x of shape {x.shape}")
    alone = np.concatenate([_array(call(x[i:i + 1], *params)) for i in range(x.shape[0])])
    try:
        batch = _array(call(np.stack([x, x[::-1]]), *params))
    except Exception:  # noqa: BLE001 - code written for one sequence may raise with a batch axis
        return False
    return _close(alone, whole) and batch.shape == (2, *x.shape) and _close(batch[0], whole) \
        and _close(batch[1], whole[::-1])


# --------------------------------------------------------------------------- norms

def _probe_norm(context: ProbeContext, name: str, with_beta: bool):
    """layer_norm(x, gamma, beta, eps) or rms_norm(x, gamma, eps)."""
    call, d = context.call, 16
    rng = _rng(11)
    x = _tokens(rng, (5, d), low=5.0, high=20.0)        # spread enough that eps changes nothing visible
    ones, zeros = np.ones(d), np.zeros(d)
    plain = (ones, zeros) if with_beta else (ones,)
    doubled = (2.0 * ones, zeros) if with_beta else (2.0 * ones,)
    if not _independent_tokens(call, x, *plain):
        yield f"{name}.statistics_across_tokens"
        return
    out = _array(call(x, *plain))
    if not _close(_array(call(x, *doubled)), 2.0 * out):   # gamma must scale the normalised tokens
        yield "layer_norm.scale_and_shift" if with_beta else "rms_norm.gamma"
        return
    if with_beta:
        shift = rng.standard_normal(d)
        if not _close(_array(call(x, ones, shift)) - out, shift):     # and beta must be added last
            yield "layer_norm.scale_and_shift"
            return
    else:
        with np.errstate(all="ignore"):
            ratio = out / x                                 # each token only rescaled: one ratio per token
        if not _close(ratio, ratio[:, :1], rtol=1e-6, atol=1e-9):
            yield "rms_norm.shifts_tokens"
            return
    if with_beta:
        if not _close(out.mean(axis=-1), 0.0, atol=1e-6):
            yield "layer_norm.not_centred"
            return
        spread = out.std(axis=-1)
    else:
        spread = np.sqrt(np.mean(out * out, axis=-1))
    if not _close(spread, 1.0, rtol=0.0, atol=1e-4):
        constant = _close(spread, spread.mean(), rtol=1e-4, atol=0.0)
        if with_beta:
            yield "layer_norm.spread_off_by_constant_factor" if constant else "layer_norm.spread_not_normalised"
        else:
            yield "rms_norm.scale_off_by_constant_factor" if constant else "rms_norm.scale_not_normalised"
        return
    # eps: near-constant (LayerNorm) or near-zero (RMSNorm) tokens, and the eps argument itself
    small = (rng.uniform(-3.0, 3.0, size=(4, 1)) + 1e-3 * rng.standard_normal((4, d))) if with_beta \
        else 1e-4 * rng.standard_normal((4, d))
    eps_args = [((small, *plain), {}), ((x, *plain), {"eps": 0.5})]
    if not all(context.accepts(call(*args, **kwargs), args, kwargs) for args, kwargs in eps_args):
        yield f"{name}.default_eps" if _only_the_default_eps_is_off(context, name, small, plain) \
            else f"{name}.eps_handling"
        return
    gamma = 1.0 + 0.5 * rng.standard_normal(d)
    affine = (x, gamma, 0.5 * rng.standard_normal(d)) if with_beta else (x, gamma)
    if not context.accepts(call(*affine), affine, {}):
        yield "layer_norm.scale_and_shift" if with_beta else "rms_norm.gamma"


def _only_the_default_eps_is_off(context: ProbeContext, name: str, small, plain) -> bool:
    """Is the norm right on the tokens where eps matters as soon as the reference's eps is passed to it
    explicitly, and with another explicit eps too? Then only the default of its eps parameter is off (a
    def line with eps=1e-6, say), and the eps stage itself is right."""
    eps = inspect.signature(getattr(ref, name)).parameters["eps"].default
    calls = [((small, *plain), {"eps": eps}), ((small, *plain), {"eps": 0.5})]
    return all(context.accepts(context.call(*args, **kwargs), args, kwargs) for args, kwargs in calls)


def probe_layer_norm(context: ProbeContext):
    yield from _probe_norm(context, "layer_norm", with_beta=True)


def probe_rms_norm(context: ProbeContext):
    yield from _probe_norm(context, "rms_norm", with_beta=False)


# --------------------------------------------------------------------------- heads

def _codes(shape) -> np.ndarray:
    """Distinct whole numbers, one per entry, that say where the entry sits (exact in float64)."""
    return np.arange(1, math.prod(shape) + 1, dtype=np.float64).reshape(shape)


def _rearranged(out: np.ndarray, x: np.ndarray) -> bool:
    """Does the array `out` hold exactly x's entries (in any order or shape)?"""
    return out.size == x.size and \
        np.array_equal(np.sort(out.astype(np.float64).ravel()), np.sort(x.ravel()))


def probe_split_heads(context: ProbeContext):
    h, d_k, n = 3, 4, 5
    x2 = _codes((n, h * d_k))
    out2 = context.call(x2, h)
    if not isinstance(out2, np.ndarray):     # no array at all (a stub returning None): no stage to blame
        return
    if not _rearranged(out2, x2):
        yield "split_heads.values_changed"
        return
    if out2.shape != (h, n, d_k):
        yield "split_heads.axes_in_wrong_order"
        return
    where = {float(v): np.unravel_index(int(v) - 1, x2.shape) for v in x2.ravel()}
    rows_ok = feats_ok = True
    for i in range(h):
        for t in range(n):
            for k in range(d_k):
                token, feature = where[float(out2[i, t, k])]
                rows_ok &= token == t
                feats_ok &= feature == i * d_k + k
    if not rows_ok:
        yield "split_heads.tokens_mixed_into_heads"
        return
    if not feats_ok:
        yield "split_heads.features_in_wrong_heads"
        return
    if not _answers(context, _codes((2, 3, n, h * d_k)), h):
        yield "split_heads.batch_axes_mixed"


def probe_merge_heads(context: ProbeContext):
    h, n, d_k = 3, 5, 4
    x3 = _codes((h, n, d_k))
    out3 = context.call(x3)
    if not isinstance(out3, np.ndarray):     # no array at all (a stub returning None): no stage to blame
        return
    if not _rearranged(out3, x3):
        yield "merge_heads.values_changed"
        return
    if out3.shape != (n, h * d_k):
        yield "merge_heads.axes_in_wrong_order"
        return
    where = {float(v): np.unravel_index(int(v) - 1, x3.shape) for v in x3.ravel()}
    rows_ok = cols_ok = True
    for t in range(n):
        for c in range(h * d_k):
            head, token, k = where[float(out3[t, c])]
            rows_ok &= token == t
            cols_ok &= (head, k) == divmod(c, d_k)
    if not rows_ok:
        yield "merge_heads.tokens_mixed"
        return
    if not cols_ok:
        yield "merge_heads.heads_not_side_by_side"
        return
    if not _answers(context, _codes((2, 3, h, n, d_k))):
        yield "merge_heads.batch_axes_mixed"


# --------------------------------------------------------------------------- attention

def _weights(rng, d, scale=1.0):
    return tuple(scale * rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4))


def _fits_another_scale(out, x, W_Q, W_K, W_V, W_O, n_heads, mask) -> bool:
    """Does the student's output equal the reference attention with the scores divided by some other
    positive constant? (A log-spaced search, then a golden-section refinement, all trusted numpy.)"""
    out = _array(out)
    d_k = x.shape[-1] // n_heads

    def gap(log_c):
        c = math.exp(log_c)
        q, k, v = (ref.split_heads(x @ W, n_heads) for W in (W_Q, W_K, W_V))
        scores = q @ np.swapaxes(k, -1, -2) / c
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        other = ref.merge_heads(ref.softmax(scores) @ v) @ W_O
        return float(np.max(np.abs(other - out))) if other.shape == out.shape else math.inf

    grid = np.linspace(math.log(1e-2), math.log(1e3 * d_k), 120)
    best = min(grid, key=gap)
    lo, hi = best - 0.1, best + 0.1
    for _ in range(60):
        a, b = lo + 0.382 * (hi - lo), lo + 0.618 * (hi - lo)
        if gap(a) < gap(b):
            hi = b
        else:
            lo = a
    c = math.exp((lo + hi) / 2)
    return gap(math.log(c)) < 1e-6 * max(1.0, float(np.max(np.abs(out)))) and abs(c / math.sqrt(d_k) - 1) > 1e-3


def probe_multi_head_attention(context: ProbeContext):
    call, accepts = context.call, context.accepts
    rng = _rng(23)
    n, d = 5, 8
    x = rng.standard_normal((n, d))
    W_Q, W_K, W_V, W_O = _weights(rng, d)
    eye, zero = np.eye(d), np.zeros((d, d))

    def ok(*args):
        return accepts(call(*args), args, {})

    # the output projection: W_O must act as one final product
    with_eye, with_o = _array(call(x, W_Q, W_K, W_V, eye, 1)), _array(call(x, W_Q, W_K, W_V, W_O, 1))
    if not _close(with_o, with_eye @ W_O):
        yield "multi_head_attention.output_projection"
        return
    # equal scores (W_Q = W_K = 0), one head: every query averages the values
    causal = np.tril(np.ones((n, n), dtype=bool))
    if not ok(x, zero, zero, W_V, W_O, 1):
        masked_anyway = accepts(call(x, zero, zero, W_V, W_O, 1), (x, zero, zero, W_V, W_O, 1, causal), {})
        yield "multi_head_attention.masking" if masked_anyway else "multi_head_attention.averaging_values"
        return
    # real scores, one head, no mask
    args = (x, W_Q, W_K, W_V, W_O, 1, None)
    out = call(*args)
    if not accepts(out, args, {}):
        yield ("multi_head_attention.scores_scaled_by_another_constant"
               if _fits_another_scale(out, *args) else "multi_head_attention.scores")
        return
    # masks, with equal scores and then with real ones
    random_mask = (rng.random((n, n)) < 0.5) | np.eye(n, dtype=bool)
    if not (ok(x, zero, zero, W_V, W_O, 1, causal) and ok(x, zero, zero, W_V, W_O, 1, random_mask)
            and ok(x, W_Q, W_K, W_V, W_O, 1, causal)):
        yield "multi_head_attention.masking"
        return
    # several heads
    for h in (2, 4):
        args = (x, W_Q, W_K, W_V, W_O, h, causal)
        out = call(*args)
        if not accepts(out, args, {}):
            yield ("multi_head_attention.scores_scaled_by_another_constant"
                   if _fits_another_scale(out, *args) else "multi_head_attention.heads")
            return
    if not _answers(context, rng.standard_normal((2, 3, n, d)), W_Q, W_K, W_V, W_O, 2, causal):
        yield "multi_head_attention.batch_axes"


# --------------------------------------------------------------------------- the block

def probe_pre_ln_block(context: ProbeContext):
    call, accepts = context.call, context.accepts
    rng = _rng(37)
    n, d, h = 5, 8, 2
    x = _tokens(rng, (n, d))
    p = ref.init_block_params(rng, d, 3 * d)
    causal = np.tril(np.ones((n, n), dtype=bool))

    def ok(x_, params, mask=None):
        args = (x_, params, h, mask)
        return accepts(call(*args), args, {})

    def zeros_like(*keys):
        return {k: np.zeros_like(p[k]) for k in keys}

    if not _close(_array(call(x, {**p, **zeros_like("W_O", "W2", "b2")}, h, None)), x):
        yield "pre_ln_block.residual_path"
        return
    shared = {**p, "ln2_gamma": p["ln1_gamma"], "ln2_beta": p["ln1_beta"]}
    if ok(x, shared) and not ok(x, p):
        yield "pre_ln_block.norm_parameters_mixed_up"
        return
    attention_only = {**p, **zeros_like("W1", "b1", "W2", "b2")}
    if not ok(x, attention_only):
        yield "pre_ln_block.attention_half"
        return
    if not ok(x, attention_only, causal):
        yield "pre_ln_block.mask_not_reaching_attention"
        return
    constant_ffn = {**p, **zeros_like("W_O", "W1", "W2")}
    out = _array(call(x, constant_ffn, h, None))
    if not _close(out, x + p["b2"]):
        # b2 lost (the output is x) is inside the FFN; anything else is how its output joins h
        yield "pre_ln_block.feed_forward_half" if _close(out, x) else "pre_ln_block.feed_forward_residual"
        return
    if not ok(x, {**p, **zeros_like("W_O")}):
        yield "pre_ln_block.feed_forward_half"
        return
    if not ok(x, p, causal):
        yield "pre_ln_block.halves_not_chained"
        return
    if not _answers(context, np.stack([x, x[::-1]]), p, h, causal):
        yield "pre_ln_block.batch_axes"


# --------------------------------------------------------------------------- silu and SwiGLU

def probe_silu(context: ProbeContext):
    z = np.linspace(-8.0, 8.0, 33)
    if not _answers(context, z):
        out = _array(context.call(z))
        right = np.isclose(out, ref.silu(z), rtol=1e-7, atol=1e-9) if out.shape == z.shape else np.zeros(z.shape, bool)
        if right[z >= 0].all():
            yield "silu.negative_inputs"
        elif right[z <= 0].all():
            yield "silu.positive_inputs"
        else:
            yield "silu.sigmoid_part"
        return
    if not _answers(context, np.array([-1e4, -1e3, -100.0, -40.0, 40.0, 100.0, 1e3, 1e4])):
        yield "silu.large_inputs"


def probe_swiglu_ffn(context: ProbeContext):
    call, accepts = context.call, context.accepts
    rng = _rng(53)
    n, d = 6, 8
    x = rng.standard_normal((n, d))
    W_gate, W_up, W_down = (rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(3))
    eye = np.eye(d)
    if not _close(_array(call(x, W_gate, W_up, W_down)), _array(call(x, W_gate, W_up, eye)) @ W_down):
        yield "swiglu_ffn.down_projection"
        return
    if not _close(_array(call(x, W_gate, np.zeros((d, d)), eye)), 0.0):
        yield "swiglu_ffn.gate_not_multiplied"
        return
    if not _close(_array(call(x, W_gate, 2.0 * W_up, eye)), 2.0 * _array(call(x, W_gate, W_up, eye))):
        yield "swiglu_ffn.up_branch_not_linear"
        return
    args = (x, W_gate, eye, eye)
    if not accepts(call(*args), args, {}):
        yield "swiglu_ffn.gate_activation"


# --------------------------------------------------------------------------- counting

def probe_count_block_params(context: ProbeContext):
    def off(d, f, ffn, norm):
        got = context.call(d, f, ffn, norm=norm)
        got = np.asarray(got).item() if np.ndim(got) == 0 else None
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            raise ValueError("not a number")
        return got - ref.count_block_params(d, f, ffn, norm=norm)

    kinds = [(ffn, norm) for norm in ("layernorm", "rmsnorm") for ffn in ("gelu", "swiglu")]
    for ffn, norm in kinds:
        here = off(24, 70, ffn, norm)
        if off(24, 71, ffn, norm) != here:
            yield "count_block_params.feed_forward_term"
            return
        twice, thrice = off(48, 70, ffn, norm), off(72, 70, ffn, norm)
        if thrice - 2 * twice + here != 0:
            yield "count_block_params.attention_term"
            return
        if here != 0:
            yield "count_block_params.norm_option" if norm == "rmsnorm" and not any(
                off(24, 70, f, "layernorm") for f in ("gelu", "swiglu")) else "count_block_params.per_feature_terms"
            return


# --------------------------------------------------------------------------- confirmation inputs
# Fixed inputs per problem (shapes chosen so that no two of a problem's wrong variants agree on them):
# a catalogued variant that matches a failed check must reproduce the student's function here too.

def _rows(rng, shape):
    """Tokens with their own offset and a scale from 1e-2 to 10, so eps and centring matter."""
    rows = shape[:-1] + (1,)
    return rng.normal(0, 3, rows) + 10 ** rng.uniform(-2, 1, rows) * rng.standard_normal(shape)


def _mask(rng, n, kind):
    if kind == "causal":
        return np.tril(np.ones((n, n), dtype=bool))
    return (rng.random((n, n)) < 0.5) | np.eye(n, dtype=bool)


def _confirm_layer_norm(rng):
    calls = [((_rows(rng, shape), 1 + 0.3 * rng.standard_normal(shape[-1]), 0.3 * rng.standard_normal(shape[-1])), {})
             for shape in [(3, 5, 16), (6, 10)]]
    nearly_constant = rng.uniform(-3, 3, (4, 1)) + 1e-3 * rng.standard_normal((4, 8))   # eps matters
    args = (nearly_constant, 1 + 0.3 * rng.standard_normal(8), 0.3 * rng.standard_normal(8))
    # and once with eps passed: a def line defaulting to eps=0 is then not taken for one that ignores eps
    return calls + [(args, {}), (args, {"eps": 1e-4})]


def _confirm_rms_norm(rng):
    calls = [((_rows(rng, shape), 1 + 0.3 * rng.standard_normal(shape[-1])), {}) for shape in [(3, 5, 16), (6, 10)]]
    args = (1e-4 * rng.standard_normal((4, 8)), 1 + 0.3 * rng.standard_normal(8))   # eps matters
    return calls + [(args, {}), (args, {"eps": 1e-7})]    # passed too, as for layer_norm


def _confirm_split_heads(rng):
    return [((rng.standard_normal((2, 6, 12)), 3), {}), ((rng.standard_normal((5, 8)), 2), {})]


def _confirm_merge_heads(rng):
    return [((rng.standard_normal((2, 3, 6, 4)),), {}), ((rng.standard_normal((2, 5, 4)),), {})]


def _confirm_multi_head_attention(rng):
    return [((rng.standard_normal((2, 6, 12)), *_weights(rng, 12), 3), {"mask": _mask(rng, 6, "random")}),
            ((rng.standard_normal((7, 8)), *_weights(rng, 8), 2, _mask(rng, 7, "causal")), {})]


def _confirm_pre_ln_block(rng):
    return [((_rows(rng, (2, 6, 12)), ref.init_block_params(rng, 12, 32), 3, _mask(rng, 6, "random")), {}),
            ((_rows(rng, (5, 8)), ref.init_block_params(rng, 8, 24), 2), {"mask": _mask(rng, 5, "causal")})]


def _confirm_silu(rng):
    return [((np.concatenate([rng.normal(0, 5, 20), [-30.0, -3.0, 0.5, 4.0]]),), {}),
            ((rng.normal(0, 2, (3, 4)),), {})]


def _confirm_swiglu_ffn(rng):
    calls = []
    for shape, f in [((2, 5, 8), 12), ((4, 6), 10)]:
        d = shape[-1]
        calls.append(((rng.standard_normal(shape), rng.standard_normal((d, f)) / math.sqrt(d),
                       rng.standard_normal((d, f)) / math.sqrt(d), rng.standard_normal((f, d)) / math.sqrt(f)), {}))
    return calls


def _confirm_count_block_params(rng):
    return [((64, 256, "gelu"), {}), ((48, 128, "swiglu"), {}), ((12, 40, "gelu"), {}),
            ((24, 70, "swiglu", "rmsnorm"), {}), ((16, 50, "gelu"), {"norm": "rmsnorm"})]


def confirmation_calls(problem: str, seed: int = 0) -> list[tuple[tuple, dict]]:
    """(args, kwargs) calls of `problem` on fixed inputs drawn with `seed`."""
    return globals()[f"_confirm_{problem}"](np.random.default_rng(seed))


def register(catalogue: Catalogue) -> None:
    """Add the stage ids (mistakes without a variant), and each problem's probe (the function
    `probe_<problem>` of this module) and confirmation inputs, to the catalogue."""
    for stage, hint in STAGES.items():
        catalogue.add(stage, hint=hint, stage=True)
    for name, probe in sorted(globals().items()):
        if name.startswith("probe_") and callable(probe):
            problem = name[len("probe_"):]
            catalogue.probe(problem)(probe)
            catalogue.confirm_with(problem, lambda problem=problem: confirmation_calls(problem))
