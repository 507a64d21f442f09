"""Starting a grading worker process (autograder.batch.worker) and holding its end of the connection.

Standard library only, so that `course autograde --student ID` can start its worker before the
command's own imports: the worker's start-up (numpy, the sandbox, pytest and the graders'
collection) then runs on one core while the command imports, reads the course and prepares the
feedback page on the other (see `autograder.cli`). `LocalPool` starts its workers here too.

    started = launch(course_dir, assignment, insecure=False, logs=folder)   # a new interpreter
    started = fork_worker(course_dir, assignment, insecure=False)         # this process, forked
    ...                                   # LocalPool(..., early=[started]) adopts it, or:
    started.close()                       # asks it to quit (it leaves once it has started)

`fork_worker` is for the command's very start, when this process holds no thread and has imported
little: the worker then begins at once, without an interpreter's start-up (its initialisation,
`site` and the packages' path hooks), which on a loaded machine waits for the disk as well. A
batch's workers are forked there too, one per slot of its pool, each for that slot's CPU.
"""
from __future__ import annotations

import contextlib
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Protocol

from .. import tempdirs
from .wire import Connection, socket_pair

QUIT_SECONDS = 30.0          # for a worker asked to quit while it starts (its start-up is bounded)
# (an interrupted command waits for none of its workers: they are killed at once, `kill=True` below)

# This process's ends of the connections to the workers it forked: a worker forked after another
# closes its copy of them at once, so that each worker's connection has one other end (the
# driver's: closing it is the worker's signal to leave, and no worker can speak for the driver).
_forked_ends: weakref.WeakSet[Connection] = weakref.WeakSet()


class Process(Protocol):
    """What is needed of a worker's process (`subprocess.Popen`, or `Forked`)."""
    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class Forked:
    """A child forked by this process, waited for as `subprocess.Popen` waits for its own."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:          # reaped elsewhere
                self.returncode = -1
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None and self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:          # reaped elsewhere
                self.returncode = -1
            else:
                self.returncode = os.waitstatus_to_exitcode(status)
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            time.sleep(0.005)
        return code


@dataclass
class StartedWorker:
    """A worker process just started: the process, our end of its connection, its stderr log."""
    popen: Process
    conn: Connection
    log: Path
    own_folder: bool = False     # the log's folder was made for it (removed by `close`)
    greeting: dict[str, Any] | None = None   # its "ready" message, when already read (a server's: batch.serve)

    def close(self, *, kill: bool = False) -> None:
        """A worker that was never used: ask it to quit and wait for it (killed after QUIT_SECONDS;
        with `kill`, at once: the command was interrupted). Harmless for one already stopped (by the
        pool that adopted it, which removes its log folder)."""
        stop(self.conn, self.popen, kill=kill)
        if self.own_folder:
            shutil.rmtree(self.log.parent, ignore_errors=True)


def stop(conn: Connection, popen: Process, *, kill: bool = False) -> None:
    """Stop a worker: ask it to quit and wait up to QUIT_SECONDS (`kill`: at once), then kill its
    process group if it is still there; its connection is closed either way."""
    stop_all([(conn, popen)], kill=kill)


def stop_all(workers: list[tuple[Connection, Process]], *, kill: bool = False) -> None:
    """`stop` for several workers at once: each is asked to quit before any is waited for, so
    that they wind down (their sandboxes, their grader sessions) side by side."""
    for conn, _ in workers:
        if not kill:
            try:
                conn.send({"op": "quit"})
            except OSError:
                pass
        conn.close()
    deadline = time.monotonic() + (0 if kill else QUIT_SECONDS)
    for _, popen in workers:
        stopped = exited(popen, max(deadline - time.monotonic(), 0.0))
        if not stopped and popen.poll() is None:
            try:
                os.killpg(popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            popen.wait()


def exited(popen: Process, timeout: float) -> bool:
    """Whether the worker ended (and is reaped) within `timeout` seconds. Woken by its exit, where
    this system has pidfds, rather than by polling: `Popen.wait` with a timeout sleeps between
    checks, up to 50 ms at a time, for a worker that takes a few hundred ms to wind down."""
    if popen.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(popen.pid)          # our child, not reaped yet: its pid is still its own
    except (AttributeError, OSError):
        fd = None
    try:
        if fd is not None:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if not poller.poll(math.ceil(timeout * 1000)):
                return popen.poll() is not None
        popen.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    finally:
        if fd is not None:
            os.close(fd)
    return True


LOG_PREFIX = "autograder-workers-"
LEGACY_LOG_DAYS = 1.0        # folders without an owner in their name (earlier versions) older than this go too


def log_folder() -> Path:
    """A new temporary folder for the workers' logs, named after this process; the folders of this
    user's earlier commands that were killed (so never removed their own) are removed first."""
    tempdirs.remove_stale(LOG_PREFIX, legacy_days=LEGACY_LOG_DAYS)
    return Path(tempfile.mkdtemp(prefix=tempdirs.owned_prefix(LOG_PREFIX)))


