"""tools/bench_sandbox.py's command line: what it measures is listed, a mistyped one is refused (no timings checked)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "bench_sandbox.py"


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_help_lists_what_it_measures_and_measures_nothing():
    """Does `--help` name each measurement and exit 0 without starting a sandbox?"""
    proc = bench("--help")
    assert proc.returncode == 0, proc.stderr
    for what in ("all", "startup", "flood", "problems"):
        assert what in proc.stdout
    assert "host start" not in proc.stdout


def test_a_mistyped_measurement_is_refused_in_one_line():
    """Is `startupp` an error naming it (exit 2, nothing measured), not a silent run of nothing?"""
    proc = bench("startupp")
    assert proc.returncode == 2 and proc.stdout == ""
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "'startupp'" in errors[0]


def test_problems_refuses_a_count_below_one():
    proc = bench("problems", "0")
    assert proc.returncode == 2 and "expected a whole number of at least 1, not '0'" in proc.stderr
