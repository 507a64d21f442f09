"""What formgrader shows: our reasons in the grade cells of the autograded notebook.

Read back with nbformat, and rendered through the path formgrader's submission page takes
(nbconvert's HTMLExporter with nbgrader's `formgrade` template).
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import replace
from html import escape
from pathlib import Path

import nbformat
import pytest

from autograder.config import load_course
from autograder.layout import CourseLayout
from autograder.reporting.annotate import OUTPUT_NAME, annotate_autograded
from autograder.text import format_points
from conftest import PROJECT, ROOT

from .feedback_samples import (
    MISSING_SPLIT,
    MUTATED,
    NEEDS_SPLIT,
    NOT_RUN_SPLIT,
    SECRET,
    SEED,
    UPCAST,
    WARNED,
    dora_result,
    erin_result,
    partly_alike_result,
)

NB = "transformer-block.ipynb"
RELEASED = PROJECT.release("transformer-block")


@pytest.fixture(scope="module")
def assignment():
    return load_course(ROOT).assignment("transformer-block")


@pytest.fixture
def copy(tmp_path):
    """An autograded copy of the released notebook, with outputs a student could have faked."""
    folder = tmp_path / "dora-copy"
    folder.mkdir()
    nb = nbformat.read(RELEASED / NB, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="All tests passed!\n")]
    nbformat.write(nb, folder / NB)
    return folder


def grade_outputs(path) -> dict[str, str]:
    """grade id -> the text of its outputs (ANSI codes dropped)."""
    nb = nbformat.read(path, as_version=4)
    out = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            texts = [o.get("text") or "\n".join(o.get("traceback", [])) for o in cell.outputs]
            out[meta["grade_id"]] = "\n".join(texts).replace("\x1b[0m", "").replace("\x1b[1m", "") \
                .replace("\x1b[31m", "").replace("\x1b[32m", "").replace("\x1b[33m", "")
    return out


def formgrader_html(path) -> str:
    """The submission page body as formgrader renders it."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    resources = {"assignment_id": "transformer-block", "notebook_id": path.stem, "submission_id": "x",
                 "index": 0, "total": 1, "base_url": "", "student": "dora", "last_name": None,
                 "first_name": None, "notebook_path": str(path)}
    html, _ = HTMLExporter(config=config).from_filename(str(path), resources=resources)
    return html


def squash(text: str) -> str:
    return " ".join(text.replace("`", "").split())


def test_a_grouped_check_names_how_many_of_its_cases_failed(copy, assignment):
    """Does the grade cell's shared-error line say a check failed in 2 of its 6 cases, not all of them?"""
    annotate_autograded(partly_alike_result(), assignment, copy)
    out = squash(grade_outputs(copy / NB)["test_layer_norm"])
    assert "2 checks failed with the same error [test_layer_norm_matches_reference, 2 of 6 cases, " \
        "test_layer_norm_keeps_float32]" in out


def test_student_text_in_a_grade_cell_has_its_control_characters_written_out(copy, assignment):
    """Does a message holding NUL and an escape sequence reach the grade cell as visible escapes?"""
    bad = "layer_norm raised ValueError: bad \x00 \x1b[31mred"
    tests = tuple(replace(t, status="failed", score=0.0, output=bad) if t.problem == "layer_norm" else t
                  for t in erin_result().tests)
    annotate_autograded(replace(erin_result(), tests=tests), assignment, copy)
    cells = nbformat.read(copy / NB, as_version=4).cells
    text = "\n".join(line for c in cells for o in c.get("outputs", []) for line in o.get("traceback", []))
    assert "\x00" not in text and "\x1b[31mred" not in text
    assert "bad \\x00 \\x1b[31mred" in text


def test_each_grade_cell_gets_the_reasons_for_its_points(copy, assignment):
    """Does every grade cell carry its problem's score and, where points were lost, each reason?"""
    (report,) = annotate_autograded(dora_result(), assignment, copy)
    assert report.annotated == tuple(p.grade_id for p in assignment.problems) and not report.restored
    out = grade_outputs(copy / NB)
    assert "All tests passed!" not in "".join(out.values())
    assert out["test_merge_heads"].startswith(f"{OUTPUT_NAME}: 5 / 5 points for merge_heads")
    ln = squash(out["test_layer_norm"])
    assert ln.startswith(f"{OUTPUT_NAME}: 13.5 / 15 points for layer_norm, 1 of 2 checks passed")
    assert "Does layer_norm match the reference for several shapes?" in ln and "nearly_constant" in ln
    assert "Recognised misconception: eps outside sqrt (layer_norm.eps_outside_sqrt)" in ln
    assert squash(MUTATED) in ln and "advice (no points)" in ln
    assert squash(MISSING_SPLIT) in squash(out["test_split_heads"])
    assert "3 checks failed with the same error" in out["test_split_heads"]
    assert f"not run (no points): Does split_heads leave x untouched? [test_split_heads_leaves_input_unchanged] " \
        f"{squash(NOT_RUN_SPLIT)}" in squash(out["test_split_heads"])
    block = squash(out["test_pre_ln_block"])
    assert squash(UPCAST) in block and squash(NEEDS_SPLIT) in block and squash(WARNED) in block


def test_the_notebook_holds_nothing_for_instructors_only(copy, assignment):
    """With instructor detail on every check, does the annotated notebook hold neither detail nor seed?"""
    annotate_autograded(dora_result(), assignment, copy)
    text = (copy / NB).read_text(encoding="utf-8")
    assert SECRET not in text and str(SEED) not in text


def test_formgrader_shows_the_reasons_beside_the_grade(copy, assignment):
    """Rendered the way formgrader renders a submission, is each reason under its grade cell?"""
    annotate_autograded(dora_result(), assignment, copy)
    html = formgrader_html(copy / NB)
    assert 'id="test_split_heads"' in html          # formgrader's score box for the cell
    body = squash(html)
    start = body.index('id="test_split_heads"')
    assert squash(MISSING_SPLIT) in body[start:body.index('id="test_merge_heads"')]
    assert "course autograde: 13.5 / 15 points for layer_norm" in body


def test_markup_in_a_message_stays_text_in_formgrader(copy, assignment):
    """Is an exception message with markup escaped on formgrader's page?"""
    result = dora_result()
    tests = tuple(replace(t, output="raised ValueError: <script>alert(1)</script>") if t.problem == "silu" else t
                  for t in result.tests)
    tests = tuple(replace(t, status="failed", score=0.0) if t.problem == "silu" else t for t in tests)
    annotate_autograded(replace(result, tests=tests), assignment, copy)
    html = formgrader_html(copy / NB)
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_deleted_grade_cell_is_put_back_where_it_was(copy, assignment):
    """Is a grade cell the student deleted restored after its neighbour, with a note and the reasons?"""
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_split_heads"]
    nbformat.write(nb, copy / NB)
    (report,) = annotate_autograded(dora_result(), assignment, copy, RELEASED)
    assert report.restored == ("test_split_heads",)
    cells = nbformat.read(copy / NB, as_version=4).cells
    released = nbformat.read(RELEASED / NB, as_version=4).cells
    ids = [c.get("id") for c in cells]
    assert ids == [c.get("id") for c in released]
    restored = cells[ids.index("split-heads-test")]
    assert restored.source == released[ids.index("split-heads-test")].source
    out = grade_outputs(copy / NB)["test_split_heads"]
    assert "was missing from the submission" in out and squash(MISSING_SPLIT) in squash(out)


def _insert_copy(path, grade_id, after, source=None):
    """Copy the cell with `grade_id` as a student would in Jupyter (same metadata, id "my-copy"),
    `after` cells below it, with another `source` if given. Returns the original's index."""
    nb = nbformat.read(path, as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    duplicate = nbformat.from_dict(json.loads(json.dumps(nb.cells[first])))
    duplicate.id = "my-copy"
    if source is not None:
        duplicate.source = source
    nb.cells.insert(first + after, duplicate)
    nbformat.write(nb, path)
    return first


def test_a_copied_grade_cell_shows_one_score_box_in_formgrader(copy, assignment):
    """A student copied a graded cell (two cells share its grade id): rendered as formgrader renders
    it, is there one score box for that grade, at the last cell (as nbgrader's DeduplicateIds keeps
    the last) with our report, and does the earlier one say it is not graded?"""
    first = _insert_copy(copy / NB, "test_layer_norm", 2)
    (report,) = annotate_autograded(dora_result(), assignment, copy, RELEASED)
    assert not report.restored
    cells = nbformat.read(copy / NB, as_version=4).cells
    ids = [c.get("id") for c in cells]
    earlier, kept = cells[first], cells[ids.index("my-copy")]
    assert kept.outputs[0].ename == OUTPUT_NAME and "nbgrader" not in earlier.metadata
    assert [o.text for o in earlier.outputs] == [
        f"{OUTPUT_NAME}: a copy of the grade cell `test_layer_norm`, not graded: its grade is on the last cell with "
        f"that id, below.\n"]
    html = formgrader_html(copy / NB)
    assert html.count('id="test_layer_norm"') == 1
    body = squash(html)
    box = body.index('id="test_layer_norm"')
    assert body.index("a copy of the grade cell") < box < body.index(f"{OUTPUT_NAME}: 13.5 / 15 points for layer_norm")


def test_a_copied_answer_cell_shows_one_answer_box_in_formgrader(copy, assignment):
    """A student copied their solution cell (two `def layer_norm` cells with one solution id):
    rendered as formgrader renders it, is there one "Student's answer" box with one comment box for
    that id, on the last copy (the definition that ran last and was graded, the copy nbgrader's
    DeduplicateIds keeps), while the earlier one keeps its code and outputs under a note?"""
    nb = nbformat.read(copy / NB, as_version=4)
    answers = sum(1 for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "layer_norm_solution":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="first try\n")]
    nbformat.write(nb, copy / NB)
    first = _insert_copy(copy / NB, "layer_norm_solution", 1, "def layer_norm(x, gamma, beta, eps=1e-5):\n"
                         "    return gamma * (x - x.mean(-1, keepdims=True)) / 2 + beta  # my second try\n")
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    cells = nbformat.read(copy / NB, as_version=4).cells
    earlier, kept = cells[first], cells[first + 1]
    assert "nbgrader" not in earlier.metadata and kept.metadata.nbgrader.grade_id == "layer_norm_solution"
    assert [o.text for o in earlier.outputs] == [
        f"{OUTPUT_NAME}: a copy of the answer cell `layer_norm_solution`, not taken as the answer: the last cell "
        f"with that id, below, is.\n", "first try\n"]
    html = formgrader_html(copy / NB)
    assert html.count('id="layer_norm_solution-comment"') == 1
    assert html.count("Student's answer") == answers
    body = squash(html)
    assert body.index("a copy of the answer cell") < body.index("first try") < body.index("my second try") \
        < body.index('id="layer_norm_solution-comment"')



