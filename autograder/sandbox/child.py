"""The sandboxed child: runs a notebook's code cells, then answers calls from the trusted side.

Started by `autograder.sandbox.launcher` as a fresh interpreter:

    python -s -P -m autograder.sandbox.child --fd N

with N a stream socket shared with the trusted process. It imports only the standard library,
numpy and `autograder.sandbox.protocol`.

Messages (see `protocol`):
  in:  {"op": "run", "cells": [{"index", "source"}, ...]}     once, first
  out: {"op": "cell_start", "index"} and {"op": "cell_done", ...} per cell, then {"op": "ready"}
  in:  {"op": "call", "name", "args", "kwargs", "substitutes"} -> out {"op": "result", ...} or
       {"op": "error", "kind": missing | not_callable | raised | bad_return, ...}
       During a call, a substituted name is a stub that sends {"op": "callback", "name", "args",
       "kwargs"} and waits for {"op": "result", "value"} or {"op": "error", "type", "message"}.
  in:  {"op": "ping"} -> {"op": "pong"};  {"op": "quit"} or end of stream: exit.

Student code shares this process, so nothing here trusts the notebook's namespace or the modules
it can reach: the functions this file uses are bound privately at import, and builtins are looked
up in a private copy. (Code that sets out to subvert the child can only change what its own
functions appear to return; the trusted side treats every reply as untrusted data.)
"""
from __future__ import annotations

import builtins as _builtins_module

__builtins__ = dict(vars(_builtins_module))

import faulthandler
import inspect
import io
import linecache
import os
import socket
import sys
import time
import traceback
import warnings

import numpy as np

from autograder.sandbox import protocol

STDOUT_LIMIT = 64 * 1024          # characters kept per cell or call (head and tail)
MESSAGE_LIMIT = 2000              # characters of an exception message
MAX_WARNINGS = 20
SNAPSHOT_DEPTH = 8                # how deep argument containers are searched for arrays

_perf = time.perf_counter
_exec = exec
_compile = compile
_catch_warnings = warnings.catch_warnings
_simplefilter = warnings.simplefilter
_errstate = np.errstate
_ndarray = np.ndarray
_signature = inspect.signature
_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL
_VAR_KEYWORD = inspect.Parameter.VAR_KEYWORD
_dict_get = dict.get
_dict_pop = dict.pop
_os_exit = os._exit
_os_write = os.write
_EncodeError = protocol.EncodeError
_TRUSTED_CAPS = protocol.TRUSTED_CAPS
_MISSING = object()
_LIVE_BUILTINS = vars(_builtins_module)


class _BuiltinsGuard:
    """Student code may rebind builtins (`builtins.isinstance = ...`), which the standard library
    (json, socket) would then use inside our protocol code. The student's version of the builtins
    module is in place only while student code runs; ours is put back in between."""

    def __init__(self) -> None:
        self.pristine = dict(_LIVE_BUILTINS)
        self.student: dict | None = None

    def _swap_to(self, state: dict) -> None:
        for key in [k for k in _LIVE_BUILTINS if k not in state]:
            del _LIVE_BUILTINS[key]
        _LIVE_BUILTINS.update(state)

    def student_code(self) -> None:
        """Before running student code: their builtins, as they last left them."""
        if self.student is not None:
            self._swap_to(self.student)

    def our_code(self) -> None:
        """After student code: remember their builtins if changed, and restore ours."""
        live = _LIVE_BUILTINS
        changed = len(live) != len(self.pristine) or any(
            live.get(k, _MISSING) is not v for k, v in self.pristine.items())
        self.student = dict(live) if changed else None
        if changed:
            self._swap_to(self.pristine)


_BUILTIN_EXCEPTIONS = {name: obj for name, obj in vars(_builtins_module).items()
                       if isinstance(obj, type) and issubclass(obj, Exception)}


