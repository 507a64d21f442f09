"""course.yml is the one source of points: grade cells and the intro's table are written from it, and
every disagreement (points, graders, functions) is named with both numbers."""
from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from autograder.config import load_course
from autograder.consistency import (
    defined_functions,
    find_table,
    grade_cells,
    grader_file_problems,
    heading_points_problems,
    notebook_problems_found,
    points_problems,
    source_heading_problems,
    uncollected_checks,
    write_points,
)
from autograder.layout import CourseLayout
from conftest import PROJECT

ASSIGNMENT = "transformer-block"
NB = "transformer-block.ipynb"
WHERE = "source/transformer-block/transformer-block.ipynb"


@pytest.fixture(scope="module")
def source() -> dict:
    return json.loads((PROJECT.source(ASSIGNMENT) / NB).read_text())


@pytest.fixture
def nb(source) -> dict:
    return copy.deepcopy(source)


@pytest.fixture(scope="module")
def assignment():
    return load_course(PROJECT.root).assignment(ASSIGNMENT)


def with_points(assignment, **points):
    problems = tuple(dataclasses.replace(p, points=points.get(p.name, p.points)) for p in assignment.problems)
    return dataclasses.replace(assignment, problems=problems)


def test_the_committed_notebooks_agree_with_course_yml(source, assignment):
    """Do the source and release notebooks carry exactly course.yml's points, in grade cells and table?"""
    assert points_problems(source, assignment, NB, WHERE) == []
    release = json.loads((PROJECT.release(ASSIGNMENT) / NB).read_text())
    assert points_problems(release, assignment, NB, "release") == []
    assert find_table(source) is not None, "the intro has a points table to keep in step"


def test_a_changed_points_value_is_named_with_both_numbers(nb, assignment):
    """With silu at 8 in course.yml and 5 in the notebook, are the grade cell, the table row and the
    total each reported, naming the problem and both numbers?"""
    problems = points_problems(nb, with_points(assignment, silu=8), NB, WHERE)
    assert f"{WHERE}: silu: grade cell test_silu gives 5 points, course.yml gives 8 (run `course release`)" \
        in problems
    assert f"{WHERE}: silu: the points table in the intro gives 5, course.yml gives 8 (run `course release`)" \
        in problems
    assert any("total is 100, course.yml's problems add up to 103" in p for p in problems)
    assert len(problems) == 3


def test_writing_points_makes_the_notebook_agree(nb, assignment):
    """Does write_points set the grade cell and rewrite the table, and change nothing a second time?"""
    changed = with_points(assignment, silu=8, layer_norm=12.5)
    lines = write_points(nb, changed, NB)
    assert "grade cell test_silu: 5 -> 8 points" in lines
    assert "grade cell test_layer_norm: 12 -> 12.5 points" in lines
    assert points_problems(nb, changed, NB, WHERE) == []
    assert grade_cells(nb)["test_silu"][1] == 8
    table = find_table(nb)
    assert table is not None
    assert ("silu", "8") in table.rows and ("total", "103.5") in table.rows
    assert write_points(nb, changed, NB) == []


def test_writing_points_keeps_an_agreeing_notebook_byte_for_byte(nb, source, assignment):
    """Is a notebook that already agrees left exactly as it was?"""
    assert write_points(nb, assignment, NB) == []
    assert nb == source


def test_a_problem_without_grade_cell_and_a_stray_grade_cell_are_named(nb, assignment):
    """Are a problem whose grade cell is missing and a grade cell that is no problem both reported?"""
    cell = next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "test_silu")
    cell["metadata"]["nbgrader"]["grade_id"] = "test_silu_extra"
    found = notebook_problems_found(nb, assignment, NB, WHERE)
    assert f"{WHERE}: has no grade cell 'test_silu' for problem silu (course.yml)" in found
    assert any(p.startswith(f"{WHERE}: grade cell 'test_silu_extra' (5 points) is not a problem") for p in found)


def test_the_table_lists_every_problem_and_only_problems(nb, assignment):
    """Is a problem missing from the table, or a table row for no problem, reported by name?"""
    table = find_table(nb)
    cell = nb["cells"][table.cell]
    text = "".join(cell["source"]).replace("| `silu` | 5 |", "| `gelu` | 5 |")
    cell["source"] = text
    problems = points_problems(nb, assignment, NB, WHERE)
    assert any("silu: missing from the points table" in p for p in problems)
    assert any("lists gelu, which is not a problem" in p for p in problems)


