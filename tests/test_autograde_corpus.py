"""End to end through the `course` command: the corpus of synthetic submissions is graded in one
batch, and each case shows what it must (scores, which problems lose points, diagnosis ids,
reasons for broken files), the gradebook and feedback pages are written, nothing is modified."""
from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from reporting.test_feedback_formgrader import formgrader_html

from autograder.layout import CourseLayout
from autograder.toolpath import tool, tool_env
from conftest import PROJECT, ROOT, copy_course

pytestmark = pytest.mark.slow

ASSIGNMENT = "transformer-block"
NB = "transformer-block.ipynb"
CORPUS = CourseLayout(ROOT / "tests" / "corpus")
EXPECTED = json.loads((CORPUS.root / "expected.json").read_text())
NOT_ON_ROSTER = "stranger"
RETURNS_NONE = "returns_none"
RELEASED = PROJECT.release(ASSIGNMENT)
COPIED_GRADE_CELL = "copied_grade_cell"
COPIED_ANSWER = "copied_answer"
BROKEN_LAST_COPY = "broken_last_copy"
STUB = "raise NotImplementedError()"


def _grade_id(cell) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _add_big_cases(course: CourseLayout) -> None:
    """Cases too big to commit: megabytes of stored output (under the limit) and a notebook over it."""
    correct = nbformat.read(course.submission("correct", ASSIGNMENT) / NB, as_version=4)
    big = nbformat.from_dict(json.loads(json.dumps(correct)))
    first_code = next(c for c in big.cells if c.cell_type == "code")
    first_code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="0123456789" * 400_000)]
    course.submission("huge_outputs", ASSIGNMENT).mkdir(parents=True)
    nbformat.write(big, course.submission("huge_outputs", ASSIGNMENT) / NB)
    first_code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="0123456789" * 1_200_000)]
    course.submission("oversize", ASSIGNMENT).mkdir(parents=True)
    nbformat.write(big, course.submission("oversize", ASSIGNMENT) / NB)
    # the release's stubs with `pass` for `raise NotImplementedError()`: functions returning None; the
    # one in layer_norm first centres x in place (`x -= ...`), which its advice must still report
    stubs = nbformat.read(RELEASED / NB, as_version=4)
    for cell in stubs.cells:
        if cell.cell_type == "code" and "raise NotImplementedError()" in cell.source:
            body = "x -= x.mean(axis=-1, keepdims=True)" if "def layer_norm(" in cell.source else "pass"
            cell.source = cell.source.replace("raise NotImplementedError()", body)
    course.submission(RETURNS_NONE, ASSIGNMENT).mkdir(parents=True)
    nbformat.write(stubs, course.submission(RETURNS_NONE, ASSIGNMENT) / NB)
    # a student copied the graded cell under layer_norm: two cells with the grade id test_layer_norm
    copied = nbformat.read(course.submission("correct", ASSIGNMENT) / NB, as_version=4)
    first = next(i for i, c in enumerate(copied.cells) if _grade_id(c) == "test_layer_norm")
    duplicate = nbformat.from_dict(json.loads(json.dumps(copied.cells[first])))
    duplicate.id = "my-copy"
    copied.cells.insert(first + 1, duplicate)
    course.submission(COPIED_GRADE_CELL, ASSIGNMENT).mkdir(parents=True)
    nbformat.write(copied, course.submission(COPIED_GRADE_CELL, ASSIGNMENT) / NB)
    # a student copied their layer_norm answer cell: the earlier copy still the released stub, the last
    # (the one that ran last, so the one graded) their working answer; both with the id layer_norm_solution
    answer = nbformat.read(course.submission("correct", ASSIGNMENT) / NB, as_version=4)
    first = next(i for i, c in enumerate(answer.cells) if _grade_id(c) == "layer_norm_solution")
    stub = next(c for c in stubs.cells if _grade_id(c) == "layer_norm_solution")
    earlier = nbformat.from_dict(json.loads(json.dumps(answer.cells[first])))
    earlier.id, earlier.source = "my-first-try", stub.source.replace("x -= x.mean(axis=-1, keepdims=True)", STUB)
    answer.cells.insert(first, earlier)
    course.submission(COPIED_ANSWER, ASSIGNMENT).mkdir(parents=True)
    nbformat.write(answer, course.submission(COPIED_ANSWER, ASSIGNMENT) / NB)
    # a student copied their working layer_norm answer cell below itself and broke the copy's syntax:
    # the last copy does not run, so the earlier copy's definition is the one graded
    broken = nbformat.read(course.submission("correct", ASSIGNMENT) / NB, as_version=4)
    first = next(i for i, c in enumerate(broken.cells) if _grade_id(c) == "layer_norm_solution")
    last = nbformat.from_dict(json.loads(json.dumps(broken.cells[first])))
    last.id, last.source = "my-edit", last.source + "\n    return (x"
    broken.cells.insert(first + 1, last)
    course.submission(BROKEN_LAST_COPY, ASSIGNMENT).mkdir(parents=True)
    nbformat.write(broken, course.submission(BROKEN_LAST_COPY, ASSIGNMENT) / NB)
    for student in (NOT_ON_ROSTER, "late"):
        shutil.copytree(course.submission("correct", ASSIGNMENT), course.submission(student, ASSIGNMENT))
    # nbgrader's timestamp.txt: due 2026-11-16 23:59 UTC + 15 min grace; 1 day 12 h late -> 2 days -> 20 %
    (course.submission("late", ASSIGNMENT) / "timestamp.txt").write_text("2026-11-18 12:00:00.000000 UTC")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = CourseLayout(copy_course(tmp_path_factory.mktemp("corpus") / "course"))
    config = yaml.safe_load(course.config.read_text())
    config["defaults"]["limits"].update(call_seconds=2, cell_seconds=4, notebook_mb=10)
    course.config.write_text(yaml.safe_dump(config, sort_keys=False))
    shutil.copytree(CORPUS.submitted_dir, course.submitted_dir)
    _add_big_cases(course)
    students = sorted(p.name for p in course.submitted_dir.iterdir())
    (course.root / "roster.csv").write_text("id\n" + "\n".join(s for s in students if s != NOT_ON_ROSTER) + "\n")
    before = _digest(course.submitted_dir)
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", ASSIGNMENT,
                           "--course-dir", str(course.root)],
                          capture_output=True, text=True, env=tool_env(), timeout=1200)
    results = {s: json.loads(course.results_json(s, ASSIGNMENT).read_text()) for s in students}
    return {"course": course, "proc": proc, "results": results, "before": before, "students": students}


