"""The `expect` checks: messages a student can act on, that never show expected values."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from autograder.config import Tolerance
from autograder.grading.checks import Expect, NotGraded, NotRun, building_blocks
from autograder.grading.diagnosis import LOWER_PRECISION, Catalogue
from autograder.sandbox.outcomes import CallTimeout, FunctionMissing, StudentRaised


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
    cat.add("layer_norm.doubled", hint="You doubled it.", variant=lambda x: 2 * x)
    cat.add("layer_norm.negated", hint="You negated it.", variant=lambda x: -x)
    x = np.linspace(1, 2, 5)
    ex = make_expect(cat)
    msg = failure(lambda: ex.close(2 * x, x, what="f(x)", call=("layer_norm", (x,), {})))
    assert [m.id for m in ex.found] == ["layer_norm.doubled"]
    assert "You doubled it." not in msg, "hints travel as diagnoses, rendered beside the message"


def test_raises_accepts_the_named_exception_and_diagnoses_a_missing_check():
    """Does expect.raises pass on the right exception, and name the mistake when nothing was raised?"""
    cat = Catalogue()
    cat.add("split_heads.no_value_error", hint="Check divisibility.")
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


def test_raises_gives_the_message_of_the_exception_it_caught():
    """Does the block's value hold the student's message once the expected exception is raised, and
    nothing before?"""
    ex = make_expect()
    with ex.raises(ValueError, what="split") as raised:
        assert raised.message == ""
        raise StudentRaised("ValueError", "d_model = 10 is not divisible by n_heads = 4", function="split_heads")
    assert raised.message == "d_model = 10 is not divisible by n_heads = 4"
    assert raised.type_name == "ValueError"


def test_raises_passes_a_tolerated_type_with_its_message_and_still_asks_for_the_expected_one():
    """With AssertionError tolerated, does an assert's error pass the block with its type and message, while
    another type fails it, named as the mistake and told that ValueError (alone) is expected?"""
    cat = Catalogue()
    cat.add("split_heads.no_value_error", hint="Check divisibility.")
    ex = make_expect(cat)
    with ex.raises(ValueError, what="split", tolerate=(AssertionError,)) as raised:
        raise StudentRaised("AssertionError", "d_model must be divisible by n_heads", function="split_heads")
    assert (raised.type_name, raised.message) == ("AssertionError", "d_model must be divisible by n_heads")
    assert not ex.found

    def raises_type_error():
        with ex.raises(ValueError, what="split", diagnose="split_heads.no_value_error", tolerate=(AssertionError,)):
            raise StudentRaised("TypeError", "d_model must be divisible by n_heads", function="split_heads")
    assert failure(raises_type_error) == "split raised TypeError; expected ValueError."
    assert [m.id for m in ex.found] == ["split_heads.no_value_error"]


def test_raises_does_not_diagnose_an_unfinished_stub():
    """Is NotImplementedError (an unfinished stub) a failure without a named misconception?"""
    cat = Catalogue()
    cat.add("split_heads.no_value_error", hint="Check divisibility.")
    ex = make_expect(cat)

    def run():
        with ex.raises(ValueError, what="split", diagnose="split_heads.no_value_error"):
            raise StudentRaised("NotImplementedError", "", function="split_heads")
    assert "raised NotImplementedError; expected ValueError" in failure(run)
    assert not ex.found


def test_raises_does_not_diagnose_a_stub_that_returns_none():
    """A body that is just `pass` returns None: is that a failure saying so, without a named
    misconception, while a function that returns an array still gets the mistake named?"""
    cat = Catalogue()
    cat.add("split_heads.no_value_error", hint="Check divisibility.")
    answers: list = [SimpleNamespace(value=np.zeros(3))]       # an earlier call of the same check
    ex = Expect(problem="split_heads", tolerance_for=lambda dtype: Tolerance(1e-7, 1e-9), catalogue=cat,
                last_call=lambda: answers[-1])

    def answering(value):
        def run():
            with ex.raises(ValueError, what="split", diagnose="split_heads.no_value_error"):
                answers.append(SimpleNamespace(value=value))          # the call made in the block
        return run
    assert "split returned None; expected it to raise ValueError." in failure(answering(None))
    assert not ex.found
    assert "returned normally; expected it to raise ValueError" in failure(answering(np.zeros((2, 3))))
    assert [m.id for m in ex.found] == ["split_heads.no_value_error"]


def test_dtype_gives_the_float_precision_advice_between_float_dtypes():
    """Is a float64 answer where float32 is expected told how float32 precision is lost?"""
    assert "keep the input's precision" in failure(lambda: make_expect().dtype(np.zeros(2), np.float32, "f(x)"))


@pytest.mark.parametrize("out, expected", [(np.zeros(2), np.bool_), (np.ones(2, dtype=np.int64), np.bool_),
                                           (np.zeros(2), np.int64)], ids=["float-for-bool", "int-for-bool",
                                                                          "float-for-int"])
def test_dtype_names_only_the_two_dtypes_when_one_is_not_a_float(out, expected):
    """Is a bool or int check told the two dtypes alone, not advice about float32 that has nothing to do with it?"""
    msg = failure(lambda: make_expect().dtype(out, expected, "mask(4)"))
    assert msg == f"mask(4) returned dtype {out.dtype}; expected {np.dtype(expected)}.", msg
    make_expect().dtype(np.ones(2, dtype=expected), expected, "mask(4)")


def test_equal_hides_the_answer():
    """Does an exact check on a count never print the right count?"""
    msg = failure(lambda: make_expect().equal(49000, 49728, what="count_block_params(64, 256, 'gelu')",
                                              hint="Recount the LayerNorm parameters."))
    assert "49728" not in msg and "49,728" not in msg
    assert "Recount the LayerNorm parameters." in msg


def test_equal_shows_the_students_count_for_public_inputs_and_both_for_published_ones():
    """For a call whose arguments are public, does a failure show the student's own count (not the
    right one); for a call the notebook prints with its answer, both; for hidden inputs, neither?"""
    what = "count_block_params(64, 256, 'gelu', 'layernorm')"
    published = failure(lambda: make_expect().equal(np.int64(49600), 49728, what=what, inputs="published"))
    assert published == f"{what} returned 49,600; expected 49,728, as the notebook says.", published
    public = failure(lambda: make_expect().equal(1_063_424.0, 3_150_336, what=what, inputs="public"))
    assert public == f"{what} returned 1,063,424.0, which is not right.", public
    assert "3,150,336" not in public and "3150336" not in public
    hidden = failure(lambda: make_expect().equal(1234, 5678, what="count_block_params(d_model, d_ff, 'gelu')"))
    assert "1234" not in hidden and "1,234" not in hidden and "5,678" not in hidden and "5678" not in hidden
    assert failure(lambda: make_expect().equal(12.5, 12, what=what, inputs="public")).endswith("returned 12.5, "
                                                                                           "which is not right.")


def test_warnings_and_mutation_come_from_the_last_call():
    """Do no_warnings / not_mutated read the proxy's record of the last call?"""
    class Call:
        warnings = ("RuntimeWarning: overflow encountered in exp (cell 4, line 2)",)
        mutated = ("x",)
    ex = make_expect(last_call=Call())
    assert "overflow encountered in exp" in failure(lambda: ex.no_warnings("silu(x)"))
    assert "modified its input in place (x)" in failure(lambda: ex.not_mutated("silu(x)"))


