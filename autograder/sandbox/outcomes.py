"""What running student code produced, as seen from the trusted side.

Dataclasses for the notebook run (`CellOutcome`, `ExecutionReport`) and for one call
(`CallResult`), and the exceptions a call can end in. Every `StudentCodeError` carries a
student-safe `.feedback` sentence (it names the student's own function, cell and error, never
a hidden input or expected value) and an instructor-only `.detail`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..text import truncate, with_article
from .protocol import ProtocolError

__all__ = [
    "CellStatus", "RunState", "CellOutcome", "ExecutionReport", "CallResult",
    "StudentCodeError", "StudentRaised", "CallTimeout", "ChildCrashed", "FunctionMissing",
    "NotCallable", "BadReturnValue", "NotebookFailed", "TimeBudgetExceeded", "ProtocolError",
    "SandboxError",
]

# ok: ran to the end; error: raised (SyntaxError included); skipped: a %%cell magic;
# timeout: stopped after the per-cell limit (or the notebook's total limit);
# crashed: the process died in it (os._exit, segfault, signal); not_run: the total limit ran out before it.
CellStatus = Literal["ok", "error", "skipped", "timeout", "crashed", "not_run"]
# ok: every cell was run (whatever it raised); timeout: the total limit stopped the notebook;
# crashed: the child could not start or run at all.
RunState = Literal["ok", "timeout", "crashed"]




def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


@dataclass(frozen=True, slots=True)
class CellOutcome:
    index: int                      # the notebook's cell index, as given to the sandbox
    status: CellStatus
    seconds: float = 0.0
    error_type: str = ""            # e.g. "NameError" (status "error")
    message: str = ""               # the exception message, or why the cell was stopped
    where: str = ""                 # e.g. "line 2: `y = foo(x)`" (status "error")
    notes: tuple[str, ...] = ()     # e.g. "the 1st code cell (`%matplotlib inline`): skipped IPython magic ..."
    stdout: str = ""                # captured output (bounded; dropped once the run's output cap is reached)
    label: str = ""                 # how the student finds the cell: "the 3rd code cell (`def layer_norm`)"

    @property
    def name(self) -> str:
        return self.label or f"cell {self.index}"

    @property
    def note(self) -> str:
        """One student-facing sentence for a cell that did not simply run, else ""."""
        if self.status == "error":
            where = "" if not self.where else f" ({self.where})" if self.where.startswith("line ") \
                else f" (at {self.where})"
            text = f": {truncate(self.message, 300)}" if self.message else ""
            hint = ""
            if self.error_type == "ModuleNotFoundError":    # scipy, torch, ...: not there when grading
                hint = "; that module is not installed where notebooks are graded: write it with numpy"
            return f"{_capital(self.name)} raised {self.error_type}{text}{where}{hint}"
        if self.status in ("timeout", "crashed", "not_run"):
            return f"{_capital(self.name)} {self.message}"
        return ""


@dataclass(frozen=True, slots=True)
class ExecutionReport:
    cells: tuple[CellOutcome, ...]
    seconds: float
    state: RunState
    isolation: tuple[str, ...] = ()   # the layers that applied, e.g. ("bubblewrap", "seccomp", ...)
    messages: tuple[str, ...] = ()    # student-facing notes about the whole run
    detail: str = ""                  # instructor-only (e.g. the child's stderr tail after a crash)

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    @property
    def notes(self) -> tuple[str, ...]:
        """Student-facing notes: skipped magics, cell errors, stopped cells, then run-level notes."""
        out: list[str] = []
        for cell in self.cells:
            out.extend(cell.notes)
            if cell.note:
                out.append(cell.note)
        out.extend(self.messages)
        return tuple(out)

    def cell(self, index: int) -> CellOutcome:
        for c in self.cells:
            if c.index == index:
                return c
        raise KeyError(index)


@dataclass(frozen=True, slots=True)
class CallResult:
    value: Any                        # decoded with the trusted decoder: plain data only
    warnings: tuple[str, ...] = ()    # e.g. "RuntimeWarning: overflow encountered in exp (cell 3, line 5)"
    mutated: tuple[str, ...] = ()     # argument paths changed in place, e.g. "x", "params['W_Q']"
    seconds: float = 0.0              # time inside the student's function
    stdout: str = ""                  # what it printed (bounded)


# --------------------------------------------------------------------------- errors

class StudentCodeError(Exception):
    """A call into student code did not produce a value. `.feedback` is safe to show the student."""

    stdout: str = ""    # what the call printed before it failed (set by the host)

    def __init__(self, feedback: str, detail: str = ""):
        super().__init__(feedback)
        self.feedback = feedback
        self.detail = detail or feedback


def _fn(function: str) -> str:
    return f"`{function}`" if function else "Your function"


class StudentRaised(StudentCodeError):
    """The student's function raised an exception."""

    def __init__(self, type_name: str, message: str, where: tuple[str, ...] = (), function: str = ""):
        self.type_name = type_name
        self.message = message
        self.where = tuple(where)
        self.function = function
        text = f"{_fn(function)} raised {type_name}"
        if message:
            text += f": {truncate(message, 300)}"
        if self.where:
            text += f" (at {self.where[-1]})"
        elif function and type_name == "TypeError" and message.startswith(f"{function}() "):
            # raised before any line of the function ran: the call did not fit its parameters
            text += (f"; the checks call `{function}` as its def line in the released notebook has it: keep its "
                     f"parameters, their names, order and defaults, as given")
        super().__init__(text, text + ("\n" + "\n".join(self.where) if self.where else ""))


