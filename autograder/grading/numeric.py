"""Entry-by-entry tolerance tests for the graders and the mistakes catalogue.

`close_entries` gives exactly what `np.isclose` gives for two numeric ndarrays and float
tolerances (the same formula, in the same order), without `np.isclose`'s argument handling, which
costs more than the comparison itself on the small arrays graders use.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def as_float(a: np.ndarray) -> np.ndarray:
    """Booleans, integers and floats as float64 (or wider); complex arrays unchanged."""
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
