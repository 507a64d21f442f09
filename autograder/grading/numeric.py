"""Entry-by-entry tolerance tests for the graders and the mistakes catalogue.

`close_entries` gives exactly what `np.isclose` gives for two numeric ndarrays and float
tolerances (the same formula, in the same order), without `np.isclose`'s argument handling, which
costs more than the comparison itself on the small arrays graders use. `all_close` is its `.all()`,
for the many comparisons that only need a yes or no.
"""
from __future__ import annotations

from typing import Any

import numpy as np

_FLOAT64 = np.dtype(np.float64)


def as_float(a: np.ndarray) -> np.ndarray:
    """Booleans, integers and floats as float64 (or wider); complex arrays unchanged."""
    if a.dtype is _FLOAT64:              # most arrays graders compare: nothing to work out
        return a
    return a.astype(np.result_type(a.dtype, np.float64), copy=False) if a.dtype.kind in "biuf" else a


def close_entries(actual: np.ndarray, expected: np.ndarray, *, rtol: float, atol: float,
                  equal_nan: bool = False) -> Any:
    """|actual - expected| <= atol + rtol * |expected| where `expected` is finite, or both equal
    (infinities of the same sign); NaN matches NaN only with `equal_nan`. Both arrays numeric
    (kinds b, i, u, f, c); a 0-d result comes back as a numpy bool, as np.isclose's does."""
    x, y = as_float(actual), as_float(expected)
    with np.errstate(all="ignore"):
        result = np.less_equal(np.abs(x - y), atol + rtol * np.abs(y)) & np.isfinite(y) | (x == y)
        if equal_nan:
            result |= np.isnan(x) & np.isnan(y)
    return result[()]


def all_close(actual: np.ndarray, expected: np.ndarray, *, rtol: float, atol: float,
              equal_nan: bool = False) -> bool:
    """`bool(close_entries(actual, expected, ...).all())`. Where every entry is finite and within
    tolerance (a right answer, the common case) the equalities that only rescue infinities and
    NaNs are not worked out."""
    x, y = as_float(actual), as_float(expected)
    with np.errstate(all="ignore"):
        close = np.less_equal(np.abs(x - y), atol + rtol * np.abs(y)) & np.isfinite(y)
        if close.all():
            return True
        close = close | (x == y)
        if equal_nan:
            close = close | (np.isnan(x) & np.isnan(y))
    return bool(close.all())
