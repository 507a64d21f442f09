"""results.json: Gradescope's field names, totals, tags, the crashed state, atomic writes."""
from __future__ import annotations

import json
import math

import pytest

from autograder.reporting.results_json import SCORE_NOTE, result_from_json, to_results_json, write_results_json

from .conftest import MARKUP, SECRET, SEED, check, submission

TOP_LEVEL = {"score", "max_score", "execution_time", "output", "visibility", "stdout_visibility",
             "tests", "extra_data"}
PER_TEST = {"name", "number", "score", "max_score", "status", "output", "visibility", "tags"}


def test_documents_carry_gradescopes_top_level_and_test_fields(ada, bob):
    """Does every document have Gradescope's top-level fields and every test entry its fields?"""
    for result in (ada, bob):
        doc = to_results_json(result)
        assert doc.keys() >= TOP_LEVEL
        assert doc["visibility"] == "visible" and doc["stdout_visibility"] == "hidden"
        for entry in doc["tests"]:
            assert entry.keys() >= PER_TEST
            assert entry["visibility"] == "visible"
            assert entry["status"] in ("passed", "failed")


def test_score_is_the_sum_of_test_scores_and_max_score_the_problem_points(ada, bob):
    """Is the score the sum of the test scores, and max_score the sum of course.yml points?"""
    assert to_results_json(ada)["score"] == 30.0
    doc = to_results_json(bob)
    assert doc["score"] == pytest.approx(sum(t["score"] for t in doc["tests"])) == 12.5
    assert doc["max_score"] == 30.0
    assert sum(t["max_score"] for t in doc["tests"]) == pytest.approx(30.0)


def test_extra_data_says_every_score_is_the_autograders_only(bob, cy):
    """Does every document, a crashed one included, say in extra_data that its scores are the autograder's
    and that a TA's overrides and extra credit in the gradebook are not in it, and does it still read back?"""
    for result in (bob, cy):
        doc = to_results_json(result)
        assert doc["extra_data"]["score_note"] == SCORE_NOTE
        assert result_from_json(json.loads(json.dumps(doc)))[0].score == result.score
    assert SCORE_NOTE.startswith("score, raw_score, late_penalty and the problems' and tests' scores are the "
                                 "autograder's only: a TA's overrides and extra credit in the gradebook are not")


def test_tests_are_numbered_problem_dot_position_in_course_order(bob):
    """Are tests numbered "<problem>.<test>" with problems in course.yml order?"""
    doc = to_results_json(bob)
    assert [t["number"] for t in doc["tests"]] == ["1.1", "1.2", "2.1", "3.1"]
    assert doc["tests"][0]["name"] == "test_layer_norm_matches_reference[seed0]"


def test_numbering_follows_course_order_not_test_order():
    """Does a test listed out of order still get its problem's number?"""
    result = submission("dee", [check("silu", "test_silu_a", 5.0, 5.0),
                                check("layer_norm", "test_layer_norm_a", 15.0, 15.0)])
    numbers = {t["name"]: t["number"] for t in to_results_json(result)["tests"]}
    assert numbers == {"test_layer_norm_a": "1.1", "test_silu_a": "3.1"}


def test_tags_name_the_problem_and_each_diagnosis(bob):
    """Does each test carry problem:<name> and one diagnosis:<id> per recognised mistake?"""
    tags = [t["tags"] for t in to_results_json(bob)["tests"]]
    assert tags[0] == ["problem:layer_norm", "diagnosis:layer_norm.unbiased_variance"]
    assert tags[1] == ["problem:layer_norm"]
    assert tags[2] == ["problem:split_heads"]


def test_failed_and_passed_status_come_from_the_result(bob):
    """Is each test's status the TestResult's, and its output the student-safe message?"""
    tests = to_results_json(bob)["tests"]
    assert [t["status"] for t in tests] == ["failed", "passed", "failed", "passed"]
    assert tests[2]["output"] == f"split_heads raised ValueError: {MARKUP}"


def test_advice_not_run_is_never_passed_for_gradescope_and_reads_back(tmp_path):
    """Is an advice check that was not run (its function gave no result) "failed" for Gradescope with its
    "Not run: ..." output, "not_run" in extra_data, and read back as not run?"""
    from autograder.reporting.results_json import result_from_json

    why = "Not run: `silu` raised NotImplementedError, so there was nothing for this check to look at."
    result = submission("dee", [check("silu", "test_silu_a", 0.0, 5.0, output="silu raised NotImplementedError"),
                                check("silu", "test_silu_clean", 0.0, 0.0, status="not_run", output=why)])
    doc = to_results_json(result)
    entry = doc["tests"][1]
    assert (entry["status"], entry["output"], entry["score"], entry["max_score"]) == ("failed", why, 0.0, 0.0)
    assert doc["extra_data"]["tests"][1]["status"] == "not_run"
    back, _ = result_from_json(json.loads(json.dumps(doc)))
    assert back.tests[1].status == "not_run" and not back.tests[1].passed


