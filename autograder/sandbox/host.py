"""The trusted side's handle on the sandbox: one warm host per worker, a run per submission, a
fresh process per problem.

    host = SandboxHost()                          # start once per worker (bubblewrap + zygote)
    run = host.submission(cells, limits)          # forks the submission's namespaces, runs the notebook
    run.report                                    # ExecutionReport: per-cell outcomes, isolation layers
    p = run.problem("layer_norm")                 # a fresh fork of the post-notebook state
    p.call("layer_norm", (x, g, b), {})           # CallResult(value, warnings, mutated, seconds, stdout)
    p.call_many([("f", (1,), {}), ("g", (), {})]) # one round trip; as if called one by one
    run.close(); host.close()

Nothing the child sends is trusted: replies are decoded with size caps, and every wait has a
deadline. One wall-clock budget per submission (limits.submission_seconds) covers the notebook
runs, restarts and calls; past it every call fails at once. A call that hangs or crashes costs
only that process: the next call forks again from the template (milliseconds; the notebook is
not run again), at most limits.max_restarts times per submission, and a function that hung or
crashed twice is not called again. A notebook cell that hangs or kills its process is noted and
the notebook is run again with that cell's definitions alone in its place (or without it: see
`_cell_stopped`), within limits.total_seconds; past that, once more, up to the cell the time ran
out in or, when the reruns used the time and the rest fits, to the end, within limits.total_seconds and half of
what is left of the submission's budget (see `_plan_last_run`).
"""
from __future__ import annotations

import contextlib
import itertools
import math
import os
import select
import shutil
import signal
import socket
import sys
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Limits
from ..errors import SandboxUnavailable  # defined in errors, so that importing it needs no numpy
from ..text import plural, times, truncate
from . import isolation, protocol
from .outcomes import (
    BadReturnValue,
    CallResult,
    CallTimeout,
    CellOutcome,
    CellStatus,
    ChildCrashed,
    ExecutionReport,
    FunctionMissing,
    NotCallable,
    NotebookFailed,
    RunState,
    SandboxError,
    StudentCodeError,
    StudentRaised,
    TimeBudgetExceeded,
)
from .process import HostProcess, LaunchedHost, launch_host

__all__ = ["SandboxHost", "SubmissionRun", "ProblemHandle", "Ahead", "SandboxUnavailable", "HostInfo",
           "describe_exit"]

CONTROL_SECONDS = 20.0          # a sandbox process that never ran student code must answer within this
START_SECONDS = 60.0            # the host's start-up (interpreter + numpy), generous for a loaded machine
MAX_FAILURES_PER_FUNCTION = 2   # hangs/crashes of one function before it is no longer called
TEXT_KEEP = 2_000
TEMPLATE_LOST = ("the process holding your notebook's state stopped after the notebook ran "
                 "(did your code end it, e.g. with os.kill, or from a background thread?)")
TEMPLATE_EXIT_SECONDS = 2.0    # how long a template whose socket closed may take to be seen gone
LAST_RUN_SHARE = 0.5           # of the submission's budget left: the most a last run after the total limit takes
LAST_RUN_MIN_SECONDS = 1.0     # no last run shorter than this
LAST_RUN_FIT = 0.75            # of the last run's time: the most the cells kept may have taken the first time
CELL_CHUNK = 1000              # cells per message to the template
REPLY_HEADER = 4 * 2**20       # the non-array part of a reply (numbers in lists, messages, printed output)
CELL_CAPS = protocol.Caps(max_bytes=2**20, max_header=4 * 2**20, max_depth=8, max_items=100_000)


@dataclass(frozen=True)
class HostInfo:
    layers: tuple[str, ...]        # isolation layers that applied (see autograder.sandbox.isolation)
    missing: tuple[str, ...]       # one line per required layer that did not apply, with the reason
    insecure: bool                 # started without refusing although layers were missing
    notes: tuple[str, ...] = ()    # one line per optional layer that did not apply, with the reason

    @property
    def complete(self) -> bool:
        return not self.missing


# Which layers a problem reported by the host or a supervisor ("<key>: <why>") stands for.
PROBLEM_LAYERS = {
    "bubblewrap": ("bubblewrap", "allow-list-fs", "no-network"),
    "per-submission namespaces": ("user-namespace", "pid-namespace", "mount-namespace", "fresh-proc",
                                  "private-scratch", "process-limit", "ipc-namespace", "uts-namespace"),
    "private mounts": ("mount-namespace", "fresh-proc", "private-scratch"),
    "a fresh /proc": ("pid-namespace", "fresh-proc"),
    "private scratch": ("private-scratch",),
    "host seccomp filter": ("seccomp",),
}
LAYER_HINTS = {
    "bubblewrap": "bubblewrap is not installed or could not start (apt-get install bubblewrap)",
    "allow-list-fs": "needs bubblewrap (apt-get install bubblewrap)",
    "no-network": "needs bubblewrap's network namespace (apt-get install bubblewrap)",
    "unprivileged-uid": "the sandbox runs as root",
    "seccomp": "libseccomp could not build the filter (apt-get install libseccomp2)",
}


def _grader_paths() -> list[str]:
    """Paths of the grader's side that must not exist inside the sandbox: its working folder,
    its Python environment, the engine's project folder, what is in its home folder."""
    paths = [os.getcwd(), sys.prefix, str(Path(isolation.__file__).resolve().parents[2]), "/etc/passwd"]
    interpreter = Path(isolation.sandbox_python())
    try:
        for entry in sorted(Path.home().iterdir())[:50]:
            if entry not in interpreter.parents:
                paths.append(str(entry))
    except OSError:
        pass
    return [p for p in paths if p not in ("/", "/tmp") and not interpreter.is_relative_to(p)]


def describe_exit(returncode: int | None) -> str:
    """Why a process ended, in words a student can act on: one clause without brackets, as the
    notes and messages that quote it put it in brackets or after a colon."""
    if returncode is None:
        return "it stopped responding"
    if returncode >= 0:
        return f"exited with status {returncode}, as when code calls os._exit() or otherwise ends its process"
    sig = -returncode
    try:
        signal_name = f"signal {sig}, {signal.Signals(sig).name}"
    except ValueError:
        signal_name = f"signal {sig}"
    known: dict[int, str] = {
        signal.SIGKILL: f"killed by {signal_name}, perhaps for going over the memory limit",
        signal.SIGSEGV: f"segmentation fault, {signal_name}",
        signal.SIGXCPU: f"CPU time limit reached, {signal_name}",
        signal.SIGXFSZ: f"wrote a file larger than the limit, {signal_name}",
        signal.SIGABRT: f"aborted, {signal_name}",
        signal.SIGSYS: f"made a forbidden system call, {signal_name}",
    }
    return known.get(sig, f"stopped by {signal_name}")


def _close_quietly(chan: protocol.Channel | None) -> None:
    if chan is not None:
        try:
            chan.close()
        except OSError:
            pass


def _clean(value: str, limit: int) -> str:
    """Cut to `limit` characters; lone surrogates (valid JSON, invalid UTF-8) become '?'."""
    return truncate(value, limit).encode("utf-8", "replace").decode("utf-8")


def _text(msg: dict[str, Any], key: str, limit: int = TEXT_KEEP) -> str:
    value = msg.get(key, "")
    return _clean(value, limit) if type(value) is str and value else ""


def _texts(msg: dict[str, Any], key: str, count: int = 50, limit: int = 400) -> tuple[str, ...]:
    value = msg.get(key, ())
    if type(value) not in (list, tuple) or not value:     # (most calls: none)
        return ()
    return tuple(_clean(v, limit) for v in value[:count] if type(v) is str)


def _seconds(msg: dict[str, Any], key: str = "seconds") -> float:
    value = msg.get(key, 0.0)
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        return 0.0
    return float(value)


@dataclass(frozen=True, slots=True)
class _Cell:
    index: int
    source: str
    label: str


def _cell(c: Any) -> _Cell:
    if isinstance(c, Mapping):
        index, source, label = c["index"], c["source"], c.get("label", "")
    else:
        index, source, label = c.index, c.source, getattr(c, "label", "")
    return _Cell(int(index), str(source), str(label or f"cell {index}"))


def _limits_message(limits: Limits) -> dict[str, Any]:
    return {
        "memory_mb": int(limits.memory_mb),
        "cpu_seconds": math.ceil(max(limits.total_seconds, limits.submission_seconds) + 30),
        "file_mb": int(limits.scratch_mb),
        "open_files": 64,
        "processes": int(limits.processes),
        "scratch_mb": int(limits.scratch_mb),
    }


# --------------------------------------------------------------------------- the host

