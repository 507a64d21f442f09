"""Inside the sandbox: runs a notebook's code cells, then answers calls from the trusted side.

Used by the zygote (`autograder.sandbox.zygote`): the template process runs the notebook with a
`Runner`, then forks one problem process per problem, each serving calls on its own socket.
Imports only the standard library, numpy and `autograder.sandbox.protocol`.

Messages (see `protocol`), on the template's socket:
  in:  {"op": "run", "cells": [{"index", "label", "source"}, ...], "more", "output_chars",
        "return_bytes", "header_bytes"}
  out: {"op": "cell_start", "index"} and {"op": "cell_done", ...} per cell; with "more" true, then
       {"op": "more"} -> in {"op": "cells", "cells": [...], "more"}, and so on; then {"op": "ready"}
  then single-byte requests (see protocol.FORK_REQUEST):
  in:  one file descriptor (send_fds): a new problem process serves it
  in:  REAP_REQUEST and a pid (4 bytes) -> out {"op": "reaped", "code"}: how a problem process ended
and on a problem process's socket:
  out: {"op": "hello", "pid"}
  in:  {"op": "call", "name", "args", "kwargs"} -> out {"op": "result", ...} or
       {"op": "error", "kind": missing | not_callable | raised | bad_return, ...}
  in:  {"op": "calls", "calls": [{"name", "args", "kwargs"}, ...], "stop"} -> one reply per call, in
       order; with "stop" true, none after the first error (as calls made one by one until one fails)

Student code shares this process, so nothing here trusts the notebook's namespace or the modules
it can reach: the functions this file uses are bound privately at import, and builtins are looked
up in a private copy. (Code that sets out to subvert this process can only change what its own
functions appear to return; the trusted side treats every reply as untrusted data.)
"""
from __future__ import annotations

import _socket
import builtins as _builtins_module

__builtins__ = dict(vars(_builtins_module))  # type: ignore[assignment]

import ctypes
import inspect
import io
import linecache
import operator
import os
import sys
import time
import types
import warnings
from typing import TYPE_CHECKING

import numpy as np

from autograder.sandbox import protocol
from autograder.text import code_excerpt as _code_excerpt
from autograder.text import truncate as _truncate

if TYPE_CHECKING:       # annotations only: nothing more is imported into the sandboxed process
    from collections.abc import Callable
    from types import CodeType, TracebackType
    from typing import Any

OUTPUT_CHARS = 8 * 1024           # default characters of output kept per cell or call (head and tail)
MESSAGE_LIMIT = 2000              # characters of an exception message
MAX_WARNINGS = 20
MAX_COMPILE_WARNINGS = 3          # compile-time warnings noted per cell (the rest counted in one more note)
MAX_COMPILE_NOTES = 20            # and per notebook
SNAPSHOT_DEPTH = 8                # how deep argument containers are searched for arrays
WARM_UP_ROUNDS = 12               # call requests (one-by-one and batched) in `warm_up`

_perf = time.perf_counter
_exec = exec
_compile = compile
_catch_warnings = warnings.catch_warnings
_simplefilter = warnings.simplefilter
# What compiling a cell may warn about its source: `x is "literal"`, an invalid escape sequence ("\\d",
# a SyntaxWarning from Python 3.12, a DeprecationWarning before), `assert (x, "message")`, ...
_COMPILE_WARNINGS = (SyntaxWarning, DeprecationWarning)
_errstate = np.errstate
_ndarray = np.ndarray
_signature = inspect.signature
_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL
_VAR_KEYWORD = inspect.Parameter.VAR_KEYWORD
_dict_get = dict.get
_EncodeError = protocol.EncodeError
_Caps = protocol.Caps
_TRUSTED_CAPS = protocol.TRUSTED_CAPS
_MISSING = object()
_LIVE_BUILTINS = vars(_builtins_module)
_map = map
_is_not = operator.is_not
_itemgetter = operator.itemgetter
_FunctionType = types.FunctionType
_CodeType = types.CodeType
_sock_recvmsg = _socket.socket.recvmsg
_sock_recv = _socket.socket.recv
_sock_settimeout = _socket.socket.settimeout
_SOL_SOCKET = _socket.SOL_SOCKET
_SCM_RIGHTS = _socket.SCM_RIGHTS
_FD_SPACE = _socket.CMSG_SPACE(2 * 4)   # room for two descriptors: one more than a request carries
_FORK_REQUEST = protocol.FORK_REQUEST
_REAP_REQUEST = protocol.REAP_REQUEST
_os_close = os.close
_int_from_bytes, _byteorder = int.from_bytes, sys.byteorder


