"""`course doctor` and failing closed: the command reports each isolation layer, and `course
autograde` refuses in one line when the sandbox cannot be set up, unless --insecure (then the
missing layers are recorded in results.json and the summary)."""
from __future__ import annotations

import json
import shutil

from autograder import cli
from autograder.layout import CourseLayout
from autograder.sandbox import isolation
from conftest import ROOT

EXAMPLES = CourseLayout(ROOT / "examples")
ASSIGNMENT = "transformer-block"


def add_ada(course) -> CourseLayout:
    """Copy the example student `ada` into a scratch course; returns its layout."""
    layout = CourseLayout(course)
    shutil.copytree(EXAMPLES.submission("ada", ASSIGNMENT), layout.submission("ada", ASSIGNMENT))
    return layout


def test_doctor_reports_every_layer_and_passes_on_this_machine(capsys):
    """Does `course doctor` list each required layer as applied here and exit 0?"""
    code = cli.main(["doctor"])
    out = capsys.readouterr().out
    assert code == 0, out
    for layer in isolation.REQUIRED:
        assert f"ok  {layer}" in out
    assert "course autograde will grade on this machine." in out


def test_without_bubblewrap_grading_refuses_unless_insecure(monkeypatch, capsys, course_copy):
    """With bubblewrap unavailable: does doctor exit 1, autograde refuse in one line (exit 2,
    nothing written), and autograde --insecure grade while recording what was missing?"""
    monkeypatch.setattr(isolation, "bwrap_path", lambda: None)
    assert cli.main(["doctor"]) == 1
    assert "refuse" in capsys.readouterr().out

    layout = add_ada(course_copy)
    args = ["autograde", ASSIGNMENT, "--course-dir", str(course_copy)]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bubblewrap" in err[0] and "--insecure" in err[0]
    assert not layout.autograded_dir.exists()

    assert cli.main(args + ["--insecure"]) == 0
    out = capsys.readouterr().out
    assert "Sandbox: INSECURE, missing bubblewrap" in out
    result = json.loads(layout.results_json("ada", ASSIGNMENT).read_text())
    assert "bubblewrap" not in result["extra_data"]["isolation"] and result["score"] > 0


def test_results_record_the_layers_that_applied(capsys, course_copy):
    """With the full sandbox, does every results.json list the layers and the summary say so?"""
    layout = add_ada(course_copy)
    assert cli.main(["autograde", ASSIGNMENT, "--course-dir", str(course_copy)]) == 0
    out = capsys.readouterr().out
    assert f"Sandbox: all {len(isolation.REQUIRED)} required isolation layers applied" in out
    result = json.loads(layout.results_json("ada", ASSIGNMENT).read_text())
    assert set(isolation.REQUIRED) <= set(result["extra_data"]["isolation"])