def test_the_advice_on_an_argument_changed_in_place_fits_a_function_with_no_mean():
    """Does the advice shown for silu name no operation of layer_norm's (a mean) as its example?"""
    class Call:
        warnings = ()
        mutated = ("x",)
    advice = failure(lambda: make_expect(last_call=Call()).not_mutated("silu(x)"))
    assert "in place (x)" in advice and "mean" not in advice, advice


# --------------------------------------------------------------------------- the reference wiring

def _double(x):
    return 2.0 * x


def _double_plus_one(x, *, double=_double):
    """A composite: its building block `double` is a keyword-only parameter."""
    return double(x) + 1.0


REFERENCE = SimpleNamespace(double=_double, double_plus_one=_double_plus_one)


class FakeStudent:
    """Stands for the proxy: functions by name, each a plain callable with its name."""

    last_call = None

    def __init__(self, **functions):
        self._functions = functions

    def __getattr__(self, name):
        fn = self._functions[name]
        fn.__name__ = name
        return fn


def raising(name):
    def fn(*args, **kwargs):
        raise StudentRaised("NotImplementedError", "", function=name)
    return fn


def wired_expect(catalogue=None, **functions) -> Expect:
    return Expect(problem="double_plus_one", tolerance_for=lambda dtype: Tolerance(1e-7, 1e-9),
                  catalogue=catalogue, last_call=lambda: None, student=FakeStudent(**functions),
                  reference=REFERENCE)


X = np.linspace(-1.0, 1.0, 7)


def test_building_blocks_are_the_keyword_only_parameters():
    """Are a composite's building blocks read from its reference's keyword-only parameters?"""
    assert building_blocks(_double_plus_one) == ("double",)
    assert building_blocks(_double) == ()


def test_matches_reference_accepts_the_reference_answer():
    """Does a composite that gives the reference's answer pass, and return the student's value?"""
    ex = wired_expect(double=lambda x: 3 * x, double_plus_one=lambda x: 2 * x + 1)
    assert np.array_equal(ex.matches_reference(ex.student.double_plus_one, (X,), what="f"), 2 * X + 1)
    assert [c.function for c in ex.calls] == ["double_plus_one"], "the call is recorded with its result"


