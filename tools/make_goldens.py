"""Golden outputs for the transformer-block reference, computed by PyTorch in float64.

PyTorch is an implementation nobody on this course wrote, so agreement with it checks the numpy
reference (assignments/transformer_block/reference.py) from the outside. This script never
imports the reference: every expected value is composed from torch ops (F.layer_norm,
F.rms_norm, F.scaled_dot_product_attention, nn.MultiheadAttention, F.gelu(approximate="tanh"), F.silu, ...).

Run it with torch from a throwaway virtualenv (torch is not a project dependency; do not install it
into the project's .venv), from the repository root:

    python3 -m venv /tmp/torch-venv
    /tmp/torch-venv/bin/pip install torch==2.13.0 numpy
    /tmp/torch-venv/bin/python tools/make_goldens.py
        # writes tests/assignments/transformer_block/goldens.npz under the repository this script is
        # in, from whatever folder it is run; --out PATH and --seed N to change

The stored values are deterministic for a given seed and torch version.

File format (an .npz that loads with allow_pickle=False):
    "manifest"            0-d str array holding JSON:
                          {"torch": version, "seed": N,
                           "cases": {case: {"function": name, "args": [[arg, kind, value], ...]}}}
                          kind "array":  the array is stored at "<case>/<arg>"
                          kind "params": a dict of arrays stored at "<case>/<arg>.<key>" (keys in value)
                          kind "value":  a JSON scalar (int, float, str or null) held in value
    "<case>/out"          the expected return value (0-d int64 for count_block_params)
Arguments are named as in the reference's signatures and are meant to be passed by keyword.
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "tests/assignments/transformer_block/goldens.npz"
DEFAULT_SEED = 20260530
BLOCK_KEYS = ("ln1_gamma", "ln1_beta", "W_Q", "W_K", "W_V", "W_O",
              "ln2_gamma", "ln2_beta", "W1", "b1", "W2", "b2")


@dataclass(frozen=True)
class Case:
    """One call of a reference function by keyword, and what torch says it returns."""
    name: str
    function: str
    kwargs: dict[str, Any]          # np.ndarray, dict of np.ndarray, or a plain scalar/None/str
    expected: np.ndarray
    order: tuple[str, ...] = field(default=())   # argument order, for the manifest


# --------------------------------------------------------------------------- torch side

def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def torch_split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(..., n, d) -> (..., h, n, d/h)"""
    return x.unflatten(-1, (n_heads, x.shape[-1] // n_heads)).transpose(-3, -2)


def torch_merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(..., h, n, d_k) -> (..., n, h*d_k)"""
    return x.transpose(-3, -2).flatten(-2)


def torch_mha_sdpa(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    """x @ W projections, heads via reshape/transpose, F.scaled_dot_product_attention.

    SDPA's boolean attn_mask means True = takes part in attention, the reference's convention.
    """
    q, k, v = (torch_split_heads(x @ W, n_heads) for W in (W_Q, W_K, W_V))
    attn_mask = None if mask is None else torch.as_tensor(mask, dtype=torch.bool)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    return torch_merge_heads(heads) @ W_O


def torch_mha_module(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    """The same attention through nn.MultiheadAttention, with the weights mapped.

    nn.MultiheadAttention computes x @ W.T (nn.Linear), stacks W_Q, W_K, W_V in in_proj_weight,
    and its boolean attn_mask means True = *blocked*, so the mask is inverted.
    """
    *lead, n, d = x.shape
    mha = nn.MultiheadAttention(d, n_heads, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([W_Q.T, W_K.T, W_V.T], dim=0))
        mha.out_proj.weight.copy_(W_O.T)
    blocked = None if mask is None else ~torch.as_tensor(mask, dtype=torch.bool)
    xb = x.reshape(-1, n, d)
    out, _ = mha(xb, xb, xb, attn_mask=blocked, need_weights=False)
    return out.reshape(*lead, n, d)


def torch_mha(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    """SDPA result, after checking that nn.MultiheadAttention agrees with it."""
    a = torch_mha_sdpa(x, W_Q, W_K, W_V, W_O, n_heads, mask)
    b = torch_mha_module(x, W_Q, W_K, W_V, W_O, n_heads, mask)
    if not torch.allclose(a, b, rtol=1e-12, atol=1e-12):
        raise AssertionError("scaled_dot_product_attention and nn.MultiheadAttention disagree")
    return a


def torch_layer_norm(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def torch_rms_norm(x, gamma, eps=1e-6):
    return F.rms_norm(x, (x.shape[-1],), gamma, eps)


def torch_ffn(x, W1, b1, W2, b2):
    return F.gelu(x @ W1 + b1, approximate="tanh") @ W2 + b2


def torch_swiglu(x, W_gate, W_up, W_down):
    return (F.silu(x @ W_gate) * (x @ W_up)) @ W_down


def torch_pre_ln_block(x, p, n_heads, mask=None):
    h = x + torch_mha(torch_layer_norm(x, p["ln1_gamma"], p["ln1_beta"]),
                      p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask)
    return h + torch_ffn(torch_layer_norm(h, p["ln2_gamma"], p["ln2_beta"]),
                         p["W1"], p["b1"], p["W2"], p["b2"])


def torch_post_ln_block(x, p, n_heads, mask=None):
    h = torch_layer_norm(x + torch_mha(x, p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask),
                         p["ln1_gamma"], p["ln1_beta"])
    return torch_layer_norm(h + torch_ffn(h, p["W1"], p["b1"], p["W2"], p["b2"]),
                            p["ln2_gamma"], p["ln2_beta"])


def torch_count_block_params(d_model: int, d_ff: int, ffn: str, norm: str = "layernorm") -> int:
    """Count the parameters of torch modules laid out like the block (on the meta device)."""
    with torch.device("meta"):
        norm_module = nn.LayerNorm if norm == "layernorm" else nn.RMSNorm
        parts = [nn.MultiheadAttention(d_model, 1, bias=False), norm_module(d_model), norm_module(d_model)]
        if ffn == "gelu":
            parts += [nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)]
        else:
            parts += [nn.Linear(d_model, d_ff, bias=False), nn.Linear(d_model, d_ff, bias=False),
                      nn.Linear(d_ff, d_model, bias=False)]
    return sum(p.numel() for m in parts for p in m.parameters())


# --------------------------------------------------------------------------- inputs

def _block_params(rng, d, f):
    s = 1 / math.sqrt(d)
    return {"ln1_gamma": 1 + 0.2 * rng.standard_normal(d), "ln1_beta": 0.2 * rng.standard_normal(d),
            "W_Q": s * rng.standard_normal((d, d)), "W_K": s * rng.standard_normal((d, d)),
            "W_V": s * rng.standard_normal((d, d)), "W_O": s * rng.standard_normal((d, d)),
            "ln2_gamma": 1 + 0.2 * rng.standard_normal(d), "ln2_beta": 0.2 * rng.standard_normal(d),
            "W1": s * rng.standard_normal((d, f)), "b1": 0.2 * rng.standard_normal(f),
            "W2": rng.standard_normal((f, d)) / math.sqrt(f), "b2": 0.2 * rng.standard_normal(d)}


def _causal(n):
    return np.tril(np.ones((n, n), dtype=bool))


def _random_mask(rng, n):
    """Random boolean mask with the diagonal allowed, so no row is fully blocked."""
    return (rng.random((n, n)) < 0.5) | np.eye(n, dtype=bool)


def _rows(rng, shape):
    """Random rows with their own offset and scale (scales from 1e-2 to 10)."""
    offset = rng.normal(0, 3, shape[:-1] + (1,))
    scale = 10 ** rng.uniform(-2, 1, shape[:-1] + (1,))
    return offset + scale * rng.standard_normal(shape)


def build_cases(seed: int = DEFAULT_SEED) -> list[Case]:
    """Every golden case, computed with torch in float64."""
    rng = np.random.default_rng(seed)
    cases: list[Case] = []

    def add(name, function, torch_fn, **kwargs):
        targs = {k: (_t(v) if isinstance(v, np.ndarray) and v.dtype != bool else
                     {kk: _t(vv) for kk, vv in v.items()} if isinstance(v, dict) else v)
                 for k, v in kwargs.items()}
        with torch.no_grad():
            out = torch_fn(**targs)
        expected = np.asarray(out, dtype=np.int64) if isinstance(out, int) else _np(out)
        cases.append(Case(name, function, kwargs, expected, tuple(kwargs)))

    # softmax
    add("softmax_rows", "softmax", lambda x, axis: torch.softmax(x, dim=axis),
        x=rng.normal(0, 3, (3, 5)), axis=-1)
    add("softmax_axis0_batched", "softmax", lambda x, axis: torch.softmax(x, dim=axis),
        x=rng.normal(0, 3, (2, 3, 4)), axis=0)
    add("softmax_large_values", "softmax", lambda x, axis: torch.softmax(x, dim=axis),
        x=rng.normal(800, 20, (2, 6)), axis=-1)

    # gelu (tanh form)
    add("gelu_random", "gelu", lambda x: F.gelu(x, approximate="tanh"), x=rng.normal(0, 2, (4, 7)))
    add("gelu_range", "gelu", lambda x: F.gelu(x, approximate="tanh"),
        x=np.concatenate([np.linspace(-8, 8, 33), [-30.0, -12.0, 12.0, 30.0]]))

    # layer_norm
    for name, shape, eps in [("layer_norm_2d", (5, 8), 1e-5), ("layer_norm_batched", (2, 3, 4, 6), 1e-5),
                             ("layer_norm_d1", (3, 1), 1e-5), ("layer_norm_eps_1e-3", (6, 10), 1e-3)]:
        d = shape[-1]
        add(name, "layer_norm", torch_layer_norm, x=_rows(rng, shape),
            gamma=1 + 0.3 * rng.standard_normal(d), beta=0.3 * rng.standard_normal(d), eps=eps)

    # split_heads / merge_heads
    for name, shape, h in [("heads_2d", (4, 6), 2), ("heads_batched", (2, 3, 5, 12), 3),
                           ("heads_h_eq_d", (1, 8), 8), ("heads_h1", (3, 4), 1)]:
        x = rng.standard_normal(shape)
        add("split_" + name, "split_heads", torch_split_heads, x=x, n_heads=h)
        n, d = shape[-2:]
        xh = rng.standard_normal(shape[:-2] + (h, n, d // h))
        add("merge_" + name, "merge_heads", torch_merge_heads, x=xh)

    # multi_head_attention
    mha_cases = [("mha_n1", (1, 8), 2, None), ("mha_h1", (5, 8), 1, None),
                 ("mha_h_eq_d", (4, 6), 6, None), ("mha_batched_causal", (2, 3, 7, 12), 3, "causal"),
                 ("mha_causal", (6, 16), 4, "causal"), ("mha_random_mask", (2, 5, 8), 2, "random"),
                 ("mha_batch_nomask", (3, 10, 12), 4, None)]
    for name, shape, h, mask_kind in mha_cases:
        n, d = shape[-2:]
        mask = None if mask_kind is None else _causal(n) if mask_kind == "causal" else _random_mask(rng, n)
        s = 1 / math.sqrt(d)
        add(name, "multi_head_attention", torch_mha, x=rng.standard_normal(shape),
            W_Q=s * rng.standard_normal((d, d)), W_K=s * rng.standard_normal((d, d)),
            W_V=s * rng.standard_normal((d, d)), W_O=s * rng.standard_normal((d, d)),
            n_heads=h, mask=mask)

    # feed_forward
    d, f = 8, 32
    add("feed_forward", "feed_forward", torch_ffn, x=rng.standard_normal((2, 5, d)),
        W1=rng.standard_normal((d, f)) / math.sqrt(d), b1=0.2 * rng.standard_normal(f),
        W2=rng.standard_normal((f, d)) / math.sqrt(f), b2=0.2 * rng.standard_normal(d))

    # blocks
    block_cases = [("pre_ln_2d", "pre_ln_block", (5, 8), 2, 32, None),
                   ("pre_ln_batched_causal", "pre_ln_block", (2, 3, 6, 12), 3, 48, "causal"),
                   ("pre_ln_n1_h_eq_d", "pre_ln_block", (1, 8), 8, 32, None),
                   ("pre_ln_random_mask", "pre_ln_block", (2, 7, 16), 4, 24, "random"),
                   ("post_ln_causal", "post_ln_block", (5, 8), 2, 32, "causal"),
                   ("post_ln_batched", "post_ln_block", (2, 4, 12), 3, 48, None)]
    for name, function, shape, h, f, mask_kind in block_cases:
        n, d = shape[-2:]
        mask = None if mask_kind is None else _causal(n) if mask_kind == "causal" else _random_mask(rng, n)
        fn = torch_pre_ln_block if function == "pre_ln_block" else torch_post_ln_block
        add(name, function, lambda x, params, n_heads, mask, fn=fn: fn(x, params, n_heads, mask),
            x=_rows(rng, shape), params=_block_params(rng, d, f), n_heads=h, mask=mask)

    # silu, including |x| up to 1e4
    extremes = np.array([-1e4, -1e3, -100.0, -20.0, -1e-3, 0.0, 1e-3, 20.0, 100.0, 1e3, 1e4])
    add("silu_extremes", "silu", lambda x: F.silu(x), x=extremes)
    add("silu_random", "silu", lambda x: F.silu(x), x=rng.normal(0, 5, (3, 4, 5)))

    # swiglu_ffn
    for name, shape, f in [("swiglu_chapter_ratio", (6, 16), int(8 * 16 / 3)),
                           ("swiglu_batched", (2, 3, 5, 8), 12), ("swiglu_n1", (1, 4), 3)]:
        d = shape[-1]
        add(name, "swiglu_ffn", torch_swiglu, x=rng.standard_normal(shape),
            W_gate=rng.standard_normal((d, f)) / math.sqrt(d), W_up=rng.standard_normal((d, f)) / math.sqrt(d),
            W_down=rng.standard_normal((f, d)) / math.sqrt(f))

    # count_block_params
    for d, f, ffn in [(64, 256, "gelu"), (64, 170, "swiglu"), (8, 32, "gelu"), (12, 20, "swiglu"),
                      (12288, 4 * 12288, "gelu"), (4096, 11008, "swiglu")]:
        add(f"count_{ffn}_{d}_{f}", "count_block_params", torch_count_block_params,
            d_model=d, d_ff=f, ffn=ffn)
    for d, f, ffn in [(64, 256, "gelu"), (4096, 11008, "swiglu")]:
        add(f"count_{ffn}_{d}_{f}_rmsnorm", "count_block_params", torch_count_block_params,
            d_model=d, d_ff=f, ffn=ffn, norm="rmsnorm")

    # rms_norm (drawn after every case above, so their inputs stay as they were)
    for name, shape, eps in [("rms_norm_2d", (5, 8), 1e-6), ("rms_norm_batched", (2, 3, 4, 6), 1e-6),
                             ("rms_norm_d1", (3, 1), 1e-6), ("rms_norm_eps_1e-2", (6, 10), 1e-2)]:
        d = shape[-1]
        add(name, "rms_norm", torch_rms_norm, x=_rows(rng, shape), gamma=1 + 0.3 * rng.standard_normal(d), eps=eps)
    return cases


# --------------------------------------------------------------------------- writing

def to_npz_dict(cases: list[Case], seed: int) -> dict[str, np.ndarray]:
    """The arrays to save, manifest included (see the module docstring)."""
    arrays: dict[str, np.ndarray] = {}
    manifest: dict[str, Any] = {"torch": torch.__version__, "seed": seed, "cases": {}}
    for case in cases:
        args = []
        for arg in case.order:
            value = case.kwargs[arg]
            if isinstance(value, np.ndarray):
                arrays[f"{case.name}/{arg}"] = value
                args.append([arg, "array", None])
            elif isinstance(value, dict):
                for key, v in value.items():
                    arrays[f"{case.name}/{arg}.{key}"] = v
                args.append([arg, "params", list(value)])
            else:
                args.append([arg, "value", value])
        arrays[f"{case.name}/out"] = case.expected
        manifest["cases"][case.name] = {"function": case.function, "args": args}
    arrays["manifest"] = np.array(json.dumps(manifest, indent=1))
    return arrays


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    torch.set_default_dtype(torch.float64)
    cases = build_cases(args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **to_npz_dict(cases, args.seed))
    size_kb = args.out.stat().st_size / 1024
    print(f"wrote {len(cases)} cases to {args.out} ({size_kb:.0f} KB, torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
