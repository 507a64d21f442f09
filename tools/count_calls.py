"""How much the graders talk to the sandbox: round trips and calls per submission, per problem.

    .venv/bin/python tools/count_calls.py [--n 100] [--dump results.json] [--course DIR]

Writes the benchmark's cohort of N submissions (tools/bench_autograde.py: correct notebooks, every
catalogued mistake, broken files) into a scratch copy of the course (or grades COURSE_DIR's
submissions as they are), grades each one in this process with a warm worker, and counts what
crosses to the problem processes: a round trip is one request sent and its answers read (one call,
or several sent together), a call is one answer read (a value or an error). It prints the totals per
submission, per problem, the CPU per submission of the grading thread, and that of every process
(this one and the sandbox's, from a cgroup around them as tools/bench_autograde.py measures; the
worker's start-up included).

`--dump FILE` writes every test's outcome (status, score, output, diagnoses, hints) per student as
JSON, seeds derived from the student's name: two checkouts dump the same file when they grade alike.
`--held` grades as a pool's warm worker does: the start-up's objects frozen out of the collector and
the whole process held on the sandbox's CPU (no move to it and back per call). `--split` also prints
where the grading thread's CPU goes inside the sandbox host: per entry point (the outermost one
counts), and the framing of requests and decoding of messages within them (each timed call costs
~1 us of its own, included). Not a test: the counts are exact, the CPU figures depend on the machine
and its load.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import tempfile
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from autograder.batch.worker import Task, Worker
from autograder.layout import CourseLayout
from autograder.sandbox import host, protocol

ASSIGNMENT = "transformer-block"


class Traffic:
    """Counts the round trips and calls of every ProblemHandle while installed."""

    def __init__(self) -> None:
        self.round_trips: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._real = host.ProblemHandle._round_trip

    def __enter__(self) -> Traffic:
        real, traffic = self._real, self

        def counted(handle: host.ProblemHandle, chan: Any, calls: Any, *rest: Any, **options: Any) -> Any:
            answers = real(handle, chan, calls, *rest, **options)
            traffic.round_trips[handle.name] += 1
            traffic.calls[handle.name] += len(answers)
            return answers
        host.ProblemHandle._round_trip = counted      # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        host.ProblemHandle._round_trip = self._real    # type: ignore[method-assign]


class CpuSplit:
    """The grading thread's CPU inside the sandbox host's entry points (the outermost one counts:
    a prefetch's fork is the prefetch's), and inside framing and decoding wherever they run."""

    ENTRIES = ((host.SandboxHost, "submission"), (host.SubmissionRun, "problem"), (host.SubmissionRun, "close"),
               (host.ProblemHandle, "prefetch"), (host.ProblemHandle, "call_many"), (host.ProblemHandle, "take"),
               (host.ProblemHandle, "close"))
    WIRE = ("frame", "decode")

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._inside = False
        self._saved: list[tuple[Any, str, Any]] = []

    def _timed(self, real: Any, label: str, outermost: bool) -> Any:
        split = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            if outermost and split._inside:
                return real(*args, **kwargs)
            split._inside = split._inside or outermost
            started = time.thread_time()
            try:
                return real(*args, **kwargs)
            finally:
                split.seconds[label] += time.thread_time() - started
                split.calls[label] += 1
                if outermost:
                    split._inside = False
        return timed

    def __enter__(self) -> CpuSplit:
        for owner, name in self.ENTRIES:
            self._replace(owner, name, f"{owner.__name__}.{name}", True)
        for name in self.WIRE:              # Channel and the host look these up in the module at each call
            self._replace(protocol, name, name, False)
        return self

    def _replace(self, owner: Any, name: str, label: str, outermost: bool) -> None:
        real = getattr(owner, name)
        self._saved.append((owner, name, real))
        setattr(owner, name, self._timed(real, label, outermost))

    def __exit__(self, *exc: object) -> None:
        for owner, name, real in reversed(self._saved):
            setattr(owner, name, real)
        self._saved.clear()

    def report(self, n: int) -> str:
        entries = [f"{owner.__name__}.{name}" for owner, name in self.ENTRIES]
        inside = sum(self.seconds[e] for e in entries)
        lines = [f"  in the sandbox host {inside / n * 1000:.1f} ms per submission:"]
        for label in sorted(entries + list(self.WIRE), key=lambda e: -self.seconds[e]):
            if self.calls[label]:
                lines.append(f"    {label:26s} {self.seconds[label] / n * 1000:6.2f} ms  "
                             f"({self.calls[label] / n:.1f} per submission)")
        return "\n".join(lines)


def _outcomes(result: Any) -> dict[str, Any]:
    return {"state": result.state, "crash_reason": result.crash_reason, "notes": list(result.notes),
            "tests": [[t.name, t.status, round(t.score, 6), t.output, list(t.diagnoses), list(t.hints)]
                      for t in result.tests]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="cohort size (default 100)")
    parser.add_argument("--course", type=Path, help="grade this course's submissions instead of a cohort")
    parser.add_argument("--dump", type=Path, help="write every test's outcome per student to this JSON file")
    parser.add_argument("--held", action="store_true", help="grade as a pool's warm worker does (see above)")
    parser.add_argument("--split", action="store_true", help="print where the grading thread's CPU goes in the sandbox")
    args = parser.parse_args(argv)

    import bench_autograde as bench
    with tempfile.TemporaryDirectory(prefix="count_calls_") as scratch:
        course = args.course
        if course is None:
            course = bench.make_course(Path(scratch) / "course", bench.cohort(args.n))
        layout = CourseLayout(course)
        students = sorted(p.name for p in layout.submitted_dir.iterdir() if p.is_dir())
        dumped: dict[str, Any] = {}
        cpu = 0.0
        group = bench.CpuCgroup()               # this process and everything it starts, sandbox included
        group.enter()
        before = group.cpu_s()
        split = CpuSplit()
        with Worker(course, ASSIGNMENT) as worker, Traffic() as traffic, \
                (split if args.split else contextlib.nullcontext()):
            if args.held:
                gc.freeze()
                worker.host.hold_caller()
            for student in students:
                folder = layout.submission(student, worker.assignment.name)
                started = time.thread_time()
                result = worker.grade(Task(student, str(folder), zlib.crc32(student.encode())))
                cpu += time.thread_time() - started
                dumped[student] = _outcomes(result)
        after = group.cpu_s()
        if group.path is not None:              # back where we came from, and the group gone
            (group.path.parent / "cgroup.procs").write_text(str(os.getpid()))
        group.remove()
    n = len(students)
    everything = (after - before) if after is not None and before is not None else float("nan")
    trips, calls = sum(traffic.round_trips.values()), sum(traffic.calls.values())
    print(f"{n} submissions: {trips / n:.1f} round trips and {calls / n:.1f} calls per submission; "
          f"trusted thread CPU {cpu / n * 1000:.1f} ms, all processes {everything / n * 1000:.1f} ms per "
          f"submission (load {os.getloadavg()[0]:.2f})")
    if args.split:
        print(split.report(n))
    for problem in sorted(traffic.calls, key=lambda p: -traffic.round_trips[p]):
        print(f"  {problem:24s} {traffic.round_trips[problem] / n:6.2f} round trips  "
              f"{traffic.calls[problem] / n:6.2f} calls")
    if args.dump:
        args.dump.write_text(json.dumps(dumped, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
