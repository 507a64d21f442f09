"""Local warm workers: a worker that dies costs only the submission it was grading, and is replaced."""
from __future__ import annotations

import pytest

from autograder.api import prepare_demo
from autograder.batch.launch import StartedWorker
from autograder.batch.pool import LocalPool, make_pool
from autograder.batch.worker import Task, Worker
from autograder.layout import CourseLayout
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return prepare_demo(ROOT, tmp_path_factory.mktemp("pool") / "course")


def test_a_worker_that_dies_costs_only_its_submission(demo):
    """When a worker process stops mid-task, is that submission a crashed result with the reason,
    the worker replaced, and every other submission graded?"""
    layout = CourseLayout(demo)
    students = ["ada", "grace", "donald", "ken"]
    tasks = [Task(s, str(layout.submission(s, "transformer-block")), seed=7) for s in students]
    breaking = Task("alan", str(layout.submission("alan", "transformer-block")), seed="x")  # type: ignore[arg-type]
    with LocalPool(demo, "transformer-block", workers=2) as pool:
        pool.start()
        results = {task.student: result for task, result in pool.run([tasks[0], breaking] + tasks[1:])}
        assert pool.replaced == 2              # it stopped again when alan was graded once more
        assert len(pool.stats) == 4
    assert results["alan"].state == "crashed"
    assert "grading stopped: its worker stopped" in results["alan"].crash_reason
    assert {s: results[s].state for s in students} == dict.fromkeys(students, "graded")
    assert results["ada"].score == 100.0


@pytest.mark.parametrize("deaths", [1, 2])
def test_a_worker_killed_from_outside_has_its_submission_graded_again_once(demo, monkeypatch, tmp_path, deaths):
    """When a worker is killed while grading a submission (as the out-of-memory killer would), is
    that submission graded once more by a new worker, with a notice, and a crashed result only
    when its worker is killed a second time?"""
    from autograder.batch import pool as module

    monkeypatch.setattr(module, "WORKER_MODULE", "tests.batch.dying_worker")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))     # workers start in the course folder
    monkeypatch.setenv("DYING_WORKER_STUDENTS", "grace")
    monkeypatch.setenv("DYING_WORKER_MARKS", str(tmp_path))
    monkeypatch.setenv("DYING_WORKER_TIMES", str(deaths))
    layout = CourseLayout(demo)
    students = ["ada", "grace", "donald", "ken"]
    tasks = [Task(s, str(layout.submission(s, "transformer-block")), seed=7) for s in students]
    notices: list[str] = []
    with LocalPool(demo, "transformer-block", workers=2, notice=notices.append) as pool:
        pool.start()
        results = {task.student: result for task, result in pool.run(tasks)}
        assert pool.replaced == deaths
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"grace.{i}" for i in range(deaths)]
    assert len(notices) == 1 and notices[0].startswith("grace: grading stopped: its worker stopped")
    assert notices[0].endswith("grading grace again with a new worker")
    others = [s for s in students if s != "grace"]
    assert {s: results[s].state for s in others} == dict.fromkeys(others, "graded")
    if deaths == 1:
        assert results["grace"].state == "graded"
        with Worker(demo, "transformer-block") as alone:
            assert results["grace"].score == alone.grade(tasks[1]).score
    else:
        assert results["grace"].state == "crashed"
        assert "grading stopped: its worker stopped" in results["grace"].crash_reason


def test_a_worker_gets_its_next_submission_before_its_result_is_handed_on(demo):
    """While the caller writes a result out, is the worker that graded it already grading the
    next submission (no worker waits for the caller), and is every submission graded once?"""
    layout = CourseLayout(demo)
    students = ["ada", "grace", "donald", "ken", "alan"]
    tasks = [Task(s, str(layout.submission(s, "transformer-block")), seed=7) for s in students]
    with LocalPool(demo, "transformer-block", workers=2) as pool:
        pool.start()
        seen, graded = [], []
        for task, result in pool.run(tasks):
            seen.append((pool.busy, pool._ids))       # workers grading, grade requests sent so far
            graded.append(task.student)
            assert result.state == "graded"
    assert sorted(graded) == sorted(students)
    # When a result is handed on, a worker is idle only if every submission has been sent out.
    # (Two results read in one round can leave one worker idle at the third: nothing was left for it.)
    assert all(busy == 2 or sent == len(students) for busy, sent in seen), seen


