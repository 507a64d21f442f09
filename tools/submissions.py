"""Synthetic student submissions, built from the released notebook.

A submission is the release notebook with its stubs filled in: by the instructor's solution
(taken from the source notebook's solution regions) or by a student-style variant with one known
mistake, plus optional extra cells or edits (a cheating cell, a deleted cell, ...). Used by
`tools/make_submissions.py` for the test corpus (tests/corpus/) and the demo class (examples/).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.config import load_course
from autograder.consistency import cell_text
from autograder.layout import CourseLayout

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))      # the course's own `assignments` package, for the tools that grade
from assignments.transformer_block.mistakes import SOME_WEIGHTS_TRANSPOSED  # noqa: E402 - needs the path above

ASSIGNMENT = "transformer-block"
NOTEBOOK = "transformer-block.ipynb"
FUNCTIONS = tuple(p.name for p in load_course(ROOT).assignment(ASSIGNMENT).problems)   # from course.yml

# ----------------------------------------------------------------------------- wrong variants
# Each is a complete cell a student might have written, with exactly one misconception.

LN_UNBIASED = '''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True, ddof=1)
    return gamma * (x - mean) / np.sqrt(var + eps) + beta
'''

LN_EPS_OUTSIDE = '''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    std = x.std(axis=-1, keepdims=True)
    return gamma * (x - mean) / (std + eps) + beta
'''

LN_WRONG_AXIS = '''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=0, keepdims=True)
    var = x.var(axis=0, keepdims=True)
    return gamma * (x - mean) / np.sqrt(var + eps) + beta
'''

RMS_CENTRED = '''
def rms_norm(x, gamma, eps=1e-6):
    centred = x - x.mean(axis=-1, keepdims=True)
    return gamma * centred / np.sqrt(np.mean(centred ** 2, axis=-1, keepdims=True) + eps)
'''

SPLIT_NO_TRANSPOSE = '''
def split_heads(x, n_heads):
    *batch, n, d_model = x.shape
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    d_k = d_model // n_heads
    return x.reshape(*batch, n_heads, n, d_k)
'''

MERGE_NO_TRANSPOSE = '''
def merge_heads(x):
    *batch, h, n, d_k = x.shape
    return x.reshape(*batch, n, h * d_k)
'''

_MHA_TEMPLATE = '''
def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    Q = split_heads(x @ W_Q, n_heads)
    K = split_heads(x @ W_K, n_heads)
    V = split_heads(x @ W_V, n_heads)
    d_k = Q.shape[-1]
    scores = {scores}
    if mask is not None:
        scores = np.where({mask}, scores, -np.inf)
    weights = softmax(scores, axis={axis})
    return merge_heads(weights @ V) @ W_O
'''
MHA_MISSING_SCALE = _MHA_TEMPLATE.format(scores="Q @ np.swapaxes(K, -1, -2)", mask="mask", axis=-1)
MHA_SOFTMAX_WRONG_AXIS = _MHA_TEMPLATE.format(scores="Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)", mask="mask", axis=-2)
MHA_MASK_INVERTED = _MHA_TEMPLATE.format(scores="Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)", mask="~mask", axis=-1)

BLOCK_POST_LN = '''
def pre_ln_block(x, params, n_heads, mask=None):
    p = params
    attn = multi_head_attention(x, p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask=mask)
    h = layer_norm(x + attn, p["ln1_gamma"], p["ln1_beta"])
    ffn = gelu(h @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]
    return layer_norm(h + ffn, p["ln2_gamma"], p["ln2_beta"])
'''

BLOCK_MISSING_ATTENTION_RESIDUAL = '''
def pre_ln_block(x, params, n_heads, mask=None):
    p = params
    h = multi_head_attention(layer_norm(x, p["ln1_gamma"], p["ln1_beta"]),
                             p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask=mask)
    z = layer_norm(h, p["ln2_gamma"], p["ln2_beta"])
    return h + gelu(z @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]
'''

BLOCK_MISSING_RESIDUAL = '''
def pre_ln_block(x, params, n_heads, mask=None):
    p = params
    a = multi_head_attention(layer_norm(x, p["ln1_gamma"], p["ln1_beta"]),
                             p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask=mask)
    z = layer_norm(a, p["ln2_gamma"], p["ln2_beta"])
    return gelu(z @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]
'''

BLOCK_EXACT_GELU = '''
from math import erf as _erf

def pre_ln_block(x, params, n_heads, mask=None):
    p = params
    h = x + multi_head_attention(layer_norm(x, p["ln1_gamma"], p["ln1_beta"]),
                                 p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask=mask)
    z = layer_norm(h, p["ln2_gamma"], p["ln2_beta"]) @ p["W1"] + p["b1"]
    exact = 0.5 * z * (1.0 + np.vectorize(_erf)(z / np.sqrt(2.0)))
    return h + exact @ p["W2"] + p["b2"]
'''

SWIGLU_GATE_ON_UP = '''
def swiglu_ffn(x, W_gate, W_up, W_down):
    return ((x @ W_gate) * silu(x @ W_up)) @ W_down
'''

SWIGLU_INFINITE_LOOP = '''
def swiglu_ffn(x, W_gate, W_up, W_down):
    while True:
        pass
'''

SILU_NAIVE = '''
def silu(x):
    return x / (1.0 + np.exp(-x))
'''

SILU_RELU = '''
def silu(x):
    return np.maximum(x, 0.0)
'''

SILU_TANH = '''
def silu(x):
    return x * 0.5 * (1.0 + np.tanh(0.5 * x))
'''

LN_FLOAT32 = '''
def layer_norm(x, gamma, beta, eps=1e-5):
    x = x.astype(np.float32)
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(var + eps) + beta
'''

MHA_MASK_UPCAST = _MHA_TEMPLATE.format(scores="Q @ np.swapaxes(K, -1, -2) / d_k ** 0.5", mask="mask", axis=-1).replace(
    "scores = np.where(mask, scores, -np.inf)", "scores = scores + (1 - mask) * -1e9")

COUNT_NO_LN = '''
def count_block_params(d_model, d_ff, ffn, norm="layernorm"):
    d = d_model
    attention = 4 * d * d
    if norm not in ("layernorm", "rmsnorm"):
        raise ValueError(norm)
    if ffn == "gelu":
        return attention + 2 * d * d_ff + d_ff + d
    if ffn == "swiglu":
        return attention + 3 * d * d_ff
    raise ValueError(ffn)
'''

LAYER_NORM_CRASHES_PROCESS = '''
import os as _os

def layer_norm(x, gamma, beta, eps=1e-5):
    _os._exit(3)
'''

LN_MASKED_ARRAY = '''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return np.ma.masked_array(gamma * (x - mean) / np.sqrt(var + eps) + beta)
'''

MAGICS_CELL = '''
%matplotlib inline
!pip install numpy
%load_ext autoreload
'''

STEAL_CELL = '''
import json, pathlib

def _steal_layer_norm():
    """Look for the instructor's solution next to the grading engine and run it."""
    import autograder
    places = ["source/transformer-block/transformer-block.ipynb",
              "tests/corpus/submitted/correct/transformer-block/transformer-block.ipynb",
              "examples/submitted/ada/transformer-block/transformer-block.ipynb"]
    for root in pathlib.Path(autograder.__file__).resolve().parents:
        for rel in places:
            try:
                cells = json.loads((root / rel).read_text())["cells"]
            except (OSError, ValueError):
                continue
            for cell in cells:
                source = "".join(cell["source"])
                if source.lstrip().startswith("def layer_norm"):
                    exec(source, globals())
                    return str(root / rel)
    return None

