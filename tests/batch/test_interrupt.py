"""Ctrl-C or SIGTERM on a batch whose worker grades a notebook that never ends: the command exits
within seconds, its workers and their sandboxes gone, what was committed kept; a rerun grades the rest."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from autograder.layout import CourseLayout
from tests.conftest import course_with_students

pytestmark = pytest.mark.slow
A = "transformer-block"
NB = "transformer-block.ipynb"
STUDENTS = ("ada", "alan", "barbara")
HANGS = "ada"
OTHERS = set(STUDENTS) - {HANGS}
STOP_SECONDS = 5.0          # from the signal to the command's exit, on a loaded machine


def _env() -> dict[str, str]:
    return dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))


def _autograde(course: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "autograder.cli", "autograde", A, "--course-dir", str(course), *extra]


def _committed(layout: CourseLayout, sid: str) -> bool:
    """results.json carries its grading key: the gradebook writer committed the student's grades."""
    try:
        doc = json.loads(layout.results_json(sid, A).read_text())
    except (OSError, ValueError):
        return False
    return bool(doc["extra_data"].get("grading_key"))


def _states(stdout: str) -> dict[str, str]:
    """{student: "graded" | "unchanged"} from the command's lines for each student."""
    return {parts[1]: parts[0] for parts in map(str.split, stdout.splitlines())
            if len(parts) > 1 and parts[0] in ("graded", "unchanged")}


def _graded(log: Path) -> set[str]:
    """The students the command has said it graded so far."""
    return {sid for sid, state in _states(log.read_text()).items() if state == "graded"}


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of process `pid`, or None when there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19])


def _tree(root: int) -> dict[int, int]:
    """{pid: start time} of `root` and of every process descending from it."""
    parents: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            parents.setdefault(st[0], []).append(int(entry.name))
            starts[int(entry.name)] = st[1]
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in starts:
            found[pid] = starts[pid]
            todo.extend(parents.get(pid, ()))
    return found


def _alive(tree: dict[int, int]) -> list[int]:
    """The processes of `tree` still running (the same process: a pid taken again has another start time)."""
    return [pid for pid, start in tree.items() if (st := _stat(pid)) is not None and st[1] == start]


def _hanging(course: Path) -> tuple[Path, str]:
    """HANGS's notebook made to spin in its first answer cell, with a cell time limit the spin outlasts
    the test but for the signal; its path and its text before."""
    config = yaml.safe_load((course / "course.yml").read_text())
    config["defaults"]["limits"]["cell_seconds"] = 90
    (course / "course.yml").write_text(yaml.safe_dump(config))
    nb = CourseLayout(course).submission(HANGS, A) / NB
    original = nb.read_text()
    doc = json.loads(original)
    answer = next(c for c in doc["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution"))
    answer["source"] = "while True:\n    pass\n\n" + "".join(answer["source"])
    nb.write_text(json.dumps(doc))
    return nb, original


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_an_interrupt_stops_a_batch_grading_a_hanging_notebook_at_once_and_a_rerun_grades_everyone(
        tmp_path, signum, code):
    """With a worker stuck in `while True: pass`, does Ctrl-C (SIGINT to the command's process group)
    or SIGTERM (to the command) end it within seconds with 130 or 143, leaving none of its processes,
    the grades committed before kept; and does the rerun grade everyone?"""
    course = course_with_students(tmp_path / "course", STUDENTS)
    layout = CourseLayout(course)
    nb, original = _hanging(course)
    log, errors = tmp_path / "autograde.out", tmp_path / "autograde.err"
    with log.open("w") as out, errors.open("w") as err:
        proc = subprocess.Popen(_autograde(course, "--workers", "2"), stdout=out, stderr=err, env=_env(),
                                start_new_session=True)
    tree: dict[int, int] = {}
    try:
        end = time.monotonic() + 600
        while _graded(log) != OTHERS and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        assert proc.poll() is None, "the batch ended before the signal"
        assert _graded(log) == OTHERS, "the other students were not graded"
        tree = _tree(proc.pid)
        earlier = {sid for sid in STUDENTS if _committed(layout, sid)}
        assert len(tree) > 4, f"not the command, its writer, two workers and a sandbox: {tree}"
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)      # as the terminal sends it
        else:
            os.kill(proc.pid, signum)
        signalled = time.monotonic()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=60)
        took = time.monotonic() - signalled
        assert proc.returncode == code, errors.read_text()[-2000:]
        assert took < STOP_SECONDS, f"the command took {took:.1f} s to stop"
        deadline = time.monotonic() + 2
        while _alive(tree) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive(tree) == [], "processes of the command outlived it"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in _alive(tree):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    before = {sid for sid in STUDENTS if _committed(layout, sid)}
    assert earlier <= before and HANGS not in before

    nb.write_text(original)
    rerun = subprocess.run(_autograde(course), capture_output=True, text=True, env=_env(), timeout=600)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    states = _states(rerun.stdout)
    assert {sid for sid, state in states.items() if state == "unchanged"} == before
    assert {sid for sid, state in states.items() if state == "graded"} == set(STUDENTS) - before
    assert all(_committed(layout, sid) for sid in STUDENTS)
    con = sqlite3.connect(course / "gradebook.db")
    try:
        per_student = dict(con.execute("SELECT student.id, COUNT(*) FROM submitted_assignment JOIN student "
                                       "ON submitted_assignment.student_id = student.id GROUP BY student.id"))
    finally:
        con.close()
    assert per_student == dict.fromkeys(STUDENTS, 1)


@pytest.mark.parametrize("force", [True, False], ids=["force", "plain"])
def test_an_interrupted_batch_says_how_many_submissions_it_did_not_grade_and_whether_force_must_be_given_again(
        tmp_path, force):
    """Ctrl-C once the others are graded and ada's notebook never ends: does the command's line say that 1 of
    the 3 submissions was not graded, and, for a batch given --force (whose next plain run would keep ada's
    earlier result were her submission unchanged), that the next run must be given --force again?"""
    course = course_with_students(tmp_path / "course", STUDENTS)
    _hanging(course)
    log, errors = tmp_path / "autograde.out", tmp_path / "autograde.err"
    with log.open("w") as out, errors.open("w") as err:
        proc = subprocess.Popen(_autograde(course, "--workers", "2", *(("--force",) if force else ())), stdout=out,
                                stderr=err, env=_env(), start_new_session=True)
    try:
        end = time.monotonic() + 600
        while _graded(log) != OTHERS and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        assert proc.poll() is None and _graded(log) == OTHERS, log.read_text()[-2000:]
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, errors.read_text()[-2000:]
    [line] = [ln for ln in errors.read_text().splitlines() if ln.startswith("course: interrupted")]
    if force:
        head = "course: interrupted: 1 of 3 submissions was not graded; "
        assert line == (f"{head}this run was given --force, and the next `course autograde {A}` without it keeps "
                        f"the earlier result of a submission graded before and unchanged since: run `course "
                        f"autograde {A} --force` to grade it"), line
    else:
        assert line == (f"course: interrupted: 1 of 3 submissions was not reached (neither graded nor found "
                        f"unchanged); the next `course autograde {A}` takes it up"), line
