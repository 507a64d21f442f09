"""`course validate`: source and release run in a real Jupyter kernel, and through the autograder."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.errors import CourseError
from autograder.grading.results import TestResult
from autograder.layout import CourseLayout
from autograder.validate import read_notebook
from conftest import ROOT

pytestmark = pytest.mark.slow

ASSIGNMENT = "transformer-block"
NB = "transformer-block.ipynb"


def shown(course, step: str) -> str:
    """The notebook's path in `step` (source or release) as validate's messages give it."""
    layout = CourseLayout(course)
    return layout.relative(getattr(layout, step)(ASSIGNMENT) / NB)


def run_validate(course):
    return subprocess.run([sys.executable, "-m", "autograder.cli", "validate", "transformer-block",
                           "--course-dir", str(course)], capture_output=True, text=True, timeout=600)


def test_validate_source_runs_clean_release_fails_only_in_stubs(course_copy):
    """Does the source run with no error, the release stop only at NotImplementedError, scoring 100 and 0?"""
    proc = run_validate(course_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    cells = len(json.loads((CourseLayout(course_copy).source(ASSIGNMENT) / NB).read_text())["cells"])
    ran = f"{cells} cells ran in a Jupyter kernel"
    assert "source  source/transformer-block/transformer-block.ipynb: " + ran in out
    assert ", 0 errors" in out
    assert "cells stopped at unfinished stubs (NotImplementedError)" in out
    assert "autograder: source scores 100/100, release scores 0/100" in out
    assert f"validate {ASSIGNMENT}: ok" in out


def test_validate_reports_a_source_cell_that_raises(course_copy):
    """Does a source notebook with broken cells fail validation, naming the notebook by its path in the
    course, each cell as Jupyter numbers it (from 1) with its grade id, the line of the cell and the
    error, a syntax error's line said as the cell's rather than IPython's temporary file's?"""
    path = CourseLayout(course_copy).source(ASSIGNMENT) / NB
    nb = json.loads(path.read_text())
    setup = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    nb["cells"][setup]["source"] = "".join(nb["cells"][setup]["source"]) + "\nundefined_name_here\n"
    named = nb["cells"][setup]["source"].splitlines().index("undefined_name_here") + 1
    test = next(i for i, c in enumerate(nb["cells"])
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "test_layer_norm")
    nb["cells"][test]["source"] = "".join(nb["cells"][test]["source"]).rstrip("\n") + "\ndef broken(:\n"
    broken = len(nb["cells"][test]["source"].splitlines())
    path.write_text(json.dumps(nb))
    proc = run_validate(course_copy)
    assert proc.returncode == 1
    where = f"PROBLEM: source {shown(course_copy, 'source')}"
    assert (f"{where}: cell {setup + 1} (`setup`) raised NameError at line {named} of the cell: name "
            f"'undefined_name_here' is not defined") in proc.stdout, proc.stdout
    assert (f"{where}: cell {test + 1} (`test_layer_norm`) raised SyntaxError: invalid syntax "
            f"(line {broken} of the cell)\n") in proc.stdout, proc.stdout


def test_validate_names_a_points_mismatch_with_both_numbers(course_copy):
    """With silu at 8 points in course.yml and 5 in the notebooks, does validate fail naming the problem,
    the grade cell, the intro table and both numbers?"""
    import yaml

    path = CourseLayout(course_copy).config
    data = yaml.safe_load(path.read_text())
    data["assignments"][0]["problems"]["silu"]["points"] = 8
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = run_validate(course_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    for where in ("source", "release"):
        assert (f"PROBLEM: {where}/transformer-block/transformer-block.ipynb: silu: grade cell test_silu gives 5 "
                f"points, course.yml gives 8 (run `course release`)") in out
        assert (f"PROBLEM: {where}/transformer-block/transformer-block.ipynb: silu: the points table in the intro "
                f"gives 5, course.yml gives 8") in out
    assert (f"PROBLEM: {shown(course_copy, 'release')} is not what `course release` makes of "
            f"{shown(course_copy, 'source')} and course.yml now (cell 1 differs), so students would get another "
            f"notebook; run `course release {ASSIGNMENT}`") in out
    assert f"validate {ASSIGNMENT}: 7 problems" in out


def edit_reference(course, old: str, new: str) -> None:
    path = CourseLayout(course).package("transformer_block") / "reference.py"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


SILU_RETURN = "        return x * _sigmoid(x)\n"


def test_validate_names_the_problem_and_check_the_source_loses_points_in(course_copy):
    """With a reference silu 0.1% off, does validate name silu, its points, the first failing check
    and that check's message, instead of only the total?"""
    edit_reference(course_copy, SILU_RETURN, "        return x * _sigmoid(x) * 1.001\n")
    proc = run_validate(course_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PROBLEM: source: silu"))
    assert line.startswith("PROBLEM: source: silu scores 0/5 through the autograder, expected full marks; "
                           "first failing check test_silu.py::test_silu_matches_reference[vector]: "
                           "silu on x of shape (9,) is off in 9 of 9 entries"), line
    assert line.endswith("(and 5 more failing checks)"), line
    assert f"validate {ASSIGNMENT}: 1 problem" in proc.stdout


def test_validate_names_each_grader_error(course_copy):
    """With a reference silu that raises, does validate say the grader failed, check by check, and
    with the error and the line of reference.py it arose at, rather than only a lower score?"""
    raising = '        raise ValueError("oops")'
    edit_reference(course_copy, SILU_RETURN, raising + "\n")
    layout = CourseLayout(course_copy)
    path = layout.package("transformer_block") / "reference.py"
    at = f"{layout.relative(path)}, line {path.read_text().splitlines().index(raising) + 1}"
    proc = run_validate(course_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert ("PROBLEM: source: silu scores 0/5 through the autograder, expected full marks; first failing check "
            f"test_silu.py::test_silu_matches_reference[vector]: grader error: {at}: ValueError: oops") in out
    assert (f"PROBLEM: source: grader error in test_silu.py::test_silu_matches_reference[vector]: {at}: "
            f"ValueError: oops") in out
    assert f"PROBLEM: source: grader error in test_silu.py::test_silu_keeps_float32: {at}: ValueError: oops" in out


def test_validate_names_the_file_and_line_of_a_grader_syntax_error(course_copy):
    """With a syntax error in a grader file, does validate name the file, the line and its text?"""
    grader = CourseLayout(course_copy).graders("transformer_block") / "test_silu.py"
    line = len(grader.read_text().splitlines()) + 2
    with open(grader, "a") as fh:
        fh.write("\ndef broken(:\n")
    proc = run_validate(course_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (f"graders could not be collected: test_silu.py, line {line}: SyntaxError: invalid syntax, "
            f"at 'def broken(:'") in proc.stdout, proc.stdout
    assert ("PROBLEM: release: no check ran through the autograder, so its 0/100 does not show that the stubs "
            "score nothing (grading crashed, as for the source)\n") in proc.stdout, proc.stdout


def test_validate_refuses_a_mistyped_mark_and_warns_of_a_check_pytest_does_not_collect(course_copy):
    """With `@pytest.mark.point` for `points` in one grader and a check not named test_* in another,
    does validate fail naming the file and test of the unknown mark, and warn of the uncollected
    check with its file and line (rather than say ok with the weights silently changed)?"""
    graders = CourseLayout(course_copy).graders("transformer_block")
    silu = graders / "test_silu.py"
    silu.write_text(silu.read_text().replace("@pytest.mark.points(", "@pytest.mark.point(", 1))
    rms = graders / "test_rms_norm.py"
    text = rms.read_text()
    line = text[:text.index("def test_rms_norm_applies_gamma_per_feature")].count("\n") + 1
    rms.write_text(text.replace("def test_rms_norm_applies_gamma_per_feature", "def rms_norm_applies_gamma"))
    proc = run_validate(course_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("graders could not be collected: test_silu.py::test_silu_matches_reference: unknown mark "
            "@pytest.mark.point (a check's weight is @pytest.mark.points(w)") in proc.stdout, proc.stdout
    assert (f"WARNING: assignments/transformer_block/graders/test_rms_norm.py, line {line}: rms_norm_applies_gamma() "
            f"takes the student fixture but is not run as a check") in proc.stdout, proc.stdout


@pytest.mark.parametrize("weights, why", [
    ({"0.5": "-1"}, "test_silu.py::test_silu_keeps_float32: @pytest.mark.points(-1): a check's weight is a finite "
                    "number, 0 or more"),
    ({"1.5": "0", "0.5": "0", "2.5": "0"}, "test_silu.py: all checks of problem silu weigh 0, so none of its 5 points "
                                           "can be scored; give one of them @pytest.mark.points(w) with w above 0"),
], ids=["negative", "all-zero"])
def test_validate_refuses_weights_that_cannot_share_out_a_problems_points(course_copy, weights, why):
    """With a check of weight -1 beside others (which would score silu past its 5 points), or every check
    of silu weighing 0, does validate fail naming the grader file (and test) and the true reason, rather
    than say ok, or that no check ran for silu?"""
    silu = CourseLayout(course_copy).graders("transformer_block") / "test_silu.py"
    text = silu.read_text()
    for old, new in weights.items():
        assert text.count(f"@pytest.mark.points({old})") == 1
        text = text.replace(f"@pytest.mark.points({old})", f"@pytest.mark.points({new})")
    silu.write_text(text)
    proc = run_validate(course_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"(grading crashed: graders could not be collected: {why})" in proc.stdout, proc.stdout
    assert "no check ran for it" not in proc.stdout and f"validate {ASSIGNMENT}: ok" not in proc.stdout


def test_a_source_problem_whose_passing_checks_weigh_too_little_says_so():
    """When every check of a problem passed on the source yet they carry less than its points, does
    validate's line say that, rather than that no check ran for it?"""
    from autograder.config import load_course
    from autograder.grading.engine import crashed_result
    from autograder.validate import source_score_problems

    assignment = load_course(ROOT).assignment(ASSIGNMENT)
    full = [TestResult(name=f"test_{p.name}.py::test_x", problem=p.name, score=p.points, max_score=p.points,
                       status="passed") for p in assignment.problems if p.name != "silu"]
    silu = [TestResult(name=f"test_silu.py::test_{n}", problem="silu", score=0.0, max_score=0.0, status="passed")
            for n in ("a", "b")]
    result = dataclasses.replace(crashed_result(assignment, "source-notebook", 1, True, ""), state="graded",
                                 tests=(*full, *silu))
    assert source_score_problems(result) == [
        "source: silu scores 0/5 through the autograder, expected full marks; its 2 checks passed, but their weights "
        "(@pytest.mark.points) carry 0 of its 5 points"]
    missing = dataclasses.replace(result, tests=tuple(full))
    assert source_score_problems(missing) == [
        "source: silu scores 0/5 through the autograder, expected full marks; no check ran for it"]


@pytest.mark.parametrize(("where", "text", "why"), [
    ("source", None, "not a readable notebook (Unterminated string starting at: line "),
    ("release", "{}\n", f"not a readable notebook (no list of cells); run `course release {ASSIGNMENT}` to write "
                        f"it again"),
])
def test_validate_names_an_unreadable_notebook_in_one_line(course_copy, where, text, why):
    """With a truncated source or a release that is `{}`, does validate say which notebook is not a
    readable notebook, in one line with exit code 2, rather than print nbformat's traceback?"""
    layout = CourseLayout(course_copy)
    path = (layout.source if where == "source" else layout.release)(ASSIGNMENT) / NB
    path.write_text(path.read_text()[:5000] if text is None else text)
    proc = run_validate(course_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"course: error: {where}/{ASSIGNMENT}/{NB}: {why}"), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr


def test_validate_runs_the_leak_check_on_the_release_as_committed(course_copy):
    """With a hidden-test line pasted by hand into the released notebook, does validate fail naming
    the notebook, the cell and the line, as course release's leak check would?"""
    path = CourseLayout(course_copy).release(ASSIGNMENT) / NB
    nb = json.loads(path.read_text())
    cell = next(i for i, c in enumerate(nb["cells"])
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "test_layer_norm")
    nb["cells"][cell]["source"] = "".join(nb["cells"][cell]["source"]) + "\n_r = np.random.default_rng(20240501)\n"
    path.write_text(json.dumps(nb))
    proc = run_validate(course_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (f"PROBLEM: {shown(course_copy, 'release')}: cell {cell + 1} leaks an instructor-only line: "
            f"'_r = np.random.default_rng(20240501)' (course release's leak check)") in proc.stdout


def test_validate_says_when_the_release_is_older_than_the_source(course_copy):
    """With a stub's signature changed in source/ and no `course release` since, does validate say
    that students would get the old notebook, naming the cell that differs?"""
    path = CourseLayout(course_copy).source(ASSIGNMENT) / NB
    nb = json.loads(path.read_text())
    cell = next(i for i, c in enumerate(nb["cells"]) if "def silu(x):" in "".join(c["source"]))
    nb["cells"][cell]["source"] = "".join(nb["cells"][cell]["source"]).replace("def silu(x):", "def silu(x, beta=1.0):")
    path.write_text(json.dumps(nb))
    proc = run_validate(course_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (f"PROBLEM: {shown(course_copy, 'release')} is not what `course release` makes of "
            f"{shown(course_copy, 'source')} and course.yml now (cell {cell + 1} differs), so students would get "
            f"another notebook; run `course release {ASSIGNMENT}`") in proc.stdout
    assert f"validate {ASSIGNMENT}: 1 problem" in proc.stdout


def test_a_notebook_saved_with_a_byte_order_mark_is_refused_saying_how_to_save_it(course_copy):
    """Does a source notebook that an editor saved as "UTF-8 with BOM" get a plain reason and the fix,
    rather than the JSON parser's advice to decode it with utf-8-sig?"""
    path = CourseLayout(course_copy).source(ASSIGNMENT) / NB
    path.write_text("\ufeff" + path.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(CourseError) as caught:
        read_notebook(path, shown(course_copy, "source"))
    assert str(caught.value) == (
        f"{shown(course_copy, 'source')}: starts with a byte-order mark, as some editors such as Notepad save "
        f"files, which Jupyter and nbgrader cannot read; save it again as UTF-8 without BOM")


@pytest.mark.parametrize("where", ["source", "release"])
def test_a_notebook_whose_format_numbers_are_no_integers_is_named_with_the_field(course_copy, where):
    """A source or released notebook with `"nbformat": 4.0` or `"nbformat_minor": "5"`, which nbformat's
    validator stops at with an empty AssertionError: is it refused in one line naming the file and the field?"""
    layout = CourseLayout(course_copy)
    path = (layout.source if where == "source" else layout.release)(ASSIGNMENT) / NB
    nb = json.loads(path.read_text(encoding="utf-8"))
    for field, value, says in (("nbformat_minor", "5", '"5"'), ("nbformat", 4.0, "4.0")):
        path.write_text(json.dumps({**nb, field: value}), encoding="utf-8")
        with pytest.raises(CourseError) as caught:
            read_notebook(path, shown(course_copy, where))
        assert str(caught.value) == (f"{shown(course_copy, where)}: not a readable notebook (it has {field} {says}, "
                                     f"where Jupyter writes an integer)")


def test_a_notebook_nested_too_deeply_is_refused_in_one_line(course_copy):
    """A source notebook whose metadata nests lists 3000 deep: a one-line refusal, not a RecursionError?"""
    path = CourseLayout(course_copy).source(ASSIGNMENT) / NB
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["metadata"]["deep"] = "@"
    path.write_text(json.dumps(nb).replace('"@"', "[" * 3000 + "]" * 3000), encoding="utf-8")
    with pytest.raises(CourseError) as caught:
        read_notebook(path, shown(course_copy, "source"))
    assert str(caught.value) == f"{shown(course_copy, 'source')}: not a readable notebook (its JSON nests too deeply)"


def test_a_release_whose_grading_crashed_is_not_said_to_score_what_was_expected():
    """When the release could not be graded (no check ran), does validate say so, with the reason when
    it is not the source's, rather than "scores 0/N, expected 0"; and a release scoring points still
    says how many?"""
    from autograder.config import load_course
    from autograder.grading.engine import crashed_result
    from autograder.validate import release_score_problems

    assignment = load_course(ROOT).assignment(ASSIGNMENT)
    broken = crashed_result(assignment, "release-notebook", 1, True, "graders could not be collected: oops")
    other = crashed_result(assignment, "source-notebook", 1, True, "the sandbox host stopped")
    assert release_score_problems(broken, other) == [
        "release: no check ran through the autograder, so its 0/100 does not show that the stubs score nothing "
        "(grading crashed: graders could not be collected: oops)"]
    assert "expected 0" not in release_score_problems(broken, broken)[0]
    scoring = dataclasses.replace(broken, state="graded", crash_reason="", tests=(
        TestResult(name="test_silu.py::test_x", problem="silu", score=5.0, max_score=5.0, status="passed"),))
    assert release_score_problems(scoring, other) == [
        "release scores 5/100 through the autograder, expected 0"]


def _grade_cell(nb: dict, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb["cells"])
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)


def test_validate_names_nbgrader_metadata_that_is_not_a_mapping_in_one_line(course_copy):
    """With a grade cell's nbgrader metadata replaced by the string "yes", does validate stop with the
    one line `course release` gives, exit code 2, rather than a traceback?"""
    from autograder.config import load_course
    from autograder.markers import course_delimiters
    from autograder.release import source_problems

    path = CourseLayout(course_copy).source(ASSIGNMENT) / NB
    nb = json.loads(path.read_text())
    i = _grade_cell(nb, "test_silu")
    nb["cells"][i]["metadata"]["nbgrader"] = "yes"
    path.write_text(json.dumps(nb))
    proc = run_validate(course_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"course: error: {shown(course_copy, 'source')}: cell {i + 1} (`"), proc.stderr
    assert "nbgrader metadata is not a mapping ('yes')" in proc.stderr
    (released,) = source_problems(nb, load_course(course_copy).assignment(ASSIGNMENT), NB, shown(course_copy, "source"),
                                  course_delimiters(course_copy))
    assert proc.stderr == f"course: error: {released}\n"


def test_validate_reports_the_markers_course_release_refuses(course_copy):
    """With test_silu's hidden-test markers in lower case, layer_norm's END SOLUTION gone and hidden tests
    in a public-checks cell, does validate report each in the one line naming the cell that `course
    release` gives, rather than nbgrader's "no end solution statement found" without a cell, or ok?"""
    from autograder.config import load_course
    from autograder.markers import course_delimiters
    from autograder.release import source_problems

    path = CourseLayout(course_copy).source(ASSIGNMENT) / NB
    nb = json.loads(path.read_text())
    silu = nb["cells"][_grade_cell(nb, "test_silu")]
    silu["source"] = "".join(silu["source"]).replace("BEGIN HIDDEN TESTS", "Begin hidden tests").replace(
        "END HIDDEN TESTS", "End hidden tests")
    solution = nb["cells"][_grade_cell(nb, "layer_norm_solution")]
    solution["source"] = "".join(solution["source"]).replace("### END SOLUTION", "")
    checks = next(c for c in nb["cells"] if "".join(c["source"]).startswith("# Public checks for silu"))
    checks["source"] = "".join(checks["source"]) + "\n### BEGIN HIDDEN TESTS\nassert True\n### END HIDDEN TESTS\n"
    path.write_text(json.dumps(nb))
    refused = source_problems(nb, load_course(course_copy).assignment(ASSIGNMENT), NB, shown(course_copy, "source"),
                              course_delimiters(course_copy))
    kinds = ("(`test_silu`): lines that look like nbgrader markers but are not: ",
             "(`layer_norm_solution`): BEGIN SOLUTION (line ",
             "(`# Public checks for silu.`): a hidden-test region (BEGIN HIDDEN TESTS) in a cell that is not an")
    assert len(refused) == 3 and all(any(kind in line for line in refused) for kind in kinds), refused
    proc = run_validate(course_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for line in refused:
        assert f"PROBLEM: {line}\n" in proc.stdout, proc.stdout
    assert "RuntimeError" not in proc.stdout and "could not be compared" not in proc.stdout, proc.stdout
    assert f"validate {ASSIGNMENT}: 3 problems" in proc.stdout


def test_a_mistake_id_naming_no_problem_is_reported(tmp_path):
    """Is a catalogued mistake whose id names no problem of course.yml (a typo in its problem part, so
    it would never be tried) reported by validate, naming the file and the id, while general ones pass?"""
    from autograder.config import load_course
    from autograder.grading.diagnosis import Catalogue
    from autograder.grading.session import InstructorCode
    from autograder.validate import catalogue_problems

    assignment = load_course(ROOT).assignment("transformer-block")
    catalogue = Catalogue()
    catalogue.add("layer_norm.fine", hint="A hint.")
    catalogue.add("general.fine_too", hint="A hint.")
    catalogue.add("layer_nrom.typo", hint="A hint.")
    code = InstructorCode(reference=None, catalogue=catalogue, graders=tmp_path, shown="assignments/hw")
    (line,) = catalogue_problems(code, assignment)
    assert line.startswith("assignments/hw/mistakes.py: mistake id 'layer_nrom.typo' names no problem of course.yml")
    assert line.endswith("so it is never tried")
    catalogue_ok = Catalogue()
    catalogue_ok.add("silu.fine", hint="A hint.")
    fine = InstructorCode(reference=None, catalogue=catalogue_ok, graders=tmp_path)
    assert catalogue_problems(fine, assignment) == []


def _with_a_hang(course, seconds: float) -> tuple[Path, int]:
    """The source notebook with layer_norm_solution made to sleep `seconds` first; its path and the cell's index."""
    path = CourseLayout(course).source(ASSIGNMENT) / NB
    nb = json.loads(path.read_text())
    cell = _grade_cell(nb, "layer_norm_solution")
    nb["cells"][cell]["source"] = f"import time; time.sleep({seconds})\n" + "".join(nb["cells"][cell]["source"])
    path.write_text(json.dumps(nb))
    return path, cell


def test_a_source_cell_that_hangs_is_stopped_at_the_cell_time_limit(course_copy):
    """With layer_norm_solution sleeping 15 s and a 2 s limit, does the run stop there soon after 2 s,
    saying which cell ran past limits.cell_seconds and how many cells did not run, its kernel gone?"""
    import time

    from autograder.validate import execute_notebook

    path, cell = _with_a_hang(course_copy, 15)
    nb = read_notebook(path, "source")
    started = time.monotonic()
    run = execute_notebook(path, nb, timeout=2)
    assert time.monotonic() - started < 12
    from autograder.validate import timed_out_text

    assert run.timed_out == cell
    below = len(nb.cells) - cell - 1
    assert timed_out_text(nb, run, 2) == (
        f"cell {cell + 1} (`layer_norm_solution`) still ran after limits.cell_seconds (2 s), so it was stopped and "
        f"its kernel shut down; the {below} cells below it did not run")
    assert not any(c.get("outputs") for c in nb.cells[cell + 1:])
    assert not _kernels(os.getpid())


def _kernels(pid: int) -> list:
    import psutil

    return [p for p in psutil.Process(pid).children(recursive=True) if "ipykernel" in " ".join(p.cmdline())]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_validate_in_a_hanging_cell_and_its_kernel(course_copy, sig, code):
    """With layer_norm_solution hanging in its kernel, does Ctrl-C (SIGINT) or SIGTERM stop `course validate`
    within a few seconds, with 130 or 143, its kernel killed rather than left behind?"""
    import time

    import psutil

    _with_a_hang(course_copy, 1000)
    proc = subprocess.Popen([sys.executable, "-m", "autograder.cli", "validate", ASSIGNMENT, "--course-dir",
                             str(course_copy)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    kernels: list = []
    try:
        deadline = time.monotonic() + 120
        while not kernels and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            with contextlib.suppress(psutil.Error):
                kernels = _kernels(proc.pid)
        assert kernels, "no kernel started"
        time.sleep(3)                                 # the setup cells ran: layer_norm_solution sleeps
        proc.send_signal(sig)
        started = time.monotonic()
        try:
            out, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail(f"course validate still ran 15 s after {sig.name}")
        assert time.monotonic() - started < 5, f"{sig.name}: {time.monotonic() - started:.1f} s"
        assert proc.returncode == code, out + err
        _, alive = psutil.wait_procs(kernels, timeout=2)
        assert not alive, f"kernel left running: {[p.pid for p in alive]}"
    finally:                                          # whatever failed above, by PID: nothing left running
        for kernel in kernels:
            with contextlib.suppress(psutil.Error):
                kernel.kill()
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
