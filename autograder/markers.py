"""The nbgrader markers of a source notebook, checked before `course release` hands it to nbgrader.

nbgrader's generate_assignment stops at the first malformed marker with an error that names neither
the notebook nor the cell ("RuntimeError: No end hidden tests statement found"), and it silently
releases a solution cell whose markers were both removed as the bare stub (its def line and docstring
gone too). These checks follow nbgrader's own (its ClearSolutions and ClearHiddenTests preprocessors,
with their delimiters as the course's nbgrader config sets them), and say where, one line per cell:

- BEGIN/END SOLUTION pair up within each cell (no second BEGIN before the END, no END without its
  BEGIN, no BEGIN left open), and a solution region sits only in a solution cell (`solution: true`);
- BEGIN/END HIDDEN TESTS pair up within each cell, and only in an autograder-tests cell (`grade: true`);
- a code solution cell that defines a function holds a solution region (nbgrader would otherwise
  replace the whole cell, def line and docstring too, by "# YOUR CODE HERE");
- no line looks like a marker without being one (`### Begin hidden tests`, `### BEGIN HIDDEN TEST`,
  `### END HIDEN TESTS`): nbgrader matches its markers exactly, case included, so it would leave such
  a line, and the hidden tests or the solution it was meant to enclose, in the release.

Before any of that, `metadata_problems` finds a cell whose nbgrader metadata is not a mapping (nbgrader
itself, and every check here, reads it as one).

Notebooks are plain JSON dicts (nbformat 4), as in `consistency`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from .consistency import _nbgrader, cell_functions, cell_name, cell_text
from .text import truncate


@dataclass(frozen=True)
class Delimiters:
    """nbgrader's marker strings (a line holding one is a marker) and whether a region outside its
    kind of cell is an error (`enforce_metadata`); the defaults are nbgrader's."""
    begin_solution: str = "BEGIN SOLUTION"
    end_solution: str = "END SOLUTION"
    begin_hidden: str = "BEGIN HIDDEN TESTS"
    end_hidden: str = "END HIDDEN TESTS"
    enforce_solution_cells: bool = True
    enforce_grade_cells: bool = True

    @property
    def all(self) -> tuple[str, ...]:
        return (self.begin_solution, self.end_solution, self.begin_hidden, self.end_hidden)

    @property
    def solution(self) -> tuple[str, str]:
        return (self.begin_solution, self.end_solution)


def course_delimiters(course_root: Path) -> Delimiters:
    """The delimiters nbgrader's generate_assignment uses for the course in `course_root`: its
    ClearSolutions and ClearHiddenTests settings from the Jupyter config folders' nbgrader_config.py,
    then the course's own (autograder.nbconfig; `course validate` reports a course file that cannot be
    loaded)."""
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions

    from .nbconfig import nbgrader_settings

    cfg = nbgrader_settings(course_root)
    solutions, hidden = ClearSolutions(config=cfg), ClearHiddenTests(config=cfg)
    return Delimiters(begin_solution=solutions.begin_solution_delimeter,
                      end_solution=solutions.end_solution_delimeter,
                      begin_hidden=hidden.begin_test_delimeter,
                      end_hidden=hidden.end_test_delimeter,
                      enforce_solution_cells=solutions.enforce_metadata,
                      enforce_grade_cells=hidden.enforce_metadata)


_NOT_A_WORD = re.compile(r"[^A-Z0-9]+")
# how alike (difflib's ratio, from 0 to 1) a line's words and a marker's, and their first words
# ("BEGN" for "BEGIN"), must be for the line to be taken for a misspelt marker
_ALIKE, _FIRST_ALIKE = 0.8, 0.75


def _words(text: str) -> list[str]:
    return [w for w in _NOT_A_WORD.split(text.upper()) if w]


def _alike(a: str, b: str) -> float:
    return SequenceMatcher(None, a, b).ratio()


def looks_like(line: str, marks: Delimiters) -> str:
    """The marker `line` was most likely meant to be, when it looks like one without holding it (another
    case, a letter missing or added, other spacing or punctuation), else "". A line holding a marker
    exactly is one, so "". Only the words are compared: `### Begin hidden tests`, `# BEGIN HIDDEN TEST`
    and `### END HIDEN TESTS` look like markers; `# hidden tests` and `# end of the tests` do not."""
    if any(marker in line for marker in marks.all):
        return ""
    words = _words(line)
    if not words:
        return ""
    best, score = "", 0.0
    for marker in marks.all:
        wanted = _words(marker)
        if not wanted or _alike(words[0], wanted[0]) < _FIRST_ALIKE:
            continue
        alike = _alike(" ".join(words), " ".join(wanted))
        if alike >= _ALIKE and alike > score:
            best, score = marker, alike
    return best


