"""`course validate`: the source notebook runs clean in a real Jupyter kernel, the release fails only
with NotImplementedError inside stubs, and (through the real autograder) the source scores full
marks and the release scores zero. Before running anything it checks that course.yml, the
notebooks, the graders and the gradebook agree (see `consistency`): points of every grade cell and
of the intro's points table (source and release), a grader file for every problem and a problem for
every grader file, the function each problem grades defined in its notebook, the gradebook's max
scores, and nbgrader's config routing `nbgrader autograde`/`generate_feedback` through this engine."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from .config import Assignment, Course
from .consistency import extension_problems, graders_problems, points_problems
from .errors import CourseError
from .text import truncate
from .toolpath import tools_on_path


@dataclass(frozen=True)
class CellError:
    index: int
    ename: str
    evalue: str
    grade_id: str | None


@dataclass(frozen=True)
class NotebookRun:
    path: Path
    cells: int
    errors: tuple[CellError, ...]
    seconds: float


@dataclass(frozen=True)
class ValidationReport:
    assignment: str
    source_runs: tuple[NotebookRun, ...]
    release_runs: tuple[NotebookRun, ...]
    source_score: tuple[float, float]     # (score, max) of the source through the autograder
    release_score: tuple[float, float]
    problems: tuple[str, ...]             # empty when everything holds

    @property
    def ok(self) -> bool:
        return not self.problems


def execute_notebook(path: Path, *, timeout: float) -> NotebookRun:
    """Run every cell in a fresh python3 kernel (errors recorded, execution continues)."""
    import time

    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    # The kernel is this environment's python; IPC sockets in a private folder: no TCP ports,
    # no "unencrypted TCP" warnings.
    with tools_on_path(), tempfile.TemporaryDirectory(prefix="course-validate-") as cwd:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(cwd, "kernel"))
        client = NotebookClient(nb, km=km, timeout=int(timeout), kernel_name="python3",
                                allow_errors=True, resources={"metadata": {"path": cwd}})
        try:
            client.execute()
        finally:
            if km.has_kernel:
                km.shutdown_kernel(now=True)
    errors = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                errors.append(CellError(i, out.get("ename", "?"), truncate(str(out.get("evalue", "")), 200), gid))
    return NotebookRun(path=path, cells=len(nb.cells), errors=tuple(errors),
                       seconds=round(time.perf_counter() - started, 2))


def _grade_file(course: Course, assignment: Assignment, notebooks: list[Path], label: str) -> tuple[float, float, str]:
    from .grading.engine import grade_submission, load_instructor_code

    code = load_instructor_code(course, assignment)
    with tempfile.TemporaryDirectory(prefix="course-validate-") as tmp:
        folder = Path(tmp) / label / assignment.name
        folder.mkdir(parents=True)
        for nb in notebooks:
            shutil.copy2(nb, folder / nb.name)
        result = grade_submission(course, assignment, label, folder, seed=12345, code=code)
    return result.score, result.max_score, result.crash_reason


def _notebook(path: Path) -> dict[str, Any] | None:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return nb if isinstance(nb, dict) and isinstance(nb.get("cells"), list) else None


def _submitted(course: Course, assignment: Assignment) -> list[str]:
    base = course.layout.submitted_dir
    try:
        return [p.name for p in base.iterdir() if (p / assignment.name).is_dir()]
    except OSError:
        return []


def consistency_problems(course: Course, assignment: Assignment) -> list[str]:
    """Where course.yml, the notebooks, the graders, the gradebook and nbgrader's config disagree."""
    from .nbgrader_hooks import config_problems
    from .reporting.gradebook import max_score_problems

    layout = course.layout
    problems: list[str] = []
    sources: dict[str, dict[str, Any]] = {}
    for name in assignment.notebooks:
        for kind, path in (("source", layout.source(assignment.name) / name),
                           ("release", layout.release(assignment.name) / name)):
            nb = _notebook(path)
            if nb is None:
                continue
            if kind == "source":
                sources[name] = nb
            problems += points_problems(nb, assignment, name, layout.relative(path))
    problems += graders_problems(course, assignment, sources)
    problems += extension_problems(course, assignment, _submitted(course, assignment))
    problems += max_score_problems(course, assignment)
    problems += config_problems(course)
    return problems


def validate(course: Course, assignment: Assignment) -> ValidationReport:
    problems: list[str] = consistency_problems(course, assignment)
    timeout = max(assignment.limits.cell_seconds, 60)
    source_nbs = [course.layout.source(assignment.name) / n for n in assignment.notebooks]
    release_nbs = [course.layout.release(assignment.name) / n for n in assignment.notebooks]
    for nb in release_nbs:
        if not nb.is_file():
            raise CourseError(f"{course.layout.relative(nb)}: not found "
                              f"(run `course release {assignment.name}` first)")

    source_runs = tuple(execute_notebook(nb, timeout=timeout) for nb in source_nbs)
    for run in source_runs:
        for e in run.errors:
            problems.append(f"source {run.path.name}: cell {e.index} raised {e.ename}: {e.evalue}")
    release_runs = tuple(execute_notebook(nb, timeout=timeout) for nb in release_nbs)
    for run in release_runs:
        for e in run.errors:
            if e.ename != "NotImplementedError":
                problems.append(f"release {run.path.name}: cell {e.index} raised {e.ename} (only NotImplementedError "
                                f"from an unfinished stub is expected): {e.evalue}")

    src_score, src_max, src_err = _grade_file(course, assignment, source_nbs, "source-notebook")
    rel_score, rel_max, rel_err = _grade_file(course, assignment, release_nbs, "release-notebook")
    if src_err or abs(src_score - src_max) > 1e-6:
        problems.append(f"source scores {src_score:g}/{src_max:g} through the autograder, expected full marks"
                        + (f" ({src_err})" if src_err else ""))
    if rel_err or rel_score != 0:
        problems.append(f"release scores {rel_score:g}/{rel_max:g} through the autograder, expected 0"
                        + (f" ({rel_err})" if rel_err else ""))
    return ValidationReport(assignment=assignment.name, source_runs=source_runs, release_runs=release_runs,
                            source_score=(src_score, src_max), release_score=(rel_score, rel_max),
                            problems=tuple(problems))