def test_a_switched_off_stub_below_a_copy_of_its_answer_leaves_the_answer_box_on_that_copy(copy, assignment):
    """The answer cell copied above itself and answered in the copy, the cell below made Markdown holding the
    released stub alone: grading runs the copy and not the stub, so is the copy the answer cell in formgrader
    (its one answer box and comment box, the released nbgrader metadata, no line calling it a copy), the stub
    kept as written without nbgrader metadata?"""
    first = _insert_copy(copy / NB, "layer_norm_solution", 0, "def layer_norm(x, gamma, beta, eps=1e-5):\n"
                         "    return x  # my answer\n")
    nb = nbformat.read(copy / NB, as_version=4)
    stub = nb.cells[first + 1]
    nb.cells[first + 1] = nbformat.v4.new_markdown_cell(stub.source, id=stub.id, metadata=stub.metadata)
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    cells = nbformat.read(copy / NB, as_version=4).cells
    released = next(c for c in nbformat.read(RELEASED / NB, as_version=4).cells if c.id == stub.id)
    answer, switched_off = cells[first], cells[first + 1]
    assert answer.id == "my-copy" and answer.metadata.nbgrader == released.metadata.nbgrader
    assert not [o for o in answer.outputs if "a copy of" in o.get("text", "")]
    assert switched_off.cell_type == "markdown" and "nbgrader" not in switched_off.metadata
    assert switched_off.source == stub.source
    html = formgrader_html(copy / NB)
    assert html.count('id="layer_norm_solution-comment"') == 1
    body = squash(html)
    assert body.index("my answer") < body.index('id="layer_norm_solution-comment"') < body.index("YOUR CODE HERE")

def test_the_copy_shows_the_cells_as_graded_and_the_answers_as_submitted(copy, assignment):
    """The given setup cell edited (`softmax` deleted) and the `layer_norm` answer cell made Markdown: as
    nbgrader's autograde gives formgrader the notebook (its OverwriteCells), does the copy show the setup cell
    as released (as grading took it) under a line saying it was edited, its stale outputs gone, and the answer
    cell as code again holding the student's own text, as formgrader's answer box?"""
    nb = nbformat.read(copy / NB, as_version=4)
    released = {c.id: c for c in nbformat.read(RELEASED / NB, as_version=4).cells}
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(nb.cells)}
    setup = nb.cells[by_id["setup"]]
    setup.source = setup.source[:setup.source.index("def softmax")]
    setup.outputs = [nbformat.v4.new_output("stream", name="stdout", text="my edited setup ran\n")]
    mine = "def layer_norm(x, gamma, beta, eps=1e-5):\n    return x  # my answer\n"
    answer = nb.cells[by_id["layer_norm_solution"]]
    nb.cells[by_id["layer_norm_solution"]] = nbformat.v4.new_markdown_cell(mine, id=answer.id,
                                                                           metadata=answer.metadata)
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    cells = {c.id: c for c in nbformat.read(copy / NB, as_version=4).cells}
    shown = cells[setup.id]
    assert shown.source == released[setup.id].source and "def softmax" in shown.source
    assert [o.text for o in shown.outputs] == [
        f"{OUTPUT_NAME}: this locked cell was edited in the submission; it is shown as released, as grading put "
        f"it back (the edited version was not run).\n"]
    answered = cells[answer.id]
    assert (answered.cell_type, answered.source, answered.outputs) == ("code", mine, [])
    assert answered.metadata.nbgrader == released[answer.id].metadata.nbgrader
    body = squash(formgrader_html(copy / NB))
    assert "my edited setup ran" not in body and "my answer" in body


def test_a_crashed_submission_asks_for_manual_grading_in_every_grade_cell(copy, assignment):
    """When the grader crashed, does every grade cell say it is not graded and why (first line only)?"""
    crashed = replace(erin_result(), state="crashed", tests=(),
                      crash_reason="ImportError in the graders\nTraceback: /course/assignments/x.py")
    annotate_autograded(crashed, assignment, copy)
    for text in grade_outputs(copy / NB).values():
        assert "not graded; the grader failed for this submission (ImportError in the graders)" in text
        assert "Traceback" not in text


def test_an_unreadable_copy_is_left_as_it_is_without_a_release(tmp_path, assignment):
    """Without a released notebook to take the cells from, is a copy that is not notebook JSON reported and
    left byte for byte, without an exception?"""
    folder = tmp_path / "ken-copy"
    folder.mkdir()
    (folder / NB).write_text('{"cells": [', encoding="utf-8")
    (report,) = annotate_autograded(erin_result(), assignment, folder)
    assert report.notebook is None and "not a readable notebook" in report.skipped
    assert (folder / NB).read_text(encoding="utf-8") == '{"cells": ['


def test_a_lone_surrogate_in_the_copy_becomes_the_replacement_character(copy, assignment):
    """A notebook whose JSON escapes a lone surrogate ("\\udc80" in a Markdown cell): is its copy annotated
    all the same and written as UTF-8, the surrogate replaced by U+FFFD, so that nbformat reads it back
    without one?"""
    nb = json.loads((copy / NB).read_text(encoding="utf-8"))
    odd = "caf\u00e9 \udc80 and \ud83d\ude00"     # a lone low surrogate, then a pair that JSON reads as one emoji
    nb["cells"].append({"cell_type": "markdown", "id": "odd-text", "metadata": {}, "source": [odd]})
    (copy / NB).write_text(json.dumps(nb), encoding="ascii")        # escapes only: the file is plain ASCII
    (report,) = annotate_autograded(dora_result(), assignment, copy)
    assert report.notebook == copy / NB and report.annotated
    text = (copy / NB).read_bytes().decode("utf-8")                   # strict: any surrogate left would raise
    assert "caf\u00e9 \ufffd and \U0001f600" in text
    back = nbformat.read(copy / NB, as_version=4)
    assert back.cells[-1].source == "caf\u00e9 \ufffd and \U0001f600"


