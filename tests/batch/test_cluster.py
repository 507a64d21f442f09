"""`course autograde --scheduler ADDRESS`: the warm workers on a real Dask cluster (a
distributed.LocalCluster with two worker processes) give the scores of a local run, and the
client alone writes the gradebook."""
from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys

import pytest

from autograder.api import prepare_demo
from autograder.config import load_course
from tests.conftest import ROOT

from .test_batch import auto_scores, results_of

pytestmark = pytest.mark.slow
distributed = pytest.importorskip("distributed")   # installed by `make test` (the test extra)


def test_a_dask_cluster_gives_the_scores_of_a_local_run(graded_demo, tmp_path):
    """Graded on a LocalCluster of two worker processes, is every results.json and gradebook entry
    the same as when graded locally?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    shutil.copy2(load_course(graded_demo.folder).secret_file, load_course(folder).secret_file)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        assert len(cluster.workers) == 2
        done = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                               "--course-dir", str(folder), "--scheduler", cluster.scheduler_address],
                              capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert results_of(folder) == results_of(graded_demo.folder)
    assert auto_scores(folder) == auto_scores(graded_demo.folder)


def test_an_unreachable_scheduler_is_one_line(tmp_path):
    """Pointed at a scheduler that is not there, does `course autograde` say so in one line (exit 2)?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                           "--course-dir", str(folder), "--scheduler", "tcp://127.0.0.1:9"],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="2s"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().startswith("course: error: Dask scheduler tcp://127.0.0.1:9: cannot connect")
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_dask_workers_grading_thread_is_held_on_its_sandboxs_cpu_also_after_a_recycle(tmp_path):
    """Is the thread that grades inside a Dask worker held on its sandbox's CPU (the process's
    other threads left alone), and after its worker is recycled, is the new sandbox given a CPU
    afresh (the thread freed first) and the thread held there in turn? Are the start-up's objects
    set aside from the cyclic collector (gc.freeze) on each start, as in a local worker?"""
    from autograder.batch.cluster import _WarmThread

    allowed = os.sched_getaffinity(0)
    frozen = gc.get_freeze_count()
    warm = _WarmThread(str(prepare_demo(ROOT, tmp_path / "course")), "transformer-block", False)
    try:
        assert warm.error == ""
        first = warm.call(lambda w: (w.host.cpu, os.sched_getaffinity(0)))
        started = gc.get_freeze_count()
        warm.call(lambda w: setattr(w, "recycle", True))
        again = warm.call(lambda w: (w.host.cpu, os.sched_getaffinity(0)))
        restarted = gc.get_freeze_count()
    finally:
        warm.close()
        gc.unfreeze()
    # the start-up's objects are set aside from the cyclic collector, on each start
    assert started > frozen and restarted > 0
    assert os.sched_getaffinity(0) == allowed
    for cpu, thread in (first, again):
        assert (cpu in allowed and thread == {cpu}) if len(allowed) > 1 else (cpu is None and thread == allowed)
