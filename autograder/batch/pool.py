"""Where a batch's submissions are graded: warm workers (autograder.batch.worker), each with its
own sandbox host and grader session, fed one submission at a time as they become free.

- `InProcessPool`: one warm worker in this process (a single worker, or a single submission,
  unless worker processes were started early for the batch: see batch.launch);
- `LocalPool`: N worker processes on this machine;
- `autograder.batch.cluster.DaskPool`: one warm worker in each worker of a Dask cluster.

All three have the same interface (`make_pool` picks one):

    with LocalPool(course_dir, assignment, workers=2) as pool:
        info = pool.start()                   # every worker ready, or SandboxUnavailable
        for task, result in pool.run(tasks):  # results as they come, in any order
            ...

Each worker's sandbox is held on one CPU (course.yml `sandbox_cpus`), and a LocalPool's worker
process with it once warm (SandboxHost.hold_caller); a LocalPool gives its workers distinct CPUs
in turn (worker i, and whatever replaces it, on the i-th CPU this process may use) rather than
letting each choose by the load it sees: two workers starting together under load from other
processes often chose the same CPU, and then shared one core between them.

A worker that dies or stops answering (the grader's own process, not a student's: those are
bounded by the sandbox) costs only the submission it was grading, and is replaced. A worker that
died (killed by the kernel's out-of-memory killer, a signal from outside) has its submission graded
once more by the next worker free, and `notice` says so; one that died on it twice, or gave no answer
within the submission's time limit (a second wait would be as long), makes it a crashed result.
A worker whose memory grew asks to be replaced and is, between two submissions.
A `course serve` server's worker (batch.serve) that goes away mid-submission (Ctrl-C or SIGTERM on
the server) costs nothing: the server stopped, not the grading, so the submission is graded again
by a worker of the pool's own that replaces it, and `notice` says so.
"""
from __future__ import annotations

import contextlib
import json
import os
import selectors
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .. import cpus
from ..config import Assignment, Course, load_course
from ..errors import SandboxUnavailable
from ..grading.results import SubmissionResult, result_from_dict
from .launch import Process, StartedWorker, launch, log_folder, stop, stop_all
from .serve import Served
from .wire import ATTACHED, Connection, WireClosed
from .worker import Task, Worker, peak_rss_mb, rss_mb

START_SECONDS = 300.0          # a worker's start-up (imports, sandbox, graders), generous for a loaded machine
SLACK_SECONDS = 300.0          # beyond the submission's own budget before a silent worker is replaced
WORKER_MODULE = "autograder.batch.worker"   # what a worker process runs (`python -m`)


@dataclass(frozen=True)
class PoolInfo:
    layers: tuple[str, ...]
    missing: tuple[str, ...]
    workers: int


@dataclass
class WorkerStats:
    """What the driver knows about one worker process (for the benchmark and recycling)."""
    pid: int
    graded: int = 0
    rss_mb: float = 0.0
    peak_mb: float = 0.0
    started: float = field(default_factory=time.monotonic)


@dataclass
class _Proc:
    popen: Process
    conn: Connection
    log: Path
    stats: WorkerStats
    slot: int                   # which of the pool's workers it is (a replacement takes the slot)
    task: Task | None = None    # the submission it is grading
    queued: Task | None = None  # sent too, graded next (only while a task is being graded)
    since: float = 0.0
    ready: bool = False


class WorkerFailed(SandboxUnavailable):
    """A worker could not start (its own message, one line)."""


class GradingPool(Protocol):
    """What a batch needs of a pool (InProcessPool, LocalPool, cluster.DaskPool)."""

    def start(self) -> PoolInfo: ...

    def run(self, tasks: Iterable[Task]) -> Iterator[tuple[Task, SubmissionResult]]: ...

    def close(self, *, kill: bool = False) -> None:
        """Stop the workers: asked to finish, or with `kill` (the batch was interrupted or failed, and
        no result of theirs is wanted any more) killed at once, whatever they are grading."""
        ...

    def encoded(self, result: SubmissionResult) -> bytes | None:
        """`result_to_dict(result)` as JSON, when its worker sent it so (taken once; else None)."""
        ...

    @property
    def stats(self) -> list[WorkerStats]: ...


