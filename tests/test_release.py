"""`course release`: nbgrader generates release/, and nothing instructor-only survives in it."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.config import load_course
from autograder.errors import ReleaseError
from autograder.layout import CourseLayout
from autograder.release import instructor_only_lines, leak_check
from conftest import PROJECT

ASSIGNMENT = "transformer-block"
NOTEBOOK = "transformer-block.ipynb"


def released_notebook(course: Path) -> Path:
    return CourseLayout(course).release(ASSIGNMENT) / NOTEBOOK


def source_notebook(course: Path) -> Path:
    return CourseLayout(course).source(ASSIGNMENT) / NOTEBOOK


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    from conftest import copy_course

    course = copy_course(tmp_path_factory.mktemp("release") / "course")
    released_notebook(course).unlink()
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", "transformer-block",
                           "--course-dir", str(course)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "leak check" in proc.stdout
    return course


def test_release_equals_the_committed_release(released):
    """Is the committed release/ exactly what `course release` generates from source/?"""
    assert released_notebook(released).read_bytes() == released_notebook(PROJECT.root).read_bytes(), \
        "release/ is stale: run `course release transformer-block` and commit the result"


def test_release_holds_no_solution_or_hidden_test_text(released):
    """Are all instructor-only lines, markers and `assignments` imports absent from the release?"""
    text = released_notebook(released).read_text()
    secret = instructor_only_lines(source_notebook(PROJECT.root))
    assert len(secret) > 50, "the source has solution and hidden-test regions to protect"
    for cell in json.loads(text)["cells"]:
        src = "".join(cell["source"])
        assert not {ln.strip() for ln in src.splitlines()} & secret
        assert "BEGIN SOLUTION" not in src and "HIDDEN TESTS" not in src
        assert "import assignments" not in src and "from assignments" not in src
    stubs = sum("".join(c["source"]).count("raise NotImplementedError()")
                for c in json.loads(text)["cells"] if c["cell_type"] == "code")
    problems = load_course(PROJECT.root).assignment(ASSIGNMENT).problems
    assert stubs == len(problems), "one stub per student function (per problem in course.yml)"


def test_release_records_grade_cells_in_the_gradebook(released):
    """Does the release put the assignment's grade cells, with course.yml's points, in nbgrader's gradebook?"""
    from nbgrader.api import Gradebook

    course = load_course(released)
    a = course.assignment("transformer-block")
    with Gradebook(course.gradebook_url) as gb:
        nb = gb.find_notebook("transformer-block", "transformer-block")
        cells = {c.name: c.max_score for c in nb.grade_cells}
    assert cells == {p.grade_id: p.points for p in a.problems}


@pytest.mark.parametrize("injected, message", [
    ("    mean = x.mean(axis=-1, keepdims=True)\n", "leaks an instructor-only line"),
    ("### BEGIN HIDDEN TESTS\n", "still contains the marker"),
    ("### Begin hidden tests\n", "still contains a line that looks like the marker 'BEGIN HIDDEN TESTS': "
                                  "'### Begin hidden tests'"),
    ("from assignments.transformer_block import reference\n", "imports the instructor-only"),
])
def test_leak_check_names_the_notebook_and_cell(released, injected, message):
    """Does a leak in a released notebook fail the check with the notebook and the cell named?"""
    course = load_course(released)
    a = course.assignment("transformer-block")
    path = released_notebook(released)
    original = path.read_text()
    nb = json.loads(original)
    secret = instructor_only_lines(source_notebook(released))
    if "mean" in injected:
        injected = next(iter(sorted(secret))) + "\n"
    nb["cells"][3]["source"] = injected + "".join(nb["cells"][3]["source"])
    path.write_text(json.dumps(nb))
    try:
        with pytest.raises(ReleaseError, match=message) as info:
            leak_check(course.layout, a)
        assert f"{CourseLayout(released).relative(path)}: cell 4 " in str(info.value)     # nb["cells"][3]
    finally:
        path.write_text(original)


def test_release_of_a_missing_source_is_one_line(course_copy):
    """Does releasing an assignment whose source notebook vanished give a one-line error?"""
    source_notebook(course_copy).unlink()
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", "transformer-block",
                           "--course-dir", str(course_copy)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert f"{CourseLayout(course_copy).relative(source_notebook(course_copy))} does not exist" in proc.stderr


