"""Loading submitted notebooks: every kind of broken file becomes a reason, never a crash."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from autograder.config import load_course
from autograder.grading.engine import load
from autograder.layout import CourseLayout
from autograder.notebooks import (
    as_released,
    copied_cells,
    find_submission_notebooks,
    load_notebook,
    named_like,
    ordinal,
)


def write_nb(path: Path, *sources: str, markdown: str | None = None) -> Path:
    nb = nbformat.v4.new_notebook()
    if markdown:
        nb.cells.append(nbformat.v4.new_markdown_cell(markdown))
    nb.cells.extend(nbformat.v4.new_code_cell(s) for s in sources)
    nbformat.write(nb, path)
    return path


def test_load_reads_code_cells_in_order(tmp_path):
    """Are code cells read in order, with their positions among all cells?"""
    nb = load_notebook(write_nb(tmp_path / "a.ipynb", "x = 1", "y = 2", markdown="# hi"), max_mb=5)
    assert nb.readable and not nb.notes
    assert [(c.index, c.source) for c in nb.cells] == [(1, "x = 1"), (2, "y = 2")]


def test_load_not_json_gives_a_reason(tmp_path):
    """Does a file that is not JSON give a reason naming the file and the position?"""
    path = tmp_path / "hw.ipynb"
    path.write_text('{"cells": [')
    nb = load_notebook(path, max_mb=5)
    assert not nb.readable and nb.cells == ()
    assert nb.notes[0].startswith("hw.ipynb is not valid notebook JSON (line 1")


def test_load_a_byte_order_mark_says_what_it_is_and_how_to_save_the_file_again(tmp_path):
    """Does a notebook saved by an editor as "UTF-8 with BOM" (Notepad) say so in plain words, and
    how to save it so that it can be graded, rather than give the JSON parser's jargon?"""
    path = write_nb(tmp_path / "hw.ipynb", "x = 1")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    nb = load_notebook(path, max_mb=5)
    assert not nb.readable and nb.cells == ()
    assert nb.notes == (
        "hw.ipynb starts with a byte-order mark, an invisible mark that some editors (such as Windows Notepad) put at "
        "the start of a file; Jupyter cannot open such a file either, so nothing was graded. Save it again as UTF-8 "
        "without BOM (in Notepad: Save As, Encoding \"UTF-8\"), or submit the copy Jupyter last saved, and "
        "resubmit.",)


def test_load_empty_file_gives_a_reason(tmp_path):
    """Does an empty file give a reason?"""
    path = tmp_path / "hw.ipynb"
    path.write_bytes(b"")
    assert load_notebook(path, max_mb=5).notes == ("hw.ipynb is an empty file; nothing could be graded.",)


def test_load_nbformat3_is_converted_with_a_note(tmp_path):
    """Is an nbformat 3 notebook read (its worksheets' code cells) with a note?"""
    path = tmp_path / "old.ipynb"
    path.write_text(json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [
        {"cells": [{"cell_type": "code", "input": ["def f(x):\n", "    return x\n"], "outputs": []}]}]}))
    nb = load_notebook(path, max_mb=5)
    assert nb.readable
    assert nb.cells[0].source == "def f(x):\n    return x\n"
    assert "format 3" in nb.notes[0]


def test_load_no_code_cells_gives_a_reason(tmp_path):
    """Does a notebook with only markdown say that nothing could be found?"""
    nb = load_notebook(write_nb(tmp_path / "m.ipynb", markdown="just prose"), max_mb=5)
    assert not nb.readable
    assert "has no code cells" in nb.notes[0]


def test_load_over_the_size_limit_is_not_read(tmp_path):
    """Is a notebook over the size limit refused with its size and the limit?"""
    path = write_nb(tmp_path / "big.ipynb", "x = '" + "a" * 2_000_000 + "'")
    nb = load_notebook(path, max_mb=1)
    assert not nb.readable
    assert "over the 1 MB limit" in nb.notes[0]


def test_load_large_outputs_under_the_limit_are_ignored(tmp_path):
    """Are megabytes of stored output ignored (only code is run)?"""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('x' * 10)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 5_000_000)]
    nb.cells.append(cell)
    nbformat.write(nb, tmp_path / "out.ipynb")
    loaded = load_notebook(tmp_path / "out.ipynb", max_mb=20)
    assert loaded.readable and loaded.cells[0].source == "print('x' * 10)"


def test_load_never_modifies_the_file(tmp_path):
    """Is the submitted file byte-for-byte unchanged after loading?"""
    path = write_nb(tmp_path / "a.ipynb", "x = 1")
    before = path.read_bytes()
    load_notebook(path, max_mb=5)
    assert path.read_bytes() == before


def test_find_a_renamed_single_notebook_is_used_with_a_note(tmp_path):
    """Is a single notebook under another name graded in place of the expected one, with a note?"""
    write_nb(tmp_path / "Copy of hw.ipynb", "x = 1")
    found, notes = find_submission_notebooks(tmp_path, ("hw.ipynb",))
    assert found["hw.ipynb"].name == "Copy of hw.ipynb"
    assert "Expected hw.ipynb; graded Copy of hw.ipynb" in notes[0]


def test_a_renamed_copy_beside_a_scratch_notebook_is_graded(tmp_path):
    """Is the one notebook named like the expected one graded in its place when a scratch notebook lies
    beside it (a renamed copy and an Untitled.ipynb), the scratch one alone named as not part of the
    assignment?"""
    copy = write_nb(tmp_path / "HW-Copy1.ipynb", "x = 1")
    write_nb(tmp_path / "Untitled.ipynb", "1 + 1")
    found, notes = find_submission_notebooks(tmp_path, ("hw.ipynb",))
    assert found == {"hw.ipynb": copy}
    assert notes == ("Expected hw.ipynb; graded HW-Copy1.ipynb instead (please keep the file name).",
                     "Untitled.ipynb is not part of this assignment and was ignored.")


def test_copies_named_like_the_notebook_are_named_as_copies_not_as_foreign_files(tmp_path):
    """Does a second upload beside the expected notebook ("hw (1).ipynb") say it was not graded and how to
    submit it instead, and do two such copies without the expected notebook say why neither was taken?"""
    write_nb(tmp_path / "hw.ipynb", "x = 1")
    write_nb(tmp_path / "hw (1).ipynb", "x = 2")
    found, notes = find_submission_notebooks(tmp_path, ("hw.ipynb",))
    assert found == {"hw.ipynb": tmp_path / "hw.ipynb"}
    assert notes == ("hw (1).ipynb, named like hw.ipynb, was not graded: only hw.ipynb was. If it is the version "
                     "you meant to submit, name it hw.ipynb (and remove the other) and resubmit.",)
    (tmp_path / "hw.ipynb").rename(tmp_path / "hw (2).ipynb")
    found, notes = find_submission_notebooks(tmp_path, ("hw.ipynb",))
    assert found == {"hw.ipynb": None}
    assert notes == ("hw.ipynb was not submitted.",
                     *(f"hw ({n}).ipynb, named like hw.ipynb, was not graded: several notebooks are named like it, "
                       f"so none was taken for it. Keep one, named hw.ipynb, and resubmit." for n in (1, 2)))


@pytest.mark.parametrize("name", ["hw-Copy1.ipynb", "hw-Copy1 (2).ipynb", "hw (1).ipynb", "hw(1).ipynb",
                                  "Copy of HW.ipynb", "hw copy.ipynb", "HW_copy.ipynb", " hw copy 2 .ipynb"])
def test_a_copy_jupyter_a_browser_or_a_download_made_is_named_like_the_notebook(name):
    """Is each copy Jupyter, a file manager, a browser or an LMS download makes of hw.ipynb named like it?"""
    assert named_like(name, "hw.ipynb")


@pytest.mark.parametrize(("name", "expected"), [("lab10.ipynb", "lab1.ipynb"), ("hw1.ipynb", "hw.ipynb"),
                                                ("hw3_backup_old.ipynb", "hw3.ipynb"), ("my hw.ipynb", "hw.ipynb"),
                                                ("hw.ipynb", "hw3.ipynb")])
def test_a_name_that_merely_holds_the_notebook_s_is_not_named_like_it(name, expected):
    """Is a notebook whose name only contains the expected one's (another lab, a backup) not taken for it?"""
    assert not named_like(name, expected)