def test_matches_reference_refuses_float64_inputs_answered_in_float32():
    """An answer rounded to float32 can sit within float64's tolerance: does a float32 result for
    float64 inputs still fail, naming the dtype, while float32 inputs answered in float32 pass?"""
    ex = wired_expect(double=_double, double_plus_one=lambda x: (2 * x + 1).astype(np.float32))
    msg = failure(lambda: ex.matches_reference(ex.student.double_plus_one, (X + 1e-9,), what="f(x)"))
    assert "f(x) returned dtype float32; expected float64" in msg
    out = ex.matches_reference(ex.student.double_plus_one, (X.astype(np.float32),), what="f(x)")
    assert out.dtype == np.float32


def _mean_square(x):
    """A reference that returns a Python float, as a loss does."""
    return float(np.mean(x * x))


def scalar_expect(answer) -> Expect:
    return Expect(problem="mean_square", tolerance_for=lambda dtype: Tolerance(1e-7, 1e-9), catalogue=None,
                  last_call=lambda: None, student=FakeStudent(mean_square=answer),
                  reference=SimpleNamespace(mean_square=_mean_square))


@pytest.mark.parametrize("kind", [float, np.float64, np.asarray], ids=["float", "np.float64", "0-d array"])
def test_matches_reference_accepts_a_number_where_the_reference_returns_one(kind):
    """When the reference returns a number, does the same number from the student pass, as a Python
    float, a numpy scalar or a 0-d array, and come back as the student gave it?"""
    ex = scalar_expect(lambda x: kind(np.mean(x * x)))
    out = ex.matches_reference(ex.student.mean_square, (X,), what="mean_square(x)")
    assert type(out) is type(kind(1.0)) and out == _mean_square(X)


def test_matches_reference_says_a_wrong_number_is_off_rather_than_not_an_array():
    """Is a wrong number, where the reference returns one, told it is off, not that it is no array?"""
    ex = scalar_expect(lambda x: float(np.sum(x * x)))
    msg = failure(lambda: ex.matches_reference(ex.student.mean_square, (X,), what="mean_square(x)"))
    assert msg.startswith("mean_square(x) is off") and "numpy array" not in msg, msg


def test_a_single_number_off_is_told_without_entries_or_index():
    """Is a wrong number told it is off, with its error, and not 'off in 1 of 1 entries ... at index ()'?"""
    msg = failure(lambda: make_expect().close(3.5, 2.5, what="loss(x)"))
    assert msg == "loss(x) is off (tolerance rtol=1e-07, atol=1e-09). Absolute error 1; relative error 0.4.", msg
    msg = failure(lambda: make_expect().close(float("nan"), 2.5, what="loss(x)"))
    assert msg == "loss(x) is off (tolerance rtol=1e-07, atol=1e-09). It is NaN or infinite.", msg


@pytest.mark.parametrize("wrong, said", [([0.5], "a list of length 1"), (True, "a bool"), ("0.5", "a str"),
                                         (None, "None (did you forget a `return`?)")],
                         ids=["list", "bool", "str", "None"])
def test_matches_reference_says_a_number_is_expected_when_no_number_came_back(wrong, said):
    """Where the reference returns a number, is a list, a bool, a str or None told what came back
    and that a number, not an array, is expected?"""
    ex = scalar_expect(lambda x: wrong)
    msg = failure(lambda: ex.matches_reference(ex.student.mean_square, (X,), what="mean_square(x)"))
    assert msg == f"mean_square(x) returned {said}; expected a number.", msg


def test_matches_reference_says_a_bool_is_expected_where_the_reference_returns_one():
    """Where the reference returns a bool, is a number told that a bool is expected?"""
    ex = Expect(problem="is_small", tolerance_for=lambda dtype: Tolerance(1e-7, 1e-9), catalogue=None,
                last_call=lambda: None, student=FakeStudent(is_small=lambda x: 1),
                reference=SimpleNamespace(is_small=lambda x: bool(np.all(np.abs(x) <= 1))))
    msg = failure(lambda: ex.matches_reference(ex.student.is_small, (X,), what="is_small(x)"))
    assert msg == "is_small(x) returned an int; expected a bool (True or False).", msg


