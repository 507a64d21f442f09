"""The def lines of a notebook's functions, read from the cells' source with `ast` (never run), and
the note for a graded function whose parameters do not fit the def line of the released notebook.

The hidden checks may pass an argument by position, so a parameter renamed (`epsilon` for `eps`)
loses no points there; but code written for the released def line (the instructors', the course's
later notebooks) names parameters and leaves out those with defaults, and fails or works differently
with a function that renamed, reordered or dropped them. Such a difference is a note, not a
deduction. A function's definition is the last top-level binding of its name in the cells, in
order, as the sandbox runs them: a `def` without decorators gives its def line; anything else that
binds the name (a decorated `def`, an assignment, an import, a `global` in a function) leaves it
unknown, and nothing is said.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .cellplan import cell_source, file_stamp, parse_as_run, released_cells
from .text import code_excerpt

SHOWN = 120         # at most this many characters of a def line are quoted
# At most this many characters of a notebook's cells are parsed on the grader's side (100,000 of one
# list literal take ~0.2-0.4 s and tens of megabytes to parse; a 20 MB notebook of such cells would cost
# a grading worker a minute): a cell past this budget is not parsed, and a graded function it names is
# taken as bound there, unknown. The cells that name no graded function are not parsed and cost nothing.
MAX_PARSED = 100_000
CACHED = 10_000     # only cells at most this long are kept in top_level_bindings' cache


@dataclass(frozen=True, slots=True)
class DefLine:
    """A function's parameters as its def line has them (annotations left out)."""
    text: str                                        # "def layer_norm(x, gamma, beta, eps=1e-5)", as written
    positional: tuple[tuple[str, bool, bool], ...]   # (name, positional only, has a default), in order
    star_args: bool                                  # takes *args
    keyword_only: tuple[tuple[str, bool], ...]       # (name, has a default)
    star_kwargs: bool                                # takes **kwargs


def fits(mine: DefLine, released: DefLine) -> bool:
    """Whether `mine` keeps the released parameters: the same positional parameters in the same order,
    each with its name and with a default exactly where the release has one; the same keyword-only
    ones; *args and **kwargs where the release takes them. Parameters added after them fit when each
    has a default (or is *args or **kwargs): every call written for the released def line still binds
    its arguments as it would there."""
    count = len(released.positional)
    if mine.positional[:count] != released.positional:
        return False
    added = mine.positional[count:]
    if added and (released.star_args or not all(default for _, _, default in added)):
        return False
    if (released.star_args and not mine.star_args) or (released.star_kwargs and not mine.star_kwargs):
        return False
    keyword_only = dict(mine.keyword_only)
    for name, default in released.keyword_only:
        if name not in keyword_only or keyword_only.pop(name) != default:
            return False
    return all(keyword_only.values())


DEFAULT_SHOWN = 24  # a default written longer than this is quoted as `…` (the parameters after it stay visible)


def _source_lines(source: str) -> list[bytes]:
    """The cell's lines as `ast` counts them (ended by \\n, \\r\\n or \\r), encoded: an ast node's
    columns are UTF-8 byte offsets. Split once per cell (`ast.get_source_segment` splits the whole cell
    again for every node it is asked about: thousands of defaults made that minutes)."""
    return source.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8", "surrogatepass").split(b"\n")


def _written(node: ast.expr, lines: Sequence[bytes]) -> str | None:
    """How `node` is written in the cell whose `_source_lines` are `lines` (None past a few lines)."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    if node.end_col_offset is None or last - first > 3 or last >= len(lines):
        return None
    if first == last:
        text = lines[first][node.col_offset:node.end_col_offset]
    else:
        text = b"\n".join([lines[first][node.col_offset:], *lines[first + 1:last], lines[last][:node.end_col_offset]])
    return text.decode("utf-8", "replace")


def _shown(name: str, default: ast.expr | None, lines: Sequence[bytes]) -> str:
    if default is None:
        return name
    written = " ".join((_written(default, lines) or "\u2026").split())
    return f"{name}={written if len(written) <= DEFAULT_SHOWN else chr(0x2026)}"


def def_line(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: Sequence[bytes]) -> DefLine:
    """The DefLine of a `def` parsed from a cell whose `_source_lines` are `lines` (its defaults quoted
    as written there, a long one as `…`)."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += args.defaults
    parts = []
    for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        parts.append(_shown(arg.arg, default, lines))
        if i == len(args.posonlyargs) - 1:
            parts.append("/")
    if args.vararg is not None:
        parts.append(f"*{args.vararg.arg}")
    elif args.kwonlyargs:
        parts.append("*")
    parts += [_shown(arg.arg, default, lines) for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if args.kwarg is not None:
        parts.append(f"**{args.kwarg.arg}")
    keyword = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    text = code_excerpt(f"{keyword} {node.name}({', '.join(parts)})".replace("`", "'"), SHOWN)
    return DefLine(
        text=text,
        positional=tuple((arg.arg, i < len(args.posonlyargs), default is not None)
                         for i, (arg, default) in enumerate(zip(positional, defaults, strict=True))),
        star_args=args.vararg is not None,
        keyword_only=tuple((arg.arg, default is not None) for arg, default in zip(args.kwonlyargs, args.kw_defaults,
                                                                                   strict=True)),
        star_kwargs=args.kwarg is not None)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)