def _hold_on(cpu: int, process: bool) -> bool:
    """Hold this thread, or with `process` every thread of this process, (and what they start
    later) on `cpu`, when this thread may run there; False (nothing changed) otherwise."""
    try:
        if cpu not in os.sched_getaffinity(0):
            return False
        for tid in os.listdir("/proc/self/task") if process else ["0"]:
            with contextlib.suppress(ProcessLookupError):       # a thread that has just ended
                os.sched_setaffinity(int(tid), {cpu})
    except (OSError, ValueError):
        return False
    return True


def _held_on(cpu: int) -> bool:
    """Whether this thread may run on `cpu` only (then a call has no CPU to move to)."""
    try:
        return os.sched_getaffinity(0) == {cpu}
    except OSError:
        return False


@contextlib.contextmanager
def _on_cpu(cpu: int | None) -> Iterator[None]:
    """This thread runs on `cpu` (the sandbox's) inside the block, when it may: the scheduler
    does not always bring a waking process next to the one that woke it on a busy machine, and a
    round trip between CPUs costs far more than the three system calls this takes."""
    allowed: set[int] | None = None
    if cpu is not None:
        try:
            allowed = os.sched_getaffinity(0)
            if cpu in allowed and len(allowed) > 1:
                os.sched_setaffinity(0, (cpu,))
            else:
                allowed = None
        except OSError:
            allowed = None
    try:
        yield
    finally:
        if allowed is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, allowed)


class SandboxHost:
    """One bubblewrap sandbox holding a warm zygote; forks a run per submission.

    `insecure=True` grades even when some isolation layer is unavailable (it is recorded);
    otherwise `start()` raises SandboxUnavailable naming the first missing layer and the fix.
    The zygote is replaced after `recycle_after` submissions, or when it died. With `pin` (the
    default) the sandbox runs on one CPU (see _sandbox_cpu): `cpu` when given and allowed (a pool
    gives each of its workers its own), else the one with the fewest processes held to it."""

    _ids = itertools.count(1)

    def __init__(self, *, insecure: bool = False, recycle_after: int = 500,
                 memory_mb: int = 2048, processes: int = 64, pin: bool = True, cpu: int | None = None):
        self.insecure = insecure
        self._pin = pin
        self._wanted_cpu = cpu
        self.cpu: int | None = None     # the CPU the sandbox is held on (see _sandbox_cpu)
        self._call_cpu: int | None = None   # the CPU callers move to during a call (None: they stay)
        self.recycle_after = recycle_after
        self.info: HostInfo | None = None
        self.submissions = 0            # started on the current zygote
        self.starts = 0                 # zygotes started
        self._memory_mb = memory_mb
        self._processes = processes
        self._process: HostProcess | None = None
        self._ctl: protocol.Channel | None = None
        self._cgroup: isolation.Cgroup | None = None
        self._dir: Path | None = None
        self._dir_finalizer: Any = None   # removes the folder at exit if close() is never called
        self._host_layers: tuple[str, ...] = ()
        self._problems: list[str] = []
        self._kills = 0                 # "kill" requests whose answers are not read yet
        self._spare: _Spare | None = None   # a submission's processes started ahead, for the next one
        self._early: list[dict[str, Any]] = []  # zygote answers read before they were wanted
        self._graded = 0                # submissions asked for with submission()
        self._closed = False

    # ---- lifecycle
    def __enter__(self) -> SandboxHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.alive

    def hold_caller(self, *, process: bool = True) -> bool:
        """Hold this whole process (every thread, and what it starts later) on the sandbox's CPU
        for good, so that a call need not move the caller there and back (see _on_cpu): for a
        process that only grades with this host, as a pool's worker does once warm. Its trusted
        side and its sandbox mostly wait for each other in turn, so they share the CPU at little
        cost. `process=False`: this thread only (a Dask worker's grading thread). False when the
        sandbox is not held on one CPU or this thread may not run there."""
        if self.cpu is None or not _hold_on(self.cpu, process):
            return False
        self._call_cpu = None
        return True

    def start(self, launched: LaunchedHost | None = None) -> HostInfo:
        """Start the zygote (if not running) and check the isolation layers with a probe run.
        `launched`: its process, started already for this host's settings (process.launch_host;
        this host owns it from now on, also when this raises; for a host's first start)."""
        if launched is not None and (self._closed or self._dir is not None):
            launched.close()                  # not this host's first start: it starts its own
            launched = None
        if self._closed:
            raise RuntimeError("this sandbox host was closed")
        if self.alive and self.info is not None:
            return self.info
        self._spawn(launched)
        self.info = self._probe()
        if self.info.missing and not self.insecure:
            first = self.info.missing[0]
            self._stop()
            raise SandboxUnavailable(f"the sandbox cannot be set up: {first}; pass --insecure to grade "
                                     f"without it (not for untrusted submissions)")
        return self.info

    def close(self) -> None:
        self._closed = True
        self._stop()
        if self._dir is not None:
            if self._dir_finalizer is not None:
                self._dir_finalizer.detach()
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _stop(self) -> None:
        _close_quietly(self._ctl)
        self._ctl = None
        self._kills = 0
        self._early = []
        if self._spare is not None:
            self._spare.close()
            self._spare = None
        if self._process is not None:
            self._process.kill()
            self._process = None
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None

    def _spawn(self, launched: LaunchedHost | None = None) -> None:
        self._stop()
        if launched is None:
            launched = launch_host(insecure=self.insecure, memory_mb=self._memory_mb, processes=self._processes,
                                   pin=self._pin, cpu=self._wanted_cpu, folder=self._dir)
        if self._dir is None:
            self._dir = launched.folder
            # a host never closed: its folder goes when this process exits normally
            self._dir_finalizer = weakref.finalize(self, shutil.rmtree, str(self._dir), True)
        self._problems = list(launched.problems)
        layers = list(launched.layers)
        bwrap = "bubblewrap" in layers
        self._process, self._cgroup, self.cpu = launched.process, launched.cgroup, launched.cpu
        self._call_cpu = None if self.cpu is None or _held_on(self.cpu) else self.cpu
        self._ctl = protocol.Channel(launched.sock)
        self.starts += 1
        self.submissions = 0
        try:
            host_filter, student_filter = isolation.seccomp_programs()
        except isolation.SeccompUnavailable as exc:
            host_filter = student_filter = b""
            self._problems.append(f"seccomp: {exc}")
        config = {"op": "config", "namespaces": True,
                  "host_filter": np.frombuffer(host_filter, np.uint8) if host_filter else None,
                  "student_filter": np.frombuffer(student_filter, np.uint8) if student_filter else None}
        deadline = time.monotonic() + START_SECONDS
        try:
            self._ctl.send(config, deadline=deadline)
            hello = self._ctl.recv(trusted=True, deadline=deadline, caps=CELL_CAPS)
        except (OSError, EOFError, TimeoutError, protocol.ProtocolError) as exc:
            tail = self._process.log_tail()
            self._stop()
            reason = tail.splitlines()[-1] if tail else f"{type(exc).__name__}: {exc}"
            about_namespaces = bwrap and "namespace" in (reason + tail).lower()
            hint = ("; enable unprivileged user namespaces (sysctl user.max_user_namespaces, "
                    "kernel.unprivileged_userns_clone)" if about_namespaces else "")
            raise SandboxUnavailable(f"the sandbox could not start: {reason[:300]}{hint}") from None
        if hello.get("op") != "hello":
            self._stop()
            raise SandboxUnavailable("the sandbox could not start: unexpected first message")
        layers += [x for x in _texts(hello, "layers", 20, 60) if x != "no-capabilities-host"]
        self._problems += list(_texts(hello, "problems", 20, 300))
        self._host_layers = tuple(layers)

    def _probe(self) -> HostInfo:
        """Run a tiny notebook and one call through every stage; collect the layers, and check
        from inside that none of the grader's own paths is visible (the allow-list)."""
        limits = Limits(cell_seconds=CONTROL_SECONDS, total_seconds=CONTROL_SECONDS, call_seconds=CONTROL_SECONDS,
                        submission_seconds=3 * CONTROL_SECONDS, memory_mb=self._memory_mb, processes=self._processes)
        source = "import os\ndef probe(paths):\n    return [p for p in paths if os.path.lexists(p)]"
        run = self._submission([{"index": 0, "label": "probe", "source": source}], limits, None,
                               require_layers=False)      # our own lines: run them to see what applies
        try:
            assert run.report is not None
            if not run.report.ok:
                raise SandboxError(f"the probe notebook did not run: {run.report.detail or run.report.messages}")
            visible = run.problem("probe").call("probe", (_grader_paths(),)).value
            if type(visible) is not list:
                raise SandboxError("the probe call did not answer")
            layers = run.isolation
            self._problems += run.problems
        finally:
            run.close()
            self._kills_answered()
        if visible and "allow-list-fs" in layers:
            layers = tuple(x for x in layers if x != "allow-list-fs")
            self._problems.append(f"allow-list-fs: {visible[0]} is visible inside the sandbox")
        missing = [f"{layer}: {self._why(layer)}" for layer in isolation.REQUIRED if layer not in layers]
        notes = [f"{layer}: {self._why(layer)}" for layer in isolation.OPTIONAL if layer not in layers]
        return HostInfo(layers=layers, missing=tuple(missing), insecure=self.insecure, notes=tuple(notes))

    def _why(self, layer: str) -> str:
        for problem in self._problems:
            key = problem.split(":", 1)[0]
            if layer in PROBLEM_LAYERS.get(key, (key,)):
                return problem.split(":", 1)[1].strip() if key == layer else problem
        if "namespace" in layer or layer in ("fresh-proc", "private-scratch", "process-limit"):
            return ("user namespaces are not available (enable them: sysctl user.max_user_namespaces=10000 "
                    "and kernel.unprivileged_userns_clone=1 where it exists)")
        return LAYER_HINTS.get(layer, "not available on this machine")

    # ---- submissions
    def submission(self, cells: Iterable[Any], limits: Limits, *, deadline: float | None = None) -> SubmissionRun:
        """Start a submission's namespaces and run its notebook (returns when the notebook ran).
        `deadline` (time.monotonic()) defaults to now + limits.submission_seconds."""
        spare, self._spare = self._spare, None
        if spare is not None and (spare.limits != _limits_message(limits) or not self.alive):
            spare.close()                       # started for other limits: end it
            self._kill_submission(spare.sid)
            spare = None
        self._kills_answered()
        if spare is not None and self._ctl is None:   # the zygote was replaced meanwhile
            spare.close()
            spare = None
        self._graded += 1
        if spare is None and (self.info is None or not self.alive or self.submissions >= self.recycle_after):
            if self.info is not None and self.alive:
                self._spawn()                   # recycle: a fresh zygote, same layers
            else:
                self.start()
        if deadline is None:
            deadline = time.monotonic() + limits.submission_seconds
        if spare is not None:
            cells = tuple(cells)
            try:
                return self._submission(cells, limits, deadline, spare=spare)
            except SandboxError:
                # Started while the previous submission ran (which may have used up the process
                # limit, say): this submission gets processes started now instead.
                if self._ctl is None:
                    self.start()
        return self._submission(cells, limits, deadline)

    def prepare(self, limits: Limits) -> None:
        """Have the zygote start the next submission's processes (namespaces, supervisor, template)
        now, for `limits`, as it does during a batch while a submission is graded: for a host that
        has started (its probe passed) and waits for its first submission. No student code runs
        until `submission` gives them the notebook."""
        if self._spare is None and self.info is not None and self.alive and self.submissions < self.recycle_after:
            if self._cgroup is not None:
                self._cgroup.set_memory((limits.memory_mb + 512) * 2**20)
            try:
                self._spare = self._request(limits)
            except SandboxError:
                self._spare = None

    def _submission(self, cells: Iterable[Any], limits: Limits, deadline: float | None, *,
                    require_layers: bool = True, spare: _Spare | None = None) -> SubmissionRun:
        assert self._ctl is not None
        if self._cgroup is not None:
            self._cgroup.set_memory((limits.memory_mb + 512) * 2**20)
        ahead = spare is not None
        if spare is None:
            spare = self._request(limits)
        try:
            reply = self._answer_for(spare.sid)
        except (OSError, EOFError, TimeoutError, protocol.ProtocolError) as exc:
            spare.close()
            tail = self._process.log_tail() if self._process else ""
            self._stop()
            raise SandboxError(f"the sandbox host stopped ({type(exc).__name__}: {exc}) {tail[-500:]}") from None
        if reply.get("op") != "started" or reply.get("id") != spare.sid:
            spare.close()
            raise SandboxError(f"the submission's processes could not be started: {_text(reply, 'message', 300)}")
        run = SubmissionRun(self, spare.sid, protocol.Channel(spare.sup), tuple(_cell(c) for c in cells), limits,
                            deadline if deadline is not None else time.monotonic() + limits.submission_seconds,
                            require_layers=require_layers, first_template=protocol.Channel(spare.nb),
                            started_ahead=ahead)
        try:
            run._start()
        except BaseException:
            run.close()
            raise
        if self._graded >= 2 and self.submissions < self.recycle_after and require_layers:
            # A host that graded more than one submission is grading a batch: the zygote starts the
            # next submission's processes (namespaces, supervisor, template) while this one is graded.
            try:
                self._spare = self._request(limits)
            except SandboxError:
                self._spare = None
        return run

    def _answer_for(self, sid: int) -> dict[str, Any]:
        """The zygote's answer to the "submission" request `sid`; answers to earlier requests
        (a discarded spare's, kills) that come first are set aside."""
        assert self._ctl is not None
        while True:
            if self._early:
                reply = self._early.pop(0)
            else:
                reply = self._ctl.recv(trusted=True, deadline=time.monotonic() + CONTROL_SECONDS, caps=CELL_CAPS)
            if reply.get("op") == "killed":
                self._kills -= 1
            elif reply.get("id") == sid:
                return reply

    def _request(self, limits: Limits) -> _Spare:
        """Ask the zygote for a submission's processes (its first template started at once); its
        "started" answer is read by `_submission`, after the answers to any earlier requests."""
        assert self._ctl is not None
        self.submissions += 1
        sid = next(self._ids)
        parent, child = socket.socketpair()
        nb_parent, nb_child = socket.socketpair()       # the first template's: its supervisor starts it at once
        message = _limits_message(limits)
        try:
            end = time.monotonic() + CONTROL_SECONDS
            self._ctl.send({"op": "submission", "id": sid, "limits": message, "template": True}, deadline=end)
            self._ctl.send_fds([child.fileno(), nb_child.fileno()], deadline=end)
        except (OSError, TimeoutError) as exc:
            parent.close()
            nb_parent.close()
            tail = self._process.log_tail() if self._process else ""
            self._stop()
            raise SandboxError(f"the sandbox host stopped ({type(exc).__name__}: {exc}) {tail[-500:]}") from None
        finally:
            child.close()
            nb_child.close()
        return _Spare(sid, parent, nb_parent, message)

    def _kill_submission(self, sid: int) -> None:
        """Have the zygote kill a submission's processes; its answer is read before the next
        request (see `_kills_answered`), so the grader need not wait for it."""
        if self._ctl is None:
            return
        try:
            self._ctl.send({"op": "kill", "id": sid}, deadline=time.monotonic() + CONTROL_SECONDS)
            self._kills += 1
        except (OSError, TimeoutError):
            self._stop()                        # the zygote is wedged: start over at the next submission

    def _kills_answered(self) -> None:
        """Read the answers to earlier "kill" requests (a zygote that does not answer is replaced).
        A spare submission's "started" answer, sent before them, is kept for `_submission`."""
        while self._kills > 0 and self._ctl is not None:
            try:
                reply = self._ctl.recv(trusted=True, deadline=time.monotonic() + CONTROL_SECONDS, caps=CELL_CAPS)
            except (OSError, EOFError, TimeoutError, protocol.ProtocolError):
                self._stop()                    # the zygote is wedged: start over
                continue
            if reply.get("op") == "killed":
                self._kills -= 1
            else:
                self._early.append(reply)