def _crashed(assignment: Assignment, student: str, seed: int, on_roster: bool, reason: str,
             layers: tuple[str, ...]) -> SubmissionResult:
    """grading.engine's crashed result (imported when needed: the engine brings pytest)."""
    from ..grading.engine import crashed_result as crashed

    return crashed(assignment, student, seed, on_roster, reason, layers)


class InProcessPool:
    """One warm worker in this process (`course`, when given, is the course already loaded)."""

    def __init__(self, course_dir: str | Path, assignment: str, *, insecure: bool = False,
                 course: Course | None = None):
        self.course_dir = str(Path(course_dir).resolve())
        self.course = course
        self.assignment_name = assignment
        self.insecure = insecure
        self.size = 1
        self._worker: Worker | None = None
        self._stats = WorkerStats(pid=os.getpid())

    def __enter__(self) -> InProcessPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> PoolInfo:
        self._worker = Worker(self.course or self.course_dir, self.assignment_name, insecure=self.insecure)
        return PoolInfo(self._worker.info.layers, self._worker.info.missing, 1)

    @property
    def stats(self) -> list[WorkerStats]:
        return [self._stats]

    def encoded(self, result: SubmissionResult) -> bytes | None:
        return None

    def run(self, tasks: Iterable[Task]) -> Iterator[tuple[Task, SubmissionResult]]:
        if self._worker is None:
            raise RuntimeError("InProcessPool.run before start()")
        for task in tasks:
            result = self._worker.grade(task)
            self._stats.graded += 1
            self._stats.rss_mb = rss_mb()
            self._stats.peak_mb = peak_rss_mb()
            yield task, result

    def close(self, *, kill: bool = False) -> None:
        # `kill` changes nothing here: an interrupt in this process has stopped its grading already
        if self._worker is not None:
            self._worker.close()
            self._worker = None


available_cores = cpus.available_cores      # affinity, capped by the cgroup's CPU quota


def make_pool(course_dir: str | Path, assignment: str, *, workers: int | None = None, scheduler: str | None = None,
              submissions: int | None = None, insecure: bool = False, course: Course | None = None,
              early: Sequence[StartedWorker] = (), notice: Callable[[str], None] | None = None) -> GradingPool:
    """The pool for a batch: a Dask cluster's workers when `scheduler` is given; else `workers`
    local worker processes (default: the cores available), no more than there are `submissions`.
    A single submission, or a single worker where this process may use one core only, is graded
    in this process (with `course`, the course already loaded, when given), unless `early` holds
    worker processes already started for this course and assignment (batch.launch): they then serve
    as the pool's first workers, in order (any beyond its size are stopped). `early` is used or
    closed here. `notice`: told, in one line, when a `course serve` server among `early` stopped
    while grading (its submission is then graded without it), or a worker died and its submission
    is graded again.

    A lone worker for several submissions is a process of its own (a LocalPool of one): in this
    process, grading would wait while each result is written out (results.json, its fsync, the
    page), whereas a worker process grades its next submission meanwhile, on the other core."""
    if scheduler:
        for started in early:
            started.close()
        from .cluster import DaskPool
        return DaskPool(scheduler, course_dir, assignment, insecure=insecure)
    cores = available_cores()
    n = workers if workers is not None else cores
    if n < 1:
        for started in early:
            started.close()
        raise ValueError("workers must be at least 1")
    if submissions is not None:
        n = min(n, max(submissions, 1))
    alone = (submissions is not None and submissions <= 1) or cores < 2
    if n == 1 and not early and alone:
        return InProcessPool(course_dir, assignment, insecure=insecure, course=course)
    return LocalPool(course_dir, assignment, workers=n, insecure=insecure, early=early, course=course, notice=notice)


