"""The graders' tolerance test: entry by entry, exactly what np.isclose says."""
from __future__ import annotations

import numpy as np
import pytest

from autograder.grading.numeric import all_close, as_float, close_entries

SPECIAL = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 1e-9, 1e300, -1e300, 5e-324]
DTYPES = [np.float64, np.float32, np.float16, np.int64, np.uint8, np.bool_, np.complex128, np.complex64]


def _pair(rng: np.random.Generator, dtype_a, dtype_b):
    shape = tuple(int(n) for n in rng.integers(0, 4, size=int(rng.integers(0, 3))))
    a = rng.choice(SPECIAL, size=shape) + rng.standard_normal(shape) * rng.choice([0.0, 1e-7, 1.0])
    b = a + rng.standard_normal(shape) * rng.choice([0.0, 1e-9, 1e-5, 1.0])
    if rng.random() < 0.3:
        b = rng.choice(SPECIAL, size=shape)
    with np.errstate(all="ignore"):
        a = (a + 1j * b).astype(dtype_a) if np.dtype(dtype_a).kind == "c" else a.astype(dtype_a)
        b = (b + 1j * a.real).astype(dtype_b) if np.dtype(dtype_b).kind == "c" else b.astype(dtype_b)
    return a, b


@pytest.mark.parametrize("dtype_a", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dtype_b", [np.float64, np.float32, np.int64, np.complex128], ids=lambda d: np.dtype(d).name)
def test_close_entries_agrees_with_isclose(dtype_a, dtype_b):
    """On random and special values (NaN, infinities, signed zeros, extremes), of every numeric
    dtype and shape, is close_entries np.isclose entry for entry, result type included?"""
    rng = np.random.default_rng(20261201)
    for _ in range(60):
        a, b = _pair(rng, dtype_a, dtype_b)
        for rtol, atol in [(1e-6, 1e-8), (0.0, 1e-6), (1e-3, 0.0), (0.0, 0.0)]:
            for equal_nan in (False, True):
                with np.errstate(all="ignore"):
                    want = np.isclose(as_float(a), as_float(b), rtol=rtol, atol=atol, equal_nan=equal_nan)
                got = close_entries(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
                assert type(got) is type(want) and np.shape(got) == np.shape(want)
                assert np.array_equal(got, want), (a, b, rtol, atol, equal_nan)


def test_close_entries_gives_a_scalar_for_zero_dimensional_arrays():
    """Like np.isclose, does a 0-d comparison come back as a numpy bool rather than an array?"""
    assert close_entries(np.array(1.0), np.array(1.0 + 1e-12), rtol=1e-9, atol=0.0) is np.True_


@pytest.mark.parametrize("dtype_a", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dtype_b", [np.float64, np.float32, np.int64, np.complex128], ids=lambda d: np.dtype(d).name)
def test_all_close_is_close_entries_all(dtype_a, dtype_b):
    """On the same random and special values, is all_close exactly close_entries(...).all(), as a
    Python bool, including the pairs that are close everywhere?"""
    rng = np.random.default_rng(20261204)
    for _ in range(60):
        a, b = _pair(rng, dtype_a, dtype_b)
        for pair in ((a, b), (a, a), (b, b)):
            for rtol, atol in [(1e-6, 1e-8), (0.0, 1e-6), (1e-3, 0.0), (0.0, 0.0)]:
                for equal_nan in (False, True):
                    want = bool(close_entries(*pair, rtol=rtol, atol=atol, equal_nan=equal_nan).all())
                    got = all_close(*pair, rtol=rtol, atol=atol, equal_nan=equal_nan)
                    assert type(got) is bool and got == want, (pair, rtol, atol, equal_nan)


def test_as_float_gives_a_float64_array_back_unchanged():
    """Is a float64 array passed through as the very same object (no copy), and a float64 array
    in the other byte order still converted to the native one as before?"""
    a = np.arange(3.0)
    assert as_float(a) is a
    swapped = a.astype(">f8")
    assert as_float(swapped).dtype == np.result_type(swapped.dtype, np.float64)
    np.testing.assert_array_equal(as_float(swapped), a)
