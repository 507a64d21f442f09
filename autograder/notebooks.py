"""Loading submitted notebooks: whatever arrives, the result is code cells to run plus notes
explaining what could not be used. A broken file is a reason, never a crash. Files are only read.

Only regular files are read from a submission: an entry is checked with lstat and opened with
O_NOFOLLOW (and O_NONBLOCK, so a FIFO cannot stall the grader), and its type is checked again on
the open descriptor. A symbolic link, a folder, a FIFO or a device in place of a notebook is
refused with a reason for that student; no link is ever followed.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from .cellplan import defined_functions, file_stamp, released_cells, source_text
from .deflines import def_line_notes
from .layout import is_notebook_name, utf8_name
from .text import shown_name, truncate

READ_CHUNK = 1 << 20
# A notebook with more code cells than this is not run: the grader keeps a record per cell, and no
# assignment needs thousands (a generated 100,000-cell notebook would cost the grader ~150 MB).
MAX_CODE_CELLS = 5_000
# Nor one with more cells of any kind (markdown and raw cells are parsed too: 431,000 raw cells once
# cost the gradebook writer 811 MB), or more JSON values than this (lines, metadata entries,
# attachments: each costs the parse memory). Counted from the bytes, before any parse. The values
# inside code cells' saved outputs are not counted against the grader: it never uses outputs and
# parses a notebook over the limit with them emptied (`without_outputs`); only a reader that parses
# them too (nbformat, for the annotated copy) counts them.
MAX_CELLS = 10_000
MAX_NOTEBOOK_VALUES = 200_000


class RefusedFile(Exception):
    """A submitted path that is not a regular file (or cannot be read); str() is the reason."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def open_regular(path: Path) -> int:
    """A read-only descriptor on `path`, which must be a regular file that is not a symbolic link.
    Raises RefusedFile with a one-line reason naming the file (as shown_name writes it)."""
    name = shown_name(path.name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RefusedFile(f"{name} is a symbolic link, not a regular file, so it was not read; "
                              f"submit the file itself.") from None
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode):
            raise RefusedFile(f"{name} is {_kind(mode)}, not a regular file, so it was not read.") from None
        raise RefusedFile(f"{name}: could not be read ({exc.strerror or exc}).") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise RefusedFile(f"{name} is {_kind(mode)}, not a regular file, so it was not read.")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file `path` (see open_regular); RefusedFile when it holds more than
    `max_bytes` or cannot be read."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise RefusedFile(f"{shown_name(path.name)} is {size / 1024 / 1024:.1f} MB, over the "
                              f"{max_bytes / 1024 / 1024:g} MB limit")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(READ_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:      # it grew while being read
                raise RefusedFile(f"{shown_name(path.name)} is over the {max_bytes / 1024 / 1024:g} MB limit")
        return b"".join(chunks)
    except OSError as exc:
        raise RefusedFile(f"{shown_name(path.name)}: could not be read ({exc.strerror or exc}).") from None
    finally:
        os.close(fd)


def hash_regular(path: Path, digest: hashlib._Hash) -> None:
    """Feed the regular file `path` into `digest` in chunks (see open_regular)."""
    fd = open_regular(path)
    try:
        while True:
            chunk = os.read(fd, READ_CHUNK)
            if not chunk:
                break
            digest.update(chunk)
    except OSError as exc:
        raise RefusedFile(f"{shown_name(path.name)}: could not be read ({exc.strerror or exc}).") from None
    finally:
        os.close(fd)


_CODE_CELL = re.compile(rb'"cell_type"\s*:\s*"code"')
_PLAIN_STRING = re.compile(rb'"[^"]*"')         # a JSON string once its escaped quotes are taken out


@dataclass(frozen=True, slots=True)
class NotebookCounts:
    """What a notebook file holds, counted from its bytes without parsing it (see `notebook_counts`)."""
    cells: int          # cells of every kind (each `"cell_type":` key)
    code_cells: int     # code cells (each `"cell_type": "code"`)
    values: int         # JSON values (every list item and object member, and the outermost value)


def notebook_counts(data: bytes) -> NotebookCounts:
    """Count the cells and JSON values of a notebook file's bytes without parsing it: a parse costs
    memory per value (nbformat's, for the formgrader copy, about 2 KB per cell), so a notebook of
    hundreds of thousands of tiny cells or outputs has to be refused before any parse. In valid JSON
    a quote inside a string is always escaped, so `"cell_type"` between bare quotes is a key (or a
    whole string value, which only overcounts); and once escaped backslashes and quotes are taken
    out, every quote left opens or closes a string. At most three copies of `data` are alive at once
    (the 1 MB pieces are scanned one at a time)."""
    cells = data.count(b'"cell_type"')
    code_cells = sum(1 for _ in _CODE_CELL.finditer(data))
    plain = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    values, inside = 1, False
    for start in range(0, len(plain), READ_CHUNK):
        piece = plain[start:start + READ_CHUNK]
        if inside:                              # a string that began in an earlier piece
            end = piece.find(b'"')
            if end < 0:
                continue
            piece, inside = piece[end + 1:], False
        piece = _PLAIN_STRING.sub(b"s", piece)     # a string stays a value: `["x"]` is not empty
        open_quote = piece.find(b'"')           # at most one is left: a string running into the next piece
        if open_quote >= 0:
            piece, inside = piece[:open_quote], True
        piece = piece.translate(None, b" \t\n\r")
        # every value but the outermost follows a comma or opens a non-empty list or object
        values += (piece.count(b",") + piece.count(b"[") + piece.count(b"{")
                   - piece.count(b"[]") - piece.count(b"{}"))
    return NotebookCounts(cells=cells, code_cells=code_cells, values=values)


_PLAIN = rb'[^"\[\]]*'           # bytes that are neither a quote nor a bracket
_STRING = rb'"[^"]*"'              # a string, once escaped quotes and backslashes are masked


def _nested_lists(depth: int, items: int) -> bytes:
    """A pattern of a JSON list (in bytes whose escaped backslashes and quotes are masked) nesting
    lists at most `depth` deep, each of at most `items` strings and lists. No possessive repeats: each
    repeat is followed by bytes it cannot match and the items of a list start with distinct bytes, so
    a failed match gives its bytes back once; the bounds keep what the engine holds to backtrack (its
    memory) small whatever the file."""
    pattern = rb"\[" + _PLAIN + rb"(?:" + _STRING + _PLAIN + rb"){0,%d}\]" % items
    for _ in range(depth - 1):
        pattern = rb"\[" + _PLAIN + rb"(?:(?:" + _STRING + rb"|" + pattern + rb")" + _PLAIN + rb"){0,%d}\]" % items
    return pattern


_LIST_DEPTH = 3         # lists matched whole nest at most this deep and hold at most _LIST_ITEMS items each;
_LIST_ITEMS = 8         # the others are followed bracket by bracket
_OUTPUTS_KEY = re.compile(rb'"outputs"\s*:\s*(' + _nested_lists(_LIST_DEPTH, _LIST_ITEMS) + rb")?")
# from inside a list: up to 64 of its strings and lists matched whole, with the bytes between them;
# what stops it is a bracket, a quote (a string left for the next match, or one that does not end) or
# the end of the file
_SKIP = re.compile(_PLAIN + rb"(?:(?:" + _STRING + rb"|" + _nested_lists(_LIST_DEPTH, _LIST_ITEMS) + rb")"
                   + _PLAIN + rb"){0,64}")
_OPENING = re.compile(rb"\[+")
_CLOSING = re.compile(rb"\]+")


def _matched_to(pattern: re.Pattern[bytes], masked: bytes, pos: int) -> int:
    """Where `pattern` (one that matches wherever it is used) ends matching `masked` at `pos`."""
    match = pattern.match(masked, pos)
    assert match is not None
    return match.end()


def _list_end(masked: bytes, pos: int) -> int:
    """Where the list whose opening bracket ends at `pos` in `masked` ends (after its closing bracket),
    or -1 when a string or the file ends first: the runs of brackets outside strings are counted, the
    lists that _SKIP matches whole skipped. Linear in the bytes read."""
    depth = 1
    while depth:
        pos = _matched_to(_SKIP, masked, pos)
        byte = masked[pos:pos + 1]
        if byte == b"[":
            run = _matched_to(_OPENING, masked, pos)
            depth, pos = depth + run - pos, run
        elif byte == b"]":
            closed = min(_matched_to(_CLOSING, masked, pos) - pos, depth)
            depth, pos = depth - closed, pos + closed
        elif byte == b'"' and (end := masked.find(b'"', pos + 1)) >= 0:
            pos = end + 1
        else:
            return -1
    return pos


def without_outputs(data: bytes) -> bytes:
    """`data` with the list of every `"outputs"` key emptied (`[]`), found from the bytes without
    parsing them: what the grader reads of a notebook whose saved outputs hold too many values to
    parse (it never uses outputs). Escaped backslashes and quotes are masked with bytes of the same
    length (so every quote left opens or closes a string, and offsets stay those of `data`); a small
    list is matched whole, else its end is found by `_list_end`. A list that does not end (not valid
    JSON) is left as it is: the parse refuses it. Linear in the size of `data`."""
    masked = data.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    kept: list[bytes] = []
    start = pos = 0
    while (key := _OUTPUTS_KEY.search(masked, pos)) is not None:
        if key.group(1) is not None:
            kept += (data[start:key.start(1)], b"[]")
            start = pos = key.end()
            continue
        if masked[key.end():key.end() + 1] != b"[":
            pos = key.end()             # "outputs" is not followed by a list: left as it is
            continue
        pos = _list_end(masked, key.end() + 1)
        if pos < 0:
            break
        kept += (data[start:key.end()], b"[]")
        start = pos
    del masked
    kept.append(data[start:])
    return b"".join(kept)


def _too_many(name: str, counts: NotebookCounts) -> str:
    if counts.code_cells > MAX_CODE_CELLS:
        return (f"{name} has {counts.code_cells:,} code cells, more than the {MAX_CODE_CELLS:,} that can be graded, "
                f"so it was not run; remove generated cells and resubmit.")
    if counts.cells > MAX_CELLS:
        return (f"{name} has {counts.cells:,} cells (code, markdown and raw), more than the {MAX_CELLS:,} that can "
                f"be graded, so it was not run; remove generated cells and resubmit.")
    if counts.values > MAX_NOTEBOOK_VALUES:
        return (f"{name} holds about {counts.values:,} JSON values (cells, outputs, lines of text, metadata), more "
                f"than the {MAX_NOTEBOOK_VALUES:,} that can be graded, so it was not run; clear the outputs "
                f"(Kernel > Restart & Clear Output), remove generated cells and resubmit.")
    return ""


def _within_limits(name: str, data: bytes) -> tuple[str, bytes | None]:
    """`over_notebook_limits`'s reason for a grader (saved outputs not counted), and `data` without
    its outputs (`without_outputs`) when only they take it over MAX_NOTEBOOK_VALUES, else None."""
    counts = notebook_counts(data)
    if counts.values <= MAX_NOTEBOOK_VALUES:
        return _too_many(name, counts), None
    stripped = without_outputs(data)
    if notebook_counts(stripped).values > MAX_NOTEBOOK_VALUES or _too_many(name, replace(counts, values=0)):
        return _too_many(name, counts), None     # the reason as it always read, every value counted
    return "", stripped


def over_notebook_limits(name: str, data: bytes, *, outputs: bool = False) -> str:
    """Why the notebook file `data` (named `name` as shown_name writes it) is too costly to parse, or
    "": more than MAX_CODE_CELLS code cells, MAX_CELLS cells of any kind, or MAX_NOTEBOOK_VALUES JSON
    values. Such a notebook is not run, and its copy in autograded/ is a placeholder (never parsed).
    The values inside saved outputs count only with `outputs`, for a reader that parses them: a
    notebook over the limit with them and within it without them is graded (its outputs emptied
    before the parse), and its copy is annotated without its outputs; the reason then says so."""
    reason, stripped = _within_limits(name, data)
    if reason or stripped is None or not outputs:
        return reason
    return (f"{name}: its saved outputs hold more than {MAX_NOTEBOOK_VALUES:,} JSON values, too many to be "
            f"read for an annotated copy")


def over_notebook_limits_file(path: Path, max_bytes: int, *, outputs: bool = False) -> str:
    """`over_notebook_limits` for the regular file `path` (see read_regular); a file over `max_bytes`
    or that cannot be read gives that reason."""
    try:
        return over_notebook_limits(shown_name(path.name), read_regular(path, max_bytes), outputs=outputs)
    except RefusedFile as exc:
        return str(exc)


def is_real_dir(path: Path) -> bool:
    """True when `path` is a folder and not a symbolic link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def submission_entries(folder: Path) -> list[tuple[str, int]]:
    """(name, lstat mode) of every entry in `folder`, sorted by name; no link is followed.
    Empty when `folder` is not a real folder or cannot be listed."""
    if not is_real_dir(folder):
        return []
    out = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    out.append((entry.name, entry.stat(follow_symlinks=False).st_mode))
                except OSError:
                    continue
    except OSError:
        return []
    return sorted(out)


_DEF = re.compile(r"^(?:async\s+)?(def|class)\s+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class CodeCell:
    index: int                  # position among all cells of the notebook (0-based, markdown included)
    source: str
    label: str = ""             # how a student finds it: "the 3rd code cell (`def layer_norm`)"
    test_of: str = ""           # an nbgrader autograder-test cell (grade, not solution): its grade_id (not an
                                # earlier copy of one: that runs as any code cell)


def ordinal(n: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@lru_cache(maxsize=4096)
def cell_label(number: int, source: str, grade_id: str = "") -> str:
    """A student-facing name for the `number`-th code cell (counted from 1 over code cells only):
    the first function or class it defines, else its first line (cached: released cells repeat). A
    number of 0 is a cell that was not code in the student's notebook (put back as code, as released):
    it is named by its nbgrader `grade_id`."""
    base = f"the {ordinal(number)} code cell" if number else f"the cell `{grade_id}`"
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
    unread: bool = False        # the file itself could not be read as a notebook (refused, empty, not JSON, ...)

    @property
    def name(self) -> str:
        return self.path.name if self.path else "(none)"


def _test_of(cell: dict[str, Any]) -> str:
    """The grade_id of an nbgrader autograder-test cell (graded, not a solution), else ""."""
    meta = cell.get("metadata")
    nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
    if not isinstance(nbgrader, dict) or nbgrader.get("grade") is not True or nbgrader.get("solution"):
        return ""
    grade_id = nbgrader.get("grade_id")
    return grade_id if isinstance(grade_id, str) else ""


def cell_kind(cell: Any) -> str:
    """What an nbgrader cell with an id is, as its copies are named: "grade" (`grade: true`, also an
    answer that is graded), "answer" (`solution: true`), "read-only" (`locked: true`), else ""
    (the cells nbgrader's DeduplicateIds looks at: grade, solution or locked, with a grade_id)."""
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
    if not isinstance(nbgrader, dict) or not isinstance(nbgrader.get("grade_id"), str) or not nbgrader["grade_id"]:
        return ""
    for flag, kind in (("grade", "grade"), ("solution", "answer"), ("locked", "read-only")):
        if nbgrader.get(flag) is True:
            return kind
    return ""


def copied_cells(cells: list[Any]) -> dict[str, list[int]]:
    """nbgrader id -> the indexes of the cells holding it, for an id more than one nbgrader cell
    holds (a student copied a grade, answer or read-only cell). Of them, the LAST is kept (it keeps
    its nbgrader marking, grade and answer box) and the others are copies, as nbgrader's own
    DeduplicateIds does; for an answer, the last copy is also the one whose code ran last, so its
    definitions are the ones Python used and the graders called."""
    where: dict[str, list[int]] = {}
    for i, cell in enumerate(cells):
        if cell_kind(cell):
            where.setdefault(cell["metadata"]["nbgrader"]["grade_id"], []).append(i)
    return {grade_id: found for grade_id, found in where.items() if len(found) > 1}


_KEPT = {"grade": "Only the last holds its grade: the {copies} not graded.",
         "answer": "The last is taken as your answer{why}: the {copies} not.",
         "read-only": "Only the last is kept as that cell: the {copies} not."}
_RAN_LAST = (" (it ran last, so its definitions are the ones graded unless it stopped with an error "
             "before making them)")                 # said of a code cell alone


def copied_cell_notes(name: str, raw_cells: list[Any], source_key: str = "source",
                      submitted: list[Any] | None = None) -> list[str]:
    """A note per nbgrader id that more than one cell holds (see `copied_cells`), naming the cells
    and which one counts (the last, as in the autograded copy and formgrader). `submitted`: the cells
    as the student saved them, before `as_released`: the cells are named as the student sees them (their
    number among the code cells, their own text, not what was put back from the release)."""
    notes = []
    shown = raw_cells if submitted is None else submitted
    numbers = student_numbers(shown)
    for grade_id, found in copied_cells(raw_cells).items():
        labels = [_label(shown[i], numbers[i], source_text(shown[i].get(source_key, "")) or "")
                  if numbers[i] else f"a {_type_name(shown[i].get('cell_type'))} cell" for i in found]
        last = raw_cells[found[-1]]
        kind = cell_kind(last)
        kept = _KEPT[kind].format(why=_RAN_LAST if last.get("cell_type") == "code" else "",
                                  copies="copy is" if len(found) == 2 else "copies are")
        notes.append(f"{name}: the {kind} cell `{grade_id}` appears {len(found)} times ({'; '.join(labels)}); "
                     f"was it copied, or its nbgrader metadata edited? {kept}")
    return notes


def student_numbers(submitted: list[Any]) -> list[int]:
    """For each cell of `submitted` (the cells as the student saved them), its number among the code
    cells as the student counts them in Jupyter (from 1), or 0 for a cell that was not code there."""
    numbers, number = [], 0
    for cell in submitted:
        is_code = isinstance(cell, dict) and cell.get("cell_type") == "code"
        number += is_code
        numbers.append(number if is_code else 0)
    return numbers


def _label(cell: dict[str, Any], number: int, source: str) -> str:
    """`cell_label` for a cell run as code, whose number the student sees (0: put back as code)."""
    grade_id = cell_kind(cell) and cell["metadata"]["nbgrader"]["grade_id"]
    return cell_label(number, source, grade_id or "")


_Redefinition = tuple[str, str, str]     # (function, the cell it was defined in, the cell defining it again): `_key`s


def _key(cell: dict[str, Any], source: str) -> str:
    """A cell as the released notebook and a submission can both hold it: an nbgrader cell by its id (its
    answer changes), another by its source."""
    return f"id:{cell['metadata']['nbgrader']['grade_id']}" if cell_kind(cell) else f"source:{source}"


def _redefinitions(raw_cells: list[Any], source_key: str, released: frozenset[_Redefinition] | None,
                   submitted: list[Any] | None = None
                   ) -> tuple[dict[str, tuple[str, str, str | None]], set[_Redefinition]]:
    """Walk the code cells in order, as they run, following each function first defined by an answer or
    given (read-only) cell. Returns ({function: (kind, label of that cell, label of the later cell whose
    definition is the one run last, if not a copy of that cell nor a redefinition `released` holds)},
    the redefinitions seen). With `released` None (read from the released notebook), every redefinition
    is the release's own."""
    owner: dict[str, tuple[str, str, str]] = {}    # function -> (key, kind, label) of its answer or given cell
    last: dict[str, str | None] = {}               # function -> label of the cell defining it again, run last
    seen: set[_Redefinition] = set()
    numbers = student_numbers(raw_cells if submitted is None else submitted)
    for cell, number in zip(raw_cells, numbers, strict=True):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = source_text(cell.get(source_key, "")) or ""
        # read from the lines that begin with `def` (cheap), then, for a function defined again, from the
        # syntax tree as the sandbox runs the cell (a cell that does not compile defines nothing)
        functions = [m.group(2) for m in _DEF.finditer(source) if m.group(1) == "def"]
        if not functions:
            continue
        kind, key, label = cell_kind(cell), _key(cell, source), _label(cell, number, source)
        for function in functions:
            first = owner.get(function)
            if first is None:
                if kind in ("answer", "read-only"):
                    owner[function], last[function] = (key, kind, label), None
                continue
            if function not in defined_functions(source):
                continue
            if key == first[0]:                     # a copy of that cell: its definition is the one run
                owner[function], last[function] = (key, first[1], label), None
                continue
            seen.add((function, first[0], key))
            if released is None or (function, first[0], key) in released:
                if kind in ("answer", "read-only"):     # the release's own: this cell is meant to replace it
                    owner[function] = (key, kind, label)
                last[function] = None
            else:
                last[function] = label
    return {f: (kind, where, last[f]) for f, (_, kind, where) in owner.items()}, seen


def released_redefinitions(path: Path | None) -> frozenset[_Redefinition] | None:
    """The functions that the released notebook at `path` itself defines again in a later cell (a given
    stub its answer cell replaces, a helper two given cells define); None when it cannot be read."""
    stamp = file_stamp(path)
    return None if path is None or stamp is None else _released_redefinitions(path, stamp)


@lru_cache(maxsize=16)
def _released_redefinitions(path: Path, stamp: tuple[int, int]) -> frozenset[_Redefinition] | None:
    cells = released_cells(path)
    if cells is None:
        return None
    try:
        return frozenset(_redefinitions(list(cells), "source", None)[1])
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def redefined_notes(name: str, raw_cells: list[Any], source_key: str = "source",
                    released: frozenset[_Redefinition] | None = None, submitted: list[Any] | None = None
                    ) -> list[str]:
    """A note per function that an answer cell or a given (read-only) cell defines and a later code cell,
    not a copy of that cell, defines again, naming the cell whose definition runs last: that one is the
    definition Python keeps, so it is the one graded and the one the notebook's other functions call,
    whatever the first one says. A redefinition the released notebook itself makes (`released`, from
    `released_redefinitions`: a given stub an answer cell replaces, a helper two given cells define) is
    not the student's, so it is not noted; nor is one followed by a copy of the first cell, which runs
    last. `submitted`: the cells as the student saved them (cells are numbered as the student counts them)."""
    notes = []
    found = _redefinitions(raw_cells, source_key, released or frozenset(), submitted)[0]
    for function, (kind, where, label) in found.items():
        if label is None:
            continue
        if kind == "answer":
            notes.append(f"{name}: `{function}`, written in its answer cell ({where}), is defined again in {label}, "
                         f"which runs after it: that later definition is the one graded, and the one your other "
                         f"functions call.")
        else:
            notes.append(f"{name}: `{function}`, given in {where}, is defined again in {label}: your functions "
                         f"call that later definition, not the given one.")
    return notes


_TYPE_NAMES = {"code": "code", "markdown": "Markdown", "raw": "Raw"}


def _type_name(cell_type: Any) -> str:
    return _TYPE_NAMES.get(cell_type, truncate(str(cell_type), 20)) if isinstance(cell_type, str) else "typeless"


def _released_nbgrader_cells(released: tuple[Any, ...] | None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The released notebook's nbgrader cells (grade, answer or read-only, with an id): ({grade_id: cell},
    {the cell's Jupyter id: its grade_id})."""
    by_id: dict[str, dict[str, Any]] = {}
    by_cell_id: dict[str, str] = {}
    for cell in released or ():
        if cell_kind(cell) and cell.get("cell_type") in _TYPE_NAMES:
            grade_id = cell["metadata"]["nbgrader"]["grade_id"]
            by_id[grade_id] = cell
            if isinstance(cell.get("id"), str) and cell["id"]:
                by_cell_id[cell["id"]] = grade_id
    return by_id, by_cell_id


def _paired(raw_cells: list[Any], by_id: Mapping[str, Any], by_cell_id: Mapping[str, str]) -> dict[int, str]:
    """Submitted cell index -> the grade_id of the released nbgrader cell it stands for: the cell whose
    nbgrader metadata holds that id, or, when its metadata names no released id (removed, changed), whose
    Jupyter cell id is that released cell's. Of several cells standing for one, only the last (the others
    are copies, as nbgrader's DeduplicateIds has it)."""
    last: dict[str, int] = {}
    for i, cell in enumerate(raw_cells):
        if not isinstance(cell, dict):
            continue
        meta = cell.get("metadata")
        nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
        grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
        if not (isinstance(grade_id, str) and grade_id in by_id):
            cell_id = cell.get("id")
            grade_id = by_cell_id.get(cell_id) if isinstance(cell_id, str) else None
        if grade_id is not None:
            last[grade_id] = i
    return {i: grade_id for grade_id, i in last.items()}


def _holds(cell: Any, grade_id: str) -> bool:
    """Whether `cell` is an nbgrader cell (`cell_kind`) whose nbgrader metadata holds `grade_id`."""
    return bool(cell_kind(cell)) and cell["metadata"]["nbgrader"]["grade_id"] == grade_id


def _text_of(cell: dict[str, Any], source_key: str) -> str | None:
    """A cell's text, whatever its type (format 3 keeps a code cell's in `input`, others' in `source`)."""
    return source_text(cell.get(source_key if cell.get("cell_type") == "code" else "source", ""))


def _saved_again(text: str) -> str:
    """`text` as it reads whatever editor saved it: "\n" for every line end, no spaces at a line's end, no
    blank lines at the end."""
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")).rstrip()


def _same_lines(a: str, b: str) -> bool:
    """Whether two cells' texts differ only where an editor saving them again would (`_saved_again`): the
    same code, which runs the same."""
    return _saved_again(a) == _saved_again(b)


def _same_code(a: str, b: str) -> bool:
    """Whether two cells' texts differ in whitespace alone: line ends, spaces at line ends, blank lines
    before and after (a stub an editor saved again)."""
    return _saved_again(a).lstrip() == _saved_again(b).lstrip()


def as_released(name: str, raw_cells: list[Any], source_key: str, released: tuple[Any, ...] | None,
                replaced: frozenset[str] = frozenset()) -> tuple[list[Any], list[str]]:
    """The submitted cells as grading runs them, with what nbgrader's autograde puts back from the
    release (its OverwriteCells): each cell standing for a released nbgrader cell (`_paired`) takes that
    cell's type (an answer cell turned into Markdown or Raw runs as code), and a locked cell also its
    released source: a read-only cell (`locked`, not an answer) and an autograder-test cell (a grade cell
    that is not an answer, which nbgrader counts as locked whatever its `locked` says). The release is
    trusted, the submitted metadata is not: what a cell is comes from the release alone, and a cell put
    back takes the released nbgrader metadata too. A test cell whose grade id is one of `replaced` (the
    hidden graders replace it) is not run, whatever the student made of it: it is put back all the same,
    noted when its type changed or the student edited it (what they wrote in it does not run either). An
    answer cell made Markdown or Raw holding the released stub alone is left as it is (not run); when a code
    cell above it holds its id (the student's copy of it, run), that copy is the answer: the stub loses its
    nbgrader metadata, so that the copy notes and the copy for formgrader take that copy as the answer cell,
    as grading does. A cell neither submitted nor released as code is left as it is: grading does not read
    it. One note per cell changed; cells are named as the student saved them."""
    by_id, by_cell_id = _released_nbgrader_cells(released)
    if not by_id:
        return raw_cells, []
    out, notes = list(raw_cells), []
    numbers = student_numbers(raw_cells)
    for i, grade_id in sorted(_paired(raw_cells, by_id, by_cell_id).items()):
        cell, was = raw_cells[i], by_id[grade_id]
        flags = was["metadata"]["nbgrader"]
        answer = flags.get("solution") is True
        test = flags.get("grade") is True and not answer
        locked = not answer and (test or flags.get("locked") is True)      # nbgrader's `is_locked`
        typed, kind = cell.get("cell_type"), was["cell_type"]
        text = _text_of(cell, source_key)
        given = source_text(was.get("source", "")) if locked and kind == "code" else None
        if given is not None and text is not None and _same_lines(text, given) and typed == kind:
            if text != given:       # saved again by an editor (line ends, spaces): run as released, unsaid
                out[i] = {**cell, source_key: given}
            continue
        if (given is None and typed == kind) or "code" not in (typed, kind):    # nothing of it would run
            continue
        if (answer and kind == "code" and text is not None
                and _same_code(text, source_text(was.get("source", "")) or "")):
            # the released stub, switched off: nothing of the student's is in it, and running it could only
            # undo their work (their own definition in another cell)
            said = (f"{name}: cell `{grade_id}` was a {_type_name(typed)} cell holding the released stub alone: "
                    f"left as you made it (not run).")
            copies = [j for j in range(i) if _holds(out[j], grade_id) and out[j].get("cell_type") == "code"]
            meta = cell.get("metadata")
            if copies and isinstance(meta, dict):
                out[i] = {**cell, "metadata": {k: v for k, v in meta.items() if k != "nbgrader"}}
                j = copies[-1]
                label = _label(out[j], numbers[j], _text_of(out[j], source_key) or "")
                said += f" Your copy of it above, {label}, is taken as your answer."
            notes.append(said)
            continue
        restored = {k: v for k, v in cell.items() if k not in ("cell_type", "source", "input", "metadata")}
        meta = cell.get("metadata")
        restored["metadata"] = {**(meta if isinstance(meta, dict) else {}), "nbgrader": was["metadata"]["nbgrader"]}
        restored["cell_type"] = kind
        restored[source_key if kind == "code" else "source"] = (
            given if given is not None else cell.get(source_key if typed == "code" else "source", ""))
        out[i] = restored
        retyped = typed != kind
        if test and grade_id in replaced and kind == "code":     # not run, neither as released nor as submitted
            if text is not None and given is not None and not _same_lines(text, given):
                which = (f"was a {_type_name(typed)} cell and was edited" if retyped else
                         f"was edited ({_label(cell, numbers[i], text)})")
                notes.append(f"{name}: test cell `{grade_id}` {which}: it was replaced by the released test cell, "
                             f"which is not run (hidden tests check this problem), so nothing you wrote in it ran.")
            elif retyped:
                notes.append(f"{name}: cell `{grade_id}` was a {_type_name(typed)} cell: put back as code, as "
                             f"released.")
        elif given is not None:
            what = f"was a {_type_name(typed)} cell" if retyped else "was edited"
            if retyped and text is not None and given is not None and not _same_lines(text, given):
                what += " and was edited"
            # said to be put back, not run: the cell plan may leave the released cell out (`autograder.cellplan`)
            back = "put back as code, as released" if retyped and kind == "code" else "put back as released"
            notes.append(f"{name}: locked cell `{grade_id}` {what}: {back} (grading uses a locked cell as released).")
        elif kind == "code":
            notes.append(f"{name}: cell `{grade_id}` was a {_type_name(typed)} cell: run as code, as released.")
        else:
            notes.append(f"{name}: cell `{grade_id}` was a code cell: not run, as released (a {_type_name(kind)} "
                         f"cell).")
    return out, notes


# What an editor saving "UTF-8 with BOM" writes first. Not stripped: nbformat, and so Jupyter and
# nbgrader's own commands, refuse such a file, so a student is told to save it again instead.
UTF8_BYTE_ORDER_MARK = b"\xef\xbb\xbf"


def _unreadable(path: Path | None, reason: str) -> LoadedNotebook:
    return LoadedNotebook(path=path, cells=(), notes=(reason,), readable=False, unread=True)


def load_notebook(path: Path, *, max_mb: float, release: Path | None = None,
                  functions: tuple[str, ...] = (), replaced: frozenset[str] = frozenset()) -> LoadedNotebook:
    """Read a submitted notebook (nbformat 4, or 3 converted) into its code cells. Notes name it as
    shown_name writes it (a submitted name may hold control characters). `release`: the released
    notebook it was made from, if known (what the release itself does is not noted as the student's;
    a function of `functions`, the graded ones, whose parameters do not fit its released def line is,
    as the cells that run define it: not the autograder-test cells whose grade ids are `replaced`)."""
    name = shown_name(path.name)
    try:
        data_bytes = read_regular(path, int(max_mb * 1024 * 1024))
    except RefusedFile as exc:
        reason = str(exc)
        if "MB limit" in reason:
            reason += (", so it was not run; clear large outputs (Kernel > Restart & Clear Output) "
                       "and resubmit.")
        return _unreadable(path, reason)
    if not data_bytes:
        return _unreadable(path, f"{name} is an empty file; nothing could be graded.")
    too_costly, stripped = _within_limits(name, data_bytes)
    if too_costly:
        return _unreadable(path, too_costly)
    if data_bytes.startswith(UTF8_BYTE_ORDER_MARK):
        return _unreadable(path, f"{name} starts with a byte-order mark, an invisible mark that some editors (such as "
                                 f"Windows Notepad) put at the start of a file; Jupyter cannot open such a file "
                                 f"either, so nothing was graded. Save it again as UTF-8 without BOM (in Notepad: "
                                 f"Save As, Encoding \"UTF-8\"), or submit the copy Jupyter last saved, and resubmit.")
    outputs_note = ""
    if stripped is not None:            # within the limits without its outputs
        data_bytes = stripped
        outputs_note = (f"{name}: its saved outputs hold more than {MAX_NOTEBOOK_VALUES:,} JSON values (printed "
                        f"lines, outputs), too many to read: they were left out (grading never uses them), and the "
                        f"copy kept for your instructors has no feedback written into it; clear the outputs "
                        f"(Kernel > Restart & Clear Output) before submitting.")
    try:
        raw = data_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return _unreadable(path, f"{name} is not a text file (not UTF-8); it is not a notebook.")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        return _unreadable(path, f"{name} is not valid notebook JSON (line {exc.lineno}, column {exc.colno}: "
                                 f"{exc.msg}); was it edited outside Jupyter or saved half-way?")
    except RecursionError:
        return _unreadable(path, f"{name} nests its JSON too deeply to be a notebook; it was not read.")
    except ValueError:      # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        return _unreadable(path, f"{name} holds a number of more than {sys.get_int_max_str_digits():,} digits, "
                                 f"which Jupyter never writes; it was not read (was it edited outside Jupyter?).")
    if not isinstance(data, dict):
        return _unreadable(path, f"{name} is JSON but not a notebook (no top-level object).")
    notes: list[str] = [outputs_note] if outputs_note else []
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
    elif isinstance(major, int) and not isinstance(major, bool):
        return _unreadable(path, f"{name} has notebook format {major!r}; only formats 3 and 4 can be read.")
    else:                       # "4", 4.0, null, missing: nbformat reads none of them either
        given = "no notebook format" if major is None else f"the notebook format {truncate(json.dumps(major), 40)}"
        return _unreadable(path, f"{name} has {given}; it must be the integer 4 (or 3), as Jupyter writes it: "
                                 f"was it edited outside Jupyter?")

    submitted = raw_cells
    raw_cells, restored = as_released(name, raw_cells, source_key, released_cells(release), replaced)
    notes += restored
    code_cells = sum(1 for c in raw_cells if isinstance(c, dict) and c.get("cell_type") == "code")
    if code_cells > MAX_CODE_CELLS:
        return _unreadable(path, f"{name} has {code_cells:,} code cells, more than the {MAX_CODE_CELLS:,} that can "
                                 f"be graded, so it was not run; remove generated cells and resubmit.")
    cells: list[CodeCell] = []
    skipped: list[str] = []     # the code cells whose source is not text, named as a student finds them
    numbers = student_numbers(submitted)    # code cells as the student counts them (0: put back as code)
    # of the cells holding one nbgrader id, only the last is that cell (as nbgrader's DeduplicateIds has it): an
    # earlier copy of a test cell runs as any code cell
    copies = {i for found in copied_cells(raw_cells).values() for i in found[:-1]}
    for i, cell in enumerate(raw_cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = source_text(cell.get(source_key, ""))
        if src is None:
            cell_id = cell.get("id")
            named = f" (id {truncate(shown_name(cell_id), 40)!r})" if isinstance(cell_id, str) and cell_id else ""
            # a cell put back as code (0) is named by its grade_id, as the release gives it one
            shown = ordinal(numbers[i]) if numbers[i] else f"`{cell['metadata']['nbgrader']['grade_id']}`"
            skipped.append(f"{shown}{named}")
            continue
        cells.append(CodeCell(index=i, source=src, label=_label(cell, numbers[i], src),
                              test_of="" if i in copies else _test_of(cell)))
    notes += copied_cell_notes(name, raw_cells, source_key, submitted)
    notes += redefined_notes(name, raw_cells, source_key, released_redefinitions(release), submitted)
    # the autograder-test cells that hidden graders replace are not run (a def typed into one is not graded)
    notes += def_line_notes(name, [(c.source, c.label) for c in cells if c.test_of not in replaced], functions,
                            release)
    if skipped:
        notes.append(_skipped_note(name, skipped))
    if not cells:
        notes.append(f"{name} has no code cells; none of your functions could be found.")
    return LoadedNotebook(path=path, cells=tuple(cells), notes=tuple(notes), readable=bool(cells))


def _skipped_note(name: str, skipped: list[str], shown: int = 5) -> str:
    """The note on the code cells (`skipped`: "2nd", "5th (id 'a1b2')") whose source is not text."""
    listed = skipped[:shown] + ([f"{len(skipped) - shown} more"] if len(skipped) > shown else [])
    which = listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} and {listed[-1]}"
    cells, were = ("code cell", "was") if len(skipped) == 1 else ("code cells", "were")
    return (f"{name}: the {which} {cells} had malformed source (not text, as Jupyter saves it) and {were} "
            f"skipped.")


# what Jupyter ("-Copy1"), a file manager (" copy", " copy 2", "_copy"), a browser or an LMS download
# (" (1)", "(1)") and a drive ("Copy of ") add to a file's name when they copy it
_COPY_PREFIX = r"(?:copy\s+of\s+)*"
_COPY_SUFFIX = r"(?:[-_ ]copy(?:\s*\d+)?|\s*\(\d+\))*"


def named_like(name: str, expected: str) -> bool:
    """Whether the submitted notebook `name` bears the name a copy of the expected notebook gets, in
    any case: the expected name without its extension, with what Jupyter, a file manager, a browser
    or an LMS download adds to a copy ("hw-Copy1.ipynb", "hw-Copy1 (2).ipynb", "hw (1).ipynb",
    "hw(1).ipynb", "Copy of HW.ipynb", "hw copy.ipynb", "hw_copy.ipynb"), maybe with spaces around it.
    Any other name is not: "lab10.ipynb" is not named like lab1.ipynb, nor "hw3_backup_old.ipynb" like
    hw3.ipynb, nor "hw1.ipynb" like hw.ipynb."""
    stem = Path(expected).stem
    if not stem.strip():
        return False
    pattern = _COPY_PREFIX + re.escape(stem.strip()) + _COPY_SUFFIX
    return re.fullmatch(pattern, Path(name).stem.strip(), re.IGNORECASE) is not None


def _like(paths: list[Path], expected: str) -> list[Path]:
    """The notebooks of `paths` named like `expected` (`named_like`)."""
    return [p for p in paths if named_like(p.name, expected)]


def find_submission_notebooks(folder: Path,
                              expected: tuple[str, ...]) -> tuple[dict[str, Path | None], tuple[str, ...]]:
    """Match the notebooks in a submission folder to the assignment's expected names.

    Returns ({expected name: path or None}, notes). A single notebook under another name stands in
    for a single expected one (students rename files), with a note; so does, among several, the only
    one named like the expected one (a renamed copy beside a scratch "Untitled.ipynb").
    """
    entries = [(n, m) for n, m in submission_entries(folder) if is_notebook_name(n)]
    present = [folder / n for n, m in entries if stat.S_ISREG(m) and utf8_name(n)]
    refused = {n: m for n, m in entries if not stat.S_ISREG(m)}
    found: dict[str, Path | None] = {}
    notes: list[str] = [f"{shown_name(n)} is {_kind(m)}, not a regular file, so it was not graded; submit the "
                        f"notebook file itself." for n, m in refused.items() if utf8_name(n)]
    notes += [f"{shown_name(n)}: its file name is not valid UTF-8, so it was not graded; rename it to "
              f"{' or '.join(expected)} and resubmit." for n, _ in entries if not utf8_name(n)]
    unmatched = [p for p in present if p.name not in expected]
    for name in expected:
        path = folder / name
        if name in refused:
            found[name] = None
        elif path in present:
            found[name] = path
        elif len(expected) == 1 and (len(unmatched) == 1 or len(like := _like(unmatched, name)) == 1):
            stand_in = unmatched[0] if len(unmatched) == 1 else like[0]
            unmatched.remove(stand_in)
            found[name] = stand_in
            notes.append(f"Expected {name}; graded {shown_name(stand_in.name)} instead (please keep the file name).")
        else:
            found[name] = None
            notes.append(f"{name} was not submitted.")
    for extra in unmatched:
        name = next((name for name in expected if named_like(extra.name, name)), "")
        if not name:
            notes.append(f"{shown_name(extra.name)} is not part of this assignment and was ignored.")
        elif found.get(name) is not None:
            notes.append(f"{shown_name(extra.name)}, named like {name}, was not graded: only {name} was. If it is "
                         f"the version you meant to submit, name it {name} (and remove the other) and resubmit.")
        elif len(_like(unmatched, name)) > 1:
            notes.append(f"{shown_name(extra.name)}, named like {name}, was not graded: several notebooks are named "
                         f"like it, so none was taken for it. Keep one, named {name}, and resubmit.")
        else:
            notes.append(f"{shown_name(extra.name)}, named like {name}, was not graded; name it {name} and "
                         f"resubmit.")
    return found, tuple(notes)
