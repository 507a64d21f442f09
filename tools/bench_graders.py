"""The trusted side of grading alone: CPU per submission of the graders, checks and diagnosis.

    python tools/bench_graders.py COURSE_DIR [--assignment transformer-block] [--repeat 5]

Grades every submission under COURSE_DIR/submitted once for real (a warm worker: sandbox, notebook
runs, graders), recording every call the graders make to the students' functions with its answer.
Then it runs the grader session again on each submission several times against a replay of those
answers: no sandbox, no notebook, no protocol, so what is measured is the trusted process's own
work (grader bodies, hidden inputs, reference computations, tolerance checks, diagnosis). It prints
the CPU per submission of the best replay round and checks that every replay gives the outcomes of
the real run (status, output, diagnoses). Seeds are derived from the student's name, so two
checkouts measured on the same course grade the same inputs.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import sys
import time
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.batch.worker import Task, Worker
from autograder.grading import engine
from autograder.grading.proxy import StudentProxy
from autograder.layout import CourseLayout
from autograder.sandbox.outcomes import StudentCodeError


class _Function:
    def __init__(self, owner: Any, name: str):
        self._owner = owner
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._owner.call(self.__name__, args, kwargs)


class Recorder:
    """Stands in front of a StudentProxy and writes down every answer it gives."""

    def __init__(self, proxy: StudentProxy):
        self._proxy = proxy
        self.events: list[tuple[str, str, Any, Any]] = []    # (kind, name, answer, last_call)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in ("last_call", "last_error", "restarts", "execution", "isolation"):
            return getattr(self._proxy, name)
        return _Function(self, name)

    def __getitem__(self, name: str) -> _Function:
        return _Function(self, name)

    def for_problem(self, problem: str) -> Recorder:
        self._proxy.for_problem(problem)
        return self

    def call(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> Any:
        try:
            value = self._proxy.call(name, args, kwargs)
        except StudentCodeError as exc:
            self.events.append(("call", name, exc, None))
            raise
        self.events.append(("call", name, value, self._proxy.last_call))
        return value

    def call_many(self, calls: Sequence[tuple[str, Sequence[Any], Mapping[str, Any]]], *,
                  stop_at_error: bool = False) -> list[Any]:
        out = self._proxy.call_many(calls, stop_at_error=stop_at_error)
        self.events.append(("many", ",".join(c[0] for c in calls), out, None))
        return out


class Replay:
    """Gives the recorded answers again, in the order they were asked for."""

    def __init__(self, events: list[tuple[str, str, Any, Any]]):
        self._events = events
        self._next = 0
        self.last_call: Any = None
        self.last_error: StudentCodeError | None = None
        self.restarts = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Function(self, name)

    def __getitem__(self, name: str) -> _Function:
        return _Function(self, name)

    def for_problem(self, problem: str) -> Replay:
        return self

    def _take(self, kind: str, name: str) -> tuple[Any, Any]:
        if self._next >= len(self._events):
            raise RuntimeError(f"replay diverged: an extra {kind} of {name}")
        got_kind, got_name, answer, last = self._events[self._next]
        if (got_kind, got_name) != (kind, name):
            raise RuntimeError(f"replay diverged: {kind} {name} where the real run made {got_kind} {got_name}")
        self._next += 1
        return answer, last

    def call(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> Any:
        answer, last = self._take("call", name)
        self.last_call, self.last_error = last, None
        if isinstance(answer, StudentCodeError):
            self.last_call, self.last_error = None, answer
            raise answer
        return answer

    def call_many(self, calls: Sequence[tuple[str, Sequence[Any], Mapping[str, Any]]], *,
                  stop_at_error: bool = False) -> list[Any]:
        answer, _ = self._take("many", ",".join(c[0] for c in calls))
        return list(answer)


def _summary(run: Any) -> list[tuple[Any, ...]]:
    return [(c.name, c.status, c.output, c.diagnoses, c.internal_error) for c in run.checks] + [run.broken]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("course", type=Path)
    parser.add_argument("--assignment", default="transformer-block")
    parser.add_argument("--repeat", type=int, default=5, help="replay rounds (the best is reported)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the replay rounds to this file")
    args = parser.parse_args(argv)

    worker = Worker(args.course, args.assignment)
    recorded: list[tuple[str, int, dict[str, Any], list[tuple[Any, ...]]]] = []
    real_run_graders = engine.run_graders

    def recording(execution: Any, session: Any, seed: int) -> Any:
        proxies = {name: Recorder(p) if isinstance(p, StudentProxy) else p
                   for name, p in execution.by_notebook.items()}
        run = session.run(proxies, seed)
        recorded.append((current[0], seed, proxies, _summary(run)))
        return run

    current = [""]
    engine.run_graders = recording
    try:
        layout = CourseLayout(args.course)
        students = sorted(p.name for p in layout.submitted_dir.iterdir() if p.is_dir())
        for student in students:
            current[0] = student
            folder = layout.submission(student, worker.assignment.name)
            worker.grade(Task(student, str(folder), zlib.crc32(student.encode())))
    finally:
        engine.run_graders = real_run_graders
    session = worker.session
    rounds = []
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    for _ in range(args.repeat):
        started, wall = os.times(), time.perf_counter()
        for student, seed, proxies, expected in recorded:
            replays = {name: Replay(p.events) if isinstance(p, Recorder) else p for name, p in proxies.items()}
            run = session.run(replays, seed)
            if _summary(run) != expected:
                print(f"{student}: the replay's outcomes differ from the real run's", file=sys.stderr)
                return 1
        ended = os.times()
        rounds.append(((ended.user + ended.system - started.user - started.system) / len(recorded),
                       (time.perf_counter() - wall) / len(recorded)))
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    worker.close()
    cpu, wall = min(rounds)
    print(f"{len(recorded)} submissions, {args.repeat} replay rounds: graders' CPU {cpu * 1000:.1f} ms per "
          f"submission (best round; rounds: {', '.join(f'{c * 1000:.1f}' for c, _ in rounds)}), "
          f"wall {wall * 1000:.1f} ms; load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
