"""The text of an annotated formgrader copy: what `nbformat.writes(nb)` gives, with the work done
once per distinct cell rather than once per notebook.

A batch writes one copy per student, and most cells of those copies are the same in every one of
them (the released instructions and tests, cells students left as they were). nbformat's writer
validates the whole notebook against its JSON schema and encodes the whole notebook each time;
here both are kept per cell, by the cell's exact content (its compact JSON text):

- validation: nbformat's schema for a v4 notebook checks each item of `cells` against the cell
  definition and nothing across cells (`_cells_are_independent` checks this in the schema file
  itself, else nothing is kept), so a notebook is valid when its top level with only the cells not
  seen valid before is valid. What `nbformat.validate` also does, giving cells without an id (or
  with an id used twice) a new random one, is left to it: such a notebook is validated whole, by
  nbformat, as before. An invalid notebook is validated whole again, so the error logged is
  nbformat's own for the whole notebook.
- encoding: a cell's text in the written notebook depends on the cell only (the lines split and
  `trusted` dropped by nbformat's `split_lines` and `strip_transient`, which are run on the whole
  notebook as before), so it is encoded once and put together with the rest by jsontext.

What is kept is bounded (`CACHE_CHARS`, least recently used first out): a student's own cells
pass through without pushing out the cells every copy shares.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import nbjson, rwbase
from traitlets.log import get_logger

from .jsontext import dumps_indented, dumps_nested

CACHE_CHARS = 2_000_000        # keys and texts kept, in characters (about 2-4 MB)
CELL_CHARS = 200_000           # a cell longer than this (as compact JSON) is not kept
_compact = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False, separators=(",", ":")).encode
_string = json.encoder.encode_basestring
_NOTEBOOK_KEYS = {"$schema", "description", "type", "additionalProperties", "required", "properties", "definitions"}
_CELLS_SCHEMA = {"type": "array", "items": {"$ref": "#/definitions/cell"}}


class _CellMemo:
    """Compact JSON of a cell -> [the validator it was found valid by (or ""), its text (or "")],
    least recently used first, at most CACHE_CHARS characters in all."""

    def __init__(self) -> None:
        self.entries: dict[str, list[str]] = {}
        self.chars = 0

    def get(self, key: str) -> list[str] | None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            self.entries[key] = entry           # now the most recently used
        return entry

    def put(self, key: str, *, valid_for: str = "", text: str = "") -> None:
        if len(key) > CELL_CHARS:
            return
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = ["", ""]
            self.chars += len(key)
        if valid_for:
            entry[0] = valid_for
        if text and not entry[1]:
            entry[1] = text
            self.chars += len(text)
        while self.chars > CACHE_CHARS and self.entries:
            oldest = next(iter(self.entries))
            self.chars -= len(oldest) + len(self.entries.pop(oldest)[1])

    def clear(self) -> None:
        self.entries.clear()
        self.chars = 0


_MEMO = _CellMemo()
_INDEPENDENT: dict[int, bool] = {}     # nbformat_minor -> whether its schema checks cells one by one


def _cells_are_independent(minor: int) -> bool:
    """Whether nbformat's schema for v4.`minor` notebooks checks `cells` item by item and nothing
    else about them (read from the schema file nbformat validates with)."""
    known = _INDEPENDENT.get(minor)
    if known is None:
        known = False
        try:
            name = nbformat.v4.nbformat_schema.get((4, minor))
            if name is not None and minor <= nbformat.v4.nbformat_minor:
                schema = json.loads((Path(nbformat.v4.__file__).parent / name).read_text(encoding="utf-8"))
                cells = {k: v for k, v in schema["properties"]["cells"].items() if k != "description"}
                known = set(schema) <= _NOTEBOOK_KEYS and cells == _CELLS_SCHEMA
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            known = False
        _INDEPENDENT[minor] = known
    return known


def _validator_tag(nb: Any) -> str:
    """Which schema and validator `nbformat.validate(nb)` uses, when cells can be validated one by
    one under it and validating them needs no repair of cell ids; else ""."""
    minor, cells = nb.get("nbformat_minor"), nb.get("cells")
    if type(minor) is not int or type(cells) is not list or not _cells_are_independent(minor):
        return ""
    if minor >= 5:                                       # nbformat would give cells new ids
        try:
            if not all(isinstance(c, dict) and "id" in c for c in cells):
                return ""
            if len({c["id"] for c in cells}) != len(cells):
                return ""
        except TypeError:                                # an id that cannot be compared: nbformat's error
            return ""
    return f"{nbformat.json_compat.get_current_validator().name}:4.{minor}"


def _validate(nb: Any, strict: bool = False) -> list[str] | None:
    """`nbformat.validate(nb)` with an invalid notebook logged (as nbformat's writer does), or with
    `strict` its ValidationError raised; returns the compact JSON of each cell when the cells' texts
    may be kept (None when not)."""
    tag = _validator_tag(nb)
    keys = None
    if tag:
        try:
            keys = [_compact(c) for c in nb["cells"]]
        except (TypeError, ValueError, RecursionError):  # NaN, bytes: not kept
            keys = None
    if keys is not None:
        unseen: dict[str, Any] = {}
        for key, cell in zip(keys, nb["cells"], strict=True):
            entry = _MEMO.get(key)
            if (entry is None or entry[0] != tag) and key not in unseen:
                unseen[key] = cell
        try:
            nbformat.validate({**nb, "cells": list(unseen.values())})
        except Exception:  # noqa: BLE001 - nbformat validates the whole notebook and says why, below
            pass
        else:
            for key in unseen:
                _MEMO.put(key, valid_for=tag)
            return keys
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        if strict:
            raise
        get_logger().error("Notebook JSON is invalid: %s", exc)
    return keys


def integer_versions(nb: Any) -> None:
    """Make the format numbers of the version-4 notebook `nb` integers, as nbformat's validator asserts
    they are (a submitted 4.0, "5", null or NaN would stop it with a bare AssertionError): a whole number
    given as a float or in digits becomes that integer; anything else, the minor version the cells fit
    (the current one when every cell has an id, which it requires; else 4.4)."""
    nb["nbformat"] = 4
    minor = nb.get("nbformat_minor")
    if type(minor) is int:
        return
    whole = isinstance(minor, float) and minor.is_integer() and 0 <= minor <= 99
    if whole or (isinstance(minor, str) and minor.strip().isdecimal() and len(minor.strip()) <= 2):
        nb["nbformat_minor"] = int(minor)
    else:
        cells = nb.get("cells")
        ids = isinstance(cells, list) and all(isinstance(c, dict) and "id" in c for c in cells)
        nb["nbformat_minor"] = nbformat.v4.nbformat_minor if ids else 4


def notebook_text(nb: Any, *, strict: bool = False) -> str:
    """`nbformat.writes(nb)` for a version-4 notebook that is written once and then dropped: validated
    (and an invalid one logged) the same way, its text split into lines and transient metadata
    removed as nbformat's writer does, but in place rather than on a deep copy, and the JSON (sorted
    keys, indent 1) written by jsontext, each cell's part kept for the next notebook (see the
    module's docstring). Its format numbers are made integers first (`integer_versions`). A notebook
    of another version, or holding values plain JSON does not (bytes), is left to nbformat's own writer.
    With `strict`, an invalid notebook raises nbformat's ValidationError instead of being logged and
    written."""
    if nb.get("nbformat") != 4:
        if strict:
            nbformat.validate(nb)
        return str(nbformat.writes(nb))
    integer_versions(nb)
    keys = _validate(nb, strict)
    nb = rwbase.strip_transient(rwbase.split_lines(nb))
    try:
        if keys is not None and all(type(k) is str for k in nb):
            return _joined(nb, keys)
        return dumps_indented(nb, 1, sort_keys=True)
    except (TypeError, ValueError):              # bytes, NaN: nbformat's writer takes them
        return str(nbjson.writes(nb))            # the same text: splitting and stripping again change nothing


def _joined(nb: Any, keys: list[str]) -> str:
    """`dumps_indented(nb, 1, sort_keys=True)` with each cell's text taken from, or put into, the memo."""
    parts = []
    for name in sorted(nb):
        value = nb[name]
        if name == "cells" and type(value) is list and value:
            texts = []
            for key, cell in zip(keys, value, strict=True):
                entry = _MEMO.get(key)
                text = entry[1] if entry is not None else ""
                if not text:
                    text = dumps_nested(cell, 2, 1, sort_keys=True)
                    _MEMO.put(key, text=text)
                texts.append(text)
            parts.append('"cells": [\n  ' + ",\n  ".join(texts) + "\n ]")
        else:
            parts.append(_string(name) + ": " + dumps_nested(value, 1, 1, sort_keys=True))
    return "{\n " + ",\n ".join(parts) + "\n}" if parts else "{}"