class CallTimeout(StudentCodeError):
    """The call ran past its time limit; the child was stopped. (`called` is False for a call not
    made because the function had timed out too often before.)"""

    def __init__(self, seconds: float, function: str = "", *, called: bool = True):
        self.seconds = seconds
        self.function = function
        self.called = called
        super().__init__(f"{_fn(function)} did not return within {seconds:g} s (an endless loop?) "
                         f"and was stopped.")


class ChildCrashed(StudentCodeError):
    """The process running the notebook died during the call (signal, os._exit, limit)."""

    def __init__(self, reason: str, function: str = "", detail: str = ""):
        self.reason = reason
        self.function = function
        during = f" while running `{function}`" if function else ""
        super().__init__(f"The process running your notebook stopped{during}: {reason}.",
                         detail=(f"{reason}\n{detail}" if detail else ""))


class FunctionMissing(StudentCodeError):
    """No such name in the notebook's namespace after its cells ran. Its sentence has no brackets of
    its own: checks that needed the function quote it in theirs ("which failed on its inputs (...)")."""

    def __init__(self, name: str, magic: str = "", cell: str = "", *, unrun: bool = False):
        self.name = name
        self.magic = magic      # the cell magic that made the sandbox skip `cell`, which defines `name`
        if unrun:               # `cell` was not run: the notebook reached its time limit before it
            text = (f"`{name}` is not defined in your notebook: {cell}, which defines it, was not run, as your "
                    f"notebook reached its time limit before it; make the cells above it faster.")
        elif not magic:
            text = f"`{name}` is not defined in your notebook; perhaps it was renamed, or its cell failed."
        elif magic == "%%timeit":
            text = (f"`{name}` is not defined in your notebook: {cell}, which defines it, starts with the cell "
                    f"magic `%%timeit`, which keeps none of the cell's definitions, as in Jupyter; remove the "
                    f"`%%timeit` line.")
        else:
            text = (f"`{name}` is not defined in your notebook: {cell}, which defines it, starts with the cell "
                    f"magic `{magic}`, so its body does not run as Python in your notebook, as in Jupyter; "
                    f"remove the `{magic}` line.")
        super().__init__(text)


class NotCallable(StudentCodeError):
    """The name exists but is not a function."""

    def __init__(self, name: str, type_name: str = ""):
        self.name = name
        self.type_name = type_name
        what = with_article(type_name) if type_name else "a value"
        super().__init__(f"`{name}` in your notebook is {what}, not a function "
                         f"(was the name reused for a value later in the notebook?)")


class BadReturnValue(StudentCodeError):
    """The returned value is outside the plain data the grader accepts."""

    def __init__(self, description: str, function: str = ""):
        self.description = description
        self.function = function
        super().__init__(f"{_fn(function)} returned {description}.")


class NotebookFailed(StudentCodeError):
    """The notebook itself could not be run to the end, so no function can be called."""

    def __init__(self, reason: str, detail: str = ""):
        self.reason = reason
        super().__init__(f"Your notebook could not be run ({reason}), so its functions could not be tested.",
                         detail=detail)


class TimeBudgetExceeded(StudentCodeError):
    """The submission's wall-clock budget (notebook, restarts and calls together) ran out."""

    def __init__(self, seconds: float, function: str = ""):
        self.seconds = seconds
        self.function = function
        super().__init__(f"Grading your notebook took longer than the {seconds:g} s allowed per submission "
                         f"(functions that hang or are very slow?), so this check was not run to the end.")


class SandboxError(Exception):
    """The sandbox itself failed (the grader's side, not the student's): it could not start a
    process, or a process that never ran student code broke the protocol."""