def test_a_failed_release_changes_nothing(course_copy):
    """When nbgrader's generate_assignment fails (a corrupt source), are the previous release/, the source
    and the gradebook left as they were, and no scratch folder left behind?"""
    layout = CourseLayout(course_copy)
    before = released_notebook(course_copy).read_bytes()
    released = sorted(p.name for p in layout.release(ASSIGNMENT).parent.iterdir())
    path = source_notebook(course_copy)
    nb = json.loads(path.read_text())
    solution = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))
    solution["metadata"]["nbgrader"]["schema_version"] = 99     # nbgrader's metadata check refuses it
    path.write_text(json.dumps(nb))
    source_before = path.read_bytes()
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", ASSIGNMENT,
                           "--course-dir", str(course_copy)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "nbgrader generate_assignment transformer-block failed" in proc.stderr
    assert "(nothing was changed)" in proc.stderr
    assert released_notebook(course_copy).read_bytes() == before
    assert path.read_bytes() == source_before
    assert not (course_copy / "gradebook.db").exists()
    assert not [p for p in course_copy.iterdir() if p.name.startswith(".course-release-")]
    assert sorted(p.name for p in layout.release(ASSIGNMENT).parent.iterdir()) == released


def test_release_refuses_a_grade_cell_that_is_no_problem(course_copy):
    """Is a grade cell whose grade id no problem in course.yml has refused before anything is built,
    naming the cell and its points?"""
    path = source_notebook(course_copy)
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "test_silu")
    cell["metadata"]["nbgrader"]["grade_id"] = "test_silu_bonus"
    path.write_text(json.dumps(nb))
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", ASSIGNMENT,
                           "--course-dir", str(course_copy)], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "has no grade cell 'test_silu' for problem silu" in proc.stderr
    assert "grade cell 'test_silu_bonus' (5 points) is not a problem of this notebook" in proc.stderr


def test_release_warns_of_an_answer_id_renamed_after_students_submitted(tmp_path):
    """With ada's and katherine's notebooks in submitted/, does a release whose source renamed an answer cell's
    id (silu_solution -> silu_answer) say in one warning that the submitted notebooks keep the old id, so
    formgrader shows them no box for the new one, and how to undo it; and is the undone release silent?"""
    from autograder import api
    from conftest import course_with_students

    course = course_with_students(tmp_path / "course", ("ada", "katherine"))

    def renamed(old: str, new: str) -> list[str]:
        path = source_notebook(course)
        nb = json.loads(path.read_text())
        [cell] = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == old]
        cell["metadata"]["nbgrader"]["grade_id"] = new
        path.write_text(json.dumps(nb))
        lines: list[str] = []
        api.release(course, ASSIGNMENT, log=lines.append)
        return [line for line in lines if line.startswith("WARNING")]

    submitted = {p: p.read_bytes() for p in CourseLayout(course).submitted_dir.rglob("*.ipynb")}
    assert renamed("silu_solution", "silu_answer") == [
        "WARNING: transformer-block.ipynb: the release's answer cell silu_answer is in no submitted notebook, and 2 "
        "submitted notebooks still have silu_solution, which the release no longer has (an id renamed in source/ "
        "after students submitted?): formgrader shows those submissions no box for silu_answer; put the old id "
        "back in source/transformer-block/transformer-block.ipynb and run `course release transformer-block` again"]
    assert renamed("silu_answer", "silu_solution") == []
    assert {p: p.read_bytes() for p in submitted} == submitted


def _formgrader_boxes(course: Path, student: str) -> tuple[set[str], set[str]]:
    """What formgrader shows `student` of the assignment's notebook: the grade ids whose score box its
    page holds (the autograded copy rendered as formgrader renders it), and those the gradebook has a
    grade for, with a score (formgrader binds a box to the grade of the same name)."""
    from nbgrader.api import Gradebook
    from reporting.test_feedback_formgrader import formgrader_html

    page = formgrader_html(CourseLayout(course).autograded(student, ASSIGNMENT) / NOTEBOOK)
    boxes = set(re.findall(r'<input class="score tabbable" id="([^"]+)"', page))
    with Gradebook(load_course(course).gradebook_url) as gb:
        grades = gb.find_submission_notebook(ASSIGNMENT, NOTEBOOK.removesuffix(".ipynb"), student).grades
        scored = {g.name for g in grades if g.auto_score is not None or g.manual_score is not None}
    return boxes, scored


