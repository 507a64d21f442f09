"""Starting and driving the sandboxed child process from the trusted side.

    with Sandbox(cells, limits) as box:
        report = box.start()                      # runs the notebook's cells: ExecutionReport
        result = box.call("layer_norm", (x, g, b), {})   # CallResult(value, warnings, mutated, ...)

The child is a fresh interpreter (`python -s -P -m autograder.sandbox.child`; `-I` is not used
because it would also ignore PYTHONHASHSEED, and the environment is scrubbed anyway) in its own
session and process group, killed as a group. Limits, set between fork and exec:
RLIMIT_AS (limits.memory_mb), RLIMIT_CPU (a backstop; wall-clock limits are enforced here),
RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_CORE = 0, and the parent-death signal. When running as root,
a new network namespace (loopback only) and a mount namespace in which every mount is read-only
except the working folder (`readonly=True`), and `hide` paths (reference answers, the course
secret) are covered by an empty read-only tmpfs or /dev/null. What actually applied is listed
in `ExecutionReport.isolation`, e.g. ("rlimits", "process-group", "scrubbed-env", "private-tmp",
"netns", "readonly-fs", "hidden-paths"). Not covered: the child runs with the caller's uid, so
without root none of the namespaces apply, and a grandchild that starts its own session escapes
the group kill (RLIMIT_CPU still bounds it).

Wall-clock limits: a cell running past limits.cell_seconds is stopped by killing the child,
recorded as timed out, and the notebook is run again in a fresh child without that cell
(likewise for a cell that crashes the process); the notebook as a whole gets
limits.total_seconds. A call gets limits.call_seconds (time spent in trusted callbacks is not
counted); past it, the child is killed and CallTimeout raised. After CallTimeout or ChildCrashed
the sandbox is stopped; `restart()` runs the notebook again in a new child.
"""
from __future__ import annotations

import ctypes
import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Limits
from . import protocol
from .outcomes import (
    BadReturnValue,
    CallResult,
    CallTimeout,
    CellOutcome,
    ChildCrashed,
    ExecutionReport,
    FunctionMissing,
    NotCallable,
    NotebookFailed,
    StudentCodeError,
    StudentRaised,
)
from .protocol import ProtocolError

__all__ = ["Sandbox", "CallResult", "CellOutcome", "ExecutionReport"]

CHILD_MODULE = "autograder.sandbox.child"
FILE_SIZE_MB = 64
OPEN_FILES = 64
PASS_THROUGH_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
STDOUT_KEEP = 70_000
TEXT_KEEP = 2_000

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MOUNT_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC, "noatime": 1024,
                "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24}
_PR_SET_PDEATHSIG = 1


# --------------------------------------------------------------------------- small helpers

@dataclass(frozen=True)
class _Cell:
    index: int
    source: str


def _cell(c: Any) -> _Cell:
    if isinstance(c, Mapping):
        return _Cell(int(c["index"]), str(c["source"]))
    return _Cell(int(c.index), str(c.source))


def _clean(value: str, limit: int) -> str:
    """Cut to `limit` characters; lone surrogates (valid JSON, invalid UTF-8) become '?'."""
    value = value if len(value) <= limit else value[: limit - 3] + "..."
    return value.encode("utf-8", "replace").decode("utf-8")


def _text(msg: dict, key: str, limit: int = TEXT_KEEP) -> str:
    value = msg.get(key, "")
    return _clean(value, limit) if type(value) is str else ""


def _texts(msg: dict, key: str, count: int = 50, limit: int = 400) -> tuple[str, ...]:
    value = msg.get(key, ())
    if type(value) not in (list, tuple):
        return ()
    return tuple(_clean(v, limit) for v in value[:count] if type(v) is str)


def _seconds(msg: dict, key: str = "seconds") -> float:
    value = msg.get(key, 0.0)
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        return 0.0
    return float(value)