def _safe_str(obj: object, limit: int = MESSAGE_LIMIT) -> str:
    try:
        text = str(obj)
    except BaseException:  # noqa: BLE001 - a student's __str__ may raise anything
        text = "<the message could not be shown>"
    if type(text) is not str:
        text = "<the message could not be shown>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_name(obj: object) -> str:
    name = getattr(type(obj), "__name__", "object")
    return name[:100] if type(name) is str else "object"


class _Capture(io.TextIOBase):
    """A bounded text sink for sys.stdout/sys.stderr: keeps the head and the tail."""

    def __init__(self, limit: int = STDOUT_LIMIT):
        super().__init__()
        self._half = limit // 2
        self._head: list[str] = []
        self._head_n = 0
        self._tail: list[str] = []
        self._tail_n = 0
        self._dropped = 0

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return "utf-8"

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {_type_name(s)}")
        n = len(s)
        if self._head_n < self._half:
            take = s[: self._half - self._head_n]
            self._head.append(take)
            self._head_n += len(take)
            s = s[len(take):]
        if s:
            self._tail.append(s)
            self._tail_n += len(s)
            if self._tail_n > 2 * self._half:
                joined = "".join(self._tail)
                cut = len(joined) - self._half
                self._dropped += cut
                self._tail = [joined[cut:]]
                self._tail_n = self._half
        return n

    def flush(self) -> None:
        pass

    def getvalue(self) -> str:
        tail = "".join(self._tail)
        dropped = self._dropped + max(0, len(tail) - self._half)
        tail = tail[-self._half:] if len(tail) > self._half else tail
        middle = f"\n[... {dropped} characters of output dropped ...]\n" if dropped else ""
        return "".join(self._head) + middle + tail


class _NoIPython:
    """What `get_ipython()` returns here: every method does nothing, returns None, and is noted."""

    def __init__(self, runner: _Runner):
        self._runner = runner

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)

        def method(*args, **kwargs):
            self._runner.note(f"`get_ipython().{name}(...)` did nothing (the grader does not run IPython)")
            return None
        return method


def _display(*objs, **kwargs) -> None:
    """Stands in for IPython's display(): prints each object's repr."""
    for obj in objs:
        print(repr(obj))


# --------------------------------------------------------------------------- cells

def _strip_magics(index: int, source: str) -> tuple[str, list[str]]:
    """Replace IPython `%line` magics, `!shell` lines and `x?` help lines by `pass`."""
    notes = []
    out = []
    for line in source.split("\n"):
        body = line.lstrip()
        indent = line[: len(line) - len(body)]
        shown = body.strip()[:80]
        if body.startswith("%"):
            notes.append(f"cell {index}: skipped IPython magic `{shown}`")
            out.append(indent + "pass")
        elif body.startswith("!"):
            notes.append(f"cell {index}: skipped shell command `{shown}`")
            out.append(indent + "pass")
        elif body.rstrip().endswith("?") and body.rstrip().rstrip("?").replace(".", "").isidentifier():
            notes.append(f"cell {index}: skipped IPython help `{shown}`")
            out.append(indent + "pass")
        else:
            out.append(line)
    return "\n".join(out), notes