def test_student_text_is_declared_plain_text_so_gradescope_renders_no_html(bob):
    """Are all output and name formats "text", so markup from student code is shown, not rendered?"""
    doc = to_results_json(bob)
    assert doc["output_format"] == doc["test_output_format"] == doc["test_name_format"] == "text"
    assert all(t["output_format"] == t["name_format"] == "text" for t in doc["tests"])


def test_extra_data_holds_the_instructor_view(bob):
    """Does extra_data carry student, state, seed, roster, problem scores, diagnoses, notes, details?"""
    extra = to_results_json(bob)["extra_data"]
    assert extra["student"] == "bob" and extra["assignment"] == "transformer-block"
    assert extra["state"] == "graded" and extra["seed"] == SEED and extra["on_roster"] is False
    assert extra["problems"] == [
        {"problem": "layer_norm", "score": 7.5, "max_score": 15.0},
        {"problem": "split_heads", "score": 0.0, "max_score": 10.0},
        {"problem": "silu", "score": 5.0, "max_score": 5.0},
    ]
    assert extra["diagnoses"] == ["layer_norm.unbiased_variance"]
    assert len(extra["notes"]) == 2
    assert SECRET in extra["tests"][0]["detail"]
    assert extra["tests"][0]["name"] == "test_layer_norm.py::test_layer_norm_matches_reference[seed0]"


def test_only_extra_data_holds_detail_and_seed(bob):
    """Are the instructor detail and the seed absent from everything outside extra_data?"""
    doc = to_results_json(bob)
    doc.pop("extra_data")
    text = json.dumps(doc)
    assert SECRET not in text and str(SEED) not in text


def test_execution_notes_go_to_the_top_level_output(bob):
    """Are the notebook's execution notes in the student-visible output?"""
    output = to_results_json(bob)["output"]
    assert "NameError: name 'np2' is not defined" in output
    assert "%matplotlib inline" in output


def test_crashed_result_scores_zero_and_says_why(cy):
    """Does a crashed result score 0, explain the error in output, and say "crashed" in extra_data?"""
    doc = to_results_json(cy)
    assert doc["score"] == 0 and doc["max_score"] == 30.0
    assert "ImportError in the graders" in doc["output"]
    assert doc["tests"] == []
    assert doc["extra_data"]["state"] == "crashed"


def test_crashed_result_scores_zero_even_when_some_tests_ran():
    """Is a crash's partial score withheld from the student (but kept for the instructor)?"""
    result = submission("eve", [check("silu", "test_silu_a", 5.0, 5.0)], state="crashed", crash_reason="boom")
    doc = to_results_json(result)
    assert doc["score"] == 0 and doc["tests"] == []
    assert doc["extra_data"]["raw_score"] == 5.0 and len(doc["extra_data"]["tests"]) == 1


def test_a_crash_traceback_stays_in_the_instructor_view():
    """Does the student see only the first line of the crash error, the instructor all of it?"""
    error = 'KeyError: \'x\'\nTraceback (most recent call last):\n  File "/course/assignments/graders/test_x.py"'
    doc = to_results_json(submission("eve", state="crashed", crash_reason=error))
    assert "KeyError: 'x'" in doc["output"]
    assert "Traceback" not in doc["output"] and "graders/test_x.py" not in doc["output"]
    assert doc["extra_data"]["crash_reason"] == error


def test_unknown_visibility_is_refused(ada):
    """Is a visibility Gradescope does not know refused?"""
    with pytest.raises(ValueError, match="visibility"):
        to_results_json(ada, visibility="sometimes")


