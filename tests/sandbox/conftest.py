"""Helpers for sandbox tests: one real sandbox host (bubblewrap + zygote) per test module, short
limits, notebooks as lists of sources, and a view of the processes left on the machine."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from autograder.config import Limits
from autograder.sandbox.host import SandboxHost, SubmissionRun

FAST = Limits(cell_seconds=2.0, total_seconds=20.0, call_seconds=2.0, memory_mb=1024, submission_seconds=60.0)


# Notebook source (for a cell): the processes a problem sees that are not zombies, once any killed
# one still on its way out has ended (a killed child of the template may still be exiting when the
# next problem starts; it then stays a zombie until the template's next fork).
LIVE_PROCESSES = """
def live_processes(expected):
    import os, time
    end = time.monotonic() + 5
    while True:
        live = []
        for p in os.listdir('/proc'):
            try:
                if p.isdigit() and open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0] != 'Z':
                    live.append(int(p))
            except OSError:
                pass
        if len(live) <= expected or time.monotonic() > end:
            return sorted(live)
        time.sleep(0.01)
"""


def cells(*sources: str) -> list[dict]:
    """Code cells numbered from 1, labelled as the notebook loader labels them."""
    from autograder.notebooks import cell_label

    return [{"index": i, "label": cell_label(i, s), "source": s} for i, s in enumerate(sources, start=1)]


@pytest.fixture(scope="module")
def host():
    """A started sandbox host shared by the tests of a module (closed at the end)."""
    with SandboxHost() as h:
        h.start()
        yield h


@pytest.fixture
def submit(host):
    """submit(sources or cells, limits=FAST) -> a SubmissionRun (closed when the test ends)."""
    runs: list[SubmissionRun] = []

    def make(sources, limits: Limits = FAST) -> SubmissionRun:
        given = cells(*sources) if isinstance(sources, (list, tuple)) and sources and isinstance(sources[0], str) \
            else sources
        run = host.submission(given, limits)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.close()


def sandbox_processes() -> list[int]:
    """Live processes on this machine that run as the sandbox's uid, or that are descendants of
    this test process other than bubblewrap and the zygote's own host."""
    me = os.getpid()
    parent: dict[int, int] = {}
    state: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        parent[int(entry.name)] = int(fields[1])
        state[int(entry.name)] = fields[0]
    out = []
    for pid in parent:
        p = pid
        for _ in range(1000):
            p = parent.get(p, 0)
            if p in (0, 1):
                break
            if p == me:
                if state[pid] != "Z":
                    out.append(pid)
                break
    return out


def descendants_settled(expected: int, settle: float = 10.0) -> int:
    """How many processes below this one there are, once at most `expected` remain (or after
    `settle` seconds: killed processes take a moment to go)."""
    end = time.monotonic() + settle
    while True:
        n = len(sandbox_processes())
        if n <= expected or time.monotonic() >= end:
            return n
        time.sleep(0.05)


class Caller:
    """A run plus one problem's handle, for tests that only call functions."""

    def __init__(self, run: SubmissionRun, problem: str = "tests"):
        self.run = run
        self.report = run.report
        self.handle = run.problem(problem)

    def call(self, name: str, args=(), kwargs=None):
        return self.handle.call(name, args, kwargs)


def settled_count(quiet: float = 0.5, limit: float = 15.0) -> int:
    """The number of processes below this one once it stopped changing for `quiet` seconds
    (processes killed a moment ago take a little while to go)."""
    end = time.monotonic() + limit
    last, since = len(sandbox_processes()), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.05)
        n = len(sandbox_processes())
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last
