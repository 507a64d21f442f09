"""A warm worker kept between commands: `course serve ASSIGNMENT` starts one grading worker (its
sandbox host and grader session, as a batch's worker has: autograder.batch.worker) and keeps it,
listening on a Unix socket; `course autograde ASSIGNMENT --student ID` then grades on it instead of
starting a worker of its own, so a freshly submitted notebook's feedback waits only for its own
grading, not for numpy, the sandbox, pytest and the graders' collection.

What is shared, and what is not:
- the server is a trusted process like a batch's worker: it never imports student code, and each
  submission it grades gets its own sandboxed processes (namespaces, scratch, limits; a fresh
  problem process per problem), exactly as in a batch;
- only the server's own user may use it: the socket lies in a folder of the temporary directory
  that this user owns and no one else may enter (0700, checked by both ends before use), and each
  end checks the other's user id (SO_PEERCRED) on connecting;
- a command grades on it only when it would grade the same way itself: it sends an identity (the
  engine's and the instructor code's version, course.yml, the assignment's release, --insecure)
  and the server answers only an equal one. A server whose files changed since it started (an
  instructor edited a grader) is stale: it says so, and stops; the command then grades as if no
  server ran. A server stopped while it grades (Ctrl-C, SIGTERM) closes the connection without a
  result: the command's pool then grades that submission on a worker of its own (batch.pool), so
  stopping a server never costs a student a crashed result. Everything else (results.json, the
  page, the gradebook) stays the command's work.

The client half (`connect`, `greet`) imports the standard library only, so `course autograde` can
look for a server before its own imports (autograder.cli), as it forks its early worker there.

    with the server: course serve transformer-block          (Ctrl-C, SIGTERM, or --idle-minutes)
    client:          started = connect(course_dir, "transformer-block")     # None: no server
                     ok = greet(started, identity(course, assignment, insecure=False))
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import selectors
import socket
import stat
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import raise_on_sigterm
from ..text import minutes
from .launch import StartedWorker, log_folder
from .wire import Connection, WireClosed

if TYPE_CHECKING:
    from ..config import Assignment, Course

CONNECT_SECONDS = 0.5          # a server that does not take the connection in this time is not used
HELLO_SECONDS = 5.0            # nor one that does not answer the greeting (busy with another command)
GREETING_SECONDS = 300.0       # how long the server waits for a connected command's greeting: the
                               # command connects as it starts and greets once it has read the course,
                               # which may first wait for the previous command's gradebook commit
IDLE_MINUTES = 60.0            # a server that grades nothing for this long stops (course serve --idle-minutes)
SOCKET_FOLDER = "autograder-serve-"     # + the user id: the folder of this user's servers' sockets
STALE = "stale"                # a server's answer when its own files changed since it started


def socket_folder() -> Path:
    return Path(tempfile.gettempdir()) / f"{SOCKET_FOLDER}{os.getuid()}"


def socket_path(course_dir: str | Path, assignment: str) -> Path:
    """Where the server of this course folder's `assignment` listens (short: a socket's path is
    limited to about a hundred bytes)."""
    root = os.path.realpath(course_dir)
    name = hashlib.sha256(f"{root}\0{assignment}".encode()).hexdigest()[:24]
    return socket_folder() / f"{name}.sock"


def _private(folder: Path) -> bool:
    """Whether `folder` is a real folder of this user that no one else may enter or change."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def peer_uid(sock: socket.socket) -> tuple[int, int]:
    """(pid, user id) of the process at the other end of a connected Unix socket."""
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                         struct.calcsize("3i")))
    return pid, uid


class Served:
    """The server's side of one command's connection, seen as a worker's process by the pool
    (`batch.launch.Process`): it is "running" while the connection is open and has "exited" once
    it is closed. Stopping it closes the connection only: the server goes on serving."""

    def __init__(self, pid: int, conn: Connection):
        self.pid = pid
        self.conn = conn

    def poll(self) -> int | None:
        return 0 if self.conn.sock.fileno() < 0 else None

    def wait(self, timeout: float | None = None) -> int:
        return 0