def test_another_notebook_holding_the_expected_name_is_not_graded_in_its_place(tmp_path):
    """With lab1.ipynb missing, is lab10.ipynb (beside another notebook) not graded as lab1.ipynb, and does
    a copy of a second notebook of the assignment name that notebook, not the first whose name it holds?"""
    write_nb(tmp_path / "lab10.ipynb", "x = 1")
    write_nb(tmp_path / "final.ipynb", "x = 2")
    found, notes = find_submission_notebooks(tmp_path, ("lab1.ipynb",))
    assert found == {"lab1.ipynb": None}
    assert notes == ("lab1.ipynb was not submitted.",
                     "final.ipynb is not part of this assignment and was ignored.",
                     "lab10.ipynb is not part of this assignment and was ignored.")
    (tmp_path / "lab10.ipynb").rename(tmp_path / "lab10 (1).ipynb")
    found, notes = find_submission_notebooks(tmp_path, ("lab1.ipynb", "lab10.ipynb"))
    assert found == {"lab1.ipynb": None, "lab10.ipynb": None}
    assert "lab10 (1).ipynb, named like lab10.ipynb, was not graded; name it lab10.ipynb and resubmit." in notes


def test_a_notebook_whose_extension_is_in_capitals_is_graded_as_a_renamed_one(tmp_path):
    """Is `hw.IPYNB` (or `.Ipynb`) graded in place of hw.ipynb with the renamed notebook's note, not
    taken for another file and the notebook called not submitted?"""
    for name in ("hw.IPYNB", "HW.Ipynb"):
        path = write_nb(tmp_path / name, "x = 1")
        found, notes = find_submission_notebooks(tmp_path, ("hw.ipynb",))
        assert found == {"hw.ipynb": path}
        assert notes == (f"Expected hw.ipynb; graded {name} instead (please keep the file name).",)
        path.unlink()


def test_notes_write_out_control_characters_of_submitted_names(tmp_path):
    """Do the notes name a renamed notebook, an extra one and an unreadable one with their control
    characters (an escape sequence, a newline) written out, so no report or terminal acts on them?"""
    stand_in = write_nb(tmp_path / "tb\n\x1b[31m.ipynb", "x = 1")
    extra = write_nb(tmp_path / "x\x1b[2K.ipynb", "y = 2")
    found, notes = find_submission_notebooks(tmp_path, ("hw.ipynb",))
    assert found == {"hw.ipynb": None}
    assert notes == ("hw.ipynb was not submitted.", "tb\\x0a\\x1b[31m.ipynb is not part of this assignment and was "
                     "ignored.", "x\\x1b[2K.ipynb is not part of this assignment and was ignored.")
    extra.unlink()
    found, notes = find_submission_notebooks(tmp_path, ("hw.ipynb",))
    assert found == {"hw.ipynb": stand_in}
    assert notes == ("Expected hw.ipynb; graded tb\\x0a\\x1b[31m.ipynb instead (please keep the file name).",)
    stand_in.write_bytes(b"")
    assert load_notebook(stand_in, max_mb=5).notes == (
        "tb\\x0a\\x1b[31m.ipynb is an empty file; nothing could be graded.",)
    (tmp_path / "a\x07.ipynb").mkdir()
    assert load_notebook(tmp_path / "a\x07.ipynb", max_mb=5).notes == (
        "a\\x07.ipynb is a folder, not a regular file, so it was not read.",)


def test_find_missing_notebook_is_noted(tmp_path):
    """Does an empty submission folder say the notebook was not submitted?"""
    found, notes = find_submission_notebooks(tmp_path, ("hw.ipynb",))
    assert found == {"hw.ipynb": None}
    assert notes == ("hw.ipynb was not submitted.",)


def test_load_too_many_code_cells_gives_a_reason(tmp_path):
    """Is a notebook with more code cells than the limit refused with the count, without running any?"""
    from autograder.notebooks import MAX_CODE_CELLS

    nb = load_notebook(write_nb(tmp_path / "many.ipynb", *(["x = 1"] * (MAX_CODE_CELLS + 1))), max_mb=20)
    assert not nb.readable and nb.cells == ()
    assert f"has {MAX_CODE_CELLS + 1:,} code cells" in nb.notes[0]


def test_load_skips_a_code_cell_whose_source_lines_are_not_all_text(tmp_path):
    """Is a code cell whose source is a list with a non-string line skipped with a note (and one
    of strings joined), rather than crashing or running half of it?"""
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": src}
             for src in (["x = 1\n", "y = 2"], ["x = 1\n", 2], ["z = 3\n", None], "w = 4")]
    cells[2]["id"] = "a1b2"
    path = tmp_path / "hw.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    nb = load_notebook(path, max_mb=5)
    assert [(c.index, c.source) for c in nb.cells] == [(0, "x = 1\ny = 2"), (3, "w = 4")]
    assert nb.notes == ("hw.ipynb: the 2nd and 3rd (id 'a1b2') code cells had malformed source (not text, as "
                        "Jupyter saves it) and were skipped.",)
    assert nb.cells[1].label == "the 4th code cell (`w = 4`)"


@pytest.mark.parametrize("sources, named", [
    ([None], "the 1st code cell had"),
    (["x = 1", [1, 2]], "the 2nd code cell had"),
    ([None] * 7, "the 1st, 2nd, 3rd, 4th, 5th and 2 more code cells had"),
])
def test_load_names_each_code_cell_skipped_for_its_source(tmp_path, sources, named):
    """Does the note on code cells whose source is null or a list of numbers say which cells (as a student
    counts code cells), rather than only how many?"""
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": src}
             for src in sources]
    path = tmp_path / "hw.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": cells}))
    notes = [n for n in load_notebook(path, max_mb=5).notes if "malformed" in n]
    assert notes == [f"hw.ipynb: {named} malformed source (not text, as Jupyter saves it) and "
                     f"{'was' if 'cell had' in named else 'were'} skipped."]


@pytest.mark.parametrize("major, says", [
    ('"4"', 'has the notebook format "4"; it must be the integer 4 (or 3)'),
    ("null", "has no notebook format; it must be the integer 4 (or 3)"),
    ("5", "has notebook format 5; only formats 3 and 4 can be read."),
])
def test_load_a_notebook_format_that_is_not_an_integer_says_it_must_be_one(tmp_path, major, says):
    """Is `"nbformat": "4"` (text) or null refused saying the format must be the integer 4, rather than as if
    "4" were some format other than 4?"""
    path = tmp_path / "hw.ipynb"
    path.write_text(f'{{"nbformat": {major}, "nbformat_minor": 5, "metadata": {{}}, "cells": []}}')
    nb = load_notebook(path, max_mb=5)
    assert not nb.readable and nb.notes[0].startswith(f"hw.ipynb {says}"), nb.notes


def test_load_a_number_too_long_for_python_gives_a_reason(tmp_path):
    """A JSON integer of 5,000 digits in the metadata, which Python refuses to convert (ValueError, not a
    JSONDecodeError): is the notebook unreadable with a note saying why, rather than crashing the grader?"""
    path = write_nb(tmp_path / "hw.ipynb", "x = 1")
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["metadata"]["n"] = "@"
    path.write_text(json.dumps(nb).replace('"@"', "7" * 5000), encoding="utf-8")
    nb = load_notebook(path, max_mb=5)
    assert not nb.readable and nb.cells == ()
    assert nb.notes == ("hw.ipynb holds a number of more than 4,300 digits, which Jupyter never writes; it was not "
                        "read (was it edited outside Jupyter?).",)