def test_a_missing_or_stray_table_row_says_what_rewrites_the_table(nb, assignment):
    """Are a problem missing from the table and a row for no problem told that `course release`
    rewrites the table, as a row with other points is?"""
    table = find_table(nb)
    cell = nb["cells"][table.cell]
    cell["source"] = "".join(cell["source"]).replace("| `silu` | 5 |", "| `gelu` | 5 |")
    problems = points_problems(nb, assignment, NB, WHERE)
    assert f"{WHERE}: silu: missing from the points table in the intro (course.yml gives 5; run `course release`)" \
        in problems
    assert f"{WHERE}: the points table in the intro lists gelu, which is not a problem of this notebook in " \
        "course.yml (run `course release`)" in problems


def test_graders_and_functions_agree_for_this_course(source, assignment):
    """Does every grader file have its problem and every problem's function exist in the notebook?"""
    course = load_course(PROJECT.root)
    assert grader_file_problems(course, assignment) == []
    assert {p.name for p in assignment.problems} <= defined_functions(source)


def test_a_grader_with_no_problem_and_a_function_the_notebook_lacks_are_named(course_copy, nb):
    """Is a grader file with no problem in course.yml reported, and a problem whose function the
    notebook does not define, with the cell that still grades it?"""
    course = load_course(course_copy)
    a = course.assignment(ASSIGNMENT)
    (course.layout.graders(a.package) / "test_gelu.py").write_text("def test_gelu():\n    pass\n")
    assert grader_file_problems(course, a) == [
        "assignments/transformer_block/graders/test_gelu.py: grades gelu, which is not a problem of "
        "transformer-block in course.yml"]
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["source"] = "".join(cell["source"]).replace("def silu(", "def my_silu(")
    grade = grade_cells(nb)["test_silu"][0]
    assert notebook_problems_found(nb, a, NB, WHERE) == [
        f"{WHERE}: silu is defined in no code cell, though the notebook still grades it in cell {grade + 1} "
        f"(`test_silu`); a problem's function must be defined in its solution cell (was that cell deleted?)"]


def test_a_grade_cell_above_its_function_is_named(nb, assignment):
    """Is a problem's grade cell moved above the cell that defines its function (run from the top, it
    calls the function before it exists) reported, naming both cells?"""
    grade = grade_cells(nb)["test_silu"][0]
    solution = next(i for i, c in enumerate(nb["cells"]) if "def silu(" in "".join(c["source"]))
    nb["cells"].insert(solution, nb["cells"].pop(grade))
    assert notebook_problems_found(nb, assignment, NB, WHERE) == [
        f"{WHERE}: the grade cell of silu, cell {solution + 1} (`test_silu`), is above cell {solution + 2} "
        f"(`silu_solution`), which defines silu, so run from the top it calls silu before it exists; move the "
        f"grade cell below it"]


def test_a_grader_function_pytest_does_not_collect_is_named_only_when_it_takes_student(course_copy):
    """Is a public grader function taking `student` but not named test_* named with its file and
    line, and are checks, private helpers and functions without `student` left alone?"""
    course = load_course(course_copy)
    a = course.assignment(ASSIGNMENT)
    assert uncollected_checks(course, a) == []
    (course.layout.graders(a.package) / "test_silu.py").write_text(
        "def test_silu_a(student):\n    pass\n\n"
        "def silu_b(student, expect, rng):\n    pass\n\n"
        "async def check_silu_c(rng, *, student):\n    pass\n\n"
        "def _call(student):\n    pass\n\n"
        "def inputs(rng):\n    pass\n\n"
        "class Helper:\n    def silu_d(self, student):\n        pass\n")
    found = uncollected_checks(course, a)
    where = "assignments/transformer_block/graders/test_silu.py"
    assert [f.split(" takes")[0] for f in found] == [f"{where}, line 4: silu_b()", f"{where}, line 7: check_silu_c()"]
    assert "pytest collects only functions named test_*" in found[0]


def test_consistency_names_an_extension_for_no_student(course_copy):
    """Is an extension for an id on neither the roster nor the submissions named with its key path, and
    one for a roster student or a student who submitted (not on the roster) left alone?"""
    from autograder.consistency import extension_problems

    (course_copy / "roster.csv").write_text("id\nada\n")
    config = course_copy / "course.yml"
    config.write_text(config.read_text().replace(
        "    late_policy:", "    extensions: {ada: {days: 1}, late: {days: 1}, adaa: {hours: 3}}\n    late_policy:", 1))
    course = load_course(course_copy)
    assert extension_problems(course, course.assignment(ASSIGNMENT), ["late"]) == [
        "course.yml: assignments[0].extensions.adaa: no student 'adaa' on the roster (roster.csv) or in "
        "submitted/, so this extension applies to nobody"]


