"""The mistakes catalogue: matching wrong variants, and keeping the diagnosis that explains most."""
from __future__ import annotations

import numpy as np
import pytest

from autograder.grading.diagnosis import Catalogue, prune_subsumed
from autograder.grading.results import TestResult


def test_match_finds_only_the_variant_that_agrees():
    """Does match return exactly the variants whose output equals the student's?"""
    cat = Catalogue()
    cat.add("f.double", hint="Doubled.", variant=lambda x: 2 * x)
    cat.add("f.square", hint="Squared.", variant=lambda x: x * x)
    cat.add("g.double", hint="Other problem.", variant=lambda x: 2 * x)
    x = np.array([1.0, 3.0, 5.0])
    assert [m.id for m in cat.match("f", (x,), {}, 2 * x, rtol=1e-7, atol=1e-9)] == ["f.double"]


def test_match_ignores_rows_the_student_left_non_finite():
    """Is a student output with NaN rows (a fully masked row) still recognised on its finite part?"""
    cat = Catalogue()
    cat.add("f.double", hint="Doubled.", variant=lambda x: 2 * x)
    x = np.arange(12.0).reshape(4, 3)
    student = 2 * x
    student[3] = np.nan
    assert [m.id for m in cat.match("f", (x,), {}, student, rtol=1e-7, atol=1e-9)] == ["f.double"]
    student[:3] = np.nan
    assert cat.match("f", (x,), {}, student, rtol=1e-7, atol=1e-9) == (), "mostly NaN proves nothing"


def test_a_variant_that_raises_is_skipped():
    """Does a variant that cannot run on these inputs just not match?"""
    cat = Catalogue()
    cat.add("f.bad", hint="x", variant=lambda x: 1 / 0)
    assert cat.match("f", (np.ones(2),), {}, np.ones(2), rtol=1e-7, atol=1e-9) == ()


def test_duplicate_ids_are_refused():
    """Is registering the same id twice an error?"""
    cat = Catalogue()
    cat.add("f.a", hint="x")
    with pytest.raises(ValueError, match="registered twice"):
        cat.add("f.a", hint="y")


def result(name, problem, *diagnoses):
    return TestResult(name=name, problem=problem, score=0, max_score=1, status="failed",
                      diagnoses=diagnoses, hints=tuple(f"hint {d}" for d in diagnoses))


def test_prune_drops_a_diagnosis_seen_only_where_a_broader_one_was():
    """Is a variant that matched only on a special input, alongside the main one, dropped?"""
    tests = (result("t1", "block", "block.post_ln"),
             result("t2", "block", "block.post_ln"),
             result("t3", "block", "block.post_ln", "block.other"),
             result("t4", "mha", "mha.other"))
    pruned = prune_subsumed(tests)
    assert [t.diagnoses for t in pruned] == [("block.post_ln",), ("block.post_ln",), ("block.post_ln",),
                                             ("mha.other",)]
    assert pruned[2].hints == ("hint block.post_ln",)


def test_prune_keeps_diagnoses_that_are_indistinguishable():
    """Are two variants that matched in exactly the same checks both kept?"""
    tests = (result("t1", "f", "f.a", "f.b"), result("t2", "f", "f.a", "f.b"))
    assert prune_subsumed(tests) == tests


def test_a_variant_is_confirmed_once_per_confirmation_input():
    """Is each variant run on the fixed confirmation inputs once per catalogue, however many
    failed checks (and submissions) ask, while the answer still depends on the student?"""
    runs: list[float] = []

    def double(x):
        runs.append(float(np.sum(x)))
        return 2 * x

    cat = Catalogue()
    cat.add("f.double", hint="Doubled.", variant=double)
    cat.confirm_with("f", lambda: [((np.array([1.0, 2.0]),), {})])
    x = np.array([3.0, 4.0])
    for _ in range(3):
        found = cat.match("f", (x,), {}, 2 * x, rtol=1e-7, atol=1e-9, student=lambda i: np.array([2.0, 4.0]))
        assert [m.id for m in found] == ["f.double"]
    assert runs.count(3.0) == 1 and runs.count(7.0) == 3, runs
    assert cat.match("f", (x,), {}, 2 * x, rtol=1e-7, atol=1e-9, student=lambda i: np.array([9.0, 9.0])) == ()


def test_a_shared_helper_runs_once_per_match_on_the_same_inputs():
    """Does a `shared` helper called by several variants on the very same arrays run once within
    one match, again in the next match, and normally outside any match?"""
    cat = Catalogue()
    calls: list[int] = []

    @cat.shared
    def centred(x, axis=-1):
        calls.append(id(x))
        return x - x.mean(axis=axis, keepdims=True)

    cat.add("f.centred", hint="a", variant=lambda x: centred(x))
    cat.add("f.centred_twice", hint="b", variant=lambda x: 2 * centred(x))
    cat.add("f.other_axis", hint="c", variant=lambda x: centred(x, axis=0))
    x = np.arange(6.0).reshape(2, 3)
    found = cat.match("f", (x,), {}, 2 * (x - x.mean(axis=-1, keepdims=True)), rtol=1e-7, atol=1e-9)
    assert [m.id for m in found] == ["f.centred_twice"]
    assert len(calls) == 2, "once for axis=-1, once for axis=0"
    cat.match("f", (x,), {}, x, rtol=1e-7, atol=1e-9)
    assert len(calls) == 4
    np.testing.assert_array_equal(centred(x), x - x.mean(axis=-1, keepdims=True))
    centred(x)
    assert len(calls) == 6


