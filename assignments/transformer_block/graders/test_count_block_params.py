"""count_block_params(d_model, d_ff, ffn, norm="layernorm"): the learned weights in one block, as an int.

It counts the attention projections, both norms (norm="layernorm": gamma and beta each;
norm="rmsnorm": gamma only) and the feed-forward network: ffn="gelu" is W1, b1, W2, b2;
ffn="swiglu" is W_gate, W_up, W_down without biases. Any other ffn or norm is a ValueError.
"""
import numpy as np
import pytest

# The chapter's worked figures: its 64-wide block, the SwiGLU comparison at d_ff = int(8 * 64 / 3),
# the original Transformer base, a GPT-3 block and a Llama-style block (SwiGLU and RMSNorm).
FIGURES = {
    "d64_gelu_dff256": (64, 256, "gelu", "layernorm"),
    "d64_swiglu_dff170": (64, 170, "swiglu", "layernorm"),
    "d512_gelu_dff2048": (512, 2048, "gelu", "layernorm"),
    "gpt3_d12288_gelu": (12288, 4 * 12288, "gelu", "layernorm"),
    "llama_d4096_swiglu_rmsnorm": (4096, 11008, "swiglu", "rmsnorm"),
}
KINDS = [("gelu", "layernorm"), ("swiglu", "layernorm"), ("swiglu", "rmsnorm"), ("gelu", "rmsnorm")]
# The calls the notebook's public checks make, whose answers they print: a failure here may show both counts.
PUBLISHED = {(64, 256, "gelu", "layernorm"), (64, 170, "swiglu", "layernorm"), (64, 170, "swiglu", "rmsnorm")}
KIND_IDS = [f"{f}_{n}" for f, n in KINDS]
# Names that are neither of the two the notebook allows, drawn for each student: other feed-forward networks
# and norms. The notebook's public checks try ffn="relu" and norm="batchnorm", so those are left out here,
# and so is any name holding "glu", "gelu", "layer" or "rms", which a test by substring would take for an
# allowed one on some draws and not on others.
UNKNOWN = {"ffn": ("mlp", "moe", "tanh"), "norm": ("groupnorm", "scalenorm", "instancenorm")}


