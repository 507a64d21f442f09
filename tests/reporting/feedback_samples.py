"""Hand-built results in the shapes the graders and the sandbox produce, for the feedback page.

dora   the whole assignment: a syntax error in `split_heads` followed by eight NameErrors in later
       cells (cells named the way students see them), every `split_heads` check failing with one
       message, integration checks that could not run because of it ("not_graded"), advice worth
       no points (an argument changed in place, a numpy warning; `split_heads`'s not run, since the
       function gave no result), a parametrised check failing
       1 of 6 cases, a recognised misconception, and problems with full marks.
erin   99 of 100: one case of one check failed.
"""
from __future__ import annotations

from autograder.grading import results as R

SECRET = "SECRET-instructor-only-0.3141592653589793"
SEED = 987654321
POINTS = (("layer_norm", 15.0), ("split_heads", 10.0), ("merge_heads", 5.0),
          ("multi_head_attention", 20.0), ("pre_ln_block", 20.0), ("silu", 5.0),
          ("swiglu_ffn", 15.0), ("count_block_params", 10.0))
NB = "transformer-block.ipynb"
MISSING_SPLIT = "`split_heads` is not defined in your notebook; perhaps it was renamed, or its cell failed."
NEEDS_SPLIT = "Not graded: this check needs your `split_heads`, which failed (see problem 2)."
NOT_RUN_SPLIT = ("Not run: `split_heads` is not defined in your notebook, so there was nothing for this check "
                 "to look at.")
MUTATED = ("`layer_norm` changed its argument `x` in place (for example `x -= mean`); "
           "callers expect their arrays untouched.")
WARNED = ("`pre_ln_block` raised numpy/Python warnings: RuntimeWarning: overflow encountered in exp "
          "(the 12th code cell (`def silu(x):`), line 2).")
UPCAST = ("pre_ln_block on float32 inputs returned dtype float64; expected float32 (keep the "
          "input's precision: a float64 constant such as `np.sqrt(d_k)` upcasts it).")
SYNTAX = (f"{NB}: the 5th code cell (`def split_heads(x, n_heads):`) raised SyntaxError: "
          f"'(' was never closed (line 7: `return x.reshape((n, h, d_k)`)")
LATER_CELLS = ("6th", "7th", "9th", "10th", "12th", "14th", "15th", "17th")
NAME_ERRORS = tuple(f"{NB}: the {nth} code cell (`out = split_heads(x, 2)`) raised NameError: "
                    f"name 'split_heads' is not defined (line 1: `out = split_heads(x, 2)`)"
                    for nth in LATER_CELLS)
MAGIC = f"{NB}: skipped the line magic `%matplotlib inline` in the 1st code cell"


def case(problem: str, fn: str, max_score: float, label: str = "", *, status: str = "passed",
         output: str = "", **kw) -> R.TestResult:
    name = f"test_{problem}.py::{fn}" + (f"[{label}]" if label else "")
    score = max_score if status == "passed" else 0.0
    kw.setdefault("detail", f"{SECRET}; replay with seed {SEED}")
    return R.TestResult(name=name, problem=problem, score=score, max_score=max_score, status=status,
                        output=output, **kw)


def cases(problem: str, fn: str, each: float, labels: tuple[str, ...], description: str,
          failed: dict[str, str] | None = None, status: str = "failed", **kw) -> list[R.TestResult]:
    failed = failed or {}
    return [case(problem, fn, each, label, description=description,
                 status=status if label in failed else "passed", output=failed.get(label, ""),
                 **(kw if label in failed else {}))
            for label in labels]


SHAPES = ("one_vector", "n5_d8", "one_token", "batch_axes_2x3", "n12_d64", "nearly_constant")


def full_marks(problem: str, points: float, checks: int = 3) -> list[R.TestResult]:
    return [case(problem, f"test_{problem}_property_{i}", points / checks,
                 description=f"Does {problem} have property {i}?") for i in range(1, checks + 1)]


