"""`course validate`: the source notebook runs clean in a real Jupyter kernel, the release fails only
with NotImplementedError inside stubs, and (through the real autograder) the source scores full
marks and the release scores zero. A cell whose nbgrader metadata is not a mapping stops it at
once, in one line, as it stops `course release`. Before running anything it checks that course.yml,
the notebooks, the graders and the gradebook agree (see `consistency`): points of every grade cell
and of the intro's points table (source and release), a grader file for every problem and a problem
for every grader file, the function each problem grades defined in its notebook (in one cell, above
its grade cell), the gradebook's max scores, and nbgrader's config routing `nbgrader
autograde`/`generate_feedback` through this engine; and the source's nbgrader markers, as `course
release` checks them (see `markers`). It also runs `course release`'s leak check on release/ as
committed, and makes the student version again in a scratch folder to say when release/ is older
than source/ (students would get the old notebook), unless `course release` would refuse the source.
A source below full marks is named problem by problem, with the first failing check's message, and
every grader error gets its own line. A cell of either notebook still running after course.yml's
`limits.cell_seconds` is stopped there, its kernel shut down, and named in a PROBLEM line; Ctrl-C or
SIGTERM while a kernel runs kills it and stops the command (exit 130 or 143)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import signal
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError

from .config import Assignment, Course
from .consistency import (
    cell_name,
    extension_problems,
    grader_file_problems,
    notebook_json,
    points_problems,
    require_release,
    source_heading_problems,
    uncollected_checks,
    version_problem,
)
from .errors import CourseError, raise_on_sigterm
from .markers import course_delimiters, marker_problems, metadata_problems
from .notebooks import UTF8_BYTE_ORDER_MARK
from .text import first_few, plural, truncate
from .toolpath import tools_on_path

if TYPE_CHECKING:
    from .grading.results import SubmissionResult
    from .grading.session import InstructorCode


@dataclass(frozen=True)
class CellError:
    index: int                  # from 0, as nbformat counts (`cell_name` shows it as Jupyter does)
    ename: str
    evalue: str
    grade_id: str | None
    line: int | None = None     # the line of the cell the error arose at, when its traceback tells


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# how a kernel's traceback or error names a line of the cell it ran: IPython's "Cell In[7], line 4", and
# the temporary file it compiled the cell as ("/tmp/ipykernel_123/2614311265.py, line 4")
_CELL_LINE = re.compile(r"Cell In\[(?P<count>\d+)\], line (?P<line>\d+)")
_TEMPORARY_FILE = re.compile(r"(?:[^\s()\"']*/)?\d+\.py, line (?P<line>\d+)")


def cell_error(index: int, cell: nbformat.NotebookNode, out: dict[str, Any]) -> CellError:
    """Cell `index`'s error output `out` as a CellError: the line of that cell its traceback
    stops at, and IPython's temporary file name in the error's text said as "line 4 of the cell"."""
    gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    evalue = _TEMPORARY_FILE.sub(lambda m: f"line {m['line']} of the cell", str(out.get("evalue", "")))
    traceback = _ANSI.sub("", "\n".join(str(t) for t in out.get("traceback", [])))
    lines = [int(m["line"]) for m in _CELL_LINE.finditer(traceback) if int(m["count"]) == cell.get("execution_count")]
    return CellError(index, str(out.get("ename", "?")), truncate(evalue, 200), gid, lines[-1] if lines else None)


def cell_error_text(nb: nbformat.NotebookNode, error: CellError) -> str:
    """'cell 8 (`test_relu`) raised AssertionError at line 5 of the cell: ...', numbered from 1."""
    at = f" at line {error.line} of the cell" if error.line and "of the cell" not in error.evalue else ""
    return f"{cell_name(nb, error.index)} raised {error.ename}{at}" + (f": {error.evalue}" if error.evalue else "")


@dataclass(frozen=True)
class NotebookRun:
    path: Path
    cells: int
    errors: tuple[CellError, ...]
    seconds: float
    timed_out: int | None = None    # the cell (from 0) still running at the time limit, where the run ended


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
    if text.startswith(UTF8_BYTE_ORDER_MARK.decode()):
        raise CourseError(f"{shown}: starts with a byte-order mark, as some editors such as Notepad save files, "
                          f"which Jupyter and nbgrader cannot read; save it again as UTF-8 without BOM")
    try:
        data = json.loads(text)         # for its message: where the JSON breaks
        if isinstance(data, dict) and version_problem(data):    # nbformat's validator would assert
            raise ValueError(version_problem(data))
        nb: nbformat.NotebookNode = nbformat.convert(nbformat.reader.reads(text), 4)
        nbformat.validate(nb)
    except RecursionError:
        raise CourseError(f"{shown}: not a readable notebook (its JSON nests too deeply)") from None
    except (ValueError, KeyError, TypeError, AttributeError, nbformat.ValidationError) as exc:
        why = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CourseError(f"{shown}: not a readable notebook ({truncate(why, 200)})") from None
    return nb


def readable_notebooks(course: Course, assignment: Assignment) -> dict[Path, nbformat.NotebookNode]:
    """The assignment's source and released notebooks, each read and validated (`read_notebook`), once the
    release is there (`require_release`): a CourseError, one line, for the first that is missing or is no
    notebook. `course validate` and `course gradescope` (before it packs them) refuse the same files."""
    require_release(course, assignment)
    paths = [course.layout.source(assignment.name) / n for n in assignment.notebooks]
    paths += [course.layout.release(assignment.name) / n for n in assignment.notebooks]
    return {nb: read_notebook(nb, course.layout.relative(nb)) for nb in paths}


class _Terminated(SystemExit):
    """SIGTERM while a notebook runs in its kernel: the command stops as for Ctrl-C, exit 143."""


async def _run_cells(client: NotebookClient, km: AsyncKernelManager) -> None:
    try:
        await client.async_execute()
    finally:
        if client.kc is not None:
            client.kc.stop_channels()
        if km.has_kernel:
            await km.shutdown_kernel(now=True)


def _kill_kernel(km: AsyncKernelManager) -> None:
    """SIGKILL to the kernel's process group (its own session: the kernel and whatever it started)."""
    group = getattr(km.provisioner, "pgid", None) or getattr(km.provisioner, "pid", None)
    if group:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)