def test_release_of_a_grade_id_renamed_after_grading_names_who_lacks_its_box_until_graded_again(tmp_path):
    """After ada and katherine were graded, test_silu renamed silu_check in course.yml and source/ and released
    with --drop-grades, as the README says: is the one warning true of nbgrader (formgrader's page of each
    autograded copy has no score box for silu_check, the gradebook no score for it) and does it name both and
    say to grade again; and once the next `course autograde` graded them again, do page and gradebook have
    silu_check, with its score, and is a release again silent?"""
    from autograder import api
    from conftest import course_cmd, course_with_students

    course = course_with_students(tmp_path / "course", ("ada", "katherine"))
    course_cmd(course, "autograde", ASSIGNMENT)
    config = CourseLayout(course).config
    config.write_text(config.read_text().replace("silu: {points: 5}", "silu: {points: 5, grade_id: silu_check}"))
    path = source_notebook(course)
    nb = json.loads(path.read_text())
    [cell] = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "test_silu"]
    cell["metadata"]["nbgrader"]["grade_id"] = "silu_check"
    path.write_text(json.dumps(nb))

    lines: list[str] = []
    api.release(course, ASSIGNMENT, log=lines.append, drop_grades=True)
    assert [line for line in lines if line.startswith("WARNING")] == [
        "WARNING: transformer-block.ipynb: the release's grade cell silu_check is not yet in the autograded copies "
        "of 2 submissions graded before it (ada, katherine), which still have test_silu (a grade id renamed in "
        "source/ and course.yml): formgrader shows them no score box for silu_check, and the gradebook no score "
        "for it, until the next `course autograde transformer-block` grades them again (a new release grades "
        "everyone again)"]
    for student in ("ada", "katherine"):
        boxes, scored = _formgrader_boxes(course, student)
        assert "silu_check" not in boxes and "silu_check" not in scored and "test_layer_norm" in boxes & scored

    course_cmd(course, "autograde", ASSIGNMENT)
    for student in ("ada", "katherine"):
        boxes, scored = _formgrader_boxes(course, student)
        assert "silu_check" in boxes & scored and "test_silu" not in boxes | scored
    lines.clear()
    api.release(course, ASSIGNMENT, log=lines.append)
    assert not [line for line in lines if line.startswith("WARNING")]


def test_release_names_cells_that_share_an_id(course_copy):
    """Is a source whose cells share an nbgrader grade_id or a cell id (a grade cell copied in Jupyter)
    refused before anything is built, in one line naming the id and both cells, where nbgrader's
    generate_assignment says only that "the nbgrader metadata may be corrupted"?"""
    path = source_notebook(course_copy)
    nb = json.loads(path.read_text())
    i = next(i for i, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_silu")
    nb["cells"].insert(i + 1, json.loads(json.dumps(nb["cells"][i])))
    path.write_text(json.dumps(nb))
    before = released_notebook(course_copy).read_bytes()
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", ASSIGNMENT,
                           "--course-dir", str(course_copy)], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    where = CourseLayout(course_copy).relative(path)
    assert f"{where}: nbgrader grade_id 'test_silu' is used by cells {i + 1}, {i + 2}" in proc.stderr
    assert f"cell id {nb['cells'][i]['id']!r} is used by cells {i + 1}, {i + 2}" in proc.stderr
    assert released_notebook(course_copy).read_bytes() == before


