"""A warm worker: started once, it keeps one sandbox host (bubblewrap and a zygote that has imported
numpy) and one grader session (pytest, graders collected once), and grades submission after
submission with them. Each submission still gets its own namespaces, scratch and limits, and each
problem its own fork of the notebook's state (see autograder.sandbox).

A worker runs in its own process: `python -m autograder.batch.worker --course-dir DIR --assignment A
--fd N [--insecure] [--cpu C]` talks JSON lines (autograder.batch.wire) on descriptor N:

    worker -> {"op": "ready", "pid", "layers", "missing", "rss_mb"}   or {"op": "failed", "message"}
    driver -> {"op": "grade", "id", "task": {student, folder, seed, on_roster}}
    worker -> {"op": "result", "id", "rss_mb", "recycle"} + <result_to_dict>   (attached: batch.wire)
    driver -> {"op": "quit"}                                           (or closes the connection)

The same `Worker` object serves inside a Dask worker process (autograder.batch.cluster).
Recycling: a worker whose resident memory has grown by more than GROWTH_MB since it warmed up
asks to be replaced (`recycle` in its reply); the driver then starts a fresh one.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import gc
import os
import resource
import sys
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Assignment, Course, load_course
from ..grading.results import SubmissionResult, result_to_dict

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..cellplan import Released
    from ..grading.session import GraderSession
    from .wire import Connection

WARMUP = 10                # submissions graded before the memory baseline is taken
CHECK_EVERY = 25           # then memory is compared with it every this many submissions
GROWTH_MB = 48.0           # growth above the baseline that makes a worker ask to be replaced

# A worker grades one submission at a time, beside its sandbox, one worker per core: the numeric
# libraries' thread pools are held at one thread, as in the sandbox. OpenBLAS otherwise starts a
# thread per core as numpy is imported, and that thread spins: ~0.1 s of CPU taken from the other
# core, where the sandbox and the command start meanwhile.
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1",
              "VECLIB_MAXIMUM_THREADS": "1"}


@dataclass(frozen=True)
class Task:
    """One submission to grade."""
    student: str
    folder: str            # submitted/<student>/<assignment>/, absolute
    seed: int
    on_roster: bool = True
    # the hash of the submission as the process that graded it read it (fingerprint.submission_hash),
    # when that is another machine's copy (a Dask worker's): "" otherwise
    seen: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        return cls(student=str(data["student"]), folder=str(data["folder"]), seed=int(data["seed"]),
                   on_roster=bool(data.get("on_roster", True)), seen=str(data.get("seen", "")))


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _start_session(course: Course, assignment: Assignment) -> GraderSession:
    from ..grading.session import GraderSession, load_instructor_code

    return GraderSession(assignment, load_instructor_code(course, assignment))


def _refuse_broken_graders(course: Course, assignment: Assignment, session: GraderSession) -> None:
    """Raise CourseError (closing `session`) when the graders could not be collected (a grader
    file that does not import, a check for no problem of course.yml, a problem without checks):
    that is the course's problem, not the students', so no submission is graded: grading every
    one as crashed would replace their results, pages and grades with zeros."""
    if not session.broken:
        return
    from ..errors import CourseError

    session.close()
    graders = course.layout.relative(course.layout.graders(assignment.package))
    raise CourseError(f"{graders}: {' | '.join(session.broken)}; nothing was graded "
                      f"(`course validate {assignment.name}` checks the graders)")


class Worker:
    """One sandbox host and one grader session for an assignment, kept warm across submissions.
    Starting it fails with SandboxUnavailable (a CourseError) when the sandbox cannot be set up."""

    def __init__(self, course: Course | str | Path, assignment: str, *, insecure: bool = False,
                 cpu: int | None = None):
        from ..sandbox.process import launch_host

        self.course = course if isinstance(course, Course) else load_course(course)
        self.assignment: Assignment = self.course.assignment(assignment)
        limits = self.assignment.limits
        # `cpu`: the CPU its pool gives this worker's sandbox (course.yml `sandbox_cpus`)
        pin = self.course.sandbox_cpus != "off"
        # The sandbox's process first, before this process imports numpy and pytest: its zygote
        # boots (an interpreter, numpy) on another CPU meanwhile. It is talked to, and its isolation
        # checked, only by host.start below, before any submission. The host starts on this thread:
        # its processes are tied to the thread that started them, and grading happens here.
        launched = launch_host(insecure=insecure, memory_mb=limits.memory_mb, processes=limits.processes,
                               pin=pin, cpu=cpu)
        # pytest's import and the graders' collection, on a thread from now on: they overlap with
        # the host's import and start-up, which wait for the disk and the zygote in part.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="collect") as pool:
            collecting = pool.submit(_start_session, self.course, self.assignment)
            try:
                from ..sandbox.host import SandboxHost

                self.host = SandboxHost(insecure=insecure, memory_mb=limits.memory_mb, processes=limits.processes,
                                        pin=pin, cpu=cpu)
            except BaseException:
                launched.close()
                with contextlib.suppress(Exception):
                    collecting.result().close()
                raise
            try:
                self.info = self.host.start(launched)
                # the first submission's processes, started while the graders are collected
                self.host.prepare(limits)
            except BaseException:
                self.host.close()
                with contextlib.suppress(Exception):
                    collecting.result().close()
                raise
            try:
                self.session = collecting.result()
                _refuse_broken_graders(self.course, self.assignment, self.session)
            except BaseException:
                self.host.close()
                raise
        # What the release tells about a submission's cells and the names the graders may read:
        # read at the first submission and kept, as the graders are collected once (read again for
        # each submission, its files listed and checked for changes, it cost about 1 ms each). A
        # `course serve` worker stops when the graders or the release change (batch.serve), so
        # it never grades with a stale one.
        self.released: Mapping[str, Released] | None = None
        self.graded = 0
        self.baseline_mb: float | None = None
        self.recycle = False

    @property
    def layers(self) -> tuple[str, ...]:
        return self.info.layers

    def grade(self, task: Task) -> SubmissionResult:
        """Grade one submission; never raises for the submission's sake (a failure of the engine
        is a crashed result with the traceback for the instructor)."""
        from ..grading.engine import crashed_result, grade_submission, released_cells

        try:
            if self.released is None:
                self.released = released_cells(self.course, self.assignment)
            return grade_submission(self.course, self.assignment, task.student, Path(task.folder), seed=task.seed,
                                    on_roster=task.on_roster, host=self.host, session=self.session,
                                    released=self.released)
        except Exception as exc:  # noqa: BLE001 - one student's notebook never stops the batch
            return crashed_result(self.assignment, task.student, task.seed, task.on_roster,
                                  f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}", self.layers)
        finally:
            self.graded += 1
            self._watch_memory()

    def _watch_memory(self) -> None:
        if self.graded == WARMUP:
            self.baseline_mb = rss_mb()
        elif self.baseline_mb is not None and self.graded % CHECK_EVERY == 0:
            self.recycle = rss_mb() > self.baseline_mb + GROWTH_MB

    def close(self) -> None:
        try:
            self.session.close()
        finally:
            self.host.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _warm_up() -> None:
    """What the first grade would import (the engine, numpy.random for the graders' generators),
    imported now, while the driver makes up the first task: its answer to "ready" takes a few ms."""
    import numpy.random  # noqa: F401

    from ..grading import engine  # noqa: F401


def serve(fd: int, course_dir: str, assignment: str, *, insecure: bool, cpu: int | None = None) -> int:
    """The worker process: start, say so, grade what is asked until told to quit."""
    from ..errors import CourseError
    from .wire import Connection

    os.environ.update(ONE_THREAD)        # numpy is not imported yet (tests/batch/test_worker_start.py)
    # Start-up is mostly imports (numpy, pytest, the graders): their objects live as long as this
    # process, so the cyclic collector would only walk them again and again as they are made (a
    # tenth of the start-up's CPU). Off until the worker is ready; then they are set aside for good
    # (gc.freeze), so that collections while grading walk only what grading makes.
    gc.disable()
    conn = Connection.from_fd(fd)
    try:
        worker = Worker(course_dir, assignment, insecure=insecure, cpu=cpu)
    except Exception as exc:  # noqa: BLE001 - reported to the driver, which explains it in one line
        # imported here: it imports numpy, which a worker imports only once its sandbox has started
        from ..sandbox.outcomes import SandboxError

        if isinstance(exc, (CourseError, SandboxError)):
            conn.send({"op": "failed", "message": str(exc)})
        else:
            conn.send({"op": "failed", "message": f"{type(exc).__name__}: {exc}",
                       "detail": traceback.format_exc()[-2000:]})
        return 2
    gc.freeze()
    gc.enable()
    if cpu is not None:             # warm: from now on this process only grades, beside its sandbox
        worker.host.hold_caller()
    with worker:
        conn.send({"op": "ready", "pid": os.getpid(), "layers": list(worker.info.layers),
                   "missing": list(worker.info.missing), "rss_mb": round(rss_mb(), 1)})
        _warm_up()                  # while the first task is on its way
        answer(conn, worker)
    return 0


def answer(conn: Connection, worker: Worker) -> None:
    """Grade what the driver at the other end of `conn` asks, until it says quit or goes away."""
    from .wire import WireClosed, dumps

    while True:
        try:
            msg = conn.recv()
        except (WireClosed, OSError):
            return
        if msg.get("op") != "grade":
            return
        result = worker.grade(Task.from_dict(msg["task"]))
        # the result attached, encoded once: the driver passes these bytes on to the gradebook writer
        conn.send({"op": "result", "id": msg.get("id"), "rss_mb": round(rss_mb(), 1),
                   "peak_mb": round(peak_rss_mb(), 1), "recycle": worker.recycle},
                  attached=dumps(result_to_dict(result)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.batch.worker")
    parser.add_argument("--course-dir", required=True)
    parser.add_argument("--assignment", required=True)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--insecure", action="store_true")
    parser.add_argument("--cpu", type=int, help="the CPU to hold the sandbox on (given by the pool)")
    args = parser.parse_args(argv)
    return serve(args.fd, args.course_dir, args.assignment, insecure=args.insecure, cpu=args.cpu)


if __name__ == "__main__":
    sys.exit(main())
