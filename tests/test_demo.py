"""The demo class (examples/): graded end to end as `make demo` does, with the outcomes it is there to show."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from autograder.api import prepare_demo
from autograder.layout import DEMO_DIR, EXAMPLES, CourseLayout
from conftest import ROOT, copy_course

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(graded_demo):
    return graded_demo.proc, graded_demo.results


def test_demo_grades_the_whole_class(demo):
    """Are all 13 example students graded, with the class table and where the feedback pages are?"""
    proc, results = demo
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(results) == 13
    assert "13 students, 13 graded" in proc.stdout
    assert "feedback:     feedback/<student>/transformer-block/" in proc.stdout


def test_course_demo_names_its_own_folder_in_the_closing_lines(tmp_path):
    """Do `course demo`'s closing lines give the paths from where it was run (.demo/autograded/...), where
    the files are, rather than paths inside the demo's folder?"""
    project = copy_course(tmp_path / "project")
    examples = CourseLayout(ROOT / EXAMPLES)
    for sid in ("ada", "ken"):
        shutil.copytree(examples.submission(sid, "transformer-block"),
                        CourseLayout(project / EXAMPLES).submission(sid, "transformer-block"))
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "demo", "--skip-validate"], cwd=project,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    demo = CourseLayout(project / DEMO_DIR)
    results = demo.results_json("<student>", "transformer-block").relative_to(project).as_posix()
    pages = demo.feedback("<student>", "transformer-block").relative_to(project).as_posix()
    assert results.startswith(f"{DEMO_DIR}/") and pages.startswith(f"{DEMO_DIR}/")
    assert f"results.json: {results}\n" in proc.stdout and f"feedback:     {pages}/\n" in proc.stdout
    assert CourseLayout(project / DEMO_DIR).results_json("ada", "transformer-block").is_file()


def test_course_demo_refuses_an_unknown_assignment_before_touching_the_previous_demo(tmp_path):
    """Does `course demo --assignment nope` refuse the name in one line (exit 2) and leave the .demo/ folder of
    an earlier demo as it was, rather than delete it first?"""
    project = copy_course(tmp_path / "project")
    examples = CourseLayout(ROOT / EXAMPLES)
    shutil.copytree(examples.submission("ada", "transformer-block"),
                    CourseLayout(project / EXAMPLES).submission("ada", "transformer-block"))
    earlier = CourseLayout(project / DEMO_DIR).results_json("ada", "transformer-block")
    earlier.parent.mkdir(parents=True)
    earlier.write_text("{}")
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "demo", "--assignment", "nope"], cwd=project,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith("course: error: ") and "nope" in proc.stderr
    assert earlier.read_text() == "{}"


def test_demo_patching_numpy_changes_nothing(demo):
    """Does mallory (wrong layer_norm + numpy patched) score exactly what katherine (same bug) scores?"""
    _, results = demo
    assert results["mallory"]["score"] == results["katherine"]["score"] < 100


def test_demo_shows_late_broken_and_unlisted_students(demo):
    """Is alan's late penalty applied, ken's broken file explained, late_joiner flagged as not on the roster?"""
    _, results = demo
    assert results["ada"]["score"] == 100
    assert results["alan"]["score"] == 90 and results["alan"]["extra_data"]["late_penalty"] == 10
    assert results["ken"]["score"] == 0 and "not valid notebook JSON" in results["ken"]["output"]
    assert results["late_joiner"]["extra_data"]["on_roster"] is False


def test_demo_outputs_are_readable_as_nbgrader_copies_are(graded_demo):
    """Are the annotated copies in autograded/ and the pages and files in feedback/ created with the mode
    open() gives (0644 under the usual umask, as nbgrader's copies), so a TA in the course's group can
    read them, while the course secret stays its owner's alone?"""
    import os
    import stat

    from autograder.config import load_course

    umask = os.umask(0o022)
    os.umask(umask)
    layout = CourseLayout(graded_demo.folder)
    written = [p for top in (layout.autograded_dir, layout.feedback_dir) for p in top.rglob("*") if p.is_file()]
    assert {p.suffix for p in written} >= {".ipynb", ".json", ".html", ".txt"}
    assert {str(p.relative_to(graded_demo.folder)): oct(stat.S_IMODE(p.stat().st_mode)) for p in written
            if stat.S_IMODE(p.stat().st_mode) != 0o666 & ~umask} == {}
    assert stat.S_IMODE(load_course(graded_demo.folder).secret_file.stat().st_mode) == 0o600


def test_demo_scores_do_not_depend_on_the_hidden_draw(demo, tmp_path):
    """Graded again with another hidden-input seed, does every student keep the same score (fair draws)?"""
    _, results = demo
    folder = prepare_demo(ROOT, tmp_path / "again")
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block", "--seed", "1",
                           "--course-dir", str(folder)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "WARNING: --seed 1 without --student: every student is graded on this one draw" in proc.stderr
    for student, first in results.items():
        again = json.loads(CourseLayout(folder).results_json(student, "transformer-block").read_text())
        assert again["extra_data"]["seed"] == 1 != first["extra_data"]["seed"]
        assert again["score"] == first["score"], student


def test_a_cells_syntax_warning_reaches_results_json_and_the_page(tmp_path):
    """A student compares strings with `is` (`norm is "layernorm"`), which interned strings let pass
    in Jupyter and the grader's strings do not: is compiling the cell's SyntaxWarning a note, with the
    cell and the line, in results.json and on the feedback page, beside the checks it costs?"""
    from conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ada",))
    layout = CourseLayout(folder)
    path = layout.submission("ada", "transformer-block") / "transformer-block.ipynb"
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"]
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "count_block_params_solution")
    source = "".join(cell["source"])
    assert 'if norm == "layernorm"' in source
    cell["source"] = source.replace('if norm == "layernorm"', 'if norm is "layernorm"')
    path.write_text(json.dumps(nb))
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block", "--student",
                           "ada", "--course-dir", str(folder)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(layout.results_json("ada", "transformer-block").read_text())
    notes = [n for n in results["extra_data"]["notes"] if "SyntaxWarning" in n]
    assert len(notes) == 1 and "`def count_block_params`" in notes[0] and '"is" with a' in notes[0], notes
    assert notes[0].endswith('`per_norm = 2 * d_model if norm is "layernorm" else d_model`')
    assert notes[0] in results["output"] and results["score"] < 100
    page = (layout.feedback("ada", "transformer-block") / "transformer-block.html").read_text()
    assert "SyntaxWarning: &#34;is&#34; with a" in page
