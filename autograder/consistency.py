"""course.yml is the one source of points; the notebooks, the graders and the gradebook must agree with it.

What is written from course.yml (by `course release`):

- each problem's grade cell (`Problem.grade_id`) gets `points` = the problem's points;
- the intro's points table (a Markdown table headed `| function | points |`) is rewritten with one
  row per problem of that notebook and the total.

What is checked (by `course validate`, and by `course release` before it builds anything):

- every problem has its grade cell, and every grade cell is a problem (nbgrader adds up the points
  of every grade cell: one without a problem would count in nbgrader's totals and never be scored);
- grade-cell points and the table agree with course.yml (named: problem, both numbers);
- every grader file `graders/test_<name>.py` is for a problem in course.yml, and every problem's
  function is defined by its notebook, in one code cell only (not in none: its solution cell deleted;
  not also in a given cell: a student who deleted the stub would be graded on the given function),
  above the problem's grade cell (which calls it).

What is only warned of (by both): a Markdown heading stating points ("## 1. ReLU (4 points)") other
than course.yml gives the problems below it (`heading_points_problems`); headings are not rewritten.

Notebooks are handled as plain JSON dicts (nbformat 4), so this module can run anywhere.
"""
from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cellplan import joined_text
from .config import Assignment, Course, Problem
from .errors import CourseError
from .layout import CourseLayout
from .text import first_ids, truncate

if TYPE_CHECKING:
    from .grading.results import SubmissionResult

TABLE_HEADER = re.compile(r"^\s*\|\s*function\s*\|\s*points\s*\|\s*$", re.IGNORECASE)
TABLE_ROW = re.compile(r"^\s*\|\s*`?(?P<name>[^`|]+?)`?\s*\|\s*\**(?P<points>[^|*]+?)\**\s*\|\s*$")
TOTAL_NAMES = ("total", "**total**")


def points_text(points: float) -> str:
    """15 -> "15", 7.5 -> "7.5"."""
    return f"{points:g}"


def cell_text(cell: dict[str, Any]) -> str:
    """The text of a cell of a notebook the instructor wrote (`joined_text`)."""
    return joined_text(cell.get("source", ""))


def _nbgrader(cell: dict[str, Any]) -> dict[str, Any]:
    meta = cell.get("metadata")
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nbg if isinstance(nbg, dict) else {}


def cell_name(nb: dict[str, Any], index: int) -> str:
    """How an instructor finds cell `index` (0-based) of a notebook, for messages: numbered from 1 as
    Jupyter shows them, with its nbgrader grade_id, else its first line: "cell 34 (`test_silu`)",
    "cell 33 (`# Public checks for silu.`)"."""
    cell = nb.get("cells", [])[index]
    grade_id = _nbgrader(cell).get("grade_id") if isinstance(cell, dict) else None
    if isinstance(grade_id, str) and grade_id:
        return f"cell {index + 1} (`{grade_id}`)"
    source = cell_text(cell) if isinstance(cell, dict) else ""
    first = next((line.strip() for line in source.splitlines() if line.strip()), "")
    return f"cell {index + 1} (`{truncate(first, 60).replace('`', chr(39))}`)" if first else f"cell {index + 1}"


def grade_cells(nb: dict[str, Any]) -> dict[str, tuple[int, float | None]]:
    """grade id -> (cell index, points) for every grade cell (nbgrader metadata `grade: true`)."""
    out: dict[str, tuple[int, float | None]] = {}
    for i, cell in enumerate(nb.get("cells", [])):
        nbg = _nbgrader(cell)
        if nbg.get("grade") and isinstance(nbg.get("grade_id"), str):
            points = nbg.get("points")
            value = float(points) if isinstance(points, (int, float)) and not isinstance(points, bool) else None
            out[nbg["grade_id"]] = (i, value)
    return out


def notebook_problems(assignment: Assignment, notebook: str) -> tuple[Problem, ...]:
    return tuple(p for p in assignment.problems if p.notebook == notebook)