def test_an_unreadable_copy_becomes_a_placeholder_formgrader_can_open(tmp_path, assignment):
    """With the release, is a copy that is not notebook JSON replaced by a valid notebook whose first cell
    says why the file could not be read (the student's note, its markup escaped), then the released answer
    cells, empty, and grade cells, each grade cell with our report, rendered by formgrader with its boxes?"""
    folder = tmp_path / "ken-copy"
    folder.mkdir()
    (folder / NB).write_text("my answers <b>here</b>\n", encoding="utf-8")
    note = f"{NB} is not valid notebook JSON (line 1, column 1: Expecting value <b>)"
    result = replace(erin_result(), notes=(note,))
    (report,) = annotate_autograded(result, assignment, folder, RELEASED)
    assert report.notebook == folder / NB and report.annotated == tuple(p.grade_id for p in assignment.problems)
    nb = nbformat.read(folder / NB, as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].id == "course-autograde-unreadable"
    assert (f"the submitted file `{NB}` could not be read as a notebook**: {NB} is not valid notebook JSON (line 1, "
            f"column 1: Expecting value &lt;b&gt;)") in nb.cells[0].source
    released = nbformat.read(RELEASED / NB, as_version=4)
    marked = [c for c in released.cells if c.metadata.get("nbgrader", {}).get("grade")
              or c.metadata.get("nbgrader", {}).get("solution")]
    assert [c.id for c in nb.cells[1:]] == [c.id for c in marked]
    assert all(c.source == "" for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    assert set(grade_outputs(folder / NB)) == {p.grade_id for p in assignment.problems}
    html = formgrader_html(folder / NB)
    assert 'id="test_split_heads"' in html and 'id="split_heads_solution-comment"' in html
    assert "<b>here" not in html and "my answers" not in html


@pytest.mark.slow
def test_demo_class_grade_cells_carry_reasons_and_submissions_are_untouched(graded_demo):
    """After `course autograde`, are the submitted notebooks unchanged and the autograded copies annotated?"""
    folder = graded_demo.folder
    course = CourseLayout(folder)
    for sub in sorted(CourseLayout(ROOT / "examples").submitted_dir.glob("*/transformer-block/*.ipynb")):
        student = sub.parts[-3]
        submitted = course.submission(student, "transformer-block") / sub.name
        assert hashlib.sha256(submitted.read_bytes()).digest() == hashlib.sha256(sub.read_bytes()).digest()
    scores = {p["problem"]: p for p in graded_demo.results["katherine"]["extra_data"]["problems"]}
    ln = scores["layer_norm"]
    head = f"{OUTPUT_NAME}: {format_points(ln['score'])} / {format_points(ln['max_score'])} points for layer_norm"
    out = grade_outputs(course.autograded("katherine", "transformer-block") / NB)
    assert out["test_layer_norm"].startswith(head)
    assert "Recognised misconception: Unbiased variance" in out["test_layer_norm"]
    html = squash(formgrader_html(course.autograded("katherine", "transformer-block") / NB))
    assert head in html
    assert "Recognised misconception: Unbiased variance" in html


@pytest.mark.parametrize("case", ["graded", "crashed", "deleted_cell"])
def test_the_copy_is_byte_for_byte_what_nbformats_checked_outputs_give(tmp_path, copy, assignment, monkeypatch, case):
    """Are our outputs, built without nbformat's per-output schema check, written exactly as the
    outputs nbformat.v4.new_output builds (and checks) would be?"""
    from autograder.reporting import annotate

    result = dora_result()
    if case == "crashed":
        result = replace(erin_result(), state="crashed", tests=(), crash_reason="ImportError in the graders")
    if case == "deleted_cell":
        nb = nbformat.read(copy / NB, as_version=4)
        nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_silu"]
        nbformat.write(nb, copy / NB)
    checked = tmp_path / "checked"
    checked.mkdir()
    (checked / NB).write_bytes((copy / NB).read_bytes())
    annotate_autograded(result, assignment, copy, RELEASED)
    monkeypatch.setattr(annotate, "_new_output", nbformat.v4.new_output)
    annotate_autograded(result, assignment, checked, RELEASED)
    assert (copy / NB).read_bytes() == (checked / NB).read_bytes()


def test_a_changed_release_is_read_again(tmp_path, copy, assignment):
    """When the released notebook changes during a run, is a deleted grade cell put back from the new version?"""
    release = tmp_path / "published"
    release.mkdir()
    released = nbformat.read(RELEASED / NB, as_version=4)
    nbformat.write(released, release / NB)
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_silu"]
    for i, source in enumerate(("# first release\n", "# second release, a longer line\n")):
        folder = tmp_path / f"copy{i}"
        folder.mkdir()
        nbformat.write(nb, folder / NB)
        for cell in released.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_silu":
                cell.source = source
        nbformat.write(released, release / NB)
        (report,) = annotate_autograded(dora_result(), assignment, folder, release)
        assert report.restored == ("test_silu",)
        cells = nbformat.read(folder / NB, as_version=4).cells
        assert [c.source for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_silu"] == [source]


READ_CASES = {
    "released": None,
    "split_and_transient": lambda nb: (nb["metadata"].update(signature="x", orig_nbformat=3),
                                       nb["cells"][0]["metadata"].update(trusted=True),
                                       nb["cells"][0].update(source=["a\n", "b"])),
    "stream_as_lines": lambda nb: next(c for c in nb["cells"] if c["cell_type"] == "code").update(
        outputs=[{"output_type": "stream", "name": "stdout", "text": ["1\n", "2\n"]}]),
    "cell_without_metadata": lambda nb: nb["cells"][0].pop("metadata"),
    "cells_not_a_list": lambda nb: nb.update(cells={"a": 1}),
    "not_an_object": lambda nb: [1, 2],
    "version_3": lambda nb: nb.update(nbformat=3),
}


@pytest.mark.parametrize("case", READ_CASES)
def test_the_copy_is_read_as_nbformat_reads_it(tmp_path, case):
    """Does our reading of a notebook (parsed straight into NotebookNodes) give what
    nbformat.reader.reads gives, or fail where it fails?"""
    import json

    from autograder.reporting.annotate import _reads

    doc = json.loads((RELEASED / NB).read_text(encoding="utf-8"))
    change = READ_CASES[case]
    if change is not None:
        changed = change(doc)
        doc = changed if isinstance(changed, list) else doc
    text = json.dumps(doc)
    try:
        expected = nbformat.reader.reads(text)
    except Exception as exc:  # noqa: BLE001 - the same kind of failure is expected from ours
        with pytest.raises(type(exc)):
            _reads(text)
        return
    ours = _reads(text)
    assert ours == expected and type(ours) is type(expected)
    assert all(type(c) is nbformat.NotebookNode for c in ours.get("cells", ()))


@pytest.mark.parametrize("kind", ["notebook", "deleted_cell", "unreadable", "stale"])
def test_the_copy_is_written_once_as_the_copy_annotated_afterwards_was(course_copy, copy, monkeypatch, kind):
    """Is each formgrader copy written once, annotated, and are the files (bytes and modes) those of
    copying the submission and then annotating the copy, also when a notebook cannot be read (then a
    placeholder is written) or when the copy of an earlier grading is there under the release's name
    while this submission's notebook has another (then that earlier copy is removed, and the files are
    those of this submission alone)?"""
    from autograder import api
    from autograder.reporting import annotate

    course = load_course(course_copy)
    a = course.assignment("transformer-block")
    folder = course.layout.submission("dora", a.name)
    folder.mkdir(parents=True)
    data = (copy / NB).read_bytes()
    if kind == "deleted_cell":
        nb = nbformat.reads(data.decode(), as_version=4)
        nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_silu"]
        data = nbformat.writes(nb).encode()
    name = "transformer-block (1).ipynb" if kind == "stale" else NB
    (folder / name).write_bytes(b"{not json" if kind == "unreadable" else data)
    (folder / "timestamp.txt").write_text("2026-12-14 18:00:00.000000 UTC\n")
    result = replace(dora_result(), files=(str(folder / name),))
    targets = {}
    for how in ("before", "once"):
        target = course.layout.autograded("dora", a.name)
        if kind == "stale" and how == "once":
            target.mkdir(parents=True, exist_ok=True)
            (target / NB).write_bytes(data)              # from an earlier grading
        writes: list[str] = []

        def counted(write, writes=writes):
            def call(path, data, **kw):
                writes.append(Path(path).name)
                return write(path, data, **kw)
            return call

        with monkeypatch.context() as patch:
            patch.setattr(annotate, "atomic_write_bytes", counted(annotate.atomic_write_bytes))
            patch.setattr(api, "_write_copy", counted(api._write_copy))
            if how == "once":
                api.write_formgrader_copy(course, a, "dora", folder, result)
            else:
                target.mkdir(parents=True, exist_ok=True)
                api._copy_for_formgrader(folder, target, max_bytes=10**7)
                annotate.annotate_autograded(result, a, target, course.layout.release(a.name))
        if how == "once":
            assert sorted(writes) == sorted(set(writes))        # no file written twice
        targets[how] = {p.name: (p.read_bytes(), p.stat().st_mode) for p in target.iterdir()}
        shutil.rmtree(target)
    assert targets["once"] == targets["before"]
    assert (kind == "unreadable") == (b"could not be read as a notebook" in targets["once"][name][0])
    assert OUTPUT_NAME.encode() in targets["once"][name][0]


def test_a_notebook_read_before_a_later_file_fails_is_still_copied(course_copy, copy, monkeypatch):
    """When reading a later submitted file fails, is the notebook read before it still written to
    autograded/, annotated (never as submitted: formgrader would show the student's markup), and does
    the error reach the caller?"""
    from autograder import api

    course = load_course(course_copy)
    a = course.assignment("transformer-block")
    folder = course.layout.submission("dora", a.name)
    folder.mkdir(parents=True)
    (folder / NB).write_bytes((copy / NB).read_bytes())
    (folder / "zz-extra.ipynb").write_bytes((copy / NB).read_bytes())   # read after NB (names sorted)
    opened = api.open_regular

    def failing(path, *args, **kwargs):
        if Path(path).name == "zz-extra.ipynb":
            raise OSError(5, "Input/output error", str(path))
        return opened(path, *args, **kwargs)

    monkeypatch.setattr(api, "open_regular", failing)
    result = replace(dora_result(), files=(str(folder / NB),))
    with pytest.raises(OSError):
        api.write_formgrader_copy(course, a, "dora", folder, result)
    target = course.layout.autograded("dora", a.name)
    assert (target / NB).read_bytes() != (folder / NB).read_bytes()
    assert set(grade_outputs(target / NB)) == {p.grade_id for p in a.problems}
    assert not (target / "zz-extra.ipynb").exists()


def test_a_notebook_whose_annotation_fails_is_not_copied_as_submitted(course_copy, copy, monkeypatch):
    """When annotating the formgrader copy fails unexpectedly, is the submitted notebook left out of
    autograded/ (a stale copy of an earlier submission removed too) rather than written as submitted,
    with its markup, and does the error reach the caller?"""
    from autograder import api
    from autograder.reporting import annotate

    course = load_course(course_copy)
    a = course.assignment("transformer-block")
    folder = course.layout.submission("dora", a.name)
    folder.mkdir(parents=True)
    (folder / NB).write_bytes((copy / NB).read_bytes())
    target = course.layout.autograded("dora", a.name)
    target.mkdir(parents=True)
    (target / NB).write_bytes(b"an earlier submission's copy")

    def failing(*args, **kwargs):
        raise RuntimeError("annotation failed")

    monkeypatch.setattr(annotate, "annotate_autograded", failing)
    with pytest.raises(RuntimeError):
        api.write_formgrader_copy(course, a, "dora", folder, replace(dora_result(), files=(str(folder / NB),)))
    assert not (target / NB).exists()
    assert api.needs_formgrader_copy(course, a, "dora", folder, fresh=False, refused=False)


@pytest.mark.parametrize("minor", ["5.0", '"5"', "null", "NaN"])
def test_a_submission_whose_minor_format_is_no_integer_is_copied_annotated(course_copy, copy, minor):
    """A submitted notebook whose nbformat_minor is 5.0, "5", null or NaN (nbformat's validator stops at
    each with an empty AssertionError): is its formgrader copy written annotated, with the student's cells
    and an integer nbformat_minor, without an error for the batch to report?"""
    from autograder import api

    course = load_course(course_copy)
    a = course.assignment("transformer-block")
    folder = course.layout.submission("dora", a.name)
    folder.mkdir(parents=True)
    nb = json.loads((copy / NB).read_text(encoding="utf-8"))
    nb["nbformat_minor"] = "@"
    (folder / NB).write_text(json.dumps(nb).replace('"@"', minor), encoding="utf-8")
    api.write_formgrader_copy(course, a, "dora", folder, replace(dora_result(), files=(str(folder / NB),)))
    target = course.layout.autograded("dora", a.name) / NB
    back = nbformat.read(target, as_version=4)
    nbformat.validate(back)
    assert back.nbformat_minor == 5
    assert [c.id for c in back.cells] == [c["id"] for c in nb["cells"]]
    assert set(grade_outputs(target)) == {p.grade_id for p in a.problems}
    assert "All tests passed!" not in "".join(grade_outputs(target).values())


def test_a_submission_nested_too_deeply_to_write_back_becomes_the_placeholder(course_copy, copy):
    """A submitted notebook whose attachments hold lists nested 900 deep: read, but too deep for nbformat to
    write back. Is its formgrader copy the placeholder, saying why in one line (that the file was read, not
    that it could not be), with every grade cell annotated, rather than a RecursionError that leaves the
    copy unannotated?"""
    from autograder import api

    course = load_course(course_copy)
    a = course.assignment("transformer-block")
    folder = course.layout.submission("dora", a.name)
    folder.mkdir(parents=True)
    nb = json.loads((copy / NB).read_text(encoding="utf-8"))
    nb["cells"][0]["attachments"] = {"deep.png": {"image/png": "@"}}
    (folder / NB).write_text(json.dumps(nb).replace('"@"', "[" * 900 + "]" * 900), encoding="utf-8")
    api.write_formgrader_copy(course, a, "dora", folder, replace(dora_result(), files=(str(folder / NB),)))
    target = course.layout.autograded("dora", a.name) / NB
    back = nbformat.read(target, as_version=4)
    nbformat.validate(back)
    assert back.cells[0].id == "course-autograde-unreadable" and "deep.png" not in json.dumps(back)
    assert (f"`{NB}` was read, but could not be written back as a notebook for formgrader**: {NB}: not annotated, "
            f"nbformat cannot write it back (its JSON nests too deeply)\n") in back.cells[0].source
    assert "could not be read" not in back.cells[0].source
    assert set(grade_outputs(target)) == {p.grade_id for p in a.problems}


def test_outputs_kept_from_earlier_students_give_the_notebook_annotated_afresh(tmp_path, copy, assignment):
    """Annotated one after another (outputs kept from the students before, one whose checks differ only
    in detail and duration, a crash), is every notebook the one annotated with nothing kept, and is a
    kept output never shared between two notebooks?"""
    from autograder.reporting import annotate

    dora = dora_result()
    timed = replace(dora, tests=tuple(replace(t, duration=7.0, detail="x") for t in dora.tests))
    crashed = replace(erin_result(), state="crashed", tests=(), crash_reason="ImportError")
    results = [dora, erin_result(), timed, crashed, dora]
    texts = {}
    for kept in (False, True):
        annotate._OUTPUTS.clear()
        for i, result in enumerate(results):
            if not kept:
                annotate._OUTPUTS.clear()
            folder = tmp_path / f"{kept}-{i}"
            folder.mkdir()
            (folder / NB).write_bytes((copy / NB).read_bytes())
            annotate_autograded(result, assignment, folder)
            texts[kept, i] = (folder / NB).read_bytes()
    assert all(texts[True, i] == texts[False, i] for i in range(len(results)))
    assert texts[True, 2] == texts[True, 0] and annotate._OUTPUTS
    tests = next(t for t in annotate.problem_tests(dora) if t[1] == "layer_norm")
    first, again = (annotate._problem_output(dora, tests, "layer_norm") for _ in range(2))
    assert first == again and first is not again and first.get("traceback") is not again.get("traceback")


def test_a_grade_cell_heads_a_probes_guess_as_where_it_first_goes_wrong():
    """In formgrader's copy too, is a localised stage headed "Where it first goes wrong" and a
    catalogued mistake "Recognised misconception", and do checks not graded say they earn no points?"""
    from autograder.reporting.annotate import problem_report
    from autograder.reporting.digest import digest_problems

    from .conftest import check, submission

    stage, known = "layer_norm.statistics_across_tokens", "layer_norm.unbiased_variance"
    result = submission("fay", [
        check("layer_norm", "test_a", 0.0, 6.0, output="off", diagnoses=(stage,), hints=("Per token.",),
              stages=(stage,)),
        check("layer_norm", "test_b", 0.0, 6.0, output="off", diagnoses=(known,), hints=("Divide by d.",)),
        check("layer_norm", "test_c", 0.0, 3.0, status="not_graded", output="Not graded: needs your `x`."),
    ])
    text = problem_report(digest_problems(result)[0])
    assert f"Where it first goes wrong: Statistics across tokens\x1b[0m ({stage})" in text
    assert f"Recognised misconception: Unbiased variance\x1b[0m ({known})" in text
    assert "Recognised misconception: Statistics" not in text
    assert "not graded (no points):" in text and "0 of 3 checks passed" in text


def test_a_grade_cell_says_partly_graded_for_checks_that_earned_points_in_some_cases():
    """Checks not graded in some cases whose other cases earned points: does the grade cell's report mark
    them "partly graded", grouped or alone, never "not graded (no points)" beside points?"""
    from autograder.reporting.annotate import problem_report
    from autograder.reporting.digest import digest_problems

    from .conftest import check, submission

    why = "Not graded: this check needs your `layer_norm`, which fails on these inputs."

    def cases(name):
        return [check("pre_ln_block", f"{name}[{case}]", score, 2.0, status="passed" if score else "not_graded",
                      output="" if score else why) for case, score in (("a", 2.0), ("b", 0.0))]

    def report(tests):
        return problem_report(next(p for p in digest_problems(submission("gil", tests)) if p.name == "pre_ln_block"))
    grouped = report(cases("test_a") + cases("test_b"))
    assert "partly graded:\x1b[0m 2 checks could not be graded in full, for one reason" in grouped, grouped
    assert "no points" not in grouped, grouped
    alone = report(cases("test_a"))
    assert "partly graded:\x1b[0m" in alone and "2 / 4 points" in alone and "no points" not in alone, alone


def test_what_a_student_wrote_runs_nothing_in_formgrader(copy, assignment):
    """A submission whose outputs (written by the student: no kernel ran them) and Markdown hold
    scripts, event handlers, SVG and widget state: does formgrader's page for the autograded copy run
    none of it, while the student's text, plain outputs, code spans and the released notebook's own
    Markdown stay as they were?"""
    nb = nbformat.read(copy / NB, as_version=4)
    answer = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                  and c.metadata.get("nbgrader", {}).get("solution"))
    nb.cells[answer].outputs = [
        nbformat.v4.new_output("display_data", data={"application/javascript": "alert('js output')",
                                                     "text/html": "<script>alert('html output')</script>",
                                                     "text/plain": "plain text kept"}),
        nbformat.v4.new_output("display_data", data={"image/svg+xml": "<svg onload=\"alert('svg')\"></svg>"}),
        nbformat.v4.new_output("execute_result", data={"text/markdown": "<img src=x onerror=\"alert('md out')\">",
                                                      "image/png": "iVBORw0KGgo="}, execution_count=1)]
    written = ("My answer <script>alert('md cell')</script> <img src=x onerror=\"alert('img')\"> and "
               "`<b>in a code span</b>`; a < b.\n\n```html\n<i>fenced</i>\n```\n")
    nb.cells.insert(answer + 1, nbformat.v4.new_markdown_cell(written))
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    instructor = next(c.source for c in nb.cells if c.cell_type == "markdown")
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    html = formgrader_html(copy / NB).replace("&#39;", "'")
    for dropped in ("js output", "html output", "svg", "md out"):      # outputs: only their plain text is kept
        assert f"alert('{dropped}')" not in html, dropped
    assert "plain text kept" in html
    assert "&lt;script&gt;alert('md cell')&lt;/script&gt;" in html      # the student's Markdown, as text
    assert not re.search(r"<script>alert|<svg|<img[^>]*\sonerror=", html)
    assert "widget-state" not in html
    kept = nbformat.read(copy / NB, as_version=4)
    outputs = kept.cells[answer].outputs
    assert [dict(o["data"]) for o in outputs] == [
        {"text/plain": "plain text kept"},
        {"text/plain": "(an output shown only as HTML or script: left out of this copy)"},
        {"image/png": "iVBORw0KGgo="}]
    assert kept.cells[answer + 1].source == f"````text\n{written}\n````\n"      # shown as the student wrote it
    assert next(c.source for c in kept.cells if c.cell_type == "markdown") == instructor
    assert "widgets" not in kept.metadata


SCRIPT = "<script>document.title='pwned'</script>"


def _with_script_output(nb):
    """`nb` with a student's HTML output holding a script under its first answer cell."""
    answer = next(c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution"))
    answer.outputs = [nbformat.v4.new_output("display_data", data={"text/html": SCRIPT, "text/plain": "plain"})]
    return nb


def _runs_nothing(html):
    """Whether a rendered page holds no script, event handler or `javascript:` target of the student's."""
    return "pwned" not in html and not re.search(r"\sonerror=|<script>document|href=\"\s*javascript:", html, re.I)


def _formgrader_copy(course_copy, notebooks):
    """The autograded folder `write_formgrader_copy` writes for dora's submission of `notebooks`
    (file name -> notebook node)."""
    from autograder import api

    course = load_course(course_copy)
    a = course.assignment("transformer-block")
    folder = course.layout.submission("dora", a.name)
    folder.mkdir(parents=True)
    for name, nb in notebooks.items():
        nbformat.write(nb, folder / name)
    api.write_formgrader_copy(course, a, "dora", folder, replace(dora_result(), files=(str(folder / NB),)))
    return course.layout.autograded("dora", a.name)


@pytest.mark.parametrize("padded", ["other", "same"])
def test_a_notebook_over_the_limits_through_its_outputs_is_copied_without_them(course_copy, copy, padded):
    """A submission with a notebook whose saved outputs hold more than 200,000 values (another notebook
    of it, or the graded one itself): is the graded notebook still annotated, and written with nothing of
    the student's that runs in formgrader (the over-limit one without its outputs, under a note saying
    why), never as submitted?"""
    nb = _with_script_output(nbformat.read(copy / NB, as_version=4))
    long = nbformat.v4.new_code_cell("for i in range(200_001): print(i)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text=["x\n"] * 200_001)])
    if padded == "same":
        nb.cells.append(long)
        notebooks = {NB: nb}
    else:
        notebooks = {NB: nb, "scratch.ipynb": nbformat.v4.new_notebook(cells=[long])}
    target = _formgrader_copy(course_copy, notebooks)
    written = nbformat.read(target / NB, as_version=4)
    nbformat.validate(written)
    assert set(grade_outputs(target / NB)) == {p.grade_id for p in load_course(course_copy)
                                               .assignment("transformer-block").problems}
    assert SCRIPT not in (target / NB).read_text(encoding="utf-8")
    if padded == "same":
        assert written.cells[0].id == "course-autograde-outputs-left-out"
        assert "saved outputs of this notebook are left out" in written.cells[0].source
        assert "more than 200,000 JSON values" in written.cells[0].source
        assert not written.cells[-1].outputs and written.cells[-1].source == long.source
    assert _runs_nothing(formgrader_html(target / NB))


def test_a_notebook_over_the_graders_limits_is_copied_as_a_placeholder(course_copy, copy):
    """A notebook with more than 200,000 values outside its outputs (never parsed): is its formgrader
    copy the placeholder saying it is too large, with the released grade cells, and nothing of the
    student's?"""
    nb = _with_script_output(nbformat.read(copy / NB, as_version=4))
    nb.cells.append(nbformat.v4.new_markdown_cell(["line\n"] * 200_001 + [SCRIPT]))
    target = _formgrader_copy(course_copy, {NB: nb})
    written = nbformat.read(target / NB, as_version=4)
    assert written.cells[0].id == "course-autograde-unreadable"
    assert f"`{NB}` is too large to be read for this copy" in written.cells[0].source
    assert "pwned" not in (target / NB).read_text(encoding="utf-8")
    assert _runs_nothing(formgrader_html(target / NB))


def test_output_metadata_keeps_only_image_sizes(copy, assignment):
    """A bitmap output whose metadata puts an event handler in its width (nbconvert writes the width as
    an unquoted attribute) or a file name as its source: are only plain whole-number sizes kept?"""
    nb = nbformat.read(copy / NB, as_version=4)
    answer = next(c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution"))
    answer.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="},
                               metadata={"image/png": {"width": "1 onerror=document.title='pwned'", "height": 20}}),
        nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="},
                               metadata={"width": "2 onerror=alert(1)", "height": 30,
                                         "filenames": {"image/png": "x\" onerror=\"alert(1)"}})]
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    kept = next(c for c in nbformat.read(copy / NB, as_version=4).cells if c.get("id") == answer.id)
    assert [o.metadata for o in kept.outputs] == [{"image/png": {"height": 20}}, {"height": 30}]
    html = formgrader_html(copy / NB)
    assert _runs_nothing(html) and "onerror" not in html and html.count("data:image/png;base64,iVBORw0KGgo=") == 2


@pytest.mark.parametrize("with_release", [True, False])
def test_nbgrader_metadata_the_release_does_not_have_is_dropped(copy, assignment, with_release):
    """A cell the student added with nbgrader metadata holding markup in its grade id (formgrader writes
    the id into its page as it is), and a released grade cell whose points the student changed: is the
    added cell's metadata dropped and the released cell's taken from the release, as nbgrader's autograde
    does? Without the release, is an id that is not plain dropped all the same?"""
    nb = nbformat.read(copy / NB, as_version=4)
    bad = 'x"><img src=x onerror="document.title=\'pwned\'">'
    nb.cells.append(nbformat.v4.new_code_cell("1 + 1", metadata={"nbgrader": {
        "grade": True, "solution": True, "grade_id": bad, "points": 5, "schema_version": 3}}))
    graded = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
    released = next(c for c in nbformat.read(RELEASED / NB, as_version=4).cells if c.id == graded.id)
    graded.metadata.nbgrader["points"] = 1000
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED if with_release else None)
    cells = nbformat.read(copy / NB, as_version=4).cells
    assert "nbgrader" not in cells[-1].metadata
    if with_release:
        assert next(c for c in cells if c.id == graded.id).metadata.nbgrader == released.metadata.nbgrader
    html = formgrader_html(copy / NB)
    assert _runs_nothing(html) and "onerror" not in html



