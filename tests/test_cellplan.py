"""Which cells grading leaves out: only unchanged released cells that nothing graded can read, and
nothing when anything is unclear. Each case is a small notebook read from its sources alone."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from autograder import cellplan
from autograder.config import load_course
from autograder.grading.engine import released_cells
from autograder.layout import EXAMPLES, CourseLayout

ROOT = Path(__file__).resolve().parents[1]

SETUP = textwrap.dedent("""\
    import numpy as np
    import warnings
    rng = np.random.default_rng(0)
""")
ANSWER = textwrap.dedent("""\
    def double(x):
        return 2 * np.asarray(x)
""")
CHECK = textwrap.dedent("""\
    x = rng.normal(size=3)
    out = double(x)
    assert np.allclose(out, x + x), f"double should add x to itself; got {out}"
    print("ok")
""")
DEMO = textwrap.dedent("""\
    z = np.array([-1.0, 0.0, 1.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = np.exp(z)
    print(w, len(caught))
""")
RELEASED = cellplan.Released(sources=frozenset({SETUP, CHECK, DEMO}), grader_names=frozenset({"double"}))


def skipped(*sources: str, released: cellplan.Released = RELEASED) -> list[int]:
    return sorted(cellplan.cells_to_skip(list(sources), released))


def test_unchanged_public_check_and_demo_cells_are_left_out():
    """Are the released check and demonstration cells left out, and the setup and the answer run?"""
    assert skipped(SETUP, ANSWER, CHECK, DEMO) == [2, 3]


def test_a_changed_released_cell_runs():
    """Does a public-check cell the student edited (one character) run?"""
    assert skipped(SETUP, ANSWER, CHECK.replace("size=3", "size=4"), DEMO) == [3]


@pytest.mark.parametrize("later", [
    "print(out)",                               # a later cell reads a name the check binds
    "def f(y):\n    return y + x\n",            # a function reads it at call time
])
def test_a_cell_whose_names_are_read_later_runs(later):
    """Does a check run when a cell that runs, or any function, reads a name it binds?"""
    assert 2 not in skipped(SETUP, ANSWER, CHECK, DEMO, later)


def test_a_name_the_graders_look_up_keeps_its_cell():
    """Does a released cell binding a name the graders may look up run?"""
    released = cellplan.Released(sources=RELEASED.sources, grader_names=frozenset({"double", "out"}))
    assert skipped(SETUP, ANSWER, CHECK, DEMO, released=released) == [3]


def test_a_changed_generator_that_a_function_reads_keeps_the_check():
    """When the student's function draws from the notebook's `rng`, does the check that also
    draws from it run (skipping it would change what the function sees)?"""
    uses_rng = "def double(x):\n    return 2 * np.asarray(x) + 0 * rng.normal()\n"
    assert skipped(SETUP, uses_rng, CHECK, DEMO) == [3]


@pytest.mark.parametrize("answer", [
    "counter = []\ndef double(x):\n    counter.append(1)\n    return 2 * x\n",   # changes a global list
    "def double(x):\n    global n\n    n = 1\n    return 2 * x\n",               # declares a global
    "def double(x):\n    np.random.seed(0)\n    return 2 * x\n",                 # numpy's global state
    "def double(x):\n    return 2 * globals()['np'].asarray(x)\n",               # indirect access
    "import math as np\ndef double(x):\n    return 2 * x\n",                     # np rebound
])
def test_a_check_calling_a_function_that_is_not_plain_runs(answer):
    """Does a check run when the function it calls may change state (or reaches names indirectly)?"""
    assert 2 not in skipped(SETUP, answer, CHECK, DEMO)


def test_the_course_s_correct_notebook_leaves_out_every_public_check():
    """Against the course's own release, does the demo's correct notebook (ada's) leave out each of its nine
    public-check cells? (When the count's checks kept their helpers in the notebook, one helper function read
    another, so a function of the notebook read a name that cell binds: it ran, and so did every cell binding a
    name it reads, such as `err`, until all nine ran.)"""
    course = load_course(ROOT)
    released = released_cells(course, course.assignment("transformer-block"))["transformer-block.ipynb"]
    folder = CourseLayout(ROOT / EXAMPLES).submission("ada", "transformer-block")
    cells = json.loads((folder / "transformer-block.ipynb").read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    checks = {i for i, source in enumerate(sources) if source.startswith("# Public checks for ")}
    assert len(checks) == 9 and checks <= {i for i, source in enumerate(sources) if source in released.sources}
    assert checks <= cellplan.cells_to_skip(sources, released)


def test_indirect_access_anywhere_keeps_every_cell():
    """Does `eval`/`globals()` in any cell that runs keep every cell?"""
    assert skipped(SETUP, ANSWER, CHECK, DEMO, "print(eval('x'))") == []


def test_a_warning_filter_outside_catch_warnings_keeps_the_cell():
    """Is `warnings.simplefilter` outside `with warnings.catch_warnings()` (a global change) unclear?"""
    demo = "warnings.simplefilter('ignore')\nprint(np.exp(1.0))\n"
    released = cellplan.Released(sources=RELEASED.sources | {demo}, grader_names=frozenset({"double"}))
    assert skipped(SETUP, ANSWER, demo, released=released) == []


@pytest.mark.parametrize("source", [
    "import numpy\nprint(numpy.zeros(2))\n",          # imports
    "class A:\n    pass\n",                           # defines a class
    "np.seterr(all='ignore')\n",                       # an impure module function
    "m = np\nm.x = 1\n",                               # a module as a value
    "rng.bit_generator.state = {}\n",                  # stores into an object it did not make
])
def test_released_cells_that_change_state_run(source):
    """Does a released cell that imports, defines a class or changes shared state run?"""
    released = cellplan.Released(sources=RELEASED.sources | {source}, grader_names=frozenset({"double"}))
    assert 2 not in skipped(SETUP, ANSWER, source, released=released)


def test_cells_the_sandbox_would_not_run_are_read_as_it_runs_them():
    """A cell with a syntax error binds and reads nothing; a magic line is read as `pass`."""
    broken = "def broken(:\n    pass\n"
    magic = "%matplotlib inline\nprint(x)\n"
    assert skipped(SETUP, ANSWER, CHECK, broken) == [2]
    assert 2 not in skipped(SETUP, ANSWER, CHECK, magic)
    assert cellplan.cell_facts("%%bash\necho $x\n").reads == frozenset()


def test_released_sources_leave_out_solution_cells(tmp_path: Path):
    """Are only the released notebook's non-solution code cells taken, and an unreadable one None?"""
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "source": ["x = 1\n", "y = 2"], "metadata": {}},
        {"cell_type": "code", "source": "def f():\n    raise NotImplementedError()",
         "metadata": {"nbgrader": {"solution": True, "grade": False, "grade_id": "f"}}},
        {"cell_type": "markdown", "source": "text", "metadata": {}}]}
    path = tmp_path / "hw.ipynb"
    path.write_text(json.dumps(nb))
    assert cellplan.released_sources(path) == frozenset({"x = 1\ny = 2"})
    assert cellplan.released_sources(tmp_path / "missing.ipynb") is None