# --------------------------------------------------------------------------- the intro's table

@dataclass(frozen=True)
class PointsTable:
    cell: int                       # index of the markdown cell
    start: int                      # line of the header within the cell
    end: int                        # line after the table's last row
    rows: tuple[tuple[str, str], ...]   # (name, points text) as written, total row included


def find_table(nb: dict[str, Any]) -> PointsTable | None:
    """The first Markdown table headed `| function | points |`, or None."""
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "markdown":
            continue
        lines = cell_text(cell).split("\n")
        for start, line in enumerate(lines):
            if not TABLE_HEADER.match(line):
                continue
            end = start + 1
            while end < len(lines) and lines[end].strip().startswith("|"):
                end += 1
            rows = []
            for row in lines[start + 2:end]:      # after the header and its |---| line
                m = TABLE_ROW.match(row)
                if m:
                    rows.append((m.group("name").strip().strip("*").strip(), m.group("points").strip()))
            return PointsTable(i, start, end, tuple(rows))
    return None


def table_lines(problems: tuple[Problem, ...]) -> list[str]:
    """The points table for `problems`, as the intro shows it."""
    lines = ["| function | points |", "|---|---:|"]
    lines += [f"| `{p.name}` | {points_text(p.points)} |" for p in problems]
    lines.append(f"| **total** | **{points_text(sum(p.points for p in problems))}** |")
    return lines


# --------------------------------------------------------------------------- writing

def write_points(nb: dict[str, Any], assignment: Assignment, notebook: str) -> list[str]:
    """Set `nb`'s grade-cell points and its points table from course.yml (in place); returns one line
    per change, e.g. "grade cell test_silu: 5 -> 8 points". Grade cells that are not problems and
    problems without a grade cell are left alone (see `notebook_problems_found`)."""
    changes = []
    cells = nb.get("cells", [])
    found = grade_cells(nb)
    for p in notebook_problems(assignment, notebook):
        if p.grade_id not in found:
            continue
        index, old = found[p.grade_id]
        if old != p.points:
            _nbgrader(cells[index])["points"] = int(p.points) if float(p.points).is_integer() else p.points
            changes.append(f"grade cell {p.grade_id}: {points_text(old) if old is not None else 'no'} -> "
                           f"{points_text(p.points)} points")
    table = find_table(nb)
    if table is not None:
        cell = cells[table.cell]
        lines = cell_text(cell).split("\n")
        new = table_lines(notebook_problems(assignment, notebook))
        if lines[table.start:table.end] != new:
            lines[table.start:table.end] = new
            cell["source"] = "\n".join(lines)
            changes.append("points table in the intro rewritten from course.yml")
    return changes


# --------------------------------------------------------------------------- checking

def duplicate_ids(nb: dict[str, Any], where: str) -> list[str]:
    """Cells sharing an nbgrader `grade_id`, or a cell `id` (a cell copied in Jupyter keeps both):
    nbgrader's generate_assignment then fails with "the nbgrader metadata may be corrupted", naming
    neither. One line each, starting with `where`, naming the id and the cells (numbered from 1, as
    Jupyter shows them)."""
    def grade_id(cell: dict[str, Any]) -> Any:
        return _nbgrader(cell).get("grade_id")

    def cell_id(cell: dict[str, Any]) -> Any:
        return cell.get("id")

    out = []
    for kind, of in (("nbgrader grade_id", grade_id), ("cell id", cell_id)):
        cells: dict[str, list[int]] = {}
        for i, cell in enumerate(nb.get("cells", [])):
            value = of(cell) if isinstance(cell, dict) else None
            if isinstance(value, str) and value:
                cells.setdefault(value, []).append(i + 1)
        out += [f"{where}: {kind} {value!r} is used by cells {', '.join(map(str, numbers))}; give each cell its own "
                f"(a copied cell keeps the original's metadata)"
                for value, numbers in cells.items() if len(numbers) > 1]
    return out