def describe_exit(returncode: int | None) -> str:
    """Why a child process ended, in words a student can act on."""
    if returncode is None:
        return "it stopped responding"
    if returncode >= 0:
        return f"exited with status {returncode} (did the code call os._exit() or end the process?)"
    sig = -returncode
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    known = {
        signal.SIGKILL: f"killed by signal {sig} ({name}; memory limit?)",
        signal.SIGSEGV: f"segmentation fault (signal {sig}, {name})",
        signal.SIGXCPU: f"CPU time limit reached (signal {sig}, {name})",
        signal.SIGXFSZ: f"wrote a file larger than {FILE_SIZE_MB} MB (signal {sig}, {name})",
        signal.SIGABRT: f"aborted (signal {sig}, {name})",
    }
    return known.get(sig, f"stopped by signal {sig} ({name})")


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _mounts(pid: int | str = "self") -> list[tuple[str, str]]:
    """(mount point, per-mount options) of a process, from /proc/<pid>/mountinfo."""
    try:
        text = Path(f"/proc/{pid}/mountinfo").read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 5:
            out.append((fields[4].encode().decode("unicode_escape"), fields[5]))
    return out


def _preexec(limits: Limits, *, namespaces: bool, hide: tuple[str, ...],
             writable: str | None) -> Callable[[], None]:
    """The function run in the child between fork and exec (everything computed beforehand).

    With `namespaces` (root): a new network namespace, and a mount namespace in which `hide`
    paths are covered and, if `writable` is given, every mount is made read-only except a bind
    mount of that folder."""
    cpu = math.ceil(limits.total_seconds * 2 + 120)
    wanted = [
        (resource.RLIMIT_AS, int(limits.memory_mb) * 2**20, int(limits.memory_mb) * 2**20),
        (resource.RLIMIT_CPU, cpu, cpu + 5),
        (resource.RLIMIT_FSIZE, FILE_SIZE_MB * 2**20, FILE_SIZE_MB * 2**20),
        (resource.RLIMIT_NOFILE, OPEN_FILES, OPEN_FILES),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    plan = []
    for res, soft, hard in wanted:
        _, cur_hard = resource.getrlimit(res)
        if cur_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, cur_hard), min(hard, cur_hard)
        plan.append((res, (soft, hard)))
    libc = _libc()
    use_mounts = bool(hide or writable)
    flags = _CLONE_NEWNET | (_CLONE_NEWNS if use_mounts else 0)
    covers = [(p.encode(), os.path.isdir(p)) for p in hide]
    remounts = []
    if writable:
        for point, options in _mounts():
            extra = 0
            for opt in options.split(","):
                extra |= _MOUNT_FLAGS.get(opt, 0)
            remounts.append((point.encode(), _MS_REMOUNT | _MS_BIND | _MS_RDONLY | extra))
    keep = writable.encode() if writable else None
    setrlimit = resource.setrlimit
    chdir = os.chdir

    def run() -> None:
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if namespaces and libc.unshare(flags) == 0 and use_mounts \
                    and libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) == 0:
                for path, is_dir in covers:
                    if is_dir:
                        libc.mount(b"tmpfs", path, b"tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                                   b"size=4k,mode=0555")
                    else:
                        libc.mount(b"/dev/null", path, None, _MS_BIND, None)
                if keep is not None and libc.mount(keep, keep, None, _MS_BIND | _MS_REC, None) == 0:
                    for point, mflags in remounts:
                        libc.mount(None, point, None, mflags, None)
                    chdir(keep)       # the cwd was entered before the bind mount: enter it again
        for res, pair in plan:
            setrlimit(res, pair)

    return run


class _Child:
    """One running child process and its socket."""

    def __init__(self, proc: subprocess.Popen, chan: protocol.Channel):
        self.proc = proc
        self.chan = chan
        self.returncode: int | None = None

    def wait_exit(self, seconds: float) -> bool:
        """True once the process has ended (without reaping it, so its group id stays ours)."""
        end = time.monotonic() + seconds
        while True:
            try:
                info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return True
            if info is not None:
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.005)

    def kill(self) -> int | None:
        """Kill the whole process group, then reap the leader. Idempotent."""
        if self.returncode is not None or self.proc.returncode is not None:
            return self.returncode if self.returncode is not None else self.proc.returncode
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)     # before reaping: the group id cannot be reused yet
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.returncode = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:                 # stuck in the kernel; nothing more to do
            self.returncode = None
        try:
            self.chan.close()
        except OSError:
            pass
        return self.returncode