def test_grader_names_are_what_the_student_proxy_is_asked_for(tmp_path: Path):
    """Are the names the graders take from `student`, and the building blocks, all collected?"""
    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "test_f.py").write_text(
        "def test_f(student, rng):\n    x = rng.normal()\n    student.f(x)\n    getattr(student, 'g')\n")
    (tmp_path / "reference.py").write_text("def block(x, *, f=None):\n    return x\n")
    names = cellplan.grader_names(tmp_path, ("h",))
    assert {"f", "g", "h"} <= names and "x" not in names and "normal" not in names


@pytest.mark.parametrize("order", [
    (SETUP, CHECK, ANSWER, DEMO),                                    # the check before the function
    (SETUP, "def double(x):\n    return helper(x)\n", CHECK, "def helper(x):\n    return 2 * x\n"),
    (SETUP, "def twice(x):\n    return 2 * x\n", CHECK),           # the function was renamed
])
def test_a_check_that_would_raise_name_error_runs(order):
    """Does a check run (and raise NameError there, noted) when a name it needs is bound only later,
    by the function it calls or not at all?"""
    assert order.index(CHECK) not in skipped(*order)


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user cache (autograder.usercache) under tmp_path, and nothing remembered in memory."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    cellplan.released_facts.cache_clear()
    cellplan._grader_names.cache_clear()
    yield tmp_path / "tmp"
    cellplan.released_facts.cache_clear()
    cellplan._grader_names.cache_clear()


