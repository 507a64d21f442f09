"""The mistakes catalogue: known wrong variants of a student function, each with a stable id
and a hint a student can act on.

An instructor adds one with a function and a sentence:

    catalogue = Catalogue()

    @catalogue.mistake("layer_norm.unbiased_variance",
                       hint="Divide by d, not d - 1: LayerNorm uses the population variance.")
    def layer_norm_unbiased(x, gamma, beta, eps=1e-5):
        ...

An id is `<problem>.<name>`: the problem is the student function that holds the mistake, and a
variant takes that function's arguments and returns what a student with that misconception would
return. Ids starting `general.` belong to every problem (a mutated input, a float32 result that
came back float64). Mistakes found by other means (a missing ValueError, say) are registered
without a function via `catalogue.add(...)`.

Matching only finds mistakes someone wrote down. When none matches, a *probe* registered for the
problem (`@catalogue.probe("layer_norm")`) localises the error instead: it calls the student's own
function (through the proxy) on inputs built to isolate one stage at a time, and yields the ids of
the stages whose property fails (registered with `catalogue.add(id, hint=..., stage=True)`). Probes
use fixed inputs of their own, so what they find does not depend on the hidden-input seed.

A variant of a composite (a reference function whose building blocks are keyword-only parameters,
see `autograder.grading.checks`) may take those blocks as keyword-only parameters of its own, with
the reference's blocks as defaults. `match(..., blocks=)` then runs it on the blocks given (the
student's own, called through the proxy): a Post-LN block wired from a student's wrong layer_norm is
Post-LN all the same, and is named so.
"""
from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import numpy as np

from .numeric import all_close
from .results import TestResult

GENERAL = "general"
# Recognised by the engine for any problem whose catalogue registers it (with the assignment's own
# hint): the student's function computes in a lower precision than its float64 inputs (an
# .astype(np.float32) inside). See `Expect._lower_precision`.
LOWER_PRECISION = "general.computed_in_lower_precision"

Args = tuple[Any, ...]
Kwargs = dict[str, Any]
Calls = list[tuple[Args, Kwargs]]     # (args, kwargs) of each call of a function
Blocks = Mapping[str, Callable[..., Any]]    # building block name -> the function to wire in
# Whether a variant reproduced the student on the confirmation calls: (id, rtol, atol) for the variant
# as written, (id, rtol, atol, "own blocks") for it run on the student's own building blocks.
Verdicts = dict[tuple[Any, ...], bool]


@dataclass(frozen=True)
class Mistake:
    id: str
    hint: str
    variant: Callable[..., Any] | None = None
    stage: bool = False       # a stage a probe localises the error to, not a written-down misconception

    @property
    def problem(self) -> str:
        """The problem whose function holds the mistake ("general" for any problem)."""
        return self.id.split(".", 1)[0]

    def applies_to(self, problem: str) -> bool:
        return self.problem in (problem, GENERAL)


@dataclass(frozen=True)
class ProbeContext:
    """What a probe may use: the student's function of the problem (through the proxy; a call that
    fails raises and ends the probe), a test of whether an output is acceptable for given arguments
    (the reference's answer, or for a composite the wiring of the student's own building blocks),
    and the reference module."""
    call: Callable[..., Any]
    accepts: Callable[[Any, Args, Kwargs], bool]
    reference: ModuleType


Probe = Callable[[ProbeContext], Iterable[str]]


