"""The `expect` checks: messages a student can act on, that never show expected values."""
from __future__ import annotations

import numpy as np
import pytest

from autograder.config import Tolerance
from autograder.grading.checks import Expect
from autograder.grading.diagnosis import Catalogue
from autograder.sandbox.outcomes import StudentRaised


def make_expect(catalogue=None, last_call=None) -> Expect:
    return Expect(problem="layer_norm", tolerance_for=lambda dtype: Tolerance(1e-7, 1e-9),
                  catalogue=catalogue, last_call=lambda: last_call)


def failure(fn) -> str:
    with pytest.raises(AssertionError) as info:
        fn()
    return str(info.value)


def test_close_message_counts_and_locates_without_expected_values():
    """Does a failed comparison say how many entries are off and where, but not the expected numbers?"""
    expected = np.arange(12, dtype=float).reshape(3, 4) * 1.2345
    actual = expected.copy()
    actual[1, 2] += 0.5
    msg = failure(lambda: make_expect().close(actual, expected, what="f(x)"))
    assert "f(x) is off in 1 of 12 entries" in msg
    assert "at index (1, 2)" in msg
    for value in expected.ravel()[1:]:
        assert f"{value:.3g}" not in msg.replace("0.5", "")


def test_shape_message_is_plain_english():
    """Does a wrong shape name both shapes in one sentence?"""
    msg = failure(lambda: make_expect().shape(np.zeros((2, 3)), (3, 2), "split_heads(x, 2)"))
    assert msg == "split_heads(x, 2) returned shape (2, 3); expected shape (3, 2)."


def test_non_array_results_are_wrong_answers_with_a_reason():
    """Does returning None or a list say what came back?"""
    assert "None (did you forget a `return`?)" in failure(lambda: make_expect().shape(None, (2,), "f"))
    assert "a list of length 2" in failure(lambda: make_expect().shape([1, 2], (2,), "f"))


def test_close_consults_the_catalogue_and_records_the_mistake():
    """When a numeric check fails, is a matching wrong variant named with its hint?"""
    cat = Catalogue()
    cat.add("layer_norm.doubled", problem="layer_norm", hint="You doubled it.", variant=lambda x: 2 * x)
    cat.add("layer_norm.negated", problem="layer_norm", hint="You negated it.", variant=lambda x: -x)
    x = np.linspace(1, 2, 5)
    ex = make_expect(cat)
    msg = failure(lambda: ex.close(2 * x, x, what="f(x)", call=("layer_norm", (x,), {})))
    assert [m.id for m in ex.found] == ["layer_norm.doubled"]
    assert "You doubled it." not in msg, "hints travel as diagnoses, rendered beside the message"


def test_raises_accepts_the_named_exception_and_diagnoses_a_missing_check():
    """Does expect.raises pass on the right exception, and name the mistake when nothing was raised?"""
    cat = Catalogue()
    cat.add("split_heads.no_value_error", problem="split_heads", hint="Check divisibility.")
    ex = make_expect(cat)
    with ex.raises(ValueError, what="split", diagnose="split_heads.no_value_error"):
        raise StudentRaised("ValueError", "bad", function="split_heads")
    assert not ex.found

    def returns_normally():
        with ex.raises(ValueError, what="split", diagnose="split_heads.no_value_error"):
            pass
    msg = failure(returns_normally)
    assert "returned normally; expected it to raise ValueError" in msg
    assert [m.id for m in ex.found] == ["split_heads.no_value_error"]


def test_raises_does_not_diagnose_an_unfinished_stub():
    """Is NotImplementedError (an unfinished stub) a failure without a named misconception?"""
    cat = Catalogue()
    cat.add("split_heads.no_value_error", problem="split_heads", hint="Check divisibility.")
    ex = make_expect(cat)

    def run():
        with ex.raises(ValueError, what="split", diagnose="split_heads.no_value_error"):
            raise StudentRaised("NotImplementedError", "", function="split_heads")
    assert "raised NotImplementedError; expected ValueError" in failure(run)
    assert not ex.found


def test_equal_hides_the_answer():
    """Does an exact check on a count never print the right count?"""
    msg = failure(lambda: make_expect().equal(49000, 49728, what="count_block_params(64, 256, 'gelu')",
                                              hint="Recount the LayerNorm parameters."))
    assert "49728" not in msg and "49,728" not in msg
    assert "Recount the LayerNorm parameters." in msg


def test_warnings_and_mutation_come_from_the_last_call():
    """Do no_warnings / not_mutated read the proxy's record of the last call?"""
    class Call:
        warnings = ("RuntimeWarning: overflow encountered in exp (cell 4, line 2)",)
        mutated = ("x",)
    ex = make_expect(last_call=Call())
    assert "overflow encountered in exp" in failure(lambda: ex.no_warnings("silu(x)"))
    assert "modified its input in place (x)" in failure(lambda: ex.not_mutated("silu(x)"))