def _course_cell_sources() -> frozenset[str]:
    root = Path(__file__).resolve().parents[1]
    out = set()
    for path in [*root.glob("source/*/*.ipynb"), *root.glob("release/*/*.ipynb"), *root.glob("examples/**/*.ipynb")]:
        try:
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        except (OSError, ValueError, KeyError):
            continue
        for cell in cells:
            if isinstance(cell, dict) and cell.get("cell_type") == "code":
                source = cell.get("source", "")
                out.add(source if isinstance(source, str) else "".join(source))
    return frozenset(out)


def test_released_facts_read_back_are_those_worked_out(own_cache: Path):
    """Are the facts of every code cell of the course's notebooks the same whether worked out or read
    back from the user's cache?"""
    sources = _course_cell_sources() | {SETUP, ANSWER, CHECK, DEMO, "%%bash\necho $x\n", "def broken(:\n"}
    assert len(sources) > 20
    direct = {s: cellplan.cell_facts(s) for s in sources}
    assert cellplan.released_facts(sources) == direct
    assert len(list(own_cache.glob("*/cell-facts-*.json"))) == 1
    cellplan.released_facts.cache_clear()
    assert cellplan.released_facts(sources) == direct


def test_a_damaged_facts_entry_is_worked_out_again(own_cache: Path):
    """Is a cache entry that is not well formed, or of other sources, ignored?"""
    sources = frozenset({SETUP, ANSWER, CHECK})
    direct = {s: cellplan.cell_facts(s) for s in sources}
    cellplan.released_facts(sources)
    (entry,) = own_cache.glob("*/cell-facts-*.json")
    stored = json.loads(entry.read_text())
    for damaged in ([], [[SETUP, {"binds": "x"}]], stored[:1], [[s, {**f, "simple": 1}] for s, f in stored]):
        entry.write_text(json.dumps(damaged))
        cellplan.released_facts.cache_clear()
        assert cellplan.released_facts(sources) == direct


def test_skipping_with_known_facts_is_the_same(own_cache: Path):
    """Are the same cells left out when the released cells' facts come with the release?"""
    released = cellplan.Released(sources=RELEASED.sources, grader_names=RELEASED.grader_names,
                                 facts=cellplan.released_facts(RELEASED.sources))
    for order in ((SETUP, ANSWER, CHECK, DEMO), (SETUP, CHECK, ANSWER, DEMO), (SETUP, ANSWER, CHECK, "y = out\n")):
        assert skipped(*order, released=released) == skipped(*order)


def test_grader_names_follow_the_files_through_the_cache(tmp_path: Path, own_cache: Path):
    """Are the grader names read back from the cache the same, and worked out again once a file changes?"""
    (tmp_path / "graders").mkdir()
    test_f = tmp_path / "graders" / "test_f.py"
    test_f.write_text("def test_f(student):\n    student.f(1)\n")
    first = cellplan.grader_names(tmp_path, ("h",))
    cellplan._grader_names.cache_clear()
    assert cellplan.grader_names(tmp_path, ("h",)) == first == {"f", "h"}
    test_f.write_text("def test_f(student):\n    student.g(1)\n")
    assert cellplan.grader_names(tmp_path, ("h",)) == {"g", "h"}