class _Resources:
    """What must be released even if a Sandbox is dropped without close()."""

    def __init__(self) -> None:
        self.child: _Child | None = None
        self.dirs: list[Path] = []

    def release(self) -> None:
        if self.child is not None:
            self.child.kill()
            self.child = None
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)
        self.dirs.clear()


@dataclass(frozen=True)
class _Stop:
    kind: str                 # ready | cell_timeout | cell_crashed | total | crashed
    index: int | None = None
    reason: str = ""


# --------------------------------------------------------------------------- the sandbox

class Sandbox:
    """A notebook's code running in a separate, limited process, answering calls."""

    def __init__(self, cells: Iterable[Any], limits: Limits, *, workdir: str | Path | None = None,
                 env_extra: Mapping[str, str] | None = None, hide: Iterable[str | Path] = (),
                 readonly: bool = True):
        self.cells = tuple(_cell(c) for c in cells)
        self.limits = limits
        self.report: ExecutionReport | None = None        # of the latest start
        self.first_report: ExecutionReport | None = None  # of the first start
        self.starts = 0
        self._workdir = Path(workdir) if workdir is not None else None
        self._env_extra = dict(env_extra or {})
        self._hide = tuple(str(Path(p).resolve()) for p in hide if Path(p).exists())
        self._readonly = readonly
        self._res = _Resources()
        self._finalizer = weakref.finalize(self, self._res.release)
        self._stopped: dict[int, CellOutcome] = {}        # cells left out of later runs
        self._failed: tuple[str, str] | None = None       # (reason, detail) once the notebook cannot run
        self._closed = False
        self._private: Path | None = None

    # ---- lifecycle
    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        """A child is running and ready for calls."""
        return self._res.child is not None and self._failed is None

    @property
    def pid(self) -> int | None:
        return self._res.child.proc.pid if self._res.child is not None else None

    def close(self) -> None:
        """Kill the child (and anything it started in its group); remove the private folders."""
        self._closed = True
        self._finalizer()

    def restart(self) -> ExecutionReport:
        """Stop the current child, if any, and run the notebook again in a new one."""
        return self.start()

    def start(self) -> ExecutionReport:
        """Run the notebook's cells in a new child; the child then waits for calls."""
        if self._closed:
            raise RuntimeError("this sandbox was closed")
        self._stop_child()
        self._failed = None
        self._prepare_dirs()
        began = time.monotonic()
        end = began + self.limits.total_seconds
        outcomes: dict[int, CellOutcome] = dict(self._stopped)
        state, messages, detail, isolation = "ok", [], "", ()
        while True:
            isolation = self._spawn()
            stop = self._send_cells(end) or self._run_cells(end, outcomes)
            if stop.kind == "ready":
                break
            secs = self.limits.cell_seconds
            if stop.kind == "cell_timeout":
                self._stopped[stop.index] = CellOutcome(
                    stop.index, "timeout", seconds=secs,
                    message=f"ran longer than {secs:g} s and was stopped (the notebook was then run again without it)")
            elif stop.kind == "cell_crashed":
                self._stopped[stop.index] = CellOutcome(
                    stop.index, "crashed",
                    message=f"stopped the process running the notebook ({stop.reason}); "
                            f"the notebook was then run again without it")
            if stop.kind in ("cell_timeout", "cell_crashed"):
                outcomes[stop.index] = self._stopped[stop.index]
                continue
            total = self.limits.total_seconds
            if stop.kind == "total":
                state = "timeout"
                reason = f"it did not finish within {total:g} s"
                if stop.index is not None:
                    outcomes[stop.index] = CellOutcome(
                        stop.index, "timeout", message=f"was still running when the notebook reached "
                                                       f"its time limit of {total:g} s")
            else:
                state = "crashed"
                reason = f"its process stopped before running it: {stop.reason}"
                detail = self._log_tail()
            for c in self.cells:
                outcomes.setdefault(c.index, CellOutcome(c.index, "not_run", message=f"was not run ({reason})"))
            messages.append(f"Your notebook could not be run to the end ({reason}); "
                            f"its functions could not be tested.")
            self._failed = (reason, detail)
            self._stop_child()
            break
        cells = tuple(outcomes[c.index] for c in self.cells if c.index in outcomes)
        report = ExecutionReport(cells=cells, seconds=round(time.monotonic() - began, 4), state=state,
                                 isolation=isolation, messages=tuple(messages), detail=detail)
        self.starts += 1
        self.report = report
        if self.first_report is None:
            self.first_report = report
        return report

    def _prepare_dirs(self) -> None:
        if self._private is None:
            self._private = Path(tempfile.mkdtemp(prefix="autograder-sandbox-"))
            self._res.dirs.append(self._private)
            (self._private / "work").mkdir()
        if self._workdir is None:
            self._workdir = self._private / "work"

    def _environment(self) -> dict[str, str]:
        home = str(self._workdir)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": home,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "NUMEXPR_NUM_THREADS": "1",
            "VECLIB_MAXIMUM_THREADS": "1",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "Agg",
        }
        for key in PASS_THROUGH_ENV:
            if key in os.environ:
                env[key] = os.environ[key]
        env.update(self._env_extra)
        return env

    def _spawn(self) -> tuple[str, ...]:
        assert self._private is not None and self._workdir is not None
        self._stop_child()
        parent, child = socket.socketpair()
        namespaces = os.geteuid() == 0
        cmd = [sys.executable, "-s", "-P", "-m", CHILD_MODULE, "--fd", str(child.fileno())]
        try:
            with open(self._private / "child-stderr.log", "wb") as log:
                proc = subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                    cwd=self._workdir, env=self._environment(), pass_fds=(child.fileno(),),
                    start_new_session=True, close_fds=True,
                    preexec_fn=_preexec(self.limits, namespaces=namespaces, hide=self._hide,
                                        writable=str(self._workdir.resolve()) if self._readonly else None))
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self._res.child = _Child(proc, protocol.Channel(parent))
        applied = ["rlimits", "process-group", "scrubbed-env"]
        if self._workdir == self._private / "work":
            applied.append("private-tmp")
        try:
            if os.readlink(f"/proc/{proc.pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                applied.append("netns")
        except OSError:
            pass
        mounts = dict(_mounts(proc.pid)) if (self._hide or self._readonly) and namespaces else {}
        if self._hide and set(self._hide) <= set(mounts):
            applied.append("hidden-paths")
        work = str(self._workdir.resolve())
        if self._readonly and mounts.get("/", "").startswith("ro") and mounts.get(work, "").startswith("rw"):
            applied.append("readonly-fs")
        return tuple(applied)

    def _stop_child(self) -> int | None:
        child, self._res.child = self._res.child, None
        return child.kill() if child is not None else None

    def _reap(self, child: _Child) -> str:
        """After the socket closed: let the process finish dying, kill its group, say why."""
        child.wait_exit(0.5)
        self._res.child = None
        return describe_exit(child.kill())

    def _log_tail(self) -> str:
        try:
            data = (self._private / "child-stderr.log").read_bytes()[-4000:]  # type: ignore[operator]
        except OSError:
            return ""
        return data.decode("utf-8", "replace").strip()

    # ---- running cells
    def _send_cells(self, end: float) -> _Stop | None:
        child = self._res.child
        assert child is not None
        cells = [{"index": c.index, "source": c.source} for c in self.cells if c.index not in self._stopped]
        try:
            child.chan.send({"op": "run", "cells": cells}, deadline=end)
        except TimeoutError:
            self._stop_child()
            return _Stop("total")
        except OSError:
            return _Stop("crashed", reason=self._reap(child))
        return None

    def _run_cells(self, end: float, outcomes: dict[int, CellOutcome]) -> _Stop:
        try:
            return self._read_cells(end, outcomes)
        except BaseException:
            self._stop_child()      # interrupted (e.g. KeyboardInterrupt): never leave the child running
            raise

    def _read_cells(self, end: float, outcomes: dict[int, CellOutcome]) -> _Stop:
        child = self._res.child
        assert child is not None
        current: int | None = None
        deadline, cell_limited = end, False
        while True:
            try:
                msg = child.chan.recv(trusted=True, deadline=deadline)
            except TimeoutError:
                self._stop_child()
                return _Stop("cell_timeout" if cell_limited else "total", current)
            except (EOFError, OSError):
                return _Stop("cell_crashed" if current is not None else "crashed", current, self._reap(child))
            except ProtocolError as exc:
                self._stop_child()
                reason = f"it sent data that could not be read: {exc}"
                return _Stop("cell_crashed" if current is not None else "crashed", current, reason)
            op = msg["op"]
            index = msg.get("index")
            if op == "cell_start" and type(index) is int:
                current = index
                cell_end = time.monotonic() + self.limits.cell_seconds
                deadline, cell_limited = min(cell_end, end), cell_end < end
            elif op == "cell_done" and type(index) is int:
                status = msg.get("status")
                outcomes[index] = CellOutcome(
                    index=index, status=status if status in ("ok", "error", "skipped") else "error",
                    seconds=round(_seconds(msg), 4), error_type=_text(msg, "error_type", 100),
                    message=_text(msg, "message"), where=_text(msg, "where", 300),
                    notes=_texts(msg, "notes"), stdout=_text(msg, "stdout", STDOUT_KEEP))
                current, deadline, cell_limited = None, end, False
            elif op == "ready":
                return _Stop("ready")
            else:
                self._stop_child()
                reason = f"it sent an unexpected message ({op[:40]!r})"
                return _Stop("cell_crashed" if current is not None else "crashed", current, reason)

    # ---- calls
    def _require_child(self, name: str) -> _Child:
        if self._failed is not None:
            raise NotebookFailed(*self._failed)
        if self._res.child is None:
            if self.report is None:
                raise RuntimeError("call start() before call()")
            raise ChildCrashed("it was stopped after an earlier problem (call restart() to run it again)", name)
        return self._res.child

    def call(self, name: str, args: Iterable[Any] = (), kwargs: Mapping[str, Any] | None = None, *,
             substitutes: Mapping[str, Callable[..., Any]] | None = None,
             timeout: float | None = None) -> CallResult:
        """Call the notebook's `name(*args, **kwargs)` in the child and return its result.

        `substitutes` maps global names of the notebook to trusted callables: during this call,
        the notebook sees a stub under each name that calls back here. Raises a
        StudentCodeError subclass when the call produced no value."""
        child = self._require_child(name)
        subs = dict(substitutes or {})
        limit = self.limits.call_seconds if timeout is None else float(timeout)
        data = protocol.frame({"op": "call", "name": name, "args": list(args), "kwargs": dict(kwargs or {}),
                               "substitutes": sorted(subs)})
        deadline = time.monotonic() + limit
        try:
            child.chan.send_frame(data, deadline=deadline)
            while True:
                try:
                    msg = child.chan.recv(trusted=True, deadline=deadline)
                except ProtocolError as exc:
                    self._stop_child()
                    raise BadReturnValue(f"data that could not be read ({exc})", name) from None
                op = msg["op"]
                if op == "callback":
                    deadline += self._answer_callback(child, msg, subs, deadline)
                elif op == "result":
                    return CallResult(value=msg.get("value"), warnings=_texts(msg, "warnings", 20),
                                      mutated=_texts(msg, "mutated", 50, 200), seconds=_seconds(msg),
                                      stdout=_text(msg, "stdout", STDOUT_KEEP))
                elif op == "error":
                    error = self._error(msg, name)
                    error.stdout = _text(msg, "stdout", STDOUT_KEEP)
                    raise error
                else:
                    self._stop_child()
                    raise ChildCrashed(f"it sent an unexpected message ({op[:40]!r})", name)
        except TimeoutError:
            self._stop_child()
            raise CallTimeout(limit, name) from None
        except (EOFError, OSError):
            reason = self._reap(child)
            raise ChildCrashed(reason, name, self._log_tail()) from None
        except (StudentCodeError, protocol.EncodeError):
            raise
        except BaseException:
            self._stop_child()      # interrupted mid-call (e.g. KeyboardInterrupt): the stream is out of step
            raise

    def _answer_callback(self, child: _Child, msg: dict, subs: dict, deadline: float) -> float:
        """Run a trusted callable for the child; returns the seconds it took (not charged to the call)."""
        started = time.monotonic()
        name, args, kwargs = msg.get("name"), msg.get("args"), msg.get("kwargs")
        fn = subs.get(name) if type(name) is str else None
        if fn is None:
            reply = {"op": "error", "type": "RuntimeError", "message": f"{str(name)[:60]} is not available here"}
        elif type(args) is not list or type(kwargs) is not dict:
            reply = {"op": "error", "type": "TypeError", "message": "malformed call"}
        else:
            try:
                reply = {"op": "result", "value": fn(*args, **kwargs)}
            except Exception as exc:  # noqa: BLE001 - the student's arguments made the reference fail
                reply = {"op": "error", "type": type(exc).__name__, "message": str(exc)[:500]}
        try:
            data = protocol.frame(reply)
        except protocol.EncodeError as exc:
            data = protocol.frame({"op": "error", "type": "TypeError",
                                   "message": f"{name} returned {exc.what}"})
        paused = time.monotonic() - started
        child.chan.send_frame(data, deadline=deadline + paused)
        return paused

    def _error(self, msg: dict, name: str) -> StudentCodeError:
        kind = msg.get("kind")
        if kind == "missing":
            return FunctionMissing(name)
        if kind == "not_callable":
            return NotCallable(name, _text(msg, "type", 100))
        if kind == "raised":
            return StudentRaised(_text(msg, "type", 100) or "an exception", _text(msg, "message"),
                                 _texts(msg, "where", 10, 300), function=name)
        if kind == "bad_return":
            return BadReturnValue(_text(msg, "description", 400) or "a value that cannot be graded", name)
        self._stop_child()
        return ChildCrashed(f"it sent an unexpected reply ({str(kind)[:40]!r})", name)

    def ping(self, timeout: float = 5.0) -> float:
        """Round-trip time of an empty message (raises like call() if the child is gone)."""
        child = self._require_child("ping")
        started = time.monotonic()
        try:
            child.chan.send({"op": "ping"}, deadline=started + timeout)
            msg = child.chan.recv(trusted=True, deadline=started + timeout)
        except TimeoutError:
            self._stop_child()
            raise CallTimeout(timeout) from None
        except (EOFError, OSError):
            raise ChildCrashed(self._reap(child)) from None
        if msg["op"] != "pong":
            self._stop_child()
            raise ChildCrashed("it answered a ping with something else")
        return time.monotonic() - started
