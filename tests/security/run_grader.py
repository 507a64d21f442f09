"""Run the `course` command and record this process's peak memory when it ends.

    python tests/security/run_grader.py PEAK_FILE course-args...

The grader is the real `course` CLI (`autograder.cli.main`) in this very process; at exit, its
VmHWM (peak resident set, from /proc/self/status) is written to PEAK_FILE in kB. The sandboxed
children are other processes and are not counted.
"""
from __future__ import annotations

import sys
from pathlib import Path


def peak_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def main() -> int:
    peak_file, args = Path(sys.argv[1]), sys.argv[2:]
    from autograder.cli import main as course

    try:
        return course(args)
    finally:
        peak_file.write_text(f"{peak_kb()}\n")


if __name__ == "__main__":
    sys.exit(main())