def test_written_file_is_the_document_and_no_temporary_file_remains(tmp_path, bob):
    """Does write_results_json write valid JSON equal to the document, leaving nothing else behind?"""
    path = write_results_json(bob, tmp_path / "out" / "results.json")
    assert json.loads(path.read_text(encoding="utf-8")) == to_results_json(bob)
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.json"]


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077], ids=["022", "002", "077"])
def test_a_written_file_gets_the_mode_open_would_give_it(tmp_path, bob, umask):
    """Is results.json (and every file written atomically: pages, annotated copies) created as open()
    would create it, 0666 less the umask (0644 usually, 0664 for a course group), not mkstemp's 0600
    that a TA running formgrader as another user cannot read?"""
    import os
    import stat

    before = os.umask(umask)
    try:
        path = write_results_json(bob, tmp_path / "results.json")
    finally:
        os.umask(before)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~umask


def test_a_failed_write_leaves_the_previous_file_intact(tmp_path, ada):
    """When the new document cannot be written, is the old file kept and no temporary file left?"""
    path = write_results_json(ada, tmp_path / "results.json")
    before = path.read_text(encoding="utf-8")
    broken = submission("ada", [check("silu", "test_silu_a", math.nan, 5.0, status="failed")])
    with pytest.raises(ValueError):
        write_results_json(broken, path)
    assert path.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_a_recognised_mistake_is_explained_in_the_tests_output(bob):
    """Does a test with a diagnosis carry the misconception's hint after its message (Gradescope shows only output)?"""
    from .conftest import HINT

    first = to_results_json(bob)["tests"][0]
    assert first["output"].endswith(f"Recognised mistake (Unbiased variance): {HINT}")


def test_a_probes_guess_is_worded_as_one_and_reads_back_as_a_stage():
    """Is a localised stage introduced as where the output first goes wrong (not as a recognised
    mistake) in the student's output, kept apart in extra_data, and read back as a stage?"""
    import json as json_module

    from autograder.reporting.results_json import result_from_json

    stage, known = "layer_norm.statistics_across_tokens", "layer_norm.unbiased_variance"
    result = submission("fay", [
        check("layer_norm", "test_a", 0.0, 6.0, output="off", diagnoses=(stage,), hints=("Per token.",),
              stages=(stage,)),
        check("layer_norm", "test_b", 0.0, 6.0, output="off", diagnoses=(known,), hints=("Divide by d.",)),
    ])
    doc = to_results_json(result)
    first, second = doc["tests"]
    assert first["output"].endswith("Where it first goes wrong (Statistics across tokens): Per token.")
    assert "Recognised" not in first["output"]
    assert second["output"].endswith("Recognised mistake (Unbiased variance): Divide by d.")
    assert doc["extra_data"]["tests"][0]["stages"] == [stage] and "stages" not in doc["extra_data"]["tests"][1]
    back, _ = result_from_json(json_module.loads(json_module.dumps(doc)))
    assert [t.stages for t in back.tests] == [(stage,), ()]


def test_results_json_holds_when_the_submission_was_graded(bob):
    """Does extra_data hold the result's graded-at time (ISO, UTC) and read it back, and a result that has none
    (a results.json written before it was kept) read back with none?"""
    import dataclasses
    import json as json_module

    from autograder.reporting.results_json import result_from_json

    doc = to_results_json(dataclasses.replace(bob, graded_at="2026-12-06T11:20:03+00:00"))
    assert doc["extra_data"]["graded_at"] == "2026-12-06T11:20:03+00:00"
    back, _ = result_from_json(json_module.loads(json_module.dumps(doc)))
    assert back.graded_at == "2026-12-06T11:20:03+00:00"
    older = to_results_json(bob)
    assert older["extra_data"]["graded_at"] is None
    del older["extra_data"]["graded_at"]
    assert result_from_json(older)[0].graded_at == ""


def test_the_gradebooks_key_is_kept_only_until_the_grading_key_is_written():
    """results.json written before its commit holds the key of the result the gradebook holds (for a next
    run, should the commit never come): once rewritten with its own grading key, is that gone, the text the
    same as a document rendered with the grading key alone?"""
    from autograder.reporting.results_json import gradebook_key_of, render_results_json

    result = submission("ada", [check("layer_norm", "test_layer_norm_a", 15.0, 15.0)])
    pending = render_results_json(result, gradebook_key="earlier-key")
    assert gradebook_key_of(json.loads(pending)) == "earlier-key"
    assert "grading_key" not in json.loads(pending)["extra_data"]
    keyed = render_results_json(result, grading_key="new-key", gradebook_key="earlier-key")
    assert json.loads(keyed) == to_results_json(result, grading_key="new-key")
    assert keyed == render_results_json(result, grading_key="new-key")
    assert gradebook_key_of(json.loads(keyed)) == "" and json.loads(keyed)["extra_data"]["grading_key"] == "new-key"
