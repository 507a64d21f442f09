"""Helpers for sandbox tests: short limits, notebooks as lists of sources, a /proc scan."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from autograder.config import Limits
from autograder.sandbox.launcher import Sandbox

FAST = Limits(cell_seconds=1.0, total_seconds=20.0, call_seconds=1.0, memory_mb=1024)


def cells(*sources: str) -> list[dict]:
    """Code cells numbered from 1, as the notebook loader hands them over."""
    return [{"index": i, "source": s} for i, s in enumerate(sources, start=1)]


def group_members(pgid: int, settle: float = 1.0) -> list[int]:
    """Live (non-zombie) processes in process group `pgid`, read from /proc; waits up to `settle`
    seconds for killed processes to finish dying."""
    end = time.monotonic() + settle
    while True:
        members = _group_members(pgid)
        if not members or time.monotonic() >= end:
            return members
        time.sleep(0.01)


def _group_members(pgid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def reaped(pid: int) -> bool:
    """True if `pid` is no child of ours any more (waited for), so it left no zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@pytest.fixture
def sandbox_factory():
    """Make sandboxes that are closed when the test ends."""
    made: list[Sandbox] = []

    def make(sources, limits: Limits = FAST, **kwargs) -> Sandbox:
        box = Sandbox(cells(*sources) if isinstance(sources, (list, tuple)) else sources, limits, **kwargs)
        made.append(box)
        return box

    yield make
    for box in made:
        box.close()
