"""The same warm workers on a Dask distributed cluster (`course autograde --scheduler ADDRESS`).

Each Dask worker process hosts one warm worker (autograder.batch.worker.Worker: its own sandbox
host and grader session), set up by a worker plugin when the batch starts and closed when it
ends. Each submission is one Dask task that grades on that worker and returns the result as
plain data; the client (the `course` process) writes results.json, the pages and, alone, the
gradebook. The course folder must be at the same path on the workers (a shared file system, as
on a SLURM cluster; see docs/cluster.md), and this package installed in their environment.

The warm worker lives on a thread of its own inside the Dask worker: the sandbox's processes
are tied to the thread that started them (they die with it), and a sandbox host serves one
caller at a time, while Dask runs tasks on a pool of threads.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from ..config import Assignment, load_course
from ..errors import CourseError
from ..grading.engine import crashed_result
from ..grading.fingerprint import course_version, submission_hash
from ..grading.results import SubmissionResult, result_from_dict, result_to_dict
from ..layout import CONFIG_FILE
from ..text import plural
from .pool import PoolInfo, WorkerStats
from .worker import Task, Worker, peak_rss_mb, rss_mb

T = TypeVar("T")
_HANDSHAKE_SECONDS = 10.0   # for a scheduler that accepted the connection to answer Dask's handshake and a query
_NO_WORKERS_SECONDS = 60.0  # a batch whose cluster has had no worker this long stops (their jobs ended?)
_WORKERS_CHECK_SECONDS = 2.0   # how often, while no result arrives, the cluster's workers are counted


class ClusterUnavailable(CourseError):
    """The cluster could not be reached, or its workers could not set up the sandbox (one line)."""


class WorkerUnusable(RuntimeError):
    """Raised by a task on a Dask worker that has no grading worker (one that joined mid-batch
    without the course folder or the sandbox, say): the batch stops rather than grade on it."""


def _scheduler_lost(client: Any, exc: BaseException) -> bool:
    """Whether a future failed because the client lost its scheduler (every pending future then
    fails the same way), rather than because of the worker grading it."""
    return "scheduler-connection-lost" in str(exc) or getattr(client, "status", "running") not in ("running",)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def check_scheduler(address: str) -> None:
    """Raise ClusterUnavailable (one line) unless a Dask scheduler answers at `address`.

    Checked on a connection of its own before a Client is made, because a Client pointed at the
    wrong thing fails badly: an address without a port raises a bare ValueError, and anything else
    listening there (the dashboard's web server on 8787, a proxy) is read as Dask's framing, which
    can ask numpy for exabytes or wait for ever on a server that waits too; either way a half-made
    Client then waits 60 s in its finaliser. TLS is set up from Dask's configuration, as for the Client.
    How long to try is Dask's own setting, distributed.comm.timeouts.connect (30 s by default).
    """
    import asyncio

    import dask
    from dask.utils import parse_timedelta
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.core import connect
    from distributed.comm.registry import get_backend
    from distributed.security import Security  # TLS as the Client would set it up (Dask's config)

    try:
        scheme, location = parse_address(address)
        get_backend(scheme)     # ValueError for a scheme Dask has no transport for
        host_port = parse_host_port(location) if scheme in ("tcp", "tls", "ws", "wss") else None
        if host_port and not 0 < host_port[1] < 65536:
            raise ValueError(f"no such port in {location!r}")
    except ValueError as exc:
        raise ClusterUnavailable(f"--scheduler {address!r} is not a Dask scheduler address ({_one_line(exc)}; "
                                 "e.g. tcp://host:8786)") from None
    timeout = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="seconds")

    async def listening(host: str, port: int) -> None:
        """Wait until something accepts a connection at host:port (retried, as Dask does: the
        scheduler may still be starting), or raise ClusterUnavailable once `timeout` has passed."""
        deadline = time.monotonic() + timeout
        pause = 0.05
        while True:
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                                   max(0.1, deadline - time.monotonic()))
            except (OSError, TimeoutError) as exc:
                if time.monotonic() + pause >= deadline:
                    why = _one_line(exc)
                    raise ClusterUnavailable(f"Dask scheduler {address}: cannot connect ({why} after {timeout:g} s)"
                                             ) from None
                await asyncio.sleep(pause)
                pause = min(2 * pause, 1.0)
                continue
            writer.close()
            return

    async def identity() -> Any:
        if host_port:
            await listening(*host_port)
        tls = Security().get_connection_args("client")  # type: ignore[no-untyped-call]
        try:   # Dask's connect reads the other side's handshake with no time limit of its own
            comm = await asyncio.wait_for(connect(address, timeout=timeout, **tls),  # type: ignore[no-untyped-call]
                                          timeout + _HANDSHAKE_SECONDS
                                          if host_port is None else _HANDSHAKE_SECONDS)
        except TimeoutError:    # ours (a subclass of OSError): it accepted the connection but did not answer
            raise ClusterUnavailable(f"Dask scheduler {address}: something listens there, but it did not answer "
                                     f"as a Dask scheduler within {_HANDSHAKE_SECONDS:g} s (the dashboard's port? "
                                     "the scheduler's is usually 8786)") from None
        except OSError as exc:  # Dask's, after its own retries
            raise ClusterUnavailable(f"Dask scheduler {address}: cannot connect ({_one_line(exc)})") from None
        try:
            await comm.write({"op": "identity", "reply": True})
            return await asyncio.wait_for(comm.read(), _HANDSHAKE_SECONDS)
        finally:
            comm.abort()

    try:   # on a thread of its own: the caller may be inside a running event loop (a Jupyter kernel)
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="course-scheduler-check") as pool:
            answer = pool.submit(asyncio.run, identity()).result()
    except ClusterUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - a handshake or reply that is not Dask's: the message below
        if scheme in ("tls", "wss"):
            raise ClusterUnavailable(f"Dask scheduler {address}: no TLS connection ({_one_line(exc)}; the client's "
                                     "certificates come from Dask's distributed.comm.tls settings)") from None
        answer = exc
    kind = answer.get("type") if isinstance(answer, dict) else None
    if kind == "Scheduler":
        return
    if isinstance(kind, str):
        raise ClusterUnavailable(f"Dask scheduler {address}: a Dask {kind} answers there, not the scheduler "
                                 "(give the scheduler's address, e.g. tcp://host:8786)")
    raise ClusterUnavailable(f"Dask scheduler {address}: something listens there, but it is not a Dask scheduler "
                             "(the dashboard's port? the scheduler's is usually 8786)")


class _WarmThread:
    """One Worker on one long-lived thread; `call(fn)` runs fn(worker) there and waits."""

    def __init__(self, course_dir: str, assignment: str, insecure: bool):
        self._jobs: queue.SimpleQueue[tuple[Callable[[Worker], Any], concurrent.futures.Future[Any]] | None] = (
            queue.SimpleQueue())
        self._args = (course_dir, assignment, insecure)
        self.error = ""
        self.worker: Worker | None = None
        self.graders = ""                 # fingerprint.course_version of the course as this machine holds it
        self._cpus: set[int] = set()      # the CPUs this thread may use before it is held on its sandbox's
        self._recycled = False            # its worker was recycled once at least (a failed restart is tried again)
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._main, args=(started,), name="course-autograder-worker",
                                        daemon=True)
        self._thread.start()
        started.result()

    def _start_worker(self) -> None:
        course_dir, assignment, insecure = self._args
        if self._cpus:          # a recycled worker's thread, held on its old sandbox's CPU: free again
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, self._cpus)
        worker = None
        try:
            if not (Path(course_dir) / CONFIG_FILE).is_file():
                self.worker = None
                self.error = (f"the course folder {course_dir} is not on this worker's machine (it must be at the same "
                              "path on every Dask worker, e.g. on a shared file system; see docs/cluster.md)")
                return
            worker = Worker(course_dir, assignment, insecure=insecure)
            course = load_course(course_dir)    # what it grades with, as this machine's copy holds it
            self.graders = course_version(course, course.assignment(assignment))
            # As in a local worker process (worker.serve): the start-up's objects (pytest, the graders'
            # session) live as long as the worker, so the cyclic collector is told to leave them be.
            # The nanny already starts Dask workers with one-thread numeric pools (its pre-spawn-environ).
            gc.freeze()
            worker.host.hold_caller(process=False)   # this thread grades beside its sandbox
            self.worker, self.error = worker, ""
        except BaseException as exc:  # noqa: BLE001 - reported to the client, which refuses the batch in one line
            # (anything, an OSError of a stale NFS handle from is_file included: the thread must live on to answer)
            self.worker = None
            self.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            if worker is not None:                  # started, then failed: its sandbox must not be left behind
                with contextlib.suppress(Exception):
                    worker.close()

    def _main(self, started: concurrent.futures.Future[None]) -> None:
        with contextlib.suppress(OSError):
            self._cpus = os.sched_getaffinity(0)
        self._start_worker()
        started.set_result(None)
        while (job := self._jobs.get()) is not None:
            fn, future = job
            if self.worker is None and self._recycled:  # its restart after a recycle failed: try once more
                self._start_worker()                     # (a fork refused for a moment must not stop the batch)
            try:
                future.set_result(fn(self.worker))  # type: ignore[arg-type]
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                future.set_exception(exc)
            if self.worker is not None and self.worker.recycle:   # memory grew: a fresh host and session
                gc.unfreeze()           # the old session's cycles must be collectable once it is closed
                with contextlib.suppress(Exception):      # (the thread must live on to answer the next job)
                    self.worker.close()
                self._recycled = True
                self._start_worker()
        if self.worker is not None:
            self.worker.close()

    def call(self, fn: Callable[[Worker], T]) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((fn, future))
        return future.result()

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=120)


def _plugin_class() -> type:
    from distributed.diagnostics.plugin import WorkerPlugin

    class WarmWorkerPlugin(WorkerPlugin):
        """Starts a warm worker in each Dask worker when registered; closes it when removed."""

        def __init__(self, name: str, course_dir: str, assignment: str, insecure: bool):
            self.name = name
            self.args = (course_dir, assignment, insecure)
            self.warm: _WarmThread | None = None

        def setup(self, worker: Any) -> None:
            self.warm = _WarmThread(*self.args)

        def teardown(self, worker: Any) -> None:
            if self.warm is not None:
                self.warm.close()
                self.warm = None

    return WarmWorkerPlugin


def _warm(plugin_name: str, dask_worker: Any) -> _WarmThread:
    plugin = dask_worker.plugins.get(plugin_name)
    warm: _WarmThread | None = getattr(plugin, "warm", None)
    if warm is None:
        raise WorkerUnusable(f"Dask worker {dask_worker.address}: it has no grading worker for this batch")
    return warm


def worker_info(plugin_name: str, dask_worker: Any = None) -> dict[str, Any]:
    """Runs on each Dask worker (`Client.run` passes `dask_worker`): what its warm worker reports
    (or why it could not start)."""
    warm = _warm(plugin_name, dask_worker)
    if warm.worker is None:
        return {"pid": os.getpid(), "error": warm.error}
    return {"pid": os.getpid(), "error": "", "layers": list(warm.worker.info.layers),
            "missing": list(warm.worker.info.missing), "rss_mb": round(rss_mb(), 1), "graders": warm.graders}


def grade_task(plugin_name: str, task: dict[str, Any]) -> dict[str, Any]:
    """Runs on a Dask worker: grade one submission with that worker's warm worker."""
    from distributed import get_worker

    dask_worker = get_worker()
    warm = _warm(plugin_name, dask_worker)
    parsed = Task.from_dict(task)

    def grade(worker: Worker | None) -> dict[str, Any]:
        if worker is None:
            raise WorkerUnusable(f"Dask worker {dask_worker.address}: {warm.error}")
        try:        # what this machine's copy holds (a shared file system may lag the client's)
            seen = submission_hash(Path(parsed.folder))
        except Exception:  # noqa: BLE001 - an unreadable folder: grading says why; nothing to compare
            seen = ""
        result = worker.grade(parsed)
        return {"result": result_to_dict(result), "pid": os.getpid(), "rss_mb": round(rss_mb(), 1),
                "peak_mb": round(peak_rss_mb(), 1), "seen": seen}

    return warm.call(grade)


class DaskPool:
    """Warm workers on the Dask cluster whose scheduler is at `address` (the interface of
    autograder.batch.pool's pools)."""

    def __init__(self, address: str, course_dir: str | Path, assignment: str, *, insecure: bool = False):
        self.address = address
        self.course_dir = str(Path(course_dir).resolve())
        self.assignment_name = assignment
        self.insecure = insecure
        self.assignment: Assignment = load_course(self.course_dir).assignment(assignment)
        self.plugin_name = f"course-autograder-{uuid.uuid4().hex[:12]}"
        self.size = 0
        self._client: Any = None
        self._layers: tuple[str, ...] = ()
        self._stats: dict[int, WorkerStats] = {}
        self._pending: list[Any] = []

    def __enter__(self) -> DaskPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> PoolInfo:
        """Connect, start a warm worker in every Dask worker, and check each set up the sandbox."""
        try:
            from distributed import Client
        except ImportError:
            raise ClusterUnavailable("--scheduler needs Dask's distributed package: "
                                     "pip install 'course-autograder[cluster]'") from None
        check_scheduler(self.address)
        try:
            self._client = Client(self.address, set_as_default=False)  # type: ignore[no-untyped-call]
        except Exception as exc:  # noqa: BLE001 - it answered the check a moment ago; whatever broke, one line
            raise ClusterUnavailable(f"Dask scheduler {self.address}: cannot connect ({_one_line(exc)})") from None
        plugin = _plugin_class()(self.plugin_name, self.course_dir, self.assignment_name, self.insecure)
        try:
            self._client.register_plugin(plugin, name=self.plugin_name)
            infos: dict[str, dict[str, Any]] = self._client.run(worker_info, self.plugin_name)
        except Exception as exc:  # noqa: BLE001 - a worker that died or left meanwhile: one line, nothing graded
            raise ClusterUnavailable(
                f"Dask scheduler {self.address}: a worker failed while the grading workers started "
                f"({type(exc).__name__}: {_one_line(exc)}; did it run out of memory, or its job end?); nothing was "
                f"graded, run the command again") from None
        if not infos:
            raise ClusterUnavailable(f"Dask scheduler {self.address}: the cluster has no workers")
        failed = {addr: info["error"] for addr, info in infos.items() if info.get("error")}
        if failed:
            addr, why = sorted(failed.items())[0]
            raise ClusterUnavailable(f"Dask worker {addr}: {why}"
                                     + (f" (and {len(failed) - 1} more workers)" if len(failed) > 1 else ""))
        course = load_course(self.course_dir)
        ours = course_version(course, course.assignment(self.assignment_name))
        differ = sorted(addr for addr, info in infos.items() if info.get("graders") != ours)
        if differ:
            raise ClusterUnavailable(
                f"Dask worker {differ[0]}{f' (and {len(differ) - 1} more)' if len(differ) > 1 else ''}: its copy of "
                f"the course's graders, release, course.yml or this package differs from this machine's (a shared file "
                f"system not yet in sync, or another install); nothing was graded, run the command again")
        layers = [tuple(info["layers"]) for info in infos.values()]
        missing = sorted({m for info in infos.values() for m in info["missing"]})
        # a result's isolation must not depend on which worker graded it
        self._layers = tuple(layer for layer in layers[0] if all(layer in other for other in layers))
        for info in infos.values():
            self._stats[int(info["pid"])] = WorkerStats(pid=int(info["pid"]), rss_mb=float(info["rss_mb"]))
        self.size = len(infos)
        return PoolInfo(self._layers, tuple(missing), self.size)

    @property
    def stats(self) -> list[WorkerStats]:
        return list(self._stats.values())

    def encoded(self, result: SubmissionResult) -> bytes | None:
        return None

    def run(self, tasks: Iterable[Task]) -> Iterator[tuple[Task, SubmissionResult]]:
        """Submit every task; yield (task, result) as results come back."""
        if self._client is None:
            raise RuntimeError("DaskPool.run before start()")
        batch = uuid.uuid4().hex[:8]
        futures = {}
        finished: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for task in tasks:
            future = self._client.submit(grade_task, self.plugin_name, task.to_dict(), pure=False, retries=1,
                                         key=f"grade-{task.student}-{batch}")
            futures[future.key] = (future, task)
        self._pending = [f for f, _ in futures.values()]
        for future in self._pending:
            future.add_done_callback(finished.put)
        for yielded in range(len(futures)):
            future = self._next_finished(finished, len(futures) - yielded)
            task = futures[future.key][1]
            try:
                answer = future.result()
                result = result_from_dict(answer["result"])
                task = replace(task, seen=str(answer.get("seen", "")))
                stats = self._stats.setdefault(int(answer["pid"]), WorkerStats(pid=int(answer["pid"])))
                stats.graded += 1
                stats.rss_mb = float(answer["rss_mb"])
                stats.peak_mb = max(stats.peak_mb, float(answer["peak_mb"]))
            except Exception as exc:  # noqa: BLE001 - a lost worker costs that submission alone
                why = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
                if _scheduler_lost(self._client, exc):
                    # not this submission's failure: the batch stops, and what it has not graded is left
                    # as it was (its earlier results, page and grades), for a run that finishes it
                    left = len(futures) - yielded
                    raise ClusterUnavailable(
                        f"Dask scheduler {self.address}: the connection to it was lost mid-batch ({why}); "
                        f"{plural(left, 'submission')} not graded, left as they were; run the command again to "
                        f"finish") from None
                if isinstance(exc, WorkerUnusable):
                    # the worker's setup failed (not the submission): grading it there would be a crash
                    # written as the student's result; the batch stops as at its start
                    left = len(futures) - yielded
                    raise ClusterUnavailable(
                        f"{_one_line(exc)}; {plural(left, 'submission')} not graded, left as they were; run the "
                        f"command again once that worker can grade or has left the cluster") from None
                result = crashed_result(self.assignment, task.student, task.seed, task.on_roster,
                                        f"grading stopped: its Dask worker failed ({why})", self._layers)
            future.release()
            yield task, result

    def _next_finished(self, finished: queue.SimpleQueue[Any], left: int) -> Any:
        """The next future to finish; ClusterUnavailable once the cluster has had no worker for
        _NO_WORKERS_SECONDS meanwhile (Dask would hold the submissions for workers that may never come)."""
        without_workers: float | None = None
        while True:
            with contextlib.suppress(queue.Empty):
                return finished.get(timeout=_WORKERS_CHECK_SECONDS)
            try:
                workers = len(self._client.nthreads())
            except Exception:  # noqa: BLE001 - the scheduler gone: the futures fail, and say so, at once
                continue
            if workers:
                without_workers = None
            elif without_workers is None:
                without_workers = time.monotonic()
            elif time.monotonic() - without_workers >= _NO_WORKERS_SECONDS:
                raise ClusterUnavailable(
                    f"Dask scheduler {self.address}: the cluster has had no workers for {_NO_WORKERS_SECONDS:g} s "
                    f"mid-batch (their jobs ended?); {plural(left, 'submission')} not graded, left as they were; "
                    f"run the command again once workers have joined")

    def close(self, *, kill: bool = False) -> None:
        # with or without `kill`, what is still pending is cancelled and the warm workers closed
        if self._client is None:
            return
        try:
            if self._pending:
                self._client.cancel(self._pending)
            self._pending = []
            self._client.unregister_worker_plugin(self.plugin_name)
        except Exception:  # noqa: BLE001 - the cluster may be gone already; nothing more to close there
            pass
        self._client.close()
        self._client = None