@pytest.mark.parametrize("big", [2**64, -2**70, 2**4000], ids=["2**64", "-2**70", "2**4000"])
def test_matches_reference_fails_an_integer_too_large_for_numpy_plainly(big):
    """Where the reference returns a number, is a Python int that no numpy integer holds (the sandbox
    passes ints of up to 4096 bits) a plain failure saying so, not an error of the check itself?
    And is expect.close, given such an int for a single number, the same, while an int just below
    2**64 is still compared?"""
    ex = scalar_expect(lambda x: big)
    msg = failure(lambda: ex.matches_reference(ex.student.mean_square, (X,), what="mean_square(x)"))
    said = "returned an integer too large for a numpy number (numpy's integers have 64 bits); expected a number."
    assert msg == f"mean_square(x) {said}", msg
    msg = failure(lambda: make_expect().close(big, 2.5, what="loss(x)"))
    assert msg == f"loss(x) {said}", msg
    ex = scalar_expect(lambda x: 2**64 - 1)        # numpy holds it, as a uint64: compared as a number
    msg = failure(lambda: ex.matches_reference(ex.student.mean_square, (X,), what="mean_square(x)"))
    assert msg.startswith("mean_square(x) is off (tolerance"), msg


@pytest.mark.parametrize("value, said", [(float("nan"), "is NaN"), (float("-inf"), "is infinite")],
                         ids=["nan", "-inf"])
def test_a_single_number_not_finite_is_told_without_entries_or_index(value, said):
    """Is a NaN or infinite number, where the reference returns a number, told so in words for one
    number, not as '1 NaN or infinite entries (first at index ())'?"""
    advice = ("; look for overflow in exp, a division by zero, or a softmax over entries that are all -inf "
              "(every one masked).")
    msg = failure(lambda: make_expect().finite(np.asarray(value), "loss(x)"))
    assert msg == f"loss(x) {said}{advice}", msg
    ex = scalar_expect(lambda x: value)
    msg = failure(lambda: ex.matches_reference(ex.student.mean_square, (X,), what="mean_square(x)"))
    assert msg == f"mean_square(x) {said}{advice}", msg


def test_matches_reference_accepts_the_wiring_of_the_students_own_blocks():
    """With a wrong building block, does a correctly wired composite keep its points?"""
    ex = wired_expect(double=lambda x: 3 * x, double_plus_one=lambda x: 3 * x + 1)
    ex.matches_reference(ex.student.double_plus_one, (X,), what="f")


def test_matches_reference_charges_a_wiring_mistake_on_top_of_a_wrong_block():
    """Does a mis-wired composite still fail when its building block is wrong too, naming the mistake?"""
    cat = Catalogue()
    cat.add("double_plus_one.plus_two", hint="One, not two.",
            variant=lambda x: 2 * x + 2)
    ex = wired_expect(cat, double=lambda x: 3 * x, double_plus_one=lambda x: 2 * x + 2)
    msg = failure(lambda: ex.matches_reference(ex.student.double_plus_one, (X,), what="f(x)"))
    assert "f(x) is off in 7 of 7 entries" in msg
    assert [m.id for m in ex.found] == ["double_plus_one.plus_two"]


def _plus_two(x, *, double=_double):
    """A wiring mistake of double_plus_one that takes its building block, as the reference does."""
    return double(x) + 2.0


def test_a_wiring_mistake_on_top_of_a_wrong_block_is_named_from_the_students_own_block():
    """A composite that adds two to its own wrong double (3x + 2) matches neither the reference, nor the
    wiring of its blocks, nor the variant on the reference's double (2x + 2): is the variant run on the
    student's own double, named, and confirmed on the confirmation inputs through that double as well?"""
    cat = Catalogue()
    cat.add("double_plus_one.plus_two", hint="One, not two.", variant=_plus_two)
    cat.confirm_with("double_plus_one", lambda: [((np.array([0.5, 3.0]),), {})])
    doubled: list[int] = []

    def double(x):
        doubled.append(x.size)
        return 3 * x
    ex = wired_expect(cat, double=double, double_plus_one=lambda x: 3 * x + 2)
    failure(lambda: ex.matches_reference(ex.student.double_plus_one, (X,), what="f(x)"))
    assert [m.id for m in ex.found] == ["double_plus_one.plus_two"]
    assert 2 in doubled, "the variant ran on the student's double on the confirmation input"
    assert ex.verdicts == {("double_plus_one.plus_two", 1e-6, 1e-8, "own blocks"): True}


