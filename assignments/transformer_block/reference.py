"""Reference solution for the transformer-block assignment: multi-head attention and the Pre-LN block.

Pure numpy, explicit weights, no hidden state. Weights multiply from the right (`x @ W`), so a
projection `W` has shape (d_in, d_out). Every function accepts leading batch axes where its
docstring says `...`, never mutates its inputs, and keeps the input's float dtype (float32 in,
float32 out): scalar constants are Python floats so they never promote an array.

Letters used in the shape comments:
    ...      any leading batch axes (possibly none)
    n        sequence length (tokens)
    d        d_model, the width of the residual stream
    h        number of heads
    d_k      d_model // h, the width of one head
    d_ff     hidden width of the feed-forward network
"""
from __future__ import annotations

import math

import numpy as np

__all__ = [
    "softmax", "gelu", "layer_norm", "rms_norm", "split_heads", "merge_heads", "multi_head_attention",
    "feed_forward", "pre_ln_block", "post_ln_block", "silu", "swiglu_ffn",
    "count_block_params", "init_block_params", "BLOCK_PARAM_NAMES",
]

BLOCK_PARAM_NAMES = ("ln1_gamma", "ln1_beta", "W_Q", "W_K", "W_V", "W_O",
                     "ln2_gamma", "ln2_beta", "W1", "b1", "W2", "b2")

_GELU_C = math.sqrt(2.0 / math.pi)   # Python float: keeps float32 arrays float32


# --------------------------------------------------------------------------- elementwise pieces

def softmax(x, axis=-1):
    """Numerically stable softmax along `axis`.

    x: any shape. Returns an array of the same shape whose entries along `axis` are positive
    and sum to one. The maximum is subtracted first so `exp` never overflows; entries equal
    to -inf become exactly 0 (a row that is entirely -inf is not supported).
    """
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def gelu(x):
    """GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

    x: any shape. Returns the same shape and dtype.
    """
    x = np.asarray(x)
    return 0.5 * x * (1.0 + np.tanh(_GELU_C * (x + 0.044715 * x ** 3)))


def _sigmoid(x):
    """Logistic sigmoid without overflow: exp is only ever taken of -|x|.

    x: any shape. Returns the same shape and dtype.
    """
    z = np.exp(-np.abs(x))                      # in (0, 1]: never overflows
    return np.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))


def silu(x):
    """SiLU (Swish): x * sigmoid(x).

    x: any shape. Returns the same shape and dtype; finite and warning-free for any finite x
    (the sigmoid never evaluates exp of a positive number).
    """
    x = np.asarray(x)
    with np.errstate(under="ignore"):
        return x * _sigmoid(x)


# --------------------------------------------------------------------------- LayerNorm

def layer_norm(x, gamma, beta, eps=1e-5):
    """LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta.

    x:     (..., d)
    gamma: (d,)   per-feature scale
    beta:  (d,)   per-feature shift
    eps:   added to the variance inside the square root
    Returns (..., d). Mean and variance are per token (over the d features); the variance is
    the population variance (divide by d).
    """
    x = np.asarray(x)
    mean = np.mean(x, axis=-1, keepdims=True)                 # (..., 1)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)    # (..., 1)
    x_hat = (x - mean) / np.sqrt(var + eps)                   # (..., d)
    return x_hat * gamma + beta                               # (..., d)


def rms_norm(x, gamma, eps=1e-6):
    """RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * gamma (no centring, no shift).

    x:     (..., d)
    gamma: (d,)   per-feature scale
    eps:   added to the mean square inside the square root
    Returns (..., d). The mean square is per token (over the d features).
    """
    x = np.asarray(x)
    mean_square = np.mean(x * x, axis=-1, keepdims=True)     # (..., 1)
    return x / np.sqrt(mean_square + eps) * gamma            # (..., d)


# --------------------------------------------------------------------------- heads

