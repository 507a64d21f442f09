"""A graded function whose parameters do not fit the released def line: read from the source alone, and
said in a note (never a deduction) on the student's page and in results.json."""
from __future__ import annotations

import html
import json
import re
import shutil

import nbformat
import pytest

from autograder.config import load_course
from autograder.deflines import MAX_PARSED, fits, last_bindings, top_level_bindings
from autograder.grading.engine import load
from autograder.layout import EXAMPLES, CourseLayout
from autograder.notebooks import load_notebook
from conftest import ROOT, copy_course

RELEASED = "def layer_norm(x, gamma, beta, eps=1e-5):\n    raise NotImplementedError()"


def def_line(source: str):
    """The def line of the last function `source` defines."""
    return top_level_bindings(source)[-1][1]


@pytest.mark.parametrize("mine, fit", [
    ("def layer_norm(x, gamma, beta, eps=1e-5):", True),
    ("def layer_norm(x, gamma, beta, eps=1e-6):", True),              # a default's value is not compared
    ("def layer_norm(x: 'ndarray', gamma, beta, eps: float = 1e-5) -> 'ndarray':", True),
    ("def layer_norm(x, gamma, beta, eps=1e-5, verbose=False):", True),  # an added optional parameter
    ("def layer_norm(x, gamma, beta, eps=1e-5, *args, debug=False, **kwargs):", True),
    ("def layer_norm(x, gamma, beta, epsilon=1e-5):", False),          # renamed
    ("def layer_norm(x, beta, gamma, eps=1e-5):", False),              # reordered
    ("def layer_norm(x, gamma, beta, eps):", False),                   # its default dropped
    ("def layer_norm(x, gamma, beta=None, eps=1e-5):", False),         # a default added
    ("def layer_norm(x, gamma, beta):", False),                        # a parameter dropped
    ("def layer_norm(x, gamma, beta, eps=1e-5, *, axis):", False),     # an added parameter without default
    ("def layer_norm(x, gamma, beta, /, eps=1e-5):", False),           # no longer passed by name
    ("def layer_norm(x, gamma, beta, *, eps=1e-5):", False),           # no longer passed by position
])
def test_parameters_fit_the_released_ones_only_as_a_call_written_for_them_needs(mine, fit):
    """Does a def line fit the released one when every released parameter keeps its name, place, kind and
    whether it has a default (annotations, default values and parameters added with a default aside), and
    not when one is renamed, reordered, dropped, loses or gains a default, or changes kind?"""
    released = def_line(RELEASED)
    assert fits(def_line(mine + "\n    pass"), released) is fit


def test_keyword_only_parameters_fit_in_any_order_and_var_parameters_are_kept():
    """Do keyword-only parameters fit in any order (a call names them), while *args and **kwargs the release
    takes must stay, and positional parameters added before the release's *args do not fit?"""
    released = def_line("def f(x, *args, a, b=1, **kwargs):\n    pass")
    assert fits(def_line("def f(x, *rest, b=1, a, **options):\n    pass"), released)
    assert not fits(def_line("def f(x, *args, a, b=1):\n    pass"), released)
    assert not fits(def_line("def f(x, *, a, b=1, **kwargs):\n    pass"), released)
    assert not fits(def_line("def f(x, y=0, *args, a, b=1, **kwargs):\n    pass"), released)
    assert not fits(def_line("def f(x, *args, a=0, b=1, **kwargs):\n    pass"), released)


def test_the_def_line_is_quoted_as_written_without_annotations():
    """Is the def line shown with its defaults as written (`1e-5`, not `1e-05`), its markers (`/`, `*`), on
    one line, without annotations, a backtick written as a quote and a long one cut?"""
    source = ("async def f(a: int, /, b=1e-5, *args: float, c=(1,\n       2), d=\"`x`\", **kw) -> None:\n"
              "    pass")
    assert def_line(source).text == "async def f(a, /, b=1e-5, *args, c=(1, 2), d=\"'x'\", **kw)"
    assert def_line("def g(x, *, y):\n    pass").text == "def g(x, *, y)"
    assert def_line(f"def h(x={'0' * 200}, *, clip):\n    pass").text == "def h(x=\u2026, *, clip)"
    long = def_line(f"def h({', '.join(f'a{i}' for i in range(100))}):\n    pass").text
    assert len(long) == 120 and long.endswith("\u2026")
    quoted = def_line("def k(s='\u00e9t\u00e9', t={\n  'a': 1}):\n    pass").text
    assert quoted == "def k(s='\u00e9t\u00e9', t={ 'a': 1})"


