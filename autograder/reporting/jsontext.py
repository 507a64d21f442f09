"""Indented JSON text, the same characters as `json.dumps(doc, indent=n, ensure_ascii=False,
allow_nan=False)`, in a fraction of its time.

On Python 3.11, `json.dumps` with an indent runs the encoder written in Python (a generator per
nested value); results.json holds a few thousand values, so that costs more than everything else
in writing it. Here strings go through the C string encoder the json module itself uses, and the
nesting is joined directly. Anything this does not spell out (keys that are not strings, values
that are not str/int/float/bool/None/list/tuple/dict, NaN or infinity) is handed to `json.dumps`,
which then gives its own text or its own error. A dict subclass that keeps dict's `items` (nbformat's
NotebookNode) is a dict here, as it is to json.dumps.
"""
from __future__ import annotations

import json
import json.encoder
from typing import Any

_string = json.encoder.encode_basestring     # the C function when available, as json.dumps uses
_float_repr = float.__repr__
_int_repr = int.__repr__
_INF = float("inf")


class _Unusual(Exception):
    """A value this encoder leaves to json.dumps."""


def dumps_indented(doc: Any, indent: int = 2, *, sort_keys: bool = False) -> str:
    """`json.dumps(doc, indent=indent, ensure_ascii=False, allow_nan=False, sort_keys=sort_keys)`,
    character for character."""
    try:
        return _value(doc, "\n", " " * indent, sort_keys)
    except (_Unusual, RecursionError):
        return json.dumps(doc, indent=indent, ensure_ascii=False, allow_nan=False, sort_keys=sort_keys)


def dumps_nested(value: Any, depth: int, indent: int, *, sort_keys: bool = False) -> str:
    """`value` as it appears inside `dumps_indented(doc, indent, sort_keys=sort_keys)` when nested
    `depth` levels deep (its first line not indented, the lines after it as that place needs), so a
    document can be put together from parts encoded separately. ValueError for a value this
    encoder leaves to json.dumps (the caller then encodes the whole document with dumps_indented)."""
    try:
        return _value(value, "\n" + " " * (indent * depth), " " * indent, sort_keys)
    except (_Unusual, RecursionError):
        raise ValueError("a value that only json.dumps encodes") from None


def _value(value: Any, newline: str, step: str, sort_keys: bool) -> str:
    """`value` encoded; `newline` is the line break plus the indent of the line it starts on.
    Strings and ints inside a container are encoded in its loop (most values are those)."""
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is dict or (isinstance(value, dict) and kind.items is dict.items):   # a notebook's NotebookNode
        if not value:
            return "{}"
        inner = newline + step
        parts = []
        for key, item in (sorted(value.items()) if sort_keys else value.items()):
            if type(key) is not str:
                raise _Unusual
            t = type(item)
            parts.append(_string(key) + ": " + (_string(item) if t is str else _int_repr(item) if t is int
                                                 else _value(item, inner, step, sort_keys)))
        return "{" + inner + ("," + inner).join(parts) + newline + "}"
    if kind is list or kind is tuple:
        if not value:
            return "[]"
        inner = newline + step
        items = [_string(item) if type(item) is str else _value(item, inner, step, sort_keys) for item in value]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    if kind is float:
        if value != value or value == _INF or value == -_INF:
            raise _Unusual
        return _float_repr(value)
    if kind is int:
        return _int_repr(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    raise _Unusual                            # other subclasses and types: json.dumps decides
