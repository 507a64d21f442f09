"""Which of a submission's code cells grading needs to run, decided from the source alone.

A cell is left out only when nothing grading sees can depend on it. That is decided here, on the
trusted side, from each cell's syntax tree (never running it), and conservatively: anything
unclear runs. A cell is left out when all of these hold:

- its source is exactly that of a code cell of the released notebook that is not a solution cell
  (the instructor's demonstration and public-check cells, unchanged);
- at its top level it imports nothing, defines no class, declares nothing `global`, stores into
  no attribute or item, and has no decorator;
- every global it reads is one of: a module (`numpy`, `math`, `warnings`, bound only by `import`
  statements) of which it uses only listed pure attributes (and `warnings.simplefilter` only
  inside `with warnings.catch_warnings()`); a listed builtin; a function of the notebook (bound
  only by `def`s) whose body is *plain* (below); or a value that no cell that runs and no
  function of the notebook reads (so that changing it, e.g. drawing from a random generator,
  cannot matter);
- no name it binds is read by a cell that runs, by a function of the notebook, or by the graders;
- every global it reads, itself or through the notebook's functions it calls, is bound by an
  earlier cell (a cell that would raise NameError, e.g. in a notebook whose cells were reordered,
  runs, so that the student sees the note).

A function is plain when its body declares nothing global or nonlocal, imports nothing, defines
no class, stores into no attribute or item of an object it did not create locally, and reads no
global but pure module attributes, listed builtins and plain functions.

If any cell or function reaches names indirectly (`globals()`, `eval`, `setattr`, `__dict__`,
`from m import *`, ...), nothing is left out. A cell is read as the sandbox runs it: a cell magic
other than `%%time`/`%%capture` skips it; magic and shell lines become `pass` when the cell does
not parse otherwise; a cell that still does not parse raises SyntaxError there and runs nothing.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import json
import symtable
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import usercache

MODULES = ("numpy", "math", "warnings")



def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Attributes of each module that read or compute without changing any state.
PURE_ATTRIBUTES: dict[str, frozenset[str]] = {
    "numpy": _words("""
        abs absolute all allclose any arange arccos arcsin arctan arctan2 argmax argmin argsort around
        array array_equal asarray atleast_1d atleast_2d broadcast_to ceil clip concatenate copy cos cosh
        cumsum diag diff divide dot dtype e einsum empty empty_like equal exp expand_dims expm1 eye finfo
        flip float16 float32 float64 floating floor full full_like greater iinfo inf int32 int64 integer
        isclose isfinite isinf isnan less linspace log log1p logical_and logical_not logical_or matmul max
        maximum mean min minimum moveaxis multiply nan ndarray ndim newaxis number ones ones_like outer pi
        power prod ravel reshape round shape sign sin sinh size sqrt square squeeze stack std subtract sum
        swapaxes take tanh tile transpose tril triu var where zeros zeros_like __version__
        linalg.norm linalg.inv linalg.det random.default_rng"""),
    "math": _words("""
        pi e tau inf nan sqrt exp log log2 log10 sin cos tan tanh atan atan2 floor ceil fabs isclose
        isfinite isinf isnan prod fsum comb factorial pow erf"""),
    "warnings": frozenset({"catch_warnings"}),
}
WARNING_FILTERS = frozenset({"simplefilter", "filterwarnings", "resetwarnings"})
PURE_BUILTINS = _words("""
    abs all any bool dict divmod enumerate float format frozenset int isinstance issubclass len list map
    max min print range repr reversed round set slice sorted str sum tuple type zip True False None
    ArithmeticError AssertionError AttributeError Exception IndexError KeyError NotImplementedError
    OverflowError RuntimeError TypeError ValueError ZeroDivisionError""")
BUILTIN_NAMES = frozenset(dir(builtins))
# Ways to reach a namespace without naming what is read.
INDIRECT_NAMES = frozenset({"globals", "locals", "vars", "eval", "exec", "compile", "__import__", "getattr",
                            "setattr", "delattr", "__builtins__", "__main__", "get_ipython", "__dict__",
                            "breakpoint"})
INDIRECT_ATTRIBUTES = frozenset({"__dict__", "__globals__", "__builtins__", "f_globals", "f_locals", "f_back",
                                 "modules", "__code__", "__closure__", "__defaults__", "__kwdefaults__"})

Use = tuple[str, str, bool]      # (base name, attribute path, inside `with warnings.catch_warnings()`)


@dataclass(frozen=True)
class Function:
    """A top-level `def`."""
    reads: frozenset[str]          # globals its body reads (as a name, a call or an attribute base)
    bare: frozenset[str]           # names its body reads as values (not as an attribute's base)
    uses: frozenset[Use]           # attributes of globals it uses
    local_only: bool               # no global/nonlocal/import/class, no stores into non-local objects


@dataclass(frozen=True)
class CellFacts:
    """What one cell's source does to the notebook's namespace."""
    binds: frozenset[str] = frozenset()          # names bound at the top level
    reads: frozenset[str] = frozenset()          # globals read at the top level or by its functions
    top_reads: frozenset[str] = frozenset()      # globals read at the top level
    uses: frozenset[Use] = frozenset()           # attributes of globals used at the top level
    bare: frozenset[str] = frozenset()           # names read as values at the top level
    imports: tuple[tuple[str, str], ...] = ()    # (name, module) bound by `import module [as name]`
    defs: tuple[tuple[str, Function], ...] = ()  # top-level functions
    other_binds: frozenset[str] = frozenset()    # names bound at the top level other than by def/import
    simple: bool = True                          # no import/class/global/decorator/store into objects
    indirect: bool = False                       # reaches names indirectly


def _chain(node: ast.AST) -> tuple[str, str] | None:
    """`np.linalg.norm` -> ("np", "linalg.norm"); None when the base is not a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and parts:
        return node.id, ".".join(reversed(parts))
    return None