def test_a_cell_is_split_into_lines_once_however_many_defaults_it_quotes(monkeypatch):
    """Is a cell split into lines once, not once per default quoted (thousands of defaults in a cell naming
    a graded function cost a grading worker minutes when each quote split the cell again)?"""
    from autograder import deflines
    calls = []
    split = deflines._source_lines
    monkeypatch.setattr(deflines, "_source_lines", lambda source: calls.append(1) or split(source))
    cell = "def layer_norm(x, eps=1e-5):\n    return x\n" + "".join(f"def f{i}(a=0, b=1):pass\n" for i in range(300))
    assert last_bindings([cell], ("layer_norm",))["layer_norm"][1].text == "def layer_norm(x, eps=1e-5)"
    assert calls == [1]


def test_a_function_is_known_only_when_its_last_binding_is_a_plain_def():
    """Does every top-level binding of a name count in order, a def without decorators giving its def line and
    anything else (an assignment, an import, a decorated def, a `global` in a function) none; and does a cell
    the sandbox does not run (a cell magic skips it, it does not parse) bind nothing?"""
    cell = ("import numpy as np\n"
            "def f(x):\n    return x\n"
            "g = f\n"
            "@np.vectorize\ndef h(x):\n    return x\n"
            "def k(x):\n    global f\n    f = len\n"
            "for i in range(2):\n    pass\n"
            "squares = [j * j for j in range(3)]\n")
    bound = [(name, line.text if line else None) for name, line in top_level_bindings(cell)]
    assert bound == [("np", None), ("f", "def f(x)"), ("g", None), ("h", None), ("f", None), ("k", "def k(x)"),
                     ("i", None), ("squares", None)]
    assert top_level_bindings("%%timeit\ndef f(x):\n    return x") == ()
    assert top_level_bindings("def f(x):\n    return (x") == ()
    assert top_level_bindings("%%time\ndef f(y):\n    return y")[0][1].text == "def f(y)"


def test_a_cell_too_long_to_parse_leaves_the_functions_it_names_unknown():
    """Is a cell longer than MAX_PARSED not parsed on the grader's side, a graded function it names taken
    as bound there to something unknown (so nothing is said of it), and a function it does not name left
    as the earlier cells bound it?"""
    renamed = "def layer_norm(x, gamma, beta, epsilon=1e-5):\n    return x\n"
    long = renamed + "x = 1\n" * (MAX_PARSED // 6)
    assert len(long) > MAX_PARSED
    found = last_bindings(["def silu(y):\n    return y", renamed, long], ("layer_norm", "silu"))
    assert found["layer_norm"] == (2, None)
    assert found["silu"][0] == 0 and found["silu"][1].text == "def silu(y)"
    at_most = renamed + "#" * (MAX_PARSED - len(renamed))
    assert last_bindings(["x = 1", at_most], ("layer_norm",))["layer_norm"][1].text == (
        "def layer_norm(x, gamma, beta, epsilon=1e-5)")


def test_the_parsing_budget_is_the_notebooks_not_each_cells():
    """Are the cells that name a graded function parsed only up to MAX_PARSED characters in all, so that
    many long cells cost the grader no more than one, the functions named past the budget left unknown?"""
    filler = "x = 1\n" * (MAX_PARSED // 6 // 3)
    cells = [f"def layer_norm(x, gamma, beta, eps{i}=1e-5):\n    return x\n" + filler for i in range(5)]
    assert all(len(cell) < MAX_PARSED for cell in cells) and sum(map(len, cells)) > MAX_PARSED
    assert last_bindings(cells[:2], ("layer_norm",))["layer_norm"][1].text == (
        "def layer_norm(x, gamma, beta, eps1=1e-5)")
    assert last_bindings(cells, ("layer_norm",))["layer_norm"] == (4, None)
    assert last_bindings(["x = 1\n" * (MAX_PARSED // 6 + 1), *cells[:1]], ("layer_norm",))["layer_norm"][1] is not None


def _answer(source: str, grade_id: str) -> nbformat.NotebookNode:
    meta = {"grade": False, "solution": True, "locked": False, "grade_id": grade_id}
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": meta})


def _note(cell: str, mine: str, given: str) -> str:
    return (f"hw.ipynb: `layer_norm` is defined as `{mine}` in {cell}, but its def line in the released notebook "
            f"is `{given}`. Code written for the released def line (your instructors' code, the course's later "
            f"notebooks) may pass arguments by their released names or leave out those with a default, and "
            f"would then fail or work differently with yours: keep its parameters, their names, order and "
            f"defaults, as given.")


def test_a_graded_function_whose_parameters_differ_from_the_release_is_noted_once(tmp_path):
    """Is a graded function whose definition run last does not fit its released def line noted once, naming
    both def lines and the cell; and is nothing said when it fits, of a function that is not graded, of one
    the notebook does not define, or without a readable release?"""
    course = CourseLayout(tmp_path)
    release, submission = course.release("hw") / "hw.ipynb", course.submission("ada", "hw") / "hw.ipynb"
    helper = "def helper(x, y):\n    return x"
    released = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(helper), _answer(RELEASED, "ln"),
                                               _answer("def silu(x):\n    raise NotImplementedError()", "silu")])
    answer = "def layer_norm(x, gamma, beta, eps=1e-5):\n    return x"
    submitted = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def helper(x, z):\n    return x"),
                                                _answer(answer, "ln"), _answer("x = 1", "silu")])
    for path, nb in ((release, released), (submission, submitted)):
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    graded = ("layer_norm", "silu", "layer_norm")

    def notes() -> tuple[str, ...]:
        loaded = load_notebook(submission, max_mb=5, release=release, functions=graded, replaced=frozenset({"test_ln"}))
        return tuple(n for n in loaded.notes if "defined again" not in n)

    assert notes() == ()
    submitted.cells[1].source = answer.replace("eps", "epsilon")
    nbformat.write(submitted, submission)
    assert notes() == (_note("the 2nd code cell (`def layer_norm`)", "def layer_norm(x, gamma, beta, epsilon=1e-5)",
                             "def layer_norm(x, gamma, beta, eps=1e-5)"),)
    assert load_notebook(submission, max_mb=5, release=release).notes == ()
    assert load_notebook(submission, max_mb=5, release=tmp_path / "none.ipynb", functions=graded).notes == ()
    # the definition run last counts: a scratch cell with the released parameters after it, then one without
    submitted.cells.append(nbformat.v4.new_code_cell(answer))
    nbformat.write(submitted, submission)
    assert notes() == ()
    submitted.cells.append(nbformat.v4.new_code_cell("def layer_norm(x, gamma, beta, eps):\n    return x"))
    nbformat.write(submitted, submission)
    assert notes() == (_note("the 5th code cell (`def layer_norm`)", "def layer_norm(x, gamma, beta, eps)",
                             "def layer_norm(x, gamma, beta, eps=1e-5)"),)
    # a def typed into an autograder-test cell is not run (hidden graders replace those cells): not noted
    submitted.cells.pop()
    test_cell = nbformat.v4.new_code_cell("def layer_norm(x, g, b, eps=1e-5):\n    return x\nassert True")
    test_cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "test_ln",
                                      "points": 1}
    submitted.cells.append(test_cell)
    nbformat.write(submitted, submission)
    assert notes() == ()
    test_cell.metadata["nbgrader"]["grade_id"] = "extra_checks"     # one no grader replaces: it runs, and counts
    nbformat.write(submitted, submission)
    assert notes() == (_note("the 5th code cell (`def layer_norm`)", "def layer_norm(x, g, b, eps=1e-5)",
                             "def layer_norm(x, gamma, beta, eps=1e-5)"),)
    release.write_text("{")                     # a release that cannot be read: nothing is compared
    assert notes() == ()