def test_a_composite_mistake_no_variant_explains_on_the_students_blocks_is_not_named():
    """Is a composite wrong in another way (3x + 5 on its own 3x) named nothing, and a variant that does
    not take the building blocks never run on the student's own?"""
    cat = Catalogue()
    cat.add("double_plus_one.plus_two", hint="One, not two.", variant=_plus_two)
    cat.add("double_plus_one.plus_five", hint="Five.", variant=lambda x: 3 * x + 5)   # no blocks: as written only
    cat.confirm_with("double_plus_one", lambda: [((np.array([0.5, 3.0]),), {})])
    ex = wired_expect(cat, double=lambda x: 3 * x, double_plus_one=lambda x: 3 * x + 5.5)
    failure(lambda: ex.matches_reference(ex.student.double_plus_one, (X,), what="f(x)"))
    assert ex.found == []
    ex = wired_expect(cat, double=lambda x: 3 * x, double_plus_one=lambda x: 3 * x + 5)
    failure(lambda: ex.matches_reference(ex.student.double_plus_one, (X,), what="f(x)"))
    assert [m.id for m in ex.found] == ["double_plus_one.plus_five"], "matched as written, where it applies"


class ProcessStudent(FakeStudent):
    """A FakeStudent whose functions share `state` (as a notebook's globals), with `call_alone` as
    the proxy's: the call made on a fresh copy of the state the notebook left (`initial`)."""

    def __init__(self, state, **functions):
        super().__init__(**functions)
        self.state, self.initial, self.alone = state, dict(state), []

    def call_alone(self, name, args, kwargs):
        kept = dict(self.state)
        self.state.clear()
        self.state.update(self.initial)
        try:
            self.alone.append(name)
            return self._functions[name](*args, **kwargs)
        finally:
            self.state.clear()
            self.state.update(kept)


def process_expect(state, **functions) -> Expect:
    ex = wired_expect(**functions)
    ex.student = ProcessStudent(state, **functions)
    return ex


def test_a_wrong_block_that_depends_on_its_input_alone_stands_in_for_the_reference():
    """Is a correctly wired composite on a wrong block accepted after its block calls were made again
    alone (same answer) and on a changed input (another answer), and is that verdict kept?"""
    ex = process_expect({}, double=lambda x: 3 * x, double_plus_one=lambda x: 3 * x + 1)
    ex.matches_reference(ex.student.double_plus_one, (X,), what="f")
    assert ex.student.alone == ["double", "double"] and ex.wirings == {"double_plus_one": True}
    ex.matches_reference(ex.student.double_plus_one, (X + 1,), what="f")
    assert ex.student.alone == ["double", "double"], "checked once per composite and submission"


def _pattern(x):
    """Values of an ordinary size that do not depend on x's values."""
    return np.arange(x.size, dtype=float).reshape(x.shape) - x.size / 2


def test_a_block_answering_zeros_or_one_number_cannot_stand_in_for_the_reference():
    """When a block returns zeros (or one number) whatever its input, is a composite agreeing with that
    wiring not graded, naming what the block gives, before any call is made again?"""
    for block, said in ((lambda x: 0 * x, "gives the same number (0) everywhere"),
                        (lambda x: 0 * x + 7, "gives the same number (7) everywhere")):
        ex = process_expect({}, double=block, double_plus_one=lambda x, b=block: b(x) + 1)
        with pytest.raises(NotGraded) as info:
            ex.matches_reference(ex.student.double_plus_one, (X,), what="f")
        assert info.value.block == "double" and f"`double`, which {said} in the composite's wiring" \
            in info.value.feedback
        assert ex.student.alone == [] and not ex.wirings


def test_a_block_that_ignores_its_input_cannot_stand_in_for_the_reference():
    """When a block returns values of an ordinary size whatever its input, is a composite agreeing with
    that wiring not graded?"""
    ex = process_expect({}, double=_pattern, double_plus_one=lambda x: _pattern(x) + 1)
    with pytest.raises(NotGraded) as info:
        ex.matches_reference(ex.student.double_plus_one, (X,), what="f")
    assert info.value.block == "double"
    assert "`double`, which gives the very same answer for a different input" in info.value.feedback
    with pytest.raises(NotGraded):                       # tested again on the next check, and refused again
        ex.matches_reference(ex.student.double_plus_one, (X + 1,), what="f")
    assert ex.student.alone == ["double"] * 4 and not ex.wirings


def test_a_block_that_changes_once_the_composite_ran_cannot_stand_in_for_the_reference():
    """When a block is right until the composite has run and then returns zeros, is the composite's
    agreement with the wiring built after its call not graded?"""
    state = {"composite_ran": False}

    def double(x):
        return _pattern(x) if state["composite_ran"] else 2 * x

    def double_plus_one(x):
        state["composite_ran"] = True
        return _pattern(x) + 1

    ex = process_expect(state, double=double, double_plus_one=double_plus_one)
    with pytest.raises(NotGraded) as info:
        ex.matches_reference(ex.student.double_plus_one, (X,), what="f")
    assert "gave another answer when called again on the same input in a fresh copy" in info.value.feedback


