"""The numpy reference against PyTorch goldens, the chapter's figures, and the properties graders rely on."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from assignments.transformer_block import reference as ref

HERE = Path(__file__).resolve().parent
GOLDENS = HERE / "goldens.npz"
MAKE_GOLDENS = HERE.parents[2] / "tools" / "make_goldens.py"
GOLDEN_TOL = {"rtol": 1e-10, "atol": 1e-10}


def load_goldens(path: Path) -> dict[str, tuple[str, dict, np.ndarray]]:
    """{case: (function name, keyword arguments, expected)} from a file written by tools/make_goldens.py."""
    with np.load(path, allow_pickle=False) as data:
        manifest = json.loads(str(data["manifest"]))
        cases = {}
        for name, spec in manifest["cases"].items():
            kwargs = {}
            for arg, kind, value in spec["args"]:
                if kind == "array":
                    kwargs[arg] = data[f"{name}/{arg}"]
                elif kind == "params":
                    kwargs[arg] = {key: data[f"{name}/{arg}.{key}"] for key in value}
                else:
                    kwargs[arg] = value
            cases[name] = (spec["function"], kwargs, data[f"{name}/out"])
    return cases


GOLDEN_CASES = load_goldens(GOLDENS)


def check_against(function: str, kwargs: dict, expected: np.ndarray, label: str) -> None:
    actual = getattr(ref, function)(**kwargs)
    if function == "count_block_params":
        assert isinstance(actual, int), f"{label}: count_block_params returned {type(actual).__name__}"
        assert actual == int(expected), f"{label}: {actual} != {int(expected)}"
        return
    assert actual.shape == expected.shape, f"{label}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == np.float64, f"{label}: dtype {actual.dtype}"
    np.testing.assert_allclose(actual, expected, **GOLDEN_TOL, err_msg=label)


def random_block(rng, shape, n_heads, d_ff, dtype=np.float64):
    x = rng.standard_normal(shape).astype(dtype)
    return x, ref.init_block_params(rng, shape[-1], d_ff, dtype)


def causal(n):
    return np.tril(np.ones((n, n), dtype=bool))


# --------------------------------------------------------------------------- goldens

def test_goldens_cover_every_function():
    """Does the golden file hold at least one case for every reference function but init_block_params?"""
    covered = {function for function, _, _ in GOLDEN_CASES.values()}
    assert covered == set(ref.__all__) - {"init_block_params", "BLOCK_PARAM_NAMES"}


def test_goldens_cover_the_edge_shapes():
    """Do the attention goldens include n=1, h=1, h=d_model, leading batch axes, causal and random masks?"""
    mha = [kw for f, kw, _ in GOLDEN_CASES.values() if f in ("multi_head_attention", "pre_ln_block")]
    assert any(kw["x"].shape[-2] == 1 for kw in mha)
    assert any(kw["n_heads"] == 1 for kw in mha)
    assert any(kw["n_heads"] == kw["x"].shape[-1] for kw in mha)
    assert any(kw["x"].ndim == 4 for kw in mha)
    masks = [kw["mask"] for kw in mha if kw["mask"] is not None]
    assert any(np.array_equal(m, causal(len(m))) for m in masks)
    assert any(not np.array_equal(m, causal(len(m))) and m.diagonal().all() for m in masks)
    silu_inputs = np.concatenate([kw["x"].ravel() for f, kw, _ in GOLDEN_CASES.values() if f == "silu"])
    assert np.abs(silu_inputs).max() >= 1e4


def test_golden_file_is_small():
    """Is the golden file under 300 KB?"""
    assert GOLDENS.stat().st_size < 300 * 1024


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_reference_matches_torch_golden(case):
    """Does the reference agree with PyTorch's float64 output to 1e-10 on this golden case?"""
    function, kwargs, expected = GOLDEN_CASES[case]
    check_against(function, kwargs, expected, case)


def test_reference_matches_live_torch():
    """With torch importable, does the reference agree with freshly drawn torch cases (another seed)?"""
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("make_goldens", MAKE_GOLDENS)
    make_goldens = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = make_goldens   # dataclasses look their module up there
    spec.loader.exec_module(make_goldens)
    cases = make_goldens.build_cases(seed=7)
    assert len(cases) == len(GOLDEN_CASES)
    for case in cases:
        check_against(case.function, case.kwargs, case.expected, f"live {case.name}")


# --------------------------------------------------------------------------- the chapter's figures

