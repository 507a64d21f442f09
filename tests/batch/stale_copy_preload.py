"""A Dask worker preload (test_cluster): this worker's machine holds another copy of part of the
course than the client's, as a shared file system not yet in sync would show it. What differs
comes from the environment:

- STALE_STUDENT, STALE_NOTEBOOK: the worker sees the notebook STALE_NOTEBOOK in place of that
  student's while it grades them (the folder's own is put back afterwards);
- STALE_POINTS=<problem>:<points>: the worker's course.yml gives that problem other points.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any


def _stale_submission(cluster: Any, student: str, stale: Path) -> None:
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


def _stale_points(cluster: Any, problem: str, points: float) -> None:
    load_course = cluster.load_course

    def other_course_yml(folder: Any) -> Any:
        course = load_course(folder)
        return replace(course, assignments=tuple(
            replace(a, problems=tuple(replace(p, points=points) if p.name == problem else p for p in a.problems))
            for a in course.assignments))

    cluster.load_course = other_course_yml


def dask_setup(worker: Any) -> None:
    from autograder.batch import cluster

    if "STALE_STUDENT" in os.environ:
        _stale_submission(cluster, os.environ["STALE_STUDENT"], Path(os.environ["STALE_NOTEBOOK"]))
    if "STALE_POINTS" in os.environ:
        problem, points = os.environ["STALE_POINTS"].split(":")
        _stale_points(cluster, problem, float(points))
