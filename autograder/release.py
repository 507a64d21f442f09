"""`course release`: nbgrader's generate_assignment from source/ into release/, then a leak check.

course.yml is the one source of points: the release is built from a scratch copy of source/ whose
grade cells and intro points table are written from course.yml (see `consistency`). Everything is
built in a scratch folder inside the course (its own release/ and a scratch gradebook), and swapped
in only when it succeeded: a failed release leaves the previous release, the source notebooks and the
gradebook as they were. Then the gradebook gets the release's cells, the roster, due date and max
scores (also after students have submitted; see `reporting.gradebook.apply_release`), and the source
notebooks get the points written into them.

Before anything is built, each source notebook is checked (`source_problems`, which `course
validate` runs too) for nbgrader metadata that is not a mapping, for what nbgrader would refuse
without saying where, or mishandle silently (see `markers`: unpaired or misplaced solution and
hidden-test markers, a line that looks like a marker but is not one, a solution cell with a function
and no solution region), and for what course.yml cannot fix (see `consistency.notebook_problems_found`:
a grade cell changed to Markdown, or a problem's function defined in no cell or in two, for two); each
problem is named by notebook and cell. A heading that states other points than course.yml gives its
problems ("## 1. ReLU (4 points)" above a problem worth 5) is a warning naming the notebook and cell
(`consistency.heading_points_problems`): the release is built all the same.

The leak check fails the release if any line that only exists inside a solution or hidden-test
region of the source survives in release/, if any nbgrader marker, or a line that looks like one,
survives, if a released notebook stores outputs, or if a released notebook imports the
instructor-only `assignments`.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Assignment, Course
from .consistency import (
    _nbgrader,
    cell_name,
    cell_text,
    heading_points_problems,
    notebook_json,
    notebook_problems_found,
    read_notebook_json,
    write_points,
)
from .errors import ReleaseError
from .layout import CourseLayout
from .markers import Delimiters, course_delimiters, looks_like, marker_problems, metadata_problems
from .notebooks import RefusedFile, read_regular
from .text import first_ids, truncate
from .toolpath import tool, tool_env

NBGRADER_MARKS = Delimiters()        # nbgrader's own markers
ASSIGNMENTS_IMPORT = re.compile(r"^\s*(from\s+assignments(\.|\s)|import\s+assignments\b)", re.M)


@dataclass(frozen=True)
class ReleaseReport:
    assignment: str
    notebooks: tuple[Path, ...]      # released notebooks
    checked_lines: int               # instructor-only lines looked for in release/
    points_written: tuple[tuple[str, tuple[str, ...]], ...] = ()   # (source notebook, changes) from course.yml
    gradebook: tuple[str, ...] = ()  # gradebook entries created, changed or removed
    warnings: tuple[str, ...] = ()   # `heading_points_problems` of the sources, then `renamed_ids`


def nbgrader(course: Course, *args: str, root: Path | None = None,
             db_url: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run an nbgrader command for this course: in the course folder (so its nbgrader_config.py
    applies), with the root and gradebook URL set explicitly (by default the course's own)."""
    cmd = [tool("nbgrader"), *args,
           f"--CourseDirectory.root={root or course.root}",
           f"--CourseDirectory.db_url={db_url or course.gradebook_url}"]
    return subprocess.run(cmd, cwd=course.root, env=tool_env(), capture_output=True, text=True)


