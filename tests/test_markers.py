"""The nbgrader markers of a source notebook, checked as nbgrader's generate_assignment reads them,
with the notebook and the cell named (the `course release` cases are in test_release.py)."""
from __future__ import annotations

import json

import pytest

from autograder.config import load_course
from autograder.layout import CourseLayout
from autograder.markers import Delimiters, cell_marker_problems, course_delimiters, marker_problems
from conftest import PROJECT

ASSIGNMENT = "transformer-block"
NOTEBOOK = "transformer-block.ipynb"


def _cell(source: str, cell_type: str = "code", **nbgrader: bool) -> dict:
    meta = {"nbgrader": {"grade_id": "q", **nbgrader}} if nbgrader else {}
    return {"cell_type": cell_type, "metadata": meta, "source": source}


def test_the_course_source_has_no_marker_problem():
    """Does the committed source notebook pass the checks (they refuse nothing nbgrader releases well)?"""
    nb = json.loads((PROJECT.source(ASSIGNMENT) / NOTEBOOK).read_text())
    assert marker_problems(nb, course_delimiters(PROJECT.root), "nb") == []


@pytest.mark.parametrize("cell, problem", [
    (_cell("def f(x):\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n",
           solution=True),
     "a second BEGIN SOLUTION (line 3) before the END SOLUTION of the one on line 2"),
    (_cell("assert f(1) == 1\n### END HIDDEN TESTS\n", grade=True),
     "END HIDDEN TESTS (line 2) has no BEGIN HIDDEN TESTS"),
    (_cell("x = 1\n### BEGIN SOLUTION\nx = 2\n### END SOLUTION\n", grade=True),
     "a solution region (BEGIN SOLUTION) in a cell that is not a solution cell"),
    (_cell("def f(x):\n    return x\n", solution=True), "a solution cell with no BEGIN SOLUTION / END SOLUTION region"),
])
def test_a_bad_marker_is_named(cell, problem):
    """Is each marker nbgrader would refuse or mishandle reported, with its line where it has one?"""
    assert any(problem in found for found in cell_marker_problems(cell, Delimiters()))


@pytest.mark.parametrize("cell", [
    _cell("### BEGIN SOLUTION\nx = 2\n### END SOLUTION\n### BEGIN HIDDEN TESTS\nassert x\n### END HIDDEN TESTS\n",
          solution=True, grade=True),                         # an autograded answer holding hidden tests
    _cell("x = 2\n", solution=True),                          # a whole-cell answer (no function): nbgrader's stub
    _cell("Explain.", "markdown", solution=True),             # a written answer
    _cell("### BEGIN HIDDEN TESTS\nassert x\n### END HIDDEN TESTS\n", grade=True),
])
def test_what_nbgrader_releases_well_passes(cell):
    """Are the cells nbgrader releases as intended left alone?"""
    assert cell_marker_problems(cell, Delimiters()) == []


def test_markers_follow_nbgrader_config(course_copy):
    """Are the markers nbgrader's defaults, and those the course's nbgrader config sets (ClearSolutions'
    delimiters) when it sets them, so a course with its own markers is neither refused nor unchecked?"""
    assert course_delimiters(course_copy) == Delimiters()
    with (course_copy / "nbgrader_config.py").open("a") as f:
        f.write('c = get_config()  # noqa: F821\nc.ClearSolutions.begin_solution_delimeter = "BEGIN ANSWER"\n'
                'c.ClearSolutions.end_solution_delimeter = "END ANSWER"\n')
    marks = course_delimiters(course_copy)
    assert (marks.begin_solution, marks.end_solution) == ("BEGIN ANSWER", "END ANSWER")
    nb = json.loads((CourseLayout(course_copy).source(ASSIGNMENT) / NOTEBOOK).read_text())
    found = marker_problems(nb, marks, "nb")
    assert len(found) == len(load_course(course_copy).assignment(ASSIGNMENT).problems)
    assert all("a solution cell with no BEGIN ANSWER / END ANSWER region" in line for line in found)
