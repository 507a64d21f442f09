"""The grading plugin: points shared by weight, failures turned into student-safe messages,
internal errors kept apart, seeded rng per test."""
from __future__ import annotations

import pytest

from autograder.config import Assignment, Limits, Problem, Tolerance
from autograder.grading.plugin import INTERNAL_ERROR, GradingPlugin
from autograder.sandbox.outcomes import FunctionMissing

pytest_plugins = ["pytester"]

TOL = {"float64": Tolerance(1e-7, 1e-9), "float32": Tolerance(1e-4, 1e-5)}


def assignment(**points) -> Assignment:
    return Assignment(name="hw", package="hw", notebooks=("hw.ipynb",),
                      problems=tuple(Problem(n, p, f"test_{n}", "hw.ipynb", TOL) for n, p in points.items()),
                      limits=Limits())


class FakeProxy:
    """Stands for the notebook: `double` works, everything else is missing."""
    last_call = None

    def for_problem(self, problem):
        return self

    def __getattr__(self, name):
        if name == "double":
            return lambda x: 2 * x
        def missing(*a, **k):
            raise FunctionMissing(name)
        return missing


def run(pytester, files: dict[str, str], **points):
    for name, body in files.items():
        pytester.makepyfile(**{name: body})
    plugin = GradingPlugin(assignment(**points), {"hw.ipynb": FakeProxy()}, seed=7, reference=None, catalogue=None)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", plugins=[plugin])
    return {t.name.split("::")[-1]: t for t in plugin.results()}, plugin


def test_points_are_shared_in_proportion_to_weights(pytester):
    """Does a problem's points split by `points` weights, a parametrised test sharing its weight?"""
    results, _ = run(pytester, {"test_double": """
import pytest

@pytest.mark.points(3)
def test_double_big(student):
    assert student.double(2) == 4

@pytest.mark.points(1)
@pytest.mark.parametrize("x", [1, 2])
def test_double_small(student, x):
    assert student.double(x) == 3 * x
"""}, double=8)
    assert results["test_double_big"].max_score == pytest.approx(6)
    assert results["test_double_big"].score == pytest.approx(6)
    assert results["test_double_small[1]"].max_score == pytest.approx(1)
    assert results["test_double_small[1]"].status == "failed"
    assert sum(t.max_score for t in results.values()) == pytest.approx(8)


def test_student_errors_become_their_feedback(pytester):
    """Does a call to a missing function fail the test with the sandbox's student-safe sentence?"""
    results, plugin = run(pytester, {"test_halve": """
def test_halve_works(student):
    '''Does halve halve?'''
    assert student.halve(4) == 2
"""}, halve=5)
    t = results["test_halve_works"]
    assert t.status == "failed" and t.score == 0
    assert "`halve` is not defined in your notebook" in t.output
    assert t.description == "Does halve halve?"
    assert not plugin.internal_errors


def test_grader_bugs_are_internal_errors_not_student_messages(pytester):
    """Is an exception in the grader itself reported as an internal error, its traceback kept for the instructor?"""
    results, plugin = run(pytester, {"test_double": """
def test_double_buggy(student):
    {}["no such key"]
"""}, double=1)
    t = results["test_double_buggy"]
    assert t.output == INTERNAL_ERROR
    assert "KeyError" in t.detail
    assert plugin.internal_errors


def test_rng_is_seeded_per_test_and_repeatable(pytester):
    """Does each test get its own rng, the same on every run with the same seed?"""
    files = {"test_double": """
def test_double_a(rng):
    assert False, rng.integers(1 << 30)

def test_double_b(rng):
    assert False, rng.integers(1 << 30)
"""}
    first, _ = run(pytester, files, double=2)
    second, _ = run(pytester, files, double=2)
    assert first["test_double_a"].output == second["test_double_a"].output
    assert first["test_double_a"].output != first["test_double_b"].output


def test_a_module_for_an_unknown_problem_is_a_collection_error(pytester):
    """Is a grader module whose name matches no problem reported, not silently ignored?"""
    _, plugin = run(pytester, {"test_other": "def test_other_x():\n    pass\n"}, double=1)
    assert any("no problem named 'other'" in e for e in plugin.collection_errors)
    assert plugin.problems_without_tests() == ("double",)


def test_a_check_that_cannot_be_graded_gets_its_own_status_and_no_points(pytester):
    """Does NotGraded from a check give status "not_graded", score 0 and its reason as the message?"""
    results, plugin = run(pytester, {"test_double": """
from autograder.grading.checks import NotGraded

def test_double_needs_halve(student):
    raise NotGraded("halve", "`halve` is not defined in your notebook")
"""}, double=4)
    t = results["test_double_needs_halve"]
    assert (t.status, t.score, t.max_score) == ("not_graded", 0.0, 4.0)
    assert t.output.startswith("Not graded: this check needs your `halve`")
    assert not t.passed and not plugin.internal_errors


def test_advice_carries_no_points(pytester):
    """Does a check marked points(0) count for nothing, whether it passes or fails?"""
    results, _ = run(pytester, {"test_double": """
import pytest

@pytest.mark.points(1)
def test_double_works(student):
    assert student.double(2) == 4

@pytest.mark.points(0)
def test_double_advice(student):
    assert False, "advice"
"""}, double=5)
    assert results["test_double_works"].max_score == 5
    advice = results["test_double_advice"]
    assert (advice.status, advice.max_score, advice.score) == ("failed", 0.0, 0.0)
