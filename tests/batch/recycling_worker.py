"""A pool worker process (autograder.batch.worker) that asks to be replaced from its second result
on: run as `python -m tests.batch.recycling_worker ...` by tests of the pool's recycling."""
from __future__ import annotations

import sys

from autograder.batch import worker

if __name__ == "__main__":
    worker.WARMUP = 1                  # the memory baseline after the first submission,
    worker.CHECK_EVERY = 1             # compared after each one,
    worker.GROWTH_MB = float("-inf")   # and always found grown
    sys.exit(worker.main())