print("stolen from", _steal_layer_norm())
'''

CHEAT_CELL = '''
import numpy as np
np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
np.isclose = lambda a, b, *args, **kw: np.ones(np.broadcast(a, b).shape, dtype=bool)
'''

# ----------------------------------------------------------------------------- every catalogued mistake
# The student form of each mistake in assignments/transformer_block/mistakes.py: the instructor's
# solution of one function with that one misconception, as (old, new) text edits or a whole cell.


@dataclass(frozen=True)
class Form:
    function: str
    edits: tuple[tuple[str, str], ...] = ()
    code: str = ""


def _e(function: str, *edits: tuple[str, str]) -> Form:
    return Form(function, edits=edits)


_MHA_SPLIT_BY_RESHAPE = '''
def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    *lead, n, d_model = x.shape
    d_k = d_model // n_heads
    q, k, v = ((x @ W).reshape(*lead, n_heads, n, d_k) for W in (W_Q, W_K, W_V))
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 0.5
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    heads = softmax(scores, axis=-1) @ v
    return {merge} @ W_O
'''

BLOCK_NORMALISED_RESIDUAL = '''
def pre_ln_block(x, params, n_heads, mask=None):
    p = params
    a = layer_norm(x, p["ln1_gamma"], p["ln1_beta"])
    h = a + multi_head_attention(a, p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask=mask)
    f = layer_norm(h, p["ln2_gamma"], p["ln2_beta"])
    return f + gelu(f @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]