def split_heads(x, n_heads):
    """Cut the feature axis into heads and move the head axis in front of the tokens.

    x: (..., n, d_model). Returns (..., n_heads, n, d_k) with d_k = d_model // n_heads;
    head i holds features [i*d_k, (i+1)*d_k) of every token.
    Raises ValueError if d_model is not divisible by n_heads.
    """
    x = np.asarray(x)
    *lead, n, d_model = x.shape
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    d_k = d_model // n_heads
    x = x.reshape(*lead, n, n_heads, d_k)        # (..., n, h, d_k)
    return np.swapaxes(x, -3, -2)                # (..., h, n, d_k)


def merge_heads(x):
    """Inverse of split_heads: put the tokens back in front and concatenate the heads.

    x: (..., n_heads, n, d_k). Returns (..., n, n_heads * d_k).
    """
    x = np.asarray(x)
    *lead, n_heads, n, d_k = x.shape
    x = np.swapaxes(x, -3, -2)                   # (..., n, h, d_k)
    return x.reshape(*lead, n, n_heads * d_k)    # (..., n, d_model)


# --------------------------------------------------------------------------- attention

def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None, *,
                         split_heads=split_heads, merge_heads=merge_heads):
    """Multi-head self-attention without biases.

    x:       (..., n, d_model)
    W_Q, W_K, W_V, W_O: (d_model, d_model)
    n_heads: h, with d_model divisible by h; d_k = d_model // h
    mask:    optional boolean (n, n) (or broadcastable to (..., h, n, n)); mask[i, j] True means
             query i may attend to key j. Blocked scores become -inf before the softmax.
    split_heads, merge_heads: the building blocks to wire together (keyword-only; the graders
             pass a student's own to build the reference wiring on top of them).
    Returns (..., n, d_model).

    Per head: softmax(Q K^T / sqrt(d_k)) V; the heads are concatenated and projected by W_O.
    """
    x = np.asarray(x)
    d_model = x.shape[-1]
    d_k = d_model // n_heads
    Q = split_heads(x @ W_Q, n_heads)            # (..., n, d) -> (..., h, n, d_k)
    K = split_heads(x @ W_K, n_heads)            # (..., h, n, d_k)
    V = split_heads(x @ W_V, n_heads)            # (..., h, n, d_k)
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (...,h,n,d_k) @ (...,h,d_k,n) -> (...,h,n,n)
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool), scores, -np.inf)  # (..., h, n, n)
    weights = softmax(scores, axis=-1)           # (..., h, n, n), each row sums to 1
    heads = weights @ V                          # (...,h,n,n) @ (...,h,n,d_k) -> (...,h,n,d_k)
    concat = merge_heads(heads)                  # (..., n, d)
    return concat @ W_O                          # (..., n, d)


# --------------------------------------------------------------------------- feed-forward

def feed_forward(x, W1, b1, W2, b2):
    """Position-wise FFN: gelu(x W1 + b1) W2 + b2.

    x: (..., n, d_model); W1: (d_model, d_ff); b1: (d_ff,); W2: (d_ff, d_model); b2: (d_model,).
    Returns (..., n, d_model).
    """
    hidden = gelu(x @ W1 + b1)                   # (..., n, d_ff)
    return hidden @ W2 + b2                      # (..., n, d)


def swiglu_ffn(x, W_gate, W_up, W_down, *, silu=silu):
    """SwiGLU FFN without biases: (silu(x W_gate) * (x W_up)) W_down.

    x: (..., n, d_model); W_gate, W_up: (d_model, d_ff); W_down: (d_ff, d_model).
    silu: the activation to wire in (keyword-only building block, as in multi_head_attention).
    Returns (..., n, d_model).
    """
    gate = silu(x @ W_gate)                      # (..., n, d_ff)
    up = x @ W_up                                # (..., n, d_ff)
    return (gate * up) @ W_down                  # (..., n, d)


# --------------------------------------------------------------------------- blocks

