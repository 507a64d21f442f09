"""Hand-built results for the reporting tests: three students on a three-problem assignment.

ada   full marks.
bob   not on the roster; a recognised misconception on layer_norm, an exception message with
      markup on split_heads, two execution notes, and instructor detail that must stay hidden.
cy    the grader crashed.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.config import Assignment, Course, Limits, Problem, Tolerance
from autograder.grading import results as R
from autograder.layout import CourseLayout

SECRET = "SECRET-expected-0.7071067811865476"
SEED = 4242424242
HINT = "Divide by d, not d - 1: LayerNorm uses the population variance."
MARKUP = "<script>alert('pwned')</script>"
NOTEBOOK = "transformer-block.ipynb"
POINTS = (("layer_norm", 15.0), ("split_heads", 10.0), ("silu", 5.0))


def make_assignment(points=POINTS, name: str = "transformer-block") -> Assignment:
    tol = {"float64": Tolerance(1e-7, 1e-9), "float32": Tolerance(1e-4, 1e-5)}
    problems = tuple(Problem(name=p, points=pts, grade_id=f"test_{p}", notebook=NOTEBOOK, tolerances=tol)
                     for p, pts in points)
    return Assignment(name=name, package="transformer_block", notebooks=(NOTEBOOK,),
                      problems=problems, limits=Limits())


def make_course(root: Path, assignment: Assignment) -> Course:
    return Course(root=root, name="Test course", course_id="dl-attention", assignments=(assignment,),
                  roster_file=None, gradebook_url=f"sqlite:///{root / 'gradebook.db'}",
                  secret_file=root / ".course_secret")


def check(problem: str, fn: str, score: float, max_score: float, **kw) -> R.TestResult:
    status = kw.pop("status", "passed" if score == max_score else "failed")
    return R.TestResult(name=f"test_{problem}.py::{fn}", problem=problem, score=score,
                        max_score=max_score, status=status, **kw)


def submission(student: str, tests=(), **kw) -> R.SubmissionResult:
    kw.setdefault("state", "graded")
    kw.setdefault("files", (str(CourseLayout(Path()).submission(student, "transformer-block") / NOTEBOOK),))
    return R.SubmissionResult(student=student, assignment="transformer-block", tests=tuple(tests),
                              problems=tuple(p for p, _ in POINTS), problem_points=POINTS, **kw)


def ada_result() -> R.SubmissionResult:
    return submission("ada", [
        check("layer_norm", "test_layer_norm_matches_reference[seed0]", 7.5, 7.5),
        check("layer_norm", "test_layer_norm_matches_reference[seed1]", 7.5, 7.5),
        check("split_heads", "test_split_heads_shape_and_values", 10.0, 10.0),
        check("silu", "test_silu_matches_reference", 5.0, 5.0),
    ], seed=11, execution_time=3.21)


def bob_result() -> R.SubmissionResult:
    return submission("bob", [
        check("layer_norm", "test_layer_norm_matches_reference[seed0]", 0.0, 7.5,
              output="layer_norm(x, gamma, beta): 512 of 512 entries differ; largest absolute error 0.0012",
              diagnoses=("layer_norm.unbiased_variance",), hints=(HINT,),
              detail=f"expected[0, 0] = {SECRET}; replay with seed {SEED}"),
        check("layer_norm", "test_layer_norm_matches_reference[seed1]", 7.5, 7.5),
        check("split_heads", "test_split_heads_shape_and_values", 0.0, 10.0,
              output=f"split_heads raised ValueError: {MARKUP}",
              detail=f"Traceback (most recent call last): {SECRET}"),
        check("silu", "test_silu_matches_reference", 5.0, 5.0, detail=SECRET),
    ], seed=SEED, execution_time=5.5, on_roster=False,
        notes=("Cell 4 raised NameError: name 'np2' is not defined",
               "Skipped the line magic `%matplotlib inline` in cell 1"))


def cy_result() -> R.SubmissionResult:
    return submission("cy", [], state="crashed", seed=7,
                      crash_reason="the grader failed before any test ran (ImportError in the graders)")


@pytest.fixture
def ada() -> R.SubmissionResult:
    return ada_result()


@pytest.fixture
def bob() -> R.SubmissionResult:
    return bob_result()


@pytest.fixture
def cy() -> R.SubmissionResult:
    return cy_result()


@pytest.fixture
def assignment() -> Assignment:
    return make_assignment()