def _by_problem(result, status: str) -> dict[str, list[str]]:
    """Names of the tests with this status that carry points, by problem (advice, worth 0, is left out)."""
    out: dict[str, list[str]] = {}
    for t in result["tests"]:
        problem = next(tag.split(":", 1)[1] for tag in t["tags"] if tag.startswith("problem:"))
        if _status(result, t) == status and t["max_score"] > 0:
            out.setdefault(problem, []).append(t["name"])
    return out


def _status(result, test) -> str:
    """The engine's status of a test (results.json shows Gradescope's passed/failed; extra_data has ours)."""
    return next(x["status"] for x in result["extra_data"]["tests"] if x["number"] == test["number"])


def _diagnoses(result) -> set[str]:
    return {tag.split(":", 1)[1] for t in result["tests"] for tag in t["tags"] if tag.startswith("diagnosis:")}


def _notes(result) -> str:
    return result.get("output", "") + "\n" + "\n".join(result.get("extra_data", {}).get("notes", []))


def test_corpus_batch_completes_with_exit_code_zero(graded):
    """Does one batch grade every case, broken ones included, and exit 0 (students failing is not an error)?"""
    proc = graded["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for student in graded["students"]:
        assert student in proc.stdout, f"{student} missing from the summary table"


def test_corpus_correct_scores_full_marks(graded):
    """Does the correct submission score full marks with no diagnosis?"""
    r = graded["results"]["correct"]
    assert r["score"] == r["max_score"] == 100
    assert not _diagnoses(r)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_corpus_case_loses_points_only_where_it_should(graded, case):
    """Does each case lose points in its own problems only, with "not graded" exactly where a building block failed?"""
    spec = EXPECTED[case]
    r = graded["results"][case]
    assert r["extra_data"]["state"] == "graded", r.get("output")
    failed, not_graded = _by_problem(r, "failed"), _by_problem(r, "not_graded")
    assert sorted(not_graded) == sorted(spec["not_graded"]), f"{case}: not graded {not_graded}"
    if spec["zero"]:
        assert r["score"] == 0, f"{case} should score 0, got {r['score']}"
        assert not _diagnoses(r), f"{case}: nothing written, so no misconception to name"
    else:
        for problem in spec["lose"]:
            assert problem in failed, f"{case}: {problem} should lose points"
        extra = {p: names for p, names in failed.items() if p not in spec["lose"]}
        assert not extra, f"{case}: lost points outside {spec['lose']}: {extra}"
    if not spec["lose"] and not spec["zero"] and not spec["not_graded"]:
        assert r["score"] == r["max_score"], f"{case} should score full marks: {failed}"
    assert set(spec["diagnoses"]) <= _diagnoses(r), f"{case}: diagnoses {_diagnoses(r)}"
    if spec["note"]:
        assert spec["note"] in _notes(r), f"{case}: notes were {_notes(r)!r}"


def test_corpus_not_graded_checks_name_the_building_block(graded):
    """Does a check that could not be graded say which of the student's building blocks failed, in results.json?"""
    r = graded["results"]["syntax_error"]
    rows = [t for t in r["tests"] if _status(r, t) == "not_graded"]
    assert rows and all(t["status"] == "failed" and t["score"] == 0 for t in rows)
    assert all(t["output"].startswith("Not graded: this check needs your `silu`") for t in rows)


def _advice(result) -> dict[str, tuple[str, str, str]]:
    """Each 0-point check: (the engine's status, Gradescope's status, the output)."""
    return {t["name"]: (_status(result, t), t["status"], t["output"]) for t in result["tests"] if t["max_score"] == 0}


def test_corpus_advice_on_a_function_that_gives_no_result_is_not_run(graded):
    """Is each advice check (no points) of a function not written yet "not run" with a short reason, in
    results.json (never "passed" for Gradescope) and on the page (never among the passed checks): the
    release's stubs raising NotImplementedError, and the same bodies returning None, except one that
    also modified its argument in place, whose advice says so; and does a written function's advice pass?"""
    course, results = graded["course"], graded["results"]
    unanswered = _advice(results["unanswered"])
    assert len(unanswered) == 8
    for name, (status, shown, output) in unanswered.items():
        assert (status, shown) == ("not_run", "failed"), name
        function = output.split("`")[1]
        assert name.startswith(f"test_{function}_") and output == (
            f"Not run: `{function}` raised NotImplementedError, so there was nothing for this check to look at.")
    none = _advice(results[RETURNS_NONE])
    ln = none.pop("test_layer_norm_leaves_inputs_unchanged_without_warnings")
    assert ln[:2] == ("failed", "failed") and "modified its input in place (x)" in ln[2]
    assert len(none) == 7
    for name, (status, shown, output) in none.items():
        assert (status, shown) == ("not_run", "failed") and output.endswith(
            "returned None, so there was nothing for this check to look at."), (name, output)
    assert {v[:2] for v in _advice(results["correct"]).values()} == {("passed", "passed")}
    page = (course.feedback("unanswered", ASSIGNMENT) / f"{Path(NB).stem}.html").read_text()
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert text.count("Not run (no points)") == 8 and "passed check" not in text
    assert "Not run: layer_norm raised NotImplementedError, so there was nothing for this check to look at." in text


def test_corpus_functions_returning_none_are_told_no_result_and_no_misconception(graded):
    """Is a stub whose body is `pass` (it returns None) told that it gave no result, in every problem,
    with no misconception named (only the mutation the layer_norm body really makes), on the page too?"""
    course, result = graded["course"], graded["results"][RETURNS_NONE]
    assert result["score"] == 0
    assert _diagnoses(result) == {"general.mutates_input"}
    for t in result["tests"]:
        output, problem = t["output"], next(tag for tag in t["tags"] if tag.startswith("problem:"))
        if "rejects_width_not_divisible" in t["name"]:
            assert output.endswith("returned None; expected it to raise ValueError."), output
        elif _status(result, t) == "failed" and problem != "problem:layer_norm":
            assert "returned None" in output and "Recognised mistake" not in output, (t["name"], output)
    page = (course.feedback(RETURNS_NONE, ASSIGNMENT) / f"{Path(NB).stem}.html").read_text()
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "Values changed" not in text and "No value error" not in text and "// or int(...)" not in text


def test_corpus_fairness_cases_are_graded_for_what_they_are(graded):
    """Does silu = ReLU fail the large-input checks too, SiLU in tanh form score full marks, a layer_norm
    computed in float32 name only that (no stage such as eps handling), and a float64 mask fail only
    multi_head_attention's masked float32 check?"""
    results = graded["results"]
    relu = {t["name"]: t["status"] for t in results["silu_relu"]["tests"] if "silu_survives_large_inputs" in t["name"]}
    assert len(relu) == 2 and set(relu.values()) == {"failed"}, relu
    assert results["silu_tanh"]["score"] == 100
    assert {d for d in _diagnoses(results["ln_float32"]) if d.startswith("layer_norm.")} == set()
    upcast = results["mha_mask_upcast"]
    failed = [t["name"] for t in upcast["tests"] if _status(upcast, t) == "failed" and t["max_score"] > 0]
    assert failed == ["test_multi_head_attention_keeps_float32[causal_mask]"], failed


def test_corpus_a_post_ln_block_on_a_wrong_layer_norm_is_told_it_is_post_ln(graded):
    """A Post-LN block on the student's own layer_norm, which uses the sample variance: does results.json
    name Post-LN in every failed pre_ln_block check (no stage such as the residual path), and does the page
    give its hint as a recognised misconception, with no "Where it first goes wrong"?"""
    course, result = graded["course"], graded["results"]["block_post_ln_on_wrong_layer_norm"]
    block = [t for t in result["tests"] if "problem:pre_ln_block" in t["tags"] and _status(result, t) == "failed"
             and t["max_score"] > 0]
    assert block and {tuple(tag for tag in t["tags"] if tag.startswith("diagnosis:")) for t in block} == {
        ("diagnosis:pre_ln_block.post_ln",)}
    page = (course.feedback("block_post_ln_on_wrong_layer_norm", ASSIGNMENT) / f"{Path(NB).stem}.html").read_text()
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "which is the Post-LN ordering" in text and "Where it first goes wrong" not in text


def test_corpus_cheater_scores_exactly_like_the_same_code_without_the_patch(graded):
    """Does patching np.allclose / np.isclose / np.testing change nothing at all?"""
    cheat, honest = graded["results"]["cheater"], graded["results"]["ln_unbiased"]
    assert cheat["score"] == honest["score"] < cheat["max_score"]
    assert [(t["name"], t["status"]) for t in cheat["tests"]] == [(t["name"], t["status"]) for t in honest["tests"]]


def test_corpus_big_outputs_are_graded_and_oversize_gets_a_reason(graded):
    """Are megabytes of outputs ignored, and is a notebook over the size limit refused with a reason?"""
    assert graded["results"]["huge_outputs"]["score"] == 100
    over = graded["results"]["oversize"]
    assert over["score"] == 0
    assert "over the 10 MB limit" in _notes(over)


def test_corpus_student_missing_from_the_roster_is_graded_and_flagged(graded):
    """Is a student folder that is not on the roster graded and flagged?"""
    r = graded["results"][NOT_ON_ROSTER]
    assert r["score"] == 100
    assert r["extra_data"]["on_roster"] is False
    assert "not on the roster" in graded["proc"].stdout


def test_corpus_submissions_are_never_modified(graded):
    """Is every submitted file byte-for-byte unchanged after grading?"""
    assert _digest(graded["course"].submitted_dir) == graded["before"]


def test_corpus_autograded_holds_the_notebooks_for_formgrader(graded):
    """Like nbgrader's autograde, is each submitted notebook copied beside results.json, its cells and
    sources unchanged and only the grade cells' outputs replaced by the autograder's report?"""
    course = graded["course"]
    for student in ("correct", "late"):
        copied = json.loads((course.autograded(student, ASSIGNMENT) / NB).read_text(encoding="utf-8"))
        original = json.loads((course.submission(student, ASSIGNMENT) / NB).read_text(encoding="utf-8"))
        assert len(copied["cells"]) == len(original["cells"])
        for mine, theirs in zip(copied["cells"], original["cells"]):
            assert (mine["cell_type"], "".join(mine["source"])) == (theirs["cell_type"], "".join(theirs["source"]))
            if mine["cell_type"] == "code" and not mine["metadata"].get("nbgrader", {}).get("grade"):
                assert mine["outputs"] == theirs["outputs"]
    assert (course.autograded("late", ASSIGNMENT) / "timestamp.txt").is_file()


def test_corpus_seed_is_recorded_and_stable(graded):
    """Is each student's hidden-input seed in the instructor's results, different per student?"""
    seeds = {s: r["extra_data"]["seed"] for s, r in graded["results"].items()}
    assert all(isinstance(v, int) for v in seeds.values())
    assert len(set(seeds.values())) == len(seeds)


def test_corpus_feedback_pages_leak_no_hidden_tests(graded):
    """Does every student get a feedback page that shows scores but no grader code, seed or detail?"""
    grader_lines = set()
    for path in PROJECT.graders("transformer_block").glob("*.py"):
        grader_lines |= {ln.strip() for ln in path.read_text().splitlines() if len(ln.strip()) > 25
                         and not ln.strip().startswith(('"""', "#", "def test_"))}
    for student, result in graded["results"].items():
        pages = list(graded["course"].feedback(student, ASSIGNMENT).glob("*.html"))
        assert pages, f"no feedback page for {student}"
        html = pages[0].read_text()
        assert str(result["extra_data"]["seed"]) not in html
        leaked = [ln for ln in grader_lines if ln in html]
        assert not leaked, f"{student}'s feedback shows grader code: {leaked[:3]}"


def test_corpus_count_messages_keep_the_drawn_widths_hidden(graded):
    """When counts for the widths drawn for a student are wrong, do the page and the visible results
    say so without naming those widths (the chapter's own figures may be named)?"""
    import re

    result = graded["results"]["count_no_layernorm"]
    other = [t for t in result["tests"] if "other_sizes" in t["name"]]
    assert other and all(_status(result, t) == "failed" for t in other)
    page = next(graded["course"].feedback("count_no_layernorm", ASSIGNMENT).glob("*.html")).read_text()
    for text in [page] + [t.get("output", "") for t in other]:
        assert "hidden widths" in text
        named = set(re.findall(r"count_block_params\((\d+), (\d+)", text))
        assert named <= {("64", "256"), ("64", "170"), ("512", "2048"), ("12288", "49152"), ("4096", "11008")}, named


def test_corpus_nbgrader_export_lists_our_scores(graded):
    """Does `nbgrader export` (nbgrader's own command) list the scores we wrote to the gradebook?"""
    course = graded["course"]
    proc = subprocess.run([tool("nbgrader"), "export", "--to", "grades.csv"],
                          cwd=course.root, capture_output=True, text=True, env=tool_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["student_id"]: r for r in csv.DictReader((course.root / "grades.csv").open())
            if r["assignment"] == ASSIGNMENT}
    for student, result in graded["results"].items():
        assert float(rows[student]["score"]) == pytest.approx(result["score"], abs=1e-4), student
    assert float(rows["late"]["raw_score"]) == 100 and float(rows["late"]["late_submission_penalty"]) == 20


def _copied_cell_outcome(graded, student: str, grade_id: str) -> tuple[str, list]:
    """For a student who copied the cell `grade_id`: their score is the correct notebook's (100), and
    exactly one note names the copy, said once on their page. Returns that note and the cells of
    their autograded copy."""
    course, result = graded["course"], graded["results"][student]
    assert result["score"] == graded["results"]["correct"]["score"] == 100
    note = [n for n in result["extra_data"]["notes"] if grade_id in n]
    assert len(note) == 1, note
    page = next(course.feedback(student, ASSIGNMENT).glob("*.html")).read_text()
    assert " ".join(re.sub(r"<[^>]+>", " ", page).split()).count("appears 2 times") == 1
    return note[0], nbformat.read(course.autograded(student, ASSIGNMENT) / NB, as_version=4).cells


def test_corpus_a_copied_grade_cell_is_graded_once_and_said_once(graded):
    """A student copied a graded cell: is the grade the one problem score (as for the same notebook
    without the copy) in results.json, in the gradebook (nbgrader's API, what formgrader reads) and
    at the last cell alone in the autograded copy (the one nbgrader's DeduplicateIds keeps), with one
    note saying the copy is not graded?"""
    from nbgrader.api import Gradebook

    course = graded["course"]
    note, cells = _copied_cell_outcome(graded, COPIED_GRADE_CELL, "test_layer_norm")
    assert "appears 2 times" in note
    assert "Only the last holds its grade: the copy is not graded" in note
    marked = [c for c in cells if _grade_id(c) == "test_layer_norm"]
    assert len(marked) == 1 and marked[0].get("id") == "my-copy"
    assert "12 / 12 points for layer_norm" in marked[0].outputs[0].text
    earlier = cells[[c.get("id") for c in cells].index("my-copy") - 1]
    assert "nbgrader" not in earlier.metadata and "not graded" in earlier.outputs[0].text
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", "dl-attention") as gb:
        notebook = gb.find_submission_notebook(Path(NB).stem, ASSIGNMENT, COPIED_GRADE_CELL)
        names = [g.name for g in notebook.grades]
        assert names.count("test_layer_norm") == 1 and len(names) == len(set(names))
        assert gb.find_grade("test_layer_norm", Path(NB).stem, ASSIGNMENT, COPIED_GRADE_CELL).score == 12
        assert notebook.score == pytest.approx(100)


def test_corpus_a_copied_answer_cell_takes_the_last_copy_once(graded):
    """A student copied their answer cell (the earlier copy still the stub that raises, the last their
    working layer_norm): are they graded on the last definition (full marks, as without the copy),
    with one note on the page and in results.json, and does the autograded copy hold one answer cell
    with that id, the last, rendered by formgrader with one comment box?"""
    from nbgrader.api import Gradebook

    course = graded["course"]
    note, cells = _copied_cell_outcome(graded, COPIED_ANSWER, "layer_norm_solution")
    assert "the answer cell `layer_norm_solution` appears 2 times" in note
    assert "The last is taken as your answer" in note
    marked = [c for c in cells if _grade_id(c) == "layer_norm_solution"]
    assert len(marked) == 1 and STUB not in marked[0].source and "def layer_norm(" in marked[0].source
    earlier = next(c for c in cells if c.get("id") == "my-first-try")
    assert "nbgrader" not in earlier.metadata and STUB in earlier.source
    assert "not taken as the answer" in earlier.outputs[0].text
    html = formgrader_html(course.autograded(COPIED_ANSWER, ASSIGNMENT) / NB)
    assert html.count('id="layer_norm_solution-comment"') == 1
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", "dl-attention") as gb:
        assert gb.find_submission_notebook(Path(NB).stem, ASSIGNMENT, COPIED_ANSWER).score == pytest.approx(100)


def test_corpus_a_copied_answer_whose_last_copy_fails_is_graded_on_the_copy_that_ran(graded):
    """A student copied their working answer cell and broke the last copy's syntax: are they graded
    on the definition that ran (the earlier copy: full marks), told of the copy in words that hold
    when the last copy fails, and told that the last copy raised SyntaxError, naming that cell?"""
    note, cells = _copied_cell_outcome(graded, BROKEN_LAST_COPY, "layer_norm_solution")
    assert "The last is taken as your answer" in note
    assert "unless it stopped with an error before making them" in note
    notes = graded["results"][BROKEN_LAST_COPY]["extra_data"]["notes"]
    raised = [n for n in notes if "raised SyntaxError" in n]
    assert len(raised) == 1 and "`def layer_norm`" in raised[0], notes
    marked = [c for c in cells if _grade_id(c) == "layer_norm_solution"]
    assert len(marked) == 1 and marked[0].get("id") == "my-edit"


def test_corpus_late_submission_loses_the_policys_share(graded):
    """Does a submission 1.5 days late (2 started days at 10 % a day) score 80, with the reason in its notes, the
    time counted from the due date the note names (36 hours and 1 minute: "1 day 12 hours", never rounded up)?"""
    r = graded["results"]["late"]
    assert r["score"] == 80
    assert ("Submitted 1 day 12 hours after the due date, counted as 2 days: late penalty of 20% (20 points)."
            in _notes(r))
