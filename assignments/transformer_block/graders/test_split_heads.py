"""split_heads(x, n_heads): cut the feature axis into heads and move the head axis before the tokens.

x is (..., n, d_model); the result is (..., n_heads, n, d_k) with d_k = d_model // n_heads, and head i
holds features i*d_k to (i+1)*d_k - 1 of every token (heads are numbered from 0). A width that
n_heads does not divide is a ValueError.

That error is scored in two parts, 3.5 points in all, so that the points follow what the student wrote:
- its type (1 point): ValueError, as the notebook asks. numpy's reshape raises ValueError too, so a
  split_heads without a check of its own earns this part; an assert (AssertionError) does not;
- its message (2.5 points): does it say what is wrong (both sizes, or divisibility)? This part reads the
  message of a ValueError or of an AssertionError alike, so an assert with a clear message earns it
  (and loses the type's point only); numpy's own reshape error and a bare assert do not. Any other
  exception (a TypeError, say) fails both parts.
Both parts are earned only by a split_heads that also splits: one that raises a clear ValueError whatever it is
given (a width n_heads divides too) holds them trivially, so each of those checks then asks for the heads of a
width n_heads divides (x's entries with one more axis) and fails, saying why, when the function raises there.
"""
import re

import numpy as np
import pytest

from assignments.transformer_block.graders._inputs import CASE_IDS, CASE_LIST, expect_clean_call, expect_float32, normal
from autograder.sandbox.outcomes import StudentRaised


@pytest.mark.points(6)
@pytest.mark.parametrize("case", CASE_LIST, ids=CASE_IDS)
def test_split_heads_matches_reference(student, expect, rng, case):
    """Does split_heads put every feature in the right head and token, for several shapes and head counts?"""
    expect.matches_reference(student.split_heads, (normal(rng, case.shape), case.h),
                             what=f"split_heads on x of shape {case.shape} with n_heads={case.h}")


@pytest.mark.points(0.5)
def test_split_heads_keeps_float32(student, expect, rng):
    """Given float32 x, does split_heads return float32 values?"""
    what = "split_heads on float32 x of shape (5, 12) with n_heads=3"
    out = expect.matches_reference(student.split_heads, (normal(rng, (5, 12), dtype=np.float32), 3), what=what)
    expect_float32(expect, out, what)


@pytest.mark.points(1)
@pytest.mark.parametrize("shape, n_heads", [((4, 10), 3), ((2, 3, 12), 5)],
                         ids=["d10_h3", "batch_axes_d12_h5"])
def test_split_heads_rejects_width_not_divisible_by_heads(student, expect, rng, shape, n_heads):
    """Does split_heads raise ValueError (not AssertionError, not nothing) when d_model is not a multiple of
    n_heads? (The type only: what the message says is the next check's.)"""
    what = f"split_heads with d_model={shape[-1]}, n_heads={n_heads}"
    with expect.raises(ValueError, what=what, diagnose="split_heads.no_value_error"):
        student.split_heads(normal(rng, shape), n_heads)
    _splits_a_divisible_width(student, rng, shape, n_heads, what)


def _splits_a_divisible_width(student, rng, shape, n_heads, what: str) -> None:
    """The error's points go with a split: given tokens as `shape` has them (without its batch axes) and a width
    widened to the next multiple of n_heads, split_heads must not raise and must give x's entries (up to float32
    rounding) with one more axis, the heads. Their order, and batch axes, are the value checks' business: a split
    that puts features in the wrong heads keeps its error points; a function that raises whatever it is given,
    hands x back or gives nothing does not."""
    valid = (shape[-2], n_heads * (shape[-1] // n_heads + 1))
    x = normal(rng, valid)
    asked = f"split_heads on x of shape {valid} with n_heads={n_heads}, a width that n_heads divides,"
    try:
        out = student.split_heads(x, n_heads)
    except StudentRaised as exc:
        raised = f"{exc.type_name}: {exc.message}" if exc.message else exc.type_name
        raise AssertionError(
            f"{what} raised an error, but {asked} raised {raised}: it raised on a valid input. The error earns "
            "its points only in a split_heads that splits such a width: raise only when d_model % n_heads != 0."
        ) from None
    if not (isinstance(out, np.ndarray) and out.dtype.kind == "f" and out.ndim == x.ndim + 1 and out.size == x.size
            and np.allclose(np.sort(out, axis=None), np.sort(x, axis=None), rtol=1e-6, atol=0.0)):
        got = f"an array of shape {out.shape}" if isinstance(out, np.ndarray) else "None" if out is None \
            else f"a {type(out).__name__}"
        raise AssertionError(
            f"{what} raised an error, but {asked} returned {got}, not x's entries cut into heads (one more axis): "
            "the error earns its points only in a split_heads that splits such a width.")


def _names_the_problem(message: str, d_model: int, n_heads: int) -> bool:
    """Does the error message say what is wrong: both sizes as numbers of their own, or a word about
    divisibility? (numpy's own reshape error gives neither: it names the array's size and the shape asked for.)"""
    numbers = {int(n) for n in re.findall(r"\d+", message)}
    return {d_model, n_heads} <= numbers or re.search(r"divisib|divid|multiple", message, re.IGNORECASE) is not None


def _unclear(what: str, type_name: str, message: str) -> str:
    """What the student is told of an error that does not say what is wrong: numpy's own reshape error ("cannot
    reshape array of size 30 into shape (3,4,2)", what a split_heads without a check of its own raises) by name,
    a vague message or none as such."""
    if type_name == "ValueError" and message.startswith("cannot reshape array"):
        said = "numpy's own reshape error, which gives the array's size and the shape asked for, not what is wrong"
    elif message.strip():
        said = f"{type_name}, but its message does not say what is wrong"
    else:
        said = f"{type_name} without a message"
    return (f"{what} raised {said}: check d_model % n_heads yourself and raise ValueError with a message that "
            "gives d_model and n_heads or says that d_model must be divisible by n_heads.")


@pytest.mark.points(2.5)
def test_split_heads_error_names_the_problem(student, expect, rng):
    """Does split_heads's error for a d_model that n_heads does not divide say what is wrong (both sizes, or
    that d_model must be divisible by n_heads)? The message of a ValueError or of an assert's AssertionError
    is read alike: the type is charged by the check above, not again here."""
    d_model, n_heads = 10, 4      # reshaping (3, 10) to (3, 4, 2) fails with neither 10 nor "divisible" in its words
    what = f"split_heads with d_model={d_model}, n_heads={n_heads}"
    with expect.raises(ValueError, what=what, diagnose="split_heads.no_value_error",
                       tolerate=(AssertionError,)) as raised:
        student.split_heads(normal(rng, (3, d_model)), n_heads)
    _splits_a_divisible_width(student, rng, (3, d_model), n_heads, what)
    clear = _names_the_problem(raised.message, d_model, n_heads)
    if not clear:
        expect.diagnose("split_heads.unclear_value_error")
    assert clear, _unclear(what, raised.type_name, raised.message)


@pytest.mark.points(0)
def test_split_heads_leaves_input_unchanged(student, expect, rng):
    """Does split_heads leave x untouched and run without numpy warnings?"""
    expect_clean_call(student, expect, student.split_heads, normal(rng, (2, 6, 8)), 4, what="split_heads")