def test_a_copy_whose_grade_id_is_a_list_leaves_one_score_box(copy, assignment):
    """A copy of a grade cell whose nbgrader grade id a student made a list (`["test_layer_norm"]`, which is no
    key of a mapping): is the copy still written, that copy without nbgrader metadata, one score box for the
    grade on the grade cell?"""
    _insert_copy(copy / NB, "test_layer_norm", 1)
    nb = nbformat.read(copy / NB, as_version=4)
    listed = next(c for c in nb.cells if c.id == "my-copy")
    listed.metadata.nbgrader.grade_id = ["test_layer_norm"]
    nbformat.write(nb, copy / NB)
    (report,) = annotate_autograded(dora_result(), assignment, copy, RELEASED)
    assert "test_layer_norm" in report.annotated
    cells = nbformat.read(copy / NB, as_version=4).cells
    assert "nbgrader" not in next(c for c in cells if c.id == "my-copy").metadata
    assert formgrader_html(copy / NB).count('id="test_layer_norm"') == 1

def test_unsafe_link_targets_in_a_students_markdown_are_removed(copy, assignment):
    """`javascript:`, `vbscript:` and `data:` link targets in a student's Markdown, also written with
    character references, backslash escapes or as a reference definition: does formgrader's page have no
    such link, while web links, code spans and the released Markdown stay as they were?"""
    nb = nbformat.read(copy / NB, as_version=4)
    written = ("[a](javascript:alert(1)) [b](jav&#x61;script:alert(2)) [c](javascript&#58;alert(3)) "
               "[d]( javascript\\:alert(4)) ![e](javascript:alert(5)) [f](VBScript:msgbox(6)) "
               "[g](data:text/html;base64,PHNjcmlwdD4=) [h][ref] [web](https://example.org/a:b) "
               "`[code](javascript:x)`\n\n[ref]:\n  javascript:alert(7)\n")
    nb.cells.append(nbformat.v4.new_markdown_cell(written))
    instructor = next(c.source for c in nb.cells if c.cell_type == "markdown")
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    cells = nbformat.read(copy / NB, as_version=4).cells
    html = formgrader_html(copy / NB)
    assert not re.search(r"""(href|src)="\s*(javascript|vbscript|data:text)""", html, re.I), html
    assert '<a href="https://example.org/a:b">web</a>' in html and "[code](javascript:x)" in html
    assert cells[-1].source.count("#link-target-removed") == 8
    assert next(c.source for c in cells if c.cell_type == "markdown") == instructor


