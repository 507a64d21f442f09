"""The graders' handle on a student's notebook: `student.layer_norm(x, gamma, beta)`.

Each call crosses to the sandboxed child (`autograder.sandbox.launcher.Sandbox`) and comes back
as plain data, decoded by the trusted decoder; a value outside the accepted set (ndarray
subclasses, objects, generators, ...) raises BadReturnValue. The sandbox is started lazily, on
first use. After a call times out or crashes the child, the next call runs the notebook again in
a fresh child, so one bad function costs only the checks that call it; a function that timed
out or crashed twice is not called again (its later checks fail at once with the same reason).

    student.using(layer_norm=ref.layer_norm).pre_ln_block(x, params)

calls the student's `pre_ln_block` with `layer_norm` replaced, for that call, by a stub that
calls back to the trusted `ref.layer_norm` (no double penalty for an earlier mistake). Reference
code never enters the child: only the arguments and the result cross.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..sandbox.launcher import Sandbox
from ..sandbox.outcomes import CallResult, CallTimeout, ChildCrashed, ExecutionReport, NotebookFailed, StudentCodeError

__all__ = ["StudentProxy", "StudentFunction"]

MAX_RESTARTS = 30           # backstop for the whole proxy
MAX_FAILURES_PER_FUNCTION = 2   # timeouts/crashes of one function before it is no longer called


def _again(exc: StudentCodeError) -> StudentCodeError:
    """A fresh copy of a timeout/crash, for a function that is not called again."""
    if isinstance(exc, CallTimeout):
        new: StudentCodeError = CallTimeout(exc.seconds, exc.function)
    else:
        assert isinstance(exc, ChildCrashed)
        new = ChildCrashed(exc.reason, exc.function, exc.detail)
    new.feedback += f" It was not called again after failing this way {MAX_FAILURES_PER_FUNCTION} times."
    new.args = (new.feedback,)
    return new


class StudentFunction:
    """A callable standing for one function of the notebook."""

    def __init__(self, proxy: StudentProxy, name: str):
        self._proxy = proxy
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._proxy.call(self.__name__, args, kwargs)

    def __repr__(self) -> str:
        return f"<student function {self.__name__} via {self._proxy!r}>"


class _Core:
    """State shared by a proxy and its `using(...)` views."""

    def __init__(self, factory: Callable[[], Sandbox], call_seconds: float | None, max_restarts: int):
        self.factory = factory
        self.call_seconds = call_seconds
        self.max_restarts = max_restarts
        self.sandbox: Sandbox | None = None
        self.restarts = 0
        self.last_call: CallResult | None = None
        self.last_error: StudentCodeError | None = None
        self.failures: dict[str, list[StudentCodeError]] = {}   # timeouts and crashes, by function


class StudentProxy:
    """Lazily started sandbox plus restarts; attribute access gives the notebook's functions.

    `factory()` returns a Sandbox, started or not. Names that clash with this class's own
    attributes (`close`, `using`, `call`, ...) are reachable as `proxy["close"]`."""

    def __init__(self, factory: Callable[[], Sandbox], *, call_seconds: float | None = None,
                 max_restarts: int = MAX_RESTARTS):
        self._core = _Core(factory, call_seconds, max_restarts)
        self._substitutes: dict[str, Callable[..., Any]] = {}

    # ---- functions
    def __getattr__(self, name: str) -> StudentFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        return StudentFunction(self, name)

    def __getitem__(self, name: str) -> StudentFunction:
        return StudentFunction(self, name)

    def using(self, **trusted: Callable[..., Any]) -> StudentProxy:
        """A view whose calls see the given names replaced by trusted callables."""
        view = object.__new__(StudentProxy)
        view._core = self._core
        view._substitutes = {**self._substitutes, **trusted}
        return view

    # ---- shared state
    @property
    def restarts(self) -> int:
        """How many times the notebook was run again after a call timed out or crashed."""
        return self._core.restarts

    @property
    def last_call(self) -> CallResult | None:
        """Metadata (warnings, mutated arguments, seconds, stdout) of the latest call, if it returned."""
        return self._core.last_call

    @property
    def last_error(self) -> StudentCodeError | None:
        return self._core.last_error

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox, started on first use."""
        core = self._core
        if core.sandbox is None:
            box = core.factory()
            if box.report is None:
                box.start()
            core.sandbox = box
        return core.sandbox

    def start(self) -> ExecutionReport:
        """Start the sandbox now (if not yet) and return the report of the notebook's first run."""
        return self.execution

    @property
    def execution(self) -> ExecutionReport:
        """The report of the notebook's first run: cell errors, skipped magics, stopped cells."""
        box = self.sandbox
        assert box.first_report is not None
        return box.first_report

    def call(self, name: str, args: tuple = (), kwargs: Mapping[str, Any] | None = None, *,
             substitutes: Mapping[str, Callable[..., Any]] | None = None) -> Any:
        """Call the notebook's `name`; returns the value (metadata in `last_call`)."""
        core = self._core
        core.last_call = None
        core.last_error = None
        box = self.sandbox
        failed = core.failures.get(name, [])
        try:
            if len(failed) >= MAX_FAILURES_PER_FUNCTION:
                raise _again(failed[-1])
            if not box.alive and box.report is not None and box.report.ok:
                if core.restarts >= core.max_restarts:
                    raise ChildCrashed(f"it was restarted {core.restarts} times already, "
                                       f"so no more calls are made", name)
                core.restarts += 1
                box.restart()
            result = box.call(name, tuple(args), dict(kwargs or {}),
                              substitutes={**self._substitutes, **(substitutes or {})},
                              timeout=core.call_seconds)
        except StudentCodeError as exc:
            core.last_error = exc
            if isinstance(exc, (CallTimeout, ChildCrashed)) and exc.function == name:
                core.failures.setdefault(name, []).append(exc)
            raise
        core.last_call = result
        return result.value

    def close(self) -> None:
        """Stop the sandbox (idempotent)."""
        if self._core.sandbox is not None:
            self._core.sandbox.close()

    def __enter__(self) -> StudentProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        swapped = f" using {', '.join(sorted(self._substitutes))}" if self._substitutes else ""
        return f"<StudentProxy{swapped}>"


# Names re-exported for graders that catch them.
__all__ += ["CallTimeout", "ChildCrashed", "NotebookFailed"]