def test_a_submission_queued_for_a_worker_that_dies_is_graded_by_another(demo):
    """When a worker dies on its first submission while its next one waits in its socket, is only
    the first a crashed result, and the waiting one graded elsewhere?"""
    layout = CourseLayout(demo)
    students = ["ada", "grace", "donald", "ken", "ada2"]
    tasks = [Task(s, str(layout.submission(s.rstrip("2"), "transformer-block")), seed=7) for s in students]
    breaking = Task("alan", str(layout.submission("alan", "transformer-block")), seed="x")  # type: ignore[arg-type]
    with LocalPool(demo, "transformer-block", workers=2) as pool:
        pool.start()
        results = {task.student: result for task, result in pool.run([breaking] + tasks)}
        assert pool.replaced == 2              # alan is graded once more, and its worker stops again
    assert results["alan"].state == "crashed"
    assert {s: results[s].state for s in students} == dict.fromkeys(students, "graded")


def test_a_worker_recycled_with_a_queued_submission_hands_it_to_another(demo, monkeypatch):
    """When a worker asks to be replaced while its next submission already waits in its socket
    (and it has begun grading it), is that submission graded once by another worker, every result
    a graded one, and the worker replaced?"""
    from autograder.batch import pool as module

    monkeypatch.setattr(module, "WORKER_MODULE", "tests.batch.recycling_worker")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))     # workers start in the course folder
    layout = CourseLayout(demo)
    students = [f"{s}{i}" for i in range(2) for s in ("ada", "grace", "donald", "ken")]
    tasks = [Task(s, str(layout.submission(s[:-1], "transformer-block")), seed=7) for s in students]
    with LocalPool(demo, "transformer-block", workers=2) as pool:
        retired: list[tuple[bool, bool]] = []
        retire = pool._retire
        monkeypatch.setattr(pool, "_retire", lambda proc, *, kill, replace: (
            retired.append((kill, replace)), retire(proc, kill=kill, replace=replace))[-1])
        pool.start()
        graded = [(task.student, result.state) for task, result in pool.run(tasks)]
        assert sum(s.graded for s in pool.stats) == len(students)
    assert sorted(graded) == sorted((s, "graded") for s in students)
    assert (True, True) in retired          # killed while grading its queued one, and replaced
    assert pool.replaced == len(retired)


def test_the_pool_follows_the_number_of_workers_and_submissions(demo, monkeypatch):
    """Is one submission (or one worker on one core) graded in this process, and more with worker
    processes, a lone worker for several submissions included?"""
    import autograder.batch.pool as pool_module

    assert type(make_pool(demo, "transformer-block", workers=1, submissions=1)).__name__ == "InProcessPool"
    assert type(make_pool(demo, "transformer-block", workers=4, submissions=1)).__name__ == "InProcessPool"
    monkeypatch.setattr(pool_module, "available_cores", lambda: 2)
    lone = make_pool(demo, "transformer-block", workers=1, submissions=10)
    assert isinstance(lone, LocalPool) and lone.size == 1
    lone.close()
    monkeypatch.setattr(pool_module, "available_cores", lambda: 1)
    assert type(make_pool(demo, "transformer-block", workers=1, submissions=10)).__name__ == "InProcessPool"
    pool = make_pool(demo, "transformer-block", workers=3, submissions=10)
    assert isinstance(pool, LocalPool) and pool.size == 3
    pool.close()


def test_a_worker_whose_memory_grows_asks_to_be_recycled(demo, monkeypatch):
    """Does a warm worker ask to be replaced once its memory has grown past the allowance over its
    warmed-up baseline, and not before?"""
    from autograder.batch import worker as module

    readings = iter([100.0, 100.0 + module.GROWTH_MB, 100.0 + module.GROWTH_MB + 1])
    monkeypatch.setattr(module, "WARMUP", 1)
    monkeypatch.setattr(module, "CHECK_EVERY", 1)
    monkeypatch.setattr(module, "rss_mb", lambda: next(readings))
    task = Task("ada", str(CourseLayout(demo).submission("ada", "transformer-block")), seed=7)
    with module.Worker(demo, "transformer-block") as warm:
        seen = []
        for _ in range(3):
            assert warm.grade(task).score == 100.0
            seen.append(warm.recycle)
    assert seen == [False, False, True]
    assert warm.baseline_mb == 100.0


