"""Hidden-input builders (and two small shared checks) for the transformer-block graders.

Every array is drawn from the `rng` the test was given (seeded per course, student and test), so
inputs are unpredictable to students and identical on every regrade. Nothing here calls student
code or the reference.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class Case(NamedTuple):
    """One attention-shaped input: x is (*lead, n, d) and the model uses h heads."""
    lead: tuple[int, ...]
    n: int
    d: int
    h: int

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.lead, self.n, self.d)

    @property
    def heads_shape(self) -> tuple[int, ...]:
        return (*self.lead, self.h, self.n, self.d // self.h)


# The shapes where head bookkeeping goes wrong: one token, one head, one feature per head, batch axes.
CASES = {
    "n5_d8_h2": Case((), 5, 8, 2),
    "one_token": Case((), 1, 8, 2),
    "one_head": Case((), 6, 12, 1),
    "as_many_heads_as_features": Case((), 4, 6, 6),
    "batch_axes_2x3": Case((2, 3), 4, 16, 4),
    "n12_d64_h8": Case((), 12, 64, 8),
}
CASE_IDS = list(CASES)
CASE_LIST = list(CASES.values())


def normal(rng: np.random.Generator, shape, *, scale: float = 1.0, loc: float = 0.0,
           dtype=np.float64) -> np.ndarray:
    """Gaussian entries with the given mean and standard deviation, cast to `dtype`."""
    return (loc + scale * rng.standard_normal(shape)).astype(dtype)


def tokens(rng: np.random.Generator, shape, dtype=np.float64) -> np.ndarray:
    """Token features with a per-token offset and scale, as a residual stream has."""
    shift = rng.uniform(-2.0, 2.0, size=(*shape[:-1], 1))
    scale = rng.uniform(0.5, 3.0, size=(*shape[:-1], 1))
    return (shift + scale * rng.standard_normal(shape)).astype(dtype)


def tokens_with_spread(rng: np.random.Generator, shape, low: float, high: float, dtype=np.float64) -> np.ndarray:
    """Tokens as `tokens` draws them, each then stretched about its own mean to a standard deviation drawn
    between `low` and `high`: wide enough that eps (added to a variance of at least low ** 2) moves a
    LayerNorm's output by far less than a float32 tolerance."""
    x = tokens(rng, shape)
    std = rng.uniform(low, high, size=(*shape[:-1], 1))
    centre = x.mean(axis=-1, keepdims=True)
    return (centre + (x - centre) * (std / x.std(axis=-1, keepdims=True))).astype(dtype)


def scale_and_shift(rng: np.random.Generator, d: int, dtype=np.float64):
    """LayerNorm gamma near 1 and beta near 0, but not exactly, so swapping or dropping them shows."""
    return normal(rng, (d,), scale=0.3, loc=1.0, dtype=dtype), normal(rng, (d,), scale=0.3, dtype=dtype)


def projections(rng: np.random.Generator, d: int, dtype=np.float64):
    """W_Q, W_K, W_V, W_O of shape (d, d) with entries of scale 1/sqrt(d)."""
    return tuple(normal(rng, (d, d), scale=1 / math.sqrt(d), dtype=dtype) for _ in range(4))


def swiglu_weights(rng: np.random.Generator, d: int, d_ff: int, dtype=np.float64):
    """W_gate, W_up of shape (d, d_ff) and W_down of shape (d_ff, d)."""
    return (normal(rng, (d, d_ff), scale=1 / math.sqrt(d), dtype=dtype),
            normal(rng, (d, d_ff), scale=1 / math.sqrt(d), dtype=dtype),
            normal(rng, (d_ff, d), scale=1 / math.sqrt(d_ff), dtype=dtype))


def causal_mask(n: int) -> np.ndarray:
    """Boolean (n, n): query i may look at keys 0..i."""
    return np.tril(np.ones((n, n), dtype=bool))


def random_mask(rng: np.random.Generator, n: int) -> np.ndarray:
    """Boolean (n, n), not causal: every row allows at least two keys and blocks at least one, and
    every key is allowed to some query (n >= 3).

    Two keys at least, so that every query's softmax weighs scores against each other: a row that
    allows a single key gives that key's value whatever the scores are, and a mask made only of
    such rows would let a wrong scale of the scores pass on some students' draws and not others'.
    A key that no query may see would make a softmax over the wrong axis all NaN in that column,
    and the mistake named on some draws only."""
    if n < 3:
        raise ValueError(f"random_mask needs n >= 3 tokens, got {n}")
    while True:
        allowed = rng.integers(2, n, size=(n, 1))                     # 2 .. n-1 keys per row
        keys = rng.permuted(np.tile(np.arange(n), (n, 1)), axis=1)    # each row's keys, shuffled
        mask = np.zeros((n, n), dtype=bool)
        np.put_along_axis(mask, keys, np.arange(n) < allowed, axis=1)  # the first `allowed` of them
        if mask.any(axis=0).all():
            return mask