def _unpack_fds(payload: bytes) -> list[int]:
    n = len(payload) // 4
    return [int.from_bytes(payload[i * 4:i * 4 + 4], sys.byteorder, signed=True) for i in range(n)]


def _recv_exactly(sock: _socket.socket, n: int) -> bytes | None:
    """`n` bytes from a blocking socket (None when the other end closed first)."""
    got = b""
    while len(got) < n:
        part = _sock_recv(sock, n - len(got))
        if not part:
            return None
        got += part
    return got


def _version_of(d: dict[str, Any]) -> ctypes.c_uint64 | None:
    """The version tag CPython keeps in a dict (PEP 509: a new value whenever an item is added,
    removed or replaced by another object), read in place; None unless this interpreter is seen
    to keep it where it is looked for (after the reference count, type and item count) and to
    change it on each of those edits of a probe dict. Student code could write the tag back
    through ctypes, as it could rewrite any memory of its own process: the guard is there for
    builtins rebound by ordinary code, and no verdict rests on this process's word."""
    if sys.implementation.name != "cpython":
        return None
    word = ctypes.sizeof(ctypes.c_ssize_t)
    probe: dict[str, Any] = {"a": 1}
    used = ctypes.c_ssize_t.from_address(id(probe) + 2 * word)
    tag = ctypes.c_uint64.from_address(id(probe) + 3 * word)
    seen = [tag.value]
    for edit in (lambda: probe.__setitem__("a", 2), lambda: probe.__setitem__("b", 3), lambda: probe.pop("a")):
        edit()
        if used.value != len(probe) or tag.value in seen:
            return None
        seen.append(tag.value)
    if ctypes.c_ssize_t.from_address(id(d) + 2 * word).value != len(d):
        return None
    return ctypes.c_uint64.from_address(id(d) + 3 * word)


class _BuiltinsGuard:
    """Student code may rebind builtins (`builtins.isinstance = ...`), which the standard library
    (json, socket) would then use inside our protocol code. The student's version of the builtins
    module is in place only while student code runs; ours is put back in between."""

    def __init__(self) -> None:
        self.pristine = dict(_LIVE_BUILTINS)
        self.student: dict[str, Any] | None = None
        # The same comparison as `live.get(k, _MISSING) is not v` for every pristine item, run
        # in C: one itemgetter fetches the live values of all pristine names (KeyError when one
        # was deleted), map() compares them by identity.
        self._keys = tuple(self.pristine)
        self._values = tuple(self.pristine.values())
        self._fetch = _itemgetter(*self._keys)
        # Where the interpreter keeps a version of the builtins dict, a look at it tells whether
        # anything changed since ours were last in place, without the comparison above: that
        # fetches every builtin and so writes the reference count of each, and in a fresh problem
        # process the pages holding them are copied on the first call (about 20 pages).
        self._version = _version_of(_LIVE_BUILTINS)
        self._seen = self._version.value if self._version is not None else 0

    def _swap_to(self, state: dict[str, Any]) -> None:
        for key in [k for k in _LIVE_BUILTINS if k not in state]:
            del _LIVE_BUILTINS[key]
        _LIVE_BUILTINS.update(state)

    def student_code(self) -> None:
        """Before running student code: their builtins, as they last left them."""
        if self.student is not None:
            self._swap_to(self.student)

    def our_code(self) -> None:
        """After student code: remember their builtins if changed, and restore ours."""
        version = self._version
        if version is not None and version.value == self._seen:
            return                  # untouched since ours were put back (and theirs were not swapped in)
        live = _LIVE_BUILTINS
        changed = len(live) != len(self._keys)
        if not changed:
            try:
                changed = any(_map(_is_not, self._fetch(live), self._values))
            except KeyError:
                changed = True
        self.student = dict(live) if changed else None
        if changed:
            self._swap_to(self.pristine)
        if version is not None:
            self._seen = version.value


def _safe_str(obj: object, limit: int = MESSAGE_LIMIT) -> str:
    try:
        text = str(obj)
    except BaseException:  # noqa: BLE001 - a student's __str__ may raise anything
        text = "<the message could not be shown>"
    if type(text) is not str:
        text = "<the message could not be shown>"
    return _truncate(text, limit)