CELL_TYPES = {"code": "a code cell", "markdown": "a Markdown cell", "raw": "a raw cell"}


def cell_type_problems(nb: dict[str, Any], problems: tuple[Problem, ...], where: str) -> list[str]:
    """Cells whose type does not fit their nbgrader metadata, most likely a cell changed to Markdown in
    Jupyter (which keeps its metadata): a problem's grade cell that is not a code cell (its tests run as
    code, and nbgrader refuses a Markdown grade cell that is not also a solution cell), a Markdown cell
    that is a grade cell but not a solution cell or the other way round (nbgrader's manually graded
    answer is both), a task cell that is not Markdown. nbgrader's generate_assignment refuses the last
    two with "the nbgrader metadata may be corrupted", naming neither the cell nor the reason. One line
    each, starting with `where`, naming the cell and what is wrong."""
    problem_of = {p.grade_id: p.name for p in problems}
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        nbg = _nbgrader(cell) if isinstance(cell, dict) else {}
        if not nbg:
            continue
        kind = cell.get("cell_type")
        shown = CELL_TYPES.get(kind, f"a cell of type {kind!r}") if isinstance(kind, str) else "a cell of no type"
        grade, solution, task = (bool(nbg.get(flag)) for flag in ("grade", "solution", "task"))
        grade_id = nbg.get("grade_id")
        name = problem_of.get(grade_id) if isinstance(grade_id, str) else None
        if task:
            what = (f"a task cell (nbgrader metadata `task: true`) that is {shown}, which nbgrader refuses: its "
                    f"task cells are Markdown" if kind != "markdown" else "")
        elif grade and name is not None and kind != "code":
            refused = (", which nbgrader refuses (a Markdown grade cell is a manually graded answer, and must be "
                       "a solution cell too)" if kind == "markdown" and not solution else "")
            what = (f"the grade cell of problem {name} is {shown}, not a code cell{refused}; its tests run as "
                    f"code: make it a code cell again (in Jupyter: select it, press Y)")
        elif kind == "markdown" and grade != solution:
            marked, unmarked = ("grade", "solution") if grade else ("solution", "grade")
            what = (f"a Markdown cell marked as a {marked} cell but not as a {unmarked} cell, which nbgrader "
                    f"refuses (a Markdown grade cell is a manually graded answer, both at once); make it a code "
                    f"cell again, or mark it \"Manually graded answer\" in Jupyter")
        else:
            what = ""
        if what:
            out.append(f"{where}: {cell_name(nb, i)}: {what}")
    return out


def definition_problems(nb: dict[str, Any], problems: tuple[Problem, ...], where: str) -> list[str]:
    """A problem's function defined in no code cell (its solution cell deleted, while its grade cell
    is still graded), in more than one (e.g. a `gelu` problem in a notebook whose locked setup cell
    already gives `gelu`: a student who deletes the stub would be graded on the other definition), or
    in a cell below the problem's grade cell (which then calls it before it exists). One line each,
    starting with `where`, naming the problem and the cells."""
    cells: dict[str, list[int]] = {}
    for i, cell in enumerate(nb.get("cells", [])):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            for name in cell_functions(cell_text(cell)):
                cells.setdefault(name, []).append(i)
    graded = grade_cells(nb)
    out = []
    for p in problems:
        defined = cells.get(p.name, [])
        grade = graded[p.grade_id][0] if p.grade_id in graded else None
        if not defined:
            graded_in = f", though the notebook still grades it in {cell_name(nb, grade)}" if grade is not None else ""
            out.append(f"{where}: {p.name} is defined in no code cell{graded_in}; a problem's function must be "
                       f"defined in its solution cell (was that cell deleted?)")
        elif len(defined) > 1:
            out.append(f"{where}: {p.name} is defined in {len(defined)} code cells "
                       f"({', '.join(cell_name(nb, i) for i in defined)}); a problem's function must be defined "
                       f"only in its solution cell (rename the problem, or the given function)")
        elif grade is not None and grade < defined[0]:
            out.append(f"{where}: the grade cell of {p.name}, {cell_name(nb, grade)}, is above "
                       f"{cell_name(nb, defined[0])}, which defines {p.name}, so run from the top it calls "
                       f"{p.name} before it exists; move the grade cell below it")
    return out