def test_results_graded_against_another_due_date_or_extension_are_named():
    """Are the students whose results were graded against a due date or extension course.yml no longer
    gives them named in one line (sorted, ignoring case), and those graded against the current ones (an
    extension written in other units for the same length too), without a timestamp (no penalty either way) or
    crashed left out?"""
    import datetime as dt

    from autograder.config import Assignment, Extension, Limits
    from autograder.consistency import stale_due_dates, stale_due_students
    from autograder.grading.results import SubmissionResult

    due = dt.datetime(2026, 12, 14, 23, 59, tzinfo=dt.UTC)
    a = Assignment(name="hw", package="hw", notebooks=("hw.ipynb",), problems=(), limits=Limits(), due=due,
                   extensions={"kat": Extension(days=1)})

    def graded(student: str, when: dt.datetime, extension: str = "", **kw) -> SubmissionResult:
        return SubmissionResult(student=student, assignment="hw", state=kw.pop("state", "graded"),
                                submitted_at=kw.pop("submitted_at", due.isoformat()), due=when.isoformat(),
                                extension=extension, **kw)

    now = [graded("ada", due), graded("kat", due + dt.timedelta(days=1), "1 day")]
    assert stale_due_dates(a, now) == ""
    assert stale_due_students(a, [graded("kat", due + dt.timedelta(days=1), "24 hours")]) == []   # same length
    before = [graded("kat", due), graded("bob", due - dt.timedelta(days=1)),
              graded("cy", due + dt.timedelta(days=2), "2 days"),
              graded("dan", due, "1 day", submitted_at=""), graded("eve", due, "1 day", state="crashed")]
    assert stale_due_dates(a, before).startswith(
        "hw: course.yml's due date or extensions changed since bob, cy, kat were graded; the late penalties ")
    assert stale_due_students(a, before) == ["kat", "bob", "cy"] and stale_due_students(a, now) == []


def test_results_scored_out_of_other_points_are_named_with_the_changes():
    """Are the students whose results were scored out of points course.yml no longer gives named in one
    line with each change (a problem's new points, a problem added), and those up to date or crashed left out?"""
    from autograder.config import Assignment, Limits, Problem
    from autograder.consistency import stale_points, stale_results
    from autograder.grading.results import SubmissionResult

    problems = (Problem(name="silu", points=8.0, grade_id="test_silu", notebook="hw.ipynb", tolerances={}),
                Problem(name="relu", points=2.0, grade_id="test_relu", notebook="hw.ipynb", tolerances={}))
    a = Assignment(name="hw", package="hw", notebooks=("hw.ipynb",), problems=problems, limits=Limits())

    def graded(student: str, points: tuple[tuple[str, float], ...], state: str = "graded") -> SubmissionResult:
        return SubmissionResult(student=student, assignment="hw", state=state, problem_points=points)

    now = (("silu", 8.0), ("relu", 2.0))
    assert stale_points(a, [graded("ada", now)]) == ""
    before = [graded("ada", now), graded("bob", (("silu", 5.0),)), graded("cy", (("silu", 5.0),), "crashed")]
    assert stale_points(a, before) == (
        "hw: course.yml's points changed since bob was graded (silu 5 -> 8, relu none -> 2); the score in the "
        "gradebook, the export and the feedback pages is out of the old points until `course autograde hw` "
        "grades again")
    assert stale_results(a, before) == [stale_points(a, before),
                                        "hw: cy has no autograder score (grading crashed); the gradebook, the export "
                                        "and the feedback pages show this until the graders are fixed and `course "
                                        "autograde hw --force` grades again (or a TA grades by hand in formgrader)"]


def test_results_graded_while_a_grader_failed_are_named():
    """Are the students whose grades count 0 for a check whose grader code failed, and those whose grading
    crashed, named in one line, and those graded cleanly (or not graded at all) left out?"""
    from autograder.config import Assignment, Limits
    from autograder.consistency import grader_failures, stale_results
    from autograder.grading.results import SubmissionResult

    a = Assignment(name="hw", package="hw", notebooks=("hw.ipynb",), problems=(), limits=Limits())

    def graded(student: str, *errors: str, state: str = "graded") -> SubmissionResult:
        return SubmissionResult(student=student, assignment="hw", state=state, grader_errors=errors)

    clean = [graded("ada"), graded("bob")]
    assert grader_failures(a, clean) == "" and stale_results(a, clean) == []
    failed = [*clean, *(graded(s, "test_silu.py::test_silu_shape: RuntimeError: oops") for s in "cdefgh"),
              graded("kat", state="crashed")]
    assert grader_failures(a, failed) == (
        "hw: the grades of c, d, e, f, g and 1 more count 0 for checks whose grader code failed (GRADER ERROR) "
        "and kat has no autograder score (grading crashed); the gradebook, the export and the feedback pages show "
        "these until the graders are fixed and `course autograde hw --force` grades again (or a TA grades by hand "
        "in formgrader)")
    assert grader_failures(a, failed[:3]).startswith("hw: the grade of c counts 0 for checks whose grader code")
    assert stale_results(a, failed) == [grader_failures(a, failed)]


