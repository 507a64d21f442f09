"""Realistic mistakes the mistakes catalogue never saw, to measure how far diagnosis generalises.

Kept apart from assignments/transformer_block/mistakes.py on purpose: nothing here may be added to
the catalogue (that would turn the measurement into a memory test). Each entry is the instructor's
solution of one function with one realistic misconception, the kind found in the chapter's own code
(`K.T`, `.transpose(1, 0, 2)`, `n, d_model = X.shape`, additive masks, clipped exponentials) and in
common tutorials (masks multiplied in or added as booleans, softmax over the whole matrix, eps as a
clip, a missing b1 or b2, the sigmoid form of GELU, ReGLU and tanh gates, ...), together with the
diagnoses that would be right for it: a stage the probes may name, or a catalogued id that describes
the same misconception.

`tools/measure_diagnosis.py` grades them all for real and writes docs/diagnosis.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from submissions import Form, _e


@dataclass(frozen=True)
class HeldOut:
    name: str
    form: Form
    right: tuple[str, ...]  # diagnoses that would be right for it (any one counts)
    description: str
    batch: str = "development"  # "development": the probes were debugged against these;
    # "fresh": written after the probes were frozen, never tuned on


def _h(name, form, right, description, batch="development"):
    return HeldOut(name, form, (right,) if isinstance(right, str) else tuple(right), description, batch)


def _fresh(name, form, right, description):
    return _h(name, form, right, description, batch="fresh")


_LN_ROOT = "np.sqrt(var + eps)"
_LN_VAR = "var = np.mean(centred * centred, axis=-1, keepdims=True)"
_LN_RETURN = "return gamma * (centred / np.sqrt(var + eps)) + beta"
_RMS_MS = "mean_square = np.mean(x * x, axis=-1, keepdims=True)"
_RMS_ROOT = "np.sqrt(mean_square + eps)"
_SCALE = "/ d_k ** 0.5"
_MASK = "np.where(mask, scores, -np.inf)"
_SOFTMAX = "weights = softmax(scores, axis=-1)"
_SPLIT_BODY = (
    "per_head = x.reshape(*x.shape[:-1], n_heads, d_k)   # (..., n, h, d_k)\n    return np.swapaxes(per_head, -3, -2)"
)
_MERGE_BODY = (
    "tokens_first = np.swapaxes(x, -3, -2)               # (..., n, h, d_k)\n"
    "    return tokens_first.reshape(*lead, n, n_heads * d_k)"
)
_SILU_BODY = (
    "e = np.exp(-np.abs(x))                                  # in (0, 1]: never overflows\n"
    "    sigmoid = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))"
)

HELD_OUT: list[HeldOut] = [
    # ---------------------------------------------------------------- layer_norm
    _h(
        "ln_eps_hard_coded",
        _e("layer_norm", (_LN_ROOT, "np.sqrt(var + 1e-3)")),
        "layer_norm.eps_handling",
        "a fixed 1e-3 instead of the eps argument",
    ),
    _h(
        "ln_eps_as_clip",
        _e("layer_norm", (_LN_ROOT, "np.sqrt(np.maximum(var, eps))")),
        "layer_norm.eps_handling",
        "eps as a floor on the variance (np.maximum) instead of added to it",
    ),
    _h(
        "ln_mean_absolute_deviation",
        _e("layer_norm", (_LN_VAR, "var = np.mean(np.abs(centred), axis=-1, keepdims=True) ** 2")),
        ("layer_norm.spread_not_normalised", "layer_norm.spread_off_by_constant_factor"),
        "the mean absolute deviation, squared, taken for the variance",
    ),
    _h(
        "ln_uncentred_second_moment",
        _e("layer_norm", (_LN_VAR, "var = np.mean(x * x, axis=-1, keepdims=True)")),
        ("layer_norm.spread_not_normalised", "layer_norm.spread_off_by_constant_factor"),
        "the variance computed from x, not from x - mean",
    ),
    _h(
        "ln_gamma_before_normalising",
        _e(
            "layer_norm",
            ("mean = np.mean(x, axis=-1", "x = gamma * x\n    mean = np.mean(x, axis=-1"),
            (_LN_RETURN, "return centred / np.sqrt(var + eps) + beta"),
        ),
        "layer_norm.scale_and_shift",
        "gamma applied to x before normalising, so the normalisation undoes it",
    ),
    _h(
        "ln_beta_inside_scale",
        _e("layer_norm", (_LN_RETURN, "return gamma * (centred / np.sqrt(var + eps) + beta)")),
        "layer_norm.scale_and_shift",
        "beta added before multiplying by gamma",
    ),
    _h(
        "ln_axis_one",
        _e(
            "layer_norm",
            ("np.mean(x, axis=-1", "np.mean(x, axis=1"),
            ("centred * centred, axis=-1", "centred * centred, axis=1"),
        ),
        "layer_norm.statistics_across_tokens",
        "axis=1, right for (n, d) but not with a batch axis",
    ),
    _h(
        "ln_last_two_axes",
        _e(
            "layer_norm",
            ("np.mean(x, axis=-1", "np.mean(x, axis=(-2, -1)"),
            ("centred * centred, axis=-1", "centred * centred, axis=(-2, -1)"),
        ),
        "layer_norm.statistics_across_tokens",
        "statistics over the last two axes (the whole sequence)",
    ),
    _h(
        "ln_sample_std_plus_eps",
        _e("layer_norm", (_LN_ROOT, "(np.std(x, axis=-1, keepdims=True, ddof=1) + eps)")),
        ("layer_norm.spread_off_by_constant_factor", "layer_norm.unbiased_variance"),
        "np.std with ddof=1, eps added to it",
    ),
    # ---------------------------------------------------------------- rms_norm
    _h(
        "rms_mean_absolute",
        _e("rms_norm", (_RMS_MS, "mean_square = np.mean(np.abs(x), axis=-1, keepdims=True) ** 2")),
        ("rms_norm.scale_not_normalised", "rms_norm.scale_off_by_constant_factor"),
        "the squared mean absolute value for the mean square",
    ),
    _h(
        "rms_variance_not_mean_square",
        _e("rms_norm", (_RMS_MS, "mean_square = np.var(x, axis=-1, keepdims=True)")),
        ("rms_norm.scale_not_normalised", "rms_norm.subtracts_mean"),
        "divides by the standard deviation (centred spread) without centring",
    ),
    _h(
        "rms_gamma_added",
        _e(
            "rms_norm",
            ("return gamma * (x / np.sqrt(mean_square + eps))", "return gamma + x / np.sqrt(mean_square + eps)"),
        ),
        "rms_norm.gamma",
        "gamma added instead of multiplied",
    ),
    # (LayerNorm's default eps kept for RMSNorm was held out here; it is catalogued now: rms_norm.default_eps)
    _h(
        "rms_axis_one",
        _e("rms_norm", ("axis=-1", "axis=1")),
        "rms_norm.statistics_across_tokens",
        "axis=1, right for (n, d) but not with a batch axis",
    ),
    _h(
        "rms_eps_as_clip",
        _e("rms_norm", (_RMS_ROOT, "np.sqrt(np.maximum(mean_square, eps))")),
        "rms_norm.eps_handling",
        "eps as a floor on the mean square",
    ),
    _h(
        "rms_sample_mean_square",
        _e("rms_norm", (_RMS_MS, "mean_square = np.sum(x * x, axis=-1, keepdims=True) / (x.shape[-1] - 1)")),
        "rms_norm.scale_off_by_constant_factor",
        "the sum of squares divided by d - 1",
    ),
    # ---------------------------------------------------------------- split_heads / merge_heads
    _h(
        "split_by_np_split",
        _e(
            "split_heads",
            (
                _SPLIT_BODY,
                "return np.stack(np.split(x, n_heads, axis=-1), axis=0)",
            ),
        ),
        "split_heads.batch_axes_mixed",
        "np.stack(np.split(...), axis=0): heads in front of the batch axes",
    ),
    _h(
        "split_head_axis_to_front",
        _e("split_heads", ("np.swapaxes(per_head, -3, -2)", "np.moveaxis(per_head, -2, 0)")),
        "split_heads.batch_axes_mixed",
        "the head axis moved to position 0 instead of before the tokens",
    ),
    _h(
        "split_swaps_last_two",
        _e("split_heads", ("np.swapaxes(per_head, -3, -2)", "np.swapaxes(per_head, -2, -1)")),
        "split_heads.axes_in_wrong_order",
        "swaps the head and feature axes instead of head and token",
    ),
    _h(
        "split_fixed_transpose",
        _e("split_heads", ("np.swapaxes(per_head, -3, -2)", "per_head.transpose(1, 0, 2)")),
        "split_heads.batch_axes_mixed",
        "the chapter's transpose(1, 0, 2), which assumes no batch axis",
    ),
    _h(
        "merge_concatenate_heads",
        _e(
            "merge_heads",
            (
                _MERGE_BODY,
                "return np.concatenate(list(x), axis=-1)",
            ),
        ),
        "merge_heads.batch_axes_mixed",
        "np.concatenate(list(x), axis=-1): iterates over the first axis",
    ),
    _h(
        "merge_fixed_transpose",
        _e("merge_heads", ("np.swapaxes(x, -3, -2)", "x.transpose(1, 0, 2)")),
        "merge_heads.batch_axes_mixed",
        "the chapter's transpose(1, 0, 2) before the reshape",
    ),
    _h(
        "merge_swaps_first_and_last",
        _e("merge_heads", ("np.swapaxes(x, -3, -2)", "np.swapaxes(x, -3, -1)")),
        ("merge_heads.tokens_mixed", "merge_heads.heads_not_side_by_side"),
        "swaps the head axis with d_k",
    ),
    _h(
        "merge_hstack",
        _e(
            "merge_heads",
            (
                _MERGE_BODY,
                "return np.hstack(x)",
            ),
        ),
        "merge_heads.batch_axes_mixed",
        "np.hstack, right for (h, n, d_k) only",
    ),
    # ---------------------------------------------------------------- multi_head_attention
    _h(
        "mha_boolean_mask_added",
        _e("multi_head_attention", (_MASK, "scores + mask")),
        "multi_head_attention.masking",
        "the chapter's additive mask, given a boolean mask",
    ),
    _h(
        "mha_mask_fills_zero",
        _e("multi_head_attention", (_MASK, "np.where(mask, scores, 0.0)")),
        "multi_head_attention.masking",
        "blocked scores set to 0 instead of -inf",
    ),
    _h(
        "mha_mask_multiplies_scores",
        _e("multi_head_attention", (_MASK, "scores * mask")),
        "multi_head_attention.masking",
        "the scores multiplied by the mask",
    ),
    _h(
        "mha_causal_always",
        _e(
            "multi_head_attention",
            (
                "    if mask is not None:\n        scores = np.where(mask, scores, -np.inf)",
                "    causal = np.tril(np.ones(scores.shape[-2:], dtype=bool))\n"
                "    scores = np.where(causal, scores, -np.inf)",
            ),
        ),
        "multi_head_attention.masking",
        "always a causal mask of its own, whatever mask is given",
    ),
    _h(
        "mha_softmax_over_everything",
        _e("multi_head_attention", (_SOFTMAX, "weights = np.exp(scores) / np.exp(scores).sum()")),
        "multi_head_attention.averaging_values",
        "a softmax normalised over the whole array",
    ),
    _h(
        "mha_scale_by_sequence_length",
        _e("multi_head_attention", (_SCALE, "/ x.shape[-2] ** 0.5")),
        "multi_head_attention.scores_scaled_by_another_constant",
        "scaled by sqrt(n), the sequence length",
    ),
    _h(
        "mha_scale_after_softmax",
        _e("multi_head_attention", (" " + _SCALE, ""), (_SOFTMAX, "weights = softmax(scores, axis=-1) / d_k ** 0.5")),
        "multi_head_attention.averaging_values",
        "the softmax weights, not the scores, divided by sqrt(d_k)",
    ),
    _h(
        "mha_queries_and_keys_swapped",
        _e("multi_head_attention", ("scores = q @ np.swapaxes(k, -1, -2)", "scores = k @ np.swapaxes(q, -1, -2)")),
        "multi_head_attention.scores",
        "K Q^T instead of Q K^T",
    ),
    _h(
        "mha_keys_from_W_Q",
        _e("multi_head_attention", ("k = split_heads(x @ W_K, n_heads)", "k = split_heads(x @ W_Q, n_heads)")),
        "multi_head_attention.scores",
        "a typo: keys projected with W_Q",
    ),
    _h(
        "mha_values_not_projected",
        _e("multi_head_attention", ("v = split_heads(x @ W_V, n_heads)", "v = split_heads(x, n_heads)")),
        "multi_head_attention.averaging_values",
        "values taken from x without W_V",
    ),
    _h(
        "mha_output_with_W_V",
        _e("multi_head_attention", ("return merge_heads(heads) @ W_O", "return merge_heads(heads) @ W_V")),
        "multi_head_attention.output_projection",
        "a typo: W_V for the output projection",
    ),
    _h(
        "mha_unpacks_two_axes",
        _e(
            "multi_head_attention",
            ("    d_k = q.shape[-1]\n", "    n, d_model = x.shape\n    d_k = d_model // n_heads\n"),
        ),
        "multi_head_attention.batch_axes",
        "n, d_model = x.shape, which fails with a batch axis",
    ),
    _h(
        "mha_keys_dot_T",
        _e("multi_head_attention", ("np.swapaxes(k, -1, -2)", "k.transpose(0, 2, 1)")),
        "multi_head_attention.batch_axes",
        "the chapter's K.transpose(0, 2, 1), which assumes (h, n, d_k)",
    ),
    # ---------------------------------------------------------------- pre_ln_block
    _h(
        "block_ffn_reads_x",
        _e("pre_ln_block", ('layer_norm(h, p["ln2_gamma"]', 'layer_norm(x, p["ln2_gamma"]')),
        "pre_ln_block.halves_not_chained",
        "the FFN reads LN2(x) instead of LN2(h)",
    ),
    _h(
        "block_without_b2",
        _e("pre_ln_block", ('return h + hidden @ p["W2"] + p["b2"]', 'return h + hidden @ p["W2"]')),
        "pre_ln_block.feed_forward_half",
        "the FFN's output bias b2 left out",
    ),
    _h(
        "block_without_b1",
        _e("pre_ln_block", ('gelu(ffn_in @ p["W1"] + p["b1"])', 'gelu(ffn_in @ p["W1"])')),
        "pre_ln_block.feed_forward_half",
        "the FFN's hidden bias b1 left out",
    ),
    _h(
        "block_without_ln2",
        _e("pre_ln_block", ('ffn_in = layer_norm(h, p["ln2_gamma"], p["ln2_beta"])', "ffn_in = h")),
        "pre_ln_block.feed_forward_half",
        "no LayerNorm before the FFN",
    ),
    _h(
        "block_without_ln1",
        _e("pre_ln_block", ('attn_in = layer_norm(x, p["ln1_gamma"], p["ln1_beta"])', "attn_in = x")),
        "pre_ln_block.attention_half",
        "no LayerNorm before the attention",
    ),
    _h(
        "block_ffn_residual_from_x",
        _e("pre_ln_block", ("return h + hidden", "return x + hidden")),
        ("pre_ln_block.attention_half", "pre_ln_block.halves_not_chained"),
        "the FFN's residual adds x instead of h",
    ),
    _h(
        "block_sigmoid_gelu",
        _e(
            "pre_ln_block",
            (
                'hidden = gelu(ffn_in @ p["W1"] + p["b1"])',
                'z = ffn_in @ p["W1"] + p["b1"]\n    hidden = z / (1.0 + np.exp(-1.702 * z))',
            ),
        ),
        "pre_ln_block.feed_forward_half",
        "the sigmoid approximation of GELU instead of the given gelu",
    ),
    _h(
        "block_keys_with_W_Q",
        _e("pre_ln_block", ('p["W_Q"], p["W_K"], p["W_V"]', 'p["W_Q"], p["W_Q"], p["W_V"]')),
        "pre_ln_block.attention_half",
        "a typo: W_Q passed for W_K",
    ),
    # ---------------------------------------------------------------- silu
    _h(
        "silu_tanh_without_half",
        _e(
            "silu",
            (
                _SILU_BODY,
                "sigmoid = 0.5 * (1.0 + np.tanh(x))",
            ),
        ),
        "silu.sigmoid_part",
        "the tanh form of the sigmoid without halving x",
    ),
    _h(
        "silu_gelu_constant",
        _e("silu", ("e = np.exp(-np.abs(x))", "e = np.exp(-np.abs(1.702 * x))")),
        "silu.sigmoid_part",
        "the sigmoid of 1.702 x (GELU's approximation) instead of x",
    ),
    _h(
        "silu_exp_ratio",
        _e(
            "silu",
            ("sigmoid = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))", "sigmoid = np.exp(x) / (1.0 + np.exp(x))"),
        ),
        ("silu.large_inputs", "silu.exp_overflow"),
        "exp(x) / (1 + exp(x)), which is nan for large x",
    ),
    _h(
        "silu_clip_too_tight",
        Form("silu", code="def silu(x):\n    return x / (1.0 + np.exp(-np.clip(x, -10.0, 10.0)))\n"),
        "silu.large_inputs",
        "the chapter's clipped exponential, clipped at 10",
    ),
    _h(
        "silu_zero_for_negatives",
        _e("silu", ("return x * sigmoid", "return np.where(x > 0, x * sigmoid, 0.0)")),
        "silu.negative_inputs",
        "zero for negative inputs, as if it were a ReLU there",
    ),
    _h(
        "silu_float64_constant",
        _e("silu", ("1.0 / (1.0 + e)", "np.float64(1.0) / (1.0 + e)")),
        "general.float32_upcast",
        "a NumPy float64 one, which turns float32 into float64",
    ),
    # ---------------------------------------------------------------- swiglu_ffn
    _h(
        "swiglu_sum_of_branches",
        _e("swiglu_ffn", ("return (gate * up) @ W_down", "return (gate + up) @ W_down")),
        "swiglu_ffn.gate_not_multiplied",
        "the branches added instead of multiplied",
    ),
    _h(
        "swiglu_relu_gate",
        _e("swiglu_ffn", ("gate = silu(x @ W_gate)", "gate = np.maximum(x @ W_gate, 0.0)")),
        "swiglu_ffn.gate_activation",
        "ReGLU: a ReLU gate",
    ),
    _h(
        "swiglu_tanh_gate",
        _e("swiglu_ffn", ("gate = silu(x @ W_gate)", "gate = np.tanh(x @ W_gate)")),
        "swiglu_ffn.gate_activation",
        "a tanh gate",
    ),
    _h(
        "swiglu_up_with_W_gate",
        _e("swiglu_ffn", ("up = x @ W_up", "up = x @ W_gate")),
        ("swiglu_ffn.gate_not_multiplied", "swiglu_ffn.up_branch_not_linear"),
        "a typo: W_gate for the up branch",
    ),
    _h(
        "swiglu_silu_twice",
        _e("swiglu_ffn", ("gate = silu(x @ W_gate)", "gate = silu(silu(x @ W_gate))")),
        "swiglu_ffn.gate_activation",
        "silu applied twice to the gate",
    ),
    # ---------------------------------------------------------------- count_block_params
    _h(
        "count_swiglu_with_biases",
        _e(
            "count_block_params",
            ("feed_forward = 3 * d_model * d_ff", "feed_forward = 3 * d_model * d_ff + 2 * d_ff + d_model"),
        ),
        "count_block_params.feed_forward_term",
        "biases counted for SwiGLU",
    ),
    _h(
        "count_gelu_only_b1",
        _e(
            "count_block_params",
            ("feed_forward = 2 * d_model * d_ff + d_ff + d_model", "feed_forward = 2 * d_model * d_ff + d_ff"),
        ),
        "count_block_params.per_feature_terms",
        "b2 left out of the GELU network",
    ),
    _h(
        "count_rmsnorm_without_parameters",
        _e(
            "count_block_params",
            (
                'per_norm = 2 * d_model if norm == "layernorm" else d_model',
                'per_norm = 2 * d_model if norm == "layernorm" else 0',
            ),
        ),
        "count_block_params.norm_option",
        "RMSNorm counted as having no parameters",
    ),
    _h(
        "count_attention_with_qkv_bias",
        _e(
            "count_block_params",
            ("attention = 4 * d_model * d_model", "attention = 4 * d_model * d_model + 3 * d_model"),
        ),
        ("count_block_params.per_feature_terms", "count_block_params.attention_biases"),
        "biases for Q, K and V only",
    ),
    _h(
        "count_float_result",
        _e(
            "count_block_params",
            (
                "return int(attention + 2 * per_norm + feed_forward)",
                "return (attention + 2 * per_norm + feed_forward) / 1",
            ),
        ),
        (),
        "a float returned (true division)",
    ),
    # ================================================================ fresh (written after the probes were frozen)
    _fresh(
        "ln_sqrt_of_each_term",
        _e("layer_norm", (_LN_ROOT, "(np.sqrt(var) + np.sqrt(eps))")),
        "layer_norm.eps_handling",
        "sqrt(var) + sqrt(eps) instead of sqrt(var + eps)",
    ),
    _fresh(
        "ln_variance_over_tokens",
        _e("layer_norm", (_LN_VAR, "var = np.mean(centred * centred, axis=0, keepdims=True)")),
        "layer_norm.statistics_across_tokens",
        "the mean per token but the variance over axis 0",
    ),
    _fresh(
        "ln_affine_then_divide",
        _e("layer_norm", (_LN_RETURN, "return (gamma * centred + beta) / np.sqrt(var + eps)")),
        "layer_norm.scale_and_shift",
        "scale and shift before dividing by the standard deviation",
    ),
    _fresh(
        "ln_global_mean",
        _e("layer_norm", ("mean = np.mean(x, axis=-1, keepdims=True)", "mean = np.mean(x)")),
        ("layer_norm.statistics_across_tokens", "layer_norm.not_centred"),
        "one mean for the whole array, per-token variance",
    ),
    _fresh(
        "ln_float64_statistics",
        _e(
            "layer_norm",
            (
                "mean = np.mean(x, axis=-1, keepdims=True)",
                "mean = np.mean(x, axis=-1, keepdims=True, dtype=np.float64)",
            ),
        ),
        "general.float32_upcast",
        "the mean accumulated in float64, which makes a float32 result float64",
    ),
    _fresh(
        "rms_without_keepdims",
        _e("rms_norm", (_RMS_MS, "mean_square = np.mean(x * x, axis=-1)")),
        "rms_norm.statistics_across_tokens",
        "the mean square without keepdims, which broadcasts along the wrong axis",
    ),
    _fresh(
        "rms_eps_added_at_the_end",
        _e(
            "rms_norm",
            ("return gamma * (x / np.sqrt(mean_square + eps))", "return gamma * x / np.sqrt(mean_square) + eps"),
        ),
        "rms_norm.eps_handling",
        "eps added to the result instead of under the square root",
    ),
    _fresh(
        "rms_square_of_mean",
        _e("rms_norm", (_RMS_MS, "mean_square = np.mean(x, axis=-1, keepdims=True) ** 2")),
        ("rms_norm.scale_not_normalised", "rms_norm.scale_off_by_constant_factor"),
        "the square of the mean, not the mean of the squares",
    ),
    _fresh(
        "split_swaps_fixed_axes",
        _e("split_heads", ("np.swapaxes(per_head, -3, -2)", "np.swapaxes(per_head, 0, 1)")),
        "split_heads.batch_axes_mixed",
        "swaps axes 0 and 1, right only without a batch axis",
    ),
    _fresh(
        "split_plain_transpose",
        _e("split_heads", ("np.swapaxes(per_head, -3, -2)", "per_head.T")),
        "split_heads.axes_in_wrong_order",
        ".T, which reverses every axis",
    ),
    _fresh(
        "split_width_from_axis_one",
        _e("split_heads", ("d_model = x.shape[-1]", "d_model = x.shape[1]")),
        "split_heads.batch_axes_mixed",
        "d_model read from axis 1, the token axis once there is a batch axis",
    ),
    _fresh(
        "merge_swaps_fixed_axes",
        _e("merge_heads", ("np.swapaxes(x, -3, -2)", "np.swapaxes(x, 0, 1)")),
        "merge_heads.batch_axes_mixed",
        "swaps axes 0 and 1, right only without a batch axis",
    ),
    _fresh(
        "merge_concatenates_tokens",
        _e(
            "merge_heads",
            (
                _MERGE_BODY,
                "return np.concatenate([x[..., i, :, :] for i in range(n_heads)], axis=-2)",
            ),
        ),
        "merge_heads.axes_in_wrong_order",
        "heads concatenated along the token axis",
    ),
    _fresh(
        "merge_swaps_tokens_and_features",
        _e("merge_heads", ("np.swapaxes(x, -3, -2)", "np.swapaxes(x, -2, -1)")),
        ("merge_heads.tokens_mixed", "merge_heads.heads_not_side_by_side"),
        "swaps tokens and features before the reshape",
    ),
    _fresh(
        "mha_mask_on_fixed_axes",
        _e(
            "multi_head_attention",
            (
                "    if mask is not None:\n        scores = np.where(mask, scores, -np.inf)",
                "    if mask is not None:\n        scores[:, ~mask] = -np.inf",
            ),
        ),
        "multi_head_attention.batch_axes",
        "scores[:, ~mask], which only fits scores of shape (h, n, n)",
    ),
    _fresh(
        "mha_scaled_twice",
        _e("multi_head_attention", (_SOFTMAX, "weights = softmax(scores / d_k ** 0.5, axis=-1)")),
        ("multi_head_attention.scores_scaled_by_another_constant", "multi_head_attention.scale_by_d_k"),
        "the scores divided by sqrt(d_k) twice",
    ),
    _fresh(
        "mha_weights_transposed",
        _e("multi_head_attention", ("heads = weights @ v", "heads = np.swapaxes(weights, -1, -2) @ v")),
        "multi_head_attention.scores",
        "the attention matrix transposed before weighting the values",
    ),
    _fresh(
        "mha_mask_added_as_penalty",
        _e("multi_head_attention", (_MASK, "scores - 1e9 * mask")),
        "multi_head_attention.masking",
        "a penalty on the allowed keys instead of the blocked ones",
    ),
    _fresh(
        "mha_residual_inside",
        _e("multi_head_attention", ("return merge_heads(heads) @ W_O", "return merge_heads(heads) @ W_O + x")),
        "multi_head_attention.output_projection",
        "x added to the attention output (the block's job)",
    ),
    _fresh(
        "mha_queries_divided_by_d_k",
        _e(
            "multi_head_attention",
            ("    d_k = q.shape[-1]\n", "    d_k = q.shape[-1]\n    q = q / d_k\n"),
            (" " + _SCALE, ""),
        ),
        ("multi_head_attention.scores_scaled_by_another_constant", "multi_head_attention.scale_by_d_k"),
        "the queries divided by d_k instead of the scores by sqrt(d_k)",
    ),
    _fresh(
        "block_norm_parameters_swapped",
        _e(
            "pre_ln_block",
            ('layer_norm(x, p["ln1_gamma"], p["ln1_beta"])', 'layer_norm(x, p["ln2_gamma"], p["ln2_beta"])'),
            ('layer_norm(h, p["ln2_gamma"], p["ln2_beta"])', 'layer_norm(h, p["ln1_gamma"], p["ln1_beta"])'),
        ),
        "pre_ln_block.norm_parameters_mixed_up",
        "LN1's parameters in the FFN half and LN2's in the attention half",
    ),
    _fresh(
        "block_b1_after_gelu",
        _e("pre_ln_block", ('gelu(ffn_in @ p["W1"] + p["b1"])', 'gelu(ffn_in @ p["W1"]) + p["b1"]')),
        "pre_ln_block.feed_forward_half",
        "b1 added after the activation",
    ),
    _fresh(
        "block_normalises_the_ffn_output",
        _e(
            "pre_ln_block",
            (
                'return h + hidden @ p["W2"] + p["b2"]',
                'return h + layer_norm(hidden @ p["W2"] + p["b2"], p["ln2_gamma"], p["ln2_beta"])',
            ),
        ),
        ("pre_ln_block.feed_forward_half", "pre_ln_block.feed_forward_residual"),
        "LN2 applied to the FFN's output",
    ),
    _fresh(
        "block_residual_from_normalised_h",
        _e("pre_ln_block", ("return h + hidden", "return ffn_in + hidden")),
        "pre_ln_block.residual_path",
        "the FFN's residual adds LN2(h) instead of h",
    ),
    _fresh(
        "silu_tanh_without_half_factor",
        _e(
            "silu",
            (
                _SILU_BODY,
                "sigmoid = np.tanh(x / 2) + 1.0",
            ),
        ),
        "silu.sigmoid_part",
        "the tanh form of the sigmoid without its factor one half",
    ),
    _fresh(
        "silu_softplus",
        Form("silu", code="def silu(x):\n    return np.logaddexp(0.0, x)\n"),
        "silu.sigmoid_part",
        "softplus, log(1 + exp(x)), instead of x * sigmoid(x)",
    ),
    _fresh(
        "swiglu_down_before_product",
        _e("swiglu_ffn", ("return (gate * up) @ W_down", "return gate * (up @ W_down)")),
        "swiglu_ffn.down_projection",
        "gate * (up @ W_down): W_down applied to the up branch alone",
    ),
    _fresh(
        "swiglu_softplus_gate",
        _e("swiglu_ffn", ("gate = silu(x @ W_gate)", "gate = np.logaddexp(0.0, x @ W_gate)")),
        "swiglu_ffn.gate_activation",
        "a softplus gate",
    ),
    _fresh(
        "count_norms_as_scalars",
        _e(
            "count_block_params",
            (
                'per_norm = 2 * d_model if norm == "layernorm" else d_model',
                'per_norm = 2 if norm == "layernorm" else 1',
            ),
        ),
        "count_block_params.per_feature_terms",
        "one gamma (and beta) number per norm instead of d_model of them",
    ),
    _fresh(
        "count_swiglu_width_from_d_model",
        _e(
            "count_block_params",
            ("feed_forward = 3 * d_model * d_ff", "feed_forward = 3 * d_model * int(8 * d_model / 3)"),
        ),
        ("count_block_params.feed_forward_term", "count_block_params.ignores_d_ff"),
        "SwiGLU's d_ff taken as int(8 d_model / 3)",
    ),
    _fresh(
        "count_gelu_four_times_wider",
        _e(
            "count_block_params",
            ("feed_forward = 2 * d_model * d_ff + d_ff + d_model", "feed_forward = 8 * d_model * d_model"),
        ),
        ("count_block_params.feed_forward_term", "count_block_params.ignores_d_ff"),
        "the GELU network counted as 8 d_model squared",
    ),
]
