"""The indented JSON writer behind results.json: the very text json.dumps gives, errors included."""
from __future__ import annotations

import copy
import json

import nbformat
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.reporting.jsontext import dumps_indented
from autograder.reporting.notebook_text import notebook_text as _notebook_text
from autograder.reporting.results_json import render_results_json, to_results_json

LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
SORTED = st.booleans()
DOCUMENTS = st.recursive(
    LEAVES, lambda inner: st.lists(inner) | st.tuples(inner, inner) | st.dictionaries(st.text() | st.integers(), inner),
    max_leaves=30)


def _dumps_or_error(doc, indent, sort_keys=False):
    try:
        return json.dumps(doc, indent=indent, ensure_ascii=False, allow_nan=False, sort_keys=sort_keys)
    except (TypeError, ValueError) as exc:
        return type(exc)


@settings(max_examples=200, deadline=None)
@given(DOCUMENTS, st.integers(0, 4), SORTED)
def test_any_document_gives_the_text_or_the_error_json_dumps_gives(doc, indent, sort_keys):
    """For any JSON-like document (NaN, non-string keys, tuples), is the text, or the error, json.dumps's?"""
    try:
        got = dumps_indented(doc, indent, sort_keys=sort_keys)
    except (TypeError, ValueError) as exc:
        got = type(exc)
    assert got == _dumps_or_error(doc, indent, sort_keys)


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


def _notebook(**extra):
    nb = nbformat.v4.new_notebook()
    nb.metadata["signature"] = "transient"
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    code = nbformat.v4.new_code_cell("x = 1\ny = 2\nprint('é')", metadata={"trusted": True, "z": 1, "a": [1.5, None]})
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="one\ntwo\n"),
                    nbformat.v4.new_output("display_data", data={"text/plain": "a\nb", "image/png": "AAAA"})]
    nb.cells = [nbformat.v4.new_markdown_cell("# Title\ntext"), code]
    nb.metadata.update(extra)
    return nb


def test_annotated_notebooks_are_written_as_nbformat_writes_them():
    """Is an annotated notebook's text nbformat.writes's, also with NaN or bytes in it or when it is invalid?"""
    for extra in ({}, {"weird": float("nan")}, {"raw": b"bytes"}, {"nbformat_minor": "not a number"}):
        nb = _notebook(**extra)
        expected = nbformat.writes(copy.deepcopy(nb))
        assert _notebook_text(nb) == expected, extra


def test_a_dict_subclass_is_written_as_json_dumps_writes_it():
    """Is a dict subclass (nbformat's NotebookNode; one with its own items) written as json.dumps writes it?"""
    class Reversed(dict):
        def items(self):
            return list(super().items())[::-1]

    node = nbformat.from_dict({"b": [{"y": 1, "x": "é"}], "a": {"k": None}})
    for doc in (node, {"n": node}, Reversed(b=1, a=2)):
        for sort_keys in (False, True):
            assert dumps_indented(doc, 1, sort_keys=sort_keys) == _dumps_or_error(doc, 1, sort_keys)


def test_results_json_with_entries_kept_from_earlier_results_is_json_dumps_of_the_document(ada, bob, cy):
    """Rendered one after another (entries kept from the results before: the same tests with other
    durations, a score of -0.0 beside one of 0.0, an int score, a crash), is each text json.dumps's?"""
    from dataclasses import replace

    from autograder.reporting import results_json

    def scored(result, score):
        return replace(result, tests=tuple(replace(t, score=score, status="failed") for t in result.tests))

    results = [ada, bob, replace(ada, tests=tuple(replace(t, duration=t.duration + 1.25) for t in ada.tests)),
               scored(bob, 0.0), scored(bob, -0.0), scored(bob, 0), cy, replace(ada, student="ada2"), bob]
    results_json._ENTRIES.clear()
    for result in results:
        results_json._RECENT.clear()
        expected = json.dumps(to_results_json(result), indent=2, ensure_ascii=False) + "\n"
        assert render_results_json(result) == expected
    assert results_json._ENTRIES