def test_a_composite_whose_block_fails_is_not_graded():
    """When the composite raises and its building block fails on its inputs, is the check not graded, naming it?"""
    ex = wired_expect(double=raising("double"), double_plus_one=raising("double_plus_one"))
    with pytest.raises(NotGraded) as info:
        ex.matches_reference(ex.student.double_plus_one, (X,), what="f")
    assert info.value.block == "double"
    assert info.value.feedback.startswith("Not graded: this check needs your `double`, which failed")


def test_a_composite_whose_block_is_missing_quotes_it_without_nested_brackets():
    """When the building block is not defined in the notebook, does the not-graded message quote why in one
    pair of brackets, with none inside it?"""
    def missing(*args, **kwargs):
        raise FunctionMissing("double")

    ex = wired_expect(double=missing, double_plus_one=raising("double_plus_one"))
    with pytest.raises(NotGraded) as info:
        ex.matches_reference(ex.student.double_plus_one, (X,), what="f")
    assert info.value.feedback == ("Not graded: this check needs your `double`, which failed on its inputs "
                                   "(`double` is not defined in your notebook; perhaps it was renamed, or its "
                                   "cell failed). It earns no points until `double` works on them.")


def test_a_block_that_returns_an_unusable_value_makes_the_check_not_graded():
    """Is a building block returning the wrong shape treated as failed, when the composite is wrong too?"""
    ex = wired_expect(double=lambda x: x[:2], double_plus_one=lambda x: 0 * x)
    with pytest.raises(NotGraded, match="returned an array of shape"):
        ex.matches_reference(ex.student.double_plus_one, (X,), what="f")


def timing_out(name, *, called=True):
    def fn(*args, **kwargs):
        exc = CallTimeout(5, name)
        exc.called = called
        raise exc
    return fn


def not_run_reason(ex: Expect) -> str:
    with pytest.raises(NotRun) as info:
        ex.call_or_not_run(ex.student.double_plus_one, X)
    return info.value.reason


def test_a_composite_that_times_out_names_the_block_that_timed_out_on_the_same_inputs():
    """When the composite did not return in time and its building block, called by the reference wiring on
    the check's inputs, did not either, does the check not run say so, naming the block?"""
    ex = wired_expect(double=timing_out("double"), double_plus_one=timing_out("double_plus_one"))
    assert not_run_reason(ex) == ("`double_plus_one` did not return in time, and neither did `double`, which it "
                                  "calls, on this check's inputs")


def test_a_composite_that_times_out_names_a_block_no_longer_called_after_timeouts():
    """When the block is no longer called because it timed out before, is that what the reason says of it?"""
    ex = wired_expect(double=timing_out("double", called=False), double_plus_one=timing_out("double_plus_one"))
    assert not_run_reason(ex) == ("`double_plus_one` did not return in time, and `double`, which it calls, "
                                  "had timed out before")


def test_a_call_that_times_out_while_its_blocks_work_does_not_claim_it_was_itself_slow():
    """The student's function may call their other functions inside the sandbox, out of the grader's sight:
    when nothing says which was slow, is the reason "(or a function it calls)"?"""
    ex = wired_expect(double=lambda x: 2 * x, double_plus_one=timing_out("double_plus_one"))
    assert not_run_reason(ex) == "`double_plus_one` (or a function it calls) did not return in time"
    again = wired_expect(double=lambda x: 2 * x, double_plus_one=timing_out("double_plus_one", called=False))
    assert not_run_reason(again) == ("`double_plus_one` was not called again, having timed out before (it, or a "
                                     "function it calls)")


def test_a_composite_that_raises_on_its_own_fails_with_its_own_error():
    """With working building blocks, does the composite's own exception fail the check as usual?"""
    ex = wired_expect(double=lambda x: 2 * x, double_plus_one=raising("double_plus_one"))
    with pytest.raises(StudentRaised):
        ex.matches_reference(ex.student.double_plus_one, (X,), what="f")


def test_a_property_failure_is_excused_only_when_the_wiring_matches():
    """Is a failed property check of a composite excused exactly when its calls equal the wiring of its own blocks?"""
    def check(composite):
        ex = wired_expect(double=lambda x: 3 * x, double_plus_one=composite)
        out = ex.call(ex.student.double_plus_one, X)
        with ex.excused_if_wired_right():
            ex.close(out, 2 * X + 1, what="f")

    check(lambda x: 3 * x + 1)                        # wired like the reference, on a wrong block: excused
    failure(lambda: check(lambda x: 3 * x + 5))       # mis-wired: the property failure stands