# --------------------------------------------------------------------------- shared checks
# Small wrappers over `expect` that also name the catalogue's general mistakes when they fail.

def expect_float32(expect, out, what: str) -> None:
    """The result kept float32; otherwise the float32_upcast mistake is recorded with the failure."""
    if isinstance(out, np.ndarray) and out.dtype != np.float32:
        expect.diagnose("general.float32_upcast")
    expect.dtype(out, np.float32, what)


def expect_clean_call(student, expect, fn, *args, what: str, if_warned: str | None = None) -> None:
    """Advice only (the child reports this itself, so it carries no points): calling `fn(*args)`
    modifies none of its arguments and raises no numpy/Python warnings (`if_warned` names the
    mistake to record when it does). A function that gives no result (a stub raising
    NotImplementedError, a body that returns None and touches nothing) has nothing to advise on:
    the check is not run, never passed, and the graded checks report the failure."""
    out = expect.call_or_not_run(fn, *args)
    if getattr(student.last_call, "mutated", ()):
        expect.diagnose("general.mutates_input")
    if if_warned and getattr(student.last_call, "warnings", ()):
        expect.diagnose(if_warned)
    expect.not_mutated(what)
    expect.no_warnings(what)
    if out is None:
        expect.not_run(f"`{getattr(fn, '__name__', fn)}` returned None")


def _nearly(a: np.ndarray, b: np.ndarray) -> bool:
    """`a` equals `b` but for rounding: no entry differs by more than a millionth of a's largest."""
    return bool(np.max(np.abs(a - b), initial=0.0) <= 1e-6 * np.max(np.abs(a), initial=0.0))


def expect_an_answer(out, x, what: str) -> None:
    """A property of an answer is credited only to something that could be one: real floating-point
    numbers, finite, not one number everywhere, not a multiple of the input `x` handed back (`return x`,
    `return 2.0 * x`), not one output for every token whatever its features. Such a placeholder is
    trivially unchanged by reordering tokens, by doubling a weight or by later tokens, and a fixed
    pattern can have any statistics; it earns nothing here. A wrong shape is left to the shape check."""
    if not isinstance(out, np.ndarray) or out.shape != np.shape(x):
        return                                  # the shape check says what is wrong
    if out.dtype.kind != "f":
        raise AssertionError(f"{what} returned an array of {out.dtype}, not of real floating-point numbers, "
                             f"so this property cannot be credited.")
    if not np.isfinite(out).all():
        raise AssertionError(f"{what} has NaN or infinite entries, so this property cannot be credited.")
    if out.size > 1 and np.ptp(out) == 0:
        raise AssertionError(f"{what} returned the same number ({out.flat[0]:g}) everywhere: a placeholder, "
                             f"which this property holds of trivially, so it earns no points.")
    given, answer = np.asarray(x, dtype=np.float64), out.astype(np.float64)
    factor = float(np.vdot(answer, given) / np.vdot(given, given)) if np.any(given) else 0.0
    if _nearly(answer, factor * given):
        handed_back = "its input x unchanged" if abs(factor - 1.0) <= 1e-6 else f"{factor:g} times its input x"
        raise AssertionError(f"{what} returned {handed_back}: a placeholder, which this property "
                             f"holds of trivially, so it earns no points.")
    rows, given_rows = answer.reshape(-1, answer.shape[-1]), given.reshape(-1, given.shape[-1])
    if len(rows) > 1 and _nearly(rows, rows[:1]) and not _nearly(given_rows, given_rows[:1]):
        raise AssertionError(f"{what} gave every token the same output whatever its features: a placeholder, "
                             f"which this property holds of trivially, so it earns no points.")


def expect_a_dependence(out, out_changed, what: str, changed: str) -> None:
    """A property that presupposes the answer depends on something (attention on the other tokens,
    SwiGLU on W_gate) is credited only when changing that thing changes the answer: `out_changed` is
    the answer once `changed` changed. Answers of the wrong shape are left to the shape check."""
    if isinstance(out, np.ndarray) and isinstance(out_changed, np.ndarray) and out.shape == out_changed.shape \
            and out.dtype.kind == out_changed.dtype.kind == "f" and np.isfinite(out).all() \
            and np.isfinite(out_changed).all() and _nearly(out.astype(np.float64), out_changed.astype(np.float64)):
        raise AssertionError(f"{what} gave the same answer when {changed} changed: it ignores what this property "
                             f"is about, holds it trivially, and earns no points.")