def execute_notebook(path: Path, nb: nbformat.NotebookNode, *, timeout: float) -> NotebookRun:
    """Run every cell of `nb` (read from `path`) in a fresh python3 kernel (errors recorded,
    execution continues). A cell still running after `timeout` seconds ends the run there
    (`NotebookRun.timed_out`), the kernel shut down.

    The kernel manager is jupyter_client's asynchronous one: nbclient awaits the kernel's output and
    its reply to a cell side by side, which a blocking client (`KernelManager`) turns into one call
    that waits, its event loop stopped, for the cell's end, so that no time limit ever fired. nbclient
    runs in a thread of its own, so that Ctrl-C and SIGTERM reach this one (nbclient's own handlers
    cannot be installed outside the main thread): the kernel's process group is then killed and the
    KeyboardInterrupt, or SystemExit 143, goes on."""
    import time

    started = time.perf_counter()
    running: list[int] = []
    failure: list[BaseException] = []
    ended = threading.Event()     # not Thread.is_alive: a join that a signal's exception interrupts can leave it False

    def work(client: NotebookClient, km: AsyncKernelManager) -> None:
        try:
            asyncio.run(_run_cells(client, km))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failure.append(exc)
        finally:
            ended.set()

    # The kernel is this environment's python; IPC sockets in a private folder: no TCP ports,
    # no "unencrypted TCP" warnings.
    with tools_on_path(), tempfile.TemporaryDirectory(prefix="course-validate-") as cwd:
        km = AsyncKernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(cwd, "kernel"))
        client = NotebookClient(nb, km=km, timeout=max(1, math.ceil(timeout)), kernel_name="python3",
                                allow_errors=True, resources={"metadata": {"path": cwd}},
                                on_cell_execute=lambda cell, cell_index: running.append(cell_index))
        thread = threading.Thread(target=work, args=(client, km), name="course-validate-kernel", daemon=True)
        restore = raise_on_sigterm(_Terminated, 128 + signal.SIGTERM)
        try:
            thread.start()
            while not ended.wait(0.2):
                pass
        except BaseException:
            stop = time.monotonic() + 10
            while not ended.is_set() and time.monotonic() < stop:   # a kernel still starting is killed too
                _kill_kernel(km)
                ended.wait(0.1)
            raise
        finally:
            restore()
    timed_out = None
    if failure:
        if not isinstance(failure[0], CellTimeoutError) or not running:
            raise failure[0]
        timed_out = running[-1]
    errors = [cell_error(i, cell, out) for i, cell in enumerate(nb.cells)
              for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    return NotebookRun(path=path, cells=len(nb.cells), errors=tuple(errors),
                       seconds=round(time.perf_counter() - started, 2), timed_out=timed_out)


def timed_out_text(nb: nbformat.NotebookNode, run: NotebookRun, limit: float) -> str:
    """'cell 5 (`layer_norm_solution`) still ran after limits.cell_seconds (30 s): ...', or nothing."""
    if run.timed_out is None:
        return ""
    below = len(nb.cells) - run.timed_out - 1
    return (f"{cell_name(nb, run.timed_out)} still ran after limits.cell_seconds ({limit:g} s), so it was "
            f"stopped and its kernel shut down" + (f"; the {plural(below, 'cell')} below it did not run" if below
                                                  else ""))


def _grade_file(course: Course, assignment: Assignment, notebooks: list[Path], label: str,
                code: InstructorCode) -> SubmissionResult:
    from .grading.engine import grade_submission

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
        elif mine := [t for t in result.tests if t.problem == p.problem]:
            carried = sum(t.max_score for t in mine)
            line += (f"; its {plural(len(mine), 'check')} passed, but their weights (@pytest.mark.points) carry "
                     f"{carried:g} of its {p.max_score:g} points")
        else:
            line += "; no check ran for it"
        problems.append(line)
    if not problems and abs(result.score - result.max_score) > 1e-6:
        problems.append(f"source scores {result.score:g}/{result.max_score:g} through the autograder, "
                        f"expected full marks")
    problems += [f"source: grader error in {truncate(e, 300)}" for e in result.grader_errors]
    return problems


def _submitted(course: Course, assignment: Assignment) -> list[str]:
    base = course.layout.submitted_dir
    try:
        return [p.name for p in base.iterdir() if (p / assignment.name).is_dir()]
    except OSError:
        return []


def require_nbgrader_mappings(course: Course, assignment: Assignment) -> None:
    """Refuse (CourseError, one line naming the notebook and the cell) a source or released notebook
    holding a cell whose metadata or nbgrader metadata is not a mapping (`markers.metadata_problems`),
    as `course release` does: every check here reads it as one. A notebook that cannot be read is
    left to `read_notebook`."""
    layout = course.layout
    found: list[str] = []
    for name in assignment.notebooks:
        for path in (layout.source(assignment.name) / name, layout.release(assignment.name) / name):
            nb = notebook_json(path)
            if nb is not None:
                found += metadata_problems(nb, layout.relative(path))
    if found:
        raise CourseError("; ".join(found))


def consistency_problems(course: Course, assignment: Assignment) -> list[str]:
    """Where course.yml, the notebooks, the graders, the gradebook and nbgrader's config disagree, and
    the source's markers that `course release` would refuse."""
    from .nbgrader_hooks import config_problems
    from .reporting.gradebook import max_score_problems

    layout = course.layout
    marks = course_delimiters(course.root)
    problems: list[str] = []
    for name in assignment.notebooks:
        for kind, path in (("source", layout.source(assignment.name) / name),
                           ("release", layout.release(assignment.name) / name)):
            nb = notebook_json(path)
            if nb is None:
                continue
            if kind == "source":
                problems += marker_problems(nb, marks, layout.relative(path))
            problems += points_problems(nb, assignment, name, layout.relative(path))
    problems += grader_file_problems(course, assignment)
    problems += extension_problems(course, assignment, _submitted(course, assignment))
    problems += max_score_problems(course, assignment)
    problems += config_problems(course)
    return problems


def catalogue_problems(code: InstructorCode, assignment: Assignment) -> list[str]:
    """Mistakes of the catalogue (mistakes.py) whose id names no problem of the assignment (a typo in
    `<problem>.<name>`): the engine tries a mistake only on its own problem's checks, so such a one
    would never be named, silently."""
    from .grading.diagnosis import GENERAL

    if code.catalogue is None:
        return []
    known = {p.name for p in assignment.problems}
    stray = [m.id for m in code.catalogue if m.problem not in known | {GENERAL}]
    if not stray:
        return []
    where = f"{code.shown}/mistakes.py" if code.shown else "mistakes.py"
    one = len(stray) == 1
    return [f"{where}: mistake {'id' if one else 'ids'} {', '.join(repr(i) for i in stray)} "
            f"{'names' if one else 'name'} no problem of course.yml (its problems: {', '.join(sorted(known))}; or "
            f"{GENERAL}), so {'it is' if one else 'they are'} never tried"]


def release_leaks(course: Course, assignment: Assignment) -> list[str]:
    """`course release`'s leak check run again on release/ as committed (a line pasted in by hand
    after the release): its first leak, or nothing."""
    from .errors import ReleaseError
    from .release import leak_check

    try:
        leak_check(course.layout, assignment, course_delimiters(course.root))
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
    shown = first_few([str(i) for i in differ], 8)
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
    cells' types and sources compared with release/. Nothing when `course release` would refuse the
    source (`release.source_problems`, which `consistency_problems` reports): there is then no student
    version to compare with."""
    from .consistency import write_points
    from .layout import CourseLayout
    from .release import nbgrader, nbgrader_failure, source_problems

    layout = course.layout
    marks = course_delimiters(course.root)
    with tempfile.TemporaryDirectory(prefix="course-validate-release-") as tmp:
        build = CourseLayout(Path(tmp))
        shutil.copytree(layout.source(assignment.name), build.source(assignment.name),
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        for name in assignment.notebooks:
            path = build.source(assignment.name) / name
            nb = json.loads(path.read_text(encoding="utf-8"))
            if source_problems(nb, assignment, name, layout.relative(layout.source(assignment.name) / name), marks):
                return []
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


def release_score_problems(released: SubmissionResult, source: SubmissionResult) -> list[str]:
    """The line saying the release does not score zero through the autograder, or that grading it
    crashed (then no check ran, and its 0 says nothing), or nothing."""
    if released.crashed:
        same = source.crashed and source.crash_reason == released.crash_reason
        why = "grading crashed, as for the source" if same else f"grading crashed: {released.crash_reason}"
        return [f"release: no check ran through the autograder, so its {released.score:g}/{released.max_score:g} "
                f"does not show that the stubs score nothing ({why})"]
    if released.score != 0:
        return [f"release scores {released.score:g}/{released.max_score:g} through the autograder, expected 0"]
    return []


def validate(course: Course, assignment: Assignment) -> ValidationReport:
    from .grading.engine import load_instructor_code

    require_nbgrader_mappings(course, assignment)
    problems: list[str] = consistency_problems(course, assignment)
    code = load_instructor_code(course, assignment)      # before the kernels: a module that fails stops here
    problems += catalogue_problems(code, assignment)
    timeout = assignment.limits.cell_seconds      # a cell of the source gets what a student's cell gets
    source_nbs = [course.layout.source(assignment.name) / n for n in assignment.notebooks]
    release_nbs = [course.layout.release(assignment.name) / n for n in assignment.notebooks]
    read = readable_notebooks(course, assignment)
    problems += release_leaks(course, assignment)
    problems += stale_release(course, assignment)
    source_runs = tuple(execute_notebook(nb, read[nb], timeout=timeout) for nb in source_nbs)
    shown = course.layout.relative
    for run in source_runs:
        problems += [f"source {shown(run.path)}: {cell_error_text(read[run.path], e)}" for e in run.errors]
        if run.timed_out is not None:
            problems.append(f"source {shown(run.path)}: {timed_out_text(read[run.path], run, timeout)}")
    release_runs = tuple(execute_notebook(nb, read[nb], timeout=timeout) for nb in release_nbs)
    for run in release_runs:
        problems += [f"release {shown(run.path)}: {cell_error_text(read[run.path], e)} (only NotImplementedError "
                     f"from an unfinished stub is expected)" for e in run.errors if e.ename != "NotImplementedError"]
        if run.timed_out is not None:
            problems.append(f"release {shown(run.path)}: {timed_out_text(read[run.path], run, timeout)}")

    source = _grade_file(course, assignment, source_nbs, "source-notebook", code)
    released = _grade_file(course, assignment, release_nbs, "release-notebook", code)
    problems += source_score_problems(source)
    problems += release_score_problems(released, source)
    return ValidationReport(assignment=assignment.name, source_runs=source_runs, release_runs=release_runs,
                            source_score=(source.score, source.max_score),
                            release_score=(released.score, released.max_score), problems=tuple(problems),
                            warnings=(*source_heading_problems(course, assignment),
                                      *uncollected_checks(course, assignment)))
