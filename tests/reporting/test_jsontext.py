"""The indented JSON writer behind results.json: the very text json.dumps gives, errors included."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.reporting.jsontext import dumps_indented
from autograder.reporting.results_json import render_results_json, to_results_json

LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
DOCUMENTS = st.recursive(
    LEAVES, lambda inner: st.lists(inner) | st.tuples(inner, inner) | st.dictionaries(st.text() | st.integers(), inner),
    max_leaves=30)


def _dumps_or_error(doc, indent):
    try:
        return json.dumps(doc, indent=indent, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return type(exc)


@settings(max_examples=400, deadline=None)
@given(DOCUMENTS, st.integers(0, 4))
def test_any_document_gives_the_text_or_the_error_json_dumps_gives(doc, indent):
    """For any JSON-like document (NaN, non-string keys, tuples), is the text, or the error, json.dumps's?"""
    try:
        got = dumps_indented(doc, indent)
    except (TypeError, ValueError) as exc:
        got = type(exc)
    assert got == _dumps_or_error(doc, indent)


def test_unusual_values_are_left_to_json_dumps():
    """Do subclasses of int, float and str, and objects json cannot encode, behave as under json.dumps?"""
    class Points(float):
        pass

    doc = {"a": Points(2.5), "b": [True, None, 3], "c": "é\n\"", "d": {}}
    assert dumps_indented(doc) == json.dumps(doc, indent=2, ensure_ascii=False)
    for bad in ({"x": object()}, {"x": float("nan")}):
        assert _dumps_or_error(bad, 2) in (TypeError, ValueError)
        try:
            dumps_indented(bad)
        except (TypeError, ValueError) as exc:
            assert type(exc) is _dumps_or_error(bad, 2)
        else:
            raise AssertionError("no error")


def test_results_json_text_is_json_dumps_of_the_document_with_and_without_a_key(ada, bob, cy):
    """Is results.json, first without and then with its grading key, json.dumps of the document each time?"""
    for result in (ada, bob, cy):
        for options in ({}, {"visibility": "hidden"}):
            plain = json.dumps(to_results_json(result, **options), indent=2, ensure_ascii=False) + "\n"
            keyed = json.dumps(to_results_json(result, grading_key="f00d", **options), indent=2,
                               ensure_ascii=False) + "\n"
            assert render_results_json(result, **options) == plain
            assert render_results_json(result, grading_key="f00d", **options) == keyed
            assert render_results_json(result, grading_key=None, **options) == plain
            assert render_results_json(result, grading_key="other", **options) != keyed
