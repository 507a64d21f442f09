"""Checks for graders (the `expect` fixture): student-safe messages, tolerances from course.yml,
and the mistakes catalogue consulted when a numeric check fails.

Messages say what is wrong and where (how many entries, the largest error and its index), never
the hidden inputs or the expected values.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ..config import Tolerance
from ..sandbox.outcomes import StudentRaised
from .diagnosis import Catalogue, Mistake


def _describe_type(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    if value is None:
        return "None (did you forget a `return`?)"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a {type(value).__name__}"


def _index(flat: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return "()"
    return str(tuple(int(i) for i in np.unravel_index(flat, shape)))


def _g(v: float) -> str:
    return f"{v:.3g}"


@dataclass
class Expect:
    """Bound to one test: its problem, its tolerances, its catalogue and the student proxy."""

    problem: str
    tolerance_for: Callable[[Any], Tolerance]
    catalogue: Catalogue | None
    last_call: Callable[[], Any]
    found: list[Mistake] = field(default_factory=list)

    # ---------------------------------------------------------------- recording
    def diagnose(self, mistake_id: str) -> Mistake | None:
        """Record a mistake recognised by a non-numeric check; returns it (None if unknown)."""
        if self.catalogue is None or mistake_id not in self.catalogue:
            return None
        m = self.catalogue[mistake_id]
        if m not in self.found:
            self.found.append(m)
        return m

    def _fail(self, message: str) -> None:
        # Recognised mistakes travel separately (self.found -> TestResult.diagnoses and hints);
        # every output renders them beside the message.
        raise AssertionError(message)

    # ---------------------------------------------------------------- checks
    def array(self, actual: Any, what: str) -> np.ndarray:
        if not isinstance(actual, np.ndarray):
            self._fail(f"{what} returned {_describe_type(actual)}; expected a numpy array.")
        return actual

    def shape(self, actual: Any, shape: tuple[int, ...], what: str) -> None:
        """The result is an ndarray of exactly this shape."""
        self.array(actual, what)
        shape = tuple(int(s) for s in shape)
        if actual.shape != shape:
            self._fail(f"{what} returned shape {actual.shape}; expected shape {shape}.")

    def dtype(self, actual: Any, dtype: Any, what: str) -> None:
        self.array(actual, what)
        if actual.dtype != np.dtype(dtype):
            self._fail(f"{what} returned dtype {actual.dtype}; expected {np.dtype(dtype)} "
                       f"(keep the input's precision: avoid creating float64 constants arrays that upcast it).")

    def finite(self, actual: Any, what: str) -> None:
        arr = self.array(actual, what)
        if arr.dtype.kind in "fc":
            bad = ~np.isfinite(arr)
            if bad.any():
                first = _index(int(np.flatnonzero(bad)[0]), arr.shape)
                self._fail(f"{what} has {int(bad.sum())} NaN or infinite entries (first at index {first}); "
                           f"look for overflow in exp or a division by zero.")

    def close(self, actual: Any, expected: Any, *, what: str,
              call: tuple[str, tuple, dict] | None = None, tol: Tolerance | None = None) -> None:
        """Agreement with the reference within the problem's tolerance for the expected dtype."""
        expected = np.asarray(expected)
        if np.isscalar(actual) and not isinstance(actual, (str, bytes)) and expected.shape == ():
            actual = np.asarray(actual)
        self.shape(actual, expected.shape, what)
        tol = tol or self.tolerance_for(expected.dtype)
        a = actual.astype(np.result_type(actual.dtype, np.float64), copy=False) if actual.dtype.kind in "biuf" else actual
        e = expected.astype(np.float64, copy=False) if expected.dtype.kind in "biuf" else expected
        with np.errstate(all="ignore"):
            ok = np.isclose(a, e, rtol=tol.rtol, atol=tol.atol, equal_nan=False)
        if ok.all():
            return
        n_bad, total = int((~ok).sum()), ok.size
        lines = [f"{what} is off in {n_bad} of {total} entries "
                 f"(tolerance rtol={tol.rtol:g}, atol={tol.atol:g})."]
        nonfinite = ~np.isfinite(a)
        if nonfinite.any():
            first = _index(int(np.flatnonzero(nonfinite)[0]), a.shape)
            lines.append(f"It has {int(nonfinite.sum())} NaN or infinite entries (first at index {first}).")
        with np.errstate(all="ignore"):
            err = np.where(np.isfinite(a), np.abs(a - e), 0.0)
        if err.size and err.max() > 0:
            worst = int(np.argmax(err))
            scale = float(np.linalg.norm(e.ravel())) or 1.0
            rel = float(np.linalg.norm(np.where(np.isfinite(a), a - e, 0.0).ravel())) / scale
            lines.append(f"Largest absolute error {_g(float(err.flat[worst]))} at index {_index(worst, a.shape)}; "
                         f"overall relative error {_g(rel)}.")
        if n_bad < total and a.ndim >= 1:
            pattern = _where_pattern(~ok)
            if pattern:
                lines.append(pattern)
        if call is not None and self.catalogue is not None:
            fn, args, kwargs = call
            for m in self.catalogue.match(fn, tuple(args), dict(kwargs), actual,
                                          rtol=max(tol.rtol, 1e-6), atol=max(tol.atol, 1e-8)):
                if m not in self.found:
                    self.found.append(m)
        self._fail(" ".join(lines))

    def equal(self, actual: Any, expected: Any, *, what: str, hint: str = "") -> None:
        """Exact equality for integers and other discrete answers (never shows the expected value)."""
        if isinstance(actual, np.ndarray) and actual.shape == ():
            actual = actual.item()
        if isinstance(actual, bool) or not isinstance(actual, (int, np.integer, float, np.floating)):
            self._fail(f"{what} returned {_describe_type(actual)}; expected a number.")
        if actual != expected:
            self._fail(f"{what} is not right." + (f" {hint}" if hint else ""))

    def no_warnings(self, what: str) -> None:
        info = self.last_call()
        warned = tuple(getattr(info, "warnings", ()) or ())
        if warned:
            self._fail(f"{what} raised numpy/Python warnings: {'; '.join(warned[:3])}. "
                       f"Rewrite the computation so it stays finite without warnings.")

    def not_mutated(self, what: str) -> None:
        info = self.last_call()
        mutated = tuple(getattr(info, "mutated", ()) or ())
        if mutated:
            self._fail(f"{what} modified its input in place ({', '.join(mutated)}); "
                       f"work on new arrays (e.g. `x - mean`, not `x -= mean`).")

    @contextlib.contextmanager
    def raises(self, exc_type: type[BaseException], *, what: str, diagnose: str | None = None) -> Iterator[None]:
        """The student call inside the block must raise `exc_type` (by name, across the sandbox).

        `diagnose` names the mistake to record when the function answered without raising it
        (not when it is still an unfinished stub raising NotImplementedError)."""
        name = exc_type.__name__
        try:
            yield
        except StudentRaised as exc:
            if exc.type_name != name:
                if diagnose and exc.type_name != "NotImplementedError":
                    self.diagnose(diagnose)
                self._fail(f"{what} raised {exc.type_name}; expected {name}.")
            return
        if diagnose:
            self.diagnose(diagnose)
        self._fail(f"{what} returned normally; expected it to raise {name}.")


def _where_pattern(bad: np.ndarray) -> str:
    """Where the wrong entries sit, in words: along which axes they are confined."""
    parts = []
    for axis in range(bad.ndim):
        others = tuple(i for i in range(bad.ndim) if i != axis)
        along = bad.any(axis=others) if others else bad
        idx = np.flatnonzero(along)
        if 0 < len(idx) < bad.shape[axis]:
            shown = ", ".join(str(int(i)) for i in idx[:6]) + (", ..." if len(idx) > 6 else "")
            parts.append(f"axis {axis - bad.ndim} positions {shown}")
    if not parts:
        return ""
    return "Wrong entries only at " + "; ".join(parts) + "."