def test_a_trees_nodes_are_the_ones_ast_walk_gives_in_its_order():
    """Does the walk kept for a tree's several readings list exactly ast.walk's nodes, in its order?"""
    import ast

    source = textwrap.dedent("""
        import numpy as np, os.path as p
        from math import *
        @dec(1)
        async def f(a, /, b=np.e, *c, d=lambda x: x ** 2, **e) -> int:
            global g
            async with ctx() as (h, i):
                yield [j for j in range(3) if j], {k: v for k, v in e.items()}, {*c}
            match a:
                case {"x": 1, **rest} | [1, *others] if rest: pass
                case Point(x=0) as q: del q
            try: raise ValueError from None
            except* (TypeError, ValueError) as err: print(f"{err!r:>10}")
        class C(Base, metaclass=M):
            attr: int = 3
            x = y = np.linalg.norm(np.ones((2, 2))[0, ::2])
        with warnings.catch_warnings(): np.seterr(all="ignore")
        """)
    tree = ast.parse(source)
    assert cellplan._nodes(tree) == tuple(ast.walk(tree))
    assert cellplan._nodes(tree) is cellplan._nodes(tree)
    empty = ast.parse("")
    assert cellplan._nodes(empty) == (empty,)


def test_a_stopped_cells_definitions_are_kept_line_for_line():
    """Does definitions_only keep a cell's functions, classes (decorators included) and imports on their own
    lines, blank every other statement, and name what it keeps?"""
    source = textwrap.dedent("""\
        %%time
        import numpy as np
        x = np.ones(3)
        @staticmethod
        def f(a):
            return a
        while True:
            pass
        class C:
            pass
        %timeit f(1)
    """)
    kept, names = cellplan.definitions_only(source)
    assert kept.split("\n") == ["%%time", "import numpy as np", "", "@staticmethod", "def f(a):", "    return a",
                                 "", "", "class C:", "    pass", "", ""]
    assert names == ("np", "f", "C")


@pytest.mark.parametrize("source", [
    "while True:\n    pass",                          # nothing to keep
    "import os\nos._exit(0)",                         # imports alone are not worth a run
    "def f():\n    return 1",                         # nothing left out
    "def f():\n    return 1\nx = f(); import os",     # a kept and a left-out statement share a line
    "def f(:\n    pass\nwhile True: pass",            # does not parse
    "%%bash\nsleep 100",                              # a cell magic the sandbox does not run
])
def test_a_stopped_cell_with_nothing_to_split_is_left_out_whole(source):
    """Is definitions_only None when there is no function or class to keep, nothing to leave out, or the cell
    cannot be split line for line?"""
    assert cellplan.definitions_only(source) is None


@pytest.mark.parametrize(("source", "expected"), [
    ("import time\nK = 2\ndef f():\n    return K", (None, ("time", "K", "f"))),
    ("import time\nK = 2\ntime.sleep(9)\ndef f():\n    return K", ("import time\nK = 2\n\ndef f():\n    return K",
                                                                  ("time", "K", "f"))),
    ("import torch.nn as nn\nfrom os import path", (None, ("nn", "path"))),
    ("@slow\ndef f():\n    return 1\nclass C:\n    pass", (None, ("f", "C"))),
    ("import os\nos._exit(0)", None),
    ("time.sleep(5)", None),
    ("%%bash\nsleep 100", None),
])
def test_definitions_alone_keeps_a_cell_of_definitions_and_imports_whole(source, expected):
    """Is a cell split as definitions_only splits it, run whole (None for its text) when it is made of
    definitions and imports alone, and None when it has nothing to keep or cannot be split?"""
    assert cellplan.definitions_alone(source) == expected


def test_a_stopped_cell_keeps_its_assignments_of_literals_in_order():
    """Are the plain assignments of literals of a stopped cell (constants, signed numbers, containers of
    them) kept with its definitions, in order, and every other assignment blanked out: one that reads a
    name, applies an operator, calls, subscripts, annotates or stores into an object?"""
    source = textwrap.dedent("""\
        K = 2
        EPS = 1e-5
        SHAPE = (3, [4, None], -2.5)
        CONFIG = {"lr": 1e-3, ("a", -1): [True, b"x"]}
        NAMES = {"a", -1, (2, 3)}
        a, b = 1, -EPS_LITERAL
        A = B = "relu"
        [c, d] = [1, 2]
        TAU = 2 * math.pi
        DTYPE = np.float32
        ALIAS = K
        BIG = 2 ** 31 - 1
        N: int = 3
        calls = np.ones(K)
        K += 1
        def f(x):
            return x * K
        time.sleep(100)
    """).replace("-EPS_LITERAL", "-1e-5")
    kept, names = cellplan.definitions_only(source)
    lines = source.split("\n")
    assert kept.split("\n") == lines[:8] + [""] * 7 + lines[15:17] + ["", ""]
    assert names == ("K", "EPS", "SHAPE", "CONFIG", "NAMES", "a", "b", "A", "B", "c", "d", "f")