def test_load_notes_a_copied_grade_cell_once(tmp_path):
    """When two grade cells share a grade id (a student copied one), is that said once, naming both
    cells and that only the last is graded (as nbgrader's DeduplicateIds keeps the last), and is only the
    last the test cell (the earlier copy runs as any code cell)?"""
    nb = nbformat.v4.new_notebook()
    test = {"grade": True, "solution": False, "locked": True, "grade_id": "test_f", "points": 2}
    answer = {"grade": False, "solution": True, "locked": False, "grade_id": "f_solution"}
    nb.cells = [nbformat.v4.new_code_cell("def f(x):\n    return x", metadata={"nbgrader": answer}),
                nbformat.v4.new_code_cell("assert f(1) == 1", metadata={"nbgrader": test}),
                nbformat.v4.new_markdown_cell("copied below:"),
                nbformat.v4.new_code_cell("assert f(1) == 1", metadata={"nbgrader": dict(test)})]
    nbformat.write(nb, tmp_path / "hw.ipynb")
    loaded = load_notebook(tmp_path / "hw.ipynb", max_mb=5)
    assert loaded.notes == ("hw.ipynb: the grade cell `test_f` appears 2 times (the 2nd code cell "
                            "(`assert f(1) == 1`); the 3rd code cell (`assert f(1) == 1`)); was it copied, "
                            "or its nbgrader metadata edited? Only the last holds its grade: the copy is not graded.",)
    assert [c.test_of for c in loaded.cells] == ["", "", "test_f"]


def test_load_notes_a_copied_answer_cell_once_and_takes_the_last(tmp_path):
    """When a student copied their solution cell (three cells with one solution id, one of them a
    markdown answer) and a read-only cell, is each said once, the last taken as the answer, while
    every copy still runs in order (the last definition is the one graded)?"""
    nb = nbformat.v4.new_notebook()
    answer = {"grade": False, "solution": True, "locked": False, "grade_id": "f_solution"}
    setup = {"grade": False, "solution": False, "locked": True, "grade_id": "setup"}
    nb.cells = [nbformat.v4.new_code_cell("import math", metadata={"nbgrader": setup}),
                nbformat.v4.new_code_cell("def f(x):\n    return x", metadata={"nbgrader": answer}),
                nbformat.v4.new_markdown_cell("my notes", metadata={"nbgrader": dict(answer)}),
                nbformat.v4.new_code_cell("import math", metadata={"nbgrader": dict(setup)}),
                nbformat.v4.new_code_cell("def f(x):\n    return 2 * x", metadata={"nbgrader": dict(answer)}),
                nbformat.v4.new_code_cell("print(f(1))")]
    nbformat.write(nb, tmp_path / "hw.ipynb")
    loaded = load_notebook(tmp_path / "hw.ipynb", max_mb=5)
    assert loaded.notes == (
        "hw.ipynb: the read-only cell `setup` appears 2 times (the 1st code cell (`import math`); the 3rd code "
        "cell (`import math`)); was it copied, or its nbgrader metadata edited? Only the last is kept as that "
        "cell: the copy is not.",
        "hw.ipynb: the answer cell `f_solution` appears 3 times (the 2nd code cell (`def f`); a Markdown cell; the "
        "4th code cell (`def f`)); was it copied, or its nbgrader metadata edited? The last is taken as your "
        "answer (it ran last, so its definitions are the ones graded unless it stopped with an error before making "
        "them): the copies are not.")
    assert [c.source for c in loaded.cells][1::2] == ["def f(x):\n    return x", "def f(x):\n    return 2 * x"]
    assert len(loaded.cells) == 5


def test_load_notes_a_function_defined_again_after_its_answer_or_given_cell(tmp_path):
    """When a later cell defines again a function of an answer cell (a scratch experiment at the end) or
    of a given read-only cell (the student's own `softmax` in another answer cell), is each said once,
    naming both cells and that the later definition is the one used; and is nothing said of a cell that
    defines it before its answer cell, of a copy of the answer cell (noted as a copy), or of a later cell
    that does not compile or that a cell magic skips (neither defines anything when run)?"""
    nb = nbformat.v4.new_notebook()
    setup = {"grade": False, "solution": False, "locked": True, "grade_id": "setup"}
    answer_f = {"grade": False, "solution": True, "locked": False, "grade_id": "f_solution"}
    answer_g = {"grade": False, "solution": True, "locked": False, "grade_id": "g_solution"}
    nb.cells = [nbformat.v4.new_code_cell("def g(x):\n    return 0", metadata={"nbgrader": {}}),
                nbformat.v4.new_code_cell("def softmax(x):\n    return x", metadata={"nbgrader": setup}),
                nbformat.v4.new_code_cell("def f(x):\n    return x", metadata={"nbgrader": answer_f}),
                nbformat.v4.new_code_cell("def softmax(x):\n    return 2 * x\n\n\ndef g(x):\n    return softmax(x)",
                                          metadata={"nbgrader": answer_g}),
                nbformat.v4.new_code_cell("# trying\ndef f(x):\n    return 2 * x"),
                nbformat.v4.new_code_cell("def f(x):\n    return x +", metadata={"nbgrader": dict(answer_f)}),
                nbformat.v4.new_code_cell("%%bash\ndef f(x):\n    return 3")]
    nbformat.write(nb, tmp_path / "hw.ipynb")
    loaded = load_notebook(tmp_path / "hw.ipynb", max_mb=5)
    assert loaded.notes[1:] == (
        "hw.ipynb: `softmax`, given in the 2nd code cell (`def softmax`), is defined again in the 4th code cell "
        "(`def softmax`): your functions call that later definition, not the given one.",
        "hw.ipynb: `f`, written in its answer cell (the 3rd code cell (`def f`)), is defined again in the 5th code "
        "cell (`def f`), which runs after it: that later definition is the one graded, and the one your other "
        "functions call.")
    assert loaded.notes[0].startswith("hw.ipynb: the answer cell `f_solution` appears 2 times")


def _nbgrader_cell(source: str, grade_id: str = "", *, answer: bool = False) -> nbformat.NotebookNode:
    """A code cell: an answer cell (`answer`) or a given read-only cell of id `grade_id`, else a plain one."""
    meta = {"grade": False, "solution": answer, "locked": not answer, "grade_id": grade_id} if grade_id else {}
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": meta})


def test_a_redefinition_the_released_notebook_itself_makes_is_not_noted(tmp_path):
    """When the released notebook itself defines a function again (two given cells defining the same helper,
    a given stub its answer cell replaces), is nothing said of it to the student who keeps it, while a
    function the student defines again (the helper tried again at the end) is still said, naming that cell?"""
    course = CourseLayout(tmp_path)
    release, submission = course.release("hw") / "hw.ipynb", course.submission("ada", "hw") / "hw.ipynb"
    given = [_nbgrader_cell("def helper(x):\n    return x", "setup"),
             _nbgrader_cell("def helper(x):\n    return x + 0", "more_setup"),
             _nbgrader_cell("def f(x):\n    raise NotImplementedError", "stub")]
    stub = "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError"
    released = nbformat.v4.new_notebook(cells=[*given, _nbgrader_cell(stub, "f_solution", answer=True)])
    submitted = nbformat.v4.new_notebook(cells=[*given, _nbgrader_cell("def f(x):\n    return helper(x)",
                                                                       "f_solution", answer=True)])
    for path, nb in ((release, released), (submission, submitted)):
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    assert load_notebook(submission, max_mb=5, release=release).notes == ()
    submitted.cells.append(nbformat.v4.new_code_cell("def helper(x):\n    return 2 * x"))
    nbformat.write(submitted, submission)
    assert load_notebook(submission, max_mb=5, release=release).notes == (
        "hw.ipynb: `helper`, given in the 2nd code cell (`def helper`), is defined again in the 5th code cell "
        "(`def helper`): your functions call that later definition, not the given one.",)


def test_grading_compares_a_submission_with_its_release_before_noting_a_function_defined_again(course_copy):
    """Does grading read a submission beside the course's released notebook, so that a helper two given cells
    of the release define says nothing, while the student's own redefinition of it is still said?"""
    course = load_course(course_copy)
    assignment = course.assignment("transformer-block")
    release = course.layout.release(assignment.name) / "transformer-block.ipynb"
    folder = course.layout.submission("ada", assignment.name)
    nb = nbformat.read(release, as_version=4)
    nb.cells += [_nbgrader_cell("def _scale(x):\n    return x", "scale_given"),
                 _nbgrader_cell("def _scale(x):\n    return 1.0 * x", "scale_again")]
    nbformat.write(nb, release)
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / release.name)
    assert not [n for n in load(course, assignment, "ada", folder).notes if "defined again" in n]
    nb.cells.append(nbformat.v4.new_code_cell("def _scale(x):\n    return 2 * x"))
    nbformat.write(nb, folder / release.name)
    code = sum(cell.cell_type == "code" for cell in nb.cells)
    assert [n for n in load(course, assignment, "ada", folder).notes if "defined again" in n] == [
        f"transformer-block.ipynb: `_scale`, given in the {ordinal(code - 1)} code cell (`def _scale`), is "
        f"defined again in the {ordinal(code)} code cell (`def _scale`): your functions call that later "
        f"definition, not the given one."]