class _Runner:
    def __init__(self, chan: protocol.Channel):
        self.chan = chan
        self.sources: dict[str, list[str]] = {}
        self._notes: list[str] | None = None
        self._cell = -1
        ipython = _NoIPython(self)
        self.ns: dict = {
            "__name__": "__main__",
            "__doc__": None,
            "__builtins__": _builtins_module,
            "get_ipython": lambda: ipython,
            "display": _display,
        }
        self._sink = _Capture(1024)     # stdout/stderr outside cells and calls
        self.guard = _BuiltinsGuard()

    def note(self, text: str) -> None:
        if self._notes is not None:
            full = f"cell {self._cell}: {text}"
            if full not in self._notes:
                self._notes.append(full)

    # ---- where things happened
    def _line(self, filename: str, lineno: int) -> str:
        lines = self.sources.get(filename)
        text = lines[lineno - 1].strip()[:120] if lines and 0 < lineno <= len(lines) else ""
        place = f"{filename[1:-1]}, line {lineno}"
        return f"{place}: `{text}`" if text else place

    def _cell_frames(self, tb) -> list[str]:
        out = []
        while tb is not None:
            filename = tb.tb_frame.f_code.co_filename
            if type(filename) is str and filename.startswith("<cell "):
                out.append(self._line(filename, tb.tb_lineno))
            tb = tb.tb_next
        return out

    def _register(self, filename: str, source: str) -> None:
        lines = source.split("\n")
        self.sources[filename] = lines
        linecache.cache[filename] = (len(source), None, [ln + "\n" for ln in lines], filename)

    # ---- running cells
    def _prepare(self, index: int, source: str):
        """(code or None, notes, error dict or None). None code and no error: skip the cell."""
        filename = f"<cell {index}>"
        notes: list[str] = []
        first = next((ln.strip() for ln in source.split("\n") if ln.strip()), "")
        if first.startswith("%%"):
            magic = first.split()[0]
            if magic not in ("%%time", "%%capture"):
                return None, [f"cell {index}: skipped: it starts with the cell magic `{first[:80]}`"], None
            lines = source.split("\n")
            at = next(i for i, ln in enumerate(lines) if ln.strip())
            lines[at] = ""
            source = "\n".join(lines)
            notes.append(f"cell {index}: ran the cell without its `{magic}` line")
        try:
            code = _compile(source, filename, "exec", dont_inherit=True)
        except SyntaxError as first_error:
            stripped, more = _strip_magics(index, source)
            if not more:
                return None, notes, self._syntax_error(first_error, filename, source)
            notes.extend(more)
            source = stripped
            try:
                code = _compile(source, filename, "exec", dont_inherit=True)
            except SyntaxError as exc:
                return None, notes, self._syntax_error(exc, filename, source)
            except Exception as exc:  # noqa: BLE001 - null bytes, too deeply nested, ...
                return None, notes, {"error_type": _type_name(exc), "message": _safe_str(exc), "where": ""}
        except Exception as exc:  # noqa: BLE001
            return None, notes, {"error_type": _type_name(exc), "message": _safe_str(exc), "where": ""}
        self._register(filename, source)
        return code, notes, None

    def _syntax_error(self, exc: SyntaxError, filename: str, source: str) -> dict:
        self._register(filename, source)
        where = self._line(filename, exc.lineno) if isinstance(exc.lineno, int) else ""
        return {"error_type": _type_name(exc), "message": _safe_str(exc.msg), "where": where.split(", ", 1)[-1]}

    def run_cell(self, index: int, source: str) -> dict:
        started = _perf()
        self._cell = index
        self._notes = []
        code, notes, error = self._prepare(index, source)
        self._notes[:0] = notes
        out = {"op": "cell_done", "index": index, "status": "ok", "error_type": "", "message": "",
               "where": "", "stdout": ""}
        if error is not None:
            out.update(status="error", **error)
        elif code is None:
            out["status"] = "skipped"
        else:
            capture = _Capture()
            sys.stdout = sys.stderr = capture
            try:
                self.guard.student_code()
                try:
                    _exec(code, self.ns)
                finally:
                    self.guard.our_code()
            except BaseException as exc:  # noqa: BLE001 - SystemExit from exit() included
                frames = self._cell_frames(exc.__traceback__)
                where = frames[-1] if frames else ""
                if where.startswith(f"cell {index}, "):
                    where = where[len(f"cell {index}, "):]
                out.update(status="error", error_type=_type_name(exc), message=_safe_str(exc), where=where)
            finally:
                sys.stdout = sys.stderr = self._sink
            out["stdout"] = capture.getvalue()
        out["notes"] = list(self._notes)
        out["seconds"] = _perf() - started
        self._notes = None
        return out

    def run_cells(self, cells: list) -> None:
        for cell in cells:
            index = _dict_get(cell, "index")
            source = _dict_get(cell, "source")
            if type(index) is not int or type(source) is not str:
                continue
            self.chan.send({"op": "cell_start", "index": index})
            self.chan.send(self.run_cell(index, source), caps=_TRUSTED_CAPS)

    # ---- calls
    def serve(self) -> None:
        while True:
            try:
                msg = self.chan.recv(trusted=False)
            except EOFError:
                return
            op = msg["op"]
            if op == "quit":
                return
            if op == "ping":
                self.chan.send({"op": "pong"})
            elif op == "call":
                self.chan.send_frame(self._framed(self.call(msg)))
            else:
                self.chan.send({"op": "error", "kind": "protocol", "message": f"unknown op {op[:40]!r}"})

    @staticmethod
    def _framed(reply: dict) -> bytes:
        """The reply, framed; a value outside the plain set becomes a bad_return error."""
        try:
            return protocol.frame(reply, caps=_TRUSTED_CAPS)
        except _EncodeError as exc:
            path = exc.path[len("['value']"):] if exc.path.startswith("['value']") else exc.path
            what = exc.what if not path else f"a value whose element {path} is {exc.what}"
            return protocol.frame({"op": "error", "kind": "bad_return", "description": what,
                                   "stdout": _dict_get(reply, "stdout", "")})

    def call(self, msg: dict) -> dict:
        name = _dict_get(msg, "name")
        args = _dict_get(msg, "args") or []
        kwargs = _dict_get(msg, "kwargs") or {}
        substitutes = _dict_get(msg, "substitutes") or []
        func = _dict_get(self.ns, name, _MISSING)
        if func is _MISSING:
            return {"op": "error", "kind": "missing", "name": name}
        if not callable(func):
            return {"op": "error", "kind": "not_callable", "name": name, "type": _type_name(func)}
        snapshots = _snapshot(_named_arguments(func, args, kwargs))
        saved = {}
        for sub in substitutes:
            saved[sub] = _dict_get(self.ns, sub, _MISSING)
            self.ns[sub] = self._stub(sub)
        capture = _Capture()
        sys.stdout = sys.stderr = capture
        error = None
        value = None
        started = _perf()
        try:
            with _catch_warnings(record=True) as caught:
                _simplefilter("always")
                with _errstate(divide="warn", over="warn", invalid="warn", under="ignore"):
                    try:
                        self.guard.student_code()
                        try:
                            value = func(*args, **kwargs)
                        finally:
                            self.guard.our_code()
                    except BaseException as exc:  # noqa: BLE001
                        error = {"op": "error", "kind": "raised", "type": _type_name(exc),
                                 "message": _safe_str(exc), "where": self._cell_frames(exc.__traceback__)[-10:]}
            seconds = _perf() - started
        finally:
            sys.stdout = sys.stderr = self._sink
            for sub, original in saved.items():
                if original is _MISSING:
                    _dict_pop(self.ns, sub, None)
                else:
                    self.ns[sub] = original
        if error is not None:
            error["stdout"] = capture.getvalue()
            return error
        return {"op": "result", "value": value, "warnings": self._warnings(caught),
                "mutated": _mutated(snapshots), "seconds": seconds, "stdout": capture.getvalue()}

    def _warnings(self, caught: list) -> list[str]:
        out: list[str] = []
        for w in caught:
            category = getattr(w.category, "__name__", "Warning")
            text = f"{category}: {_safe_str(w.message, 300)}"
            filename = w.filename
            if type(filename) is str and filename.startswith("<cell ") and type(w.lineno) is int:
                text += f" ({filename[1:-1]}, line {w.lineno})"
            if text not in out:
                out.append(text)
            if len(out) >= MAX_WARNINGS:
                break
        return out

    def _stub(self, name: str):
        chan = self.chan

        guard = self.guard

        def stub(*args, **kwargs):
            guard.our_code()
            try:
                chan.send({"op": "callback", "name": name, "args": list(args), "kwargs": kwargs},
                          caps=_TRUSTED_CAPS)
                reply = chan.recv(trusted=False)
            except _EncodeError as exc:
                raise TypeError(f"{name}() can only be given numbers and plain numpy arrays here; "
                                f"it got {exc.what}") from None
            finally:
                guard.student_code()
            if reply["op"] == "result":
                return _dict_get(reply, "value")
            exc_type = _BUILTIN_EXCEPTIONS.get(_dict_get(reply, "type"), RuntimeError)
            message = _dict_get(reply, "message") or ""
            try:
                error = exc_type(message)
            except Exception:  # noqa: BLE001 - types like UnicodeDecodeError need more arguments
                error = RuntimeError(message)
            raise error

        stub.__name__ = stub.__qualname__ = name
        return stub