def test_variants_the_students_confirmation_outputs_rule_out_are_not_run_when_those_are_at_hand():
    """Once the student's confirmation outputs are known, is a variant they rule out skipped on a
    check's inputs, with the same matches as when they are not known yet?"""
    runs: list[str] = []

    def variant(name, fn):
        def run(x):
            runs.append(name)
            return fn(x)
        return run

    cat = Catalogue()
    cat.add("f.double", hint="Doubled.", variant=variant("double", lambda x: 2 * x))
    cat.add("f.plus", hint="Shifted.", variant=variant("plus", lambda x: x + 3.0))   # equals 2x at x = 3
    cat.confirm_with("f", lambda: [((np.array([1.0, 2.0]),), {})])
    student_outputs = {0: np.array([2.0, 4.0])}                  # the student doubles

    def student(i):
        return student_outputs[i]

    x = np.array([3.0, 3.0])
    unknown = cat.match("f", (x,), {}, 2 * x, rtol=1e-7, atol=1e-9, student=student)
    student.known = lambda i: i in student_outputs
    runs.clear()
    known = cat.match("f", (x,), {}, 2 * x, rtol=1e-7, atol=1e-9, student=student)
    assert [m.id for m in unknown] == [m.id for m in known] == ["f.double"]
    assert runs == ["double"]                                     # "plus" was ruled out before running
    student.known = lambda i: False
    runs.clear()
    assert cat.match("f", (x,), {}, 2 * x, rtol=1e-7, atol=1e-9, student=student) == known
    assert runs == ["double", "plus"]


def test_a_variant_is_compared_with_the_students_confirmation_outputs_once_per_submission():
    """With a submission's `verdicts`, is each variant compared with the student's confirmation
    outputs once per tolerance, whatever the number of failed checks, with the same matches as
    without them, and decided afresh for another submission?"""
    cat = Catalogue()
    cat.add("f.double", hint="Doubled.", variant=lambda x: 2 * x)
    cat.add("f.plus", hint="Shifted.", variant=lambda x: x + 3.0)        # equals 2x at x = 3
    cat.confirm_with("f", lambda: [((np.array([1.0, 2.0]),), {})])
    asked: list[int] = []

    def doubling_student(i):
        asked.append(i)
        return np.array([2.0, 4.0])

    x = np.array([3.0, 3.0])
    verdicts: dict[tuple[str, float, float], bool] = {}
    without = cat.match("f", (x,), {}, 2 * x, rtol=1e-7, atol=1e-9, student=doubling_student)
    asked.clear()
    for _ in range(3):
        found = cat.match("f", (x,), {}, 2 * x, rtol=1e-7, atol=1e-9, student=doubling_student, verdicts=verdicts)
        assert found == without and [m.id for m in found] == ["f.double"]
    assert len(asked) == 2, "once for each variant that matched the check's inputs, in the first match only"
    assert verdicts == {("f.double", 1e-7, 1e-9): True, ("f.plus", 1e-7, 1e-9): False}
    cat.match("f", (x,), {}, 2 * x, rtol=1e-3, atol=1e-9, student=doubling_student, verdicts=verdicts)
    assert len(asked) == 4, "another tolerance is another verdict"
    shifting = cat.match("f", (x,), {}, 2 * x, rtol=1e-7, atol=1e-9, student=lambda i: np.array([4.0, 5.0]),
                         verdicts={})
    assert [m.id for m in shifting] == ["f.plus"]


def test_with_blocks_only_the_variants_that_take_them_run_on_them():
    """With `blocks`, do only the variants taking those blocks as keyword-only parameters run, with the
    blocks given, on the check's and the confirmation inputs (not their outputs kept for the catalogue),
    their verdicts kept apart from those of the variants as written?"""
    def plus_two(x, *, g=np.negative):
        return g(x) + 2.0

    cat = Catalogue()
    cat.add("f.plus_two", hint="Two.", variant=plus_two)
    cat.add("f.plain", hint="Plain.", variant=lambda x: x + 2.0)     # equal to plus_two on g = identity
    cat.confirm_with("f", lambda: [((np.array([1.0, 2.0]),), {})])
    x = np.array([3.0, 4.0])
    verdicts: dict = {}

    def student(i):
        return np.array([3.0, 4.0])            # the student's f on the confirmation input: g(x) + 2, g = x

    found = cat.match("f", (x,), {}, x + 2.0, rtol=1e-7, atol=1e-9, student=student, verdicts=verdicts,
                      blocks={"g": lambda v: v})
    assert [m.id for m in found] == ["f.plus_two"]
    assert verdicts == {("f.plus_two", 1e-7, 1e-9, "own blocks"): True}
    as_written = cat.match("f", (x,), {}, x + 2.0, rtol=1e-7, atol=1e-9, student=student, verdicts=verdicts)
    assert [m.id for m in as_written] == ["f.plain"], "plus_two on its own g (negation) is -x + 2"
    assert cat.match("f", (x,), {}, x + 2.0, rtol=1e-7, atol=1e-9, student=student, verdicts={},
                     blocks={"g": lambda v: 2 * v}) == ()