def test_the_note_on_a_function_defined_again_names_the_definition_run_last(tmp_path):
    """After an answer cell and a scratch cell defining its function again, does a later copy of the answer
    cell (which runs last, so its definition is graded) leave nothing to say, and does a scratch cell after
    that copy get named as the definition graded?"""
    answer = _nbgrader_cell("def f(x):\n    return x", "f_solution", answer=True)
    copy = _nbgrader_cell("def f(x):\n    return x + 1", "f_solution", answer=True)
    nb = nbformat.v4.new_notebook(cells=[answer, nbformat.v4.new_code_cell("def f(x):\n    return 0"), copy])
    nbformat.write(nb, tmp_path / "hw.ipynb")
    assert [n for n in load_notebook(tmp_path / "hw.ipynb", max_mb=5).notes if "defined again" in n] == []
    nb.cells.append(nbformat.v4.new_code_cell("x = 1\ndef f(x):\n    return 3"))
    nbformat.write(nb, tmp_path / "hw.ipynb")
    assert [n for n in load_notebook(tmp_path / "hw.ipynb", max_mb=5).notes if "defined again" in n] == [
        "hw.ipynb: `f`, written in its answer cell (the 3rd code cell (`def f`)), is defined again in the 4th code "
        "cell (`def f`), which runs after it: that later definition is the one graded, and the one your other "
        "functions call."]


def _write_pair(course: CourseLayout, released: nbformat.NotebookNode, submitted: nbformat.NotebookNode
                ) -> tuple[Path, Path]:
    release, submission = course.release("hw") / "hw.ipynb", course.submission("ada", "hw") / "hw.ipynb"
    for path, nb in ((release, released), (submission, submitted)):
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
    return release, submission


def _as_type(cell: nbformat.NotebookNode, cell_type: str) -> nbformat.NotebookNode:
    """`cell` as Jupyter saves it once its type is changed: same id, metadata and source."""
    make = nbformat.v4.new_markdown_cell if cell_type == "markdown" else nbformat.v4.new_raw_cell
    return make(cell.source, id=cell.id, metadata=json.loads(json.dumps(cell.metadata)))


def test_a_cell_whose_type_was_changed_runs_with_its_released_type(tmp_path):
    """An answer cell turned into Markdown or Raw: does it run as code, as released, with a note naming it, also
    when its nbgrader metadata was removed (paired by its Jupyter cell id) or names another cell; and is a cell
    released as Markdown (a written answer) that was turned into code not run?"""
    answer = _nbgrader_cell("def f(x):\n    raise NotImplementedError", "f_solution", answer=True)
    written = nbformat.v4.new_markdown_cell("YOUR ANSWER HERE", metadata={"nbgrader": {
        "grade": True, "solution": True, "locked": False, "grade_id": "why", "points": 1}})
    released = nbformat.v4.new_notebook(cells=[_nbgrader_cell("import math", "setup"), answer, written])
    course = CourseLayout(tmp_path)
    mine = _nbgrader_cell("def f(x):\n    return x", "f_solution", answer=True)
    mine.id = answer.id
    for cell_type, name in (("markdown", "Markdown"), ("raw", "Raw")):
        submitted = nbformat.v4.new_notebook(cells=[released.cells[0], _as_type(mine, cell_type), written])
        release, submission = _write_pair(course, released, submitted)
        loaded = load_notebook(submission, max_mb=5, release=release)
        assert [c.source for c in loaded.cells] == ["import math", "def f(x):\n    return x"]
        assert loaded.notes == (f"hw.ipynb: cell `f_solution` was a {name} cell: run as code, as released.",)
    for metadata in ({}, {"nbgrader": {"grade_id": "mine", "solution": False, "locked": False}}):
        moved = _as_type(mine, "raw")
        moved.metadata = metadata
        release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[moved]))
        loaded = load_notebook(submission, max_mb=5, release=release)
        assert [c.source for c in loaded.cells] == ["def f(x):\n    return x"], metadata
        assert loaded.notes == ("hw.ipynb: cell `f_solution` was a Raw cell: run as code, as released.",)
    coded = nbformat.v4.new_code_cell("print('my answer')", id=written.id, metadata=written.metadata)
    release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[mine, coded]))
    loaded = load_notebook(submission, max_mb=5, release=release)
    assert [c.source for c in loaded.cells] == ["def f(x):\n    return x"]
    assert loaded.notes == ("hw.ipynb: cell `why` was a code cell: not run, as released (a Markdown cell).",)
    release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[mine, written]))
    assert load_notebook(submission, max_mb=5, release=release).notes == ()
    raw = _as_type(written, "raw")
    release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[mine, raw]))
    assert load_notebook(submission, max_mb=5, release=release).notes == ()


def test_an_answer_cell_switched_off_with_its_released_stub_alone_is_not_run(tmp_path):
    """An answer cell turned into Raw or Markdown that still holds the released stub (maybe with blank lines
    around it, spaces at line ends or Windows line ends), the student's own `f` written in a new code cell
    above it: is the stub left unrun (it would undo that `f`), with a note saying so, while one holding
    anything else still runs as code?"""
    stub = "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError"
    answer = _nbgrader_cell(stub, "f_solution", answer=True)
    released = nbformat.v4.new_notebook(cells=[_nbgrader_cell("import math", "setup"), answer])
    course = CourseLayout(tmp_path)
    mine = nbformat.v4.new_code_cell("def f(x):\n    return x")
    for cell_type, name in (("raw", "Raw"), ("markdown", "Markdown")):
        for edited in (stub, stub + "\n\n  \n", "\n" + stub, stub.replace("\n", "  \n"), stub.replace("\n", "\r\n")):
            switched_off = _as_type(answer, cell_type)
            switched_off.source = edited
            submitted = nbformat.v4.new_notebook(cells=[released.cells[0], mine, switched_off])
            release, submission = _write_pair(course, released, submitted)
            loaded = load_notebook(submission, max_mb=5, release=release)
            assert [c.source for c in loaded.cells] == ["import math", mine.source], (cell_type, edited)
            assert loaded.notes == (f"hw.ipynb: cell `f_solution` was a {name} cell holding the released stub "
                                    f"alone: left as you made it (not run).",)
    changed = _as_type(answer, "raw")
    changed.source = stub.replace("raise NotImplementedError", "return 2 * x")
    release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[mine, changed]))
    loaded = load_notebook(submission, max_mb=5, release=release)
    assert [c.source for c in loaded.cells] == [mine.source, changed.source]
    assert loaded.notes[0] == "hw.ipynb: cell `f_solution` was a Raw cell: run as code, as released."


def test_cells_are_numbered_in_notes_as_the_student_sees_them_after_a_cell_put_back_as_code(tmp_path):
    """After an answer cell turned into Markdown (run as code, as released), are the code cells named in notes
    numbered as the student's notebook has them, the cell put back named by its grade id?"""
    answer = _nbgrader_cell("def f(x):\n    raise NotImplementedError", "f_solution", answer=True)
    released = nbformat.v4.new_notebook(cells=[_nbgrader_cell("import math", "setup"), answer])
    mine = _nbgrader_cell("def f(x):\n    return x", "f_solution", answer=True)
    mine.id = answer.id
    scratch = nbformat.v4.new_code_cell("def f(x):\n    return 0")
    submitted = nbformat.v4.new_notebook(cells=[released.cells[0], _as_type(mine, "markdown"), scratch])
    release, submission = _write_pair(CourseLayout(tmp_path), released, submitted)
    loaded = load_notebook(submission, max_mb=5, release=release)
    assert [c.label for c in loaded.cells] == ["the 1st code cell (`import math`)", "the cell `f_solution` (`def f`)",
                                               "the 2nd code cell (`def f`)"]
    assert loaded.notes == (
        "hw.ipynb: cell `f_solution` was a Markdown cell: run as code, as released.",
        "hw.ipynb: `f`, written in its answer cell (the cell `f_solution` (`def f`)), is defined again in the 2nd "
        "code cell (`def f`), which runs after it: that later definition is the one graded, and the one your other "
        "functions call.")