# --------------------------------------------------------------------------- arguments

def _named_arguments(func, args: list, kwargs: dict) -> list[tuple[str, object]]:
    """(name, value) per argument, named after the student's parameters where possible."""
    try:
        sig = _signature(func)
        bound = sig.bind_partial(*args, **kwargs)
        out = []
        for name, value in bound.arguments.items():
            kind = sig.parameters[name].kind
            if kind == _VAR_POSITIONAL:
                out.extend((f"{name}[{i}]", v) for i, v in enumerate(value))
            elif kind == _VAR_KEYWORD:
                out.extend(value.items())
            else:
                out.append((name, value))
        return out
    except Exception:  # noqa: BLE001 - no signature, or arguments that do not fit it
        return [(f"argument {i + 1}", v) for i, v in enumerate(args)] + list(kwargs.items())


def _snapshot(named: list[tuple[str, object]]) -> list[tuple]:
    out: list[tuple] = []

    def visit(path: str, value: object, depth: int) -> None:
        t = type(value)
        if t is _ndarray:
            out.append((path, value, value.shape, value.dtype.str, value.tobytes()))
        elif depth < SNAPSHOT_DEPTH and (t is list or t is tuple):
            if t is list:
                out.append((path, value, len(value), None, [id(v) for v in value]))
            for i, v in enumerate(value):
                visit(f"{path}[{i}]", v, depth + 1)
        elif depth < SNAPSHOT_DEPTH and t is dict:
            out.append((path, value, len(value), None, [(k, id(v)) for k, v in value.items()]))
            for k, v in value.items():
                visit(f"{path}[{k!r}]", v, depth + 1)

    for name, value in named:
        visit(name, value, 0)
    return out