def _cells(path: Path, shown: str = "") -> list[dict[str, Any]]:
    """The cells of the notebook at `path` (named `shown` in errors, else `path`)."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReleaseError(f"{shown or path}: not a readable notebook ({exc})") from None
    if not isinstance(cells, list):
        raise ReleaseError(f"{shown or path}: not a readable notebook (cells is not a list)")
    return [c for c in cells if isinstance(c, dict)]


def instructor_only_lines(source_nb: Path, marks: Delimiters = NBGRADER_MARKS) -> set[str]:
    """Stripped lines found only inside solution / hidden-test regions of the source notebook."""
    hidden: set[str] = set()
    public: set[str] = set()
    for cell in _cells(source_nb):
        nbg = _nbgrader(cell)
        inside = None
        for line in cell_text(cell).splitlines():
            s = line.strip()
            if marks.begin_solution in s:
                inside = "solution"
                continue
            if marks.begin_hidden in s:
                inside = "hidden"
                continue
            if marks.end_solution in s or marks.end_hidden in s:
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


def leak_check(layout: CourseLayout, assignment: Assignment, marks: Delimiters = NBGRADER_MARKS) -> int:
    """Raise ReleaseError naming the notebook and cell of the first leak in `layout`'s release/ (a
    course folder, or a scratch build of one), with `marks` the course's delimiters (and nbgrader's
    default ones, never meant to survive either); return lines checked."""
    release = layout.release(assignment.name)
    checked = 0
    for name in assignment.notebooks:
        source_nb = layout.source(assignment.name) / name
        released = release / name
        if not released.is_file():
            raise ReleaseError(f"{layout.relative(released)}: missing after release")
        secret = instructor_only_lines(source_nb, marks)
        checked += len(secret)
        rel = layout.relative(released)
        for i, cell in enumerate(_cells(released, rel), start=1):     # numbered as Jupyter shows them
            text = cell_text(cell)
            for marker in dict.fromkeys((*marks.all, *NBGRADER_MARKS.all)):
                if marker in text:
                    raise ReleaseError(f"{rel}: cell {i} still contains the marker {marker!r}")
            if ASSIGNMENTS_IMPORT.search(text):
                raise ReleaseError(f"{rel}: cell {i} imports the instructor-only `assignments` package")
            for line in text.splitlines():
                if line.strip() in secret:
                    raise ReleaseError(f"{rel}: cell {i} leaks an instructor-only line: {truncate(line.strip(), 80)!r}")
                like = looks_like(line, marks)
                if like:
                    raise ReleaseError(f"{rel}: cell {i} still contains a line that looks like the marker {like!r}: "
                                       f"{truncate(line.strip(), 80)!r}")
            if cell.get("outputs"):
                raise ReleaseError(f"{rel}: cell {i} stores outputs; release notebooks must be clean")
    for extra in release.rglob("*"):
        if extra.is_file() and extra.suffix == ".py" and ASSIGNMENTS_IMPORT.search(extra.read_text(errors="replace")):
            raise ReleaseError(f"{layout.relative(extra)}: imports the instructor-only `assignments` package")
    return checked


def _read_notebook(path: Path, shown: str) -> dict[str, Any]:
    """The notebook at `path` as JSON (named `shown`, its course-relative path, in errors)."""
    try:
        return read_notebook_json(path)
    except (OSError, ValueError) as exc:
        raise ReleaseError(f"{shown}: not a readable notebook ({exc})") from None


def _write_notebook(nb: dict[str, Any], path: Path) -> None:
    """Write `nb` as nbformat writes notebooks (so an unchanged notebook keeps its bytes), atomically."""
    import nbformat

    from .reporting.results_json import atomic_write_text

    atomic_write_text(path, nbformat.writes(nbformat.from_dict(nb)) + "\n")


def _swap_in(new: Path, target: Path) -> Path | None:
    """Put folder `new` at `target`; the previous `target` is kept beside it (returned) until the
    caller drops or restores it."""
    previous = None
    if target.exists():
        previous = target.with_name(f".{target.name}.previous-{os.getpid()}")
        if previous.exists():
            shutil.rmtree(previous)
        os.rename(target, previous)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(new, target)
    except BaseException:
        if previous is not None:
            os.rename(previous, target)
        raise
    return previous


def _restore(target: Path, previous: Path | None) -> None:
    shutil.rmtree(target, ignore_errors=True)
    if previous is not None:
        os.rename(previous, target)


def nbgrader_failure(output: str) -> str:
    """What an nbgrader command that failed said, as one line: its last `[... | ERROR]` message with
    the indented lines that continue it (nbgrader writes one message over several lines), but not
    the generic "see the above traceback" ones (a logged traceback gives its exception line); else the
    last line of error text, else the last line."""
    lines = [ln for ln in output.splitlines() if ln.strip()]
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in lines:
        if "| ERROR]" in line:
            current = [line.split("| ERROR]", 1)[1].strip()]
            blocks.append(current)
        elif current is not None and line[:1].isspace() and not line.lstrip().startswith("Traceback"):
            current.append(line.strip())
        else:
            current = None                          # the message ended (a traceback is not part of it)
    generic = ("There was an error processing", "Please see the the above traceback", "Please see the above")
    messages = [b[-1] if b[0].startswith("Traceback") else " ".join(b)      # a traceback: its exception line
                for b in blocks if not b[0].startswith(generic)]
    if messages:
        return truncate(" ".join(messages[-1].split()), 400)
    errors = [ln.strip() for ln in lines if "Error" in ln]
    return errors[-1] if errors else (lines[-1].strip() if lines else "no output")


def unversioned_cells(nb: dict[str, Any]) -> list[int]:
    """Indexes of the cells whose nbgrader metadata has no `schema_version` (an empty `nbgrader: {}` or a
    hand-written entry): nbgrader takes them for an old format and asks for `nbgrader update`."""
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
        if isinstance(nbg, dict) and "schema_version" not in nbg:
            out.append(i)
    return out


def source_problems(nb: dict[str, Any], assignment: Assignment, name: str, where: str, marks: Delimiters) -> list[str]:
    """What `course release` refuses in the source notebook `nb` (file `name` of `assignment`, shown as
    `where`) before it builds anything, one line each naming the notebook and the cell: nbgrader
    metadata that is not a mapping (alone then, as every other check reads it as one), else the
    markers (`markers.marker_problems`, with `marks` the course's delimiters) and what course.yml
    cannot fix (`consistency.notebook_problems_found`)."""
    return (metadata_problems(nb, where)
            or marker_problems(nb, marks, where) + notebook_problems_found(nb, assignment, name, where))


ID_KINDS = {"grade": "grade", "solution": "answer", "task": "task"}   # nbgrader flag -> the word for its cells


def _ids_by_kind(nb: dict[str, Any]) -> dict[str, set[str]]:
    """The nbgrader ids of `nb`'s grade, answer and task cells, by kind."""
    out: dict[str, set[str]] = {kind: set() for kind in ID_KINDS}
    for cell in nb.get("cells", []):
        meta = _nbgrader(cell) if isinstance(cell, dict) else {}
        grade_id = meta.get("grade_id")
        for kind in ID_KINDS:
            if meta.get(kind) and isinstance(grade_id, str):
                out[kind].add(grade_id)
    return out


def _folders(base: Path) -> list[str]:
    """The names of the folders in `base` (not through a link), sorted; none when it is no folder."""
    return sorted(p.name for p in base.iterdir() if p.is_dir() and not p.is_symlink()) if base.is_dir() else []


def _held_ids(path: Path, max_bytes: int) -> dict[str, set[str]] | None:
    """The nbgrader ids by kind (`_ids_by_kind`) of the notebook at `path`, read as the grader reads a
    submission (a regular file within `max_bytes`, never through a link); None when it is not one."""
    try:
        nb = json.loads(read_regular(path, max_bytes))
    except (RefusedFile, ValueError, RecursionError):
        return None
    return _ids_by_kind(nb) if isinstance(nb, dict) else None


def renamed_ids(course: Course, assignment: Assignment, released: Path) -> list[str]:
    """Warnings, one line each per notebook, about nbgrader ids of the new release in `released` that
    formgrader cannot show for submissions made or graded before it: most likely an id renamed in
    source/ after students submitted. Formgrader shows a submission's autograded copy and puts a score
    or comment box on each cell of it whose id the gradebook has for that submission.

    - An answer or task cell: a line when the release has ids of that kind that no notebook in
      submitted/ has, while submitted notebooks have ids of that kind the release no longer has. Those
      notebooks keep the old id, grading again does not change it (their copies lose the old id's
      marking and never get the new one), so formgrader shows them no comment box for the new one
      until the old id is put back (nbgrader's own generate_assignment refuses any added or removed
      cell once there are submissions).
    - A grade cell (renamed in course.yml too, as the release requires): a line naming the students
      whose autograded copy has a grade id the release no longer has and lacks one it has. Grading
      puts the released grade cell back in the copy, so formgrader shows its score box once
      they are graded again; until then it shows none, and the gradebook's grade for the new cell
      has no score.

    Submitted files and copies are only read, as the grader reads submissions; one that is not a
    regular file, not notebook JSON, or over the size limit is left out."""
    layout = course.layout
    max_bytes = int(assignment.limits.notebook_mb * 1024 * 1024)
    students = _folders(layout.submitted_dir)
    graded = _folders(layout.autograded_dir)
    out = []
    for name in assignment.notebooks:
        new_nb = notebook_json(released / name)
        if new_nb is None:
            continue
        wanted = _ids_by_kind(new_nb)
        held: dict[str, dict[str, int]] = {kind: {} for kind in ID_KINDS}   # kind -> id -> notebooks holding it
        for sid in students:
            for kind, ids in (_held_ids(layout.submission(sid, assignment.name) / name, max_bytes) or {}).items():
                for grade_id in ids:
                    held[kind][grade_id] = held[kind].get(grade_id, 0) + 1
        for kind in ("solution", "task"):       # grade cells: their autograded copies, below
            word = ID_KINDS[kind]
            new = sorted(wanted[kind] - set(held[kind]))
            gone = sorted(set(held[kind]) - wanted[kind])
            if not (new and gone):
                continue
            n = max(held[kind][g] for g in gone)
            out.append(f"{name}: the release's {word} cell {', '.join(new)} is in no submitted notebook, and "
                       f"{n} submitted notebook{'s' * (n != 1)} still {'have' if n != 1 else 'has'} "
                       f"{', '.join(gone)}, which the release no longer has (an id renamed in source/ after "
                       f"students submitted?): formgrader shows those submissions no box for {', '.join(new)}; "
                       f"put the old id back in {layout.relative(layout.source(assignment.name) / name)} and run "
                       f"`course release {assignment.name}` again")
        stale: list[str] = []
        lacking: set[str] = set()
        kept: set[str] = set()
        for sid in graded:
            copied = _held_ids(layout.autograded(sid, assignment.name) / name, max_bytes)
            if copied is None or not (wanted["grade"] - copied["grade"] and copied["grade"] - wanted["grade"]):
                continue
            stale.append(sid)
            lacking |= wanted["grade"] - copied["grade"]
            kept |= copied["grade"] - wanted["grade"]
        if stale:
            added, old, n = ", ".join(sorted(lacking)), ", ".join(sorted(kept)), len(stale)
            out.append(f"{name}: the release's grade cell {added} is not yet in the autograded "
                       f"cop{'ies' if n != 1 else 'y'} of {n} submission{'s' * (n != 1)} graded before it "
                       f"({first_ids(stale)}), which still {'have' if n != 1 else 'has'} {old} (a grade id "
                       f"renamed in source/ and course.yml): formgrader shows {'them' if n != 1 else 'it'} no "
                       f"score box for {added}, and the gradebook no score for it, until the next `course "
                       f"autograde {assignment.name}` grades {'them' if n != 1 else 'it'} again (a new release "
                       f"grades everyone again)")
    return out


def release(course: Course, assignment: Assignment, *, drop_grades: bool = False) -> ReleaseReport:
    """Generate release/<assignment>/ from source/<assignment>/ with nbgrader, points from course.yml,
    then check for leaks; record it in the gradebook. Nothing is changed unless every step succeeds.
    `drop_grades`: see `reporting.gradebook.apply_release`."""
    from .reporting import gradebook

    layout = course.layout
    marks = course_delimiters(course.root)
    sources = {}
    headings: list[str] = []       # headings stating other points than course.yml's
    for name in assignment.notebooks:
        source_nb = layout.source(assignment.name) / name
        where = layout.relative(source_nb)
        if not source_nb.is_file():
            raise ReleaseError(f"{where}: not found")
        nb = _read_notebook(source_nb, where)
        problems = source_problems(nb, assignment, name, where, marks)
        if problems:
            raise ReleaseError("; ".join(problems))
        sources[name] = nb
        headings += heading_points_problems(nb, assignment, name, where)

    with tempfile.TemporaryDirectory(prefix=".course-release-", dir=course.root) as tmp:
        build = CourseLayout(Path(tmp))
        shutil.copytree(layout.source(assignment.name), build.source(assignment.name),
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        points: dict[str, list[str]] = {}
        for name, nb in sources.items():
            points[name] = write_points(nb, assignment, name)
            _write_notebook(nb, build.source(assignment.name) / name)
        build_db = f"sqlite:///{build.root / 'gradebook.db'}"
        proc = nbgrader(course, "generate_assignment", assignment.name, "--force", root=build.root, db_url=build_db)
        if proc.returncode != 0:
            why = nbgrader_failure(proc.stderr + proc.stdout)
            stale = [f"{layout.relative(layout.source(assignment.name) / name)}: {cell_name(nb, i)}"
                     for name, nb in sources.items() for i in unversioned_cells(nb)]
            if stale and "old version" in why:
                why += f" (nbgrader metadata without a schema_version: {'; '.join(stale[:5])})"
            raise ReleaseError(f"nbgrader generate_assignment {assignment.name} failed: {why} "
                               f"(nothing was changed)")
        checked = leak_check(build, assignment, marks)
        cells = gradebook.read_release_cells(build_db, assignment)
        if not drop_grades:
            gradebook.check_release(course, assignment, cells)
        renamed = renamed_ids(course, assignment, build.release(assignment.name))

        target = layout.release(assignment.name)
        previous = _swap_in(build.release(assignment.name), target)
        try:
            recorded = gradebook.apply_release(course, assignment, cells, drop_grades=drop_grades)
        except BaseException:
            _restore(target, previous)
            raise
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
    for name, nb in sources.items():
        if points[name]:
            _write_notebook(nb, layout.source(assignment.name) / name)
    return ReleaseReport(assignment=assignment.name,
                         notebooks=tuple(target / n for n in assignment.notebooks),
                         checked_lines=checked,
                         points_written=tuple((name, tuple(lines)) for name, lines in points.items() if lines),
                         gradebook=recorded, warnings=(*headings, *renamed))
