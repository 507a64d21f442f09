"""bound_result: every text field of every test within its cap, whatever path a test takes."""
import dataclasses

import pytest

from autograder.grading.results import SubmissionResult, TestResult
from autograder.reporting import bounds
from autograder.reporting.bounds import bound_result, clip


def _each_field_clipped(t: TestResult) -> TestResult:
    """The caps of `bounds`, applied field by field as its docstring states them."""
    diagnoses = tuple(clip(d, bounds.NAME_CHARS) for d in t.diagnoses[:bounds.MAX_DIAGNOSES])
    return dataclasses.replace(
        t, name=clip(t.name, bounds.NAME_CHARS), problem=clip(t.problem, bounds.NAME_CHARS),
        output=clip(t.output, bounds.OUTPUT_CHARS), description=clip(t.description, bounds.DESCRIPTION_CHARS),
        diagnoses=diagnoses, hints=tuple(clip(h, bounds.HINT_CHARS) for h in t.hints[:len(diagnoses)]),
        detail=clip(t.detail, bounds.DETAIL_CHARS))


PLAIN = TestResult(name="graders/test_ln.py::test_ln[seed0]", problem="layer_norm", score=1.0, max_score=1.0,
                   status="passed", output="", description="Does it normalise?", detail="")


@pytest.mark.parametrize("test", [
    PLAIN,
    dataclasses.replace(PLAIN, hints=("a hint without its diagnosis",)),
    dataclasses.replace(PLAIN, output="x" * (bounds.OUTPUT_CHARS + 1)),
    dataclasses.replace(PLAIN, output="x" * bounds.OUTPUT_CHARS),
    dataclasses.replace(PLAIN, name="n" * (bounds.NAME_CHARS + 5)),
    dataclasses.replace(PLAIN, problem="p" * (bounds.NAME_CHARS + 1)),
    dataclasses.replace(PLAIN, description="d" * (bounds.DESCRIPTION_CHARS + 1)),
    dataclasses.replace(PLAIN, detail="e" * (bounds.DETAIL_CHARS + 1)),
    dataclasses.replace(PLAIN, output="a lone surrogate \udc80 from the child"),
    dataclasses.replace(PLAIN, detail="caf\u00e9 \ud800"),
    dataclasses.replace(PLAIN, name="t\u00e9st"),
    dataclasses.replace(PLAIN, status="failed", diagnoses=("ln.eps",) * 12, hints=("h" * 700,) * 12),
    dataclasses.replace(PLAIN, output="ValueError: bad \x00 \x1b[31mred\x1b[0m"),
    dataclasses.replace(PLAIN, detail="\x00" * (bounds.DETAIL_CHARS + 1)),
], ids=["plain", "hints-alone", "long-output", "output-at-cap", "long-name", "long-problem", "long-description",
        "long-detail", "surrogate-output", "surrogate-detail", "non-ascii-name", "many-diagnoses", "control-output",
        "long-control-detail"])
def test_a_bounded_test_is_each_field_clipped(test):
    """Is each text field of a test within its cap, escaped and cleaned, and an untouched test kept as it is?"""
    result = SubmissionResult(student="ada", assignment="a", state="graded", tests=(test,))
    bounded = bound_result(result).tests[0]
    assert bounded == _each_field_clipped(test)
    if bounded == test:
        assert bounded is test, "a test within every cap is kept as it is"


def test_control_characters_are_written_out_and_tabs_and_newlines_kept():
    """Do NUL, escape sequences, a lone carriage return and C1 controls become visible escapes, with
    tabs, newlines and CRLF line ends (as one newline) kept, and the cap still held?"""
    assert clip("a\x00b\x1b[31mc\rd\x9be\x7f\tf\r\ng\n", 100) == "a\\x00b\\x1b[31mc\\x0dd\\x9be\\x7f\tf\ng\n"
    assert len(clip("\x00" * 1000, 50)) == 50
    assert all(bounds.CONTROL.search(clip(chr(c) * 3, 10)) is None for c in range(0xa0))