def notebook_problems_found(nb: dict[str, Any], assignment: Assignment, notebook: str, where: str) -> list[str]:
    """What `course release` cannot fix from course.yml: a cell whose type does not fit its nbgrader
    metadata (a grade cell changed to Markdown), an id used by two cells, a problem's function
    defined in no code cell, in more than one, or below its grade cell, a problem without its grade
    cell, a grade cell that is no problem. One line each, starting with `where` (the notebook's path)."""
    found = grade_cells(nb)
    mine = notebook_problems(assignment, notebook)
    out = cell_type_problems(nb, mine, where)
    out += duplicate_ids(nb, where)
    out += definition_problems(nb, mine, where)
    out += [f"{where}: has no grade cell {p.grade_id!r} for problem {p.name} (course.yml)"
            for p in mine if p.grade_id not in found]
    known = {p.grade_id for p in mine}
    for grade_id, (_, points) in found.items():
        if grade_id not in known:
            out.append(f"{where}: grade cell {grade_id!r} ({points_text(points) if points is not None else 'no'} "
                       f"points) is not a problem of this notebook in course.yml, so nbgrader would count its "
                       f"points and the autograder never score them")
    return out


def read_notebook_json(path: Path) -> dict[str, Any]:
    """The notebook at `path` as plain JSON: OSError when the file cannot be read, ValueError when it is
    no notebook (empty, not UTF-8, not JSON, nested too deeply, JSON without a list of cells, or a format
    number nbformat cannot take: `version_problem`), its message saying why."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ValueError("its JSON nests too deeply") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("no list of cells")
    why = version_problem(nb)
    if why:
        raise ValueError(why)
    return nb


def version_problem(nb: dict[str, Any]) -> str:
    """Why nbformat cannot validate or write the notebook `nb` (plain JSON) for its format numbers, in
    words naming the field ("" when it can): nbformat's validator asserts that `nbformat` and
    `nbformat_minor` are integers (a 5.0, "5" or null there stops it with an empty AssertionError)."""
    for field in ("nbformat", "nbformat_minor"):
        value = nb.get(field)
        if type(value) is not int:
            given = f"has no {field}" if field not in nb else f"has {field} {truncate(json.dumps(value), 40)}"
            return f"it {given}, where Jupyter writes an integer"
    return ""


def notebook_json(path: Path) -> dict[str, Any] | None:
    """The notebook at `path` as plain JSON, or None when it cannot be read or is not a notebook
    (what reads it for its own purpose says so)."""
    try:
        return read_notebook_json(path)
    except (OSError, ValueError):
        return None


NotebookCheck = Callable[[dict[str, Any], Assignment, str, str], list[str]]


def each_notebook(course: Course, assignment: Assignment, check: NotebookCheck, *, released: bool) -> list[str]:
    """What `check(nb, assignment, notebook, where)` finds in each of `assignment`'s released notebooks (else
    its source notebooks), `where` the notebook's path from the course; one that cannot be read is left out."""
    layout = course.layout
    folder = layout.release(assignment.name) if released else layout.source(assignment.name)
    out = []
    for name in assignment.notebooks:
        nb = notebook_json(folder / name)
        if nb is not None:
            out += check(nb, assignment, name, layout.relative(folder / name))
    return out


def release_points_problems(course: Course, assignment: Assignment) -> list[str]:
    """Where the released notebooks show students other points than course.yml grades them on (its
    points were changed after `course release`): one line per disagreement (`points_problems`)."""
    return each_notebook(course, assignment, points_problems, released=True)


