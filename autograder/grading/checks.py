"""Checks for graders (the `expect` fixture): student-safe messages, tolerances from course.yml,
the reference wiring built from the student's own building blocks, and the mistakes catalogue
consulted when a numeric check fails.

Messages say what is wrong and where (how many entries, the largest error and its index), never
the hidden inputs or the expected values.

No double penalty. A reference function whose building blocks are keyword-only parameters
(`pre_ln_block(x, params, n_heads, mask=None, *, layer_norm=..., multi_head_attention=...)`)
is a composite: its checks accept the reference's answer, or the answer the reference wiring gives
when it is built, on the trusted side, from the student's own building blocks (each called through
the proxy). When a building block cannot be called on a check's inputs and the student's composite
does not give the reference's answer, the check is not graded (`NotGraded`). Nor does a wrong
building block hide a mistake of the composite's own: a composite that fails is also compared with
the catalogued variants that take the building blocks, run on the student's own
(`_match_on_own_blocks`).
"""
from __future__ import annotations

import contextlib
import inspect
import weakref
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal, NoReturn

import numpy as np

from ..config import Tolerance
from ..sandbox.outcomes import (
    CallTimeout,
    ChildCrashed,
    FunctionMissing,
    NotCallable,
    NotebookFailed,
    StudentCodeError,
    StudentRaised,
    TimeBudgetExceeded,
)
from .diagnosis import LOWER_PRECISION, Args, Catalogue, Kwargs, Mistake, ProbeContext, Verdicts
from .numeric import all_close, as_float, close_entries
from .proxy import StudentFunction


class NotGraded(Exception):
    """A check that cannot be graded because a building block it needs fails on its inputs (`error`:
    how the block's call ended, when it gave no answer)."""

    def __init__(self, block: str, reason: str, feedback: str = "", *, error: StudentCodeError | None = None):
        self.block = block
        self.reason = reason
        self.error = error
        self.feedback = feedback or (f"Not graded: this check needs your `{block}`, which failed on its inputs "
                                     f"({reason.rstrip('.')}). It earns no points until `{block}` works on them.")
        super().__init__(self.feedback)


class NotRun(Exception):
    """A check with nothing to look at: the student's function gave no result on the check's inputs
    (it raised, is missing, hung, crashed its process, or returned None). Meant for checks of what a
    call does besides its answer (advice: arguments modified in place, warnings), which a function
    that is not written yet would otherwise pass. Its status is `not_run`: no points, and never
    shown as passed."""

    def __init__(self, reason: str):
        self.reason = reason
        self.feedback = f"Not run: {reason.rstrip('.')}, so there was nothing for this check to look at."
        super().__init__(self.feedback)


def _breaks(holds: Callable[..., object], answers: list[np.ndarray]) -> bool:
    """Do `answers` break the property `holds` (it raises AssertionError on them)?"""
    try:
        holds(*answers)
    except AssertionError:
        return True
    return False


def no_result(function: str, exc: Exception, block: NotGraded | None = None) -> str:
    """Why a call of the student's `function` gave no result, in a few words: "`f` raised
    NotImplementedError" (the full error is in the failed checks that make the same call).

    A call that timed out ran the student's own code, which may call their other functions inside
    the sandbox, out of the grader's sight: it is worded as "`f` (or a function it calls)", unless
    `block` (a building block of `function` that failed on the check's inputs when the reference
    wiring called it) timed out as well, which is then named."""
    if isinstance(exc, CallTimeout) and block is not None and isinstance(block.error, CallTimeout) \
            and block.block != function:
        why = (f"neither did `{block.block}`, which it calls, on this check's inputs" if block.error.called
               else f"`{block.block}`, which it calls, had timed out before")
        return f"`{function}` did not return in time, and {why}"
    if isinstance(exc, NotGraded):
        return f"`{function}` needs your `{exc.block}`, which failed on these inputs"
    if isinstance(exc, StudentRaised):
        return f"`{exc.function or function}` raised {exc.type_name}"
    if isinstance(exc, FunctionMissing):
        return f"`{exc.name}` is not defined in your notebook"
    if isinstance(exc, NotCallable):
        return f"`{exc.name}` in your notebook is not a function"
    if isinstance(exc, CallTimeout):
        if not exc.called:
            return f"`{function}` was not called again, having timed out before (it, or a function it calls)"
        return f"`{function}` (or a function it calls) did not return in time"
    if isinstance(exc, ChildCrashed):
        return f"`{function}` stopped the process running your notebook"
    if isinstance(exc, NotebookFailed):
        return "your notebook could not be run"
    if isinstance(exc, TimeBudgetExceeded):
        return "the time for grading your notebook ran out"
    return f"`{function}` gave no result"


class _BlockFailed(Exception):
    def __init__(self, block: str, reason: str, error: StudentCodeError | None = None):
        super().__init__(reason)
        self.block = block
        self.reason = reason
        self.error = error


@dataclass
class Raised:
    """What `Expect.raises` caught: the type's name and the message of the student's exception, once the
    block has raised the expected type or a tolerated one (empty until then)."""
    message: str = ""
    type_name: str = ""


@dataclass(frozen=True)
class StudentCall:
    """One call of a student function made by a check, recorded with its result."""
    function: str
    args: Args
    kwargs: Kwargs
    value: Any


def building_blocks(reference: Callable[..., Any]) -> tuple[str, ...]:
    """The building blocks of a composite reference function: its keyword-only parameters
    (read from its signature once per function)."""
    try:
        return _BLOCKS[reference]
    except (KeyError, TypeError):
        pass
    try:
        params = inspect.signature(reference).parameters.values()
    except (TypeError, ValueError):
        return ()
    blocks = tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)
    with contextlib.suppress(TypeError):          # an unhashable callable is simply not remembered
        _BLOCKS[reference] = blocks
    return blocks


_BLOCKS: weakref.WeakKeyDictionary[Callable[..., Any], tuple[str, ...]] = weakref.WeakKeyDictionary()


