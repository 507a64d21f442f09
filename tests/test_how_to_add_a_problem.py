"""docs/how-to-add-a-problem.md: its grader file (step 5) is complete as the page gives it: copied
over the course's own rms_norm grader, it is collected and grades the source's solution."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from autograder.layout import CourseLayout
from autograder.toolpath import tool_env
from conftest import ROOT, copy_course

pytestmark = pytest.mark.slow

PAGE = ROOT / "docs" / "how-to-add-a-problem.md"
ASSIGNMENT = "transformer-block"


def grader_block() -> str:
    """The page's one Python block that defines a check (`def test_`)."""
    found = [b for b in re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.M | re.S)
             if "\ndef test_" in b]
    assert len(found) == 1, f"expected one grader block on the page, found {len(found)}"
    return found[0]


def test_the_pages_grader_file_runs_as_it_stands(tmp_path):
    """Does the step-5 grader, as the page gives it, import, collect its cases and pass the source's
    rms_norm (no name it uses left undefined)?"""
    folder = copy_course(tmp_path / "course")
    layout = CourseLayout(folder)
    (layout.graders("transformer_block") / "test_rms_norm.py").write_text(grader_block(), encoding="utf-8")
    submitted = layout.submission("ada", ASSIGNMENT)
    submitted.mkdir(parents=True)
    shutil.copy2(layout.source(ASSIGNMENT) / f"{ASSIGNMENT}.ipynb", submitted)
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", ASSIGNMENT, "--student", "ada",
                           "--wait"], cwd=folder, capture_output=True, text=True, env=tool_env(), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(layout.results_json("ada", ASSIGNMENT).read_text())
    rms = [t for t in results["tests"] if t["name"].startswith("test_rms_norm")]
    assert [t["name"] for t in rms] == [
        f"test_rms_norm_matches_reference[{case}]" for case in ("one_vector", "n5_d8", "one_token", "batch_axes_2x3")]
    assert {t["status"] for t in rms} == {"passed"}, rms
    assert results["score"] == results["max_score"] == 100