class LocalPool:
    """`workers` worker processes; with `early`, workers already started for this course folder and
    assignment (batch.launch) serve as the first ones, slot by slot (each started for the CPU that
    `cpu_of` gives its slot; those beyond `workers` are stopped). `course`: the course already
    loaded, if it was. `notice`: told when a `course serve` server stopped while grading, or a worker
    died and its submission is graded again."""

    def __init__(self, course_dir: str | Path, assignment: str, *, workers: int, insecure: bool = False,
                 early: Sequence[StartedWorker] = (), course: Course | None = None,
                 notice: Callable[[str], None] | None = None):
        if workers < 1:
            for started in early:
                started.close()
            raise ValueError("workers must be at least 1")
        for started in early[workers:]:         # more were started than this pool needs
            started.close()
        early = early[:workers]
        self.course_dir = str(Path(course_dir).resolve())
        self.assignment_name = assignment
        self.size = workers
        self.insecure = insecure
        self.notice = notice
        course = course if course is not None else load_course(self.course_dir)
        self.assignment: Assignment = course.assignment(assignment)
        self.cpus: tuple[int, ...] = cpus.affinity() if course.sandbox_cpus == "spread" else ()
        self.retired: list[WorkerStats] = []
        self.replaced = 0
        self._procs: list[_Proc] = []
        self._sel = selectors.DefaultSelector()
        self._early = deque(early)
        self._logs = early[0].log.parent if early else log_folder()
        self._other_logs = {started.log.parent for started in early} - {self._logs}   # removed on closing
        self._layers: tuple[str, ...] = ()
        self._missing: tuple[str, ...] = ()
        self._ids = 0
        self._encoded: dict[str, tuple[SubmissionResult, bytes]] = {}   # student -> (result, its JSON)
        self._lost_once: set[str] = set()   # students whose worker died under them once (graded again)

    # ---- lifecycle
    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> PoolInfo:
        """Start the workers and wait until each is ready (SandboxUnavailable when one cannot)."""
        for slot in range(self.size):
            self._spawn(slot)
        deadline = time.monotonic() + START_SECONDS
        while any(not p.ready for p in self._procs):
            self._wait_ready(deadline)
        return PoolInfo(self._layers, self._missing, len(self._procs))

    def cpu_of(self, slot: int) -> int | None:
        """The CPU for the sandbox of the pool's `slot`-th worker (None: the worker chooses)."""
        return self.cpus[slot % len(self.cpus)] if len(self.cpus) > 1 else None

    def _spawn(self, slot: int) -> _Proc:
        if self._early:                           # started before this pool, for its first slots
            started = self._early.popleft()
        else:
            started = launch(self.course_dir, self.assignment_name, insecure=self.insecure, cpu=self.cpu_of(slot),
                             logs=self._logs, module=WORKER_MODULE)
        proc = _Proc(popen=started.popen, conn=started.conn, log=started.log, stats=WorkerStats(pid=started.popen.pid),
                     slot=slot)
        if started.greeting is not None:          # ready already (a server's worker: batch.serve)
            self._ready(proc, started.greeting)
        self._procs.append(proc)
        self._sel.register(proc.conn.sock, selectors.EVENT_READ, proc)
        return proc

    def _wait_ready(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WorkerFailed("a grading worker did not start in time")
        for key, _ in self._sel.select(timeout=min(left, 1.0)):
            proc: _Proc = key.data
            try:
                proc.conn.fill()
            except (WireClosed, OSError):
                raise WorkerFailed(f"a grading worker stopped while starting: {self._tail(proc)}") from None
            while (msg := proc.conn.pending()) is not None:
                if msg.get("op") == "failed":
                    raise WorkerFailed(str(msg.get("message", "a grading worker could not start")))
                if msg.get("op") == "ready":
                    self._ready(proc, msg)

    def _ready(self, proc: _Proc, msg: dict[str, Any]) -> None:
        proc.ready = True
        proc.stats.rss_mb = float(msg.get("rss_mb", 0.0))
        self._layers = tuple(msg.get("layers", ()))
        self._missing = tuple(msg.get("missing", ()))

    def _tail(self, proc: _Proc) -> str:
        try:
            text = proc.log.read_bytes()[-2000:].decode("utf-8", "replace").strip()
        except OSError:
            text = ""
        return text.splitlines()[-1] if text else f"exit status {proc.popen.poll()}"

    def close(self, *, kill: bool = False) -> None:
        """Stop every worker: asked to quit together, then waited for (a worker still starting or
        grading is killed after launch.QUIT_SECONDS); with `kill`, each worker's process group is
        killed at once (its sandbox goes with it), as for a batch interrupted by Ctrl-C."""
        while self._early:                        # never started as one of this pool's workers
            self._early.popleft().close(kill=kill)
        for proc in self._procs:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(proc.conn.sock)
            self.retired.append(proc.stats)
        stop_all([(proc.conn, proc.popen) for proc in self._procs], kill=kill)
        self._procs.clear()
        self._sel.close()
        for folder in (self._logs, *self._other_logs):
            for f in folder.glob("*"):
                f.unlink(missing_ok=True)
            try:
                folder.rmdir()
            except OSError:
                pass

    def _stop(self, proc: _Proc, *, kill: bool) -> None:
        try:
            self._sel.unregister(proc.conn.sock)
        except (KeyError, ValueError):
            pass
        stop(proc.conn, proc.popen, kill=kill)
        self.retired.append(proc.stats)

    # ---- work
    def encoded(self, result: SubmissionResult) -> bytes | None:
        """The result as its worker encoded it (batch.wire), taken once: what the gradebook writer is
        sent, so that the result is not encoded again."""
        stored = self._encoded.pop(result.student, None)
        return stored[1] if stored is not None and stored[0] is result else None

    @property
    def stats(self) -> list[WorkerStats]:
        """Every worker this pool ran, live and retired."""
        return [p.stats for p in self._procs] + self.retired

    @property
    def busy(self) -> int:
        """How many workers are grading a submission now."""
        return sum(p.task is not None for p in self._procs)

    def run(self, tasks: Iterable[Task]) -> Iterator[tuple[Task, SubmissionResult]]:
        """Grade `tasks`, yielding (task, result) as results arrive."""
        todo = deque(tasks)
        limit = self.assignment.limits.submission_seconds + SLACK_SECONDS
        while todo or any(p.task is not None for p in self._procs):
            if not self._procs:                   # every replacement failed to start
                while todo:
                    task = todo.popleft()
                    yield task, _crashed(self.assignment, task.student, task.seed, task.on_roster,
                                         "grading stopped: no grading worker could be started", self._layers)
                return
            for proc in self._procs:
                if proc.ready:
                    self._feed(proc, todo)
            # every worker that answered is fed before any result is handed on
            arrived = [got for key, _ in self._sel.select(timeout=1.0) for got in self._read(key.data, todo)]
            yield from arrived
            now = time.monotonic()
            for proc in list(self._procs):
                if proc.task is not None and now - proc.since > limit:
                    yield from self._lost(proc, f"its worker gave no answer within {limit:g} s", todo, again=False)
                elif proc.task is not None and proc.popen.poll() is not None:
                    yield from self._lost(proc, f"its worker stopped ({self._tail(proc)})", todo)

    def _feed(self, proc: _Proc, todo: deque[Task]) -> None:
        """Give a worker a submission to grade when it has none, and one more to grade next while
        more submissions wait than there are workers: its next one is then already in its socket
        when it sends a result, so it never waits for this process (busy writing results out, or
        not scheduled on a loaded machine). Near the end none is queued, so that no worker idles
        while another has two."""
        if proc.task is None and todo:
            self._send(proc, todo.popleft())
        if proc.task is not None and proc.queued is None and len(todo) > len(self._procs):
            self._send(proc, todo.popleft())

    def _send(self, proc: _Proc, task: Task) -> None:
        self._ids += 1
        if proc.task is None:
            proc.task, proc.since = task, time.monotonic()
        else:
            proc.queued = task
        try:
            proc.conn.send({"op": "grade", "id": self._ids, "task": task.to_dict()})
        except OSError:
            pass                                  # noticed when its answer does not come

    def _read(self, proc: _Proc, todo: deque[Task]) -> Iterator[tuple[Task, SubmissionResult]]:
        """Read what `proc` sent; a worker that answered is fed from `todo` before its result is
        handed on, so that it grades while the caller writes that result out."""
        if proc not in self._procs:
            return
        try:
            proc.conn.fill()
        except (WireClosed, OSError):
            if proc.task is not None:
                yield from self._lost(proc, f"its worker stopped ({self._tail(proc)})", todo)
            else:
                self._retire(proc, kill=True, replace=proc.ready)
            return
        while (msg := proc.conn.pending()) is not None:
            op = msg.get("op")
            if op == "ready":
                proc.ready = True
                proc.stats.rss_mb = float(msg.get("rss_mb", 0.0))
            elif op == "failed":                  # a replacement could not start: the pool shrinks
                self._retire(proc, kill=True, replace=False)
                return
            elif op == "result" and proc.task is not None:
                task, proc.task, proc.queued = proc.task, proc.queued, None
                proc.since = time.monotonic()
                proc.stats.graded += 1
                proc.stats.rss_mb = float(msg.get("rss_mb", 0.0))
                proc.stats.peak_mb = max(proc.stats.peak_mb, float(msg.get("peak_mb", 0.0)))
                if msg.get("recycle"):
                    started = proc.task           # its queued one, started already: graded by another
                    if started is not None:
                        todo.appendleft(started)
                        proc.task = None
                    self._retire(proc, kill=started is not None, replace=True)
                else:
                    self._feed(proc, todo)
                encoded = msg.get(ATTACHED)
                try:
                    if not isinstance(encoded, bytes):
                        raise ValueError("no result attached")
                    result = result_from_dict(json.loads(encoded))
                except (KeyError, TypeError, ValueError, RecursionError) as exc:
                    encoded = None
                    result = _crashed(self.assignment, task.student, task.seed, task.on_roster,
                                      f"its worker's answer could not be read ({exc})", self._layers)
                else:
                    self._encoded[task.student] = (result, encoded)
                yield task, result
                if proc not in self._procs:
                    return

    def _lost(self, proc: _Proc, why: str, todo: deque[Task], *, again: bool = True
              ) -> Iterator[tuple[Task, SubmissionResult]]:
        """`proc` went away (or silent) while grading its task. When `proc` was a `course serve`
        server's worker, the task is graded again by the worker that replaces it (a process of this
        pool's own), whatever stopped the server; with `again` (the worker died), it is graded once
        more by the next worker free, the first time it happens to that student; otherwise the task
        is a crashed result with `why`."""
        task = proc.task
        assert task is not None
        proc.task = None
        if proc.queued is not None:               # never started: graded by another worker
            todo.appendleft(proc.queued)
            proc.queued = None
        served = isinstance(proc.popen, Served)
        retried = not served and again and task.student not in self._lost_once
        if served:
            todo.appendleft(task)
            if self.notice is not None:
                self.notice(f"course serve: the server (pid {proc.popen.pid}) stopped while grading {task.student}; "
                            f"grading without it")
        elif retried:
            self._lost_once.add(task.student)
            todo.appendleft(task)
            if self.notice is not None:
                self.notice(f"{task.student}: grading stopped: {why}; grading {task.student} again with a new worker")
        self._retire(proc, kill=True, replace=True)
        if not served and not retried:
            yield task, _crashed(self.assignment, task.student, task.seed, task.on_roster,
                                 f"grading stopped: {why}", self._layers)

    def _retire(self, proc: _Proc, *, kill: bool, replace: bool) -> None:
        """Stop a worker; with `replace`, start a fresh one in its place (ready when it says so)."""
        self._stop(proc, kill=kill)
        self._procs.remove(proc)
        if replace:
            self.replaced += 1
            self._spawn(proc.slot)