@lru_cache(maxsize=16)
def _nodes(tree: ast.AST) -> tuple[ast.AST, ...]:
    """The nodes `ast.walk(tree)` gives, in its order (without its generators), listed once for the
    several readings of one tree (`_facts` reads each body, and each function's, six to nine times).
    Kept by the tree itself (an AST node is its own key: equal only to itself), which is never
    changed once parsed; the last few only."""
    nodes = [tree]
    for node in nodes:                   # breadth first, children in field order: ast.walk's order
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                nodes.append(value)
            elif isinstance(value, list):
                nodes.extend([item for item in value if isinstance(item, ast.AST)])
    return tuple(nodes)


def _indirect(tree: ast.AST) -> bool:
    for node in _nodes(tree):
        if isinstance(node, ast.Name) and node.id in INDIRECT_NAMES:
            return True
        if isinstance(node, ast.Attribute) and node.attr in INDIRECT_ATTRIBUTES:
            return True
        if isinstance(node, ast.ImportFrom) and (node.module in ("builtins", "__main__", "sys", "inspect", "gc")
                                                 or any(a.name == "*" for a in node.names)):
            return True
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("builtins", "__main__", "sys", "inspect",
                                                                       "gc", "ctypes") for a in node.names):
            return True
    return False


def _bound(tree: ast.AST) -> set[str]:
    """Every name bound anywhere in `tree` (any scope inside it)."""
    names: set[str] = set()
    for node in _nodes(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler)) and node.name:
            names.add(str(node.name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def _attribute_uses(tree: ast.AST, skip: Collection[str] = ()) -> set[Use]:
    """The outermost attribute chains on a name (`np.linalg.norm`, not also `np.linalg`)."""
    inner = {id(n.value) for n in _nodes(tree) if isinstance(n, ast.Attribute)}
    guarded: set[int] = set()
    for node in _nodes(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                isinstance(i.context_expr, ast.Call) and (c := _chain(i.context_expr.func)) is not None
                and c[1] == "catch_warnings" for i in node.items):
            guarded |= {id(n) for b in node.body for n in ast.walk(b)}
    out: set[Use] = set()
    for node in _nodes(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = _chain(node)
            if chain is not None and chain[0] not in skip:
                out.add((chain[0], chain[1], id(node) in guarded))
    return out


def _bare_names(tree: ast.AST) -> set[str]:
    """Names read as values, not as the base of an attribute (`m = np` but not `np.sum`)."""
    bases = {id(n.value) for n in _nodes(tree) if isinstance(n, ast.Attribute)}
    return {n.id for n in _nodes(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and id(n) not in bases}


def _stores_into(tree: ast.AST, local: Collection[str]) -> bool:
    """Whether `tree` stores into (or deletes) an attribute or item of anything but a local name."""
    for node in _nodes(tree):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if not (isinstance(base, ast.Name) and base.id in local):
                return True
    return False


def _global_reads(table: symtable.SymbolTable) -> set[str]:
    """Globals referenced in `table`'s scope or any scope nested in it."""
    out = {sym.get_name() for sym in table.get_symbols() if sym.is_global() and sym.is_referenced()}
    for child in table.get_children():
        out |= _global_reads(child)
    return out


def _function(fn: ast.FunctionDef | ast.AsyncFunctionDef, table: symtable.SymbolTable) -> Function:
    body = ast.Module(body=fn.body, type_ignores=[])
    local = {sym.get_name() for sym in table.get_symbols() if sym.is_local()}
    reads = _global_reads(table)
    local_only = not any(isinstance(n, (ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom, ast.ClassDef))
                         for n in _nodes(body)) and not _stores_into(body, local)
    return Function(reads=frozenset(reads), bare=frozenset(_bare_names(body) - local),
                    uses=frozenset(_attribute_uses(body, skip=local)), local_only=local_only)


# The cell magics whose body the sandbox runs without their line, as IPython runs it: in the
# notebook's namespace, so that what the body defines is kept. Any other cell magic skips the cell:
# `%%timeit` runs its body inside a function of its own (nothing it defines is kept, in Jupyter too),
# and the rest are not Python run in the notebook (`%%bash`, `%%writefile`, `%%html`, ...).
RUN_CELL_MAGICS = ("%%time", "%%capture")


def skipping_cell_magic(source: str) -> str | None:
    """The cell magic (`%%timeit`) the cell starts with when the sandbox skips the cell for it, else None."""
    first = next((ln.strip() for ln in source.split("\n") if ln.strip()), "")
    if not first.startswith("%%"):
        return None
    magic = first.split()[0]
    return None if magic in RUN_CELL_MAGICS else magic


def functions_under_magic(source: str) -> tuple[str, tuple[str, ...]]:
    """For a cell the sandbox skips for its cell magic: the magic and the functions its body would
    define at top level without it (("%%timeit", ("silu",))); ("", ()) for any other cell."""
    magic = skipping_cell_magic(source)
    if magic is None:
        return "", ()
    lines = source.split("\n")
    lines[next(i for i, ln in enumerate(lines) if ln.strip())] = ""
    return magic, defined_functions("\n".join(lines))


def _sandbox_source(source: str) -> str | None:
    """The source as the sandbox compiles it; None when the sandbox runs none of it."""
    if skipping_cell_magic(source) is not None:
        return None
    lines = source.split("\n")
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is not None and lines[first].strip().startswith("%%"):
        lines[first] = ""
    return "\n".join(lines)


def _without_magic_lines(source: str) -> str:
    out = []
    for line in source.split("\n"):
        body = line.lstrip()
        bare = body.rstrip()
        if body.startswith(("%", "!")) or (bare.endswith("?") and bare.rstrip("?").replace(".", "").isidentifier()):
            out.append(line[: len(line) - len(body)] + "pass")
        else:
            out.append(line)
    return "\n".join(out)


def _parse(source: str) -> ast.Module | None:
    text = _sandbox_source(source)
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        try:
            return ast.parse(_without_magic_lines(text))
        except (SyntaxError, ValueError):
            return None


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def parse_as_run(source: str) -> ast.Module | None:
    """The cell's syntax tree as the sandbox compiles it (its lines where they are in `source`); None
    when the sandbox runs none of it (it does not parse, a cell magic skips it, it nests too deeply)."""
    try:
        return _parse(source)
    except (RecursionError, MemoryError):       # nested too deeply to read
        return None


@lru_cache(maxsize=4096)
def defined_functions(source: str) -> tuple[str, ...]:
    """The functions a cell defines at its top level (`def name`), in order, as the sandbox runs the
    cell; none for a cell that defines none when run (it does not parse, a cell magic skips it)."""
    if "def" not in source:                     # most cells: nothing to parse
        return ()
    tree = parse_as_run(source)
    if tree is None:
        return ()
    return tuple(s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _literal(node: ast.AST | None) -> bool:
    """A value Python builds without running anything that could fail, take time or be the student's:
    a constant (`2`, `1e-5`, `"relu"`, `None`), a signed number (`-3`), and tuples and lists of those;
    sets and dict keys of constants or tuples of them, dict values literal. No name is read (a name may
    be missing, or bound to an object whose operators run its code), no operator is applied (`1 / 0`,
    `~1.5`, `10.0 ** 400` raise; `"a" * 10 ** 9` takes gigabytes)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = node.operand
        return isinstance(operand, ast.Constant) and type(operand.value) in (int, float, complex)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_literal(e) for e in node.elts)           # a starred item is none of these
    if isinstance(node, ast.Set):
        return all(_hashable_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(_hashable_literal(k) for k in node.keys) and all(_literal(v) for v in node.values)
    return False                                              # `**more` above: its key is None


def _hashable_literal(node: ast.AST | None) -> bool:
    """A set element or dict key hashed without running anything: a constant, or a tuple of them."""
    if isinstance(node, ast.Tuple):
        return all(_hashable_literal(e) for e in node.elts)
    return isinstance(node, ast.Constant) or (isinstance(node, ast.UnaryOp) and _literal(node))


def _literal_assignment(statement: ast.stmt) -> list[str] | None:
    """The names a plain assignment of literals binds (`K = 2`, `a, b = 1, 2`, `A = B = (3, 4)`); None
    for any other statement (an annotated one evaluates its annotation)."""
    if not isinstance(statement, ast.Assign) or not _literal(statement.value):
        return None
    names: list[str] = []
    for target in statement.targets:
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif (isinstance(target, (ast.Tuple, ast.List)) and isinstance(statement.value, (ast.Tuple, ast.List))
              and len(target.elts) == len(statement.value.elts) and all(isinstance(t, ast.Name) for t in target.elts)):
            names += [t.id for t in target.elts if isinstance(t, ast.Name)]
        else:
            return None
    return names


@dataclass(frozen=True)
class _Split:
    """A cell's top-level statements sorted into those kept with its definitions and the rest."""
    kept: frozenset[int]            # line numbers of the kept statements
    dropped: frozenset[int]         # line numbers of the others
    names: tuple[str, ...]          # what the kept statements bind, in order
    definitions: bool               # a `def` or `class` is kept


def _split(tree: ast.Module) -> _Split:
    """Keep the definitions (`def`, `class`, decorators included), imports and, in order among them,
    plain assignments of literals (`_literal_assignment`), which can neither fail nor take time; every
    other statement is left out, and so is an assignment of literals sharing a line with one (`i = 0;
    time.sleep(100)`: lines are kept or blanked whole)."""
    kept: list[tuple[range, list[str], bool]] = []      # (lines, names bound, an assignment of literals)
    dropped: set[int] = set()
    definitions = False
    for statement in tree.body:
        first = min([d.lineno for d in getattr(statement, "decorator_list", ())] + [statement.lineno])
        lines = range(first, (statement.end_lineno or statement.lineno) + 1)
        if isinstance(statement, _DEFINITIONS):
            definitions = True
            kept.append((lines, [statement.name], False))
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            kept.append((lines, [(a.asname or a.name).split(".")[0] for a in statement.names if a.name != "*"], False))
        elif (assigned := _literal_assignment(statement)) is not None:
            kept.append((lines, assigned, True))
        else:
            dropped.update(lines)
    shared = [entry for entry in kept if entry[2] and not dropped.isdisjoint(entry[0])]
    for lines, _, _ in shared:
        dropped.update(lines)
    kept = [entry for entry in kept if entry not in shared]
    names = [name for _, bound, _ in kept for name in bound]
    return _Split(frozenset(i for lines, _, _ in kept for i in lines), frozenset(dropped), tuple(dict.fromkeys(names)),
                  definitions)


def definitions_only(source: str) -> tuple[str, tuple[str, ...]] | None:
    """For a cell that was stopped partway (too slow, or it ended its process): the cell with every
    top-level statement but its definitions (`def`, `class`, decorators included), imports and plain
    assignments of literals (`K = 2`, `SHAPE = (3, 4)`: see `_split`) blanked out line for line (so
    that line numbers stay), and the names it still binds. Run again in its place, it keeps the
    functions a student wrote above or below a slow loop, with the constants they read, as an
    interrupt in Jupyter keeps what ran before it. None when there is no function or class to keep,
    nothing to leave out, or the cell cannot be split so (it does not parse, or a definition and a
    left-out statement share a line)."""
    tree = parse_as_run(source)
    if tree is None:
        return None
    return _trimmed(source, _split(tree))


def _trimmed(source: str, split: _Split) -> tuple[str, tuple[str, ...]] | None:
    if not split.definitions or not split.dropped or split.kept & split.dropped:
        return None
    text = "\n".join("" if i in split.dropped else line for i, line in enumerate(source.split("\n"), start=1))
    return text, split.names


def definitions_alone(source: str) -> tuple[str | None, tuple[str, ...]] | None:
    """What of a cell to run when its time is not to be spent: `definitions_only` when it has
    definitions to keep and something else to leave out; (None, names) when all of it would be kept
    (definitions, imports and assignments of literals alone: `import torch`, a decorated `def`), so that all
    of it is run; None when it has no definition or import to keep, or cannot be split (it is left out)."""
    tree = parse_as_run(source)
    if tree is None:
        return None
    split = _split(tree)
    trimmed = _trimmed(source, split)
    if trimmed is not None:
        return trimmed
    if not tree.body or split.dropped or not any(isinstance(s, (*_DEFINITIONS, ast.Import, ast.ImportFrom))
                                                  for s in tree.body):
        return None
    return None, split.names


def binds_names(source: str) -> bool:
    """Whether running the cell binds or changes a module-level name: an assignment (augmented,
    annotated, to an item or attribute), a `for`, `with`, `except` or `match` target, `del`, `:=`,
    a `global` statement, a definition or an import. A cell the sandbox does not run (a `%%bash`
    cell) binds nothing; one that cannot be parsed counts as binding."""
    if _sandbox_source(source) is None:
        return False
    tree = _parse(source)
    if tree is None:
        return True
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (*_DEFINITIONS, ast.Import, ast.ImportFrom, ast.Global, ast.NamedExpr)):
            return True
        if isinstance(node, (ast.Name, ast.Subscript, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            return True
        if isinstance(node, ast.ExceptHandler) and node.name:
            return True
        if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            return True
        if isinstance(node, ast.MatchMapping) and node.rest:
            return True
        if isinstance(node, ast.Lambda):
            continue                    # its parameters are its own
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            stack.extend(n for n in ast.walk(node) if isinstance(n, ast.NamedExpr))
            continue                    # its targets are its own; a `:=` in it binds the cell's name
        stack.extend(ast.iter_child_nodes(node))
    return False


@lru_cache(maxsize=4096)
def cell_facts(source: str) -> CellFacts:
    """The facts of one cell (cached by source: released cells and common answers repeat)."""
    try:
        text = _sandbox_source(source)
        if text is None:
            return CellFacts()                  # the sandbox runs none of it
        for attempt in (text, _without_magic_lines(text)):
            try:
                tree = ast.parse(attempt)
                table = symtable.symtable(attempt, "<cell>", "exec")
            except (SyntaxError, ValueError):
                continue
            return _facts(tree, table)
        return CellFacts()                      # a SyntaxError in the sandbox: runs nothing
    except (RecursionError, MemoryError):       # nested too deeply to read: unclear
        return CellFacts(simple=False, indirect=True)


def _facts(tree: ast.Module, table: symtable.SymbolTable) -> CellFacts:
    children: dict[str, list[symtable.SymbolTable]] = {}
    for child in table.get_children():
        children.setdefault(child.get_name(), []).append(child)
    imports: list[tuple[str, str]] = []
    defs: list[tuple[str, Function]] = []
    simple = True
    rest: list[ast.stmt] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.append((stmt.name, _function(stmt, children[stmt.name].pop(0))))
            if stmt.decorator_list:
                simple = False
            rest.extend(ast.Expr(value=h) for h in (*stmt.args.defaults, *[d for d in stmt.args.kw_defaults if d]))
        elif isinstance(stmt, ast.Import):
            simple = False
            for a in stmt.names:
                imports.append((a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0]))
        else:
            if isinstance(stmt, (ast.ImportFrom, ast.ClassDef)):
                simple = False
            rest.append(stmt)
    body = ast.Module(body=rest, type_ignores=[])
    if any(isinstance(n, (ast.Global, ast.Nonlocal, ast.ClassDef, ast.Import, ast.ImportFrom,
                          ast.FunctionDef, ast.AsyncFunctionDef)) for n in _nodes(body)):
        simple = False                  # nested in another statement: read as unclear
    binds = {sym.get_name() for sym in table.get_symbols() if sym.is_assigned() or sym.is_imported()}
    if _stores_into(body, binds):       # into an object of its own names only (those are judged as values)
        simple = False
    top_reads = {sym.get_name() for sym in table.get_symbols() if sym.is_referenced()}
    for tables in children.values():    # lambdas, comprehensions, classes (and nested defs) at the top level
        for child in tables:
            top_reads |= _global_reads(child)
    reads = set(top_reads)
    for _, fn in defs:
        reads |= fn.reads
    other = binds & _bound(body)
    return CellFacts(binds=frozenset(binds), reads=frozenset(reads), top_reads=frozenset(top_reads),
                     uses=frozenset(_attribute_uses(body)), bare=frozenset(_bare_names(body)),
                     imports=tuple(imports), defs=tuple(defs),
                     other_binds=frozenset(other), simple=simple, indirect=_indirect(tree))


@dataclass(frozen=True)
class Released:
    """What the released notebook tells about a submission's cells: the sources of its code cells
    that are not solution cells, and the names grading may read."""
    sources: frozenset[str]
    grader_names: frozenset[str] = field(default_factory=frozenset)
    # `cell_facts` of released sources, when already known (`released_facts`); others are worked out
    facts: Mapping[str, CellFacts] = field(default_factory=dict, compare=False, hash=False)


def cells_to_skip(sources: Sequence[str], released: Released) -> frozenset[int]:
    """Positions (in `sources`, the cells that would run, in order) of the cells that can be left out."""
    known = released.facts
    facts = [known.get(s) or cell_facts(s) for s in sources]
    if any(f.indirect for f in facts):
        return frozenset()
    bindings: dict[str, list[str]] = {}           # name -> how each cell binds it: "def", "import:<m>", "value"
    functions: dict[str, list[Function]] = {}
    for f in facts:
        for name, module in f.imports:
            bindings.setdefault(name, []).append(f"import:{module}")
        for name, fn in f.defs:
            bindings.setdefault(name, []).append("def")
            functions.setdefault(name, []).append(fn)
        for name in f.other_binds:
            bindings.setdefault(name, []).append("value")

    # a name every binding of which imports the same listed module -> that module
    modules: dict[str, str] = {}
    for name, kinds in bindings.items():
        kind = kinds[0]
        if kind.startswith("import:") and kind[7:] in MODULES and all(k == kind for k in kinds):
            modules[name] = kind[7:]
    module_of: Callable[[str], str | None] = modules.get

    def pure_use(use: Use) -> bool:
        base, path, guarded = use
        module = module_of(base)
        if module is None:
            return True                    # not a module: judged as a value read by the caller
        if module == "warnings" and path in WARNING_FILTERS:
            return guarded
        return path in PURE_ATTRIBUTES[module]

    # plain functions: a fixpoint from "every function is plain"
    plain = {name for name, kinds in bindings.items() if set(kinds) == {"def"}}
    changed = True
    while changed:
        changed = False
        for name in sorted(plain):
            ok = all(fn.local_only and all(pure_use(u) for u in fn.uses)
                     and not any(module_of(b) for b in fn.bare)
                     and all(_harmless_read(r, module_of, plain, bindings) for r in fn.reads)
                     for fn in functions[name])
            if not ok:
                plain.discard(name)
                changed = True

    function_reads: set[str] = set()
    for f in facts:
        for _, fn in f.defs:
            function_reads |= fn.reads
    if "*" in released.grader_names:
        return frozenset()
    first_bound: dict[str, int] = {}
    for i, f in enumerate(facts):
        for name in f.binds:
            first_bound.setdefault(name, i)

    def runs_in_order(i: int) -> bool:
        """Whether every global cell i reads (itself or through the notebook's functions it calls)
        exists when it runs: a cell that would raise NameError runs, so that its note stays."""
        f = facts[i]
        seen: set[str] = set()
        todo = list(f.top_reads)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            at = first_bound.get(name)
            if at is None:
                if name not in BUILTIN_NAMES:
                    return False
            elif at > i or (at == i and name not in f.binds):
                return False
            for fn in functions.get(name, ()):
                todo.extend(fn.reads)
        return True

    candidates = {i for i, (s, f) in enumerate(zip(sources, facts, strict=True))
                  if s in released.sources and f.simple and all(name in plain for name, _ in f.defs)
                  and all(pure_use(u) for u in f.uses) and not any(module_of(b) for b in f.bare)
                  and runs_in_order(i)}
    while True:
        running_reads = set(function_reads) | set(released.grader_names)
        for i, f in enumerate(facts):
            if i not in candidates:
                running_reads |= f.reads
        dropped = set()
        for i in candidates:
            f = facts[i]
            values = {r for r in f.reads if not _harmless_read(r, module_of, plain, bindings)}
            if (f.binds | values) & running_reads:
                dropped.add(i)
        if not dropped:
            return frozenset(candidates)
        candidates -= dropped


def _harmless_read(name: str, module_of: Callable[[str], str | None], plain: set[str],
                   bindings: dict[str, list[str]]) -> bool:
    """A global read that can neither change nor be changed through the reading code: a module
    (its attributes are checked apart), a plain function, or a listed builtin the notebook never rebinds."""
    if module_of(name) is not None or name in plain:
        return True
    return name not in bindings and name in PURE_BUILTINS


def file_stamp(path: Path | None) -> tuple[int, int] | None:
    """(mtime in ns, size) of the file at `path`, what a cache of what was read from it is keyed on
    besides the path (a file changed since is read again); None when there is none."""
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def released_cells(path: Path | None) -> tuple[Any, ...] | None:
    """The cells of the released notebook at `path`, as its JSON holds them (read once while the file
    stays as it is, for every reader of the release); None when it cannot be read."""
    stamp = file_stamp(path)
    return None if path is None or stamp is None else _released_cells(path, stamp)


@lru_cache(maxsize=16)
def _released_cells(path: Path, stamp: tuple[int, int]) -> tuple[Any, ...] | None:
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    return tuple(cells) if isinstance(cells, list) else None


def source_text(source: Any) -> str | None:
    """A cell's `source` (a format 3 code cell's `input`) as one string: nbformat stores it as a string or
    a list of lines. None for anything else, a list holding something other than strings included: for
    notebooks read as they were submitted, where a cell may hold anything."""
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    return None


def joined_text(source: Any) -> str:
    """A cell's `source` as one string for notebooks that nbformat or the instructor wrote: a list's
    lines joined (TypeError when one is no string), anything else as str() gives it."""
    return "".join(source) if isinstance(source, list) else str(source)


def cell_source(cell: Any) -> str | None:
    """A notebook cell's code as one string (`source_text`); None for anything but a code cell, or a
    source that is neither a string nor a list of lines."""
    if not isinstance(cell, dict) or cell.get("cell_type") != "code":
        return None
    return source_text(cell.get("source", ""))


def released_sources(path: Path) -> frozenset[str] | None:
    """The sources of the released notebook's code cells that are not solution cells; None when
    it cannot be read (then nothing is left out)."""
    stamp = file_stamp(path)
    return None if stamp is None else _released_sources(path, stamp)


@lru_cache(maxsize=16)
def _released_sources(path: Path, stamp: tuple[int, int]) -> frozenset[str] | None:
    cells = _released_cells(path, stamp)
    if cells is None:
        return None
    try:
        return frozenset(source for cell in cells if (source := cell_source(cell)) is not None
                         and not ((cell.get("metadata") or {}).get("nbgrader") or {}).get("solution"))
    except (TypeError, AttributeError):
        return None


@lru_cache(maxsize=1)
def _code_digest() -> str | None:
    """A hash of this module's source: what is cached from its analysis is keyed on it too, so a
    change of the analysis never meets an answer of the old one."""
    try:
        return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    except OSError:
        return None


@lru_cache(maxsize=16)
def released_facts(sources: frozenset[str]) -> Mapping[str, CellFacts]:
    """`cell_facts` of each released source. They are the same for every submission, and working
    them out takes tens of milliseconds, so a one-student run reads them from this user's cache
    (autograder.usercache) when the release and this module are unchanged."""
    code = _code_digest()
    key = None
    if code is not None:
        digest = hashlib.sha256(f"cell-facts\0{code}".encode())
        for source in sorted(sources):
            data = source.encode("utf-8", "surrogatepass")
            digest.update(f"\0{len(data)}\0".encode())
            digest.update(data)
        key = digest.hexdigest()
    if key is not None:
        stored = _decode_facts(usercache.read_entry("cell-facts", key), sources)
        if stored is not None:
            return stored
    facts = {source: cell_facts(source) for source in sources}
    if key is not None:
        usercache.write_entry("cell-facts", key, [[source, _encode(f)] for source, f in facts.items()])
    return facts


def _encode(facts: CellFacts) -> dict[str, object]:
    def fn(f: Function) -> dict[str, object]:
        return {"reads": sorted(f.reads), "bare": sorted(f.bare), "uses": sorted(f.uses), "local_only": f.local_only}

    return {"binds": sorted(facts.binds), "reads": sorted(facts.reads), "top_reads": sorted(facts.top_reads),
            "uses": sorted(facts.uses), "bare": sorted(facts.bare), "imports": [list(i) for i in facts.imports],
            "defs": [[name, fn(f)] for name, f in facts.defs], "other_binds": sorted(facts.other_binds),
            "simple": facts.simple, "indirect": facts.indirect}


def _decode_facts(data: object, sources: frozenset[str]) -> dict[str, CellFacts] | None:
    """The facts stored by `released_facts`, or None unless they are exactly of `sources` and well formed."""
    if not isinstance(data, list):
        return None
    try:
        out = {source: _decode(value) for source, value in data}
    except (TypeError, ValueError, KeyError):
        return None
    return out if out.keys() == sources else None


def _strings(value: object) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("not a list of strings")
    return frozenset(value)


def _uses(value: object) -> frozenset[Use]:
    if not isinstance(value, list):
        raise TypeError("not a list")
    out = set()
    for base, path, guarded in value:
        if not (isinstance(base, str) and isinstance(path, str) and isinstance(guarded, bool)):
            raise TypeError("not a use")
        out.add((base, path, guarded))
    return frozenset(out)


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError("not a flag")
    return value


def _decode(d: dict[str, object]) -> CellFacts:
    imports, defs = d["imports"], d["defs"]
    if not isinstance(imports, list) or not isinstance(defs, list):
        raise TypeError("not a list")
    pairs = tuple((name, module) for name, module in imports)
    if not all(isinstance(x, str) for pair in pairs for x in pair):
        raise TypeError("not an import")
    functions = []
    for name, f in defs:
        if not isinstance(name, str) or not isinstance(f, dict):
            raise TypeError("not a function")
        functions.append((name, Function(reads=_strings(f["reads"]), bare=_strings(f["bare"]),
                                         uses=_uses(f["uses"]), local_only=_flag(f["local_only"]))))
    return CellFacts(binds=_strings(d["binds"]), reads=_strings(d["reads"]), top_reads=_strings(d["top_reads"]),
                     uses=_uses(d["uses"]), bare=_strings(d["bare"]), imports=pairs, defs=tuple(functions),
                     other_binds=_strings(d["other_binds"]), simple=_flag(d["simple"]),
                     indirect=_flag(d["indirect"]))


def grader_names(package: Path, functions: tuple[str, ...]) -> frozenset[str]:
    """Names grading may look up in a notebook. The graders reach it only through the `student`
    proxy, so: the assignment's functions, every attribute taken of a name containing `student`
    (and every name given to getattr on one) in its trusted code, and the keyword-only parameters
    of its functions (a composite's building blocks, called by name)."""
    files = tuple(sorted(package.rglob("*.py"))) if package.is_dir() else ()
    return _grader_names(files, tuple(file_stamp(f) for f in files), functions)


def _names_key(files: tuple[Path, ...], functions: tuple[str, ...]) -> str | None:
    """A hash of everything `_grader_names` reads: the functions, each file's name and content
    (None when a file cannot be read: it is then computed as before)."""
    code = _code_digest()
    if code is None:
        return None
    digest = hashlib.sha256(f"grader-names\0{code}\0{json.dumps(functions)}".encode())
    for f in files:
        try:
            data = f.read_bytes()
        except OSError:
            return None
        digest.update(f"\0{f}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def _is_student(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and "student" in node.id.lower()


@lru_cache(maxsize=16)
def _grader_names(files: tuple[Path, ...], keys: tuple[object, ...], functions: tuple[str, ...]) -> frozenset[str]:
    """Parsing the instructor's code takes tens of milliseconds: a one-student run reads the answer
    from this user's cache (autograder.usercache) when the files are unchanged."""
    key = _names_key(files, functions)
    stored = usercache.read_entry("grader-names", key) if key is not None else None
    if isinstance(stored, list) and all(isinstance(n, str) for n in stored):
        return frozenset(stored)
    names = _parse_grader_names(files, functions)
    if key is not None:
        usercache.write_entry("grader-names", key, sorted(names))
    return names


def _parse_grader_names(files: tuple[Path, ...], functions: tuple[str, ...]) -> frozenset[str]:
    names = set(functions)
    for f in files:
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _is_student(node.value):
                names.add(node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                  and node.args and _is_student(node.args[0])):
                names.update(n.value for n in node.args[1:2]
                             if isinstance(n, ast.Constant) and isinstance(n.value, str))
                if not (len(node.args) > 1 and isinstance(node.args[1], ast.Constant)):
                    names.add("*")          # a name computed at run time: any name
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.update(a.arg for a in node.args.kwonlyargs)
    return frozenset(names)