def _type_name(obj: object) -> str:
    name = getattr(type(obj), "__name__", "object")
    return name[:100] if type(name) is str else "object"


class _Capture(io.TextIOBase):
    """A bounded text sink for sys.stdout/sys.stderr: keeps the head and the tail."""

    def __init__(self, limit: int = OUTPUT_CHARS):
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
    def encoding(self) -> str:  # type: ignore[override]  # read-only here, as on sys.stdout
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

    def __init__(self, runner: Runner):
        self._runner = runner

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("__"):
            raise AttributeError(name)

        def method(*args: Any, **kwargs: Any) -> None:
            self._runner.note(f"`get_ipython().{name}(...)` did nothing (the grader does not run IPython)")
            return None
        return method


def _exit(code: object = None) -> None:
    """What `exit()` and `quit()` do in a notebook: raise SystemExit (the cell ends with it)."""
    raise SystemExit(code)


def _display(*objs: Any, **kwargs: Any) -> None:
    """Stands in for IPython's display(): prints each object's repr."""
    for obj in objs:
        print(repr(obj))


# --------------------------------------------------------------------------- cells

def _strip_magics(label: str, source: str) -> tuple[str, list[str]]:
    """Replace IPython `%line` magics, `!shell` lines and `x?` help lines by `pass`."""
    notes = []
    out = []
    for line in source.split("\n"):
        body = line.lstrip()
        indent = line[: len(line) - len(body)]
        shown = _code_excerpt(body, 80)
        if body.startswith("%"):
            notes.append(f"{label}: skipped IPython magic `{shown}`")
            out.append(indent + "pass")
        elif body.startswith("!"):
            notes.append(f"{label}: skipped shell command `{shown}`")
            out.append(indent + "pass")
        elif body.rstrip().endswith("?") and body.rstrip().rstrip("?").replace(".", "").isidentifier():
            notes.append(f"{label}: skipped IPython help `{shown}`")
            out.append(indent + "pass")
        else:
            out.append(line)
    return "\n".join(out), notes


