"""`course validate`: the source notebook runs clean in a real Jupyter kernel, the release fails only
with NotImplementedError inside stubs, and (through the real autograder) the source scores full
marks and the release scores zero. Before running anything it checks that course.yml, the
notebooks, the graders and the gradebook agree (see `consistency`): points of every grade cell and
of the intro's points table (source and release), a grader file for every problem and a problem for
every grader file, the function each problem grades defined in its notebook, the gradebook's max
scores, and nbgrader's config routing `nbgrader autograde`/`generate_feedback` through this engine.
It also runs `course release`'s leak check on release/ as committed, and makes the student version
again in a scratch folder to say when release/ is older than source/ (students would get the old
notebook). A source below full marks is named problem by problem, with the first failing check's
message, and every grader error gets its own line."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from .config import Assignment, Course
from .consistency import extension_problems, graders_problems, points_problems, require_release, uncollected_checks
from .errors import CourseError
from .text import truncate
from .toolpath import tools_on_path

if TYPE_CHECKING:
    from .grading.results import SubmissionResult


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
    warnings: tuple[str, ...] = ()        # worth a look, but not failing the validation

    @property
    def ok(self) -> bool:
        return not self.problems


def read_notebook(path: Path, shown: str) -> nbformat.NotebookNode:
    """The notebook at `path` as nbformat 4, validated against its schema; CourseError naming it as
    `shown` when it is missing, not JSON or not a notebook (nbformat would only log the last)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CourseError(f"{shown}: not found") from None
    except (OSError, ValueError) as exc:
        raise CourseError(f"{shown}: not a readable notebook ({exc})") from None
    try:
        json.loads(text)                # for its message: where the JSON breaks
        nb: nbformat.NotebookNode = nbformat.convert(nbformat.reader.reads(text), 4)
        nbformat.validate(nb)
    except (ValueError, KeyError, TypeError, AttributeError, nbformat.ValidationError) as exc:
        why = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CourseError(f"{shown}: not a readable notebook ({truncate(why, 200)})") from None
    return nb


def execute_notebook(path: Path, nb: nbformat.NotebookNode, *, timeout: float) -> NotebookRun:
    """Run every cell of `nb` (read from `path`) in a fresh python3 kernel (errors recorded,
    execution continues)."""
    import time

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


def _grade_file(course: Course, assignment: Assignment, notebooks: list[Path], label: str) -> SubmissionResult:
    from .grading.engine import grade_submission, load_instructor_code

    code = load_instructor_code(course, assignment)
    with tempfile.TemporaryDirectory(prefix="course-validate-") as tmp:
        folder = Path(tmp) / label / assignment.name
        folder.mkdir(parents=True)
        for nb in notebooks:
            shutil.copy2(nb, folder / nb.name)
        return grade_submission(course, assignment, label, folder, seed=12345, code=code)


def source_score_problems(result: SubmissionResult) -> list[str]:
    """One line per problem the source notebook does not get full marks in, naming its points and
    its first failing check with that check's message (the grader's own error when the grader
    failed), then one line per grader error: a source that loses points is a grader or reference
    that disagrees with the notebook's solution."""
    if result.crashed:
        return [f"source scores {result.score:g}/{result.max_score:g} through the autograder, expected full marks "
                f"(grading crashed: {result.crash_reason})"]
    from .grading.results import grader_error_parts

    errors = dict(grader_error_parts(e) for e in result.grader_errors)
    problems = []
    for p in result.problem_scores():
        if abs(p.score - p.max_score) <= 1e-6:
            continue
        failing = [t for t in result.tests if t.problem == p.problem and not t.passed]
        line = f"source: {p.problem} scores {p.score:g}/{p.max_score:g} through the autograder, expected full marks"
        if failing:
            first = failing[0]
            why = f"grader error: {errors[first.name]}" if first.name in errors else first.output
            if first.status != "failed":
                why = f"{first.status}: {why}"
            line += f"; first failing check {first.name}: {truncate(why, 240)}"
            if len(failing) > 1:
                line += f" (and {len(failing) - 1} more failing check{'s' if len(failing) > 2 else ''})"
        else:
            line += "; no check ran for it"
        problems.append(line)
    if not problems and abs(result.score - result.max_score) > 1e-6:
        problems.append(f"source scores {result.score:g}/{result.max_score:g} through the autograder, "
                        f"expected full marks")
    problems += [f"source: grader error in {truncate(e, 300)}" for e in result.grader_errors]
    return problems


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


def release_leaks(course: Course, assignment: Assignment) -> list[str]:
    """`course release`'s leak check run again on release/ as committed (a line pasted in by hand
    after the release): its first leak, or nothing."""
    from .errors import ReleaseError
    from .release import leak_check

    try:
        leak_check(course.layout, assignment)
    except ReleaseError as exc:
        return [f"{exc} (course release's leak check)"]
    return []