def test_swiglu_at_d64_has_the_chapters_width_and_weight_count():
    """At d_model=64, is d_ff=170 and does SwiGLU hold 32,640 weights against 32,768 for the 4x GELU FFN?"""
    d = 64
    d_ff = int(8 * d / 3)
    assert d_ff == 170
    shared = 4 * d * d + 4 * d            # attention and the two LayerNorms
    swiglu = ref.count_block_params(d, d_ff, "swiglu") - shared
    gelu_weights = ref.count_block_params(d, 4 * d, "gelu") - shared - (4 * d + d)   # minus b1, b2
    assert swiglu == 3 * 64 * 170 == 32_640
    assert gelu_weights == 2 * 64 * 256 == 32_768
    assert round(swiglu / gelu_weights, 3) == 0.996


def test_swiglu_ffn_weights_have_the_counted_size():
    """Do the arrays swiglu_ffn multiplies by hold exactly the weights count_block_params counts for the FFN?"""
    rng = np.random.default_rng(0)
    d, f = 64, 170
    W_gate, W_up, W_down = rng.standard_normal((d, f)), rng.standard_normal((d, f)), rng.standard_normal((f, d))
    out = ref.swiglu_ffn(rng.standard_normal((6, d)), W_gate, W_up, W_down)
    assert out.shape == (6, d)
    assert W_gate.size + W_up.size + W_down.size == ref.count_block_params(d, f, "swiglu") - 4 * d * d - 4 * d


def test_small_block_has_49728_parameters():
    """Does a 64-wide GELU block with d_ff=256 have 49,728 parameters (the chapter's "about 49,000")?"""
    assert ref.count_block_params(64, 256, "gelu") == 49_728


def test_small_block_count_matches_init_block_params():
    """Does count_block_params equal the number of entries init_block_params creates?"""
    params = ref.init_block_params(np.random.default_rng(0), 64, 256)
    assert sum(p.size for p in params.values()) == ref.count_block_params(64, 256, "gelu")


def test_gpt3_block_has_about_12_d_squared_parameters():
    """Is a GPT-3 block (d=12288, d_ff=4d) within 0.1% of 12 d^2, about 1.8e9?"""
    d = 12288
    count = ref.count_block_params(d, 4 * d, "gelu")
    assert abs(count / (12 * d * d) - 1) < 1e-3
    assert round(count / 1e9, 1) == 1.8


def test_count_block_params_rejects_unknown_ffn():
    """Does count_block_params raise ValueError for an ffn other than gelu or swiglu?"""
    with pytest.raises(ValueError, match="relu"):
        ref.count_block_params(64, 256, "relu")


# --------------------------------------------------------------------------- properties

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_layer_norm_rows_have_mean_zero_and_variance_one(seed):
    """With gamma=1 and beta=0, does every row of the output have mean 0 and variance 1 (up to eps)?"""
    rng = np.random.default_rng(seed)
    x = rng.normal(5, 1, (2, 7, 16)) * rng.uniform(1, 10, (2, 7, 1))
    out = ref.layer_norm(x, np.ones(16), np.zeros(16))
    np.testing.assert_allclose(out.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=-1), 1, atol=1e-4)