def _index(nb: dict, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


def _checks_of(nb: dict, problem: str) -> int:
    """The public-checks cell of `problem`: a plain code cell, no nbgrader metadata."""
    first = f"# Public checks for {problem}"
    return next(i for i, c in enumerate(nb["cells"]) if "".join(c["source"]).startswith(first))


def _edit(nb: dict, index: int, change) -> None:
    nb["cells"][index]["source"] = change("".join(nb["cells"][index]["source"]))


def _drop_lines(*markers: str):
    return lambda src: "\n".join(ln for ln in src.split("\n") if ln.strip() not in markers)


def _hidden_in_checks(nb: dict) -> int:
    i = _checks_of(nb, "silu")
    _edit(nb, i, lambda src: src + "\n### BEGIN HIDDEN TESTS\nassert silu(0.0) == 0.0\n### END HIDDEN TESTS\n")
    return i


def _open_hidden(nb: dict) -> int:
    i = _index(nb, "test_silu")
    _edit(nb, i, _drop_lines("### END HIDDEN TESTS"))
    return i


def _open_solution(nb: dict) -> int:
    i = _index(nb, "silu_solution")
    _edit(nb, i, _drop_lines("### END SOLUTION"))
    return i


def _unmarked_solution_cell(nb: dict) -> int:
    i = _index(nb, "silu_solution")
    del nb["cells"][i]["metadata"]["nbgrader"]
    return i


def _solution_in_markdown(nb: dict) -> int:
    i = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown" and i > 2)
    _edit(nb, i, lambda src: src + "\n\n### BEGIN SOLUTION\nThe answer.\n### END SOLUTION\n")
    return i


def _no_solution_markers(nb: dict) -> int:
    i = _index(nb, "silu_solution")
    _edit(nb, i, _drop_lines("### BEGIN SOLUTION", "### END SOLUTION"))
    return i


def _release_refused(course: Path, nb: dict) -> str:
    """Write `nb` as the source, run `course release`, check it was refused in one line with nothing
    changed, and return that line."""
    path = source_notebook(course)
    path.write_text(json.dumps(nb))
    before = released_notebook(course).read_bytes(), path.read_bytes()
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", ASSIGNMENT,
                           "--course-dir", str(course)], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert (released_notebook(course).read_bytes(), path.read_bytes()) == before
    assert not (course / "gradebook.db").exists()
    return proc.stderr


@pytest.mark.parametrize("corrupt, cell, message", [
    (_hidden_in_checks, "(`# Public checks for silu.`)", "a hidden-test region (BEGIN HIDDEN TESTS) in a cell that "
                                                          "is not an autograder-tests cell"),
    (_open_hidden, "(`test_silu`)", "BEGIN HIDDEN TESTS (line "),
    (_open_solution, "(`silu_solution`)", "BEGIN SOLUTION (line 14) has no END SOLUTION after it"),
    (_unmarked_solution_cell, "(`def silu(x):`)", "a solution region (BEGIN SOLUTION) in a cell that is not a "
                                                  "solution cell"),
    (_solution_in_markdown, "(`## 1. Layer normalisation`)", "a solution region (BEGIN SOLUTION) in a cell that "
                                                            "is not a solution cell"),
    (_no_solution_markers, "(`silu_solution`)", "a solution cell with no BEGIN SOLUTION / END SOLUTION region, so "
                                                "nbgrader would release the whole cell (`def silu` and its "
                                                "docstring too) as the bare stub"),
], ids=["hidden-tests-in-a-plain-cell", "hidden-tests-left-open", "solution-left-open", "solution-cell-unmarked",
        "solution-in-markdown", "solution-cell-without-markers"])
def test_release_names_the_cell_of_a_bad_marker(course_copy, corrupt, cell, message):
    """Is a source whose nbgrader markers nbgrader would refuse without naming the notebook or cell
    (or, with both solution markers gone, would release as the bare stub) refused before anything is
    built, in one line naming the notebook and the cell, with nothing changed?"""
    path = source_notebook(course_copy)
    nb = json.loads(path.read_text())
    index = corrupt(nb)
    line = _release_refused(course_copy, nb)
    assert f"{CourseLayout(course_copy).relative(path)}: cell {index + 1} {cell}: {message}" in line