def test_a_copy_with_fields_the_format_does_not_allow_is_made_valid(copy, assignment):
    """An execution count that is markup, and a cell id nbformat does not allow: is the copy a valid
    notebook formgrader can render (it refuses an invalid one), with the student's code and our report?"""
    nb = json.loads((copy / NB).read_text(encoding="utf-8"))
    answer = next(c for c in nb["cells"]
                  if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("solution"))
    answer["execution_count"] = "<img src=x onerror=\"document.title='pwned'\">"
    answer["outputs"] = [{"output_type": "execute_result", "execution_count": "<b>", "metadata": {},
                          "data": {"text/plain": "4"}}]
    nb["cells"].append({"cell_type": "code", "id": "bad id\"><b>", "metadata": {}, "execution_count": None,
                        "outputs": [], "source": "my_code = 1"})
    (copy / NB).write_text(json.dumps(nb), encoding="utf-8")
    (report,) = annotate_autograded(dora_result(), assignment, copy, RELEASED)
    assert report.notebook == copy / NB
    written = nbformat.read(copy / NB, as_version=4)
    nbformat.validate(written)
    kept = next(c for c in written.cells if c.id == answer["id"])
    assert kept.execution_count is None and kept.outputs[0].execution_count is None
    assert written.cells[-1].source == "my_code = 1" and written.cells[-1].id != "bad id\"><b>"
    assert set(grade_outputs(copy / NB)) == {p.grade_id for p in assignment.problems}
    html = formgrader_html(copy / NB)
    assert _runs_nothing(html) and "onerror" not in html


