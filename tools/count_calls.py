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
Not a test: the counts are exact, the CPU figure depends on the machine and its load.
"""
from __future__ import annotations

import argparse
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
from autograder.sandbox import host

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


def _outcomes(result: Any) -> dict[str, Any]:
    return {"state": result.state, "crash_reason": result.crash_reason, "notes": list(result.notes),
            "tests": [[t.name, t.status, round(t.score, 6), t.output, list(t.diagnoses), list(t.hints)]
                      for t in result.tests]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="cohort size (default 100)")
    parser.add_argument("--course", type=Path, help="grade this course's submissions instead of a cohort")
    parser.add_argument("--dump", type=Path, help="write every test's outcome per student to this JSON file")
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
        with Worker(course, ASSIGNMENT) as worker, Traffic() as traffic:
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
    for problem in sorted(traffic.calls, key=lambda p: -traffic.round_trips[p]):
        print(f"  {problem:24s} {traffic.round_trips[problem] / n:6.2f} round trips  "
              f"{traffic.calls[problem] / n:6.2f} calls")
    if args.dump:
        args.dump.write_text(json.dumps(dumped, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