def test_a_grade_cell_put_back_as_code_is_still_known_as_the_grade_cell_it_was(tmp_path):
    """A grade cell turned into Raw with its nbgrader metadata removed: is it run as code with the released
    metadata, so that grading knows it as the test cell the hidden graders replace (and does not run it)?"""
    test = nbformat.v4.new_code_cell("assert f(1) == 1", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "grade_id": "test_f", "points": 1}})
    released = nbformat.v4.new_notebook(cells=[test])
    bare = _as_type(test, "raw")
    bare.metadata = {}
    release, submission = _write_pair(CourseLayout(tmp_path), released, nbformat.v4.new_notebook(cells=[bare]))
    loaded = load_notebook(submission, max_mb=5, release=release, replaced=frozenset({"test_f"}))
    assert [(c.source, c.test_of) for c in loaded.cells] == [("assert f(1) == 1", "test_f")]
    assert loaded.notes == ("hw.ipynb: cell `test_f` was a Raw cell: put back as code, as released.",)


def test_an_edited_test_cell_is_put_back_as_released(tmp_path):
    """An autograder-test cell (a grade cell, not an answer) edited: as nbgrader counts it locked, is its released
    source run in its place when no hidden grader replaces it, with the note of a locked cell put back, also when
    its `locked` flag is not set or it was made Raw; and is one the hidden graders replace put back too (it is not
    run), with a note naming the student's cell as they saved it, since nothing they wrote in it runs?"""
    released_source = "assert f(1) == 1"
    course = CourseLayout(tmp_path)
    for locked in (True, False):
        test = nbformat.v4.new_code_cell(released_source, metadata={"nbgrader": {
            "grade": True, "solution": False, "locked": locked, "grade_id": "test_f", "points": 1}})
        released = nbformat.v4.new_notebook(cells=[_nbgrader_cell("def f(x):\n    return 0", "f_solution",
                                                                  answer=True), test])
        answer = _nbgrader_cell("def f(x):\n    return x", "f_solution", answer=True)
        edited = nbformat.v4.new_code_cell("assert True", id=test.id, metadata=json.loads(json.dumps(test.metadata)))
        release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[answer, edited]))
        loaded = load_notebook(submission, max_mb=5, release=release)
        assert [(c.source, c.test_of) for c in loaded.cells] == [(answer.source, ""), (released_source, "test_f")]
        assert loaded.notes == ("hw.ipynb: locked cell `test_f` was edited: put back as released (grading uses a "
                                "locked cell as released).",), locked
        loaded = load_notebook(submission, max_mb=5, release=release, replaced=frozenset({"test_f"}))
        assert [(c.source, c.test_of) for c in loaded.cells] == [(answer.source, ""), (released_source, "test_f")]
        assert loaded.notes == ("hw.ipynb: test cell `test_f` was edited (the 2nd code cell (`assert True`)): it was "
                                "replaced by the released test cell, which is not run (hidden tests check this "
                                "problem), so nothing you wrote in it ran.",), locked
        raw = _as_type(edited, "raw")
        release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[answer, raw]))
        loaded = load_notebook(submission, max_mb=5, release=release)
        assert [c.source for c in loaded.cells] == [answer.source, released_source]
        assert loaded.notes == ("hw.ipynb: locked cell `test_f` was a Raw cell and was edited: put back as code, as "
                                "released (grading uses a locked cell as released).",)
        loaded = load_notebook(submission, max_mb=5, release=release, replaced=frozenset({"test_f"}))
        assert loaded.notes == ("hw.ipynb: test cell `test_f` was a Raw cell and was edited: it was replaced by the "
                                "released test cell, which is not run (hidden tests check this problem), so nothing "
                                "you wrote in it ran.",)


def test_an_edited_locked_cell_the_plan_leaves_out_is_not_said_to_have_run(tmp_path):
    """A locked check cell edited (no hidden grader replaces it), put back as released: when the cell plan leaves
    it out, as an unchanged released cell that nothing graded reads, does the note say it was put back without
    saying it was run, whether the student edited it or made it Raw?"""
    from autograder import cellplan
    from autograder.grading.engine import cells_to_run

    check = _nbgrader_cell("assert f(1) == 1", "check_f")
    released = nbformat.v4.new_notebook(cells=[_nbgrader_cell("def f(x):\n    return 0", "f_solution", answer=True),
                                               check])
    answer = _nbgrader_cell("def f(x):\n    return x", "f_solution", answer=True)
    edited = nbformat.v4.new_code_cell("assert f(1) == 2", id=check.id, metadata=json.loads(json.dumps(check.metadata)))
    course = CourseLayout(tmp_path)
    for mine, said in ((edited, "was edited: put back as released"),
                       (_as_type(edited, "raw"), "was a Raw cell and was edited: put back as code, as released")):
        release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[answer, mine]))
        loaded = load_notebook(submission, max_mb=5, release=release)
        plan = cellplan.Released(sources=cellplan.released_sources(release) or frozenset(),
                                 grader_names=frozenset({"f"}))
        assert [c.source for c in loaded.cells] == [answer.source, check.source]
        assert [c.source for c in cells_to_run(loaded, frozenset(), plan)] == [answer.source]
        assert loaded.notes == (f"hw.ipynb: locked cell `check_f` {said} (grading uses a locked cell as "
                                f"released).",)



def test_notes_on_a_test_cell_copied_and_edited_name_the_cells_as_the_student_saved_them(tmp_path):
    """A test cell the hidden graders replace, copied below and the copy rewritten into a helper (the copy is
    the last, so it is the test cell, put back as released): is the student told that their helper was replaced
    and does not run, and do the notes name that cell by the student's own text, not by the released test put
    back in its place; and does the earlier cell, now a mere copy, run?"""
    test = nbformat.v4.new_code_cell("assert f(1) == 1", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "grade_id": "test_f", "points": 1}})
    answer = _nbgrader_cell("def f(x):\n    return _helper(x)", "f_solution", answer=True)
    released = nbformat.v4.new_notebook(cells=[_nbgrader_cell("def f(x):\n    return 0", "f_solution", answer=True),
                                               test])
    helper = nbformat.v4.new_code_cell("def _helper(x):\n    return x", metadata=json.loads(json.dumps(test.metadata)))
    release, submission = _write_pair(CourseLayout(tmp_path), released,
                                      nbformat.v4.new_notebook(cells=[answer, test, helper]))
    loaded = load_notebook(submission, max_mb=5, release=release, replaced=frozenset({"test_f"}))
    assert [(c.source, c.test_of) for c in loaded.cells] == [
        (answer.source, ""), (test.source, ""), (test.source, "test_f")]
    assert loaded.notes == (
        "hw.ipynb: test cell `test_f` was edited (the 3rd code cell (`def _helper`)): it was replaced by the "
        "released test cell, which is not run (hidden tests check this problem), so nothing you wrote in it ran.",
        "hw.ipynb: the grade cell `test_f` appears 2 times (the 2nd code cell (`assert f(1) == 1`); the 3rd code "
        "cell (`def _helper`)); was it copied, or its nbgrader metadata edited? Only the last holds its grade: the "
        "copy is not graded.")