def _cell_messages(cells: Sequence[_Cell]) -> list[dict[str, Any]]:
    return [{"index": c.index, "label": c.label, "source": c.source} for c in cells]


def _hung_up(fd: int) -> bool:
    """Whether the other end of socket `fd` has closed (its process ended), without reading from it."""
    poller = select.poll()
    poller.register(fd, select.POLLHUP | select.POLLRDHUP)
    return any(ev & (select.POLLHUP | select.POLLRDHUP | select.POLLERR) for _, ev in poller.poll(0))


@dataclass(frozen=True, slots=True)
class _Spare:
    """A submission's processes asked for: the supervisor's socket and the first template's."""
    sid: int
    sup: socket.socket
    nb: socket.socket
    limits: dict[str, Any]

    def close(self) -> None:
        self.sup.close()
        self.nb.close()


@dataclass(frozen=True, slots=True)
class _Stop:
    kind: str                 # ready | cell_timeout | cell_crashed | total | crashed
    index: int | None = None
    reason: str = ""


class SubmissionRun:
    """One submission's namespaces: its notebook's run, then problems forked from the template."""

    def __init__(self, host: SandboxHost, sid: int, sup: protocol.Channel, cells: tuple[_Cell, ...],
                 limits: Limits, deadline: float, *, require_layers: bool = True,
                 first_template: protocol.Channel | None = None, started_ahead: bool = False):
        self.host = host
        self._started_ahead = started_ahead   # its processes were started during an earlier submission
        self.require_layers = require_layers and not host.insecure
        self.sid = sid
        self.cells = cells
        self.limits = limits
        self.deadline = deadline
        self.restarts = 0
        self.report: ExecutionReport | None = None
        self.failures: dict[str, list[StudentCodeError]] = {}   # timeouts and crashes, by function
        self._sup: protocol.Channel | None = sup
        self._nb: protocol.Channel | None = None
        self._first_nb = first_template   # the first template's socket (its supervisor started it unasked)
        self._template_pid: int | None = None
        self._stopped: dict[int, CellOutcome] = {}
        self._stop_what: dict[int, str] = {}        # how each stopped cell first stopped, in words
        self._trimmed: dict[int, str] = {}  # stopped cells run again as their definitions alone (definitions_only)
        self._unrun: set[int] = set()       # cells after the one the time ran out in, not run (_plan_last_run)
        self._cell_began: float | None = None   # when the cell running now started
        self._failed: tuple[str, str] | None = None
        self._layers: set[str] = set(host._host_layers)
        self._submission_layers: set[str] = set()
        self._template_layers: set[str] | None = None
        self._problem: ProblemHandle | None = None
        self._pending = False             # a request was sent to the supervisor, its answer not yet read
        self.problems: list[str] = []     # why a layer did not apply to this submission (from its supervisor)
        self._kept_output = 0
        self._unsent: list[_Cell] = []    # cells of the notebook not yet sent to the template
        self._closed = False
        self.call_caps = protocol.Caps(max_bytes=int(limits.return_mb * 2**20), max_header=REPLY_HEADER)
        # replies a problem's calls made ahead may hold in the grader, all together (see prefetch)
        self.prefetch_bytes = max(2**20, int(limits.return_mb * 2**20))

    # ---- lifecycle
    def __enter__(self) -> SubmissionRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def isolation(self) -> tuple[str, ...]:
        """The layers that applied to this submission (those of its latest template)."""
        layers = self._layers | self._submission_layers | (self._template_layers or set())
        order = isolation.REQUIRED + isolation.OPTIONAL
        return tuple(sorted(layers, key=lambda x: (order.index(x) if x in order else len(order), x)))

    @property
    def left(self) -> float:
        """Seconds left of the submission's budget."""
        return self.deadline - time.monotonic()

    def skipped_definer(self, name: str) -> tuple[str, str]:
        """(cell magic, cell) when a cell that defines the function `name` was skipped for the cell
        magic it starts with (`%%timeit`): what a missing `name` is told; ("", "") when none was. The
        cell is named by its place alone ("the 3rd code cell"), its label's brackets left out."""
        from ..cellplan import functions_under_magic

        for c in reversed(self.cells):
            magic, functions = functions_under_magic(c.source)
            if name in functions:
                return magic, c.label.partition(" (")[0]
        return "", ""

    def unrun_definer(self, name: str) -> str:
        """The cell that defines the function `name` when it was not run, the notebook having reached
        its time limit before it (`_plan_last_run`), named by its place alone; "" when none was."""
        from ..cellplan import defined_functions

        for c in reversed(self.cells):
            if c.index in self._unrun and name in defined_functions(c.source):
                return c.label.partition(" (")[0]
        return ""

    def close(self) -> None:
        """End the submission: every process of it is killed (its PID namespace goes)."""
        if self._closed:
            return
        self._closed = True
        if self._problem is not None:
            self._problem.close(clean=False)        # the whole submission goes next
        _close_quietly(self._nb)
        _close_quietly(self._sup)
        _close_quietly(self._first_nb)
        self._nb = self._sup = self._first_nb = None
        self.host._kill_submission(self.sid)

    # ---- control requests to the supervisor (never runs student code)
    def _control(self, message: dict[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        """Send a request to the supervisor and read its answer."""
        self._send_control(message, fds)
        return self._answer(message["op"])

    def _send_control(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        if self._sup is None:
            raise SandboxError("this submission was closed")
        if self._pending:
            self._answer("clean")                       # an earlier clean-up's answer comes first
        end = time.monotonic() + CONTROL_SECONDS
        try:
            self._sup.send(message, deadline=end)
            if fds:
                self._sup.send_fds(list(fds), deadline=end)
        except (OSError, TimeoutError) as exc:
            raise SandboxError(f"the submission's supervisor did not take {message['op']!r} "
                               f"({type(exc).__name__}: {exc})") from None
        self._pending = True

    def _answer(self, op: str) -> dict[str, Any]:
        assert self._sup is not None
        try:
            reply = self._sup.recv(trusted=True, deadline=time.monotonic() + CONTROL_SECONDS, caps=CELL_CAPS)
        except (OSError, EOFError, TimeoutError, protocol.ProtocolError) as exc:
            raise SandboxError(f"the submission's supervisor did not answer {op!r} "
                               f"({type(exc).__name__}: {exc})") from None
        self._pending = False
        return reply

    def _clean_soon(self) -> None:
        """Ask the supervisor to kill what the last problem left and empty its folder now, while
        the grader moves on; the answer is read before the next request (see _fork)."""
        if self._sup is not None and not self._pending and not self._closed:
            try:
                self._send_control({"op": "clean"})
            except SandboxError:
                pass

    @staticmethod
    def _exits(reply: dict[str, Any]) -> dict[int, int]:
        out = {}
        exits = reply.get("exits")
        if type(exits) is dict:
            for k, v in exits.items():
                if type(k) is str and k.isdigit() and type(v) is int:
                    out[int(k)] = v
        return out

    def _start(self) -> None:
        end = time.monotonic() + CONTROL_SECONDS
        try:
            up = self._sup.recv(trusted=True, deadline=end, caps=CELL_CAPS)   # type: ignore[union-attr]
        except (OSError, EOFError, TimeoutError, protocol.ProtocolError) as exc:
            raise SandboxError(f"the submission could not start ({type(exc).__name__}: {exc})") from None
        if up.get("op") != "up":
            raise SandboxError("the submission's supervisor sent an unexpected first message")
        self._submission_layers = set(_texts(up, "layers", 20, 60))
        self.problems = list(_texts(up, "problems", 20, 300))
        self.report = self._run_notebook()

    # ---- the notebook
    def _start_template(self) -> None:
        """Kill any previous template and start a fresh one (a fork of the pre-notebook state)."""
        if self._nb is not None:
            self._nb.close()
            self._nb = None
        if self._first_nb is not None:
            self._nb, self._first_nb = self._first_nb, None
        else:
            parent, child = socket.socketpair()
            try:
                self._control({"op": "template"}, [child.fileno()])
            except BaseException:
                parent.close()
                raise
            finally:
                child.close()
            self._nb = protocol.Channel(parent)
        try:
            hello = self._nb.recv(trusted=True, deadline=time.monotonic() + CONTROL_SECONDS, caps=CELL_CAPS)
        except (OSError, EOFError, TimeoutError, protocol.ProtocolError) as exc:
            raise SandboxError(f"the notebook's process could not start ({type(exc).__name__}: {exc})") from None
        if hello.get("op") == "setup_failed":
            raise SandboxError(f"the notebook's process could not be isolated: {_text(hello, 'error', 300)}")
        if hello.get("op") != "hello":
            raise SandboxError("the notebook's process sent an unexpected first message")
        if self._started_ahead and self._nb is not None and self._sup is not None:
            self._started_ahead = False
            if _hung_up(self._nb.fileno()) or _hung_up(self._sup.fileno()):
                raise SandboxError("the processes started ahead for this submission ended before it")
        self._template_pid = hello.get("pid") if type(hello.get("pid")) is int else None
        self._template_layers = set(_texts(hello, "layers", 20, 60))
        missing = [layer for layer in isolation.REQUIRED if layer not in self.isolation]
        if missing and self.require_layers:             # fail closed: no student code in a weaker sandbox
            raise SandboxError(f"the sandbox for this submission lacks {', '.join(missing)}; it was not run")

    def _stop_template(self) -> str:
        """Kill the template and everything else of the submission; why the template ended."""
        reply = self._control({"op": "stop"})
        if self._nb is not None:
            self._nb.close()
            self._nb = None
        code = self._exits(reply).get(self._template_pid or -1)
        return describe_exit(code) if code is not None else "it stopped"

    def _run_notebook(self) -> ExecutionReport:
        began = time.monotonic()
        end = min(began + self.limits.total_seconds, self.deadline)
        outcomes: dict[int, CellOutcome] = dict(self._stopped)
        state: RunState = "ok"
        messages: list[str] = []
        detail = ""
        labels = {c.index: c.label for c in self.cells}
        last_run: float | None = None       # the seconds of the last run, once it is planned
        while True:
            self._start_template()
            stop = self._send_cells(end) or self._read_cells(end, outcomes, labels)
            if stop.kind == "ready":
                break
            index = stop.index
            if stop.kind in ("cell_timeout", "cell_crashed") and index is not None:
                self._stopped[index] = self._cell_stopped(index, stop, labels.get(index, ""))
                outcomes[index] = self._stopped[index]
                continue
            if stop.kind == "total" and last_run is None:
                seconds = self._last_run_seconds(stop.index)
                if stop.index is not None and seconds is not None:
                    plan_note = self._plan_last_run(stop.index, seconds, outcomes, labels)
                    messages.append(plan_note)
                    end, last_run = time.monotonic() + seconds, seconds
                    continue
            if last_run is not None:            # the last run did not finish either: nothing was graded on it
                messages.remove(plan_note)
            if stop.kind == "total":
                state = "timeout"
                limit = self.limits.total_seconds if end < self.deadline else self.limits.submission_seconds
                reason = f"it did not finish within {limit:g} s"
                running = f"the notebook reached its time limit of {limit:g} s"
                if last_run is not None:
                    reason = (f"it did not finish within {self.limits.total_seconds:g} s, nor when run once more "
                              f"within {last_run:.3g} s")
                    running = f"the notebook, run once more, reached that run's time limit of {last_run:.3g} s"
                if stop.index is not None:
                    outcomes[stop.index] = CellOutcome(
                        stop.index, "timeout", label=labels.get(stop.index, ""),
                        message=f"was still running when {running}")
            else:
                state = "crashed"
                reason = f"its process stopped before running it: {stop.reason}"
            for c in self.cells:
                outcomes.setdefault(c.index, CellOutcome(c.index, "not_run", label=c.label,
                                                         message=f"was not run ({reason})"))
            messages.append(f"Your notebook could not be run to the end ({reason}); "
                            f"its functions could not be tested.")
            self._failed = (reason, detail)
            self._stop_template()
            break
        cells = tuple(outcomes[c.index] for c in self.cells if c.index in outcomes)
        return ExecutionReport(cells=cells, seconds=round(time.monotonic() - began, 4), state=state,
                               isolation=self.isolation, messages=tuple(messages), detail=detail)

    def _last_run_seconds(self, index: int | None) -> float | None:
        """When the notebook reached its total limit with cell `index` running: the seconds of one
        last run (see `_plan_last_run`), or None when there is no such run: the
        cell is not known, or too little of the submission's budget is left (at most half of it
        goes to the last run, the rest being the calls')."""
        if index is None or index not in {c.index for c in self.cells}:
            return None
        seconds = min(self.limits.total_seconds, self.left * LAST_RUN_SHARE)
        if seconds < LAST_RUN_MIN_SECONDS:
            return None
        return seconds

    def _plan_last_run(self, index: int, seconds: float, outcomes: dict[int, CellOutcome],
                       labels: dict[int, str]) -> str:
        """The notebook ran out of time in cell `index`: it is run once more, within `seconds`.
        When cells were stopped at their own limit before (the reruns after them used the time) and
        the rest fits (the finished cells, the time cell `index` had run and each cell after it,
        counted as the most of that time and the finished cells' mean, within LAST_RUN_FIT of
        `seconds`), all cells are run, the stopped ones as they were last (their definitions alone,
        or left out). Otherwise it is run up to cell `index`, the cells after it not run; that cell
        is kept as its definitions alone (with its assignments of literals: `cellplan.definitions_alone`),
        run whole when it is made of definitions, imports and assignments of literals alone (its time so far
        counted), or left out when it defines nothing (`_keep_plan`). Then,
        while the cells before it that finished took more than LAST_RUN_FIT of `seconds` (their
        first-run times are an estimate), the slowest of them are left out: first those that bind no
        name (`cellplan.binds_names`), then, only if still needed, those that do (their definitions
        alone kept; a cell of definitions, imports and assignments of literals alone is never left
        out). The functions are then graded on what the cells that ran define, as in Jupyter after an
        interrupt. Returns the note saying so."""
        from ..cellplan import binds_names, definitions_alone

        limit = self.limits.total_seconds
        order = [c.index for c in self.cells]
        sources = {c.index: c.source for c in self.cells}
        at = order.index(index)
        running = 0.0 if self._cell_began is None else max(0.0, time.monotonic() - self._cell_began)
        finished = [i for i in order[:at] if i not in self._stopped and i in outcomes]
        took_all = sum(outcomes[i].seconds for i in finished)
        # cells stopped at their own limit: the notebook was run again, and is now run to the end when
        # what finished, the cell the time ran out in and those after it (each counted as the most of
        # the time that cell had run and the finished cells' mean) fit the last run
        rerun = bool(self._stopped)
        if rerun:
            ahead = [i for i in order[at + 1:] if i not in self._stopped or i in self._trimmed]
            each = max(running, took_all / len(finished) if finished else 0.0)
            rerun = took_all + running + len(ahead) * each <= seconds * LAST_RUN_FIT
        if not rerun:
            for later in order[at + 1:]:
                self._unrun.add(later)
                self._trimmed.pop(later, None)
                self._stopped[later] = outcomes[later] = CellOutcome(
                    later, "not_run", label=labels[later],
                    message=f"was not run: the notebook reached its time limit of {limit:g} s before it")
            plan = self._keep_plan(index, definitions_alone(sources[index]))
            if plan is None or plan[0]:
                what = f"was still running when the notebook reached its time limit of {limit:g} s"
                self._stop_what[index] = what
                self._stopped[index] = outcomes[index] = CellOutcome(
                    index, "timeout", label=labels[index],
                    message=f"{what} and was stopped; the notebook was then run again up to this cell, "
                            f"{f'with only its definitions kept ({plan[1]})' if plan else 'leaving it out'}")
            else:
                took_all += running             # run whole: at least the time it had run
        found = {i: definitions_alone(sources[i]) for i in finished}
        slowest = sorted(finished, key=lambda i: -outcomes[i].seconds)
        binding = {i for i in finished if binds_names(sources[i])}
        # left out first: the cells that bind nothing (sleeps, prints, plots), then those that do
        # (their definitions alone kept); a cell of definitions, imports and literals alone is never left out
        order_out = [i for i in slowest if i not in binding] + [
            i for i in slowest if i in binding and ((split := found[i]) is None or split[0] is not None)]
        left_out: list[int] = []
        for slow in order_out:
            if took_all <= seconds * LAST_RUN_FIT:
                break
            left_out.append(slow)
            took = outcomes[slow].seconds
            took_all -= took
            plan = self._keep_plan(slow, found[slow])
            self._stop_what[slow] = f"took {round(took, 1):g} s"
            self._stopped[slow] = outcomes[slow] = CellOutcome(
                slow, "not_run", seconds=took, label=labels[slow],
                message=f"took {round(took, 1):g} s: when the notebook was run again after reaching its time "
                        f"limit of {limit:g} s, this slow cell was left out"
                        f"{f', only its definitions kept ({plan[1]})' if plan else ''}")
        slow_part = f", leaving out {plural(len(left_out), 'slow cell')}" if left_out else ""
        if rerun:
            run_again = (f", as it was run again after each cell stopped at its own limit: it was run once more "
                         f"to the end, those cells as they were last run{slow_part}")
        else:
            run_again = (f": it was run again up to {labels[index]}, where the time ran out"
                         f"{slow_part and slow_part + ' before it'}")
        return (f"Your notebook did not finish within its time limit of {limit:g} s{run_again}, and your "
                f"functions were graded on what the cells that ran define. Make every cell fast enough (remove "
                f"sleeps, long loops and debugging code) so that the whole notebook runs in {limit:g} s.")

    def _keep_plan(self, index: int, found: tuple[str | None, tuple[str, ...]] | None) -> tuple[bool, str] | None:
        """Cell `index` is run from now on as `found` (`cellplan.definitions_alone` of its source) says,
        when its time is not to be spent: (True, the names they bind) when its definitions alone are
        kept, the rest of it not run; (False, names) when it is made of definitions, imports and literal
        assignments alone and so is run whole; None when it defines nothing, and so is not run at all."""
        self._trimmed.pop(index, None)
        if found is None:
            return None
        if found[0] is not None:
            self._trimmed[index] = found[0]
        return found[0] is not None, ", ".join(found[1])

    def _cell_stopped(self, index: int, stop: _Stop, label: str) -> CellOutcome:
        """The outcome of a cell that ran too long or ended its process. The notebook is run again
        with that cell's definitions alone in its place (`cellplan.definitions_only`: its functions,
        classes, imports and assignments of literals such as `K = 2`), or, when it has none, stopped that
        way too, or cannot be split, without it."""
        from ..cellplan import definitions_only

        first = self._stopped.get(index)
        if stop.kind == "cell_timeout":
            status: CellStatus = "timeout"
            what = f"ran longer than {self.limits.cell_seconds:g} s and was stopped"
        else:
            status, what = "crashed", f"stopped the process running the notebook: {stop.reason}"
        if first is not None:                     # its definitions alone were stopped too
            self._trimmed.pop(index, None)
            return CellOutcome(index, first.status, seconds=first.seconds, label=label,
                               message=f"{self._stop_what[index]}; so were its definitions alone, "
                                       f"and the notebook was then run again without it")
        self._stop_what[index] = what
        trimmed = definitions_only(next((c.source for c in self.cells if c.index == index), ""))
        seconds = self.limits.cell_seconds if status == "timeout" else 0.0
        if trimmed is None:
            return CellOutcome(index, status, seconds=seconds, label=label,
                               message=f"{what}; the notebook was then run again without it")
        self._trimmed[index] = trimmed[0]
        return CellOutcome(index, status, seconds=seconds, label=label,
                           message=f"{what}; the notebook was then run again with only the cell's definitions "
                                   f"kept from it ({', '.join(trimmed[1])}), the rest of the cell not run")

    def _send_cells(self, end: float) -> _Stop | None:
        """The "run" request with the first CELL_CHUNK cells; the rest go when the child asks for
        more (a notebook of 100,000 cells never sits in the grader as one message)."""
        assert self._nb is not None
        todo = [c if c.index not in self._trimmed else _Cell(c.index, self._trimmed[c.index], c.label)
                for c in self.cells if c.index not in self._stopped or c.index in self._trimmed]
        self._unsent = todo[CELL_CHUNK:]
        try:
            self._nb.send({"op": "run", "cells": _cell_messages(todo[:CELL_CHUNK]), "more": bool(self._unsent),
                           "output_chars": int(self.limits.output_kb) * 1024,
                           "return_bytes": int(self.limits.return_mb * 2**20), "header_bytes": REPLY_HEADER},
                          deadline=end)
        except TimeoutError:
            self._stop_template()
            return _Stop("total")
        except OSError:
            return _Stop("crashed", reason=self._stop_template())
        return None

    def _send_more(self, chan: protocol.Channel, deadline: float) -> None:
        chunk, self._unsent = self._unsent[:CELL_CHUNK], self._unsent[CELL_CHUNK:]
        chan.send({"op": "cells", "cells": _cell_messages(chunk), "more": bool(self._unsent)}, deadline=deadline)

    def _read_cells(self, end: float, outcomes: dict[int, CellOutcome], labels: dict[int, str]) -> _Stop:
        try:
            return self._read_cells_inner(end, outcomes, labels)
        except BaseException:
            if self._nb is not None:        # interrupted (e.g. KeyboardInterrupt): never leave it running
                self._nb.close()
                self._nb = None
            raise

    def _read_cells_inner(self, end: float, outcomes: dict[int, CellOutcome], labels: dict[int, str]) -> _Stop:
        chan = self._nb
        assert chan is not None
        current: int | None = None
        deadline, cell_limited = end, False
        keep = int(self.limits.output_kb) * 1024
        while True:
            try:
                msg = chan.recv(trusted=True, deadline=deadline, caps=CELL_CAPS)
            except TimeoutError:
                self._stop_template()
                return _Stop("cell_timeout" if cell_limited else "total", current)
            except (EOFError, OSError):
                reason = self._stop_template()
                return _Stop("cell_crashed" if current is not None else "crashed", current, reason)
            except protocol.ProtocolError as exc:
                self._stop_template()
                reason = f"it sent data that could not be read: {exc}"
                return _Stop("cell_crashed" if current is not None else "crashed", current, reason)
            op = msg["op"]
            index = msg.get("index")
            if op == "cell_start" and type(index) is int and index in labels:
                current = index
                self._cell_began = time.monotonic()
                cell_end = self._cell_began + self.limits.cell_seconds
                deadline, cell_limited = min(cell_end, end), cell_end < end
            elif op == "cell_done" and type(index) is int and index in labels:
                status = msg.get("status")
                stdout = _text(msg, "stdout", keep + 200) if self._kept_output < 8 * keep else ""
                self._kept_output += len(stdout)
                if index not in self._trimmed:    # (a stopped cell's definitions alone: its outcome stands)
                    outcomes[index] = CellOutcome(
                        index=index, status=status if status in ("ok", "error", "skipped") else "error",
                        seconds=round(_seconds(msg), 4), error_type=_text(msg, "error_type", 100),
                        message=_text(msg, "message"), where=_text(msg, "where", 400),
                        notes=_texts(msg, "notes", 20), stdout=stdout, label=labels[index])
                current, deadline, cell_limited = None, end, False
            elif op == "more" and self._unsent:
                try:
                    self._send_more(chan, deadline)
                except TimeoutError:
                    self._stop_template()
                    return _Stop("total")
                except OSError:
                    return _Stop("crashed", reason=self._stop_template())
            elif op == "ready":
                return _Stop("ready")
            else:
                self._stop_template()
                reason = f"it sent an unexpected message ({op[:40]!r})"
                return _Stop("cell_crashed" if current is not None else "crashed", current, reason)

    # ---- problems
    def problem(self, name: str) -> ProblemHandle:
        """A handle for one problem's checks; the previous problem's process is ended first.
        Its process is forked from the template on the first call."""
        if self._problem is not None:
            self._problem.close()
        self._problem = ProblemHandle(self, name)
        return self._problem

    def _fork(self, function: str) -> protocol.Channel:
        """A fresh problem process: leftovers killed, scratch emptied, then a fork of the template.
        Its hello is not waited for here: the first calls can be sent at once (see `_hello`)."""
        if self._failed is not None:
            raise NotebookFailed(*self._failed)
        if self._closed:
            raise ChildCrashed("the process holding your notebook's state is gone", function)
        if self.left <= 0:
            raise TimeBudgetExceeded(self.limits.submission_seconds, function)
        reply = self._answer("clean") if self._pending else self._control({"op": "clean"})
        if not reply.get("template_alive", True):
            self._failed = (TEMPLATE_LOST, "")
            raise NotebookFailed(*self._failed)
        if self._nb is None:                    # alive, but out of step with this side (see _exit_report)
            raise ChildCrashed("the process holding your notebook's state is gone", function)
        parent, child = socket.socketpair()
        try:
            end = time.monotonic() + CONTROL_SECONDS
            self._nb.send_fds([child.fileno()], deadline=end)          # protocol.FORK_REQUEST
        except (OSError, TimeoutError):
            parent.close()
            self._failed = (TEMPLATE_LOST, "")
            raise NotebookFailed(*self._failed) from None
        finally:
            child.close()
        return protocol.Channel(parent, read_ahead=True)

    def _hello(self, chan: protocol.Channel, function: str) -> int | None:
        """The first message of a problem process forked by `_fork`: its pid. Raises (and closes
        `chan`) when the process did not start."""
        try:
            hello = chan.recv(trusted=True, deadline=min(time.monotonic() + CONTROL_SECONDS, self.deadline),
                              caps=CELL_CAPS)
        except TimeoutError:
            chan.close()
            raise (TimeBudgetExceeded(self.limits.submission_seconds, function) if self.left <= 0 else
                   ChildCrashed("a fresh process for these checks did not start", function)) from None
        except (OSError, EOFError, protocol.ProtocolError):
            chan.close()
            time.sleep(0.05)                    # was it the template that went? (it may be dying just now)
            if not self._control({"op": "clean"}).get("template_alive", True):
                self._failed = (TEMPLATE_LOST, "")
                raise NotebookFailed(*self._failed) from None
            raise ChildCrashed("a fresh process for these checks did not start", function) from None
        return hello.get("pid") if hello.get("op") == "hello" and type(hello.get("pid")) is int else None

    def _exit_report(self, pid: int | None) -> tuple[str, str]:
        """After a problem process closed its socket: how it ended (asked of the template, its
        parent: a student-facing explanation only, never a verdict), then its leftovers killed.
        Also, for the instructor, how that was learnt: what the template answered and whether the
        supervisor still saw the template afterwards."""
        code = None
        gone = False
        how = "no process id" if pid is None else "no template to ask"
        if pid is not None and self._nb is not None:
            try:
                end = time.monotonic() + 3.0
                self._nb.send_frame(protocol.REAP_REQUEST + (pid & 0xFFFFFFFF).to_bytes(4, "big"), deadline=end)
                reply = self._nb.recv(trusted=True, deadline=end, caps=CELL_CAPS)
                if reply.get("op") == "reaped" and type(reply.get("code")) is int:
                    code = reply["code"]
                    how = f"the template reaped process {pid}: {code}"
                else:
                    how = f"the template did not see process {pid} end within its wait"
            except (OSError, EOFError, TimeoutError, protocol.ProtocolError) as exc:
                self._nb.close()                # out of step: no more forks from this template
                self._nb = None
                how = f"the template did not answer ({type(exc).__name__}: {exc})"
                # Its end of the socket closed: no process holds it any more, so the template has
                # ended, though the supervisor may not have seen it yet (a process closes its
                # files a moment before its parent can reap it). Wait for the supervisor to see it.
                gone = isinstance(exc, (EOFError, ConnectionError))
        alive = self._kill_problem(expect_gone=gone)
        if gone:
            self._failed = (TEMPLATE_LOST, "")
        how += f"; template alive after: {'unknown' if alive is None else alive}"
        if code is not None:
            return describe_exit(code), how
        if alive is False or gone:
            return "it stopped, and so did the process holding your notebook's state", how
        return "it stopped", how

    def _kill_problem(self, *, expect_gone: bool = False) -> bool | None:
        """Have the supervisor kill what the problem left; whether the template is still alive
        (None: the supervisor did not answer). With `expect_gone`, asks again for up to
        TEMPLATE_EXIT_SECONDS while the supervisor still sees the template."""
        end = time.monotonic() + TEMPLATE_EXIT_SECONDS
        while True:
            try:
                alive = self._control({"op": "clean"}).get("template_alive", True)
            except SandboxError:
                return None
            if alive is not True or not expect_gone or time.monotonic() >= end:
                return alive if type(alive) is bool else None
            time.sleep(0.005)


def _again(exc: StudentCodeError) -> StudentCodeError:
    """A timeout/crash of the same kind as `exc`, for a function that is not called again: its
    message says the call was not made (nothing was stopped this time) and why, with no brackets
    of its own (checks that needed the function quote it in theirs)."""
    if isinstance(exc, TimeBudgetExceeded):
        return TimeBudgetExceeded(exc.seconds, exc.function)
    assert isinstance(exc, (CallTimeout, ChildCrashed))
    name = f"`{exc.function}`" if exc.function else "Your function"
    before = times(MAX_FAILURES_PER_FUNCTION)
    if isinstance(exc, CallTimeout):
        new: StudentCodeError = CallTimeout(exc.seconds, exc.function, called=False)
        new.feedback = new.detail = (f"{name} was not called: it had timed out {before} before, each time "
                                     f"running longer than {exc.seconds:g} s; is there an endless loop?")
    else:
        new = ChildCrashed(exc.reason, exc.function, exc.detail)
        new.feedback = (f"{name} was not called: it stopped the process running your notebook {before} "
                        f"before; the last time, {exc.reason}.")
    new.args = (new.feedback,)
    return new


def _restarts_used_up(restarts: int, function: str) -> ChildCrashed:
    """The failure of a call not made because the submission's restarts are used up (nothing ran)."""
    reason = f"the process running your functions was restarted {plural(restarts, 'time')} already, the most allowed"
    exc = ChildCrashed(reason, function)
    name = f"`{function}`" if function else "Your function"
    exc.feedback = f"{name} was not called: {reason}."
    exc.args = (exc.feedback,)
    return exc


_DROPPED: StudentCodeError = ChildCrashed("an answer read ahead and not kept", "")   # see ProblemHandle._round_trip


@dataclass(eq=False)
class Ahead:
    """A call made ahead of its turn (`ProblemHandle.prefetch`) and its answer, kept until the check
    that makes this call takes it (`ProblemHandle.take`)."""
    call: tuple[str, tuple[Any, ...], dict[str, Any]]
    answer: CallResult | StudentCodeError
    process: int            # the handle's process that answered (its number among the handle's forks)
    ended: bool = False     # the process ended with this call (a hang, a crash, data out of step)
    counts: bool = False    # ... and it counts against the function once taken (a hang or a crash)
    seconds: float = 0.0    # ... and the time it took, given back to the submission's budget until taken


class ProblemHandle:
    """Calls for one problem, each answered by a process forked from the template for this problem."""

    def __init__(self, run: SubmissionRun, name: str):
        self.run = run
        self.name = name
        self.forks = 0
        self._chan: protocol.Channel | None = None
        self._pid: int | None = None
        self._greeted = False           # the current process's hello was read
        self._closed = False
        self._process = 0               # the current process's number (forks counts only those kept)
        self._ended_ahead: int | None = None   # the process a call made ahead ended, until its check takes it
        self._ended_on_purpose = False  # the current process was ended by `call_alone`: the next fork is no restart
        self._lent: list[Ahead] = []    # endings made ahead whose time the submission's budget has back until taken
        self._awaited = 0.0             # when the answer of the call last sent began to be awaited
        self.received = 0               # bytes of the replies read from this problem's processes

    def close(self, *, clean: bool = True) -> None:
        """End this problem's process; its leftovers are killed (and its folder emptied) at once,
        the next fork waiting for that to be done (`clean=False`: the submission ends next, and
        every process of it with it)."""
        self._closed = True
        for ahead in list(self._lent):          # never taken: their time is spent after all
            self._repay(ahead)
        had_process = self._chan is not None
        self._drop()
        if had_process and clean:
            self.run._clean_soon()

    def _drop(self) -> None:
        _close_quietly(self._chan)
        self._chan = None

    def _ensure(self, function: str) -> protocol.Channel:
        if self._closed:
            raise RuntimeError(f"the handle for problem {self.name!r} was closed")
        run = self.run
        failed = run.failures.get(function, [])
        if len(failed) >= MAX_FAILURES_PER_FUNCTION:
            raise _again(failed[-1])
        if self._chan is None:
            if self.forks > 0 and self._ended_ahead != self._process and not self._ended_on_purpose:
                # its process hung or crashed before
                if run.restarts >= run.limits.max_restarts:
                    raise _restarts_used_up(run.restarts, function)
                run.restarts += 1
            self._chan, self._pid, self._greeted = run._fork(function), None, False
            self._ended_on_purpose = False
            self.forks += 1
            self._process += 1
        return self._chan

    def call_alone(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) \
            -> CallResult:
        """`call`, made in a process forked for it alone: the problem's current process (if any) is
        ended first and this one after it, so the problem's next call forks afresh (neither fork is
        a restart). Its answer then depends on its arguments and the notebook's state alone, not on
        anything an earlier call of this problem left behind; answers made ahead by the ended
        process are made again in turn."""
        self._end_on_purpose()
        try:
            return self.call(name, args, kwargs)
        finally:
            self._end_on_purpose()

    def _end_on_purpose(self) -> None:
        if self._chan is not None:
            self._drop()
            self.run._clean_soon()
        self._ended_ahead = None
        self._ended_on_purpose = True

    def _greet(self, function: str) -> StudentCodeError | None:
        """Read the hello of a process just forked (after the first calls went out); the reason
        when it did not start (the process is then forgotten, as if never forked)."""
        assert self._chan is not None
        try:
            self._pid = self.run._hello(self._chan, function)
        except StudentCodeError as refused:
            self._chan = None
            self.forks -= 1
            return refused
        self._greeted = True
        return None

    def call(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> CallResult:
        """Call the notebook's `name(*args, **kwargs)`; raises a StudentCodeError when it gave no value."""
        result = self.call_many([(name, tuple(args), dict(kwargs or {}))])[0]
        if isinstance(result, StudentCodeError):
            raise result
        return result

    def call_many(self, calls: Sequence[tuple[str, Sequence[Any], Mapping[str, Any]]], *,
                  stop_at_error: bool = False) -> list[CallResult | StudentCodeError]:
        """Several calls in as few round trips as they allow, with the outcomes they would have
        made one by one: each gets its own time limit; after a call hangs or crashes, the next is
        made in a fresh process (counted as a restart), and a function that failed that way too
        often is not called. `stop_at_error`: as calls made one by one until the first that gives
        no value (the sandbox makes none after it); the list then ends with that error."""
        if not calls:
            return []
        with _on_cpu(self.run.host._call_cpu):
            return self._call_many(calls, stop_at_error)

    def _call_many(self, calls: Sequence[tuple[str, Sequence[Any], Mapping[str, Any]]], stop: bool) \
            -> list[CallResult | StudentCodeError]:
        out: list[CallResult | StudentCodeError] = []
        while len(out) < len(calls):
            rest = calls[len(out):]
            try:
                chan = self._ensure(rest[0][0])
            except StudentCodeError as refused:     # not made, as it would not be alone
                out.append(refused)
                if stop:
                    break
                continue
            # one round trip for the calls up to the next one that would be refused
            batch = [rest[0]] + list(itertools.takewhile(lambda c: not self._capped(c[0]), rest[1:]))
            answers = self._round_trip(chan, batch, stop)
            out.extend(answers)
            if stop and isinstance(answers[-1], StudentCodeError):
                break
        return out

    def _capped(self, function: str) -> bool:
        return len(self.run.failures.get(function, ())) >= MAX_FAILURES_PER_FUNCTION

    # ---- calls made ahead of their turn
    def prefetch(self, calls: Sequence[tuple[str, tuple[Any, ...], dict[str, Any]]], *,
                 running: bool = False, keep_bytes: int | None = None) -> list[Ahead]:
        """The first process of this problem answers `calls` in one round trip, before the checks
        that make them run; each answer waits for its check (`take`). The answers stop where that
        process ends (a hang, a crash), at a function that may no longer be called, or when the
        process cannot start; nothing is made ahead once the problem has a process, unless
        `running`: then the process the problem has answers them (a later wave of the checks'
        calls), when it runs and no ending made ahead waits to be taken (else nothing is made). An
        ending is charged (failure count, restart) only when its check takes it: until then the
        calls made in turn go on as if that process were alive (a fresh process then is no restart),
        and with the time it took given back to the submission's budget (see `take`).
        The answers held come to at most `keep_bytes` (the run's `prefetch_bytes` by default)."""
        if running:
            if self._chan is None or self._ended_ahead is not None:
                return []
        elif self.forks > 0:
            return []
        if not calls or self._closed or self._capped(calls[0][0]):
            return []
        with _on_cpu(self.run.host._call_cpu):
            try:
                chan = self._ensure(calls[0][0])
            except StudentCodeError:
                return []
            batch = list(itertools.takewhile(lambda c: not self._capped(c[0]), calls))
            failed: list[StudentCodeError] = []
            kept: list[bool] = []
            answers = self._round_trip(chan, batch, False, failed.append,
                                       keep_bytes=self.run.prefetch_bytes if keep_bytes is None else keep_bytes,
                                       kept=kept)
        out = [Ahead(call, answer, self._process) for call, answer in zip(batch, answers)]
        if not all(kept):
            # Answers past the byte budget were read and dropped (each is made again in turn, as if
            # never made ahead): held until their checks, every answer of a problem's checks could
            # otherwise be return_mb at once in the grader. Where the process ended on a dropped
            # call, the calls made in turn go to a fresh process, no restart (as above).
            out = out[:kept.index(False)]
            if self._chan is None and self.forks > 0:
                self._ended_ahead = self._process
            return out
        if out and self._chan is None:          # the process ended with the last answer
            if self.forks == 0:                 # it never started: the first call is made again in turn
                return out[:-1]
            out[-1].ended, out[-1].counts = True, bool(failed)
            self._ended_ahead = self._process
            # One by one, the calls of the checks before this one are all made before it: the time
            # it took (up to call_seconds for a hang) is given back to the submission's budget until
            # its check takes it, so that those calls have the time they would have had.
            # Measured from the wait for its answer (or from this round trip's start, for a process
            # found ended as the calls were sent), and never more than one call may take.
            out[-1].seconds = min(max(time.monotonic() - self._awaited, 0.0), self.run.limits.call_seconds)
            self.run.deadline += out[-1].seconds
            self._lent.append(out[-1])
        return out

    def _repay(self, ahead: Ahead) -> None:
        """The time of an ending made ahead (see `prefetch`) is the submission's budget's again."""
        if ahead in self._lent:
            self._lent.remove(ahead)
            self.run.deadline -= ahead.seconds

    def _stands(self, process: int) -> bool:
        """Would `process` still be answering, had only the calls made in turn been made? Yes while
        it runs, and when a call made ahead (not yet taken) ended it and the calls made in turn
        since went to one fresh process, still running."""
        alive = self._chan is not None
        if self._ended_ahead != process:
            return alive and self._process == process
        return (not alive and self._process == process) or (alive and self._process == process + 1)

    def take(self, ahead: Ahead) -> CallResult | StudentCodeError | None:
        """The answer made ahead, as the call made now would give it: None when it no longer can
        (the process that answered would have ended before it, the function may no longer be
        called, the time budget is spent), the call then to be made again. An ending's time is
        charged to the budget now (see `prefetch`); a hang stopped by the end of the budget stands
        even so, as the call made now would have been stopped by it too."""
        name = ahead.call[0]
        if ahead.ended:
            self._repay(ahead)
        spent = self.run.left <= 0 and not (ahead.ended and isinstance(ahead.answer, TimeBudgetExceeded))
        if self._capped(name) or spent or not self._stands(ahead.process):
            return None
        if ahead.ended:                         # the call ends its process now
            self._ended_ahead = None
            if self._chan is not None:          # the process the calls made in turn went to since
                self._drop()
                self.run._clean_soon()
            if ahead.counts:
                self._broken(name, ahead.answer)    # type: ignore[arg-type]
        return ahead.answer

    def _round_trip(self, chan: protocol.Channel, calls: Sequence[tuple[str, Sequence[Any], Mapping[str, Any]]],
                    stop: bool, failed: Callable[[StudentCodeError], None] | None = None, *,
                    keep_bytes: int | None = None, kept: list[bool] | None = None) \
            -> list[CallResult | StudentCodeError]:
        """The calls sent together to the current process; the answers stop early where that
        process ended (a hang, a crash, data out of step), or at the first error with `stop`.
        A hang or crash is counted against its function (`_broken`), or handed to `failed`.
        With `keep_bytes`: once the replies read come to more bytes, each later answer is read and
        dropped (_DROPPED in the list, never charged), and `kept` gets False for it (True for the others)."""
        received = 0

        def charge(name: str, exc: StudentCodeError) -> StudentCodeError:
            if keep_bytes is not None and received > keep_bytes:
                return _DROPPED                 # not charged: the call is made again in turn
            if failed is None:
                return self._broken(name, exc)
            failed(exc)
            return exc
        first = calls[0][0]
        requests = [{"name": n, "args": list(a), "kwargs": dict(k)} for n, a, k in calls]
        data = protocol.frame({"op": "call", **requests[0]} if len(requests) == 1 else
                              {"op": "calls", "calls": requests, "stop": stop})
        run = self.run
        out: list[CallResult | StudentCodeError] = []
        self._awaited = time.monotonic()
        try:
            chan.send_frame(data, deadline=self._awaited + CONTROL_SECONDS)
        except (OSError, TimeoutError) as exc:
            not_started = None if self._greeted else self._greet(first)
            if not_started is not None:
                return [not_started]
            return [charge(first, self._lost(first, exc))]
        if not self._greeted:
            not_started = self._greet(first)
            if not_started is not None:
                return [not_started]
        for name, _, _ in calls:
            limit = run.limits.call_seconds
            self._awaited = time.monotonic()
            deadline = min(self._awaited + limit, run.deadline)
            try:
                msg = chan.recv(trusted=True, deadline=deadline, caps=run.call_caps)
            except TimeoutError:
                self._drop()
                run._kill_problem()
                stopped: StudentCodeError = (TimeBudgetExceeded(run.limits.submission_seconds, name)
                                             if run.left <= 0 else CallTimeout(limit, name))
                out.append(charge(name, stopped))
                break
            except (EOFError, OSError) as exc:
                out.append(charge(name, self._lost(name, exc)))
                break
            except protocol.ProtocolError as exc:
                self._drop()
                run._kill_problem()
                out.append(BadReturnValue(f"data that could not be read ({exc})", name))
                break
            reply = self._reply(msg, name)
            self.received += chan.last_size
            if keep_bytes is not None:
                received += chan.last_size
                if received > keep_bytes:
                    reply = _DROPPED            # read, not held
            out.append(reply)
            if self._chan is None or (stop and isinstance(reply, StudentCodeError)):
                break
        if kept is not None:
            kept.extend(answer is not _DROPPED for answer in out)
        return out

    def _lost(self, name: str = "", seen: BaseException | None = None) -> ChildCrashed:
        """The problem process's socket closed (`seen`: what reading or writing it raised)."""
        pid = self._pid
        self._drop()
        reason, how = self.run._exit_report(pid)
        what = "" if seen is None else f"{type(seen).__name__}: {seen}; "
        return ChildCrashed(reason, name, f"{what}{how}")

    def _broken(self, name: str, exc: StudentCodeError) -> StudentCodeError:
        """A timeout or crash: counted against the function (see MAX_FAILURES_PER_FUNCTION)."""
        self.run.failures.setdefault(name, []).append(exc)
        return exc

    def _reply(self, msg: dict[str, Any], name: str) -> CallResult | StudentCodeError:
        op = msg["op"]
        keep = int(self.run.limits.output_kb) * 1024
        if op == "result":
            return CallResult(value=msg.get("value"), warnings=_texts(msg, "warnings", 20),
                              mutated=_texts(msg, "mutated", 50, 200), seconds=_seconds(msg),
                              stdout=_text(msg, "stdout", keep + 200))
        if op == "error":
            kind = msg.get("kind")
            error: StudentCodeError
            if kind == "missing":
                magic, cell = self.run.skipped_definer(name)
                unrun = "" if magic else self.run.unrun_definer(name)
                error = FunctionMissing(name, magic, cell or unrun, unrun=bool(unrun))
            elif kind == "not_callable":
                error = NotCallable(name, _text(msg, "type", 100))
            elif kind == "raised":
                error = StudentRaised(_text(msg, "type", 100) or "an exception", _text(msg, "message"),
                                      _texts(msg, "where", 10, 400), function=name)
            elif kind == "bad_return":
                error = BadReturnValue(_text(msg, "description", 400) or "a value that cannot be graded", name)
            else:
                self._drop()
                self.run._kill_problem()
                return ChildCrashed(f"it sent an unexpected reply ({str(kind)[:40]!r})", name)
            error.stdout = _text(msg, "stdout", keep + 200)
            return error
        self._drop()
        self.run._kill_problem()
        return ChildCrashed(f"it sent an unexpected message ({op[:40]!r})", name)