@pytest.mark.parametrize("begin, end", [
    ("### Begin hidden tests", "### End hidden tests"),
    ("### BEGIN HIDDEN TEST", "### END HIDDEN TEST"),
    ("### BEGIN HIDEN TESTS", "### END HIDEN TESTS"),
], ids=["lower-case", "singular", "misspelt"])
def test_release_refuses_hidden_test_markers_nbgrader_would_not_see(course_copy, begin, end):
    """With test_silu's hidden-test markers in the wrong case or misspelt (nbgrader would release the
    hidden tests whole, and the leak check, reading the same markers, would find nothing), is the
    release refused in one line naming the notebook, the cell and each line that looks like a marker?"""
    nb = json.loads(source_notebook(course_copy).read_text())
    i = _index(nb, "test_silu")
    lines = "".join(nb["cells"][i]["source"]).split("\n")
    at = lines.index("### BEGIN HIDDEN TESTS") + 1, lines.index("### END HIDDEN TESTS") + 1
    _edit(nb, i, lambda src: src.replace("### BEGIN HIDDEN TESTS", begin).replace("### END HIDDEN TESTS", end))
    line = _release_refused(course_copy, nb)
    assert (f"{CourseLayout(course_copy).relative(source_notebook(course_copy))}: cell {i + 1} (`test_silu`): lines "
            f"that look like nbgrader markers but are not: line {at[0]} {begin!r} (for BEGIN HIDDEN TESTS), line "
            f"{at[1]} {end!r} (for END HIDDEN TESTS); nbgrader matches its markers exactly, case included, so it "
            f"would leave them and what they enclose in the release") in line, line


def test_release_refuses_nbgrader_metadata_that_is_not_a_mapping(course_copy):
    """With test_silu's nbgrader metadata replaced by the string "yes", is the release refused with that
    one line (not a misleading one about hidden tests outside a grade cell)?"""
    nb = json.loads(source_notebook(course_copy).read_text())
    i = _index(nb, "test_silu")
    nb["cells"][i]["metadata"]["nbgrader"] = "yes"
    line = _release_refused(course_copy, nb)
    where = CourseLayout(course_copy).relative(source_notebook(course_copy))
    assert line.startswith(f"course: error: {where}: cell {i + 1} (`"), line
    assert "): nbgrader metadata is not a mapping ('yes'); " in line and "hidden" not in line, line


def _retype(nb: dict, grade_id: str, kind: str, **flags) -> int:
    """Make the cell of `grade_id` a `kind` cell, as Jupyter does (its metadata kept), with `flags` set in
    its nbgrader metadata; its index."""
    i = _index(nb, grade_id)
    cell = nb["cells"][i]
    cell["cell_type"] = kind
    if kind != "code":
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    cell["metadata"]["nbgrader"].update(flags)
    return i


@pytest.mark.parametrize("grade_id, kind, flags, message", [
    ("test_silu", "markdown", {}, "the grade cell of problem silu is a Markdown cell, not a code cell, which "
                                  "nbgrader refuses (a Markdown grade cell is a manually graded answer, and must be "
                                  "a solution cell too); its tests run as code: make it a code cell again"),
    ("test_silu", "markdown", {"solution": True}, "the grade cell of problem silu is a Markdown cell, not a code "
                                                  "cell; its tests run as code: make it a code cell again"),
    ("test_silu", "raw", {}, "the grade cell of problem silu is a raw cell, not a code cell; its tests run"),
    ("silu_solution", "markdown", {}, "a Markdown cell marked as a solution cell but not as a grade cell, which "
                                      "nbgrader refuses"),
    ("setup", "code", {"task": True}, "a task cell (nbgrader metadata `task: true`) that is a code cell, which "
                                      "nbgrader refuses: its task cells are Markdown"),
], ids=["grade-cell-to-markdown", "grade-cell-to-markdown-answer", "grade-cell-to-raw", "solution-cell-to-markdown",
        "code-task-cell"])
def test_release_names_a_cell_whose_type_does_not_fit_its_nbgrader_metadata(course_copy, grade_id, kind, flags,
                                                                             message):
    """With a grade or solution cell changed to another cell type in the source (its nbgrader metadata kept,
    which nbgrader's generate_assignment refuses as "metadata may be corrupted", naming no cell), or a code
    cell marked as a task, is the release refused before nbgrader runs, in one line naming the source
    notebook, the cell (number and grade id) and what is wrong, with nothing changed?"""
    nb = json.loads(source_notebook(course_copy).read_text())
    i = _retype(nb, grade_id, kind, **flags)
    line = _release_refused(course_copy, nb)
    where = CourseLayout(course_copy).relative(source_notebook(course_copy))
    assert f"course: error: {where}: cell {i + 1} (`{grade_id}`): {message}" in line, line
    assert "generate_assignment" not in line, line