def _mutated(snapshots: list[tuple]) -> list[str]:
    out = []
    for path, value, shape, dtype, data in snapshots:
        if dtype is None:   # list or dict: same length and the same objects in it
            now = [(k, id(v)) for k, v in value.items()] if type(value) is dict else [id(v) for v in value]
            changed = len(value) != shape or now != data
        else:
            changed = value.shape != shape or value.dtype.str != dtype or value.tobytes() != data
        if changed:
            out.append(path)
    return out


# --------------------------------------------------------------------------- entry point

def _isolate_std_streams() -> int:
    """fd 0/1/2 to /dev/null, so nothing the student writes reaches the protocol socket; fatal
    errors (segfault tracebacks) still go to the launcher's log via a private copy of fd 2,
    which is returned."""
    log = os.dup(2)
    faulthandler.enable(file=log, all_threads=False)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    return log


def main(argv: list[str]) -> int:
    fd = int(argv[argv.index("--fd") + 1])
    chan = protocol.Channel(socket.socket(fileno=fd))
    log = _isolate_std_streams()
    try:
        return _serve(chan)
    except BaseException:  # noqa: BLE001 - an error of this file: leave a trace for the instructor
        _os_write(log, traceback.format_exc().encode("utf-8", "replace")[-8000:])
        return 70


def _serve(chan: protocol.Channel) -> int:
    runner = _Runner(chan)
    sys.stdout = sys.stderr = runner._sink
    sys.argv = [""]
    request = chan.recv(trusted=False)
    if request["op"] != "run":
        return 2
    runner.run_cells(_dict_get(request, "cells") or [])
    chan.send({"op": "ready"})
    runner.serve()
    return 0


if __name__ == "__main__":
    _os_exit(main(sys.argv[1:]))
