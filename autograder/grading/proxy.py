"""The graders' handle on a student's notebook: `student.layer_norm(x, gamma, beta)`.

A `StudentProxy` wraps one notebook's `SubmissionRun` (autograder.sandbox.host). Each problem's
checks talk to their own process, forked from the state the notebook left (`for_problem`, called
by the plugin's `student` fixture), so nothing one problem's checks leave behind reaches the next.
Values come back as plain data, decoded by the trusted decoder; a value outside the accepted set
(ndarray subclasses, objects, generators, ...) raises BadReturnValue. Restarts after a call hangs
or crashes, the per-submission time budget and the per-function failure cap are the run's (see
autograder.sandbox.host). Nothing the notebook does reaches the trusted side except return values:
graders never hand the child a trusted function to call back.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..sandbox.host import Ahead, ProblemHandle, SubmissionRun
from ..sandbox.outcomes import CallResult, CallTimeout, ChildCrashed, ExecutionReport, NotebookFailed, StudentCodeError

__all__ = ["StudentProxy", "StudentFunction", "CallTimeout", "ChildCrashed", "NotebookFailed"]

DEFAULT_PROBLEM = "(no problem)"
AFTER_EARLIER_CHECKS = object()     # what `after_earlier_checks` hands the session instead of a call


class StudentFunction:
    """A callable standing for one function of the notebook."""

    def __init__(self, proxy: StudentProxy, name: str):
        self._proxy = proxy
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._proxy.call(self.__name__, args, kwargs)

    @property
    def proxy(self) -> StudentProxy:
        return self._proxy

    def __repr__(self) -> str:
        return f"<student function {self.__name__}>"


class StudentProxy:
    """Attribute access gives the notebook's functions. Names that clash with this class's own
    attributes (`close`, `call`, ...) are reachable as `proxy["close"]`."""

    def __init__(self, run: SubmissionRun):
        self._run = run
        self._problem: str | None = None
        self._handle: ProblemHandle | None = None
        self._last_call: CallResult | None = None
        self._last_error: StudentCodeError | None = None
        self._gather: Callable[[Any], Ahead | None] | None = None    # see `gather`

    # ---- functions
    def __getattr__(self, name: str) -> StudentFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        return StudentFunction(self, name)

    def __getitem__(self, name: str) -> StudentFunction:
        return StudentFunction(self, name)

    def for_problem(self, problem: str) -> StudentProxy:
        """Switch to `problem`'s own process (forked on its first call); returns this proxy."""
        if problem != self._problem:
            self._handle = self._run.problem(problem)
            self._problem = problem
        return self

    def _current(self) -> ProblemHandle:
        if self._handle is None:
            self.for_problem(DEFAULT_PROBLEM)
        assert self._handle is not None
        return self._handle

    # ---- state
    @property
    def restarts(self) -> int:
        """Fresh processes started after a call hung or crashed (the notebook is not run again)."""
        return self._run.restarts

    @property
    def last_call(self) -> CallResult | None:
        """Metadata (warnings, mutated arguments, seconds, stdout) of the latest call, if it returned."""
        return self._last_call

    @property
    def last_error(self) -> StudentCodeError | None:
        return self._last_error

    @property
    def execution(self) -> ExecutionReport:
        """The report of the notebook's run: cell errors, skipped magics, stopped cells, isolation."""
        assert self._run.report is not None
        return self._run.report

    @property
    def isolation(self) -> tuple[str, ...]:
        return self._run.isolation

    # ---- calls
    def call(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> Any:
        """Call the notebook's `name`; returns the value (metadata in `last_call`)."""
        args, kwargs = tuple(args), dict(kwargs or {})
        answer = None
        if self._gather is not None:            # asked ahead: the answer, when it still stands
            ahead = self._gather((name, args, kwargs))
            if ahead is not None and ahead.ended:
                self.after_earlier_checks()     # taking it charges the hang or crash: see `_in_turn`
            answer = self._current().take(ahead) if ahead is not None else None
            ahead = None                        # an answer that no longer stands is not held while it waits
            if answer is None:
                self._in_turn()
        self._last_call = None                  # (after the wait: other checks' calls came in between)
        self._last_error = None
        if answer is None:
            try:
                answer = self._current().call(name, args, kwargs)
            except StudentCodeError as exc:
                self._last_error = exc
                raise
        elif isinstance(answer, StudentCodeError):
            self._last_error = answer
            raise answer
        self._last_call = answer
        return answer.value

    def call_alone(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> Any:
        """`call`, in a process forked from the notebook's state for this call alone (see
        ProblemHandle.call_alone): what the function answers on these arguments, whatever the
        problem's earlier calls did to the notebook's state."""
        self._in_turn()                         # not made ahead
        self._last_call = None
        self._last_error = None
        try:
            answer = self._current().call_alone(name, tuple(args), dict(kwargs or {}))
        except StudentCodeError as exc:
            self._last_error = exc
            raise
        self._last_call = answer
        return answer.value

    # ---- calls made ahead (see autograder.grading.session)
    def gather(self, ask: Callable[[tuple[str, tuple[Any, ...], dict[str, Any]] | None], Ahead | None] | None) -> None:
        """While `ask` is set, each call is first handed to it, and the answer it gives back, made
        ahead, is taken if it still stands; a call made now instead (not made ahead, or several at
        once, or alone) first hands it AFTER_EARLIER_CHECKS (see `_in_turn`)."""
        self._gather = ask

    def after_earlier_checks(self) -> None:
        """Return once every check that comes before the current one has ended. Checks whose calls
        are made ahead in waves run side by side; one that is about to read or fill what the
        submission's checks share (diagnosis outputs kept for the submission, the wiring's trust,
        ...) waits here, so that it finds that state as when the checks run one after another."""
        if self._gather is not None:
            self._gather(AFTER_EARLIER_CHECKS)

    def _in_turn(self) -> None:
        """Before a call made now, not answered ahead: it may hang or crash, and what that costs is
        the submission's (a failure counted against the function, a restart, a function no longer
        called), so it waits until the checks before this one have ended, which one after another
        make all their calls before it."""
        if self._gather is not None:
            self.after_earlier_checks()

    def prefetch(self, calls: Sequence[tuple[str, tuple[Any, ...], dict[str, Any]]], *,
                 running: bool = False, keep_bytes: int | None = None) -> list[Ahead]:
        """Make `calls` (the first calls of the current problem's checks, in their order; with
        `running`, a later wave of them, on the problem's running process) in one round trip,
        before those checks go on; see ProblemHandle.prefetch."""
        return self._current().prefetch(calls, running=running, keep_bytes=keep_bytes)

    @property
    def received(self) -> int:
        """Bytes of the replies read so far from the current problem's processes."""
        return self._current().received

    @property
    def ahead_bytes(self) -> int:
        """How many bytes of replies the checks of a problem that wait for their calls' answers may
        hold in all (the run's `prefetch_bytes`: `limits.return_mb`, at least 1 MB)."""
        return self._run.prefetch_bytes

    def call_many(self, calls: Sequence[tuple[str, Sequence[Any], Mapping[str, Any]]], *,
                  stop_at_error: bool = False) -> list[Any]:
        """Several calls in one round trip where they allow it, with the outcomes of calls made
        one by one: a value, or the StudentCodeError instead of it, per call (`stop_at_error`: up
        to the first error, the last item; none is made after it). `last_call` and `last_error`
        are then those of the last call made."""
        self._in_turn()                         # several calls: not made ahead
        self._last_call = None
        self._last_error = None
        out = self._current().call_many(calls, stop_at_error=stop_at_error)
        if out:
            last = out[-1]
            if isinstance(last, StudentCodeError):
                self._last_error = last
            else:
                self._last_call = last
        return [r if isinstance(r, StudentCodeError) else r.value for r in out]

    def close(self) -> None:
        """End the submission's processes (idempotent)."""
        self._run.close()

    def __enter__(self) -> StudentProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<StudentProxy problem={self._problem!r}>"