def test_a_link_target_the_pattern_misses_makes_the_cell_a_code_block(copy, assignment, monkeypatch):
    """When the pattern for link targets misses one that nbconvert's renderer still makes a link of,
    is the student's Markdown cell written as a fenced code block, so that no link is made at all?"""
    from autograder.reporting import annotate

    monkeypatch.setattr(annotate, "_LINK_TARGET", re.compile(r"(?!)(x)(x)"))       # matches nothing
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("see [here](javascript:alert(1)) and ``code``"))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    cell = nbformat.read(copy / NB, as_version=4).cells[-1]
    assert cell.source == "```text\nsee [here](javascript:alert(1)) and ``code``\n```\n"
    assert not re.search(r'href="javascript', formgrader_html(copy / NB))


def test_a_markdown_image_of_a_missing_attachment_leaves_the_copy_one_formgrader_can_show(copy, assignment):
    """A student's Markdown cell showing an image of an attachment the cell does not have (nbconvert's
    renderer fails on it, and formgrader with it): is that cell written as a fenced code block, while an
    image of an attachment the cell has stays an image, so that formgrader renders the copy?"""
    nb = nbformat.read(copy / NB, as_version=4)
    shown = nbformat.v4.new_markdown_cell("my plot: ![plot](attachment:plot.png)")
    shown["attachments"] = {"plot.png": {"image/png": "iVBORw0KGgo="}}
    nb.cells += [shown, nbformat.v4.new_markdown_cell("lost: ![gone](attachment:gone.png)")]
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    cells = nbformat.read(copy / NB, as_version=4).cells
    assert cells[-2].source == "my plot: ![plot](attachment:plot.png)"
    assert cells[-1].source == "```text\nlost: ![gone](attachment:gone.png)\n```\n"
    html = formgrader_html(copy / NB)
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in html and "lost: ![gone](attachment:gone.png)" in html


def test_an_invalid_markdown_cell_is_made_again_from_its_text(copy, assignment):
    """A student's Markdown cell with a field the format does not allow and an image of its attachment:
    is it made again from its text (the image, whose attachment goes with the field, written as code), so
    that the copy is valid and formgrader shows it?"""
    nb = json.loads((copy / NB).read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "markdown", "id": "mine", "metadata": {}, "execution_count": "<b>",
                        "attachments": {"p.png": {"image/png": "iVBORw0KGgo="}},
                        "source": "see ![p](attachment:p.png) [x](javascript:alert(1))"})
    (copy / NB).write_text(json.dumps(nb), encoding="utf-8")
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    written = nbformat.read(copy / NB, as_version=4)
    nbformat.validate(written)
    assert written.cells[-1].id == "mine" and written.cells[-1].source == (
        "```text\nsee ![p](attachment:p.png) [x](#link-target-removed)\n```\n")
    html = formgrader_html(copy / NB)
    assert _runs_nothing(html) and "see ![p](attachment:p.png)" in html


IMG = "<img src=x onerror=\"document.title='pwned'\">"


@pytest.mark.parametrize("written", [
    f"``{IMG}`",                                     # backticks that close no code span
    f"a \\`{IMG}\\` b",                              # escaped backticks
    f"`a\n\n{IMG}\n\nb`",                             # a "code span" across a blank line
    f"```\nx\n````\n{IMG}\n\n```\n",                   # a longer fence closes the block
    f"~~~\nx\n~~~~\n{IMG}\n\n~~~\n",
    f"    ```\n{IMG}\n    ```",                       # indented code, then an HTML block
])
def test_markup_that_looks_like_code_runs_nothing_in_formgrader(copy, assignment, written):
    """A student's Markdown cell whose raw HTML only seems to be code (backticks and fences as the
    renderer does not read them): does formgrader's page run none of it and show it as text?"""
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(written))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    html = formgrader_html(copy / NB)
    assert not re.search(r"<img[^<>]*\sonerror\s*=|<script>document", html, re.I)     # no handler, no script
    assert "&lt;img src=x onerror=" in html                                          # the text, as written


@pytest.mark.parametrize("written", [
    "[x](/files/javascript:void(document.title='PWN'))",      # formgrader takes `/files/` off a target
    '<a href="files/javascript:void(document.title=1)">x</a>',
    'notes <a class="modal-backdrop fade" href="https://example.org">x</a>',   # a page class over the page
])
def test_markup_that_formgrader_turns_unsafe_runs_nothing_there(copy, assignment, written):
    """A student's link that formgrader's template makes `javascript:` (taking `/files/` off it), or that
    takes one of the page's own classes: does formgrader's page have no such link or class?"""
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(written))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    html = formgrader_html(copy / NB)
    assert not re.search(r"""<a\s[^<>]*href=["']?\s*javascript:""", html, re.I)         # no such element
    assert not re.search(r"""<[a-z]+\s[^<>]*class=["']?modal-backdrop""", html, re.I)


def test_a_students_heading_named_like_a_grade_cell_leaves_formgrader_its_score_box(copy, assignment):
    """A student's Markdown heading whose text is a grade id (nbconvert gives it that id): is the page's
    first element with that id still the grade's own (formgrader finds the score box by it)?"""
    grade_id = assignment.problems[0].grade_id
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(f"### {grade_id}\n\nmy notes on it"))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    html = formgrader_html(copy / NB)
    assert re.findall(rf'<[a-z0-9]+ [^<>]*id="{grade_id}"', html)[0].startswith("<input"), html[:200]
    assert f"{grade_id}" in html and "my notes on it" in html


@pytest.mark.parametrize(("written", "shown"), [
    ("the pairs $j<i$ only", "$j&lt;i$"),                              # maths, as MathJax reads it
    ("# Pairs\n\n| pair | kept |\n|:--|--:|\n| $j<i$ | yes |\n\n- [x] done\n\n```python\nx = 1 < 2\n```",
     '<td style="text-align:left">$j&lt;i$</td>'),            # with headings, tables, tasks and code
    ("code:\n\n    if a<b:\n        pass\n", "<pre><code>if a&lt;b:"),     # indented code
    ("see <https://arxiv.org/abs/1706.03762>", '<a href="https://arxiv.org/abs/1706.03762">'),   # an autolink
])
def test_a_students_markdown_without_markup_renders_as_written(copy, assignment, written, shown):
    """Maths with `<`, indented code and an autolink (and headings, tables, task lists and highlighted
    code): is the student's Markdown cell kept as written, and shown by formgrader as Markdown renders it?"""
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(written))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    assert nbformat.read(copy / NB, as_version=4).cells[-1].source == written
    html = formgrader_html(copy / NB)
    assert shown in html and "&amp;lt;" not in html and "%3E" not in html


def test_a_cell_whose_code_block_would_still_render_markup_is_written_as_escaped_text(copy, assignment, monkeypatch):
    """Should even the fenced code block of a student's Markdown cell render markup (here: the check is
    made to find every rendering unsafe), is the cell written as escaped characters, shown as text?"""
    from autograder.reporting import annotate

    monkeypatch.setattr(annotate, "_renders_safely", lambda *args: False)
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(f"see {IMG}\n\n```\ncode\n```"))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    source = nbformat.read(copy / NB, as_version=4).cells[-1].source
    assert "<" not in source and "`" not in source and source.startswith("see &#60;img src&#61;x")
    html = formgrader_html(copy / NB)
    assert not re.search(r"<img[^<>]*\sonerror\s*=", html) and "see &lt;img src=x onerror=" in html
    assert "```\ncode\n```" in html


@pytest.mark.parametrize(("written", "shown"), [
    ('my plot:\n\n<img src="plot.png" width="300" height="200" alt="loss" title="the loss">',
     'img[src="plot.png"][width="300"][height="200"][alt="loss"][title="the loss"]'),
    ("<img width=300 src=figures/plot.png>", 'img[src="figures/plot.png"][width="300"]'),      # values unquoted
    ('<img src="plot.png" width=300/>', 'img[src="plot.png"][width="300/"]'),     # browsers read the width, 300
    ('<img src="plot.png" width="100%">', 'img[src="plot.png"][width="100%"]'),
    ("my answer <!-- TODO: check the <b>sign</b> --> is 3",                             # a comment, not shown
     'p:-soup-contains("my answer  is 3"):not(:-soup-contains("TODO"))'),
    ("<details><summary>My derivation</summary>\n\n$x^2$ *grows*\n\n</details>",
     'details > summary:-soup-contains("My derivation") + p > em'),
    ('<a name="derivation"></a>\n\n## Derivation\n\nsee <a id=proof>the proof</a>', 'a[name="derivation"]'),
    ("H<sub>2</sub>O, x<sup>2</sup><BR>next line", "p:has(> sub + sup + br)"),        # a tag in capitals
    ('<center><font color="red">centred</font> and <font color=#00aa00 size=4>green</font></center>',
     'center > font[color="red"] + font[color="#00aa00"][size="4"]'),
])
def test_a_students_harmless_html_renders_as_written(copy, assignment, written, shown):
    """HTML students write in Markdown that runs nothing (a sized image, its values unquoted, a comment,
    a collapsible section, an anchor, sub- and superscripts, a line break, centred or coloured text): is
    the student's cell kept as written, and shown by formgrader as HTML (`shown`: a CSS selector)?"""
    from bs4 import BeautifulSoup

    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(written))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    assert nbformat.read(copy / NB, as_version=4).cells[-1].source == written
    page = BeautifulSoup(formgrader_html(copy / NB), features="html.parser")
    assert page.select(f".text_cell_render {shown}")