def _cell_sources(path: Path) -> list[tuple[str, str]]:
    """(type, source) of each cell of the notebook at `path` (read before: it is a notebook)."""
    cells = nbformat.read(path, as_version=4).cells
    return [(cell.cell_type, cell.source) for cell in cells]


def _differing_cells(made: list[tuple[str, str]], committed: list[tuple[str, str]]) -> str:
    """Which cells differ, numbered from 1 as Jupyter shows them, in words: "cells 3 and 7 differ",
    "cell 4 differs" or "22 cells, course release makes 24"."""
    differ = [i + 1 for i, (a, b) in enumerate(zip(made, committed)) if a != b]
    shown = ", ".join(map(str, differ[:8])) + (f" and {len(differ) - 8} more" if len(differ) > 8 else "")
    if len(differ) == 2:
        shown = f"{differ[0]} and {differ[1]}"
    if len(made) != len(committed):
        return (f"{len(committed)} cells, course release makes {len(made)}"
                + (f"; of the first {min(len(made), len(committed))}, cell{'s' if len(differ) > 1 else ''} "
                   f"{shown} differ{'' if len(differ) > 1 else 's'}" if differ else ""))
    return f"cell{'s' if len(differ) > 1 else ''} {shown} differ{'' if len(differ) > 1 else 's'}"


def stale_release(course: Course, assignment: Assignment) -> list[str]:
    """One line per released notebook that is not what `course release` makes of source/ now (a
    source edited after the last release): the student version is made again, as `course release`
    makes it (points from course.yml, nbgrader's generate_assignment), in a scratch folder, and the
    cells' types and sources compared with release/."""
    from .consistency import write_points
    from .layout import CourseLayout
    from .release import nbgrader, nbgrader_failure

    layout = course.layout
    with tempfile.TemporaryDirectory(prefix="course-validate-release-") as tmp:
        build = CourseLayout(Path(tmp))
        shutil.copytree(layout.source(assignment.name), build.source(assignment.name),
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        for name in assignment.notebooks:
            path = build.source(assignment.name) / name
            nb = json.loads(path.read_text(encoding="utf-8"))
            if write_points(nb, assignment, name):
                nbformat.write(nbformat.from_dict(nb), path)
        proc = nbgrader(course, "generate_assignment", assignment.name, "--force", root=build.root,
                        db_url=f"sqlite:///{build.root / 'gradebook.db'}")
        if proc.returncode != 0:
            return [f"release/ could not be compared with what course release makes of source/ now: nbgrader "
                    f"generate_assignment failed: {nbgrader_failure(proc.stderr + proc.stdout)}"]
        problems = []
        for name in assignment.notebooks:
            released = layout.release(assignment.name) / name
            made, committed = _cell_sources(build.release(assignment.name) / name), _cell_sources(released)
            if made != committed:
                problems.append(f"{layout.relative(released)} is not what `course release` makes of "
                                f"{layout.relative(layout.source(assignment.name) / name)} and course.yml now "
                                f"({_differing_cells(made, committed)}), so students would get another notebook; "
                                f"run `course release {assignment.name}`")
    return problems


def validate(course: Course, assignment: Assignment) -> ValidationReport:
    problems: list[str] = consistency_problems(course, assignment)
    timeout = max(assignment.limits.cell_seconds, 60)
    source_nbs = [course.layout.source(assignment.name) / n for n in assignment.notebooks]
    release_nbs = [course.layout.release(assignment.name) / n for n in assignment.notebooks]
    require_release(course, assignment)

    read = {nb: read_notebook(nb, course.layout.relative(nb)) for nb in source_nbs + release_nbs}
    problems += release_leaks(course, assignment)
    problems += stale_release(course, assignment)
    source_runs = tuple(execute_notebook(nb, read[nb], timeout=timeout) for nb in source_nbs)
    for run in source_runs:
        for e in run.errors:
            problems.append(f"source {run.path.name}: cell {e.index} raised {e.ename}: {e.evalue}")
    release_runs = tuple(execute_notebook(nb, read[nb], timeout=timeout) for nb in release_nbs)
    for run in release_runs:
        for e in run.errors:
            if e.ename != "NotImplementedError":
                problems.append(f"release {run.path.name}: cell {e.index} raised {e.ename} (only NotImplementedError "
                                f"from an unfinished stub is expected): {e.evalue}")

    source = _grade_file(course, assignment, source_nbs, "source-notebook")
    released = _grade_file(course, assignment, release_nbs, "release-notebook")
    problems += source_score_problems(source)
    rel_score, rel_max, rel_err = released.score, released.max_score, released.crash_reason
    if rel_err or rel_score != 0:
        problems.append(f"release scores {rel_score:g}/{rel_max:g} through the autograder, expected 0"
                        + (f" ({rel_err})" if rel_err else ""))
    return ValidationReport(assignment=assignment.name, source_runs=source_runs, release_runs=release_runs,
                            source_score=(source.score, source.max_score), release_score=(rel_score, rel_max),
                            problems=tuple(problems), warnings=tuple(uncollected_checks(course, assignment)))