@pytest.mark.slow
def test_grading_a_renamed_parameter_gives_full_marks_and_the_note_on_the_page_and_in_results_json(tmp_path):
    """Graded end to end (`course autograde`, one student), does a right layer_norm whose `eps` is renamed
    `epsilon` keep full marks and get the note naming both def lines, in results.json and on the page, with
    nothing of the hidden checks in it?"""
    from autograder import api

    folder = copy_course(tmp_path / "course")
    layout = CourseLayout(folder)
    shutil.copytree(CourseLayout(ROOT / EXAMPLES).submission("ada", "transformer-block"),
                    layout.submission("ada", "transformer-block"))
    (folder / "roster.csv").write_text("id\nada\n")
    path = layout.submission("ada", "transformer-block") / "transformer-block.ipynb"
    nb = nbformat.read(path, as_version=4)
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("def layer_norm(")]
    cell.source = re.sub(r"\beps\b", "epsilon", cell.source)
    assert cell.source.startswith("def layer_norm(x, gamma, beta, epsilon=1e-5):")
    nbformat.write(nb, path)
    course = load_course(folder)
    assignment = course.assignment("transformer-block")
    (note,) = [n for n in load(course, assignment, "ada", path.parent).notes if "def line" in n]
    assert note.startswith("transformer-block.ipynb: `layer_norm` is defined as `def layer_norm(x, gamma, beta, "
                           "epsilon=1e-5)` in the ") and "is `def layer_norm(x, gamma, beta, eps=1e-5)`." in note
    assert "check" not in note and "test_" not in note and "position" not in note

    batch = api.autograde(folder, "transformer-block", student="ada", workers=1)
    assert batch.results[0].score == batch.results[0].max_score == 100
    results = json.loads(layout.results_json("ada", "transformer-block").read_text())
    assert results["score"] == 100
    assert [n for n in results["extra_data"]["notes"] if "def line" in n] == [note]
    assert note in results["output"]
    (page,) = layout.feedback("ada", "transformer-block").glob("*.html")
    shown = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))     # `code` is shown as <code>code</code>
    assert note.replace("`", "") in re.sub(r"\s+", " ", shown)
