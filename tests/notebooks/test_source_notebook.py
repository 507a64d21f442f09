"""Structural checks of the instructor's source notebook for the transformer-block assignment.

No Jupyter kernel is started: the notebook is read with nbformat, its code is parsed with `ast`,
and course.yml is read with the course's own loader. The last two tests run the code cells in-process
(numpy only, about a second) to check the source and a stubbed release.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import io
import re
from pathlib import Path

import nbformat
import pytest

from assignments.transformer_block import reference as ref
from autograder.config import load_course
from autograder.grading.checks import building_blocks
from autograder.layout import CourseLayout

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = "transformer-block"
NOTEBOOK = CourseLayout(ROOT).source(ASSIGNMENT) / f"{ASSIGNMENT}.ipynb"

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def _course_problems() -> dict[str, dict]:
    assignment = load_course(ROOT).assignment(ASSIGNMENT)
    return {p.name: {"points": p.points, "grade_id": p.grade_id} for p in assignment.problems}


NB = nbformat.read(NOTEBOOK, as_version=4)
PROBLEMS = _course_problems()


def _signature(name: str) -> tuple[list[str], dict[str, object]]:
    """The graders call each function as its reference is called: parameter names in order and
    their defaults (keyword-only parameters are the reference's building blocks, not the student's)."""
    params = [p for p in inspect.signature(getattr(ref, name)).parameters.values() if p.kind is not p.KEYWORD_ONLY]
    return [p.name for p in params], {p.name: p.default for p in params if p.default is not p.empty}


SIGNATURES = {name: _signature(name) for name in PROBLEMS}

# A composite's building blocks are the keyword-only parameters of its reference (the graders build
# the reference wiring from the student's own); the solutions call them, and the given helpers, by name.
GIVEN_HELPERS = {"multi_head_attention": {"softmax"}, "pre_ln_block": {"gelu"}}
BUILDING_BLOCKS = {name: set(building_blocks(getattr(ref, name))) | GIVEN_HELPERS.get(name, set())
                   for name in PROBLEMS if building_blocks(getattr(ref, name))}


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def _code_cells():
    return [c for c in NB.cells if c.cell_type == "code"]


def _solution_cells():
    return [c for c in NB.cells if _meta(c).get("solution")]


def _grade_cells():
    return [c for c in NB.cells if _meta(c).get("grade")]


def _defined_functions(source: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(source)
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _stubbed(source: str) -> str:
    """The cell as nbgrader releases it: solution regions become a stub, hidden tests vanish."""
    out, skipping = [], False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN_SOLUTION:
            indent = line[: len(line) - len(line.lstrip())]
            out += [f"{indent}# YOUR CODE HERE", f"{indent}raise NotImplementedError()"]
            skipping = True
        elif stripped == BEGIN_HIDDEN:
            skipping = True
        elif stripped in (END_SOLUTION, END_HIDDEN):
            skipping = False
        elif not skipping:
            out.append(line)
    return "\n".join(out)


def _marker_lines(source: str, begin: str, end: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if line.strip() in (begin, end)]


def test_notebook_is_valid_nbformat_4():
    """Is the source notebook valid nbformat 4 with a python3 kernel spec?"""
    nbformat.validate(NB)
    assert NB.nbformat == 4
    assert NB.metadata["kernelspec"]["name"] == "python3"
    assert NB.metadata["kernelspec"]["language"] == "python"


@pytest.mark.parametrize("name", list(SIGNATURES))
def test_function_has_one_solution_cell_with_exact_signature(name):
    """Is each API function defined in exactly one solution cell, with the graders' signature?"""
    defining = [c for c in _code_cells() if name in _defined_functions(c.source)]
    assert len(defining) == 1, f"{name} is defined in {len(defining)} code cells"
    cell = defining[0]
    assert _meta(cell) == {"grade": False, "solution": True, "locked": False,
                           "grade_id": f"{name}_solution", "schema_version": 3, "task": False}
    fn = _defined_functions(cell.source)[name]
    args = fn.args
    assert not (args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg), f"{name}: plain parameters only"
    names = [a.arg for a in args.args]
    expected_names, expected_defaults = SIGNATURES[name]
    assert names == expected_names
    defaults = dict(zip(names[len(names) - len(args.defaults):], (ast.literal_eval(d) for d in args.defaults)))
    assert defaults == expected_defaults


@pytest.mark.parametrize("name", list(SIGNATURES))
def test_solution_region_sits_inside_the_body_after_the_docstring(name):
    """Does the released stub keep the def line and a docstring that gives the array shapes?"""
    (cell,) = [c for c in _solution_cells() if name in _defined_functions(c.source)]
    assert _marker_lines(cell.source, BEGIN_SOLUTION, END_SOLUTION) == [BEGIN_SOLUTION, END_SOLUTION]
    stub = _defined_functions(_stubbed(cell.source))[name]
    doc = ast.get_docstring(stub)
    assert doc, f"{name}: the docstring must stay outside the solution region"
    takes_arrays = any(p in ("x", "gamma") for p in SIGNATURES[name][0])
    assert "shape" in doc or not takes_arrays, f"{name}: the docstring should give every array's shape"
    assert isinstance(stub.body[-1], ast.Raise), f"{name}: the solution region should end the function body"


