"""Loading submitted notebooks: whatever arrives, the result is code cells to run plus notes
explaining what could not be used. A broken file is a reason, never a crash. Files are only read.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .text import truncate

_DEF = re.compile(r"^(?:async\s+)?(def|class)\s+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class CodeCell:
    index: int                  # position among all cells of the notebook (0-based, markdown included)
    source: str
    label: str = ""             # how a student finds it: "the 3rd code cell (`def layer_norm`)"


def ordinal(n: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def cell_label(number: int, source: str) -> str:
    """A student-facing name for the `number`-th code cell (counted from 1 over code cells only):
    the first function or class it defines, else its first line."""
    base = f"the {ordinal(number)} code cell"
    found = _DEF.search(source)
    if found:
        return f"{base} (`{found.group(1)} {found.group(2)}`)"
    first = next((ln.strip() for ln in source.splitlines() if ln.strip() and not ln.strip().startswith("#")), "")
    if not first:
        return base
    return f"{base} (`{truncate(first, 40).replace('`', chr(39))}`)"


@dataclass(frozen=True)
class LoadedNotebook:
    path: Path | None
    cells: tuple[CodeCell, ...]
    notes: tuple[str, ...] = ()
    readable: bool = True       # False: nothing could be run from this file

    @property
    def name(self) -> str:
        return self.path.name if self.path else "(none)"


def _source(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return "".join(value)
    return None


def _unreadable(path: Path | None, reason: str) -> LoadedNotebook:
    return LoadedNotebook(path=path, cells=(), notes=(reason,), readable=False)


def load_notebook(path: Path, *, max_mb: float) -> LoadedNotebook:
    """Read a submitted notebook (nbformat 4, or 3 converted) into its code cells."""
    name = path.name
    try:
        size = path.stat().st_size
    except OSError as exc:
        return _unreadable(path, f"{name}: could not be read ({exc.strerror}).")
    if size > max_mb * 1024 * 1024:
        return _unreadable(path, f"{name} is {size / 1024 / 1024:.1f} MB, over the {max_mb:g} MB limit, so it was "
                                 f"not run; clear large outputs (Kernel > Restart & Clear Output) and resubmit.")
    if size == 0:
        return _unreadable(path, f"{name} is an empty file; nothing could be graded.")
    try:
        raw = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return _unreadable(path, f"{name} is not a text file (not UTF-8); it is not a notebook.")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        return _unreadable(path, f"{name} is not valid notebook JSON (line {exc.lineno}, column {exc.colno}: "
                                 f"{exc.msg}); was it edited outside Jupyter or saved half-way?")
    if not isinstance(data, dict):
        return _unreadable(path, f"{name} is JSON but not a notebook (no top-level object).")
    notes: list[str] = []
    major = data.get("nbformat")
    if major == 4:
        raw_cells = data.get("cells")
        if not isinstance(raw_cells, list):
            return _unreadable(path, f"{name} has no list of cells; it is not a valid notebook.")
        source_key = "source"
    elif major == 3:
        notes.append(f"{name} was saved in the old notebook format 3; it was converted to read its cells.")
        raw_cells = [c for ws in data.get("worksheets") or [] if isinstance(ws, dict)
                     for c in (ws.get("cells") or [])]
        source_key = "input"
    else:
        return _unreadable(path, f"{name} has notebook format {major!r}; only formats 3 and 4 can be read.")

    cells: list[CodeCell] = []
    skipped = 0
    number = 0                  # code cells seen, as a student counts them
    for i, cell in enumerate(raw_cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        number += 1
        src = _source(cell.get(source_key, ""))
        if src is None:
            skipped += 1
            continue
        cells.append(CodeCell(index=i, source=src, label=cell_label(number, src)))
    if skipped:
        notes.append(f"{name}: {skipped} code cell(s) had malformed source and were skipped.")
    if not cells:
        notes.append(f"{name} has no code cells; none of your functions could be found.")
    return LoadedNotebook(path=path, cells=tuple(cells), notes=tuple(notes), readable=bool(cells))


def find_submission_notebooks(folder: Path,
                              expected: tuple[str, ...]) -> tuple[dict[str, Path | None], tuple[str, ...]]:
    """Match the notebooks in a submission folder to the assignment's expected names.

    Returns ({expected name: path or None}, notes). A single notebook under another name stands in
    for a single expected one (students rename files), with a note.
    """
    present = sorted(p for p in folder.glob("*.ipynb") if p.is_file()) if folder.is_dir() else []
    found: dict[str, Path | None] = {}
    notes: list[str] = []
    unmatched = [p for p in present if p.name not in expected]
    for name in expected:
        path = folder / name
        if path.is_file():
            found[name] = path
        elif len(expected) == 1 and len(unmatched) == 1:
            stand_in = unmatched.pop()
            found[name] = stand_in
            notes.append(f"Expected {name}; graded {stand_in.name} instead (please keep the file name).")
        else:
            found[name] = None
            notes.append(f"{name} was not submitted.")
    for extra in unmatched:
        notes.append(f"{extra.name} is not part of this assignment and was ignored.")
    return found, tuple(notes)