def test_layer_norm_applies_gamma_then_beta():
    """Is layer_norm(x, gamma, beta) the standardised x scaled by gamma and shifted by beta?"""
    rng = np.random.default_rng(3)
    x, gamma, beta = rng.standard_normal((4, 6)), rng.standard_normal(6), rng.standard_normal(6)
    plain = ref.layer_norm(x, np.ones(6), np.zeros(6))
    np.testing.assert_allclose(ref.layer_norm(x, gamma, beta), plain * gamma + beta, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("shape,n_heads", [((5, 12), 3), ((2, 3, 4, 8), 2), ((1, 6), 6), ((4, 4), 1)])
def test_split_then_merge_heads_is_the_identity(shape, n_heads):
    """Does merge_heads(split_heads(x, h)) give back x exactly, with the expected head shape in between?"""
    x = np.random.default_rng(0).standard_normal(shape)
    heads = ref.split_heads(x, n_heads)
    n, d = shape[-2:]
    assert heads.shape == shape[:-2] + (n_heads, n, d // n_heads)
    np.testing.assert_array_equal(ref.merge_heads(heads), x)


def test_split_heads_gives_head_i_the_ith_feature_slice():
    """Does head i hold features [i*d_k, (i+1)*d_k) of every token?"""
    x = np.arange(2 * 3 * 12, dtype=float).reshape(2, 3, 12)
    heads = ref.split_heads(x, 4)
    for i in range(4):
        np.testing.assert_array_equal(heads[:, i], x[..., 3 * i:3 * (i + 1)])


def test_split_heads_rejects_indivisible_width():
    """Does split_heads raise ValueError naming both numbers when d_model % n_heads != 0?"""
    with pytest.raises(ValueError) as info:
        ref.split_heads(np.zeros((3, 10)), 4)
    assert "10" in str(info.value) and "4" in str(info.value)


@pytest.mark.parametrize("n_heads", [1, 2, 4])
def test_multi_head_attention_equals_a_loop_over_heads(n_heads):
    """Is MHA the concatenation of per-head attentions on column slices of W_Q, W_K, W_V, then W_O?"""
    rng = np.random.default_rng(n_heads)
    n, d = 5, 8
    d_k = d // n_heads
    x = rng.standard_normal((n, d))
    W_Q, W_K, W_V, W_O = (rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4))
    outputs = []
    for i in range(n_heads):
        cols = slice(i * d_k, (i + 1) * d_k)
        scores = (x @ W_Q[:, cols]) @ (x @ W_K[:, cols]).T / math.sqrt(d_k)
        weights = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
        outputs.append(weights @ (x @ W_V[:, cols]))
    expected = np.concatenate(outputs, axis=1) @ W_O
    np.testing.assert_allclose(ref.multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads), expected,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("function", ["multi_head_attention", "pre_ln_block"])
def test_causal_output_of_a_prefix_ignores_later_tokens(function):
    """Under a causal mask, are the first k outputs those of the first k tokens alone?"""
    rng = np.random.default_rng(11)
    n, k, d, h = 7, 4, 8, 2
    x, params = random_block(rng, (2, n, d), h, 16)
    if function == "multi_head_attention":
        def run(inp, m):
            return ref.multi_head_attention(inp, params["W_Q"], params["W_K"], params["W_V"], params["W_O"], h, m)
    else:
        def run(inp, m):
            return ref.pre_ln_block(inp, params, h, m)
    full = run(x, causal(n))
    np.testing.assert_allclose(full[:, :k], run(x[:, :k], causal(k)), rtol=1e-12, atol=1e-12)
    changed = x.copy()
    changed[:, k:] = rng.standard_normal(changed[:, k:].shape)
    np.testing.assert_allclose(run(changed, causal(n))[:, :k], full[:, :k], rtol=1e-12, atol=1e-12)


def test_all_true_mask_equals_no_mask():
    """Does a mask that allows everything give the same output as no mask?"""
    rng = np.random.default_rng(5)
    x, p = random_block(rng, (6, 8), 2, 16)
    Ws = (p["W_Q"], p["W_K"], p["W_V"], p["W_O"])
    np.testing.assert_array_equal(ref.multi_head_attention(x, *Ws, 2, np.ones((6, 6), bool)),
                                  ref.multi_head_attention(x, *Ws, 2))


def test_post_ln_block_output_is_layer_normalised():
    """With unit gammas and zero betas, does every row of the Post-LN output have mean 0 and variance 1?"""
    rng = np.random.default_rng(8)
    x, params = random_block(rng, (3, 5, 8), 2, 32)
    params.update(ln1_gamma=np.ones(8), ln1_beta=np.zeros(8), ln2_gamma=np.ones(8), ln2_beta=np.zeros(8))
    out = ref.post_ln_block(x, params, 2)
    np.testing.assert_allclose(out.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=-1), 1, atol=1e-3)


def test_softmax_is_stable_for_large_scores():
    """Does softmax stay finite, free of overflow, and sum to one when the scores are in the thousands?"""
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        out = ref.softmax(np.array([[1000.0, 1001.0, 999.0], [-1000.0, 0.0, 1000.0]]))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=1e-15)


def test_tanh_gelu_is_within_a_thousandth_of_exact_gelu():
    """Is the tanh form within 1e-3 of the exact x * Phi(x) GELU?"""
    x = np.linspace(-8, 8, 401)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    assert np.max(np.abs(ref.gelu(x) - exact)) < 1e-3


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_silu_is_finite_and_warning_free_at_1e4(dtype):
    """Is silu finite, warning-free (warnings as errors, FP errors raising) and right at +-1e4?"""
    x = np.array([-1e4, -1e3, -100.0, 0.0, 100.0, 1e3, 1e4], dtype=dtype)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        out = ref.silu(x)
    assert np.all(np.isfinite(out))
    assert out.dtype == dtype
    assert out[0] == 0 and out[-1] == dtype(1e4) and out[3] == 0