# The wiring of a composite's own blocks must move, on a changed input, farther than this many times
# the tolerance from the composite's answer: blocks answering almost nothing, tuned to keep the wiring
# just within the tolerance of a placeholder on one input and just outside it on another, do not pass.
MOVE_FACTOR = 100.0

# The composite itself could not run at all: nothing a building block did explains that.
_OWN_FAILURES = (FunctionMissing, NotCallable, NotebookFailed)


VANISHING = 1e-3   # a block's answer this much smaller than the reference block's is no stand-in for it


def _unlike_an_answer(out: np.ndarray, expected: np.ndarray) -> str | None:
    """Why a building block's answer `out` cannot stand in for the reference block's `expected` (on the
    same input) in a wiring, or None: NaN or infinite entries where the reference has numbers, one
    number everywhere where the reference varies, or a size (largest entry) below VANISHING times
    the reference's. A wrong block a student writes (axes swapped, a variance off, ReLU for SiLU) gives
    values of the reference's size; zeros, a constant or 1e-30 times the answer make a wiring whose
    answer a composite can give without computing anything."""
    if out.dtype.kind not in "fc" or expected.dtype.kind not in "fc" or out.shape != expected.shape:
        return None
    real = np.isfinite(expected)
    if not np.isfinite(out[real]).all():
        return "gives NaN or infinite values where the reference has numbers"
    if not real.any() or expected.size < 2:
        return None
    scale = float(np.max(np.abs(expected[real])))
    if scale == 0.0:
        return None
    if float(np.ptp(expected[real])) > 0.0 and float(np.ptp(out[real])) == 0.0:
        return f"gives the same number ({float(out[real].flat[0]) + 0.0:g}) everywhere"     # + 0.0: -0 as 0
    size = float(np.max(np.abs(out[real])))
    if size < VANISHING * scale:
        return f"gives answers about {size / scale:.0e} times the size they should have"
    return None


def _changed_input(args: Args, rng: np.random.Generator) -> Args | None:
    """`args` with its first floating-point array (a building block's data) plus noise of its own
    scale; None when there is none."""
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size:
            scale = float(np.nanstd(a)) if np.isfinite(a).any() else 1.0
            noise = rng.standard_normal(a.shape) * (scale if scale > 0 and np.isfinite(scale) else 1.0)
            return args[:i] + ((a + noise).astype(a.dtype),) + args[i + 1:]
    return None


