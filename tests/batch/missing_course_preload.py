"""A Dask worker preload (test_cluster): this worker's machine does not see the course folder at
the client's path (its course.yml is looked for under a name no course folder holds)."""
from __future__ import annotations

from typing import Any


def dask_setup(worker: Any) -> None:
    from autograder.batch import cluster

    cluster.CONFIG_FILE = "not-on-this-machine.yml"