def test_a_worker_reads_the_release_once_for_its_submissions(demo, monkeypatch):
    """Does a warm worker read what the release holds at its first submission only, and grade
    every later one with it as a submission graded on its own is?"""
    import dataclasses

    from autograder.batch import worker as module
    from autograder.grading import engine

    reads = []
    read_release = engine.released_cells
    monkeypatch.setattr(engine, "released_cells", lambda *args: reads.append(args) or read_release(*args))
    task = Task("ada", str(CourseLayout(demo).submission("ada", "transformer-block")), seed=7)
    with module.Worker(demo, "transformer-block") as warm:
        assert reads == []
        first, second = warm.grade(task), warm.grade(task)
    assert len(reads) == 1
    assert first.state == second.state == "graded" and first.score == second.score == 100.0
    assert [dataclasses.replace(t, duration=0.0) for t in first.tests] == \
        [dataclasses.replace(t, duration=0.0) for t in second.tests]


def _thread_affinities(pid: int) -> set[frozenset[int]]:
    """The CPU sets of a process's threads; a thread that ends between the listing and the
    reading (a worker's short-lived helper threads do) is left out rather than failing the test."""
    import os

    seen = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            seen.add(frozenset(os.sched_getaffinity(int(tid))))
        except ProcessLookupError:
            continue
    return seen


def test_a_pools_warm_workers_are_held_on_their_cpus_and_the_pool_is_not(demo):
    """Once ready, is every thread of each worker process held on the CPU its pool gave it (with
    its sandbox), while the pool's own process keeps every CPU it had?"""
    import os

    allowed = os.sched_getaffinity(0)
    with LocalPool(demo, "transformer-block", workers=2) as pool:
        pool.start()
        for proc in pool._procs:
            cpu = pool.cpu_of(proc.slot)
            threads = _thread_affinities(proc.popen.pid)
            assert threads == ({frozenset({cpu})} if cpu is not None else {frozenset(allowed)})
        assert os.sched_getaffinity(0) == allowed


def test_the_workers_of_a_pool_get_distinct_cpus_in_turn(demo, monkeypatch):
    """Does each worker of a pool get its own CPU for its sandbox (in turn when there are more
    workers than CPUs, the same for a worker's replacement), and none when `sandbox_cpus` is off?"""
    import dataclasses
    import os

    from autograder.batch import pool as module

    allowed = sorted(os.sched_getaffinity(0))
    pool = LocalPool(demo, "transformer-block", workers=3)
    try:
        cpus = [pool.cpu_of(slot) for slot in range(2 * len(allowed))]
    finally:
        pool.close()
    if len(allowed) > 1:
        assert cpus == allowed + allowed
    else:
        assert cpus == [None, None]
    course = module.load_course(demo)
    monkeypatch.setattr(module, "load_course", lambda _: dataclasses.replace(course, sandbox_cpus="off"))
    pool = LocalPool(demo, "transformer-block", workers=2)
    try:
        assert [pool.cpu_of(0), pool.cpu_of(1)] == [None, None]
    finally:
        pool.close()


def _graded_here(demo, task):
    from autograder.batch.pool import InProcessPool

    with InProcessPool(demo, "transformer-block") as here_pool:
        here_pool.start()
        [(_, here)] = list(here_pool.run([task]))
    return here


def test_a_worker_started_early_grades_as_this_process_would(demo):
    """Is a worker process started before the pool (`batch.launch.launch`, a new interpreter)
    adopted as a single submission's worker, with the same result as grading in this process, and
    its log folder gone afterwards?"""
    from autograder.batch import launch

    task = Task("ada", str(CourseLayout(demo).submission("ada", "transformer-block")), seed=7)
    early = launch.launch(str(demo), "transformer-block", insecure=False)
    pool = make_pool(demo, "transformer-block", submissions=1, early=[early])
    try:
        assert isinstance(pool, LocalPool) and pool.size == 1
        pool.start()
        [(_, there)] = list(pool.run([task]))
        assert pool.stats[0].pid == early.popen.pid
    finally:
        pool.close()
    assert early.popen.poll() is not None and not early.log.parent.exists()
    here = _graded_here(demo, task)
    assert there.state == here.state == "graded"
    assert [(t.name, t.score, t.status) for t in there.tests] == [(t.name, t.score, t.status) for t in here.tests]
    assert (there.score, there.max_score, there.seed) == (here.score, here.max_score, here.seed)


def _forked_early(demo, students):
    """What `tests.batch.early_fork_run` saw: `students` graded (seed 7) by workers forked early."""
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "tests.batch.early_fork_run", str(demo), "transformer-block", "7",
                          *students], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _same_as_here(demo, student, there):
    task = Task(student, str(CourseLayout(demo).submission(student, "transformer-block")), seed=7)
    here = _graded_here(demo, task)
    assert there["state"] == here.state == "graded"
    assert there["tests"] == [[t.name, t.score, t.status] for t in here.tests]
    assert there["total"] == [here.score, here.max_score, here.seed]