@pytest.mark.parametrize("source, kept", [
    ("def f(): return 1\ni = 0; time.sleep(100)\n", ("def f(): return 1\n\n", ("f",))),
    ("import numpy as np\nN = 3; data = np.load('big.npy')\ndef f(x): return x * N\n",
     ("import numpy as np\n\ndef f(x): return x * N\n", ("np", "f"))),
])
def test_an_assignment_of_literals_sharing_a_line_with_a_left_out_statement_is_left_out_with_it(source, kept):
    """Is an assignment of literals on the line of a statement that is left out (`i = 0; time.sleep(100)`)
    left out with it, the rest of the cell kept as without it, rather than the cell not split at all?"""
    assert cellplan.definitions_only(source) == kept
    assert cellplan.definitions_alone(source) == kept


@pytest.mark.parametrize("assignment", [
    "K = len('ab')",                               # a call
    "K = [v for v in (1, 2)]",                     # a comprehension
    "K = (1, 2)[0]",                               # a subscript
    "K = undefined",                               # a name that may not exist when it runs
    "K = f'{2}'",                                  # formatting
    "K = lambda: 1",                               # not a plain value
    "K = (y := 2)",                                # binds another name
    "K = 2 if True else 3",                        # a condition
    "obj.K = 2",                                   # stores into an object
    "K = J",                                       # reads a name (it may be missing, or rebound)
    "K = 1 / 0",                                   # an operator that raises
    "K = ~1.5",                                    # so does this one
    "K = 10.0 ** 400",                             # and this one (an overflow)
    "K = 'a' * 10 ** 9",                           # an operator that takes gigabytes
    "K = np.float32",                              # an attribute (the module may not be imported)
    "K: int = 2",                                  # the annotation is evaluated
    "K = {[1]: 2}",                                # an unhashable key
    "K = {'a', [1]}",                              # an unhashable element
    "K = {**{}}",                                  # unpacking
    "K, L = 1",                                    # unpacking a number
])
def test_an_assignment_that_could_run_code_is_not_kept(assignment):
    """Is an assignment whose value needs a call, a comprehension, a subscript (or anything else that could
    run code or fail where the original did not) left out with the rest of the stopped cell, a literal one
    above it kept?"""
    kept, names = cellplan.definitions_only(f"J = 1\n{assignment}\ndef f():\n    return J")
    assert kept == "J = 1\n\ndef f():\n    return J" and names == ("J", "f")


@pytest.mark.parametrize(("source", "expected"), [
    ("import time\nW = 5\ntime.sleep(0.9)", True),
    ("total += 1", True),
    ("n: int = 3", True),
    ("for i in range(3):\n    pass", True),
    ("with open('f') as handle:\n    pass", True),
    ("table['a'] = 1", True),
    ("del table", True),
    ("print([y := 2 for _ in range(1)])", True),
    ("def f():\n    return 1", True),
    ("import os", True),
    ("try:\n    pass\nexcept ValueError as err:\n    pass", True),
    ("time.sleep(0.5)", False),
    ("print([x * 2 for x in range(3)])", False),
    ("plt.plot(sorted(data, key=lambda v: -v))", False),
    ("%%bash\nsleep 100", False),
    ("def f(:\n    pass", True),
])
def test_binds_names_tells_cells_that_set_data_from_those_that_only_run(source, expected):
    """Does binds_names say a cell binds a module-level name for assignments of every kind, loop,
    `with` and `except` targets, `del`, `:=`, definitions and imports (and when it cannot be read),
    and not for sleeps, prints, plots, comprehensions and lambdas or a cell the sandbox does not run?"""
    assert cellplan.binds_names(source) is expected
