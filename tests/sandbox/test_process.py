"""The host process handle: killing and reaping happen in kill(), whole process group included,
also when the handle is dropped without kill()."""
from __future__ import annotations

import gc
import os
import sys
import time

from autograder.sandbox.process import HostProcess

SPAWNER = ("import subprocess, sys, time; "
           "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']) for _ in range(2)]; "
           "sys.stderr.write('host says hello'); sys.stderr.flush(); "
           "print(' '.join(str(k.pid) for k in kids), flush=True); time.sleep(600)")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start(tmp_path) -> tuple[HostProcess, list[int]]:
    out = tmp_path / "kids.txt"
    proc = HostProcess([sys.executable, "-c", SPAWNER.replace("print(", f"open({str(out)!r}, 'w').write(")
                        .replace(", flush=True)", ")")],
                       env=dict(os.environ), pass_fds=(), log_path=tmp_path / "log.txt")
    end = time.monotonic() + 60
    while time.monotonic() < end and not (out.exists() and out.read_text().strip()):
        time.sleep(0.02)
    return proc, [int(p) for p in out.read_text().split()]


def test_kill_ends_the_host_and_everything_it_started(tmp_path):
    """Does kill() SIGKILL the host's whole process group, reap it, and return its status?"""
    proc, kids = start(tmp_path)
    assert proc.alive and all(alive(k) for k in kids)
    assert proc.kill() == -9
    end = time.monotonic() + 10
    while time.monotonic() < end and any(alive(k) for k in kids):
        time.sleep(0.02)
    assert not proc.alive and not any(alive(k) for k in kids)
    assert proc.kill() == -9, "idempotent"
    assert "host says hello" in proc.log_tail()


def test_a_dropped_handle_still_kills_its_host(tmp_path):
    """If the handle is garbage-collected without kill(), is the host killed anyway?"""
    proc, kids = start(tmp_path)
    pid = proc.pid
    del proc
    gc.collect()
    end = time.monotonic() + 10
    while time.monotonic() < end and (alive(pid) or any(alive(k) for k in kids)):
        time.sleep(0.02)
    assert not alive(pid) and not any(alive(k) for k in kids)