def test_a_switched_off_stub_below_a_copy_of_its_answer_cell_leaves_that_copy_the_answer(tmp_path):
    """An answer cell copied (its nbgrader metadata with it), answered in the copy above, the cell below made
    Markdown holding the released stub alone (not run): is the copy, which ran, the answer cell in every note,
    the stub losing its nbgrader metadata, with no note calling the copy "not taken as your answer"; and with
    two code copies above it, is the last of them the answer in both notes?"""
    stub = "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"
    released = nbformat.v4.new_notebook(cells=[_nbgrader_cell(stub, "f_solution", answer=True)])
    original = released.cells[0]
    switched_off = _as_type(original, "markdown")
    mine = _nbgrader_cell("def f(x):\n    return x", "f_solution", answer=True)
    release, submission = _write_pair(CourseLayout(tmp_path), released,
                                      nbformat.v4.new_notebook(cells=[mine, switched_off]))
    loaded = load_notebook(submission, max_mb=5, release=release)
    assert [c.source for c in loaded.cells] == [mine.source]
    assert loaded.notes == (
        "hw.ipynb: cell `f_solution` was a Markdown cell holding the released stub alone: left as you made it (not "
        "run). Your copy of it above, the 1st code cell (`def f`), is taken as your answer.",)
    cells, _ = as_released("hw.ipynb", [dict(mine), dict(switched_off)], "source", tuple(released.cells))
    assert "nbgrader" not in cells[1]["metadata"] and cells[1]["cell_type"] == "markdown"
    assert copied_cells(cells) == {}
    again = _nbgrader_cell("def f(x):\n    return 2 * x", "f_solution", answer=True)
    release, submission = _write_pair(CourseLayout(tmp_path), released,
                                      nbformat.v4.new_notebook(cells=[mine, again, switched_off]))
    assert load_notebook(submission, max_mb=5, release=release).notes == (
        "hw.ipynb: cell `f_solution` was a Markdown cell holding the released stub alone: left as you made it (not "
        "run). Your copy of it above, the 2nd code cell (`def f`), is taken as your answer.",
        "hw.ipynb: the answer cell `f_solution` appears 2 times (the 1st code cell (`def f`); the 2nd code cell "
        "(`def f`)); was it copied, or its nbgrader metadata edited? The last is taken as your answer (it ran last, "
        "so its definitions are the ones graded unless it stopped with an error before making them): the copy is "
        "not.")

def test_an_edited_locked_cell_runs_as_released(tmp_path):
    """A locked (read-only) cell edited, or turned into Markdown: does the released source run in its place,
    with a note naming it, whatever its submitted metadata says (unmarked as locked, made an answer, removed
    with its Jupyter cell id kept), only the last copy of it being put back; and does a cell that keeps neither
    its nbgrader metadata nor its cell id run as submitted (nbgrader could not pair it either)?"""
    given = "def softmax(z):\n    return z"
    setup = _nbgrader_cell(given, "setup")
    released = nbformat.v4.new_notebook(cells=[setup, _nbgrader_cell("def f(x):\n    return 0", "f_solution",
                                                                      answer=True)])
    course = CourseLayout(tmp_path)
    edited = nbformat.v4.new_code_cell("def softmax(z):\n    return 2 * z", id=setup.id,
                                       metadata=json.loads(json.dumps(setup.metadata)))
    said = "hw.ipynb: locked cell `setup` was edited: put back as released (grading uses a locked cell as released)."
    for metadata in (setup.metadata, {"nbgrader": {"grade_id": "setup", "locked": False, "solution": True}}, {}):
        edited.metadata = json.loads(json.dumps(metadata))
        release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[edited]))
        loaded = load_notebook(submission, max_mb=5, release=release)
        assert [c.source for c in loaded.cells] == [given] and loaded.notes == (said,), metadata
    release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[_as_type(setup, "markdown")]))
    loaded = load_notebook(submission, max_mb=5, release=release)
    assert [c.source for c in loaded.cells] == [given]
    assert loaded.notes == ("hw.ipynb: locked cell `setup` was a Markdown cell: put back as code, as released "
                            "(grading uses a locked cell as released).",)
    copy = nbformat.v4.new_code_cell("def softmax(z):\n    return 3 * z", metadata=setup.metadata)
    edited.metadata = setup.metadata
    release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[edited, copy]))
    assert [c.source for c in load_notebook(submission, max_mb=5, release=release).cells] == [
        "def softmax(z):\n    return 2 * z", given]
    stranger = nbformat.v4.new_code_cell("def softmax(z):\n    return 2 * z")
    release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[stranger]))
    loaded = load_notebook(submission, max_mb=5, release=release)
    assert [c.source for c in loaded.cells] == [stranger.source] and loaded.notes == ()
    release, submission = _write_pair(course, released, released)
    assert load_notebook(submission, max_mb=5, release=release).notes == ()


def test_a_locked_cell_saved_with_other_line_ends_is_not_edited(tmp_path):
    """A locked cell saved again by an editor (Windows line ends, spaces at line ends, a blank line after it):
    does it run as released, with no note, while one with a line indented differently is still put back, and
    is one also turned into Markdown said to be retyped, not edited?"""
    given = "def softmax(z):\n    if z:\n        return z\n    return 0"
    setup = _nbgrader_cell(given, "setup")
    released = nbformat.v4.new_notebook(cells=[setup])
    course = CourseLayout(tmp_path)
    for saved in (given.replace("\n", "\r\n"), given.replace("\n", "  \n") + "\n\n", given.replace("\n", "\r")):
        again = nbformat.v4.new_code_cell(saved, id=setup.id, metadata=json.loads(json.dumps(setup.metadata)))
        release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[again]))
        loaded = load_notebook(submission, max_mb=5, release=release)
        assert [c.source for c in loaded.cells] == [given] and loaded.notes == (), repr(saved)
        retyped = _as_type(again, "markdown")
        release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[retyped]))
        loaded = load_notebook(submission, max_mb=5, release=release)
        assert [c.source for c in loaded.cells] == [given]
        assert loaded.notes == ("hw.ipynb: locked cell `setup` was a Markdown cell: put back as code, as released "
                                "(grading uses a locked cell as released).",), repr(saved)
    moved = nbformat.v4.new_code_cell(given.replace("    return 0", "        return 0"), id=setup.id,
                                      metadata=json.loads(json.dumps(setup.metadata)))
    release, submission = _write_pair(course, released, nbformat.v4.new_notebook(cells=[moved]))
    loaded = load_notebook(submission, max_mb=5, release=release)
    assert [c.source for c in loaded.cells] == [given]
    assert loaded.notes == ("hw.ipynb: locked cell `setup` was edited: put back as released (grading uses a locked "
                            "cell as released).",)


def test_a_locked_cell_whose_metadata_names_the_answer_cell_is_a_copy_of_that_answer(tmp_path):
    """A setup cell whose nbgrader metadata was edited to name the answer cell (`solution: true`, the answer's
    grade id), its Jupyter cell id kept: is it taken, as nbgrader's DeduplicateIds takes it, as a copy of the answer
    cell below (which is the answer), so that it runs as saved, and does the note on it allow for edited metadata?"""
    setup = _nbgrader_cell("import math", "setup")
    answer = _nbgrader_cell("def f(x):\n    raise NotImplementedError", "f_solution", answer=True)
    released = nbformat.v4.new_notebook(cells=[setup, answer])
    marked = nbformat.v4.new_code_cell("import math\nscale = 2", id=setup.id, metadata={"nbgrader": {
        "grade": False, "solution": True, "locked": False, "grade_id": "f_solution"}})
    mine = _nbgrader_cell("def f(x):\n    return scale * x", "f_solution", answer=True)
    mine.id = answer.id
    release, submission = _write_pair(CourseLayout(tmp_path), released, nbformat.v4.new_notebook(cells=[marked, mine]))
    loaded = load_notebook(submission, max_mb=5, release=release)
    assert [c.source for c in loaded.cells] == [marked.source, mine.source]
    assert loaded.notes == (
        "hw.ipynb: the answer cell `f_solution` appears 2 times (the 1st code cell (`import math`); the 2nd code "
        "cell (`def f`)); was it copied, or its nbgrader metadata edited? The last is taken as your answer (it ran "
        "last, so its definitions are the ones graded unless it stopped with an error before making them): the copy "
        "is not.",)


def test_autograde_runs_a_retyped_answer_and_an_edited_locked_cell_as_released(tmp_path):
    """Through `course autograde`'s api and the real sandbox: does ada's notebook, its `layer_norm` answer cell
    turned into Markdown and `softmax` deleted from the given setup cell, get her full score, with a note on
    each cell put back?"""
    from autograder import api
    from tests.conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ada",))
    path = CourseLayout(folder).submission("ada", "transformer-block") / "transformer-block.ipynb"
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "layer_norm_solution":
            nb.cells[i] = _as_type(cell, "markdown")
        elif grade_id == "setup":
            assert "def softmax" in cell.source
            cell.source = cell.source[:cell.source.index("def softmax")]
    nbformat.write(nb, path)
    batch = api.autograde(folder, "transformer-block", student="ada", workers=1, log=lambda line: None)
    written = json.loads((CourseLayout(folder).autograded("ada", "transformer-block") / "results.json").read_text())
    assert batch.results[0].score == 100.0, written["extra_data"]["notes"]
    assert [n for n in written["extra_data"]["notes"] if "as released" in n] == [
        "transformer-block.ipynb: locked cell `setup` was edited: put back as released (grading uses a locked cell "
        "as released).",
        "transformer-block.ipynb: cell `layer_norm_solution` was a Markdown cell: run as code, as released."]


