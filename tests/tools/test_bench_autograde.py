"""The benchmark's cohort builder makes what it says, and its measuring helpers work (no timings checked)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import bench_autograde as bench  # noqa: E402

from assignments.transformer_block.mistakes import catalogue  # noqa: E402
from autograder.config import load_course  # noqa: E402
from autograder.grading.seeds import course_secret, student_seed  # noqa: E402
from autograder.layout import ROSTER_FILE, CourseLayout  # noqa: E402


def _code(data: bytes) -> str:
    nb = nbformat.reads(data.decode(), as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def test_a_full_cycle_holds_every_catalogued_mistake_correct_and_broken_files():
    """Does one cycle of the cohort hold each catalogued mistake, correct notebooks every 4th, and each broken kind?"""
    subs = bench.cohort(bench.cycle_length())
    names = [s.template.name for s in subs]
    assert {m.id for m in catalogue.mistakes()} <= set(names)
    assert {"syntax_error", "cell_raises", "missing_function", "not_a_notebook", "renamed_function",
            "process_exits", "empty_file", "numpy_patched"} <= set(names)
    assert all(s.template.kind == "correct" for s in subs[::bench.CORRECT_EVERY])
    assert len({s.student for s in subs}) == len(subs)
    assert "infinite_loop" not in names
    assert "infinite_loop" in [s.template.name for s in bench.cohort(bench.cycle_length(hang=True), hang=True)]


def test_a_small_cohort_is_mixed():
    """Does a 20-submission cohort already mix correct, mistaken and broken notebooks across functions?"""
    subs = bench.cohort(20)
    kinds = bench.composition(subs)
    assert len(subs) == 20 and kinds["correct"] == 5 and kinds.get("broken", 0) >= 1
    functions = {s.template.name.split(".")[0] for s in subs if s.template.kind == "mistake"}
    assert len(functions) >= 5


def test_broken_files_are_broken_the_way_they_say():
    """Is each broken template broken in its own way, and each mistake a notebook that differs from the correct one?"""
    correct, others = bench.templates(hang=True)
    by_name = {t.name: t for t in others}
    cells = nbformat.reads(by_name["syntax_error"].data.decode(), as_version=4).cells
    silu_cell = next(c.source for c in cells if c.cell_type == "code" and "def silu((" in c.source)
    with pytest.raises(SyntaxError):
        compile(silu_cell, "<cell>", "exec")
    assert "while True" in _code(by_name["infinite_loop"].data)
    assert 'raise RuntimeError("this cell was left broken")' in _code(by_name["cell_raises"].data)
    assert "def count_block_params(" not in _code(by_name["missing_function"].data)
    assert "def layernorm(" in _code(by_name["renamed_function"].data)
    assert "_os._exit(" in _code(by_name["process_exits"].data)
    assert by_name["empty_file"].data == b""
    with pytest.raises(ValueError):
        json.loads(by_name["not_a_notebook"].data)
    assert "np.allclose = lambda" in _code(by_name["numpy_patched"].data)
    right = _code(correct[0].data)
    for t in others:
        if t.kind == "mistake":
            assert _code(t.data) != right, t.name


def test_make_course_writes_the_cohort_in_nbgrader_layout(tmp_path):
    """Does the scratch course hold each submission's bytes in nbgrader's layout, with everyone on the roster?"""
    subs = bench.cohort(6)
    course = bench.make_course(tmp_path / "c", subs, roster_extra=("fresh01",))
    layout = CourseLayout(course)
    for s in subs:
        folder = layout.submission(s.student, bench.ASSIGNMENT)
        assert (folder / bench.NOTEBOOK).read_bytes() == s.template.data
        assert (folder / "timestamp.txt").is_file()
    roster = (course / ROSTER_FILE).read_text().splitlines()
    assert roster[0].startswith("id,") and [r.split(",")[0] for r in roster[1:]] == [s.student for s in subs] + [
        "fresh01"]
    assert (course / "course.yml").is_file() and layout.release(bench.ASSIGNMENT).is_dir()
    bench.remove_student(course, subs[0].student)
    assert not layout.submission(subs[0].student, bench.ASSIGNMENT).exists()


def test_every_scratch_course_gives_a_student_the_same_seed(tmp_path):
    """Do two scratch courses (two runs, or two branches) draw the same hidden inputs for the same student?

    Each run used to make a fresh course secret, so s0030 (layer_norm.no_eps) got new inputs every
    run and its score moved with them; per-student scores could not be compared across runs."""
    seeds = []
    for name in ("run1", "run2"):
        course = bench.make_course(tmp_path / name, bench.cohort(2))
        secret = course_secret(load_course(course).secret_file)      # as `course autograde` reads it
        seeds.append(student_seed(secret, bench.ASSIGNMENT, "s0030"))
    assert seeds[0] == seeds[1]


def test_course_command_passes_workers_only_when_asked(tmp_path):
    """Is `--workers N` added to the course command only when a worker count is given?"""
    assert "--workers" not in bench.course_cmd(tmp_path, "--force")
    assert bench.course_cmd(tmp_path, "--force", workers=2)[-2:] == ["--workers", "2"]


def test_run_timed_measures_a_small_command(tmp_path):
    """Does a timed run of a tiny Python command report its exit code, CPU, memory and the watched file?"""
    target = tmp_path / "done.txt"
    code = f"import pathlib; sum(range(10**6)); pathlib.Path({str(target)!r}).write_text('x')"
    run = bench.run_timed([sys.executable, "-c", code], cwd=tmp_path, env=bench.tool_env(), log=tmp_path / "log",
                          tool_name="python", scope="one", workers=None, n=1, rnd=1, watch=(target,))
    assert run.exit_code == 0 and run.wall_s > 0 and run.cpu_s > 0 and run.maxrss_mb > 0
    assert run.first_feedback_s is not None and run.cpu_source in ("cgroup", "wait4")


def test_cli_rejects_bad_options():
    """Does the script refuse a bad --workers list with a one-line error?"""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_autograde.py"), "--workers", "two"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "--workers" in proc.stderr


@pytest.mark.parametrize("content", [None, "not json", '{"runs": 3}'])
def test_render_of_a_file_that_is_not_a_finished_run_is_one_line(tmp_path, content):
    """Given --render a missing file, a file that is not JSON or JSON of another shape, does the script
    say so in one line naming the file (no traceback)?"""
    path = tmp_path / "bench.json"
    if content is not None:
        path.write_text(content)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_autograde.py"), "--render", str(path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"bench_autograde.py: error: --render {path}: not a finished run's --json file (")
    assert "Traceback" not in proc.stderr


def test_the_nbgrader_copy_runs_stock_nbgrader(tmp_path):
    """Does the nbgrader side's config set only the folder and gradebook, not the course's own hooks?"""
    course = bench.make_course(tmp_path / "n", bench.cohort(2), stock_nbgrader=True)
    text = (course / "nbgrader_config.py").read_text()
    assert "import" not in text and "configure(" not in text
    assert f"CourseDirectory.root = {str(course)!r}" in text


def test_a_report_renders_and_reads_back_from_its_json(tmp_path):
    """Does the report render from measured runs, name missed targets, and come back the same from --json?"""
    import argparse

    def run(tool, scope, n, wall, workers=None, rnd=1, exit_code=0):
        return bench.Run(tool=tool, scope=scope, workers=workers, n=n, round=rnd, wall_s=wall, cpu_s=wall * 0.9,
                         waited_cpu_s=wall * 0.5, cpu_source="cgroup", exit_code=exit_code, maxrss_mb=100.0,
                         tree_peak_mb=150.0, processes=(bench.ProcessFigure("main: python course", 1, 100.0, 1.0,
                                                                             wall, 90.0, 100.0),),
                         first_feedback_s=0.5 if scope == "one" and tool == "course" else None)
    subs = bench.cohort(10)
    runs = [run("nbgrader", "class", 10, 12.0), run("nbgrader", "one", 1, 3.0), run("course", "class", 10, 2.0, 1),
            run("course", "class", 10, 1.2, 2), run("course", "one", 1, 1.0), run("course", "large", 100, 9.0, 1),
            run("course", "large", 100, 300.0, 2, exit_code=-9)]
    scores = {s.student: {"score": 1.0, "state": "graded", "seconds": 0.1} for s in subs}
    b = bench.Bench(argparse.Namespace(n=10, repeat=1, hang_in_cohort=False, timeout=60), {}, tmp_path, [1, 2],
                    runs=runs, scores={"course": {"w1-r1": scores, "w2-r1": scores}}, cohort=subs,
                    command="python tools/bench_autograde.py")
    machine = {"date (UTC)": "d", "branch": "b", "commit": "c", "cpus": 2, "cpu model": "m", "python": "3",
               "numpy": "n", "nbgrader": "g", "pytest": "p"}
    text, extra = bench.render(b, machine)
    assert "| `course --workers 2` | 10 |" in text and "identical across all 2 class batches" in text
    assert "**missed**" in text and "was killed" not in text      # notes are made when runs are recorded
    path = tmp_path / "run.json"
    path.write_text(bench.to_json(b, machine, extra))
    again, _ = bench.from_json(path)
    text2 = bench.render(again, machine)[0]
    assert "was killed (signal 9)" in text2
    assert [ln for ln in text2.splitlines() if ln and "was killed" not in ln] == [ln for ln in text.splitlines() if ln]