def test_solution_cells_are_exactly_the_api_functions():
    """Is every solution cell one of the API functions (no stray editable cells)?"""
    ids = sorted(_meta(c)["grade_id"] for c in _solution_cells())
    assert ids == sorted(f"{name}_solution" for name in SIGNATURES)


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_problem_has_one_autograded_test_cell_with_its_points(problem):
    """Does each course.yml problem have exactly one locked grade cell with the same points?"""
    grade_id = PROBLEMS[problem]["grade_id"]
    cells = [c for c in NB.cells if _meta(c).get("grade_id") == grade_id]
    assert len(cells) == 1, f"{grade_id}: {len(cells)} cells"
    (cell,) = cells
    assert cell.cell_type == "code"
    assert _meta(cell) == {"grade": True, "solution": False, "locked": True, "points": PROBLEMS[problem]["points"],
                           "grade_id": grade_id, "schema_version": 3, "task": False}


def test_grade_cells_are_exactly_the_problems():
    """Are there no graded cells besides the course's problems?"""
    assert sorted(_meta(c)["grade_id"] for c in _grade_cells()) == sorted(p["grade_id"] for p in PROBLEMS.values())


def test_grade_ids_are_unique():
    """Is every nbgrader grade_id used once?"""
    ids = [_meta(c)["grade_id"] for c in NB.cells if _meta(c)]
    assert len(ids) == len(set(ids)), ids


def test_every_nbgrader_cell_declares_schema_3():
    """Does every cell with nbgrader metadata carry a grade_id and schema_version 3?"""
    for cell in NB.cells:
        meta = _meta(cell)
        if meta:
            assert meta.get("schema_version") == 3 and meta.get("grade_id"), meta


def test_solution_markers_appear_only_in_solution_cells_and_balance():
    """Are BEGIN/END SOLUTION lines paired, in order, and only in solution cells?"""
    for cell in NB.cells:
        markers = _marker_lines(cell.source, BEGIN_SOLUTION, END_SOLUTION)
        if _meta(cell).get("solution"):
            assert markers and markers == [BEGIN_SOLUTION, END_SOLUTION] * (len(markers) // 2), markers
        else:
            assert markers == [], f"solution markers outside a solution cell: {cell.source[:60]!r}"


def test_hidden_test_markers_appear_only_in_grade_cells_after_a_visible_part():
    """Does each grade cell have visible asserts, then one balanced hidden-tests region?"""
    for cell in NB.cells:
        markers = _marker_lines(cell.source, BEGIN_HIDDEN, END_HIDDEN)
        if _meta(cell).get("grade"):
            assert markers == [BEGIN_HIDDEN, END_HIDDEN], (_meta(cell)["grade_id"], markers)
            visible = cell.source.split(BEGIN_HIDDEN)[0]
            hidden = cell.source.split(BEGIN_HIDDEN)[1].split(END_HIDDEN)[0]
            assert re.search(r"^assert ", visible, re.M), f"{_meta(cell)['grade_id']}: no visible assert"
            assert "assert" in hidden, f"{_meta(cell)['grade_id']}: the hidden part has no assert"
        else:
            assert markers == [], "hidden-test markers outside a grade cell"


def test_no_outputs_or_execution_counts_are_stored():
    """Is the source notebook stored cleared (no outputs, no execution counts)?"""
    for cell in _code_cells():
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


def test_no_code_cell_imports_the_assignments_package():
    """Does the notebook stay self-contained (no import of the graders' `assignments` package)?"""
    for cell in _code_cells():
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            assert not any(m == "assignments" or m.startswith("assignments.") for m in modules), modules


def test_setup_cell_is_locked_and_gives_softmax_and_gelu():
    """Is the setup cell read-only and does it define the given helpers with docstrings?"""
    (setup,) = [c for c in NB.cells if _meta(c).get("grade_id") == "setup"]
    assert _meta(setup)["locked"] and not _meta(setup)["grade"] and not _meta(setup)["solution"]
    assert "import numpy as np" in setup.source
    functions = _defined_functions(setup.source)
    assert [a.arg for a in functions["softmax"].args.args] == ["x", "axis"]
    assert [a.arg for a in functions["gelu"].args.args] == ["x"]
    assert all(ast.get_docstring(functions[name]) for name in ("softmax", "gelu"))


@pytest.mark.parametrize("name", list(BUILDING_BLOCKS))
def test_composite_solutions_call_their_building_blocks_by_name(name):
    """Do the composite solutions call the swappable global names instead of inlining them?"""
    (cell,) = [c for c in _solution_cells() if name in _defined_functions(c.source)]
    fn = _defined_functions(cell.source)[name]
    called = {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    rebound = {t.id for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    assert BUILDING_BLOCKS[name] <= called
    assert not BUILDING_BLOCKS[name] & rebound


def _run_cells(sources: list[str]) -> list[BaseException | None]:
    namespace: dict = {"__name__": "__main__"}
    outcomes = []
    for source in sources:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, "<cell>", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - every outcome is recorded
            outcomes.append(exc)
        else:
            outcomes.append(None)
    return outcomes


def test_source_code_cells_run_top_to_bottom_without_error():
    """Do the solutions pass every public check and every visible and hidden test?"""
    outcomes = _run_cells([c.source for c in _code_cells()])
    failures = [(i, repr(e)) for i, e in enumerate(outcomes) if e is not None]
    assert failures == []


def test_stubbed_release_fails_only_with_not_implemented_error():
    """With the solutions stubbed out, is NotImplementedError the only error a cell raises?"""
    outcomes = _run_cells([_stubbed(c.source) for c in _code_cells()])
    other = [(i, repr(e)) for i, e in enumerate(outcomes) if e is not None and not isinstance(e, NotImplementedError)]
    assert other == []
    assert sum(isinstance(e, NotImplementedError) for e in outcomes) >= 2 * len(SIGNATURES)