def connect(course_dir: str | Path, assignment: str) -> StartedWorker | None:
    """This user's server for the course folder's `assignment`, connected, or None when there is
    none (or its socket's folder is not this user's alone, or another user answers on it)."""
    path = socket_path(course_dir, assignment)
    if not _private(path.parent):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_SECONDS)
        sock.connect(str(path))
        pid, uid = peer_uid(sock)
        if uid != os.getuid():
            raise PermissionError(f"{path}: answered by user {uid}")
        sock.settimeout(None)
    except OSError:
        sock.close()
        return None
    conn = Connection(sock)
    try:
        log = log_folder() / "served.log"          # what the pool says if the server goes away
        log.write_text(f"the `course serve` server (pid {pid}) closed the connection\n")
    except OSError:
        conn.close()
        return None
    return StartedWorker(popen=Served(pid, conn), conn=conn, log=log, own_folder=True)


def is_served(started: StartedWorker) -> bool:
    return isinstance(started.popen, Served)


def greet(started: StartedWorker, identity: str, *, timeout: float = HELLO_SECONDS) -> str | None:
    """Ask the server to grade for a command of this `identity`: None when it agreed (its "ready"
    message is then `started.greeting`), else why not (the connection is then closed)."""
    conn = started.conn
    try:
        conn.send({"op": "hello", "identity": identity})
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(conn.sock, selectors.EVENT_READ)
            while (msg := conn.pending()) is None:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise TimeoutError("no answer (busy with another command)")
                conn.fill()
    except (OSError, WireClosed, ValueError) as exc:
        conn.close()
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if msg.get("op") == "ready":
        started.greeting = msg
        return None
    conn.close()
    return str(msg.get("message") or msg.get("op"))


def identity(course: Course, assignment: Assignment, *, insecure: bool, version: str | None = None) -> str:
    """What a grade given by a server depends on beyond the submission and the task: the graders'
    version (grading.fingerprint.graders_version, `version` when already computed: the engine, the
    instructor code and the files under assignments/ it imports, the assignment's release, which tells
    the notebook cells grading skips, and its course.yml entry), course.yml as written and --insecure."""
    from ..grading.fingerprint import graders_version
    from ..notebooks import hash_regular

    digest = hashlib.sha256()
    digest.update(f"graders {version or graders_version(course, assignment)}\0".encode())
    config = course.root / "course.yml"
    digest.update(b"course.yml\0")
    if config.is_file():
        hash_regular(config, digest)
    digest.update(f"\0insecure {insecure}\0python {sys.executable}".encode())
    return digest.hexdigest()


# ----------------------------------------------------------------------------- the server

def _listen(path: Path) -> socket.socket:
    """The listening socket at `path` (its folder made private first); CourseError when a server
    already answers there or the folder is not this user's alone."""
    from ..errors import CourseError

    folder = path.parent
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise CourseError(f"{folder}: cannot make the servers' socket folder ({exc.strerror})") from None
    if not _private(folder):
        raise CourseError(f"{folder}: not a folder of this user's alone (mode 0700); remove it and start again")
    if os.path.lexists(path):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(CONNECT_SECONDS)
            probe.connect(str(path))
            pid, _ = peer_uid(probe)
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()                  # left by a server that was killed
        else:
            raise CourseError(f"a server already serves this assignment of this course (pid {pid}); "
                              "stop it first")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)                  # the socket itself: this user only, from its creation
        try:
            sock.bind(str(path))
        finally:
            os.umask(old)
        sock.listen(8)
    except OSError as exc:
        sock.close()
        raise CourseError(f"{path}: cannot listen ({exc.strerror or exc})") from None
    return sock


class Terminated(SystemExit):
    """SIGTERM, raised where the server is (it then closes its worker and socket, and exits 0)."""