def source_heading_problems(course: Course, assignment: Assignment) -> list[str]:
    """The source notebooks' headings that state other points than course.yml gives
    (`heading_points_problems`; the release has the same headings): `course validate`'s warnings."""
    return each_notebook(course, assignment, heading_points_problems, released=False)


def points_problems(nb: dict[str, Any], assignment: Assignment, notebook: str, where: str) -> list[str]:
    """Every disagreement between `nb`'s points (grade cells, intro table) and course.yml, naming the
    problem and both numbers."""
    out = notebook_problems_found(nb, assignment, notebook, where)
    found = grade_cells(nb)
    mine = notebook_problems(assignment, notebook)
    for p in mine:
        if p.grade_id in found:
            points = found[p.grade_id][1]
            if points != p.points:
                out.append(f"{where}: {p.name}: grade cell {p.grade_id} gives "
                           f"{points_text(points) if points is not None else 'no'} points, course.yml gives "
                           f"{points_text(p.points)} (run `course release`)")
    table = find_table(nb)
    if table is not None:
        rows = dict(table.rows)
        for p in mine:
            shown = rows.pop(p.name, None)
            if shown is None:
                out.append(f"{where}: {p.name}: missing from the points table in the intro (course.yml gives "
                           f"{points_text(p.points)}; run `course release`)")
            elif _number(shown) != p.points:
                out.append(f"{where}: {p.name}: the points table in the intro gives {shown}, course.yml gives "
                           f"{points_text(p.points)} (run `course release`)")
        total = next((rows.pop(n) for n in list(rows) if n.lower() in TOTAL_NAMES), None)
        want = sum(p.points for p in mine)
        if total is not None and _number(total) != want:
            out.append(f"{where}: the points table's total is {total}, course.yml's problems add up to "
                       f"{points_text(want)} (run `course release`)")
        for name in rows:
            out.append(f"{where}: the points table in the intro lists {name}, which is not a problem of this "
                       f"notebook in course.yml (run `course release`)")
    return out