class Runner:
    """The notebook's namespace and how to run cells in it and call its functions."""

    def __init__(self, chan: protocol.Channel):
        self.chan = chan
        self.sources: dict[str, list[str]] = {}
        self.labels: dict[str, str] = {}              # "<cell 7>" -> "the 3rd code cell (`def f`)"
        self.output_chars = OUTPUT_CHARS
        self.reply_caps = _TRUSTED_CAPS
        self._notes: list[str] | None = None
        self._label = ""
        self._compile_notes = 0                       # compile-time warnings noted so far (MAX_COMPILE_NOTES)
        ipython = _NoIPython(self)
        self.ns: dict[str, Any] = {
            "__name__": "__main__",
            "__doc__": None,
            "__builtins__": _builtins_module,
            "get_ipython": lambda: ipython,
            "display": _display,
            "exit": _exit,
            "quit": _exit,
        }
        self._sink = _Capture(1024)     # stdout/stderr outside cells and calls
        self.guard = _BuiltinsGuard()
        sys.stdout = sys.stderr = self._sink

    def note(self, text: str) -> None:
        if self._notes is not None:
            full = f"{self._label}: {text}"
            if full not in self._notes:
                self._notes.append(full)

    # ---- where things happened
    def _line(self, filename: str, lineno: int) -> str:
        lines = self.sources.get(filename)
        text = _code_excerpt(lines[lineno - 1], 120) if lines and 0 < lineno <= len(lines) else ""
        place = f"{self.labels.get(filename, filename[1:-1])}, line {lineno}"
        return f"{place}: `{text}`" if text else place

    def _cell_frames(self, tb: TracebackType | None) -> list[str]:
        out = []
        while tb is not None:
            filename = tb.tb_frame.f_code.co_filename
            if type(filename) is str and filename in self.sources:
                out.append(self._line(filename, tb.tb_lineno))
            tb = tb.tb_next
        return out

    def _register(self, filename: str, label: str, source: str) -> None:
        lines = source.split("\n")
        self.sources[filename] = lines
        self.labels[filename] = label
        linecache.cache[filename] = (len(source), None, [ln + "\n" for ln in lines], filename)

    # ---- running cells
    def _prepare(self, filename: str, label: str,
                 source: str) -> tuple[CodeType | None, list[str], dict[str, Any] | None]:
        """(code or None, notes, error dict or None). None code and no error: skip the cell."""
        notes: list[str] = []
        first = next((ln.strip() for ln in source.split("\n") if ln.strip()), "")
        if first.startswith("%%"):
            magic = first.split()[0]
            if magic not in ("%%time", "%%capture"):      # as cellplan.RUN_CELL_MAGICS
                why = ("which keeps none of the cell's definitions" if magic == "%%timeit" else
                       "so none of the cell runs as Python in your notebook")
                return None, [f"{label}: skipped: it starts with the cell magic `{_code_excerpt(first, 80)}`, "
                              f"{why}, as in Jupyter; if the cell defines a function to be graded, remove "
                              f"the `{_code_excerpt(magic, 40)}` line"], None
            lines = source.split("\n")
            at = next(i for i, ln in enumerate(lines) if ln.strip())
            lines[at] = ""
            source = "\n".join(lines)
            notes.append(f"{label}: ran the cell without its `{magic}` line")
        try:
            code = self._compile_noting(source, filename, label, notes)
        except SyntaxError as first_error:
            stripped, more = _strip_magics(label, source)
            if not more:
                return None, notes, self._syntax_error(first_error, filename, label, source)
            notes.extend(more)
            source = stripped
            try:
                code = self._compile_noting(source, filename, label, notes)
            except SyntaxError as exc:
                return None, notes, self._syntax_error(exc, filename, label, source)
            except Exception as exc:  # noqa: BLE001 - null bytes, too deeply nested, ...
                return None, notes, {"error_type": _type_name(exc), "message": _safe_str(exc), "where": ""}
        except Exception as exc:  # noqa: BLE001
            return None, notes, {"error_type": _type_name(exc), "message": _safe_str(exc), "where": ""}
        self._register(filename, label, source)
        return code, notes, None

    def _compile_noting(self, source: str, filename: str, label: str, notes: list[str]) -> CodeType:
        """`compile(source)`, with each warning compiling gave about the source added to `notes`
        ("<label>: SyntaxWarning: "is" with a literal. Did you mean "=="? — line 3: `if norm is "ln":`"):
        Jupyter shows such a warning once above the cell's output, where it is easily missed, and
        code like `x is "literal"` can work there (interned strings) and not here. At most
        MAX_COMPILE_WARNINGS per cell and MAX_COMPILE_NOTES per notebook; the compiled code, and a
        SyntaxError, are what compile gives. A notebook that made some warning an error (`warnings.
        simplefilter("error")`) compiles as it did, its warnings then not noted: as in Jupyter, the
        cell's warning may be a SyntaxError."""
        filters = getattr(warnings, "filters", None)
        if type(filters) is not list or not all(type(f) is tuple and f and type(f[0]) is str and f[0] != "error"
                                                for f in filters):
            return _compile(source, filename, "exec", dont_inherit=True)
        with _catch_warnings(record=True) as caught:
            for category in _COMPILE_WARNINGS:
                _simplefilter("always", category)
            code = _compile(source, filename, "exec", dont_inherit=True)
        found: list[str] = []
        try:
            self._compile_warnings(caught, source, filename, label, found)
        except Exception:  # noqa: BLE001 - a warnings module the notebook replaced: the cell runs without notes
            pass
        room = max(0, MAX_COMPILE_NOTES - self._compile_notes)
        shown = found[:min(MAX_COMPILE_WARNINGS, room)]
        if len(found) > len(shown) and room > len(shown):
            shown.append(f"{label}: more compile-time warnings like these, not shown")
        self._compile_notes += len(shown)
        notes.extend(shown)
        return code

    @staticmethod
    def _compile_warnings(caught: Any, source: str, filename: str, label: str, found: list[str]) -> None:
        """One note per distinct warning in `caught` about the cell `filename`, added to `found`."""
        lines = source.split("\n")
        for w in caught or ():
            category = getattr(w.category, "__name__", "Warning")
            if type(w.filename) is not str or w.filename != filename or type(category) is not str:
                continue
            line = w.lineno if type(w.lineno) is int else 0
            text = _code_excerpt(lines[line - 1], 120) if 0 < line <= len(lines) else ""
            where = f" \u2014 line {line}: `{text}`" if text else (f" \u2014 line {line}" if line else "")
            note = f"{label}: {category[:60]}: {_safe_str(w.message, 200)}{where}"
            if note not in found:
                found.append(note)
            if len(found) > 2 * MAX_COMPILE_WARNINGS:
                break

    def _syntax_error(self, exc: SyntaxError, filename: str, label: str, source: str) -> dict[str, Any]:
        self._register(filename, label, source)
        where = self._line(filename, exc.lineno) if isinstance(exc.lineno, int) else ""
        return {"error_type": _type_name(exc), "message": _safe_str(exc.msg),
                "where": where[len(label) + 2:] if where.startswith(label + ", ") else where}

    def run_cell(self, index: int, label: str, source: str) -> dict[str, Any]:
        started = _perf()
        filename = f"<cell {index}>"
        self._label = label
        self._notes = []
        code, notes, error = self._prepare(filename, label, source)
        self._notes[:0] = notes
        out = {"op": "cell_done", "index": index, "status": "ok", "error_type": "", "message": "",
               "where": "", "stdout": ""}
        if error is not None:
            out.update(status="error", **error)
        elif code is None:
            out["status"] = "skipped"
        else:
            capture = _Capture(self.output_chars)
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
                if where.startswith(f"{label}, "):
                    where = where[len(label) + 2:]
                out.update(status="error", error_type=_type_name(exc), message=_safe_str(exc), where=where)
            finally:
                sys.stdout = sys.stderr = self._sink
            out["stdout"] = capture.getvalue()
        out["notes"] = list(self._notes)
        out["seconds"] = _perf() - started
        self._notes = None
        return out

    def run_notebook(self, settle: Callable[[], bool] | None = None) -> bool:
        """Read the "run" request, run its cells (reporting each), send "ready". False at end of stream,
        or when `settle` (called once the cells have run, before "ready") says this process is not
        to serve the problems."""
        try:
            request = self.chan.recv(trusted=False)
        except EOFError:
            return False
        if request["op"] != "run":
            return False
        chars = _dict_get(request, "output_chars")
        if type(chars) is int and chars >= 0:
            self.output_chars = chars
        limit = _dict_get(request, "return_bytes")
        header = _dict_get(request, "header_bytes")
        if type(limit) is int and limit > 0 and type(header) is int and header > 0:
            self.reply_caps = _Caps(max_bytes=limit, max_header=header)
        # A cell's "cell_done" goes out in one write with the next "cell_start" (or "more"/"ready"):
        # the same moments for the trusted side, half the wake-ups.
        done = b""
        frame = protocol.frame
        while True:
            for cell in _dict_get(request, "cells") or []:
                index = _dict_get(cell, "index")
                label = _dict_get(cell, "label") or f"cell {index}"
                source = _dict_get(cell, "source")
                if type(index) is not int or type(source) is not str or type(label) is not str:
                    continue
                self.chan.send_frame(done + frame({"op": "cell_start", "index": index}))
                done = frame(self.run_cell(index, label, source), caps=_TRUSTED_CAPS)
            if _dict_get(request, "more") is not True:
                break
            self.chan.send_frame(done + frame({"op": "more"}))
            done = b""
            try:
                request = self.chan.recv(trusted=False)
            except EOFError:
                return False
            if request["op"] != "cells":
                return False
        if settle is not None and not settle():
            return False
        self.chan.send_frame(done + frame({"op": "ready"}))
        return True

    def serve_forks(self, fork: Callable[[int], object], reap: Callable[[int], object]) -> None:
        """After the notebook ran: for each descriptor sent (protocol.FORK_REQUEST) call fork(fd),
        which starts a problem process serving it; for protocol.REAP_REQUEST and a pid answer
        {"op": "reaped", "code": reap(pid)} (how that problem process ended, None if unknown).
        Returns at end of stream or on anything else. One system call per fork request, and
        little Python between forks: each fork makes every page of this process copy-on-write
        again, so each page touched here is copied or faulted in anew for every problem."""
        sock = self.chan.sock
        _sock_settimeout(sock, None)                # blocking from here: waits are in recvmsg
        while True:
            try:
                data, ancillary, _, _ = _sock_recvmsg(sock, 1, _FD_SPACE)
            except OSError:
                return
            if data == _FORK_REQUEST and len(ancillary) == 1:
                # the usual request, one descriptor, taken without the list comprehensions below
                # (each a function object made per request)
                level, kind, payload = ancillary[0]
                if level == _SOL_SOCKET and kind == _SCM_RIGHTS and len(payload) == 4:
                    fork(_int_from_bytes(payload, _byteorder, signed=True))
                    continue
            fds = [fd for level, kind, payload in ancillary if level == _SOL_SOCKET and kind == _SCM_RIGHTS
                   for fd in _unpack_fds(payload)]
            if data == _FORK_REQUEST and len(fds) == 1:
                fork(fds[0])
                continue
            for fd in fds:
                _os_close(fd)
            if data != _REAP_REQUEST:
                return                              # end of stream, or out of step
            try:
                raw = _recv_exactly(sock, 4)
            except OSError:
                return
            if raw is None:
                return
            try:
                self.chan.send({"op": "reaped", "code": reap(int.from_bytes(raw, "big"))})
            except OSError:
                return

    # ---- calls
    def serve_calls(self, chan: protocol.Channel) -> None:
        """In a problem process: answer calls on `chan` until the trusted side closes it.
        The socket is made blocking: this process only ever waits for the trusted side (which
        keeps the deadlines), so a read waits in the kernel instead of a failed non-blocking
        try, a Python exception and a poll per message."""
        self.chan = chan
        _sock_settimeout(chan.sock, None)
        chan.send({"op": "hello", "pid": os.getpid()})
        while True:
            try:
                msg = chan.recv(trusted=False)
            except EOFError:
                return
            op = msg["op"]
            if op == "call":
                chan.send_frame(self._framed(self.call(msg))[0])
            elif op == "calls":
                stop = _dict_get(msg, "stop") is True
                for one in _dict_get(msg, "calls") or []:
                    data, answered = self._framed(self.call(one if type(one) is dict else {}))
                    chan.send_frame(data)
                    if stop and not answered:
                        break           # as calls made one by one until the first that fails
            else:
                chan.send({"op": "error", "kind": "protocol", "message": f"unknown op {op[:40]!r}"})

    def _framed(self, reply: dict[str, Any]) -> tuple[bytes, bool]:
        """The reply, framed, and whether it carries a value; a value outside the plain set (or
        over the size cap) becomes a bad_return error."""
        try:
            return protocol.frame(reply, caps=self.reply_caps), reply["op"] == "result"
        except _EncodeError as exc:
            path = exc.path[len("['value']"):] if exc.path.startswith("['value']") else exc.path
            what = exc.what if not path else f"a value whose element {path} is {exc.what}"
            return protocol.frame({"op": "error", "kind": "bad_return", "description": what,
                                   "stdout": _dict_get(reply, "stdout", "")}), False

    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        name = _dict_get(msg, "name")
        args = _dict_get(msg, "args") or []
        kwargs = _dict_get(msg, "kwargs") or {}
        func = _dict_get(self.ns, name, _MISSING) if type(name) is str else _MISSING
        if func is _MISSING:
            return {"op": "error", "kind": "missing", "name": name}
        if not callable(func):
            return {"op": "error", "kind": "not_callable", "name": name, "type": _type_name(func)}
        snapshots = _snapshot(_named_arguments(func, args, kwargs))
        capture = _Capture(self.output_chars)
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
        if error is not None:
            error["stdout"] = capture.getvalue()
            return error
        return {"op": "result", "value": value, "warnings": self._warnings(caught),
                "mutated": _mutated(snapshots), "seconds": seconds, "stdout": capture.getvalue()}

    def _warnings(self, caught: list[Any]) -> list[str]:
        out: list[str] = []
        for w in caught:
            category = getattr(w.category, "__name__", "Warning")
            text = f"{category}: {_safe_str(w.message, 300)}"
            filename = w.filename
            if type(filename) is str and filename in self.sources and type(w.lineno) is int:
                text += f", at {self.labels.get(filename, filename)}, line {w.lineno}"
            if text not in out:
                out.append(text)
            if len(out) >= MAX_WARNINGS:
                break
        return out