def _describe_type(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    if value is None:
        return "None (did you forget a `return`?)"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of length {len(value)}"
    name = type(value).__name__
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def _as_number(value: Any) -> Any:
    """A single number as a 0-d array, when numpy holds it as a number: a Python int beyond 64 bits
    (numpy would make an array of Python objects, which no comparison takes) stays as it is."""
    arr = np.asarray(value)
    return arr if arr.dtype.kind in "biufc" else value


def _index(flat: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return "()"
    return str(tuple(int(i) for i in np.unravel_index(flat, shape)))


def _g(v: float) -> str:
    return f"{v:.3g}"


def _number(v: Any) -> str:
    """A number for reading, with thousands separators: 49,728 (an int), 49,728.0 (a float)."""
    value = v.item() if isinstance(v, np.generic) else v
    return f"{value:,}" if isinstance(value, (int, float)) else repr(value)


@dataclass
class Expect:
    """Bound to one test: its problem, its tolerances, its catalogue, the student proxy and the
    assignment's reference module."""

    problem: str
    tolerance_for: Callable[[Any], Tolerance]
    catalogue: Catalogue | None
    last_call: Callable[[], Any]
    student: Any = None
    reference: ModuleType | None = None
    found: list[Mistake] = field(default_factory=list)
    calls: list[StudentCall] = field(default_factory=list)
    localised: dict[str, tuple[Mistake, ...]] = field(default_factory=dict)   # shared by a submission's tests
    confirmations: dict[tuple[str, int], Any] = field(default_factory=dict)    # likewise: outputs or errors
    verdicts: Verdicts = field(default_factory=dict)    # likewise: the variants on them
    wirings: dict[str, bool] = field(default_factory=dict)   # likewise: composites whose wiring `_trust_wiring` trusts
    precision: dict[str, bool] = field(default_factory=dict)  # likewise: functions blind below float32's resolution
    seed: int = 0                             # the submission's seed (the wiring's changed inputs are drawn from it)
    reference_file: str = "reference.py"      # the reference module's file, as messages name it
    failure: StudentCodeError | None = None   # how the last student call that failed ended
    _block_calls: list[tuple[str, Args, Kwargs, Any]] = field(default_factory=list)   # of the wirings built
    _block_changes: dict[str, tuple[str, ...]] = field(default_factory=dict)   # block -> arguments it modified

    # ---------------------------------------------------------------- recording
    def diagnose(self, mistake_id: str) -> Mistake | None:
        """Record a mistake recognised by a non-numeric check; returns it (None if unknown)."""
        if self.catalogue is None or mistake_id not in self.catalogue:
            return None
        m = self.catalogue[mistake_id]
        if m not in self.found:
            self.found.append(m)
        return m

    def _after_earlier_checks(self) -> None:
        """Before what the submission's checks share (`localised`, `confirmations`, `verdicts`,
        `wirings`, `precision`) is read or filled: return once the checks before this one have
        ended, when checks run side by side (StudentProxy.after_earlier_checks), so that the first
        check to fill it is the one that would when checks run one after another."""
        wait = getattr(type(self.student), "after_earlier_checks", None)
        if wait is not None:
            wait(self.student)

    def _fail(self, message: str) -> NoReturn:
        # Recognised mistakes travel separately (self.found -> TestResult.diagnoses and hints);
        # every output renders them beside the message.
        raise AssertionError(message)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a student function (through the proxy) and record the call with its result.

        When a composite fails (raises, times out, crashes the process) and one of the student's
        building blocks fails on the inputs the reference wiring gives it, the check is not graded."""
        name = _name(fn)
        try:
            value = fn(*args, **kwargs)
        except StudentCodeError as exc:
            self.failure = exc
            self._call_failed(name, args, kwargs, exc)
            raise
        self.calls.append(StudentCall(name, tuple(args), dict(kwargs), value))
        return value

    def call_or_not_run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`self.call(fn, *args, **kwargs)` for a check that has nothing to look at without a
        result: a call that fails (or is not graded) makes the check not run (`NotRun`) instead of
        failed. A check that should not pass when the function returns None calls `not_run` itself
        once it has looked at what the call did."""
        self.failure = None
        try:
            return self.call(fn, *args, **kwargs)
        except StudentCodeError as exc:
            raise NotRun(no_result(_name(fn), exc)) from None
        except NotGraded as exc:       # the call failed, and so does a building block: the call's own error
            raise NotRun(no_result(_name(fn), self.failure or exc, exc)) from None

    def not_run(self, reason: str) -> NoReturn:
        """End this check as not run (no points, never shown as passed), saying why."""
        raise NotRun(reason)

    def call_each(self, fn: Callable[..., Any], *arguments: Args) -> list[Any]:
        """`[self.call(fn, *args) for args in arguments]`, in one round trip to the sandbox: the
        same values, errors and diagnoses, and no call made after the first that fails."""
        if len(arguments) < 2 or not isinstance(fn, StudentFunction) or fn.proxy is not self.student:
            return [self.call(fn, *args) for args in arguments]
        name = _name(fn)
        answers = fn.proxy.call_many([(name, tuple(args), {}) for args in arguments], stop_at_error=True)
        values = []
        for args, answer in zip(arguments, answers):
            if isinstance(answer, StudentCodeError):
                self.failure = answer
                self._call_failed(name, args, {}, answer)
                raise answer
            self.calls.append(StudentCall(name, tuple(args), {}, answer))
            values.append(answer)
        return values

    def _call_failed(self, name: str, args: Args, kwargs: Kwargs, exc: StudentCodeError) -> None:
        """What a failed call of the student's `name` tells: NotGraded when it is a composite and
        one of its building blocks fails on the wiring's inputs; for an exception it raised, the
        stages of `name` that break (its probe)."""
        reference = getattr(self.reference, name, None)
        if callable(reference) and building_blocks(reference) and not isinstance(exc, _OWN_FAILURES):
            self._wired(reference, tuple(args), dict(kwargs))    # NotGraded when a block fails
        if isinstance(exc, StudentRaised) and exc.type_name != "NotImplementedError":
            self.localise(name)              # it runs on some inputs: which stage breaks on these?

    # ---------------------------------------------------------------- the reference, and the wiring
    def matches_reference(self, fn: Callable[..., Any], args: Args = (), kwargs: Kwargs | None = None, *,
                          what: str, tol: Tolerance | None = None, if_not_finite: str | None = None) -> Any:
        """Call the student's `fn(*args, **kwargs)` and check it against the reference function of
        the same name; returns the student's value.

        For a composite, the answer the reference wiring gives on top of the student's own building
        blocks is accepted as well. On failure the message is about the reference (shape, then how
        many entries are off and where) and the mistakes catalogue is consulted; `if_not_finite`
        names a mistake to record when the student's output has NaN or infinite entries."""
        name = _name(fn)
        kwargs = dict(kwargs or {})
        reference = self._reference(name)
        out = self.call(fn, *args, **kwargs)
        changed = bool(getattr(self.last_call(), "mutated", ()))
        expected = np.asarray(reference(*args, **kwargs))
        answer = out
        if expected.ndim == 0 and isinstance(out, (int, float, complex, np.number, np.bool_)) \
                and isinstance(out, (bool, np.bool_)) == (expected.dtype.kind == "b"):
            out = _as_number(out)                # a reference that returns a number is answered by one
        composite = bool(building_blocks(reference))
        if isinstance(out, np.ndarray) and out.dtype.kind == expected.dtype.kind == "f" \
                and out.dtype.itemsize < expected.dtype.itemsize:
            # float32 values of float64 inputs can sit within float64's tolerance, yet half the precision is gone
            self._fail(f"{what} returned dtype {out.dtype}; expected {expected.dtype} (keep the input's precision: "
                       f"an .astype({out.dtype.name}) or a {out.dtype.name} constant lowers it).")
        if self._agrees(out, expected, tol):
            return answer
        if composite:
            del self._block_calls[:]
            self._block_changes.clear()          # what the blocks of this wiring modified, not an earlier one's
            wired = self._wired(reference, args, kwargs)
            if self._agrees(out, wired, tol, equal_nan=True):
                self._finite_where_reference_is(wired, expected)     # NotGraded when a block's NaN is all it shows
                self._trust_wiring(name, [(tuple(args), kwargs, out)])   # NotGraded when its blocks cannot be trusted
                return answer
        if if_not_finite and isinstance(out, np.ndarray) and out.dtype.kind in "fc" \
                and not np.all(np.isfinite(out)):
            self.diagnose(if_not_finite)
        if not isinstance(out, np.ndarray) or out.shape != expected.shape:
            self.localise(name)                  # no variant can match a wrong shape
        self._single(out, expected, what)
        self.shape(out, expected.shape, what)
        if composite and changed:
            self._blame_changing_block(name, what)
        call = (name, tuple(args), kwargs)
        if out.dtype.kind in "fc" and not np.all(np.isfinite(out)) and np.all(np.isfinite(expected)):
            self._diagnose(call, out, tol or self.tolerance_for(expected.dtype))
            self.finite(out, what)               # NaN or inf where the reference has numbers: say so first
        self.close(out, expected, what=what, call=call, tol=tol)
        return answer

    def confirmation(self, name: str) -> Callable[[int], Any] | None:
        """The student's `name` on the catalogue's i-th confirmation call for it (called once per
        submission, the outcome kept for the other tests; a failed call raises again)."""
        if self.catalogue is None or self.student is None:
            return None
        self._after_earlier_checks()             # the outputs are the submission's: kept by the first check to ask
        calls = self.catalogue.confirmation_calls(name)

        def output(i: int) -> Any:
            key = (name, i)
            if key not in self.confirmations:
                args, kwargs = calls[i]
                try:
                    self.confirmations[key] = getattr(self.student, name)(*args, **kwargs)
                except StudentCodeError as exc:
                    self.confirmations[key] = exc
            value = self.confirmations[key]
            if isinstance(value, StudentCodeError):
                raise value
            return value
        output.known = lambda i: (name, i) in self.confirmations     # type: ignore[attr-defined]
        return output

    def localise(self, name: str) -> tuple[Mistake, ...]:
        """The stages of the student's `name` that its probe finds wrong (computed once per
        submission and problem; see `Catalogue.localise`). Also records them as found."""
        if self.catalogue is None or self.reference is None or self.student is None \
                or not self.catalogue.has_probe(name):
            return ()
        self._after_earlier_checks()
        if name not in self.localised:
            reference = self._reference(name)
            composite = bool(building_blocks(reference))

            def accepts(out: Any, args: Args, kwargs: Kwargs) -> bool:
                expected = np.asarray(reference(*args, **kwargs))
                if self._agrees(out, expected, None):
                    return True
                try:
                    return composite and self._agrees_wired(out, self._wired(reference, args, kwargs), expected, None)
                except NotGraded:
                    return False

            context = ProbeContext(call=getattr(self.student, name), accepts=accepts, reference=self.reference)
            self.localised[name] = self.catalogue.localise(name, context)
        for m in self.localised[name]:
            if m not in self.found:
                self.found.append(m)
        return self.localised[name]

    @contextlib.contextmanager
    def excused_if_wired_right(self, holds: Callable[..., object] | None = None) -> Iterator[None]:
        """A check of a property of a composite (equivariance, a dtype, ...) that fails inside this
        block is excused when every call this test made to the composite gives exactly what the
        reference wiring gives on top of the student's own building blocks (same shape, dtype and
        values within tolerance): the failure then comes from a building block, charged there.
        When a building block fails on those inputs the check is not graded (NotGraded), and the
        mistakes recorded inside the block go with the property, as for a value check not graded.

        `holds`, when given, is the property itself: called with one answer per call this test made
        to the composite (in order), it raises AssertionError when they break the property. A
        composite with a mistake of its own (charged by its value checks) is then excused too when
        the wiring's answers on its own blocks break the property as well: the property fails
        because of a building block, and is charged there. Only the property goes in such a block;
        whether the answers are answers at all (shape, placeholders) is checked before it."""
        found = len(self.found)
        try:
            yield
        except AssertionError:
            composites = [(c, self._reference(c.function)) for c in self.calls]
            if not composites or not all(building_blocks(r) for _, r in composites):
                raise
            del self._block_calls[:]
            wirings: dict[int, np.ndarray] = {}       # the call's index -> its wiring, made once
            if holds is not None:
                try:
                    wirings.update(enumerate(self._wired(r, c.args, c.kwargs) for c, r in composites))
                except NotGraded:
                    del self.found[found:]
                    raise
                if self._broken_by_blocks(holds, composites, list(wirings.values())):
                    del self.found[found:]
                    return
            for i, (c, reference) in enumerate(composites):
                try:
                    wired = wirings[i] if i in wirings else self._wired(reference, c.args, c.kwargs)
                except NotGraded:
                    del self.found[found:]
                    raise
                if not (isinstance(c.value, np.ndarray) and c.value.dtype == wired.dtype
                        and self._agrees(c.value, wired, None, equal_nan=True)):
                    raise
                try:
                    self._finite_where_reference_is(wired, np.asarray(reference(*c.args, **c.kwargs)))
                except NotGraded:
                    del self.found[found:]
                    raise
            try:
                for name in dict.fromkeys(c.function for c, _ in composites):
                    self._trust_wiring(name, [(c.args, c.kwargs, c.value) for c, _ in composites if c.function == name])
            finally:
                del self.found[found:]

    def _broken_by_blocks(self, holds: Callable[..., object],
                          composites: list[tuple[StudentCall, Callable[..., Any]]], wirings: list[np.ndarray]) -> bool:
        """Do the `wirings` of the calls `composites` made (the reference wiring on the student's own
        building blocks) break the property `holds`, where the reference's own answers keep it? A
        wiring with NaN or infinite entries where the reference has numbers tells nothing (False)."""
        expected = [np.asarray(reference(*c.args, **c.kwargs)) for c, reference in composites]
        if not all(self._agrees_wired(w, w, e, None) for w, e in zip(wirings, expected)):
            return False
        return _breaks(holds, wirings) and not _breaks(holds, expected)

    def _reference(self, name: str) -> Callable[..., Any]:
        if self.reference is None:
            raise RuntimeError(f"{self.reference_file} does not exist (the graders compare {name} with its "
                               f"function of that name)")
        if not callable(getattr(self.reference, name, None)):
            raise RuntimeError(f"{self.reference_file} has no function {name!r}")
        function: Callable[..., Any] = getattr(self.reference, name)
        return function

    def _wired(self, reference: Callable[..., Any], args: Args, kwargs: Kwargs) -> np.ndarray:
        """The reference wiring on the student's own building blocks (each called through the
        proxy); NotGraded when one of them fails or returns something the wiring cannot use."""
        blocks = {name: self._student_block(name) for name in building_blocks(reference)}
        try:
            with np.errstate(all="ignore"):
                return np.asarray(reference(*args, **kwargs, **blocks))
        except _BlockFailed as failed:
            raise NotGraded(failed.block, failed.reason, error=failed.error) from None

    def _student_block(self, name: str) -> Callable[..., Any]:
        def record(args: Args, kwargs: Kwargs, out: np.ndarray) -> None:
            self._block_calls.append((name, args, kwargs, out))
            changed = tuple(getattr(self.last_call(), "mutated", ()) or ())
            if changed and name not in self._block_changes:
                self._block_changes[name] = changed
        return self._block(name, self._student_caller(name), record)

    def _blame_changing_block(self, composite: str, what: str) -> None:
        """A composite that changed its own input while it ran, and agrees neither with the reference
        nor with the wiring of the student's own building blocks, fails naming the block that modifies
        its argument in place (seen in that wiring), when one does: what the composite computes after
        handing the block an array (a residual `x + ...`) starts from the block's leftovers, and the
        block, whose own answer is right, would otherwise go unnamed. (The child's report of the
        modification could be forged; it only words a failure, it never earns a point.)"""
        if not self._block_changes:
            return
        block, paths = next(iter(self._block_changes.items()))
        self._fail(f"{what} is not right, and changed its own input while it ran: your `{block}` modifies its "
                   f"argument in place ({', '.join(paths)}), so where `{composite}` uses that array again after "
                   f"calling `{block}` (a residual x + ..., say) it gets the modified values. Make `{block}` "
                   f"compute into new arrays (y = x - ..., not x -= ...); the modification costs the points "
                   f"here, where it shows.")

    def _block(self, name: str, call: Callable[[Args, Kwargs], Any],
               record: Callable[[Args, Kwargs, np.ndarray], object]) -> Callable[..., Any]:
        """The student's building block `name` as the reference wiring calls it, made by `call`:
        _BlockFailed when it fails or returns something the wiring cannot use; each answer recorded."""
        reference_fn = self._reference(name)

        def block(*args: Any, **kwargs: Any) -> Any:
            try:
                out = call(tuple(args), dict(kwargs))
            except StudentCodeError as exc:
                raise _BlockFailed(name, exc.feedback, exc) from None
            want = np.shape(reference_fn(*args, **kwargs))
            if not isinstance(out, np.ndarray) or out.dtype.kind not in "biufc" or out.shape != want:
                raise _BlockFailed(name, f"`{name}` returned {_describe_type(out)} where an array of "
                                         f"shape {want} was needed")
            record(tuple(args), dict(kwargs), out)
            return out
        return block

    def _trust_wiring(self, composite: str, calls: list[tuple[Args, Kwargs, Any]]) -> None:
        """Before the student's `composite` earns points for agreeing with the wiring of their own
        building blocks, and not with the reference: the wiring is only a fair stand-in for the
        reference when each building block it called gives an answer that depends on its input and
        on nothing else. Tested on the first check of the composite (in a submission) that would
        give such points, and again on each next one as long as the test fails: each block call of
        the check's wiring is made again in a process forked for it alone, where nothing the
        composite did can reach it, and must give the same answer; then the whole wiring is built
        again on a changed input of the composite's first call in `calls` ((args, kwargs, answer):
        its data plus noise drawn from the submission's seed), each block call again alone, and the
        composite's answer must not agree with that wiring too (even within MOVE_FACTOR times the
        tolerance), nor may the wiring have NaN or
        infinite entries where the reference has numbers. Otherwise the composite could earn the
        points without computing anything: building blocks returning zeros or almost zero (or,
        once the composite has run, switching to that) make the wiring's answer one the composite
        can return unseen.
        NotGraded, naming the block, when the wiring cannot be trusted. Once it was, the wirings of
        the composite's later checks are taken as they come: a composite that passed this test has
        computed its answer from real intermediate values once already."""
        self._after_earlier_checks()             # the first check of the composite to need it is tested
        if self.wirings.get(composite):
            return
        problem = self._wiring_problem(composite, calls)
        if problem is not None:
            raise problem
        self.wirings[composite] = True

    def _wiring_problem(self, composite: str, calls: list[tuple[Args, Kwargs, Any]]) -> NotGraded | None:
        method = getattr(type(self.student), "call_alone", None)
        if method is None:
            return None                          # a stand-in for the notebook without processes: nothing to fork

        def alone(name: str, args: Args, kwargs: Kwargs) -> Any:
            return method(self.student, name, args, kwargs)
        rng = np.random.default_rng([self.seed, zlib.crc32(composite.encode())])

        def refused(block: str, what: str, until: str) -> NotGraded:
            return NotGraded(block, what, f"Not graded: your `{composite}` does not give the reference's answer here, "
                                          f"so it is checked through your own `{block}`, which {what}. It earns no "
                                          f"points until `{block}` {until}.")

        made = list(self._block_calls)
        for name, args, kwargs, out in made:
            with np.errstate(all="ignore"):
                expected = np.asarray(self._reference(name)(*args, **kwargs))
            unlike = _unlike_an_answer(out, expected)
            if unlike is not None:
                return refused(name, f"{unlike} in the composite's wiring",
                               "gives answers like the reference's (a wrong answer of the right size is fine)")
        for name, args, kwargs, out in made:
            try:
                again = alone(name, args, kwargs)
            except StudentCodeError as exc:
                return refused(name, f"failed when called again on the same input ({exc.feedback.rstrip('.')})",
                               "works on it")
            if not self._agrees(again, out, self.tolerance_for(out.dtype), equal_nan=True):
                return refused(name, "gave another answer when called again on the same input in a fresh copy of "
                                     "your notebook's state: it depends on what ran before it",
                               "gives the same answer for the same input")
        reference = self._reference(composite)
        for args, kwargs, answer in calls:
            changed = _changed_input(args, rng)
            if changed is None:
                continue
            remade: list[tuple[str, np.ndarray]] = []
            blocks = {name: self._remade_block(name, alone, remade) for name in building_blocks(reference)}
            try:
                with np.errstate(all="ignore"):
                    wired = np.asarray(reference(*changed, **kwargs, **blocks))
            except _BlockFailed as failed:
                return refused(failed.block, f"failed on a slightly changed input ({failed.reason.rstrip('.')})",
                               "works on inputs like these")
            expected = np.asarray(reference(*changed, **kwargs))
            if not self._agrees_wired(wired, wired, expected, None):
                block = next((n for n, out in remade if out.dtype.kind in "fc" and not np.all(np.isfinite(out))),
                             remade[-1][0] if remade else composite)
                return refused(block, "gives NaN or infinite values where the reference has numbers",
                               "gives numbers there")
            tol = self.tolerance_for(expected.dtype)
            margin = Tolerance(rtol=tol.rtol * MOVE_FACTOR, atol=tol.atol * MOVE_FACTOR)
            if self._agrees(answer, wired, margin, equal_nan=True):
                return self._unmoved(composite, made, remade, refused)
            break
        return None

    def _remade_block(self, name: str, alone: Callable[[str, Args, Kwargs], Any],
                      remade: list[tuple[str, np.ndarray]]) -> Callable[..., Any]:
        """The student's block `name`, each call made alone, its answers appended to `remade`."""
        def call(args: Args, kwargs: Kwargs) -> Any:
            return alone(name, args, kwargs)

        def record(args: Args, kwargs: Kwargs, out: np.ndarray) -> None:
            remade.append((name, out))
        return self._block(name, call, record)

    def _unmoved(self, composite: str, before: list[tuple[str, Args, Kwargs, Any]],
                 after: list[tuple[str, np.ndarray]], refused: Callable[[str, str, str], NotGraded]) -> NotGraded:
        """Why the wiring on a changed input still agrees with the composite's answer: the first
        block whose answer did not move (by more than the tolerance) from one it gave before."""
        for name, out in after:
            tol = self.tolerance_for(out.dtype)
            for n, _, _, was in before:
                if n == name and isinstance(was, np.ndarray) and was.shape == out.shape \
                        and all_close(out, was, rtol=tol.rtol, atol=tol.atol, equal_nan=True):
                    how = "the very same answer" if np.array_equal(out, was, equal_nan=True) else \
                        "almost the same answer (within the tolerance)"
                    return refused(name, f"gives {how} for a different input, so the check cannot see what "
                                         f"`{composite}` computed", "depends on its input")
        block = after[-1][0] if after else composite
        return refused(block, f"gives answers so small that the wiring's answer stays within the tolerance of "
                              f"`{composite}`'s on a different input, so the check cannot see what `{composite}` "
                              f"computed", "depends on its input")

    def _finite_where_reference_is(self, wired: np.ndarray, expected: np.ndarray) -> None:
        """NotGraded, naming the first block that gave NaN or infinite values, when the wiring of the
        student's blocks (which the composite's answer agrees with) is not finite where the
        reference's answer is: there the composite is checked against nothing, as when a block fails
        (a `merge_heads` with NaN in one column makes the whole wiring NaN)."""
        if self._agrees_wired(wired, wired, expected, None):
            return
        bad = [n for n, _, _, out in self._block_calls if out.dtype.kind in "fc" and not np.all(np.isfinite(out))]
        block = bad[0] if bad else (self._block_calls[-1][0] if self._block_calls else "")
        raise NotGraded(block, "it gave NaN or infinite values where the reference's answer has numbers")

    def _agrees_wired(self, actual: Any, wired: np.ndarray, expected: np.ndarray, tol: Tolerance | None) -> bool:
        """`_agrees(actual, wired, equal_nan=True)`, where the wiring's NaN or infinite entries count
        only where the reference's answer `expected` is not finite either (e.g. a row whose keys
        were all masked out): a building block poisoning the wiring with NaN makes no NaN answer right."""
        if not self._agrees(actual, wired, tol, equal_nan=True):
            return False
        if wired.dtype.kind not in "fc" or np.all(np.isfinite(wired)):
            return True
        return (expected.shape == wired.shape and expected.dtype.kind in "fc"
                and not np.any(~np.isfinite(wired) & np.isfinite(expected)))

    def _agrees(self, actual: Any, expected: np.ndarray, tol: Tolerance | None, *, equal_nan: bool = False) -> bool:
        """Same shape and every entry within tolerance; NaN matches NaN only with `equal_nan` (when
        both sides come from the student's code, e.g. a row whose keys were all masked out)."""
        if not isinstance(actual, np.ndarray) or actual.shape != expected.shape \
                or actual.dtype.kind not in "biufc":
            return False
        tol = tol or self.tolerance_for(expected.dtype)
        return all_close(actual, expected, rtol=tol.rtol, atol=tol.atol, equal_nan=equal_nan)

    # ---------------------------------------------------------------- checks
    def _single(self, actual: Any, expected: np.ndarray, what: str) -> None:
        """Where the answer is one number (a 0-d `expected`), what came back instead of a number (of
        numpy's kinds: a Python int beyond 64 bits is none) fails saying that a number is expected."""
        if expected.ndim or isinstance(actual, np.ndarray):
            return
        wanted = "a bool (True or False)" if expected.dtype.kind == "b" else "a number"
        if isinstance(actual, int) and not -2**63 <= actual < 2**64:
            self._fail(f"{what} returned an integer too large for a numpy number (numpy's integers have 64 bits); "
                       f"expected {wanted}.")
        self._fail(f"{what} returned {_describe_type(actual)}; expected {wanted}.")

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
        if actual.dtype == np.dtype(dtype):
            return
        if actual.dtype.kind in "fc" and np.dtype(dtype).kind in "fc":
            self._fail(f"{what} returned dtype {actual.dtype}; expected {np.dtype(dtype)} "
                       f"(keep the input's precision: a NumPy float64 scalar such as np.sqrt(d_k), or a float64 "
                       f"array such as constants or a mask turned into numbers, turns a float32 array into float64).")
        self._fail(f"{what} returned dtype {actual.dtype}; expected {np.dtype(dtype)}.")

    def finite(self, actual: Any, what: str) -> None:
        arr = self.array(actual, what)
        if arr.dtype.kind in "fc":
            bad = ~np.isfinite(arr)
            if bad.any():
                found = ("is NaN" if np.isnan(arr) else "is infinite") if arr.ndim == 0 else \
                    f"has {int(bad.sum())} NaN or infinite entries " \
                    f"(first at index {_index(int(np.flatnonzero(bad)[0]), arr.shape)})"
                self._fail(f"{what} {found}; look for overflow in exp, a division by zero, or a softmax over "
                           f"entries that are all -inf (every one masked).")

    def close(self, actual: Any, expected: Any, *, what: str,
              call: tuple[str, Args, Kwargs] | None = None, tol: Tolerance | None = None) -> None:
        """Agreement with the reference within the problem's tolerance for the expected dtype."""
        expected = np.asarray(expected)
        if np.isscalar(actual) and not isinstance(actual, (str, bytes)) and expected.shape == ():
            actual = _as_number(actual)
        self._single(actual, expected, what)
        self.shape(actual, expected.shape, what)
        tol = tol or self.tolerance_for(expected.dtype)
        a, e = as_float(actual), as_float(expected)
        ok = _close_mask(actual, expected, tol)
        if ok.all():
            return
        n_bad, total = int((~ok).sum()), ok.size
        tolerance = f"(tolerance rtol={tol.rtol:g}, atol={tol.atol:g})"
        lines = [f"{what} is off {tolerance}." if a.ndim == 0
                 else f"{what} is off in {n_bad} of {total} entries {tolerance}."]
        nonfinite = ~np.isfinite(a)
        if nonfinite.any():
            first = _index(int(np.flatnonzero(nonfinite)[0]), a.shape)
            lines.append("It is NaN or infinite." if a.ndim == 0 else
                         f"It has {int(nonfinite.sum())} NaN or infinite entries (first at index {first}).")
        with np.errstate(all="ignore"):
            err = np.where(np.isfinite(a), np.abs(a - e), 0.0)
        if err.size and err.max() > 0:
            worst = int(np.argmax(err))
            scale = float(np.linalg.norm(e.ravel())) or 1.0
            rel = float(np.linalg.norm(np.where(np.isfinite(a), a - e, 0.0).ravel())) / scale
            lines.append(f"Absolute error {_g(float(err.flat[worst]))}; relative error {_g(rel)}." if a.ndim == 0 else
                         f"Largest absolute error {_g(float(err.flat[worst]))} at index {_index(worst, a.shape)}; "
                         f"overall relative error {_g(rel)}.")
        if n_bad < total and a.ndim >= 1:
            pattern = _where_pattern(~ok)
            if pattern:
                lines.append(pattern)
        if call is not None:
            self._diagnose(call, actual, tol)
        self._fail(" ".join(lines))

    def _diagnose(self, call: tuple[str, Args, Kwargs], actual: Any, tol: Tolerance) -> None:
        """Record what explains a failed comparison: a computation in lower precision than the inputs'
        (`_lower_precision`), else the catalogued variants that reproduce the student's function (on
        these inputs and the confirmation inputs; for a composite, wired from the reference's building
        blocks, else from the student's own), else the probe's stages."""
        if self.catalogue is None:
            return
        fn, args, kwargs = call
        if self._lower_precision(fn, tuple(args), dict(kwargs), actual):
            m = self.catalogue[LOWER_PRECISION]
            if m not in self.found:
                self.found.append(m)
            return
        rtol, atol = max(tol.rtol, 1e-6), max(tol.atol, 1e-8)
        matched = self.catalogue.match(fn, tuple(args), dict(kwargs), actual, rtol=rtol, atol=atol,
                                       student=self.confirmation(fn), verdicts=self.verdicts) \
            or self._match_on_own_blocks(fn, tuple(args), dict(kwargs), actual, rtol=rtol, atol=atol)
        for m in matched or self.localise(fn):
            if m not in self.found:
                self.found.append(m)

    def _match_on_own_blocks(self, name: str, args: Args, kwargs: Kwargs, actual: Any, *,
                             rtol: float, atol: float) -> tuple[Mistake, ...]:
        """For a composite: the catalogued variants that take its building blocks, run on the student's
        own blocks (each called through the proxy), on these inputs and on the confirmation inputs
        alike. A Post-LN block built on a layer_norm with the sample variance is then named as Post-LN,
        rather than localised to a stage that only the wrong layer_norm made fail. A block that fails
        on a variant's inputs makes that variant not match."""
        if self.catalogue is None or self.student is None or self.reference is None:
            return ()
        blocks = {b: self._block(b, self._student_caller(b), lambda *_: None)
                  for b in building_blocks(self._reference(name))}
        if not blocks:
            return ()
        return self.catalogue.match(name, args, kwargs, actual, rtol=rtol, atol=atol,
                                    student=self.confirmation(name), verdicts=self.verdicts, blocks=blocks)

    def _student_caller(self, name: str) -> Callable[[Args, Kwargs], Any]:
        """Calls the student's `name` (through the proxy) with (args, kwargs)."""
        fn = getattr(self.student, name)
        return lambda args, kwargs: fn(*args, **kwargs)

    def _lower_precision(self, name: str, args: Args, kwargs: Kwargs, actual: Any) -> bool:
        """Does the student's `name` compute in a lower precision than its float64 inputs (an
        .astype(np.float32) or np.float32(x) inside), which is all that is wrong with this answer?

        Both must hold: (1) the answer is off by no more than float32 arithmetic explains: its largest
        error beyond the float32 tolerance is at most `_FLOAT32_SLACK` times the largest error of the
        reference run on the inputs cast to float32; (2) the function is blind below float32's
        resolution: given the first float64 array argument rounded to float32 values, and the same
        nudged by far less than float32 can resolve, it gives the very same answer twice, while the
        reference's answers differ. A float64 computation always sees the nudge, so a mistake of its
        own is never taken for this, and (1) keeps a bigger mistake from hiding behind it. (2) costs
        two calls, made once per function and submission (`precision`); (1) is trusted numpy only.
        Only when the catalogue registers LOWER_PRECISION (its hint is the assignment's)."""
        if self.catalogue is None or LOWER_PRECISION not in self.catalogue or self.student is None \
                or self.reference is None:
            return False
        self._after_earlier_checks()             # the first check to ask decides, on its own arguments
        if self.precision.get(name) is False:
            return False
        at = next((i for i, a in enumerate(args)
                   if isinstance(a, np.ndarray) and a.dtype == np.float64 and a.size), None)
        if at is None or not isinstance(actual, np.ndarray) or actual.dtype != np.float64 \
                or not np.all(np.isfinite(actual)):
            return False
        reference = self._reference(name)
        try:
            with np.errstate(all="ignore"):
                expected = np.asarray(reference(*args, **kwargs))
                emulated = np.asarray(reference(*_as_float32(args), **_as_float32(kwargs))).astype(np.float64)
        except Exception:  # noqa: BLE001 - a reference that cannot run in float32 here: nothing to say
            return False
        if expected.dtype != np.float64 or expected.shape != actual.shape or emulated.shape != actual.shape:
            return False
        tol = self.tolerance_for(np.dtype(np.float32))
        with np.errstate(all="ignore"):
            excess = float(np.max(np.abs(actual - expected) - (tol.atol + tol.rtol * np.abs(expected))))
            rounding = float(np.max(np.abs(emulated - expected)))
        if not excess <= _FLOAT32_SLACK * rounding:
            return False
        if name not in self.precision:
            self.precision[name] = self._blind_below_float32(name, reference, args, kwargs, at)
        return self.precision[name]

    def _blind_below_float32(self, name: str, reference: Callable[..., Any], args: Args, kwargs: Kwargs,
                             at: int) -> bool:
        """Does the student's `name` give the very same answer for args[at] rounded to float32 values
        and for the same nudged below float32's resolution, where the reference's answers differ?"""
        x = args[at].astype(np.float32).astype(np.float64)
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        nudged = x * (1.0 + 1e-9 * rng.uniform(-1.0, 1.0, size=x.shape))
        if not np.array_equal(nudged.astype(np.float32), x.astype(np.float32)):
            return False
        first, second = args[:at] + (x,) + args[at + 1:], args[:at] + (nudged,) + args[at + 1:]
        with np.errstate(all="ignore"):
            if np.array_equal(np.asarray(reference(*first, **kwargs)), np.asarray(reference(*second, **kwargs))):
                return False                 # the reference does not see the nudge either: nothing to tell
        fn = getattr(self.student, name)
        try:
            a, b = fn(*first, **kwargs), fn(*second, **kwargs)
        except StudentCodeError:
            return False
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype.kind == "f" \
            and a.shape == b.shape and np.array_equal(a, b)

    def equal(self, actual: Any, expected: Any, *, what: str, hint: str = "",
              inputs: Literal["hidden", "public", "published"] = "hidden") -> None:
        """Exact equality for integers and other discrete answers. What a failure shows depends on
        `inputs`: "hidden" (the default) neither value, as the student's answer could give a hidden
        input away; "public" (the arguments are named in `what`, their answer is not published) the
        student's answer only; "published" (the notebook shows this very call with its answer) both."""
        if isinstance(actual, np.ndarray) and actual.shape == ():
            actual = actual.item()
        if isinstance(actual, bool) or not isinstance(actual, (int, np.integer, float, np.floating)):
            self._fail(f"{what} returned {_describe_type(actual)}; expected a number.")
        if actual != expected:
            extra = f" {hint}" if hint else ""
            if inputs == "published":
                self._fail(f"{what} returned {_number(actual)}; expected {_number(expected)}, as the notebook "
                           f"says.{extra}")
            if inputs == "public":
                self._fail(f"{what} returned {_number(actual)}, which is not right.{extra}")
            self._fail(f"{what} is not right.{extra}")

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
                       f"work on new arrays (e.g. `y = x * ...`, not `x *= ...` or `x[...] = ...`).")

    @contextlib.contextmanager
    def raises(self, exc_type: type[BaseException], *, what: str, diagnose: str | None = None,
               tolerate: tuple[type[BaseException], ...] = ()) -> Iterator[Raised]:
        """The student call inside the block must raise `exc_type` (by name, across the sandbox).

        `diagnose` names the mistake to record when the function answered without raising it
        (not when it gave no answer: an unfinished stub raising NotImplementedError, or one whose
        body is `pass` and returns None). The block's value, a `Raised`, holds the exception's type
        name and message afterwards, for a check of what it says. `tolerate` lists other types that
        pass the block too, for a check of the message whose type another check charges (the failure
        messages still ask for `exc_type` alone)."""
        name = exc_type.__name__
        accepted = {name, *(t.__name__ for t in tolerate)}
        before = self.last_call()
        raised = Raised()
        try:
            yield raised
        except StudentRaised as exc:
            if exc.type_name not in accepted:
                if diagnose and exc.type_name != "NotImplementedError":
                    self.diagnose(diagnose)
                self._fail(f"{what} raised {exc.type_name}; expected {name}.")
            raised.message, raised.type_name = exc.message, exc.type_name
            return
        answer = self.last_call()
        if answer is not before and getattr(answer, "value", ...) is None:
            self._fail(f"{what} returned None; expected it to raise {name}.")
        if diagnose:
            self.diagnose(diagnose)
        self._fail(f"{what} returned normally; expected it to raise {name}.")


# How far beyond the float32 tolerance an answer computed in float32 may be, in units of the largest
# error of the reference computed in float32 on the same inputs: the two roundings differ in order
# of operations (np.var or a mean of squares, where the casts are), not in size; measured on this
# course's norms, at most 0.93 of it on nearly constant tokens.
_FLOAT32_SLACK = 4.0


def _as_float32(value: Any) -> Any:
    """`value` with every float64 array in it (in tuples, lists and dicts too) cast to float32."""
    if isinstance(value, np.ndarray) and value.dtype == np.float64:
        return value.astype(np.float32)
    if isinstance(value, dict):
        return {k: _as_float32(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_as_float32(v) for v in value)
    return value


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__name__", fn))


def _close_mask(actual: np.ndarray, expected: np.ndarray, tol: Tolerance, *, equal_nan: bool = False) -> np.ndarray:
    """Entry by entry: is the student's value within tolerance of the expected one?"""
    close: np.ndarray = close_entries(actual, expected, rtol=tol.rtol, atol=tol.atol, equal_nan=equal_nan)
    return close


def _where_pattern(bad: np.ndarray) -> str:
    """Where the wrong entries sit, in words: along which axes they are confined."""
    parts = []
    for axis in range(bad.ndim):
        others = tuple(i for i in range(bad.ndim) if i != axis)
        along = bad.any(axis=others) if others else bad
        idx = np.flatnonzero(along)
        if 0 < len(idx) <= bad.shape[axis] // 2:        # confined to a few: worth saying where
            shown = ", ".join(str(int(i)) for i in idx[:6]) + (" and more" if len(idx) > 6 else "")
            parts.append(f"axis {axis - bad.ndim} positions {shown}")
    if not parts:
        return ""
    return "Wrong entries only at " + "; ".join(parts) + "."