# a Markdown heading (ATX: 1 to 6 `#`), and the points it states, conservatively: a number of points in
# brackets, "(4 points)", "[1 pt]", or ending the heading after a colon or dash, "ReLU: 4 pts", "ReLU - 4 points."
# ("a model with 1000 points" states none); "(0 points)" marks a heading of no problem (a hint, an optional part)
HEADING = re.compile(r"^ {0,3}(?P<level>#{1,6})[ \t]+(?P<text>.*?)[ \t]*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
_POINTS_UNIT = r"(?:points?|pts?)\.?"
STATED_POINTS = re.compile(rf"[(\[][ \t]*(?P<inner>\d+(?:\.\d+)?)[ \t]*{_POINTS_UNIT}[ \t]*[)\]]"
                           rf"|[:\-\u2013\u2014][ \t*_]*(?P<end>\d+(?:\.\d+)?)[ \t]*{_POINTS_UNIT}[ \t*_]*#*$",
                           re.IGNORECASE)


def _headings(nb: dict[str, Any]) -> list[tuple[int, int, int, str]]:
    """(cell index, line, level, text) of each ATX heading of `nb`'s Markdown cells, in order; lines in a
    fenced code block are not headings."""
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        if not isinstance(cell, dict) or cell.get("cell_type") != "markdown":
            continue
        fenced = False
        for n, line in enumerate(cell_text(cell).split("\n")):
            if FENCE.match(line):
                fenced = not fenced
            elif not fenced and (m := HEADING.match(line)):
                out.append((i, n, len(m.group("level")), m.group("text")))
    return out


def _problems_named(problems: list[Problem]) -> str:
    """"problem relu", "problems silu and swiglu_ffn", "problems a, b and c"."""
    names = " and ".join(", ".join(p.name for p in problems).rsplit(", ", 1))
    return f"{'problem' if len(problems) == 1 else 'problems'} {names}"


def heading_points_problems(nb: dict[str, Any], assignment: Assignment, notebook: str, where: str) -> list[str]:
    """A Markdown heading of `nb` (file `notebook`, shown as `where`) that states a number of points
    (`STATED_POINTS`) other than course.yml gives the problems whose grade cells follow it, one line
    each naming the notebook and the cell. Either count is right: the problems up to the next heading
    (the heading's own), or those of its whole section (up to the next heading of its level or above,
    its sub-headings' included). A heading followed by no problem's grade cell is not checked.
    `course release` writes points into the grade cells and the intro's table, not into headings."""
    cells = nb.get("cells", [])
    graded = grade_cells(nb)
    at = {graded[p.grade_id][0]: p for p in notebook_problems(assignment, notebook) if p.grade_id in graded}
    headings = _headings(nb)
    out = []
    for k, (i, n, level, text) in enumerate(headings):
        stated = STATED_POINTS.search(text)
        if stated is None:
            continue
        later = headings[k + 1:]
        own = [at[c] for c in range(i + 1, later[0][0] if later else len(cells)) if c in at]
        section = [at[c] for c in range(i + 1, next((j for j, _, lv, _ in later if lv <= level), len(cells)))
                   if c in at]
        said = float(stated.group("inner") or stated.group("end"))
        if said == 0:
            continue
        counts = [sum(p.points for p in group) for group in (own, section) if group]
        if not counts or said in counts:
            continue
        lines = cell_text(cells[i]).split("\n")
        first = next((line.strip() for line in lines if line.strip()), "")
        heading = "its heading" if lines[n].strip() == first else \
            f"the heading `{truncate(text, 60).replace('`', chr(39))}`"
        given = f"{_problems_named(own or section)} {points_text(counts[0])}"
        if own and len(section) > len(own):
            given += f", and to its section's {_problems_named(section)} {points_text(counts[1])}"
        out.append(f"{where}: {cell_name(nb, i)}: {heading} says {points_text(said)} points, but course.yml gives "
                   f"{given} (`course release` does not rewrite headings: edit it)")
    return out


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# --------------------------------------------------------------------------- graders and functions

def cell_functions(source: str) -> set[str]:
    """Names of the functions a code cell's source defines at top level."""
    try:
        tree = ast.parse(source)
    except SyntaxError:         # IPython magics and the like: fall back to the text
        return set(re.findall(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(", source, re.M))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def defined_functions(nb: dict[str, Any]) -> set[str]:
    """Names of the functions the notebook's code cells define at top level."""
    names: set[str] = set()
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            names |= cell_functions(cell_text(cell))
    return names


@dataclass(frozen=True)
class GraderFile:
    path: Path
    problem: str            # from the file name: test_<problem>.py


def grader_files(layout: CourseLayout, assignment: Assignment) -> tuple[GraderFile, ...]:
    folder = layout.graders(assignment.package)
    if not folder.is_dir():
        return ()
    return tuple(GraderFile(p, p.stem[len("test_"):]) for p in sorted(folder.glob("test_*.py")))


def grader_file_problems(course: Course, assignment: Assignment, *, strays: bool = True) -> list[str]:
    """A grader file with no problem in course.yml (unless not `strays`), and a problem without a
    grader file."""
    layout = course.layout
    out = []
    graders = grader_files(layout, assignment)
    problems = {p.name for p in assignment.problems}
    for g in graders if strays else ():
        if g.problem not in problems:
            out.append(f"{layout.relative(g.path)}: grades {g.problem}, which is not a problem of "
                       f"{assignment.name} in course.yml")
    have = {g.problem for g in graders}
    for p in assignment.problems:
        if p.name not in have:
            out.append(f"{p.name}: no grader file {layout.relative(layout.graders(assignment.package))}/"
                       f"test_{p.name}.py")
    return out


def require_release(course: Course, assignment: Assignment) -> None:
    """Refuse (CourseError, one line) an assignment with a notebook not released yet: its students
    have not been given it, so nothing submitted for it can be validated or graded against it. So is a
    released notebook that is no notebook (empty, not JSON: a copy cut short, a disk that filled up):
    grading reads from it which cells are the student's, and against such a file would run them all.
    The line is the first of `release_problems`."""
    problems = release_problems(course, assignment)
    if problems:
        raise CourseError(problems[0])


def release_problems(course: Course, assignment: Assignment) -> list[str]:
    """Each released notebook of `assignment` that is missing or no notebook, one line each naming the
    file and what to run (`require_release` refuses with the first; `course doctor` lists them all)."""
    layout = course.layout
    out = []
    for name in assignment.notebooks:
        path = layout.release(assignment.name) / name
        shown = layout.relative(path)
        if not path.is_file():
            out.append(f"{shown}: not found (run `course release {assignment.name}` first)")
            continue
        try:
            read_notebook_json(path)
        except OSError as exc:
            out.append(f"{shown}: cannot be read ({type(exc).__name__}: {exc.strerror or exc})")
        except ValueError as exc:
            why = truncate(str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__, 200)
            out.append(f"{shown}: not a readable notebook ({why}); run `course release {assignment.name}` "
                       f"to write it again")
    return out


def uncollected_checks(course: Course, assignment: Assignment) -> list[str]:
    """A public function of a grader file that takes the `student` fixture but is not named
    `test*`: pytest does not collect it, so it never runs and its weight goes to the file's other
    checks. One line each (a warning: such a function may be a helper the checks call). A file that
    does not parse is left to the graders' own collection, which names the line."""
    layout = course.layout
    out = []
    for g in grader_files(layout, assignment):
        try:
            tree = ast.parse(g.path.read_text(encoding="utf-8"), filename=str(g.path))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith(("test", "_")):
                continue
            args = node.args
            if "student" in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}:
                out.append(f"{layout.relative(g.path)}, line {node.lineno}: {node.name}() takes the student fixture "
                           f"but is not run as a check (pytest collects only functions named test_*); rename it "
                           f"test_{g.problem}_..., or to _{node.name} if it is a helper")
    return out


def extension_problems(course: Course, assignment: Assignment, submitted: Iterable[str]) -> list[str]:
    """An extension in course.yml for a student id that is neither on the roster nor among those
    who submitted (`submitted`): most likely a typo, and the student meant gets the late penalty."""
    known = set(course.roster()) | set(submitted)
    index = next(i for i, a in enumerate(course.assignments) if a.name == assignment.name)
    roster = course.layout.relative(course.roster_file) if course.roster_file is not None else "no roster file"
    return [f"course.yml: assignments[{index}].extensions.{sid}: no student {sid!r} on the roster ({roster}) or in "
            f"{course.layout.relative(course.layout.submitted_dir)}/, so this extension applies to nobody"
            for sid in assignment.extensions if sid not in known]


def stale_due_dates(assignment: Assignment, results: Iterable[SubmissionResult]) -> str:
    """One line when course.yml's due date or extensions changed since some of `results` were graded
    (the due date and extension each result's late penalty was taken against differ from what
    course.yml gives the student now), "" otherwise. Their penalties, in the gradebook, `nbgrader
    export` and the pages, are from before until `course autograde` grades them again (a changed due
    date makes it grade every submission again, a changed extension that student's)."""
    return _stale_line(assignment, stale_due_students(assignment, results), "due date or extensions",
                       "late penalty", "late penalties", "from before")


def stale_due_students(assignment: Assignment, results: Iterable[SubmissionResult]) -> list[str]:
    """The students of `results` whose late penalty was taken against another due date than course.yml gives
    them now, their extension included (`stale_due_dates`), in order: an extension written otherwise for the
    same length (as the grading key has it, `fingerprint.student_extension`) changes nothing."""
    stale = []
    for result in results:
        if result.state != "graded" or not result.submitted_at:     # no timestamp: no penalty either way
            continue
        due = assignment.due_for(result.student)        # the extension included: the penalty hangs on it alone
        if result.due != (due.isoformat() if due is not None else ""):     # (`{hours: 24}` for `{days: 1}`: same)
            stale.append(result.student)
    return stale


def stale_points(assignment: Assignment, results: Iterable[SubmissionResult]) -> str:
    """One line when course.yml's problems or points changed since some of `results` were graded (each
    result keeps the points it was scored out of), "" otherwise: their scores in the gradebook, `nbgrader
    export` and the pages are out of the old points until `course autograde` grades them again (a
    changed course.yml makes it grade every submission again)."""
    now = {p.name: p.points for p in assignment.problems}
    stale: list[str] = []
    changes: dict[str, str] = {}
    for result in results:
        if result.state != "graded":
            continue
        then = dict(result.problem_points)
        if then == now:
            continue
        stale.append(result.student)
        for name in [*now, *then]:
            if then.get(name) != now.get(name) and name not in changes:
                old = points_text(then[name]) if name in then else "none"
                new = points_text(now[name]) if name in now else "none"
                changes[name] = f"{name} {old} -> {new}"
    return _stale_line(assignment, stale, "points", "score", "scores", "out of the old points",
                       f" ({', '.join(list(changes.values())[:6])})")


def _stale_line(assignment: Assignment, stale: list[str], what: str, one_name: str, names: str, state: str,
                changes: str = "") -> str:
    """'<assignment>: course.yml's <what> changed since <students> were graded<changes>; the <names> in the
    gradebook, ... are <state> until ...', or "" when no student is stale."""
    if not stale:
        return ""
    named = _named(stale)
    one = len(stale) == 1
    return (f"{assignment.name}: course.yml's {what} changed since {named} {'was' if one else 'were'} graded{changes}; "
            f"the {one_name if one else names} in the gradebook, the export and the feedback pages "
            f"{'is' if one else 'are'} {state} until `course autograde {assignment.name}` grades again")


def grader_failures(assignment: Assignment, results: Iterable[SubmissionResult]) -> str:
    """One line when some of `results` were graded while the graders failed (a check whose grader code
    raised, scored 0 for the student; or a submission whose grading crashed, with no score), "" otherwise:
    `course autograde` said GRADER ERROR at the time, but the gradebook, the export and the pages carry
    those grades on without a word until the graders are fixed and the submissions graded again."""
    results = list(results)
    errors = [r.student for r in results if r.state == "graded" and r.grader_errors]
    crashed = [r.student for r in results if r.crashed]
    if not errors and not crashed:
        return ""
    parts = []
    if errors:
        one = len(errors) == 1
        parts.append(f"the {'grade' if one else 'grades'} of {_named(errors)} {'counts' if one else 'count'} 0 for "
                     f"checks whose grader code failed (GRADER ERROR)")
    if crashed:
        parts.append(f"{_named(crashed)} {'has' if len(crashed) == 1 else 'have'} no autograder score (grading "
                     f"crashed)")
    return (f"{assignment.name}: {' and '.join(parts)}; the gradebook, the export and the feedback pages show "
            f"{'this' if len(errors) + len(crashed) == 1 else 'these'} until the graders are fixed and "
            f"`course autograde {assignment.name} --force` grades again (or a TA grades by hand in formgrader)")


def _named(students: list[str]) -> str:
    """'ada', 'ada, bob', 'ada, bob, cy, dee, eve and 2 more', sorted ignoring case (`text.first_ids`)."""
    return first_ids(students)


def stale_results(assignment: Assignment, results: Iterable[SubmissionResult]) -> list[str]:
    """The lines of `stale_due_dates`, `stale_points` and `grader_failures` that apply to `results`."""
    results = list(results)
    lines = (stale_due_dates(assignment, results), stale_points(assignment, results),
             grader_failures(assignment, results))
    return [line for line in lines if line]