def _log_file(logs: Path | None) -> Path:
    folder = logs if logs is not None else log_folder()
    return folder / f"worker-{len(os.listdir(folder)) + 1}.log"


def launch(course_dir: str, assignment: str, *, insecure: bool, cpu: int | None = None,
           logs: Path | None = None, module: str = "autograder.batch.worker") -> StartedWorker:
    """Start `python -m <module>` (the grading worker; tests give their own) for the course folder
    `course_dir` (absolute) in its own session, its stderr in a log file under `logs` (default: a
    new temporary folder)."""
    conn, fd = socket_pair()
    log = _log_file(logs)
    argv = [sys.executable, "-m", module, "--course-dir", course_dir,
            "--assignment", assignment, "--fd", str(fd)] + (["--insecure"] if insecure else [])
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    try:
        with open(log, "wb") as err:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                     pass_fds=(fd,), start_new_session=True, cwd=course_dir)
    except BaseException:
        conn.close()
        raise
    finally:
        os.close(fd)
    return StartedWorker(popen=popen, conn=conn, log=log, own_folder=logs is None)


def fork_worker(course_dir: str, assignment: str, *, insecure: bool, cpu: int | None = None,
                logs: Path | None = None) -> StartedWorker:
    """The worker of `launch`, as a fork of this process (which must hold no other thread): in its
    own session, in `course_dir`, stdin and stdout on /dev/null, stderr in a log file under `logs`
    (default: a new temporary folder); it serves as `python -m autograder.batch.worker --cpu CPU`
    would, then exits."""
    if threading.active_count() != 1:
        raise RuntimeError("fork_worker: this process runs other threads")
    log = _log_file(logs)
    err = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    conn, fd = socket_pair()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()                     # nothing of ours is written twice
    try:
        pid = os.fork()
    except BaseException:
        conn.close()
        os.close(fd)
        os.close(err)
        raise
    if pid == 0:
        for other in list(_forked_ends):
            other.close()
        _serve_forked(conn, fd, err, course_dir, assignment, insecure, cpu)
    os.close(fd)
    os.close(err)
    _forked_ends.add(conn)
    return StartedWorker(popen=Forked(pid), conn=conn, log=log, own_folder=True)


def _serve_forked(ours: Connection, fd: int, err: int, course_dir: str, assignment: str, insecure: bool,
                  cpu: int | None) -> NoReturn:
    """The forked worker: never returns into the code that forked it."""
    code = 1
    try:
        os.setsid()
        ours.close()
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        os.close(null)
        os.close(err)
        os.chdir(course_dir)
        from .worker import serve

        code = serve(fd, course_dir, assignment, insecure=insecure, cpu=cpu)
    except BaseException:  # noqa: BLE001 - the worker's end: its log says why, the driver sees it stop
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)
