"""The nbgrader markers of a source notebook, checked as nbgrader's generate_assignment reads them,
with the notebook and the cell named (the `course release` cases are in test_release.py)."""
from __future__ import annotations

import json

import pytest

from autograder.config import load_course
from autograder.layout import CourseLayout
from autograder.markers import (
    Delimiters,
    cell_marker_problems,
    course_delimiters,
    looks_like,
    marker_problems,
    metadata_problems,
)
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


HIDDEN = "assert f(1) == 1\n{begin}\nassert f(2) == 4\n{end}\n"


@pytest.mark.parametrize("begin, end", [
    ("### Begin hidden tests", "### End hidden tests"),
    ("### BEGIN HIDDEN TEST", "### END HIDDEN TEST"),
    ("### BEGIN HIDEN TESTS", "### END HIDEN TESTS"),
    ("### BEGIN  HIDDEN TESTS", "### END_HIDDEN_TESTS"),
], ids=["lower-case", "singular", "misspelt", "spacing"])
def test_a_hidden_test_marker_nbgrader_would_not_see_is_named(begin, end):
    """Is a grade cell whose hidden-test markers are not exactly nbgrader's (which would release its hidden
    tests whole) reported, naming each line and the marker it looks like?"""
    found = cell_marker_problems(_cell(HIDDEN.format(begin=begin, end=end), grade=True), Delimiters())
    assert found == [f"lines that look like nbgrader markers but are not: line 2 {begin!r} (for BEGIN HIDDEN TESTS), "
                     f"line 4 {end!r} (for END HIDDEN TESTS); nbgrader matches its markers exactly, case included, "
                     f"so it would leave them and what they enclose in the release"]


def test_a_misspelt_solution_marker_is_named_rather_than_the_missing_region():
    """Is a solution cell whose markers are in the wrong case told so, line by line, rather than only
    that it holds no solution region?"""
    cell = _cell("def f(x):\n    ### Begin Solution\n    return x\n    ### End Solution\n", solution=True)
    (found,) = cell_marker_problems(cell, Delimiters())
    assert found.startswith("lines that look like nbgrader markers but are not: line 2 '### Begin Solution' "
                            "(for BEGIN SOLUTION), line 4 '### End Solution' (for END SOLUTION);"), found


@pytest.mark.parametrize("line", [
    "### BEGIN HIDDEN TESTS", "    ### END SOLUTION", "# hidden tests", "# end of the tests", "# The hidden tests "
    "begin here", "# Solution", "# begin", "x = 1", "",
])
def test_lines_that_are_markers_or_plain_comments_are_not_taken_for_misspelt_markers(line):
    """Are a marker written exactly, and comments that merely mention tests or a solution, left alone?"""
    assert looks_like(line, Delimiters()) == ""


def test_misspelt_markers_follow_the_course_s_own_delimiters():
    """With a course's own solution markers, is a line in the wrong case taken for that marker?"""
    marks = Delimiters(begin_solution="BEGIN ANSWER", end_solution="END ANSWER")
    assert looks_like("### begin answer", marks) == "BEGIN ANSWER"
    assert looks_like("### BEGIN ANSWER", marks) == ""


@pytest.mark.parametrize("nbgrader, shown", [("yes", "'yes'"), (None, "None"), (["grade"], "['grade']")])
def test_nbgrader_metadata_that_is_not_a_mapping_is_named(nbgrader, shown):
    """Is a cell whose nbgrader metadata is a string, null or a list named, with what it holds, where
    every other check would take it for a plain cell (or crash)?"""
    nb = {"cells": [_cell("x = 1\n"), {"cell_type": "code", "metadata": {"nbgrader": nbgrader}, "source": "y = 2\n"}]}
    assert metadata_problems(nb, "nb") == [f"nb: cell 2 (`y = 2`): nbgrader metadata is not a mapping ({shown}); "
                                           f"give it nbgrader's keys (grade, solution, locked, grade_id, ...), or "
                                           f"remove it"]
    nb["cells"][1]["metadata"] = "yes"
    assert metadata_problems(nb, "nb") == ["nb: cell 2 (`y = 2`): cell metadata is not a mapping ('yes')"]


def test_the_course_notebooks_have_mappings_for_metadata():
    """Do the committed source and release pass the metadata check?"""
    for step in (PROJECT.source, PROJECT.release):
        assert metadata_problems(json.loads((step(ASSIGNMENT) / NOTEBOOK).read_text()), "nb") == []