def near_markers(source: str, marks: Delimiters) -> list[tuple[int, str, str]]:
    """(line number, the line, the marker it looks like) for each line of `source` that looks like a
    marker without being one (see `looks_like`)."""
    found = [(number, line, looks_like(line, marks)) for number, line in enumerate(source.splitlines(), 1)]
    return [(number, line, marker) for number, line, marker in found if marker]


def metadata_problems(nb: dict[str, Any], where: str) -> list[str]:
    """One line per cell whose metadata, or its nbgrader entry, is there but not a mapping (a hand edit:
    `"nbgrader": "yes"`), starting with `where` (the notebook's path) and the cell: nbgrader's tools
    and these checks read either as a mapping, and would crash or take the cell for a plain one."""
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        if not isinstance(cell, dict) or "metadata" not in cell:
            continue
        meta = cell["metadata"]
        if not isinstance(meta, dict):
            out.append(f"{where}: {cell_name(nb, i)}: cell metadata is not a mapping ({truncate(repr(meta), 40)})")
        elif "nbgrader" in meta and not isinstance(meta["nbgrader"], dict):
            out.append(f"{where}: {cell_name(nb, i)}: nbgrader metadata is not a mapping "
                       f"({truncate(repr(meta['nbgrader']), 40)}); give it nbgrader's keys (grade, solution, locked, "
                       f"grade_id, ...), or remove it")
    return out


def _regions(source: str, begin: str, end: str) -> tuple[int, str]:
    """(regions opened, what is wrong with their pairing or ""), reading the lines as nbgrader does:
    a line holding `begin` opens a region, else a line holding `end` closes it."""
    regions, opened = 0, 0          # opened: the line of the BEGIN of the region open, else 0
    for number, line in enumerate(source.splitlines(), 1):
        if begin in line:
            if opened:
                return regions, f"a second {begin} (line {number}) before the {end} of the one on line {opened}"
            opened, regions = number, regions + 1
        elif end in line:
            if not opened:
                return regions, f"{end} (line {number}) has no {begin} above it"
            opened = 0
    return regions, f"{begin} (line {opened}) has no {end} after it" if opened else ""


def _region_problems(source: str, begin: str, end: str, misplaced: str) -> tuple[int, list[str]]:
    """(regions, problems) of one kind of region in a cell: their pairing, and `misplaced` (the
    problem when the cell may not hold this kind, else "") if it holds any."""
    regions, wrong = _regions(source, begin, end)
    return regions, [p for p in (wrong, misplaced if regions else "") if p]


def cell_marker_problems(cell: dict[str, Any], marks: Delimiters) -> list[str]:
    """What is wrong with one cell's markers, for nbgrader's generate_assignment (see the module)."""
    nbg = _nbgrader(cell)
    source = cell_text(cell)
    near = near_markers(source, marks)
    misspelt = [] if not near else [
        ("a line that looks like an nbgrader marker but is not one: " if len(near) == 1 else
         "lines that look like nbgrader markers but are not: ")
        + ", ".join(f"line {number} {truncate(line.strip(), 60)!r} (for {marker})" for number, line, marker in near)
        + "; nbgrader matches its markers exactly, case included, so it would leave "
        + ("it and what it encloses" if len(near) == 1 else "them and what they enclose") + " in the release"]
    solutions, out = _region_problems(
        source, marks.begin_solution, marks.end_solution,
        "" if nbg.get("solution") or not marks.enforce_solution_cells else
        f"a solution region ({marks.begin_solution}) in a cell that is not a solution cell (nbgrader metadata "
        f"`solution: true`, \"Autograded answer\" or \"Manually graded answer\" in Jupyter); mark the cell, or "
        f"remove the markers")
    defined = cell_functions(source) if cell.get("cell_type") == "code" else set()
    if nbg.get("solution") and not solutions and not out and defined \
            and not any(marker in marks.solution for _, _, marker in near):
        out.append(f"a solution cell with no {marks.begin_solution} / {marks.end_solution} region, so nbgrader "
                   f"would release the whole cell ({', '.join(f'`def {name}`' for name in sorted(defined))} and "
                   f"its docstring too) as the bare stub; put the markers around the body")
    out += _region_problems(
        source, marks.begin_hidden, marks.end_hidden,
        "" if nbg.get("grade") or not marks.enforce_grade_cells else
        f"a hidden-test region ({marks.begin_hidden}) in a cell that is not an autograder-tests cell (nbgrader "
        f"metadata `grade: true`, \"Autograder tests\" in Jupyter), so nbgrader would refuse it; mark the cell, or "
        f"remove the markers")[1]
    return misspelt + out


def marker_problems(nb: dict[str, Any], marks: Delimiters, where: str) -> list[str]:
    """One line per cell whose markers nbgrader would refuse or mishandle, starting with `where` (the
    notebook's path) and the cell (`consistency.cell_name`)."""
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        if isinstance(cell, dict):
            found = cell_marker_problems(cell, marks)
            if found:
                out.append(f"{where}: {cell_name(nb, i)}: {'; '.join(found)}")
    return out