SHOWN_AS_TEXT = [
    "<img src=x.png width=300 onerror=\"document.title='pwned'\">",
    "<details open ontoggle=\"document.title='pwned'\"><summary>x</summary></details>",
    "<a name=x href=javascript:void(document.title='pwned')>x</a>",
    "<img src=x.png\xa0onerror=document.title='pwned'>",                 # a blank browsers do not end a name at
    "<img width==300 src=x.png>",                                       # an `=` browsers read as the value's
    "<!--><script>document.title='pwned'</script>-->",                   # browsers: an empty comment, then a script
    "<!---><script>document.title='pwned'</script>-->",
    "a <!-- b --!><script>document.title='pwned'</script> -->",          # browsers end a comment at `--!>`
    "<!-- a <!-- b --><script>document.title='pwned'</script>",
    "notes <!-- never closed",                                           # would hide the rest of the page
    "notes\n\n<!-- never closed\n\n<b>x</b>",
    '<font color="white">the rest of the page in white',                 # left open: reopened around the page
    "a <s>struck\n\nthrough",
    "<b/>the rest of the page in bold",                                  # browsers leave `<b/>` open
    '<details><summary>closed</summary>the page below, folded away',
    '<img name="getElementById" src=x.png>',                            # named images are the document's own
    '<font size=4 onmouseover="document.title=\'pwned\'">x</font>',
    '<a name="test_layer_norm"></a><a id=test_layer_norm-comment></a>',  # formgrader's boxes' ids
]


@pytest.mark.parametrize("written", SHOWN_AS_TEXT)
def test_html_that_could_run_or_reach_past_its_cell_is_shown_as_text(copy, assignment, written):
    """A student's HTML with an event handler, a `javascript:` target, a comment that a browser ends elsewhere
    than a parser might (or never), an element left open (which a browser carries on past the cell, over the
    score boxes), an image with a name (which would replace a function of the page's `document`) or a grade's
    id: is it shown as text in formgrader, with one element for each score and comment box's id?"""
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(written))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    page = formgrader_html(copy / NB)
    assert escape(written, quote=False) in page.replace("&#39;", "'").replace("&quot;", '"')
    assert not re.search(r"""<script>document|<[a-z]+\s[^<>]*\s(on[a-z]+|name)=["']?(document|getElementById|"""
                         r"""test_)|<a\s[^<>]*href=["']?javascript:""", page, re.I)
    assert all(page.count(f'id="{p.grade_id}"') == 1 for p in assignment.problems)
    assert not re.search(r"<[a-z]+\s[^<>]*id=[\"']?test_layer_norm-comment", page)


@pytest.mark.parametrize("where", ["made Markdown", "a Markdown copy below"])
def test_a_grade_cell_made_markdown_shows_one_score_box_in_formgrader(copy, assignment, where):
    """A student made the grade cell `test_layer_norm` a Markdown cell, or added a Markdown copy of it
    below it (Jupyter keeps its nbgrader metadata either way): is there one score box for that grade in
    formgrader, on a code cell holding our report: the last cell with the grade's id shown as graded (code
    again, as released, as nbgrader's autograde leaves it)?"""
    nb = nbformat.read(copy / NB, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "test_layer_norm")
    cell = nb.cells[at]
    made = nbformat.v4.new_markdown_cell(cell.source, metadata=json.loads(json.dumps(cell.metadata)),
                                         id=cell.id if where == "made Markdown" else "my-copy")
    if where == "made Markdown":
        nb.cells[at] = made
    else:
        nb.cells.insert(at + 1, made)
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    cells = nbformat.read(copy / NB, as_version=4).cells
    marked = [c for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_layer_norm"]
    assert [c.cell_type for c in marked] == ["code"]
    assert marked[0].outputs[-1].ename == OUTPUT_NAME
    assert len({c.id for c in cells}) == len(cells)
    notes = "".join(o.get("text", "") for o in marked[0].outputs)
    # shown as graded: the last cell holding the id (nbgrader's DeduplicateIds keeps the last) made code
    # again with its released source, as nbgrader's OverwriteCells leaves it; no Markdown keeps the marks
    assert marked[0].id == made.id and marked[0].source == cell.source and "missing" not in notes
    assert not any(c.cell_type == "markdown" and "nbgrader" in c.metadata for c in cells)
    page = formgrader_html(copy / NB)
    assert page.count('id="test_layer_norm"') == 1


HIJACK = ('<div class="nbgrader_cell"><span id="test_layer_norm"></span>'
          '<div class="modal-backdrop fade full-credit"></div></div>')


@pytest.mark.parametrize("format_", [None, "text/html", "TEXT/HTML", "", "text/markdown", "text/latex",
                                     "text/restructuredtext", "application/pdf", 3, ["text/html"]])
def test_a_students_raw_cell_is_shown_as_text_whatever_its_format(copy, assignment, format_):
    """A student's Raw cell holding a grade's id and a page class laid over the page (formgrader's template
    puts a Raw cell of no format or `text/html` into the page through `clean_html`, which keeps `class` and
    `id`; those of other formats it leaves out): is it written as escaped text, so that formgrader's page
    has one element with the grade's id, no student's backdrop, and shows the cell as text when it shows it?"""
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.insert(1, nbformat.v4.new_raw_cell(HIJACK, metadata={} if format_ is None else {"raw_mimetype": format_}))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    cell = nbformat.read(copy / NB, as_version=4).cells[1]
    assert cell.cell_type == "raw" and cell.source == f"<pre>{escape(HIJACK, quote=False)}</pre>"
    page = formgrader_html(copy / NB)
    assert len(re.findall(r'<[a-z]+\s[^<>]*id="test_layer_norm"', page)) == 1
    assert not re.search(r'<[a-z]+\s[^<>]*class="modal-backdrop', page)
    shown = format_ in (None, "", "text/html", "TEXT/HTML") or not isinstance(format_, str)   # not text: removed
    assert (escape(HIJACK, quote=False) in page.replace("&quot;", '"')) == shown


def test_a_raw_cell_is_kept_as_the_release_has_it_and_escaped_in_another_format():
    """A Raw cell the release holds with the same text and format is kept as it is; the same text in
    another format (which formgrader's template could then put into the page) is written as text."""
    from autograder.reporting.annotate import neutralise_student_markup

    released = nbformat.v4.new_notebook(cells=[nbformat.v4.new_raw_cell("<b>due</b>", metadata={
        "raw_mimetype": "text/latex"})])
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_raw_cell("<b>due</b>", metadata={"raw_mimetype": "text/latex"}),
        nbformat.v4.new_raw_cell("<b>due</b>", metadata={"raw_mimetype": "text/html"})])
    neutralise_student_markup(nb, released)
    assert [c.source for c in nb.cells] == ["<b>due</b>", "<pre>&lt;b&gt;due&lt;/b&gt;</pre>"]


STATUS_OVERLAY = ('<div id="statusmessage"><a href="https://example.com/login"><img src="data:image/png;base64,'
                  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGNgAAIAAAUAAXpeqz8AAAAASUVORK5CYII=" '
                  'width="99999" height="99999"></a></div>')


@pytest.mark.parametrize(("written", "page_id"), [
    (STATUS_OVERLAY, "statusmessage"),                       # formgrader's CSS fixes it over the page
    ('<span id="notebook-container">x</span>', "notebook-container"),
    ('<span id="test_layer_norm_extra_credit">x</span>', "test_layer_norm_extra_credit"),   # a grade's box
    ('<span id="MathJax_Message">x</span>', "MathJax_Message"),                             # MathJax's own
])
def test_a_student_takes_no_id_of_formgrader_s_page(copy, assignment, written, page_id):
    """A student's Markdown with an id formgrader's page, its script or CSS uses (`#statusmessage` is fixed
    over the page), a grade's extra credit box's, or one MathJax makes: is it shown as text, no element of
    the student's having that id?"""
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(written))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    page = formgrader_html(copy / NB)
    assert not re.search(rf'<[a-z0-9]+\s[^<>]*id="{page_id}"[^<>]*>\s*(<a|x<|statusmessage)', page)
    assert escape(written.split("\n")[0], quote=False) in page.replace("&quot;", '"')


@pytest.mark.parametrize(("written", "page_id", "title"), [
    ("# MathJax notes\n\nmine", "MathJax-notes", "MathJax notes"), ("### MJX\nmine", "MJX", "MJX"),
    ("## statusmessage\n\nmine", "statusmessage", "statusmessage"), ("#notebook\nmine", "notebook", "notebook"),
    ("# *notebook*\n\nmine", "notebook", "notebook"),
    ("- item\n\n  # notebook-container\n  mine", "notebook-container", "notebook-container"),
])
def test_a_students_heading_whose_text_is_a_page_id_is_shown_as_a_heading_without_it(
        copy, assignment, written, page_id, title):
    """A student's Markdown heading whose text nbconvert would make an id of formgrader's page (or one MathJax
    makes): is it shown as a heading of that text, without the id, the rest of the cell rendered as Markdown
    rather than the whole cell as a code block?"""
    from bs4 import BeautifulSoup

    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(written))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    page = BeautifulSoup(formgrader_html(copy / NB), features="html.parser")
    cell = next(c for c in page.select(".text_cell_render") if "mine" in c.get_text())
    heading = cell.find(re.compile(r"h[1-6]"))
    assert heading is not None and heading.get_text() == title
    assert not cell.select(f'[id="{page_id}"]') and not cell.select("pre") and cell.find("p", string=re.compile("mine"))