def test_release_refuses_a_problem_whose_solution_cell_was_deleted(course_copy):
    """With silu's solution cell deleted while its grade cell is still graded, is the release refused in
    one line naming the problem, the notebook and the grade cell?"""
    nb = json.loads(source_notebook(course_copy).read_text())
    del nb["cells"][_index(nb, "silu_solution")]
    line = _release_refused(course_copy, nb)
    assert (f"{CourseLayout(course_copy).relative(source_notebook(course_copy))}: silu is defined in no code cell, "
            f"though the notebook still grades it in cell {_index(nb, 'test_silu') + 1} (`test_silu`)") in line, line


def test_release_refuses_a_grade_cell_above_its_solution(course_copy):
    """With test_silu moved above silu's solution cell, is the release refused naming both cells?"""
    nb = json.loads(source_notebook(course_copy).read_text())
    solution = _index(nb, "silu_solution")
    nb["cells"].insert(solution, nb["cells"].pop(_index(nb, "test_silu")))
    line = _release_refused(course_copy, nb)
    assert (f"{CourseLayout(course_copy).relative(source_notebook(course_copy))}: the grade cell of silu, cell "
            f"{solution + 1} (`test_silu`), is above cell {solution + 2} (`silu_solution`), which defines silu") in line


def test_release_refuses_a_problem_function_defined_twice(course_copy):
    """Is a problem whose function a given cell defines too (a student who deleted the stub would be
    graded on the given one) refused before anything is built, in one line naming both cells?"""
    path = source_notebook(course_copy)
    nb = json.loads(path.read_text())
    setup, solution = _index(nb, "setup"), _index(nb, "silu_solution")
    _edit(nb, setup, lambda src: src + "\n\ndef silu(x):\n    return x / (1 + np.exp(-x))\n")
    path.write_text(json.dumps(nb))
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", ASSIGNMENT,
                           "--course-dir", str(course_copy)], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert (f"{CourseLayout(course_copy).relative(path)}: silu is defined in 2 code cells (cell {setup + 1} "
            f"(`setup`), cell {solution + 1} (`silu_solution`))") in proc.stderr


def test_release_of_a_source_that_is_not_json_names_it_relative_to_the_course(course_copy):
    """Does a source notebook that is not JSON give one line naming it by its course-relative path?"""
    path = source_notebook(course_copy)
    path.write_text("not a notebook")
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", ASSIGNMENT,
                           "--course-dir", str(course_copy)], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"course: error: {CourseLayout(course_copy).relative(path)}: not a readable notebook")
    assert str(course_copy) not in proc.stderr


@pytest.mark.parametrize("minor, shown", [("5.0", "5.0"), ('"5"', '"5"'), ("null", "null"), ("NaN", "NaN")])
def test_release_of_a_source_whose_minor_format_is_no_integer_names_the_field(course_copy, minor, shown):
    """A source notebook whose nbformat_minor is 5.0, "5", null or NaN (which nbformat's validator stops at
    with an empty AssertionError): is it one line naming the notebook and the field, not a traceback?"""
    path = source_notebook(course_copy)
    text = path.read_text()
    assert text.count('"nbformat_minor": 5') == 1
    path.write_text(text.replace('"nbformat_minor": 5', f'"nbformat_minor": {minor}'))
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", ASSIGNMENT,
                           "--course-dir", str(course_copy)], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr == (f"course: error: {CourseLayout(course_copy).relative(path)}: not a readable notebook "
                           f"(it has nbformat_minor {shown}, where Jupyter writes an integer)\n"), proc.stderr


def test_an_empty_nbgrader_entry_is_named_with_nbgrader_s_whole_message(course_copy):
    """With a cell whose nbgrader metadata is an empty entry (which nbgrader takes for an old format), does
    the one-line error give nbgrader's whole message, not its last line, and name the cell, with nothing
    changed?"""
    path = source_notebook(course_copy)
    nb = json.loads(path.read_text())
    index = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"
                 and "nbgrader" not in c["metadata"])
    nb["cells"][index]["metadata"]["nbgrader"] = {}
    path.write_text(json.dumps(nb))
    before = released_notebook(course_copy).read_bytes()
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", ASSIGNMENT,
                           "--course-dir", str(course_copy)], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "use an old version of the nbgrader metadata format" in proc.stderr
    assert f"without a schema_version: {CourseLayout(course_copy).relative(path)}: cell {index + 1} (`" in proc.stderr
    assert released_notebook(course_copy).read_bytes() == before