def test_autograde_leaves_a_switched_off_answer_stub_unrun(tmp_path):
    """Through `course autograde`'s api and the real sandbox: does ada's notebook, her `layer_norm` answer moved
    into a new code cell above the answer cell, which she made Raw with the released stub left in it, get her
    full score, with a note that the stub was not run?"""
    from autograder import api
    from tests.conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ada",))
    course = CourseLayout(folder)
    path = course.submission("ada", "transformer-block") / "transformer-block.ipynb"
    released = nbformat.read(course.release("transformer-block") / "transformer-block.ipynb", as_version=4)

    def answer_of(cells: list[nbformat.NotebookNode]) -> int:
        ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in cells]
        return ids.index("layer_norm_solution")

    stub = released.cells[answer_of(released.cells)]
    nb = nbformat.read(path, as_version=4)
    i = answer_of(nb.cells)
    switched_off = _as_type(nb.cells[i], "raw")
    switched_off.source = stub.source
    nb.cells[i:i + 1] = [nbformat.v4.new_code_cell(nb.cells[i].source), switched_off]
    nbformat.write(nb, path)
    batch = api.autograde(folder, "transformer-block", student="ada", workers=1, log=lambda line: None)
    written = json.loads((course.autograded("ada", "transformer-block") / "results.json").read_text())
    assert batch.results[0].score == 100.0, written["extra_data"]["notes"]
    assert [n for n in written["extra_data"]["notes"] if "layer_norm_solution" in n] == [
        "transformer-block.ipynb: cell `layer_norm_solution` was a Raw cell holding the released stub alone: left "
        "as you made it (not run)."]



def test_autograde_runs_a_copy_of_a_test_cell_pasted_above_it(tmp_path):
    """Through `course autograde`'s api and the real sandbox: ada's `layer_norm` test cell copied in Jupyter and
    pasted above itself (its nbgrader metadata with it), the copy rewritten into a helper her answer calls: as
    nbgrader's DeduplicateIds keeps the last cell with an id, is the copy run as any code cell, so that she gets
    her full score, as nbgrader gives her?"""
    from autograder import api
    from tests.conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ada",))
    course = CourseLayout(folder)
    path = course.submission("ada", "transformer-block") / "transformer-block.ipynb"
    nb = nbformat.read(path, as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    answer = nb.cells[ids.index("layer_norm_solution")]
    answer.source = (answer.source.replace("def layer_norm(", "def _mine(", 1)
                     + "\n\ndef layer_norm(x, gamma, beta, eps=1e-5):\n    return _impl(x, gamma, beta, eps)\n")
    test = nb.cells[ids.index("test_layer_norm")]
    helper = nbformat.v4.new_code_cell("def _impl(x, gamma, beta, eps):\n    return _mine(x, gamma, beta, eps)\n",
                                       metadata=json.loads(json.dumps(test.metadata)))
    nb.cells.insert(ids.index("test_layer_norm"), helper)
    nbformat.write(nb, path)
    batch = api.autograde(folder, "transformer-block", student="ada", workers=1, log=lambda line: None)
    written = json.loads((course.autograded("ada", "transformer-block") / "results.json").read_text())
    assert batch.results[0].score == 100.0, written["extra_data"]["notes"]

def _generated_notebook(extra_cells: list[dict], **metadata: object) -> bytes:
    """A notebook of one code cell defining `f`, then `extra_cells`, as compact JSON."""
    code = {"cell_type": "code", "execution_count": None, "id": "a", "metadata": {}, "outputs": [],
            "source": "def f():\n    return 1\n"}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": [code, *extra_cells]},
                      separators=(",", ":")).encode()


def test_load_too_many_cells_of_any_kind_gives_a_reason_naming_the_limit(tmp_path):
    """Are markdown and raw cells counted against a cap too (they are parsed like code cells), and is
    such a notebook refused with its count and the limit rather than graded?"""
    from autograder.notebooks import MAX_CELLS

    for kind in ("markdown", "raw"):
        path = tmp_path / f"{kind}.ipynb"
        path.write_bytes(_generated_notebook([{"cell_type": kind, "metadata": {}, "source": ""}] * MAX_CELLS))
        nb = load_notebook(path, max_mb=20)
        assert not nb.readable and nb.cells == ()
        assert nb.notes == (f"{kind}.ipynb has {MAX_CELLS + 1:,} cells (code, markdown and raw), more than the "
                            f"{MAX_CELLS:,} that can be graded, so it was not run; remove generated cells and "
                            f"resubmit.",)
    path = tmp_path / "fine.ipynb"         # at the limit: graded
    path.write_bytes(_generated_notebook([{"cell_type": "raw", "metadata": {}, "source": ""}] * (MAX_CELLS - 1)))
    assert load_notebook(path, max_mb=20).readable