def pre_ln_block(x, params, n_heads, mask=None, *, layer_norm=layer_norm,
                 multi_head_attention=multi_head_attention):
    """Pre-LN transformer block: normalise, transform, add back to the residual stream.

        h   = x + MHA(LN1(x))
        out = h + FFN(LN2(h))

    x: (..., n, d_model). params: dict with
        ln1_gamma, ln1_beta, ln2_gamma, ln2_beta: (d_model,)
        W_Q, W_K, W_V, W_O: (d_model, d_model)
        W1: (d_model, d_ff), b1: (d_ff,), W2: (d_ff, d_model), b2: (d_model,)
    n_heads, mask: as in multi_head_attention.
    layer_norm, multi_head_attention: the building blocks to wire in (keyword-only, as in
        multi_head_attention).
    Returns (..., n, d_model).
    """
    p = params
    a = layer_norm(x, p["ln1_gamma"], p["ln1_beta"])                               # (..., n, d)
    h = x + multi_head_attention(a, p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask)
    f = layer_norm(h, p["ln2_gamma"], p["ln2_beta"])                               # (..., n, d)
    return h + feed_forward(f, p["W1"], p["b1"], p["W2"], p["b2"])                 # (..., n, d)


def post_ln_block(x, params, n_heads, mask=None):
    """Post-LN transformer block (the original 2017 ordering), for comparison:

        h   = LN1(x + MHA(x))
        out = LN2(h + FFN(h))

    Same arguments and shapes as pre_ln_block. Returns (..., n, d_model).
    """
    p = params
    h = layer_norm(x + multi_head_attention(x, p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask),
                   p["ln1_gamma"], p["ln1_beta"])                                  # (..., n, d)
    return layer_norm(h + feed_forward(h, p["W1"], p["b1"], p["W2"], p["b2"]),
                      p["ln2_gamma"], p["ln2_beta"])                               # (..., n, d)


# --------------------------------------------------------------------------- accounting

def count_block_params(d_model, d_ff, ffn, norm="layernorm"):
    """Number of learned weights in one block.

    attention: W_Q, W_K, W_V, W_O, no biases          4 d^2
    two norms: norm="layernorm", gamma and beta each   4 d
               norm="rmsnorm", gamma only each         2 d
    ffn="gelu":   W1, b1, W2, b2                      2 d d_ff + d_ff + d
    ffn="swiglu": W_gate, W_up, W_down, no biases     3 d d_ff
    Returns an int. Raises ValueError for any other `ffn` or `norm`.
    """
    d, f = int(d_model), int(d_ff)
    attention = 4 * d * d
    if norm == "layernorm":
        norms = 2 * (2 * d)
    elif norm == "rmsnorm":
        norms = 2 * d
    else:
        raise ValueError(f"norm must be 'layernorm' or 'rmsnorm', got {norm!r}")
    if ffn == "gelu":
        ffn_count = 2 * d * f + f + d
    elif ffn == "swiglu":
        ffn_count = 3 * d * f
    else:
        raise ValueError(f"ffn must be 'gelu' or 'swiglu', got {ffn!r}")
    return attention + norms + ffn_count


def init_block_params(rng, d_model, d_ff, dtype=np.float64):
    """A params dict for pre_ln_block/post_ln_block, drawn from `rng` (a np.random.Generator).

    Projections have entries of standard deviation 1/sqrt(fan_in), so activations keep a scale
    near one; gammas scatter around 1 and betas and biases around 0 (not exactly 1 and 0, so
    that a swapped or missing scale or shift changes the output). Keys: BLOCK_PARAM_NAMES.
    """
    d, f = int(d_model), int(d_ff)

    def normal(shape, scale, loc=0.0):
        return (loc + scale * rng.standard_normal(shape)).astype(dtype)

    return {
        "ln1_gamma": normal((d,), 0.2, 1.0),
        "ln1_beta": normal((d,), 0.2),
        "W_Q": normal((d, d), 1 / math.sqrt(d)),
        "W_K": normal((d, d), 1 / math.sqrt(d)),
        "W_V": normal((d, d), 1 / math.sqrt(d)),
        "W_O": normal((d, d), 1 / math.sqrt(d)),
        "ln2_gamma": normal((d,), 0.2, 1.0),
        "ln2_beta": normal((d,), 0.2),
        "W1": normal((d, f), 1 / math.sqrt(d)),
        "b1": normal((f,), 0.2),
        "W2": normal((f, d), 1 / math.sqrt(f)),
        "b2": normal((d,), 0.2),
    }
