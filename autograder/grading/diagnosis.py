"""The mistakes catalogue: known wrong variants of a student function, each with a stable id
and a hint a student can act on.

An instructor adds one with a function and a sentence:

    catalogue = Catalogue()

    @catalogue.mistake("layer_norm.unbiased_variance", problem="layer_norm",
                       hint="Divide by d, not d - 1: LayerNorm uses the population variance.")
    def layer_norm_unbiased(x, gamma, beta, eps=1e-5):
        ...

A variant takes the same arguments as the student function named by `problem` and returns
what a student with that misconception would return. Mistakes found by other means (a missing
ValueError, say) are registered without a function via `catalogue.add(...)`.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .results import TestResult


@dataclass(frozen=True)
class Mistake:
    id: str
    problems: tuple[str, ...]
    hint: str
    variant: Callable[..., Any] | None = None


class Catalogue:
    def __init__(self) -> None:
        self._mistakes: dict[str, Mistake] = {}

    def add(self, id: str, *, problem: str | Iterable[str], hint: str,
            variant: Callable[..., Any] | None = None) -> Mistake:
        if id in self._mistakes:
            raise ValueError(f"mistake id {id!r} is registered twice")
        problems = (problem,) if isinstance(problem, str) else tuple(problem)
        m = Mistake(id=id, problems=problems, hint=" ".join(hint.split()), variant=variant)
        self._mistakes[id] = m
        return m

    def mistake(self, id: str, *, problem: str | Iterable[str], hint: str):
        """Decorator form of `add` for a wrong variant."""
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add(id, problem=problem, hint=hint, variant=fn)
            return fn
        return register

    def __getitem__(self, id: str) -> Mistake:
        return self._mistakes[id]

    def __contains__(self, id: str) -> bool:
        return id in self._mistakes

    def __iter__(self):
        return iter(self._mistakes.values())

    def __len__(self) -> int:
        return len(self._mistakes)

    def for_problem(self, problem: str) -> tuple[Mistake, ...]:
        return tuple(m for m in self._mistakes.values() if problem in m.problems and m.variant is not None)

    def match(self, problem: str, args: tuple, kwargs: dict, actual: Any, *,
              rtol: float, atol: float) -> tuple[Mistake, ...]:
        """Every variant for `problem` whose output on (args, kwargs) matches `actual`."""
        if not isinstance(actual, np.ndarray) and not isinstance(actual, (int, float, np.number)):
            return ()
        actual_arr = np.asarray(actual)
        found = []
        for m in self.for_problem(problem):
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    wrong = np.asarray(m.variant(*args, **kwargs))
            except Exception:  # noqa: BLE001 - a variant that cannot run on these inputs is no match
                continue
            if wrong.shape != actual_arr.shape:
                continue
            if _agrees(actual_arr, wrong, rtol=rtol, atol=atol):
                found.append(m)
        return tuple(found)


def _agrees(actual: np.ndarray, wrong: np.ndarray, *, rtol: float, atol: float) -> bool:
    """The student's output matches a variant: everywhere, or (when the student's output has some
    NaN/inf, e.g. rows where every key was masked out with -inf) wherever it is finite, provided
    that is most of it."""
    try:
        a = actual.astype(np.complex128 if actual.dtype.kind == "c" else np.float64)
        w = wrong.astype(np.complex128 if wrong.dtype.kind == "c" else np.float64)
    except (TypeError, ValueError):
        return False
    finite = np.isfinite(a)
    if finite.all():
        return bool(np.isfinite(w).all() and np.allclose(a, w, rtol=rtol, atol=atol))
    if finite.sum() * 2 < finite.size:
        return False
    with np.errstate(all="ignore"):
        return bool(np.allclose(a[finite], w[finite], rtol=rtol, atol=atol))


def prune_subsumed(tests: Sequence[TestResult]) -> tuple[TestResult, ...]:
    """Drop a diagnosis that matched, within its problem, only in checks where another diagnosis
    matched too, while that other one also matched elsewhere: special inputs (zero weights, say)
    make several wrong variants coincide, and the one seen across more checks explains them all."""
    seen: dict[str, dict[str, set[int]]] = {}
    for i, t in enumerate(tests):
        for d in t.diagnoses:
            seen.setdefault(t.problem, {}).setdefault(d, set()).add(i)
    drop = {(problem, d) for problem, ids in seen.items() for d, where in ids.items()
            if any(other != d and where < elsewhere for other, elsewhere in ids.items())}
    if not drop:
        return tuple(tests)
    out = []
    for t in tests:
        kept = [(d, h) for d, h in zip(t.diagnoses, t.hints + ("",) * len(t.diagnoses))
                if (t.problem, d) not in drop]
        out.append(replace(t, diagnoses=tuple(d for d, _ in kept), hints=tuple(h for _, h in kept)))
    return tuple(out)
