"""Results carried between the batch's processes as plain data (grading.results: result_to_dict,
result_from_dict)."""
from __future__ import annotations

import dataclasses
import json

import pytest

from autograder.grading.results import SubmissionResult, TestResult, result_from_dict, result_to_dict


def _result(**changes) -> SubmissionResult:
    tests = (
        TestResult("test_a.py::test_x[seed0]", "a", 1.5, 2.0, "passed", description="Does x?", duration=0.25),
        TestResult("test_a.py::test_y", "a", 0.0, 1.0, "failed", output="wrong \u00e9", diagnoses=("a.no_eps",),
                   hints=("Add eps.",), detail="assert ...\nline 2"),
        TestResult("test_b.py::test_z", "b", 0.0, 3.0, "not_graded"),
    )
    base = SubmissionResult("ana", "hw", "graded", tests=tests, problems=("a", "b"), notes=("cell 3 failed",),
                            seed=7, execution_time=1.25, on_roster=False, files=("submitted/ana/hw/a.ipynb",),
                            problem_points=(("a", 3.0), ("b", 3.0)), isolation=("bubblewrap", "seccomp"))
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize("result", [_result(), _result(tests=()), _result(state="crashed", crash_reason="boom")])
def test_a_result_survives_its_round_trip_through_json(result):
    """Does a result come back equal, field by field and type by type, after JSON and back?"""
    data = result_to_dict(result)
    back = result_from_dict(json.loads(json.dumps(data)))
    assert back == result
    for got, sent in zip(back.tests, result.tests, strict=True):
        assert type(got) is TestResult
        assert list(got.__dict__) == [f.name for f in dataclasses.fields(TestResult)]
        for f in dataclasses.fields(TestResult):
            assert type(getattr(got, f.name)) is type(getattr(sent, f.name)), f.name
    assert result_to_dict(back) == data


def test_a_tests_data_is_plain_lists_in_field_order():
    """Is each test given as a dict of its fields in order, its tuples as lists?"""
    data = result_to_dict(_result())
    second = data["tests"][1]
    assert list(second) == [f.name for f in dataclasses.fields(TestResult)]
    assert second["diagnoses"] == ["a.no_eps"] and second["hints"] == ["Add eps."]
    assert type(second["diagnoses"]) is list


def test_a_test_with_fields_missing_or_in_another_order_is_read_too():
    """Is a test's mapping without its defaults, or in another order, read as the same test?"""
    full = result_to_dict(_result())
    data = dict(full, tests=[{"status": "passed", "max_score": 1.0, "score": 1.0, "problem": "a", "name": "t",
                              "hints": ["h"]}])
    test = result_from_dict(data).tests[0]
    assert test == TestResult("t", "a", 1.0, 1.0, "passed", hints=("h",))


@pytest.mark.parametrize("bad", [{"name": "t"}, {**result_to_dict(_result())["tests"][0], "surprise": 1}, ["t"]])
def test_a_malformed_test_is_refused(bad):
    """Is a test with a field missing, an unknown field, or no mapping at all refused (TypeError)?"""
    with pytest.raises(TypeError):
        result_from_dict(dict(result_to_dict(_result()), tests=[bad]))