def test_a_property_a_wrong_block_breaks_is_excused_though_the_composite_has_its_own_mistake():
    """With `holds`, is a property failure excused when the wiring of the composite's own blocks breaks the
    property too (even though the composite is wrong in its own way), and does it stand when the wiring keeps
    it? The property: shifting x by 1 moves the answer by exactly 2."""
    def check(block, composite):
        ex = wired_expect(double=block, double_plus_one=composite)
        out, out_shifted = ex.call(ex.student.double_plus_one, X), ex.call(ex.student.double_plus_one, X + 1)

        def moves_by_two(a, b):
            ex.close(b - a, np.full_like(X, 2.0), what="f shifted")
        with ex.excused_if_wired_right(holds=moves_by_two):
            moves_by_two(out, out_shifted)

    check(lambda x: x ** 2, lambda x: x ** 2 + 5)            # the block breaks it: excused (the +5 is a value mistake)
    check(lambda x: x ** 2, lambda x: 3 * x + 1)             # so does the block, whatever the composite does with it
    failure(lambda: check(lambda x: 2 * x, lambda x: x ** 2 + 1))     # the block keeps it: the composite's failure
    failure(lambda: check(lambda x: 2 * x, lambda x: 3 * x + 1))


def test_excuse_needs_the_same_dtype():
    """Is a dtype failure excused only when the student's own blocks give that dtype too?"""
    x32 = X.astype(np.float32)
    ex = wired_expect(double=lambda x: 2 * x.astype(np.float64), double_plus_one=lambda x: 2 * x.astype(np.float64) + 1)
    out = ex.call(ex.student.double_plus_one, x32)
    with ex.excused_if_wired_right():
        ex.dtype(out, np.float32, "f")
    ex = wired_expect(double=lambda x: 2 * x, double_plus_one=lambda x: 2 * x.astype(np.float64) + 1)
    out = ex.call(ex.student.double_plus_one, x32)
    with pytest.raises(AssertionError), ex.excused_if_wired_right():
        ex.dtype(out, np.float32, "f")


def test_a_property_check_not_graded_for_its_block_names_no_mistake_of_the_composite():
    """When a property check of a composite ends not graded because a building block fails on its inputs,
    is a mistake recorded inside the check (float32 upcast) dropped, as for a value check not graded?"""
    cat = Catalogue()
    cat.add("general.float32_upcast", hint="A float64 constant upcast float32.")
    x32 = X.astype(np.float32)
    ex = wired_expect(cat, double=lambda x: list(2 * x), double_plus_one=lambda x: 2 * x.astype(np.float64) + 1)
    out = ex.call(ex.student.double_plus_one, x32)
    with pytest.raises(NotGraded, match="needs your `double`"), ex.excused_if_wired_right():
        ex.diagnose("general.float32_upcast")
        ex.dtype(out, np.float32, "f")
    assert ex.found == []


def test_where_the_wrong_entries_sit_is_said_only_when_they_are_confined():
    """Is a row or two of wrong entries located ('only at ...'), and nothing said when nearly every
    position along an axis is wrong, where 'only' would tell the student nothing?"""
    from autograder.grading.checks import _where_pattern

    bad = np.zeros((16, 4), dtype=bool)
    bad[3] = True
    assert _where_pattern(bad) == "Wrong entries only at axis -2 positions 3."
    bad[:9] = True
    assert _where_pattern(bad) == ""
    wide = np.zeros((40, 2), dtype=bool)
    wide[[1, 3, 5, 7, 9, 11, 13], 0] = True
    assert _where_pattern(wide) == ("Wrong entries only at axis -2 positions 1, 3, 5, 7, 9, 11 and more; "
                                    "axis -1 positions 0.")


# --------------------------------------------------------------------------- computed in lower precision

def _smooth(x, scale):
    """A reference whose answer moves with every digit of x."""
    return np.sin(3.0 * x) * scale


SMOOTH = SimpleNamespace(smooth=_smooth)


def precision_expect(student_fn, *, registered=True) -> tuple[Expect, Catalogue]:
    cat = Catalogue()
    if registered:
        cat.add(LOWER_PRECISION, hint="You computed in float32.")
    cat.add("smooth.stage", hint="A stage is off.", stage=True)
    cat.probe("smooth")(lambda context: iter(["smooth.stage"]))
    tolerances = {np.dtype(np.float64): Tolerance(1e-7, 1e-9), np.dtype(np.float32): Tolerance(1e-4, 1e-5)}
    ex = Expect(problem="smooth", tolerance_for=lambda dtype: tolerances[np.dtype(dtype)], catalogue=cat,
                last_call=lambda: None, student=FakeStudent(smooth=student_fn), reference=SMOOTH)
    return ex, cat


def _in_float32(x, scale):
    return np.sin(3.0 * x.astype(np.float32)) * scale        # float64 again through `scale`


