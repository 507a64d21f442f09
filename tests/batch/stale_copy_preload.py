"""A Dask worker preload (test_cluster): this worker's machine holds another copy of one student's
submission while it grades it, as a shared file system not yet in sync would show it. The student
and the copy come from the environment: STALE_STUDENT, STALE_NOTEBOOK (the notebook the worker
sees in its place while grading; the folder's own is put back afterwards)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def dask_setup(worker: Any) -> None:
    from autograder.batch import cluster

    student, stale = os.environ["STALE_STUDENT"], Path(os.environ["STALE_NOTEBOOK"])
    grade_task = cluster.grade_task

    def seen_from_a_stale_copy(plugin_name: str, task: dict[str, Any]) -> dict[str, Any]:
        if task["student"] != student:
            return grade_task(plugin_name, task)
        [notebook] = Path(task["folder"]).glob("*.ipynb")
        current = notebook.read_bytes()
        notebook.write_bytes(stale.read_bytes())
        try:
            return grade_task(plugin_name, task)
        finally:
            notebook.write_bytes(current)

    cluster.grade_task = seen_from_a_stale_copy