def test_load_too_many_attachments_lines_or_metadata_values_gives_a_reason(tmp_path):
    """Are attachments, lines of source and metadata entries, which a parse pays for one by one like
    cells, capped as JSON values (large outputs beside them or not), with a reason naming the limit?"""
    from autograder.notebooks import MAX_NOTEBOOK_VALUES

    n = MAX_NOTEBOOK_VALUES
    stream = {"output_type": "stream", "name": "stdout", "text": ""}
    cases = {
        "code_lines": _generated_notebook([{"cell_type": "code", "execution_count": None, "metadata": {},
                                            "outputs": [], "source": ["pass\n"] * n}]),
        "outputs_and_metadata": _generated_notebook([{"cell_type": "code", "execution_count": None,
                                                      "metadata": {"x": [0] * n}, "outputs": [stream] * n,
                                                      "source": ""}]),
        "attachments": _generated_notebook([{"cell_type": "markdown", "metadata": {}, "source": "",
                                             "attachments": {f"{i}.png": {"image/png": ""} for i in range(n // 2)}}]),
        "metadata": _generated_notebook([], x=[{}] * n),
        "lines": _generated_notebook([{"cell_type": "markdown", "metadata": {}, "source": ["a\n"] * n}]),
    }
    for what, data in cases.items():
        path = tmp_path / f"{what}.ipynb"
        path.write_bytes(data)
        nb = load_notebook(path, max_mb=20)
        assert not nb.readable, what
        assert f"more than the {MAX_NOTEBOOK_VALUES:,} that can be graded, so it was not run" in nb.notes[0], what
        assert nb.notes[0].startswith(f"{what}.ipynb holds about "), what


def test_a_notebook_whose_outputs_hold_too_many_values_is_graded_with_a_note(tmp_path):
    """Is a notebook within every limit but for the 250,000 lines its loop printed (8 MB of saved
    output, never graded) graded like any other, with a note that its outputs were left out?"""
    from autograder.notebooks import MAX_NOTEBOOK_VALUES, over_notebook_limits

    lines = [f"step {i}: loss 0.{i:06d}\n" for i in range(250_000)]
    printed = {"output_type": "stream", "name": "stdout", "text": lines}
    doc = json.loads(_generated_notebook([{"cell_type": "code", "execution_count": 2, "metadata": {},
                                           "outputs": [printed], "source": "for i in range(250_000):\n    print(i)\n"},
                                          {"cell_type": "markdown", "metadata": {}, "source": ["# notes\n"] * 1000}]))
    path = tmp_path / "hw.ipynb"
    path.write_text(json.dumps(doc, indent=1))
    assert 7 * 1024 * 1024 < path.stat().st_size < 20 * 1024 * 1024
    nb = load_notebook(path, max_mb=20)
    assert nb.readable and [c.source for c in nb.cells] == ["def f():\n    return 1\n",
                                                             "for i in range(250_000):\n    print(i)\n"]
    assert len(nb.notes) == 1, nb.notes
    assert nb.notes[0].startswith(f"hw.ipynb: its saved outputs hold more than {MAX_NOTEBOOK_VALUES:,} JSON values")
    assert "not run" not in nb.notes[0] and "Restart & Clear Output" in nb.notes[0]
    # nbformat, for the annotated copy, would parse the outputs too: that copy is kept as submitted
    assert over_notebook_limits("hw.ipynb", path.read_bytes()) == ""
    assert "too many to be read for an annotated copy" in over_notebook_limits("hw.ipynb", path.read_bytes(),
                                                                               outputs=True)


def test_outputs_are_emptied_from_the_bytes_as_a_parse_would_find_them():
    """Does `without_outputs` empty exactly each `"outputs"` list, whatever its strings hold (quotes,
    backslashes, brackets, `"outputs": [`) and however deep its lists nest, and leave the rest as it is?"""
    from autograder.notebooks import _LIST_DEPTH, without_outputs

    tricky = ['"outputs": [', "[[[", "]]", "\\", '\\"]', '\\\\"', "\"outputs\":[1]"]
    deep: list = []
    for _ in range(_LIST_DEPTH + 3):
        deep = [deep, "]"]
    outputs = [{"output_type": "stream", "name": "stdout", "text": tricky}, {"data": {"application/json": deep}},
               [[[]], [tricky]] * 3]
    cells = [{"cell_type": "code", "execution_count": 1, "metadata": {"tags": tricky}, "outputs": out,
              "source": tricky} for out in (outputs, [], [deep], [[1, [2, [3]]]])]
    for separators, indent in (((",", ":"), None), ((", ", ": "), 2)):
        data = json.dumps({"nbformat": 4, "metadata": {"m": deep}, "cells": cells}, separators=separators,
                          indent=indent).encode()
        want = json.loads(data)
        for cell in want["cells"]:
            cell["outputs"] = []
        assert json.loads(without_outputs(data)) == want
    assert without_outputs(b'{"outputs": [[1, "]"]], "cells": [') == b'{"outputs": [], "cells": ['
    assert without_outputs(b'{"outputs": [[1, "]"]') == b'{"outputs": [[1, "]"]'       # no end: as it is
    deeper = b"[" * (_LIST_DEPTH + 9) + b"0" + b"]" * (_LIST_DEPTH + 11)     # its last closing run goes on
    assert without_outputs(b'{"outputs": ' + deeper + b'}') == b'{"outputs": []]]}'



def test_outputs_emptied_from_the_bytes_match_a_parse_of_random_notebooks():
    """Does `without_outputs` agree with a JSON parse on random notebooks: outputs whose lists nest
    shallower and deeper than _LIST_DEPTH and are shorter and longer than _LIST_ITEMS (runs of
    brackets of every length), strings full of quotes,
    backslashes and brackets, under whatever regex engine this Python has?"""
    import random

    from autograder.notebooks import _LIST_DEPTH, _LIST_ITEMS, without_outputs

    rng = random.Random(20240611)
    pieces = ['"', "\\", "[", "]", "[[", "]]]", '\\"', "outputs", '"outputs": [', ",", " ", "x", "\n"]

    def text() -> str:
        return "".join(rng.choice(pieces) for _ in range(rng.randrange(6)))

    def value(depth: int):
        if depth <= 0 or rng.random() < 0.2:
            return rng.choice([text(), rng.randrange(100), None, True, text()])
        if rng.random() < 0.25:
            return {text() + "k": value(depth - 1) for _ in range(rng.randrange(3))}
        if rng.random() < 0.4:                  # a chain of single lists: a long run of brackets
            chain = value(0)
            for _ in range(rng.randrange(1, 2 * depth)):
                chain = [chain]
            return chain
        width = _LIST_ITEMS + 2 if rng.random() < 0.15 else 4     # lists longer than those matched whole too
        return [value(depth - rng.randrange(1, 4)) for _ in range(rng.randrange(width))]

    for _ in range(60):
        limit = rng.choice([2, _LIST_DEPTH - 2, _LIST_DEPTH, _LIST_DEPTH + 1, 3 * _LIST_DEPTH])
        cells = [{"cell_type": "code", "metadata": {text() + "k": text()}, "source": [text(), text()],
                  "outputs": [value(limit) for _ in range(rng.randrange(3))]} for _ in range(rng.randrange(1, 4))]
        separators, indent = rng.choice([((",", ":"), None), ((", ", ": "), 1)])
        data = json.dumps({"cells": cells, "metadata": {text() + "k": value(limit)}, "nbformat": 4},
                          separators=separators, indent=indent).encode()
        want = json.loads(data)
        for cell in want["cells"]:
            cell["outputs"] = []
        assert json.loads(without_outputs(data)) == want


def _load_in_a_fresh_process(path: Path) -> tuple[bool, list[str], list[str], int]:
    """`load_notebook(path)` in a new Python process: readable, the notes, the code cells' sources and
    the process's peak memory in KB (VmHWM: ru_maxrss would count pytest's own peak, from before the exec)."""
    import subprocess
    import sys

    script = ("import json, re, sys; from pathlib import Path; from autograder.notebooks import load_notebook; "
              "nb = load_notebook(Path(sys.argv[1]), max_mb=20); "
              "hwm = re.search(r'VmHWM:\\s*(\\d+)', Path('/proc/self/status').read_text()).group(1); "
              "print(json.dumps([nb.readable, nb.notes, [c.source for c in nb.cells], int(hwm)]))")
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True)
    readable, notes, sources, peak_kb = json.loads(out.stdout)
    return readable, notes, sources, peak_kb


def test_a_20_mb_notebook_of_tiny_output_values_is_graded_in_bounded_memory(tmp_path):
    """Is a 20 MB notebook whose one output holds seven million empty lists (about 500 MB to parse)
    graded from its other cells, the loading process's peak memory far below what parsing it costs?"""
    path = tmp_path / "hw.ipynb"
    flood = {"output_type": "stream", "name": "stdout", "text": [[]] * (20 * 1024 * 1024 // 3 - 200)}
    path.write_bytes(_generated_notebook([{"cell_type": "code", "execution_count": 1, "metadata": {},
                                           "outputs": [flood], "source": "g = 2\n"}]))
    assert 19 * 1024 * 1024 < path.stat().st_size <= 20 * 1024 * 1024
    readable, _, sources, peak_kb = _load_in_a_fresh_process(path)
    assert readable and sources == ["def f():\n    return 1\n", "g = 2\n"]
    assert peak_kb < 120 * 1024, f"{peak_kb / 1024:.0f} MB (json.loads alone would take ~540 MB)"


def test_notebook_counts_match_the_parsed_json_whatever_the_strings_hold():
    """Are the counts taken from the bytes those of the parsed notebook, with quotes, backslashes,
    brackets, commas and `"cell_type": "code"` inside strings, and strings across the 1 MB pieces?"""
    from autograder.notebooks import READ_CHUNK, notebook_counts

    def values(v: object) -> int:
        items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        return 1 + sum(values(x) for x in items)

    tricky = ['"cell_type": "code", [{,', "\\", '\\"', "\\\\\"", "{}", "[]", "x" * (READ_CHUNK - 7), ",]" * 1000]
    cells = [{"cell_type": "markdown", "metadata": {"t": t, "l": [1, [], {}, [t]]}, "source": [t, t]} for t in tricky]
    for separators in ((",", ":"), (", ", ": ")):
        data = _generated_notebook(cells, empty={}, nested=[[[]]])
        data = json.dumps(json.loads(data), separators=separators, indent=1 if separators[0] == "," else None).encode()
        counts = notebook_counts(data)
        assert (counts.cells, counts.code_cells) == (1 + len(tricky), 1)
        assert abs(counts.values - values(json.loads(data))) <= 2


def test_a_generated_notebook_of_431000_raw_cells_is_refused_before_it_is_parsed(tmp_path):
    """Is the 19 MB notebook of 431,000 raw cells (which cost the gradebook writer 811 MB) refused
    from its bytes, with the loading process's peak memory far below what parsing it costs?"""
    path = tmp_path / "raw.ipynb"
    path.write_bytes(_generated_notebook([{"cell_type": "raw", "metadata": {}, "source": ""}] * 431_000))
    readable, notes, _, peak_kb = _load_in_a_fresh_process(path)
    assert not readable and "has 431,001 cells (code, markdown and raw)" in notes[0]
    assert peak_kb < 120 * 1024, f"{peak_kb / 1024:.0f} MB (json.loads alone would take ~170 MB)"