def test_a_cell_of_many_headings_renders_only_those_whose_id_could_clash(copy, assignment, monkeypatch):
    """A student's Markdown cell of 5,000 ordinary headings and one whose text is a page id: are the ordinary ones
    never rendered one by one (the renders made for the cell stay a handful, not one per heading), while the
    clashing one is still written as an HTML heading without its id and the others are kept as written?"""
    from autograder.reporting import annotate

    lines = [f"## Step {i}: the mean and variance of row {i}" for i in range(5000)]
    lines.insert(2500, "## statusmessage")
    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("\n".join(lines)))
    nbformat.write(nb, copy / NB)
    renders = []
    rendered = annotate._rendered

    def counted(markdown, attachments):
        if "Step" in markdown or "statusmessage" in markdown:
            renders.append(markdown)
        return rendered(markdown, attachments)

    monkeypatch.setattr(annotate, "_rendered", counted)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    assert 0 < len(renders) <= 6, len(renders)
    shown = nbformat.read(copy / NB, as_version=4).cells[1].source.split("\n")
    assert shown[2500:2502] == ["<h2>statusmessage</h2>", ""]
    assert shown[:2500] + shown[2502:] == lines[:2500] + lines[2501:]


def test_formgraders_page_ids_are_all_kept_from_students():
    """Is each id formgrader's submission page writes or its CSS or script finds (nbgrader's templates,
    CSS and JS as installed, nbconvert's classic template) one no student's element may have?"""
    from jupyter_core.paths import jupyter_path
    from nbgrader.server_extensions.formgrader import handlers

    from autograder.reporting.annotate import PAGE_IDS

    formgrader = Path(handlers.__file__).parent
    classic = next(p for p in map(Path, jupyter_path("nbconvert", "templates", "classic")) if p.is_dir())
    files = [*(formgrader / "templates" / "formgrade").glob("*.j2"), *(formgrader / "static" / "css").glob("*.css"),
             *(formgrader / "static" / "js").glob("formgrade*.js"), formgrader / "static" / "js" / "utils.js",
             *classic.glob("*.j2")]
    found = set()
    for path in files:
        text = path.read_text(encoding="utf-8")
        found |= set(re.findall(r'\sid="([A-Za-z][\w-]*)"', text))                   # written by a template
        found |= set(re.findall(r"""\$\(["']#([A-Za-z][\w-]*)["']\)""", text))     # found by jQuery
        found |= set(re.findall(r"""\.attr\(["']id["'],\s*["']([\w-]+)["']\)""", text))
        if path.suffix == ".css":
            found |= set(re.findall(r"#([A-Za-z][\w-]*)\s*[{,.:\s]", re.sub(r":\s*#[0-9a-fA-F]+", ":", text)))
    assert {"statusmessage", "notebook"} <= found and found <= PAGE_IDS, found - PAGE_IDS


@pytest.mark.parametrize("written", [
    "![](/logout)", "![](../../../logout)", "[out](%2e%2e/%2E%2e/logout)", "![](//evil.example/x.png)",
    '<img src="/logout">', r"![](img\..\..\logout)", "![](/files//logout)", "[out](files/../../logout)",
])
def test_a_target_that_leaves_the_notebooks_folder_is_removed(copy, assignment, written):
    """A student's link or image whose target is the TA's server (`/logout`: opening the page would log
    them out), a folder above the notebook's, or another host with no scheme: has formgrader's page no
    element of the cell with it, the page keeping plain relative names and anchors?"""
    from bs4 import BeautifulSoup

    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(f"{written} and [mine](img/plot.png), [up](#top)"))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    page = BeautifulSoup(formgrader_html(copy / NB), features="html.parser")
    targets = [e.get("src") or e.get("href") for e in page.select(".text_cell_render img, .text_cell_render a")]
    assert not [t for t in targets if t.startswith("/") or ".." in t or "\\" in t or "%2" in t.lower()], targets
    assert {"img/plot.png", "#top"} <= set(targets) or "img/plot.png" in page.text


@pytest.mark.parametrize("written", ['<img src="plot.png" width="99999" height="99999">',
                                    "<img src=plot.png width=2001>", '<img src=plot.png height="101%">'])
def test_an_image_larger_than_the_page_is_shown_as_text(copy, assignment, written):
    """A student's image sized over 2000 px or 100%, which could lie over the score boxes: is it shown as
    text, formgrader's page having no image of the cell's?"""
    from bs4 import BeautifulSoup

    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(written))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    page = BeautifulSoup(formgrader_html(copy / NB), features="html.parser")
    assert not page.select('.text_cell_render img[src="plot.png"]') and written in page.text


def test_no_class_a_student_may_take_is_one_formgraders_page_lays_over_it_or_its_script_finds(copy, assignment):
    """Is every class a student's Markdown may have (`_CLASS_NAME`) one that no rule of formgrader's CSS,
    bootstrap's or nbconvert's positions (fixed, absolute, sticky or by z-index) on an element within a
    student's cell (whatever its ancestors in the page), and one formgrader's script finds no element by?"""
    from bs4 import BeautifulSoup
    from jupyter_core.paths import jupyter_path
    from nbgrader.server_extensions.formgrader import handlers

    from autograder.reporting.annotate import _CLASS_NAME

    nb = nbformat.read(copy / NB, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("<span>mine</span>"))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    page = BeautifulSoup(formgrader_html(copy / NB), features="html.parser")
    mine = page.find("span", string="mine")
    around = {c for e in mine.parents for c in (e.get("class") or []) if e.name != "[document]"}
    static = Path(handlers.__file__).parent / "static"
    sheets = [*(static / "css").glob("*.css"), *(static / "node_modules" / "bootstrap" / "dist" / "css").glob("*.css"),
              *(p for d in jupyter_path("nbconvert", "templates") for p in Path(d).rglob("*.css"))]
    assert len(sheets) > 3 and around
    over = []
    for sheet in sheets:
        text = re.sub(r"/\*.*?\*/|@media[^{]*\{", "", sheet.read_text(encoding="utf-8", errors="replace"), flags=re.S)
        for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", text):
            if not re.search(r"position\s*:\s*(fixed|absolute|sticky)|z-index", body):
                continue
            for selector in selectors.split(","):
                *outer, last = re.split(r"[\s>+~]+", selector.strip())
                own = re.findall(r"\.([\w-]+)", last)
                if own and all(_CLASS_NAME.fullmatch(c) for c in own) and all(
                        _CLASS_NAME.fullmatch(c) or c in around for c in re.findall(r"\.([\w-]+)", " ".join(outer))):
                    over.append((sheet.name, selector.strip()))
    assert not over
    found = {c for js in (static / "js").glob("formgrade*.js")
             for c in re.findall(r"""["']\.([\w-]+)""", js.read_text(encoding="utf-8"))}
    assert "nbgrader_cell" in found and not [c for c in found if _CLASS_NAME.fullmatch(c)]


@pytest.mark.parametrize("meta", [{"tags": ["x modal-backdrop"]}, {"tags": ["x hidden"]},
                                  {"transient": {"remove_source": True}}])
def test_a_grade_cells_metadata_neither_hides_it_nor_lays_it_over_formgraders_page(copy, assignment, meta):
    """A student's cell metadata that nbconvert writes into the page (each word of a tag becomes a class of
    the cell: bootstrap's `modal-backdrop` lays it over the page, `hidden` hides it) or reads to leave the
    cell out (`transient.remove_source`): does each grade cell still show, with its score box, and no
    element take a class that is none of nbconvert's?"""
    from bs4 import BeautifulSoup

    nb = nbformat.read(copy / NB, as_version=4)
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    for cell in graded:
        cell.metadata.update(json.loads(json.dumps(meta)))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED)
    page = BeautifulSoup(formgrader_html(copy / NB), features="html.parser")
    assert not page.select(".modal-backdrop, .hidden")
    assert len(page.select("input.score")) == len(graded)
    shown = squash(page.get_text())
    assert all(squash(c.source.splitlines()[0]) in shown for c in graded)


@pytest.mark.parametrize("meta", [
    {"language_info": {"name": "python", "pygments_lexer": "ipython3 modal-backdrop"}},
    {"language_info": {"name": "python modal-backdrop"}},
])
@pytest.mark.parametrize("with_release", [True, False])
def test_the_notebooks_language_puts_no_class_of_the_students_into_formgraders_page(
        copy, assignment, meta, with_release):
    """A student's notebook metadata that nbconvert writes into the page (the language's lexer, into the class
    of each code cell's source): is each code cell's source classed only by nbconvert (`highlight hl-<word>`)?"""
    from bs4 import BeautifulSoup

    nb = nbformat.read(copy / NB, as_version=4)
    nb.metadata.pop("language_info", None)
    nb.metadata.update(json.loads(json.dumps(meta)))
    nbformat.write(nb, copy / NB)
    annotate_autograded(dora_result(), assignment, copy, RELEASED if with_release else None)
    page = BeautifulSoup(formgrader_html(copy / NB), features="html.parser")
    assert not page.select(".modal-backdrop")
    sources = page.select(".input_area > div")
    assert sources and all(len(s["class"]) == 2 and s["class"][0] == "highlight" for s in sources)