def _as_int(value):
    """The student's answer as a Python int, or None when it is not a whole number."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number, np.ndarray)) \
            or np.ndim(value) != 0:          # (np.ndim of a ragged list raises)
        return None
    value = np.asarray(value).item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) else None


def _a_count(student, expect, count, d_model=64, d_ff=256, ffn="gelu", norm="layernorm") -> bool:
    """Could `count` (the student's for (d_model, d_ff, ffn, norm)) be a count of weights: a positive whole
    number that changes with the widths (asked again at twice both)? A constant (`return 0`) trivially has
    the type and the default this file's last checks ask about, and a function that raises ValueError
    whatever it is given rejects every unknown name: neither earns those points."""
    count = _as_int(count)
    if count is None or count <= 0:
        return False
    return _as_int(expect.call(student.count_block_params, 2 * d_model, 2 * d_ff, ffn, norm=norm)) != count


def _a_count_for_hidden_widths(student, ref, expect, count, d_model, d_ff, ffn, norm) -> bool:
    """`_a_count` for widths drawn for this student: the right count for them is one at once (no placeholder
    can give it), without asking again."""
    return _as_int(count) == ref.count_block_params(d_model, d_ff, ffn, norm=norm) \
        or _a_count(student, expect, count, d_model, d_ff, ffn, norm)


def _hidden_widths(rng):
    """d_model and d_ff drawn for this student, as the checks of other sizes draw them."""
    return int(rng.integers(2, 300)), int(rng.integers(1, 1200))


def _check(student, ref, expect, d_model, d_ff, ffn, norm, *, hidden=False):
    """One count compared exactly. With `hidden`, the widths were drawn for this student and stay out
    of the message with the student's count (the chapter's own figures are public and are named, with
    the student's count, and the expected one where the notebook prints it)."""
    args, kwargs = (d_model, d_ff, ffn), {"norm": norm}
    got = expect.call(student.count_block_params, *args, **kwargs)
    expected = ref.count_block_params(*args, **kwargs)
    if _as_int(got) != expected and expect.catalogue is not None:
        known = expect.catalogue.match("count_block_params", args, kwargs, got, rtol=0.0, atol=0.0,
                                       student=expect.confirmation("count_block_params"))
        for mistake in known:                 # known miscounts, matched exactly
            expect.diagnose(mistake.id)
        if not known:                         # otherwise: which term is off (d_ff, d_model squared, ...)
            expect.localise("count_block_params")
    sizes = "d_model, d_ff" if hidden else f"{d_model}, {d_ff}"
    inputs = "hidden" if hidden else "published" if (d_model, d_ff, ffn, norm) in PUBLISHED else "public"
    expect.equal(got, expected, what=f"count_block_params({sizes}, {ffn!r}, {norm!r})"
                 + (" for hidden widths" if hidden else ""), inputs=inputs)


@pytest.mark.points(3)
@pytest.mark.parametrize("d_model, d_ff, ffn, norm", FIGURES.values(), ids=FIGURES.keys())
def test_count_block_params_matches_chapter_figures(student, ref, expect, d_model, d_ff, ffn, norm):
    """Does count_block_params give the exact count for the chapter's example blocks?"""
    _check(student, ref, expect, d_model, d_ff, ffn, norm)


@pytest.mark.points(2.5)
@pytest.mark.parametrize("ffn, norm", KINDS, ids=KIND_IDS)
def test_count_block_params_matches_reference_for_other_sizes(student, ref, expect, rng, ffn, norm):
    """Does count_block_params give the exact count for blocks of other widths?"""
    for _ in range(3):
        _check(student, ref, expect, *_hidden_widths(rng), ffn, norm, hidden=True)


@pytest.mark.points(0.5)
def test_count_block_params_uses_layernorm_by_default(student, ref, expect, rng):
    """Called without norm, does count_block_params count LayerNorms, as with norm="layernorm", both for the
    notebook's 64-wide block and for hidden widths?"""
    # Only the default is asked about here: a count that is wrong either way is charged by the checks above, so
    # the answer is the student's own for norm="layernorm" when that could be a count (a positive whole number
    # that changes with the widths), else the reference's. Asked at two sizes whose counts differ, so that a
    # constant (the 64-wide block's 49,728 whatever the widths) cannot match both.
    hidden = _hidden_widths(rng)
    while ref.count_block_params(*hidden, "gelu") == ref.count_block_params(64, 256, "gelu"):
        hidden = _hidden_widths(rng)
    for d_model, d_ff, what in ((64, 256, "count_block_params(64, 256, 'gelu')"),
                                (*hidden, "count_block_params(d_model, d_ff, 'gelu') for hidden widths")):
        got = expect.call(student.count_block_params, d_model, d_ff, "gelu")
        explicit = expect.call(student.count_block_params, d_model, d_ff, "gelu", norm="layernorm")
        same = _as_int(explicit) if _a_count(student, expect, explicit, d_model, d_ff) \
            else ref.count_block_params(d_model, d_ff, "gelu")
        expect.equal(got, same, what=what, hint="It should count what norm=\"layernorm\" counts, whatever the "
                                                "widths: give norm the default \"layernorm\".")


@pytest.mark.points(1)
@pytest.mark.parametrize("ffn, norm", KINDS, ids=KIND_IDS)
def test_count_block_params_returns_an_int(student, ref, expect, rng, ffn, norm):
    """Is the count a whole number of type int (not a float), for each feed-forward network and norm?"""
    d_model, d_ff = _hidden_widths(rng)
    call = f"count_block_params(d_model, d_ff, {ffn!r}, norm={norm!r}) for hidden widths"
    got = expect.call(student.count_block_params, d_model, d_ff, ffn, norm=norm)
    is_int = (isinstance(got, (int, np.integer)) and not isinstance(got, (bool, np.bool_))) or (
        isinstance(got, np.ndarray) and got.shape == () and got.dtype.kind in "iu")
    assert got is not None, f"{call} returned None (did you forget a `return`?); expected an int."
    assert is_int, (f"{call} returned {type(got).__name__}; return an int "
                    f"(use // or int(...) instead of / when a size is computed).")
    assert _a_count_for_hidden_widths(student, ref, expect, got, d_model, d_ff, ffn, norm), (
        f"{call} returned {got!r}, and a count of a block's weights is positive and grows with "
        f"d_model and d_ff: a placeholder earns no point for its type.")


@pytest.mark.points(1)
@pytest.mark.parametrize("which", UNKNOWN)
def test_count_block_params_rejects_an_unknown_ffn_or_norm(student, ref, expect, rng, which):
    """Given an ffn or a norm it does not know, does count_block_params raise ValueError (not another error)?"""
    names = {"ffn": "gelu", "norm": "layernorm", which: str(rng.choice(UNKNOWN[which]))}
    what = f"count_block_params(64, 256, {names['ffn']!r}, norm={names['norm']!r})"
    with expect.raises(ValueError, what=what, diagnose="count_block_params.no_value_error"):
        student.count_block_params(64, 256, names["ffn"], norm=names["norm"])
    # A function that raises ValueError whatever it is given holds this trivially: it must also count.
    d_model, d_ff = _hidden_widths(rng)
    got = expect.call(student.count_block_params, d_model, d_ff, "gelu", norm="layernorm")
    assert _a_count_for_hidden_widths(student, ref, expect, got, d_model, d_ff, "gelu", "layernorm"), (
        f"{what} raised ValueError, but count_block_params(d_model, d_ff, 'gelu', norm='layernorm') for hidden "
        f"widths returned {got!r}, and a count of a block's weights is positive and grows with d_model and d_ff: "
        "rejecting a name earns its point only beside a count.")