def test_a_function_computed_in_float32_is_named_so_before_any_probe():
    """Is a function that casts its float64 input to float32 named as computed in lower precision, and
    not localised to a stage by the probe?"""
    ex, _ = precision_expect(_in_float32)
    x = np.linspace(-2.0, 2.0, 40) + 1e-3
    failure(lambda: ex.matches_reference(ex.student.smooth, (x, np.float64(1.5)), what="smooth(x)"))
    assert [m.id for m in ex.found] == [LOWER_PRECISION]


def test_an_error_of_float32_size_made_in_float64_is_not_taken_for_lower_precision():
    """A float64 function off by about float32's rounding still sees every digit of x: is it left to
    the probe?"""
    ex, _ = precision_expect(lambda x, scale: _smooth(x, scale) * (1.0 + 1e-6))
    x = np.linspace(-2.0, 2.0, 40) + 1e-3
    failure(lambda: ex.matches_reference(ex.student.smooth, (x, np.float64(1.5)), what="smooth(x)"))
    assert [m.id for m in ex.found] == ["smooth.stage"]


def test_a_bigger_mistake_made_in_float32_is_not_hidden_behind_the_precision():
    """Is a function computed in float32 that is also wrong by far more than float32's rounding left to
    the probe?"""
    ex, _ = precision_expect(lambda x, scale: _in_float32(x, scale) + 1e-2)
    x = np.linspace(-2.0, 2.0, 40) + 1e-3
    failure(lambda: ex.matches_reference(ex.student.smooth, (x, np.float64(1.5)), what="smooth(x)"))
    assert [m.id for m in ex.found] == ["smooth.stage"]


def test_lower_precision_is_recognised_only_when_the_catalogue_registers_it():
    """Without LOWER_PRECISION in the catalogue (no hint for it), does diagnosis go on as before?"""
    ex, _ = precision_expect(_in_float32, registered=False)
    x = np.linspace(-2.0, 2.0, 40) + 1e-3
    failure(lambda: ex.matches_reference(ex.student.smooth, (x, np.float64(1.5)), what="smooth(x)"))
    assert [m.id for m in ex.found] == ["smooth.stage"]


def test_not_finite_message_names_a_softmax_whose_entries_are_all_masked():
    """Does the NaN message name the usual causes, a softmax over entries that are all -inf among them?"""
    msg = failure(lambda: make_expect().finite(np.array([1.0, np.nan]), "f(x)"))
    assert msg == ("f(x) has 1 NaN or infinite entries (first at index (1,)); look for overflow in exp, a "
                   "division by zero, or a softmax over entries that are all -inf (every one masked).")


def test_a_block_answering_almost_nothing_cannot_stand_in_for_the_reference():
    """When a block returns 1e-30 times its answer, is a composite that returns what the wiring gives
    with almost nothing for the block (agreeing within the tolerance, not exactly) not graded?"""
    ex = process_expect({}, double=lambda x: 1e-30 * x, double_plus_one=lambda x: 0 * x + 1)
    with pytest.raises(NotGraded) as info:
        ex.matches_reference(ex.student.double_plus_one, (X,), what="f")
    assert info.value.block == "double"
    assert "`double`, which gives answers about 5e-31 times the size they should have" in info.value.feedback
    assert not ex.wirings


def test_nan_from_a_block_counts_only_where_the_reference_is_not_finite():
    """Is a composite giving NaN where the wiring of its own blocks does not graded (naming the block)
    when the reference has a number there, and does it still pass where the reference is not finite?"""
    def double(x):
        out = 2 * np.asarray(x, dtype=float)
        out[0] = np.nan
        return out

    def double_plus_one(x):
        return double(x) + 1

    ex = process_expect({}, double=double, double_plus_one=double_plus_one)
    with pytest.raises(NotGraded) as info:
        ex.matches_reference(ex.student.double_plus_one, (X,), what="f")
    assert info.value.block == "double" and "NaN or infinite values" in info.value.feedback
    assert not ex.wirings
    x = X.copy()
    x[0] = np.nan                                       # the reference gives NaN there too
    ex = process_expect({}, double=double, double_plus_one=double_plus_one)
    ex.matches_reference(ex.student.double_plus_one, (x,), what="f")


def test_a_wiring_whose_answer_turns_nan_on_a_changed_input_is_not_trusted():
    """When the blocks give NaN only on inputs other than the check's own, is the wiring not trusted?"""
    seen = {}

    def double(x):
        key = np.asarray(x).tobytes()
        seen.setdefault(key, len(seen))
        out = 3 * np.asarray(x, dtype=float)
        if seen[key] > 0:
            out[:] = np.nan
        return out

    ex = process_expect({}, double=double, double_plus_one=lambda x: 3 * x + 1)
    with pytest.raises(NotGraded) as info:
        ex.matches_reference(ex.student.double_plus_one, (X,), what="f")
    assert "NaN or infinite values where the reference has numbers" in info.value.feedback
