"""A Dask worker preload (test_cluster): a worker that cannot grade, in the way the environment's
BROKEN_WORKER names:

- no-course: its machine does not see the course folder at the client's path (its course.yml is
  looked for under a name no course folder holds);
- dies: its process ends as it starts a grading worker (as when its nanny kills it for memory).
"""
from __future__ import annotations

import os
from typing import Any


def dask_setup(worker: Any) -> None:
    from autograder.batch import cluster

    if os.environ.get("BROKEN_WORKER") == "no-course":
        cluster.CONFIG_FILE = "not-on-this-machine.yml"
    if os.environ.get("BROKEN_WORKER") == "dies":
        cluster._WarmThread.__init__ = lambda *args: os._exit(1)  # type: ignore[method-assign]