def float32_calls(rng):
    """(name, thunk) pairs calling every array function with float32 inputs only."""
    f32 = np.float32
    x, p = random_block(rng, (2, 5, 8), 2, 16, f32)
    m = causal(5)
    Wg, Wu, Wd = (rng.standard_normal(s).astype(f32) for s in [(8, 12), (8, 12), (12, 8)])
    return [
        ("softmax", lambda: ref.softmax(x)),
        ("gelu", lambda: ref.gelu(x)),
        ("layer_norm", lambda: ref.layer_norm(x, p["ln1_gamma"], p["ln1_beta"])),
        ("split_heads", lambda: ref.split_heads(x, 2)),
        ("merge_heads", lambda: ref.merge_heads(ref.split_heads(x, 2))),
        ("multi_head_attention", lambda: ref.multi_head_attention(x, p["W_Q"], p["W_K"], p["W_V"], p["W_O"], 2, m)),
        ("feed_forward", lambda: ref.feed_forward(x, p["W1"], p["b1"], p["W2"], p["b2"])),
        ("pre_ln_block", lambda: ref.pre_ln_block(x, p, 2, m)),
        ("post_ln_block", lambda: ref.post_ln_block(x, p, 2, m)),
        ("silu", lambda: ref.silu(x)),
        ("swiglu_ffn", lambda: ref.swiglu_ffn(x, Wg, Wu, Wd)),
    ]


@pytest.mark.parametrize("name", [name for name, _ in float32_calls(np.random.default_rng(0))])
def test_float32_inputs_give_float32_outputs(name):
    """Does each function keep float32 inputs in float32 (no silent upcast)?"""
    thunk = dict(float32_calls(np.random.default_rng(0)))[name]
    assert thunk().dtype == np.float32


def test_init_block_params_has_the_block_keys_shapes_and_dtype():
    """Does init_block_params give the twelve block keys with the right shapes, dtype and determinism?"""
    p = ref.init_block_params(np.random.default_rng(1), 8, 20, np.float32)
    assert tuple(p) == ref.BLOCK_PARAM_NAMES
    shapes = {"W_Q": (8, 8), "W_K": (8, 8), "W_V": (8, 8), "W_O": (8, 8), "W1": (8, 20), "b1": (20,),
              "W2": (20, 8), "b2": (8,)}
    for key, value in p.items():
        assert value.shape == shapes.get(key, (8,)) and value.dtype == np.float32, key
    again = ref.init_block_params(np.random.default_rng(1), 8, 20, np.float32)
    assert all(np.array_equal(p[k], again[k]) for k in p)


def mutation_calls(rng):
    """(name, function, args) for every array function, with fresh float64 inputs."""
    x, p = random_block(rng, (2, 5, 8), 2, 16)
    m = causal(5)
    heads = ref.split_heads(x, 2).copy()
    Wg, Wu, Wd = rng.standard_normal((8, 12)), rng.standard_normal((8, 12)), rng.standard_normal((12, 8))
    return [
        ("softmax", ref.softmax, (x,)),
        ("gelu", ref.gelu, (x,)),
        ("layer_norm", ref.layer_norm, (x, p["ln1_gamma"], p["ln1_beta"])),
        ("split_heads", ref.split_heads, (x, 2)),
        ("merge_heads", ref.merge_heads, (heads,)),
        ("multi_head_attention", ref.multi_head_attention, (x, p["W_Q"], p["W_K"], p["W_V"], p["W_O"], 2, m)),
        ("feed_forward", ref.feed_forward, (x, p["W1"], p["b1"], p["W2"], p["b2"])),
        ("pre_ln_block", ref.pre_ln_block, (x, p, 2, m)),
        ("post_ln_block", ref.post_ln_block, (x, p, 2, m)),
        ("silu", ref.silu, (x,)),
        ("swiglu_ffn", ref.swiglu_ffn, (x, Wg, Wu, Wd)),
    ]


def _snapshot(value):
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {k: v.copy() for k, v in value.items()}
    return value


def _same(a, b):
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("name", [name for name, _, _ in mutation_calls(np.random.default_rng(0))])
def test_inputs_are_not_mutated(name):
    """Does the function leave every argument (and every params entry) unchanged?"""
    _, function, args = next(c for c in mutation_calls(np.random.default_rng(0)) if c[0] == name)
    before = [_snapshot(a) for a in args]
    function(*args)
    assert all(_same(a, b) for a, b in zip(args, before))