def test_a_worker_forked_early_grades_as_this_process_would(demo):
    """Is a worker forked from a fresh single-threaded process (`batch.launch.fork_worker`, as
    `course autograde --student` starts one) adopted by that process's pool, with the same result as
    grading in this process, and stopped with its log folder gone afterwards?"""
    there = _forked_early(demo, ["ada"])
    assert there["adopted"] and there["stopped"] and not there["log_folder_left"]
    _same_as_here(demo, "ada", there["results"]["ada"])


def test_a_batch_s_workers_forked_early_are_its_pool_s_workers(demo):
    """Are a batch's workers forked early (one per slot, as `course autograde` forks them before its
    imports) adopted by its pool in order, each grading as this process would, and all stopped with
    their shared log folder gone afterwards?"""
    there = _forked_early(demo, ["ada", "grace"])
    assert there["adopted"] and there["stopped"] and not there["log_folder_left"]
    for student in ("ada", "grace"):
        _same_as_here(demo, student, there["results"][student])


def test_workers_started_early_beyond_the_pool_s_size_are_stopped(demo):
    """When more workers were started early than the pool needs (fewer submissions), are the extra
    ones stopped at once, with their log folders, and the others adopted?"""
    from autograder.batch.launch import launch

    early = [launch(str(demo), "transformer-block", insecure=False) for _ in range(2)]
    pool = make_pool(demo, "transformer-block", workers=2, submissions=1, early=early)
    try:
        assert isinstance(pool, LocalPool) and pool.size == 1
        assert early[1].popen.poll() is not None and not early[1].log.parent.exists()
        assert early[0].popen.poll() is None
        pool.start()
        assert [s.pid for s in pool.stats] == [early[0].popen.pid]
    finally:
        pool.close()
    assert early[0].popen.poll() is not None and not early[0].log.parent.exists()


def test_a_worker_started_early_but_not_needed_is_stopped(demo):
    """When the run stops before grading (here: no such student), does the early worker leave?"""
    from autograder.api import autograde
    from autograder.batch.launch import launch
    from autograder.errors import CourseError

    early = launch(str(demo), "transformer-block", insecure=False)
    with pytest.raises(CourseError, match="no such submission folder"):
        autograde(demo, "transformer-block", student="nobody", early=[early])
    assert early.popen.poll() is not None and not early.log.parent.exists()


def test_a_server_that_stops_mid_submission_costs_nothing(demo):
    """When a `course serve` server's worker goes away while grading (Ctrl-C on the server), is the
    submission graded after all by a worker of the pool's own, with a notice, rather than crashed?"""
    import socket
    import threading

    from autograder.batch.launch import log_folder
    from autograder.batch.serve import Served
    from autograder.batch.wire import Connection
    from autograder.batch.worker import rss_mb

    ours, theirs = socket.socketpair()
    server = Connection(theirs)
    asked: list[dict] = []

    def stop_mid_submission() -> None:       # the server: takes the task, then stops without a result
        asked.append(server.recv())
        theirs.close()

    stopping = threading.Thread(target=stop_mid_submission, daemon=True)
    stopping.start()
    folder = log_folder()
    log = folder / "served.log"
    log.write_text("the server closed the connection\n")
    greeting = {"op": "ready", "pid": 4242, "layers": [], "missing": [], "rss_mb": round(rss_mb(), 1)}
    early = StartedWorker(popen=Served(4242, Connection(ours)), conn=Connection(ours), log=log, own_folder=True,
                          greeting=greeting)
    notices: list[str] = []
    task = Task("ada", str(CourseLayout(demo).submission("ada", "transformer-block")), seed=7)
    pool = make_pool(demo, "transformer-block", submissions=1, early=[early], notice=notices.append)
    try:
        assert isinstance(pool, LocalPool)
        pool.start()
        [(_, result)] = list(pool.run([task]))
        assert pool.replaced == 1
        assert pool.stats[0].pid != 4242                # graded by a worker of the pool's own
    finally:
        pool.close()
    stopping.join(timeout=30)
    assert asked and asked[0]["op"] == "grade" and asked[0]["task"]["student"] == "ada"
    assert notices == ["course serve: the server (pid 4242) stopped while grading ada; grading without it"]
    assert result.state == "graded" and result.score == 100.0
    assert not folder.exists()
