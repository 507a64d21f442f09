"""count_block_params(d_model, d_ff, ffn): the number of learned weights in one Pre-LN block, as an int.

It counts the attention projections, both LayerNorms' gamma and beta, and the feed-forward network:
ffn="gelu" is W1, b1, W2, b2; ffn="swiglu" is W_gate, W_up, W_down without biases.
"""
import numpy as np
import pytest

# The chapter's worked figures: its 64-wide block, the SwiGLU comparison at d_ff = int(8 * 64 / 3),
# the original Transformer base and a GPT-3 block.
FIGURES = {
    "d64_gelu_dff256": (64, 256, "gelu"),
    "d64_swiglu_dff170": (64, 170, "swiglu"),
    "d512_gelu_dff2048": (512, 2048, "gelu"),
    "gpt3_d12288_gelu": (12288, 4 * 12288, "gelu"),
}


def _as_int(value):
    """The student's answer as a Python int, or None when it is not a whole number."""
    if np.ndim(value) != 0 or isinstance(value, (bool, np.bool_)):
        return None
    value = np.asarray(value).item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) else None


def _recount_hint(student, ref, d_model, d_ff, ffn):
    """Which part of the count is off, found by varying d_ff and d_model (never the right number)."""
    def off(d, f):
        got = _as_int(student.count_block_params(d, f, ffn))
        return None if got is None else got - ref.count_block_params(d, f, ffn)

    here, wider_ff = off(d_model, d_ff), off(d_model, d_ff + 1)
    if here is None or wider_ff is None:
        return ""
    if wider_ff != here:
        return ("The error changes with d_ff: recount the feed-forward network's weight matrices"
                + (" and its hidden bias." if ffn == "gelu" else "."))
    twice, thrice = off(2 * d_model, d_ff), off(3 * d_model, d_ff)
    if twice is None or thrice is None:
        return ""
    if thrice - 2 * twice + here != 0:
        return "The error grows like d_model squared: recount the attention projections W_Q, W_K, W_V, W_O."
    return ("The error grows at most like d_model: recount the per-feature vectors (the two LayerNorms'"
            + (" gamma and beta, and the feed-forward output bias)." if ffn == "gelu" else " gamma and beta)."))


def _check(student, ref, expect, d_model, d_ff, ffn):
    got = student.count_block_params(d_model, d_ff, ffn)
    expected = ref.count_block_params(d_model, d_ff, ffn)
    hint = ""
    if _as_int(got) != expected:
        hint = _recount_hint(student, ref, d_model, d_ff, ffn)
        if expect.catalogue is not None:      # known miscounts, matched exactly
            for mistake in expect.catalogue.match("count_block_params", (d_model, d_ff, ffn), {}, got,
                                                  rtol=0.0, atol=0.0):
                expect.diagnose(mistake.id)
    expect.equal(got, expected, what=f"count_block_params({d_model}, {d_ff}, {ffn!r})", hint=hint)


@pytest.mark.points(4)
@pytest.mark.parametrize("d_model, d_ff, ffn", FIGURES.values(), ids=FIGURES.keys())
def test_count_block_params_matches_chapter_figures(student, ref, expect, d_model, d_ff, ffn):
    """Does count_block_params give the exact count for the chapter's example blocks?"""
    _check(student, ref, expect, d_model, d_ff, ffn)


@pytest.mark.points(4.5)
@pytest.mark.parametrize("ffn", ["gelu", "swiglu"])
def test_count_block_params_matches_reference_for_other_sizes(student, ref, expect, rng, ffn):
    """Does count_block_params give the exact count for blocks of other widths?"""
    for _ in range(3):
        _check(student, ref, expect, int(rng.integers(2, 300)), int(rng.integers(1, 1200)), ffn)


@pytest.mark.points(1.5)
def test_count_block_params_returns_an_int(student, expect):
    """Is the count a whole number of type int (not a float)?"""
    got = student.count_block_params(64, 256, "gelu")
    is_int = (isinstance(got, (int, np.integer)) and not isinstance(got, (bool, np.bool_))) or (
        isinstance(got, np.ndarray) and got.shape == () and got.dtype.kind in "iu")
    assert is_int, (f"count_block_params returned {type(got).__name__}; return an int "
                    f"(use // or int(...) instead of / when a size is computed).")
