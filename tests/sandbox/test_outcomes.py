"""What a sandbox run's outcomes say to the student."""
from __future__ import annotations


def test_a_cell_that_imports_a_module_grading_lacks_says_so():
    """Does a cell stopped by ModuleNotFoundError (scipy, installed in the student's Jupyter but not where
    notebooks are graded) say that the module is missing there, and other errors keep their sentence?"""
    from autograder.sandbox.outcomes import CellOutcome

    missing = CellOutcome(3, "error", error_type="ModuleNotFoundError", message="No module named 'scipy'",
                          where="line 1: `from scipy.special import expit`", label="the 4th code cell (`from scipy`)")
    assert missing.note == ("The 4th code cell (`from scipy`) raised ModuleNotFoundError: No module named 'scipy' "
                            "(line 1: `from scipy.special import expit`); that module is not installed where "
                            "notebooks are graded: write it with numpy")
    other = CellOutcome(3, "error", error_type="NameError", message="name 'x' is not defined", label="cell 4")
    assert other.note == "Cell 4 raised NameError: name 'x' is not defined"


def test_a_missing_function_says_so_in_one_sentence_without_brackets():
    """Is a function missing from the notebook one sentence with no brackets, so that the checks that quote
    it in theirs ("which failed on its inputs (...)") never nest one pair inside another?"""
    from autograder.sandbox.outcomes import FunctionMissing

    feedback = FunctionMissing("split_heads").feedback
    assert feedback == "`split_heads` is not defined in your notebook; perhaps it was renamed, or its cell failed."
    assert "(" not in feedback and ")" not in feedback
    for magic in ("%%timeit", "%%bash"):
        feedback = FunctionMissing("split_heads", magic, "the 3rd code cell").feedback
        assert feedback.startswith("`split_heads` is not defined in your notebook: the 3rd code cell, which defines "
                                   f"it, starts with the cell magic `{magic}`")
        assert "(" not in feedback and ")" not in feedback
    feedback = FunctionMissing("split_heads", cell="the 3rd code cell", unrun=True).feedback
    assert feedback == ("`split_heads` is not defined in your notebook: the 3rd code cell, which defines it, was not "
                        "run, as your notebook reached its time limit before it; make the cells above it faster.")


def test_a_call_that_does_not_fit_the_students_parameters_says_to_keep_the_released_ones():
    """When the student's function raised TypeError before any of its lines ran (an added parameter
    without a default, one renamed), does the sentence say the checks call it with the released
    notebook's parameters, without brackets; and is a TypeError raised inside the function, or naming
    another function, left as it was?"""
    from autograder.sandbox.outcomes import StudentRaised

    added = StudentRaised("TypeError", "silu() missing 1 required positional argument: 'beta'", function="silu")
    assert added.feedback == ("`silu` raised TypeError: silu() missing 1 required positional argument: 'beta'; the "
                              "checks call `silu` as its def line in the released notebook has it: keep its "
                              "parameters, their names, order and defaults, as given")
    inside = StudentRaised("TypeError", "silu() takes 1 positional argument but 2 were given", function="silu",
                           where=("the 22nd code cell (`def silu`), line 3: `return silu(x, 1)`",))
    assert "released notebook" not in inside.feedback
    other = StudentRaised("TypeError", "mean() got an unexpected keyword argument 'dim'", function="layer_norm")
    assert other.feedback == "`layer_norm` raised TypeError: mean() got an unexpected keyword argument 'dim'"