class Catalogue:
    def __init__(self) -> None:
        self._mistakes: dict[str, Mistake] = {}
        self._probes: dict[str, Probe] = {}
        self._confirmations: dict[str, Callable[[], Calls]] = {}
        self._confirmation_calls: dict[str, Calls] = {}
        self._confirmation_outputs: dict[tuple[str, int], np.ndarray | None] = {}
        self._memo: dict[tuple[Any, ...], Any] | None = None     # `shared` helpers' results during a match
        self._variants: dict[str, tuple[Mistake, ...]] = {}          # for_problem's answers until the next add

    def add(self, id: str, *, hint: str, variant: Callable[..., Any] | None = None, stage: bool = False) -> Mistake:
        if id in self._mistakes:
            raise ValueError(f"mistake id {id!r} is registered twice")
        if "." not in id:
            raise ValueError(f"mistake id {id!r} must read <problem>.<name>")
        m = Mistake(id=id, hint=" ".join(hint.split()), variant=variant, stage=stage)
        self._mistakes[id] = m
        self._variants.clear()
        return m

    def mistake(self, id: str, *, hint: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of `add` for a wrong variant."""
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add(id, hint=hint, variant=fn)
            return fn
        return register

    def probe(self, problem: str) -> Callable[[Probe], Probe]:
        """Decorator: register the probe that localises errors in `problem`'s function."""
        def register(fn: Probe) -> Probe:
            if problem in self._probes:
                raise ValueError(f"problem {problem!r} has a probe already")
            self._probes[problem] = fn
            return fn
        return register

    def shared(self, helper: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator for a helper several variants call on the same inputs (the first half of a
        block, say): while one check's variants run (`match`), a call with the very same argument
        objects gives the result of the first such call instead of computing it again. Helpers
        must not modify their arguments or results; outside `match` they simply run."""
        def reusing(*args: Any, **kwargs: Any) -> Any:
            memo = self._memo
            if memo is None:
                return helper(*args, **kwargs)
            key = (helper, *map(_identity, args), *((k, _identity(v)) for k, v in sorted(kwargs.items())))
            if key not in memo:
                memo[key] = (helper(*args, **kwargs), args, kwargs)   # the arguments kept alive: ids stay theirs
            return memo[key][0]
        reusing.__name__ = getattr(helper, "__name__", "helper")
        reusing.__doc__ = helper.__doc__
        return reusing

    def confirm_with(self, problem: str, calls: Callable[[], Calls]) -> None:
        """Fixed inputs for `problem` ((args, kwargs) calls, built once by `calls()`): a variant that
        matches a failed check must also reproduce the student's function on them, so that what is
        named does not hang on the hidden inputs a check happened to draw."""
        self._confirmations[problem] = calls

    def confirmation_calls(self, problem: str) -> Calls:
        if problem not in self._confirmation_calls:
            make = self._confirmations.get(problem)
            self._confirmation_calls[problem] = make() if make else []
        return self._confirmation_calls[problem]

    def has_probe(self, problem: str) -> bool:
        return problem in self._probes

    def localise(self, problem: str, context: ProbeContext) -> tuple[Mistake, ...]:
        """The stages the problem's probe finds wrong, in the order it finds them. A probe stops at
        the first call that fails (the student's function raised, timed out, returned something
        unusable): what it found up to then is kept."""
        probe = self._probes.get(problem)
        if probe is None:
            return ()
        found: list[Mistake] = []
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                for stage in probe(context):
                    if stage not in self._mistakes:
                        raise KeyError(f"probe for {problem!r} yielded unregistered id {stage!r}")
                    if self._mistakes[stage] not in found:
                        found.append(self._mistakes[stage])
        except KeyError:
            raise
        except Exception:   # noqa: BLE001 - the student's code ended the probe; keep what was found
            pass
        return tuple(found)

    def __getitem__(self, id: str) -> Mistake:
        return self._mistakes[id]

    def __contains__(self, id: str) -> bool:
        return id in self._mistakes

    def __iter__(self) -> Iterator[Mistake]:
        """Every entry: the written-down mistakes and the stages probes localise to."""
        return iter(self._mistakes.values())

    def mistakes(self) -> tuple[Mistake, ...]:
        """The written-down mistakes only (not the probes' stages)."""
        return tuple(m for m in self._mistakes.values() if not m.stage)

    def __len__(self) -> int:
        return len(self._mistakes)

    def for_problem(self, problem: str) -> tuple[Mistake, ...]:
        variants = self._variants.get(problem)
        if variants is None:
            variants = self._variants[problem] = tuple(m for m in self._mistakes.values()
                                                       if m.problem == problem and m.variant is not None)
        return variants

    def match(self, problem: str, args: Args, kwargs: Kwargs, actual: Any, *,
              rtol: float, atol: float, student: Callable[[int], Any] | None = None,
              verdicts: Verdicts | None = None, blocks: Blocks | None = None) -> tuple[Mistake, ...]:
        """Every variant for `problem` whose output on (args, kwargs) matches `actual`. With `student`
        (the student's output on the problem's i-th confirmation call, raising if it fails), a variant
        must also match the student on every confirmation call. `student.known(i)`, when `student`
        has it, tells whether the i-th output is at hand without calling the student's function.
        `verdicts`, kept by the caller for one submission (the same `student`), remembers whether
        a variant matched the student on the confirmation calls at given tolerances: every failed
        check of a problem asks it again of the same outputs.
        With `blocks` (a composite's building blocks by name), only the variants that take them as
        keyword-only parameters run, each with these blocks wired in, on this check's inputs and on
        the confirmation calls alike."""
        if not isinstance(actual, np.ndarray) and not isinstance(actual, (int, float, np.number)):
            return ()
        variants = self.for_problem(problem)
        if blocks is not None:
            variants = tuple(m for m in variants if _takes_blocks(m, blocks))
        known = getattr(student, "known", None)
        if student is not None and variants:
            calls = self.confirmation_calls(problem)
            if blocks is not None or (known is not None and all(known(i) for i in range(len(calls)))):
                # The student's outputs on the confirmation calls are at hand already (an earlier
                # check of this submission asked for them), or the variants run on the student's own
                # blocks, whose every call is a call of the student's code (so the verdicts, kept for
                # the submission, are asked once): a variant they rule out could not be named below,
                # so it is not run on this check's inputs at all.
                with self._sharing():
                    variants = tuple(m for m in variants if self._confirmed(
                        m, calls, student, rtol=rtol, atol=atol, verdicts=verdicts, blocks=blocks))
        with self._sharing():
            found = [m for m in variants
                     if _variant_agrees(_variant_output(m, args, {**kwargs, **(blocks or {})}), np.asarray(actual),
                                        rtol=rtol, atol=atol)]
        if student is not None and found:
            calls = self.confirmation_calls(problem)
            with self._sharing():
                found = [m for m in found
                         if self._confirmed(m, calls, student, rtol=rtol, atol=atol, verdicts=verdicts, blocks=blocks)]
        return tuple(found)

    @contextlib.contextmanager
    def _sharing(self) -> Iterator[None]:
        """While inside, `shared` helpers give the result of an earlier call on the same arguments."""
        self._memo = {}
        try:
            yield
        finally:
            self._memo = None

    def _confirmed(self, m: Mistake, calls: Calls, student: Callable[[int], Any], *, rtol: float, atol: float,
                   verdicts: Verdicts | None = None, blocks: Blocks | None = None) -> bool:
        """The variant (on `blocks`, when given) reproduces the student's function on every confirmation call."""
        key: tuple[Any, ...] = (m.id, rtol, atol) if blocks is None else (m.id, rtol, atol, "own blocks")
        if verdicts is not None and key in verdicts:
            return verdicts[key]
        try:
            agrees = all(_variant_agrees(self._confirmation_output(m, i, a, k) if blocks is None
                                         else _variant_output(m, a, {**k, **blocks}),
                                         np.asarray(student(i)), rtol=rtol, atol=atol)
                         for i, (a, k) in enumerate(calls))
        except Exception:  # noqa: BLE001 - the student's function failed on a confirmation input
            agrees = False
        if verdicts is not None:
            verdicts[key] = agrees
        return agrees

    def _confirmation_output(self, m: Mistake, i: int, args: Args, kwargs: Kwargs) -> np.ndarray | None:
        """The variant's output on its problem's i-th confirmation call: the inputs are fixed, so
        it is computed once and kept for every later submission."""
        key = (m.id, i)
        if key not in self._confirmation_outputs:
            self._confirmation_outputs[key] = _variant_output(m, args, kwargs)
        return self._confirmation_outputs[key]


def _takes_blocks(m: Mistake, blocks: Blocks) -> bool:
    """Does the variant take every one of `blocks` as a keyword-only parameter?"""
    try:
        params = inspect.signature(m.variant).parameters      # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return all(name in params and params[name].kind is inspect.Parameter.KEYWORD_ONLY for name in blocks)


def _identity(value: Any) -> Any:
    """A key for an argument: the value itself for small immutable ones, else the object's id."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return (type(value), value)
    return ("id", id(value))


def _variant_output(m: Mistake, args: Args, kwargs: Kwargs) -> np.ndarray | None:
    """What the variant returns on these inputs (None when it cannot run on them)."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return np.asarray(m.variant(*args, **kwargs))    # type: ignore[misc]
    except Exception:  # noqa: BLE001 - a variant that cannot run on these inputs does not match
        return None


def _variant_agrees(wrong: np.ndarray | None, actual: np.ndarray, *, rtol: float, atol: float) -> bool:
    return wrong is not None and wrong.shape == actual.shape and _agrees(actual, wrong, rtol=rtol, atol=atol)


def _agrees(actual: np.ndarray, wrong: np.ndarray, *, rtol: float, atol: float) -> bool:
    """The student's output matches a variant: everywhere, or (when the student's output has some
    NaN/inf, e.g. rows where every key was masked out with -inf) wherever it is finite, provided
    that is most of it."""
    try:
        a = actual.astype(np.complex128 if actual.dtype.kind == "c" else np.float64, copy=False)   # only read
        w = wrong.astype(np.complex128 if wrong.dtype.kind == "c" else np.float64, copy=False)
    except (TypeError, ValueError, OverflowError):      # OverflowError: an int too large for a float
        return False
    finite = np.isfinite(a)
    if finite.all():          # then an entry of the variant's that is not finite is never close
        return all_close(a, w, rtol=rtol, atol=atol)
    if finite.sum() * 2 < finite.size:
        return False
    return all_close(a[finite], w[finite], rtol=rtol, atol=atol)


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
        out.append(replace(t, diagnoses=tuple(d for d, _ in kept), hints=tuple(h for _, h in kept),
                           stages=tuple(s for s in t.stages if (t.problem, s) not in drop)))
    return tuple(out)
