"""The per-role accounting script reads the kernel's exit records and adds them up by role (no timings checked)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import sandbox_roles as roles  # noqa: E402


def test_records_add_up_by_role_name_or_by_depth_below_bubblewrap():
    """Are named processes counted under their role, unnamed ones below bubblewrap by their depth,
    the command's other processes as trusted, and processes outside the command's tree left out?"""
    E = roles.Exit
    exits = [E(10, 1, "course", 5000, 1), E(11, 10, "python3.11", 7000, 1), E(12, 11, "bwrap", 0, 1),
             E(13, 12, "python3.11", 900, 1), E(14, 13, "python3.11", 800, 1), E(15, 14, "python3.11", 700, 1),
             E(16, 15, "python3.11", 600, 1), E(17, 16, "python3.11", 500, 1),
             E(20, 12, "sbx-zygote", 90, 1), E(21, 20, "sbx-supervisor", 80, 1), E(99, 1, "other", 1, 1)]
    groups = roles.by_role(exits, 10)
    assert {role: sorted(e.pid for e in items) for role, items in groups.items()} == {
        "trusted: course": [10], "trusted: python3.11": [11], "trusted: bwrap": [12],
        "zygote": [13, 20], "supervisor": [14, 21], "template": [15], "problem": [16, 17]}
    rows = {r["role"]: r for r in roles.report(groups, 2)}
    assert rows["problem"]["cpu_ms_per_submission"] == pytest.approx((600 + 500) / 1000 / 2)


@pytest.mark.skipif(os.geteuid() != 0, reason="taskstats needs root")
def test_the_listener_gets_an_ended_process_with_its_name_and_cpu_time():
    """Does the taskstats listener report a process that ends, with the name it gave itself, its
    parent and some CPU time?"""
    listener = roles.ExitListener()
    listener.start()
    try:
        code = ("import ctypes, time\nctypes.CDLL(None).prctl(15, b'roles-probe', 0, 0, 0)\n"
                "end = time.process_time() + 0.05\nwhile time.process_time() < end:\n    pass")
        proc = subprocess.run([sys.executable, "-c", code], check=True)
        assert proc.returncode == 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not [e for e in listener.exits if e.comm == "roles-probe"]:
            time.sleep(0.05)
    finally:
        listener.stop()
    mine = [e for e in listener.exits if e.comm == "roles-probe"]
    assert len(mine) == 1 and mine[0].ppid == os.getpid() and mine[0].cpu_us >= 40_000 and mine[0].minflt > 0