# --------------------------------------------------------------------------- arguments

def _named_arguments(func: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """(name, value) per argument, named after the student's parameters where possible."""
    quick = _plain_names(func, args, kwargs)
    if quick is not None:
        return quick
    try:
        sig = _signature(func)
        bound = sig.bind_partial(*args, **kwargs)
        out: list[tuple[str, Any]] = []
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


def _plain_names(func: Any, args: list[Any], kwargs: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """What `_named_arguments` finds, read straight from the code object of a plain function
    given no more positional arguments than it has named parameters and keywords that name
    parameters (the usual call); None for anything else (wrapped functions, *args, ...)."""
    if type(func) is not _FunctionType or "__wrapped__" in func.__dict__ or "__signature__" in func.__dict__:
        return None
    code = func.__code__
    if type(code) is not _CodeType:
        return None
    positional = code.co_argcount
    if len(args) > positional:
        return None
    names = code.co_varnames
    out = list(zip(names, args))
    if kwargs:
        taken = names[:len(args)]
        allowed = names[code.co_posonlyargcount:positional + code.co_kwonlyargcount]
        for key in kwargs:
            if type(key) is not str or key not in allowed or key in taken:
                return None
        # bind_partial lists keyword arguments in the order of the parameters
        out += [(n, kwargs[n]) for n in names[len(args):positional + code.co_kwonlyargcount] if n in kwargs]
    return out


def _snapshot(named: list[tuple[str, Any]]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for name, value in named:
        _visit(out, name, value, 0)
    return out


def _visit(out: list[tuple[Any, ...]], path: str, value: Any, depth: int) -> None:
    """`_snapshot`'s walk (a module function rather than a closure made per call: a fresh problem
    process would write a new function object, and the pages of what it refers to, on its first call)."""
    t = type(value)
    if t is _ndarray:
        out.append((path, value, value.shape, value.dtype.str, value.tobytes()))
    elif depth < SNAPSHOT_DEPTH and (t is list or t is tuple):
        if t is list:
            out.append((path, value, len(value), None, [id(v) for v in value]))
        for i, v in enumerate(value):
            _visit(out, f"{path}[{i}]", v, depth + 1)
    elif depth < SNAPSHOT_DEPTH and t is dict:
        out.append((path, value, len(value), None, [(k, id(v)) for k, v in value.items()]))
        for k, v in value.items():
            _visit(out, f"{path}[{k!r}]", v, depth + 1)


def _mutated(snapshots: list[tuple[Any, ...]]) -> list[str]:
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


# --------------------------------------------------------------------------- warm-up

_WARM_UP_SOURCE = """\
def warm_up(x, w, b, *, scale=1.0, options=None):
    return (x * w + b) * scale, float(x.sum()), [int(x.shape[0]), "ok"]
"""


def warm_up(rounds: int = WARM_UP_ROUNDS) -> int:
    """Run the cell and call path a few times over a local socket pair, in this process (the
    zygote, before it forks). Python 3.11 counts a function's first calls and then rewrites
    its bytecode in place (quickening, specialisation); done once here, every problem process
    inherits code that is already specialised, instead of redoing that work and copying the
    pages it writes. Only this module's own code runs; the process's stdout, stderr and line
    cache are left as they were. Returns how many calls were answered with a result."""
    import numpy

    ours, theirs = _socket.socketpair()
    saved = sys.stdout, sys.stderr
    filename = "<cell 0>"
    answered = 0
    try:
        runner = Runner(protocol.Channel(theirs))
        runner.run_cell(0, "warm-up", _WARM_UP_SOURCE)
        x = numpy.arange(12.0).reshape(3, 4)                      # (3, 4)
        w, b = numpy.ones(4), numpy.zeros(4)                      # (4,), (4,)
        call = {"name": "warm_up", "args": [x, w, b], "kwargs": {"scale": 0.5, "options": {"k": (1, 2)}}}
        one = protocol.frame({"op": "call", **call})
        many = protocol.frame({"op": "calls", "calls": [call, call], "stop": True})
        # a few KiB each way: both fit in the socket buffers, so nothing here waits
        _socket.socket.sendall(ours, (one + many) * rounds)
        _socket.socket.shutdown(ours, _socket.SHUT_WR)
        runner.serve_calls(runner.chan)                            # answers every request, returns at EOF
        runner.ns.clear()
        _socket.socket.shutdown(theirs, _socket.SHUT_WR)
        replies = protocol.Channel(ours)
        while True:
            try:
                answered += replies.recv(trusted=False)["op"] == "result"
            except EOFError:
                break
    finally:
        sys.stdout, sys.stderr = saved
        linecache.cache.pop(filename, None)
        _socket.socket.close(ours)
        _socket.socket.close(theirs)
    return answered
