"""A pool worker process (autograder.batch.worker) that, once it has served, writes the state of
Python's cyclic garbage collector to its stderr (its log): run as `python -m
tests.batch.gc_reporting_worker ...` by tests/batch/test_worker_start.py."""
from __future__ import annotations

import gc
import sys

from autograder.batch import worker

if __name__ == "__main__":
    code = worker.main()
    print(f"gc enabled={gc.isenabled()} frozen={gc.get_freeze_count()}", file=sys.stderr)
    sys.exit(code)
