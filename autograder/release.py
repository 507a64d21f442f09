"""`course release`: nbgrader's generate_assignment from source/ into release/, then a leak check.

The leak check fails the release if any line that only exists inside a solution or hidden-test
region of the source survives in release/, if any nbgrader marker survives, if a released
notebook stores outputs, or if a released notebook imports the instructor-only `assignments`.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Assignment, Course
from .errors import ReleaseError
from .text import truncate
from .toolpath import tool, tool_env

MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS",
           "BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
ASSIGNMENTS_IMPORT = re.compile(r"^\s*(from\s+assignments(\.|\s)|import\s+assignments\b)", re.M)


@dataclass(frozen=True)
class ReleaseReport:
    assignment: str
    notebooks: tuple[Path, ...]      # released notebooks
    checked_lines: int               # instructor-only lines looked for in release/


def nbgrader(course: Course, *args: str) -> subprocess.CompletedProcess[str]:
    """Run an nbgrader command for this course (its root and gradebook URL set explicitly)."""
    cmd = [tool("nbgrader"), *args,
           f"--CourseDirectory.root={course.root}",
           f"--CourseDirectory.db_url={course.gradebook_url}"]
    return subprocess.run(cmd, cwd=course.root, env=tool_env(), capture_output=True, text=True)


def _cells(path: Path) -> list[dict[str, Any]]:
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReleaseError(f"{path}: not a readable notebook ({exc})") from None
    if not isinstance(cells, list):
        raise ReleaseError(f"{path}: not a readable notebook (cells is not a list)")
    return [c for c in cells if isinstance(c, dict)]


def _src(cell: dict[str, Any]) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else str(s)


def instructor_only_lines(source_nb: Path) -> set[str]:
    """Stripped lines found only inside solution / hidden-test regions of the source notebook."""
    hidden: set[str] = set()
    public: set[str] = set()
    for cell in _cells(source_nb):
        nbg = (cell.get("metadata") or {}).get("nbgrader") or {}
        inside = None
        for line in _src(cell).splitlines():
            s = line.strip()
            if "BEGIN SOLUTION" in s:
                inside = "solution"
                continue
            if "BEGIN HIDDEN TESTS" in s:
                inside = "hidden"
                continue
            if "END SOLUTION" in s or "END HIDDEN TESTS" in s:
                inside = None
                continue
            if not s:
                continue
            # A whole markdown solution cell (no markers) is instructor-only too.
            if inside or (nbg.get("solution") and cell.get("cell_type") == "markdown"):
                hidden.add(s)
            else:
                public.add(s)
    return hidden - public


def leak_check(course: Course, assignment: Assignment) -> int:
    """Raise ReleaseError naming the notebook and cell of the first leak; return lines checked."""
    release = course.layout.release(assignment.name)
    checked = 0
    for name in assignment.notebooks:
        source_nb = course.layout.source(assignment.name) / name
        released = release / name
        if not released.is_file():
            raise ReleaseError(f"{released.relative_to(course.root)}: missing after release")
        secret = instructor_only_lines(source_nb)
        checked += len(secret)
        rel = released.relative_to(course.root)
        for i, cell in enumerate(_cells(released)):
            text = _src(cell)
            for marker in MARKERS:
                if marker in text:
                    raise ReleaseError(f"{rel}: cell {i} still contains the marker {marker!r}")
            if ASSIGNMENTS_IMPORT.search(text):
                raise ReleaseError(f"{rel}: cell {i} imports the instructor-only `assignments` package")
            for line in text.splitlines():
                if line.strip() in secret:
                    raise ReleaseError(f"{rel}: cell {i} leaks an instructor-only line: {truncate(line.strip(), 80)!r}")
            if cell.get("outputs"):
                raise ReleaseError(f"{rel}: cell {i} stores outputs; release notebooks must be clean")
    for extra in release.rglob("*"):
        if extra.is_file() and extra.suffix == ".py" and ASSIGNMENTS_IMPORT.search(extra.read_text(errors="replace")):
            raise ReleaseError(f"{extra.relative_to(course.root)}: imports the instructor-only `assignments` package")
    return checked


def release(course: Course, assignment: Assignment) -> ReleaseReport:
    """Generate release/<assignment>/ from source/<assignment>/ with nbgrader, then check for leaks."""
    for name in assignment.notebooks:
        source_nb = course.layout.source(assignment.name) / name
        if not source_nb.is_file():
            raise ReleaseError(f"{course.layout.relative(source_nb)}: not found")
    target = course.layout.release(assignment.name)
    proc = nbgrader(course, "generate_assignment", assignment.name, "--force")
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if "[ERROR]" in ln or "Error" in ln] or lines
        why = errors[-1].strip() if errors else "no output"
        raise ReleaseError(f"nbgrader generate_assignment {assignment.name} failed: {why}")
    try:
        checked = leak_check(course, assignment)
    except ReleaseError:
        # A leaking release must not be left where students could be given it.
        shutil.rmtree(target, ignore_errors=True)
        raise
    return ReleaseReport(assignment=assignment.name,
                         notebooks=tuple(target / n for n in assignment.notebooks),
                         checked_lines=checked)