def headed(nb: dict, cell: int, text: str) -> dict:
    """`nb` (in place) with the Markdown cell `cell` (0-based) made `text`."""
    assert nb["cells"][cell]["cell_type"] == "markdown"
    nb["cells"][cell]["source"] = text
    return nb


def test_no_heading_of_the_shipped_source_notebooks_is_taken_for_wrong_points():
    """Do the shipped source notebooks, as they are and with their sections' headings stating the points
    course.yml gives (a section's own problem, or all of its section's), give no warning?"""
    course = load_course(PROJECT.root)
    for a in course.assignments:
        for name in a.notebooks:
            path = PROJECT.source(a.name) / name
            if path.is_file():
                assert heading_points_problems(json.loads(path.read_text()), a, name, "src") == [], path
    nb = json.loads((PROJECT.source(ASSIGNMENT) / NB).read_text())
    assignment = course.assignment(ASSIGNMENT)
    headed(nb, 3, "## 1. Layer normalisation (12 points)\n\nThe layer_norm of one token.")
    headed(nb, 7, "### RMSNorm, the lighter variant — 5 pts")
    headed(nb, 11, "## 2. Why several heads, and what they cost [15 Points]")
    headed(nb, 29, "## 5. SwiGLU: a gated feed-forward network (**20 points**)")
    headed(nb, 38, "## 6. Counting parameters: 8 points.")
    headed(nb, 42, "## 7. Putting numbers on it (3 points)")          # no problem's grade cell below it
    headed(nb, 13, "### 2 points to note about `split_heads`")               # no stated points: 10
    headed(nb, 17, "### `merge_heads` (4 points each)\n\n```\n# (1 point)\n```")   # 5, and a fenced comment
    assert heading_points_problems(nb, assignment, NB, WHERE) == []
    # no points stated (a count of something else), and "(0 points)" under a problem's heading (a hint)
    headed(nb, 38, "## 6. Counting parameters: a model with 1000 points\n\n### Hint (0 points)")
    assert heading_points_problems(nb, assignment, NB, WHERE) == []


@pytest.mark.parametrize("cell, text, message", [
    (3, "## 1. Layer normalisation (13 points)\n\nx",
     "cell 4 (`## 1. Layer normalisation (13 points)`): its heading says 13 points, but course.yml gives problem "
     "layer_norm 12, and to its section's problems layer_norm and rms_norm 17"),
    (7, "RMSNorm comes next.\n\n### RMSNorm, the lighter variant [4 pts]",
     "cell 8 (`RMSNorm comes next.`): the heading `RMSNorm, the lighter variant [4 pts]` says 4 points, but "
     "course.yml gives problem rms_norm 5"),
    (29, "## 5. SwiGLU: 7.5 points", "cell 30 (`## 5. SwiGLU: 7.5 points`): its heading says 7.5 points, but "
     "course.yml gives problem silu 5, and to its section's problems silu and swiglu_ffn 20"),
])
def test_a_heading_stating_other_points_than_course_yml_is_named_with_its_cell(nb, assignment, cell, text, message):
    """Is a heading whose "(N points)" / "N pts" differs from course.yml's points of its problems (its own
    and its section's) named in one line with the notebook, the cell and both numbers?"""
    assert heading_points_problems(headed(nb, cell, text), assignment, NB, WHERE) == [
        f"{WHERE}: {message} (`course release` does not rewrite headings: edit it)"]


def test_a_heading_whose_points_course_yml_changed_is_named_by_validate(course_copy):
    """With silu at 8 in course.yml under a heading that says 5 points, does the check whose lines `course
    validate` prints as warnings (`source_heading_problems`) name the source notebook's heading?"""
    layout = CourseLayout(course_copy)
    path = layout.source(ASSIGNMENT) / NB
    path.write_text(json.dumps(headed(json.loads(path.read_text()), 29, "## 5. SwiGLU (5 points)")))

    def warned() -> list[str]:
        course = load_course(course_copy)
        return source_heading_problems(course, course.assignment(ASSIGNMENT))

    assert warned() == []
    layout.config.write_text(layout.config.read_text().replace("silu: {points: 5}", "silu: {points: 8}"))
    assert warned() == [
        f"{WHERE}: cell 30 (`## 5. SwiGLU (5 points)`): its heading says 5 points, but course.yml gives problem "
        f"silu 8, and to its section's problems silu and swiglu_ffn 23 (`course release` does not rewrite "
        f"headings: edit it)"]