def _names_bound(statement: ast.stmt) -> list[str]:
    """The names a top-level statement binds in the notebook's namespace (not in the scopes it opens,
    but a function's or class's own name, and every name a function inside declares `global`)."""
    names: list[str] = []
    todo: list[ast.AST] = [statement]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.append(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(alias.asname or alias.name).split(".")[0] for alias in node.names]
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.append(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.append(node.rest)
        if isinstance(node, _SCOPES):
            # a scope of its own binds nothing outside but its name and what it declares global
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
            names += [name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names]
            continue
        todo += ast.iter_child_nodes(node)
    return names


def top_level_bindings(source: str) -> tuple[tuple[str, DefLine | None], ...]:
    """What a cell binds at its top level, in order, as the sandbox runs it: (name, its DefLine) for a
    plain `def`, (name, None) for any other binding (a decorated `def` included). Empty for a cell
    that runs nothing (it does not parse, a cell magic skips it)."""
    return _cached_bindings(source) if len(source) <= CACHED else _bindings(source)


@lru_cache(maxsize=512)          # the released cells, met again in every submission (short ones only: bounded)
def _cached_bindings(source: str) -> tuple[tuple[str, DefLine | None], ...]:
    return _bindings(source)


def _bindings(source: str) -> tuple[tuple[str, DefLine | None], ...]:
    tree = parse_as_run(source)
    if tree is None:
        return ()
    lines = _source_lines(source)
    out: list[tuple[str, DefLine | None]] = []
    try:
        for statement in tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and not statement.decorator_list:
                out += [(name, None) for name in _names_bound(statement) if name != statement.name]
                out.append((statement.name, def_line(statement, lines)))
            else:
                out += [(name, None) for name in _names_bound(statement)]
    except (RecursionError, MemoryError):       # a default nested too deeply to write out
        return ()
    return tuple(out)


def last_bindings(sources: Iterable[str], functions: Sequence[str]) -> dict[str, tuple[int, DefLine | None]]:
    """For each of `functions` that a cell of `sources` binds at its top level: (the index of the last
    cell binding it, in run order, and its DefLine there, or None when that binding is not a plain def
    or the cell is past the notebook's parsing budget, `MAX_PARSED` characters of the cells that name
    one of `functions`)."""
    out: dict[str, tuple[int, DefLine | None]] = {}
    budget = MAX_PARSED
    for index, source in enumerate(sources):
        named = [function for function in functions if function in source]
        if not named:                               # most cells: nothing to parse
            continue
        budget -= len(source)
        bound: Sequence[tuple[str, DefLine | None]] = (top_level_bindings(source) if budget >= 0
                                                       else [(name, None) for name in named])
        for name, line in bound:
            if name in functions:
                out[name] = (index, line)
    return out


def released_def_lines(path: Path | None) -> dict[str, DefLine | None] | None:
    """The last binding of every name the released notebook at `path` binds at the top level of a code
    cell: its DefLine, or None when not a plain def; None when the release cannot be read."""
    stamp = file_stamp(path)
    return None if path is None or stamp is None else _released_def_lines(path, stamp)


@lru_cache(maxsize=16)
def _released_def_lines(path: Path, stamp: tuple[int, int]) -> dict[str, DefLine | None] | None:
    cells = released_cells(path)
    if cells is None:
        return None
    out: dict[str, DefLine | None] = {}
    for cell in cells:
        source = cell_source(cell)
        if source is not None:
            out.update(top_level_bindings(source))
    return out


def def_line_notes(name: str, cells: Sequence[tuple[str, str]], functions: Sequence[str],
                   release: Path | None) -> list[str]:
    """A note per function of `functions` (the graded ones, in order) whose definition in the notebook
    `name` (its code `cells`: (source, how a student finds the cell), in run order) does not fit
    (`fits`) the def line of the released notebook at `release`, quoting both def lines. Nothing when
    the release cannot be read, when either definition is not a plain def, or when the notebook does
    not define the function (that is said elsewhere)."""
    released = released_def_lines(release) if functions else None
    if not released:
        return []
    mine = last_bindings([source for source, _ in cells], functions)
    notes = []
    for function in dict.fromkeys(functions):
        given, (index, line) = released.get(function), mine.get(function, (0, None))
        if given is None or line is None or fits(line, given):
            continue
        notes.append(f"{name}: `{function}` is defined as `{line.text}` in {cells[index][1]}, but its def line in "
                     f"the released notebook is `{given.text}`. Code written for the released def line (your "
                     f"instructors' code, the course's later notebooks) may pass arguments by their released "
                     f"names or leave out those with a default, and would then fail or work differently with "
                     f"yours: keep its parameters, their names, order and defaults, as given.")
    return notes