def dora_tests() -> list[R.TestResult]:
    tests: list[R.TestResult] = []
    # layer_norm: 1 of 6 cases fails; an advice check (no points) reports a mutated argument
    tests += cases("layer_norm", "test_layer_norm_matches_reference", 1.5, SHAPES,
                   "Does layer_norm match the reference for several shapes?",
                   failed={"nearly_constant": "layer_norm(x, gamma, beta) on x of shape (4, 8) is off in 8 of "
                                              "32 entries; largest absolute error 3.1 at index (2, 5)."},
                   diagnoses=("layer_norm.eps_outside_sqrt",),
                   hints=("Add eps to the variance inside the square root: sqrt(var + eps).",))
    tests.append(case("layer_norm", "test_layer_norm_keeps_float32", 6.0,
                      description="Given float32 x, does layer_norm return float32 values?"))
    tests.append(case("layer_norm", "test_layer_norm_leaves_inputs_unchanged", 0.0, status="failed",
                      output=MUTATED, description="Does layer_norm leave its arguments unchanged?"))
    # split_heads: missing after its syntax error; every check says so
    tests += cases("split_heads", "test_split_heads_matches_reference", 1.0, SHAPES,
                   "Does split_heads put every feature in the right head and token?",
                   failed=dict.fromkeys(SHAPES, MISSING_SPLIT))
    tests.append(case("split_heads", "test_split_heads_keeps_float32", 2.0, status="failed",
                      output=MISSING_SPLIT, description="Given float32 x, does split_heads return float32?"))
    tests.append(case("split_heads", "test_split_heads_rejects_width_not_divisible_by_heads", 2.0,
                      status="failed", output=MISSING_SPLIT,
                      description="Does split_heads refuse a width that heads cannot share?"))
    tests.append(case("split_heads", "test_split_heads_leaves_input_unchanged", 0.0, status="not_run",
                      output=NOT_RUN_SPLIT, description="Does split_heads leave x untouched?"))
    tests += full_marks("merge_heads", 5.0)
    # multi_head_attention: its own checks pass; the integration check cannot run
    tests += full_marks("multi_head_attention", 18.0)
    tests.append(case("multi_head_attention", "test_multi_head_attention_integration_with_your_own_functions",
                      2.0, status="not_graded", output=NEEDS_SPLIT,
                      description="With your own split_heads and merge_heads, does attention agree?"))
    # pre_ln_block: one failure with a diagnosis, one integration check not graded, advice
    tests += full_marks("pre_ln_block", 16.0, checks=2)
    tests.append(case("pre_ln_block", "test_pre_ln_block_keeps_float32", 2.0, status="failed", output=UPCAST,
                      description="Given float32 inputs, does pre_ln_block return float32?",
                      diagnoses=("general.float32_upcast",),
                      hints=("Float32 inputs came back as float64: a float64 constant upcast them.",)))
    tests.append(case("pre_ln_block", "test_pre_ln_block_integration_with_your_own_functions", 2.0,
                      status="not_graded", output=NEEDS_SPLIT,
                      description="With your own pieces, does masked pre_ln_block agree?"))
    tests.append(case("pre_ln_block", "test_pre_ln_block_raises_no_warnings", 0.0, status="failed",
                      output=WARNED, description="Does pre_ln_block run without numpy warnings?"))
    tests += full_marks("silu", 5.0)
    tests += full_marks("swiglu_ffn", 15.0)
    tests += full_marks("count_block_params", 10.0)
    return tests


def submission(student: str, tests, **kw) -> R.SubmissionResult:
    kw.setdefault("state", "graded")
    kw.setdefault("files", (NB,))
    return R.SubmissionResult(student=student, assignment="transformer-block", tests=tuple(tests),
                              problems=tuple(p for p, _ in POINTS), problem_points=POINTS, seed=SEED, **kw)


def dora_result() -> R.SubmissionResult:
    return submission("dora", dora_tests(), notes=(MAGIC, SYNTAX) + NAME_ERRORS)


def partly_alike_result() -> R.SubmissionResult:
    """Two layer_norm checks failing with one message, one of them in only 2 of its 6 cases."""
    wrong = "layer_norm returned None; return the normalised array."
    tests = cases("layer_norm", "test_layer_norm_matches_reference", 1.5, SHAPES,
                  "Does layer_norm match the reference for several shapes?",
                  failed=dict.fromkeys(SHAPES[:2], wrong))
    tests.append(case("layer_norm", "test_layer_norm_keeps_float32", 6.0, status="failed", output=wrong,
                      description="Given float32 x, does layer_norm return float32 values?"))
    return submission("fay", tests)


def erin_result() -> R.SubmissionResult:
    tests = cases("layer_norm", "test_layer_norm_matches_reference", 0.5, tuple(f"case{i}" for i in range(2)),
                  "Does layer_norm match the reference?",
                  failed={"case1": "layer_norm(x, gamma, beta) on x of shape (5, 8) is off in 1 of 40 entries."})
    tests += full_marks("layer_norm", 14.0)
    for problem, points in POINTS[1:]:
        tests += full_marks(problem, points, checks=8)
    return submission("erin", tests)