def test_nbgrader_s_failure_is_its_last_message_or_its_traceback_s_exception():
    """Is an nbgrader failure read as its last own message (continued over indented lines), a logged
    traceback as its exception line, and nbgrader's generic closing lines skipped?"""
    from autograder.release import nbgrader_failure

    old_format = ("[GenerateAssignmentApp | INFO] Converting notebook x.ipynb\n"
                  "[GenerateAssignmentApp | ERROR] One or more notebooks use an old version \n"
                  "    of the metadata format. Please update it using:\n    nbgrader update .\n")
    assert nbgrader_failure(old_format) == ("One or more notebooks use an old version of the metadata format. "
                                            "Please update it using: nbgrader update .")
    traceback = ("[App | ERROR] There was an error processing assignment: /tmp/x\n"
                 "[App | ERROR] Traceback (most recent call last):\n"
                 "      File \"clearsolutions.py\", line 168, in preprocess_cell\n        raise RuntimeError(\n"
                 "    RuntimeError: Solution region detected in a non-solution cell\n"
                 "[App | ERROR] There was an error processing assignment 'hw' for student '.'\n"
                 "[App | ERROR] Please see the the above traceback for details on the specific errors\n")
    assert nbgrader_failure(traceback) == "RuntimeError: Solution region detected in a non-solution cell"
    assert nbgrader_failure("Traceback\nKeyError: 'x'\nexit\n") == "KeyError: 'x'"
    assert nbgrader_failure("") == "no output"


def test_a_course_with_its_own_markers_is_released_and_leak_checked_with_them(tmp_path):
    """When the course's nbgrader config sets its own solution and hidden-test markers, does `course
    release` release the source written with them, and does the leak check (release's, and validate's on
    release/ as committed) know what they enclose: a solution line pasted into release/ is caught,
    where nbgrader's default markers would see no instructor-only line at all?"""
    from autograder.markers import Delimiters, course_delimiters
    from conftest import copy_course

    course = copy_course(tmp_path / "course")
    with (course / "nbgrader_config.py").open("a") as f:
        f.write('c = get_config()  # noqa: F821\n'
                'c.ClearSolutions.begin_solution_delimeter = "BEGIN ANSWER"\n'
                'c.ClearSolutions.end_solution_delimeter = "END ANSWER"\n'
                'c.ClearHiddenTests.begin_test_delimeter = "BEGIN SECRET CHECKS"\n'
                'c.ClearHiddenTests.end_test_delimeter = "END SECRET CHECKS"\n')
    source = source_notebook(course)
    text = source.read_text()
    assert "BEGIN SOLUTION" in text
    source.write_text(text.replace("BEGIN SOLUTION", "BEGIN ANSWER").replace("END SOLUTION", "END ANSWER")
                      .replace("BEGIN HIDDEN TESTS", "BEGIN SECRET CHECKS")
                      .replace("END HIDDEN TESTS", "END SECRET CHECKS"))
    marks = course_delimiters(course)
    secret = instructor_only_lines(source, marks)
    assert secret and not instructor_only_lines(source, Delimiters())
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", "transformer-block",
                           "--course-dir", str(course)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    path = released_notebook(course)
    released = path.read_text()
    assert "BEGIN ANSWER" not in released and "BEGIN SECRET CHECKS" not in released
    a = load_course(course).assignment(ASSIGNMENT)
    assert leak_check(CourseLayout(course), a, marks) > 0
    nb = json.loads(released)
    nb["cells"][3]["source"] = sorted(secret)[0] + "\n" + "".join(nb["cells"][3]["source"])
    path.write_text(json.dumps(nb))
    with pytest.raises(ReleaseError, match="cell 4 leaks an instructor-only line"):
        leak_check(CourseLayout(course), a, marks)
    nb["cells"][3]["source"] = "# BEGIN ANSWER\n"
    path.write_text(json.dumps(nb))
    with pytest.raises(ReleaseError, match="cell 4 still contains the marker 'BEGIN ANSWER'"):
        leak_check(CourseLayout(course), a, marks)