class Server:
    """One warm worker for one assignment, answering one command at a time on its socket."""

    def __init__(self, course_dir: str | Path, assignment: str, *, insecure: bool = False,
                 log: Callable[[str], None] = print):
        from ..config import load_course

        self.course = load_course(course_dir)
        self.assignment = self.course.assignment(assignment)
        self.insecure = insecure
        self.log = log
        self.path = socket_path(self.course.root, self.assignment.name)
        self.identity = identity(self.course, self.assignment, insecure=insecure)
        self.graded = 0
        self._listener: socket.socket | None = None
        self._inode: tuple[int, int] | None = None
        self._restore: Callable[[], None] | None = None    # puts SIGTERM's handler before `start` back
        self.worker: Any = None

    def start(self) -> None:
        """Listen, then warm the worker up (SandboxUnavailable, a CourseError, when it cannot start).
        From now on until `close`, SIGTERM stops the server as Ctrl-C does, closing what it holds."""
        self._restore = raise_on_sigterm(Terminated, 0)
        self._listener = _listen(self.path)
        st = os.stat(self.path)
        self._inode = (st.st_dev, st.st_ino)
        self.worker = self._new_worker()

    def _new_worker(self) -> Any:
        from .worker import ONE_THREAD, Worker

        os.environ.update(ONE_THREAD)          # before numpy is imported (as in a batch's worker)
        gc.disable()                           # start-up's objects live as long as the worker: frozen
        try:
            worker = Worker(self.course, self.assignment.name, insecure=self.insecure)
        finally:
            gc.freeze()
            gc.enable()
        return worker

    def serve(self, *, idle_seconds: float = IDLE_MINUTES * 60) -> str:
        """Answer commands until stopped (SIGTERM, Ctrl-C), idle for `idle_seconds`, or stale; why it stopped."""
        assert self._listener is not None and self.worker is not None
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(self._listener, selectors.EVENT_READ)
                while True:
                    if not sel.select(idle_seconds):
                        return f"nothing to grade for {minutes(idle_seconds / 60)}"
                    try:
                        sock, _ = self._listener.accept()
                    except OSError:
                        continue
                    with sock:
                        if self._answer(sock) == STALE:
                            return "stale: the graders, course.yml or the release changed since it started"
                    if self.worker.recycle:        # its memory grew: a fresh one for the next command
                        self.worker.close()
                        self.worker = self._new_worker()
        except Terminated:
            return "SIGTERM"

    def _answer(self, sock: socket.socket) -> str | None:
        from .worker import answer, rss_mb

        try:
            pid, uid = peer_uid(sock)
            if uid != os.getuid():
                return None                    # another user: not answered at all
            sock.settimeout(GREETING_SECONDS)
            conn = Connection(sock)
            hello = conn.recv()
            if hello.get("op") != "hello":
                return None
            if hello.get("identity") != self.identity:
                stale = self._stale()
                conn.send({"op": "failed", "message": STALE if stale else
                           "this server grades differently (--insecure, or another version of the engine)"})
                return STALE if stale else None
            sock.settimeout(None)
            conn.send({"op": "ready", "pid": os.getpid(), "layers": list(self.worker.info.layers),
                       "missing": list(self.worker.info.missing), "rss_mb": round(rss_mb(), 1)})
        except (OSError, WireClosed, ValueError):
            return None
        before = self.worker.graded
        answer(conn, self.worker)
        done = self.worker.graded - before
        self.graded += done
        if done:
            self.log(f"graded {done} submission{'s' if done != 1 else ''} for pid {pid} ({self.graded} in all)")
        return None

    def _stale(self) -> bool:
        """Whether this server's files changed since it started (then it no longer grades as a new
        command would)."""
        from ..config import load_course

        try:
            course = load_course(self.course.root)
            return identity(course, course.assignment(self.assignment.name), insecure=self.insecure) != self.identity
        except Exception:  # noqa: BLE001 - a course.yml that no longer loads: stale as well
            return True

    def close(self) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            with contextlib.suppress(OSError):   # only our own socket: a newer server's stays
                st = os.stat(self.path)
                if (st.st_dev, st.st_ino) == self._inode:
                    self.path.unlink()
        if self.worker is not None:
            worker, self.worker = self.worker, None
            worker.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