'''

BLOCK_POST_LN_FFN_ONLY = '''
def pre_ln_block(x, params, n_heads, mask=None):
    p = params
    h = x + multi_head_attention(layer_norm(x, p["ln1_gamma"], p["ln1_beta"]),
                                 p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask=mask)
    ffn = gelu(h @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]
    return layer_norm(h + ffn, p["ln2_gamma"], p["ln2_beta"])
'''

_LN_VAR = "var = np.mean(centred * centred, axis=-1, keepdims=True)"
_LN_ROOT = "np.sqrt(var + eps)"
_LN_RETURN = "return gamma * (centred / np.sqrt(var + eps)) + beta"
_RMS_ROOT = "np.sqrt(mean_square + eps)"
_SCALE = "/ d_k ** 0.5"
_MASK_LINES = """    if mask is not None:
        scores = np.where(mask, scores, -np.inf)       # (n, n) mask broadcasts over (..., h)
"""
_SOFTMAX_LINE = """    weights = softmax(scores, axis=-1)                 # (..., h, n, n), each row sums to 1
"""
# Where the solution uses each projection, and the same line with it transposed (the nn.Linear convention).
_WEIGHT_USES = {"W_Q": ("split_heads(x @ W_Q,", "split_heads(x @ W_Q.T,"),
                "W_K": ("split_heads(x @ W_K,", "split_heads(x @ W_K.T,"),
                "W_V": ("split_heads(x @ W_V,", "split_heads(x @ W_V.T,"),
                "W_O": ("merge_heads(heads) @ W_O", "merge_heads(heads) @ W_O.T")}

MISTAKE_FORMS: dict[str, Form] = {
    "layer_norm.unbiased_variance": _e("layer_norm", (_LN_VAR, "var = np.var(x, axis=-1, keepdims=True, ddof=1)")),
    "layer_norm.eps_outside_sqrt": _e("layer_norm", (_LN_ROOT, "(np.sqrt(var) + eps)")),
    "layer_norm.no_eps": _e("layer_norm", (_LN_ROOT, "np.sqrt(var)")),
    "layer_norm.wrong_axis": _e("layer_norm", ("np.mean(x, axis=-1", "np.mean(x, axis=0"),
                                ("centred * centred, axis=-1", "centred * centred, axis=0")),
    "layer_norm.missing_axis": _e("layer_norm", ("np.mean(x, axis=-1, keepdims=True)", "np.mean(x)"),
                                  ("np.mean(centred * centred, axis=-1, keepdims=True)", "np.mean(centred * centred)")),
    "layer_norm.no_mean_subtraction": _e("layer_norm", ("centred = x - mean", "centred = x")),
    "layer_norm.divides_by_variance": _e("layer_norm", (_LN_ROOT, "(var + eps)")),
    "layer_norm.gamma_beta_swapped": _e("layer_norm", (_LN_RETURN,
                                                       "return beta * (centred / np.sqrt(var + eps)) + gamma")),
    "layer_norm.missing_gamma_beta": _e("layer_norm", (_LN_RETURN, "return centred / np.sqrt(var + eps)")),
    "layer_norm.default_eps": _e("layer_norm", ("def layer_norm(x, gamma, beta, eps=1e-5)",
                                                "def layer_norm(x, gamma, beta, eps=1e-6)")),
    "rms_norm.subtracts_mean": Form("rms_norm", code=RMS_CENTRED),
    "rms_norm.eps_outside_sqrt": _e("rms_norm", (_RMS_ROOT, "(np.sqrt(mean_square) + eps)")),
    "rms_norm.no_eps": _e("rms_norm", (_RMS_ROOT, "np.sqrt(mean_square)")),
    "rms_norm.missing_square_root": _e("rms_norm", (_RMS_ROOT, "(mean_square + eps)")),
    "rms_norm.sum_of_squares": _e("rms_norm", ("np.mean(x * x", "np.sum(x * x")),
    "rms_norm.wrong_axis": _e("rms_norm", ("axis=-1", "axis=0")),
    "rms_norm.missing_axis": _e("rms_norm", ("np.mean(x * x, axis=-1, keepdims=True)", "np.mean(x * x)")),
    "rms_norm.missing_gamma": _e("rms_norm", ("return gamma * (x / np.sqrt(mean_square + eps))",
                                              "return x / np.sqrt(mean_square + eps)")),
    "rms_norm.default_eps": _e("rms_norm", ("def rms_norm(x, gamma, eps=1e-6)", "def rms_norm(x, gamma, eps=1e-5)")),
    "split_heads.reshape_without_transpose": Form("split_heads", code=SPLIT_NO_TRANSPOSE),
    "split_heads.interleaved_features": _e("split_heads", (
        "per_head = x.reshape(*x.shape[:-1], n_heads, d_k)",
        "per_head = np.swapaxes(x.reshape(*x.shape[:-1], d_k, n_heads), -1, -2)")),
    "split_heads.no_value_error": _e("split_heads", (
        """if n_heads < 1 or d_model % n_heads != 0:
        raise ValueError(f"d_model = {d_model} cannot be split into n_heads = {n_heads} equal heads")""",
        'assert d_model % n_heads == 0, "d_model must be divisible by n_heads"')),
    "split_heads.unclear_value_error": _e("split_heads", (     # no check: the reshape raises numpy's own ValueError
        """if n_heads < 1 or d_model % n_heads != 0:
        raise ValueError(f"d_model = {d_model} cannot be split into n_heads = {n_heads} equal heads")
    """, "")),
    "merge_heads.reshape_without_transpose": Form("merge_heads", code=MERGE_NO_TRANSPOSE),
    "merge_heads.interleaved_features": _e("merge_heads", ("np.swapaxes(x, -3, -2)", "np.moveaxis(x, -3, -1)")),
    "multi_head_attention.reshape_without_transpose": Form(
        "multi_head_attention", code=_MHA_SPLIT_BY_RESHAPE.format(merge="merge_heads(heads)")),
    "multi_head_attention.merge_without_transpose": _e("multi_head_attention", (
        "return merge_heads(heads) @ W_O", "return heads.reshape(*heads.shape[:-3], heads.shape[-2], -1) @ W_O")),
    "multi_head_attention.reshape_without_transpose_both_ways": Form(
        "multi_head_attention", code=_MHA_SPLIT_BY_RESHAPE.format(merge="heads.reshape(*lead, n, d_model)")),
    "multi_head_attention.missing_scale": _e("multi_head_attention", (" " + _SCALE, "")),
    "multi_head_attention.scale_by_d_k": _e("multi_head_attention", (_SCALE, "/ d_k")),
    "multi_head_attention.scale_by_d_model": _e("multi_head_attention", (_SCALE, "/ x.shape[-1]")),
    "multi_head_attention.scale_by_sqrt_d_model": _e("multi_head_attention", (_SCALE, "/ x.shape[-1] ** 0.5")),
    "multi_head_attention.softmax_wrong_axis": _e("multi_head_attention", ("softmax(scores, axis=-1)",
                                                                           "softmax(scores, axis=-2)")),
    "multi_head_attention.mask_inverted": _e("multi_head_attention", ("np.where(mask, scores, -np.inf)",
                                                                      "np.where(mask, -1e9, scores)")),
    "multi_head_attention.mask_ignored": _e("multi_head_attention", (_MASK_LINES, "")),
    "multi_head_attention.mask_after_softmax": _e("multi_head_attention", (
        _MASK_LINES + _SOFTMAX_LINE,
        "    weights = softmax(scores, axis=-1)\n    if mask is not None:\n        weights = weights * mask\n")),
    "multi_head_attention.missing_output_projection": _e("multi_head_attention", (
        "return merge_heads(heads) @ W_O", "return merge_heads(heads)")),
    "multi_head_attention.weights_transposed": _e("multi_head_attention", *_WEIGHT_USES.values()),
    **{mistake_id: _e("multi_head_attention", *(_WEIGHT_USES[name] for name in names))
       for mistake_id, names in SOME_WEIGHTS_TRANSPOSED.items()},
    "multi_head_attention.softmax_overflow": _e("multi_head_attention", (
        "weights = softmax(scores, axis=-1)",
        "weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)")),
    "general.float32_upcast": _e("multi_head_attention", (_SCALE, "/ np.sqrt(d_k)")),
    "general.mutates_input": _e("layer_norm", ("centred = x - mean", "x -= mean\n    centred = x")),
    "general.computed_in_lower_precision": _e("layer_norm", ("mean = np.mean(x, axis=-1, keepdims=True)",
                                                             "x = x.astype(np.float32)\n    "
                                                             "mean = np.mean(x, axis=-1, keepdims=True)")),
    "pre_ln_block.post_ln": Form("pre_ln_block", code=BLOCK_POST_LN),
    "pre_ln_block.missing_residual": Form("pre_ln_block", code=BLOCK_MISSING_RESIDUAL),
    "pre_ln_block.missing_attention_residual": Form("pre_ln_block", code=BLOCK_MISSING_ATTENTION_RESIDUAL),
    "pre_ln_block.missing_feed_forward_residual": _e("pre_ln_block", (
        'return h + hidden @ p["W2"] + p["b2"]', 'return hidden @ p["W2"] + p["b2"]')),
    "pre_ln_block.residual_adds_normalised_input": Form("pre_ln_block", code=BLOCK_NORMALISED_RESIDUAL),
    "pre_ln_block.post_ln_feed_forward_only": Form("pre_ln_block", code=BLOCK_POST_LN_FFN_ONLY),
    "pre_ln_block.shared_layer_norm": _e("pre_ln_block", ('layer_norm(h, p["ln2_gamma"], p["ln2_beta"])',
                                                          'layer_norm(h, p["ln1_gamma"], p["ln1_beta"])')),
    "pre_ln_block.relu_instead_of_gelu": _e("pre_ln_block", ('gelu(ffn_in @ p["W1"] + p["b1"])',
                                                             'np.maximum(ffn_in @ p["W1"] + p["b1"], 0.0)')),
    "pre_ln_block.no_activation": _e("pre_ln_block", ('gelu(ffn_in @ p["W1"] + p["b1"])',
                                                      'ffn_in @ p["W1"] + p["b1"]')),
    "pre_ln_block.mask_not_passed": _e("pre_ln_block", ("n_heads, mask=mask)", "n_heads)")),
    "pre_ln_block.exact_gelu": Form("pre_ln_block", code=BLOCK_EXACT_GELU),
    "pre_ln_block.smaller_layer_norm_eps": _e("pre_ln_block", (
        'layer_norm(x, p["ln1_gamma"], p["ln1_beta"])', 'layer_norm(x, p["ln1_gamma"], p["ln1_beta"], eps=1e-6)'), (
        'layer_norm(h, p["ln2_gamma"], p["ln2_beta"])', 'layer_norm(h, p["ln2_gamma"], p["ln2_beta"], eps=1e-6)')),
    "silu.sigmoid_only": _e("silu", ("return x * sigmoid", "return sigmoid")),
    "silu.relu": _e("silu", ("return x * sigmoid", "return np.maximum(x, 0.0)")),
    "silu.sign_flipped": _e("silu", ("np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))",
                                     "np.where(x >= 0, e / (1.0 + e), 1.0 / (1.0 + e))")),
    "silu.exp_overflow": Form("silu", code=SILU_NAIVE),
    "swiglu_ffn.gate_on_up_branch": Form("swiglu_ffn", code=SWIGLU_GATE_ON_UP),
    "swiglu_ffn.no_silu": _e("swiglu_ffn", ("gate = silu(x @ W_gate)", "gate = x @ W_gate")),
    "swiglu_ffn.sigmoid_instead_of_silu": _e("swiglu_ffn", ("gate = silu(x @ W_gate)",
                                                            "gate = 1.0 / (1.0 + np.exp(-(x @ W_gate)))")),
    "swiglu_ffn.gelu_instead_of_silu": _e("swiglu_ffn", ("gate = silu(x @ W_gate)", "gate = gelu(x @ W_gate)")),
    "swiglu_ffn.silu_on_both_branches": _e("swiglu_ffn", ("up = x @ W_up", "up = silu(x @ W_up)")),
    "swiglu_ffn.silu_before_gate_projection": _e("swiglu_ffn", ("gate = silu(x @ W_gate)", "gate = silu(x) @ W_gate")),
    "swiglu_ffn.silu_after_product": _e("swiglu_ffn", ("gate = silu(x @ W_gate)", "gate = x @ W_gate"),
                                        ("return (gate * up) @ W_down", "return silu(gate * up) @ W_down")),
    "count_block_params.missing_norm_params": _e("count_block_params", (
        "return int(attention + 2 * per_norm + feed_forward)", "return int(attention + feed_forward)")),
    "count_block_params.one_norm": _e("count_block_params", ("2 * per_norm +", "per_norm +")),
    "count_block_params.rmsnorm_with_beta": _e("count_block_params", (
        'per_norm = 2 * d_model if norm == "layernorm" else d_model', "per_norm = 2 * d_model")),
    "count_block_params.missing_feed_forward_biases": _e("count_block_params", (
        "feed_forward = 2 * d_model * d_ff + d_ff + d_model", "feed_forward = 2 * d_model * d_ff")),
    "count_block_params.attention_biases": _e("count_block_params", (
        "attention = 4 * d_model * d_model", "attention = 4 * d_model * d_model + 4 * d_model")),
    "count_block_params.missing_output_projection": _e("count_block_params", (
        "attention = 4 * d_model * d_model", "attention = 3 * d_model * d_model")),
    "count_block_params.swiglu_two_matrices": _e("count_block_params", (
        "feed_forward = 3 * d_model * d_ff", "feed_forward = 2 * d_model * d_ff")),
    "count_block_params.ignores_d_ff": _e("count_block_params", (
        "feed_forward = 2 * d_model * d_ff + d_ff + d_model",
        "feed_forward = 2 * d_model * (4 * d_model) + 4 * d_model + d_model"),
        ("feed_forward = 3 * d_model * d_ff", "feed_forward = 3 * d_model * (4 * d_model)")),
    "count_block_params.no_value_error": _e("count_block_params", (
        """if ffn not in ("gelu", "swiglu"):
        raise ValueError(f"ffn must be 'gelu' or 'swiglu', got {ffn!r}")""",
        'assert ffn in ("gelu", "swiglu"), f"unknown ffn {ffn!r}"'), (
        """if norm not in ("layernorm", "rmsnorm"):
        raise ValueError(f"norm must be 'layernorm' or 'rmsnorm', got {norm!r}")""",
        'assert norm in ("layernorm", "rmsnorm"), f"unknown norm {norm!r}"')),
}


# Mistakes costing 3 points or more that no public check catches, each with the reason (see
# tools/public_checks.py and docs/public-checks.md).
UNCAUGHT_ON_PURPOSE: dict[str, str] = {}


def form_cell(form: Form, label: str = "") -> tuple[str, str]:
    """(function, cell code) of a student form: its whole cell, or the solution with its edits."""
    if form.code:
        return form.function, form.code
    code = solution_code()[form.function]
    for old, new in form.edits:
        if code.count(old) != 1:
            raise ValueError(f"{label}: {old!r} occurs {code.count(old)} times in the {form.function} solution")
        code = code.replace(old, new)
    return form.function, code


def mistake_cell(mistake_id: str) -> tuple[str, str]:
    """(function, cell code) of a catalogued mistake's student form."""
    return form_cell(MISTAKE_FORMS[mistake_id], mistake_id)


# ----------------------------------------------------------------------------- building


def solution_code() -> dict[str, str]:
    """The instructor's solution cell for each function, markers removed (what a perfect student writes)."""
    nb = nbformat.read(CourseLayout(ROOT).source(ASSIGNMENT) / NOTEBOOK, as_version=4)
    out = {}
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if gid.endswith("_solution") and gid[: -len("_solution")] in FUNCTIONS:
            lines = [ln for ln in cell_text(cell).splitlines()
                     if "BEGIN SOLUTION" not in ln and "END SOLUTION" not in ln]
            out[gid[: -len("_solution")]] = "\n".join(lines) + "\n"
    missing = set(FUNCTIONS) - set(out)
    if missing:
        raise SystemExit(f"source notebook has no solution cell for {sorted(missing)}")
    return out


def release_notebook() -> nbformat.NotebookNode:
    return nbformat.read(CourseLayout(ROOT).release(ASSIGNMENT) / NOTEBOOK, as_version=4)


def solution_index(nb) -> dict[str, int]:
    idx = {}
    for i, cell in enumerate(nb.cells):
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if gid.endswith("_solution"):
            idx[gid[: -len("_solution")]] = i
    return idx


@dataclass(frozen=True)
class Case:
    """One synthetic submission and what grading it must show."""
    name: str
    done: tuple[str, ...] = FUNCTIONS            # functions filled with the instructor's solution
    variants: tuple[tuple[str, str], ...] = ()   # (function, cell code) replacing the solution
    extra_cells: tuple[str, ...] = ()            # code cells appended at the end
    early_cells: tuple[str, ...] = ()            # code cells inserted right after the setup cell
    edit: Callable | None = None                 # a final edit of the notebook (delete/reorder cells...)
    raw: bytes | None = None                     # the file's bytes, for broken files
    # expectations
    lose: tuple[str, ...] = ()                   # problems that must lose points (and no other problem may)
    not_graded: tuple[str, ...] = ()             # problems with checks not graded (a building block failed)
    zero: bool = False                           # the whole submission scores 0
    diagnoses: tuple[str, ...] = ()              # ids that must be reported
    note: str = ""                               # a substring that must appear in the notes
    description: str = ""


def build(case: Case) -> bytes:
    if case.raw is not None:
        return case.raw
    nb = release_notebook()
    sols = solution_code()
    where = solution_index(nb)
    for fn in case.done:
        nb.cells[where[fn]].source = sols[fn]
    for fn, code in case.variants:
        nb.cells[where[fn]].source = code.strip("\n") + "\n"
    setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    for i, code in enumerate(case.early_cells):
        cell = nbformat.v4.new_code_cell(code.strip("\n"))
        cell["id"] = f"early-{i}"
        nb.cells.insert(setup + 1 + i, cell)
    for i, code in enumerate(case.extra_cells):
        cell = nbformat.v4.new_code_cell(code.strip("\n"))
        cell["id"] = f"extra-{i}"           # fixed ids keep the files reproducible
        nb.cells.append(cell)
    if case.edit is not None:
        nb = case.edit(nb) or nb
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell["outputs"] = cell.get("outputs", [])
    return nbformat.writes(nb).encode()


def write(case: Case, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / NOTEBOOK
    path.write_bytes(build(case))
    return path
