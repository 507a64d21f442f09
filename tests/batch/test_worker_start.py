"""A grading worker's start-up: what it leaves running and how it treats the garbage collector."""
from __future__ import annotations

import os
import re

import pytest

from autograder.api import prepare_demo
from autograder.batch.launch import StartedWorker, launch
from autograder.batch.worker import Task
from autograder.layout import CourseLayout
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return prepare_demo(ROOT, tmp_path_factory.mktemp("start") / "course")


def _ready(started: StartedWorker) -> dict:
    started.conn.sock.settimeout(120)           # a worker that never answers fails the test
    msg = started.conn.recv()
    assert msg.get("op") == "ready", msg
    return msg


def test_a_worker_runs_a_single_thread(demo):
    """Once started and having graded, is the worker's process one thread: numpy's BLAS pool held at
    one thread (OpenBLAS would start one per core as numpy is imported, spinning beside the
    sandbox), and none of its start-up's helper threads left?"""
    started = launch(str(demo), "transformer-block", insecure=False)
    try:
        pid = _ready(started)["pid"]
        _grade(started, demo)
        assert os.listdir(f"/proc/{pid}/task") == [str(pid)]
    finally:
        started.close()


def _grade(started: StartedWorker, demo) -> None:
    folder = CourseLayout(demo).submission("ada", "transformer-block")
    started.conn.send({"op": "grade", "id": 1, "task": Task("ada", str(folder), seed=7).to_dict()})
    assert started.conn.recv()["op"] == "result"


def test_a_worker_collects_garbage_again_once_started(demo, monkeypatch):
    """Is the cyclic garbage collector, off during the worker's start-up, on again once it serves,
    with the start-up's objects set aside (frozen), and does the worker still grade?"""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))     # workers start in the course folder
    started = launch(str(demo), "transformer-block", insecure=False, module="tests.batch.gc_reporting_worker")
    try:
        _ready(started)
        _grade(started, demo)
        started.conn.send({"op": "quit"})
        started.popen.wait(timeout=60)
        log = started.log.read_text()
    finally:
        started.close()
    found = re.search(r"gc enabled=(\w+) frozen=(\d+)", log)
    assert found, log[-2000:]
    assert found.group(1) == "True" and int(found.group(2)) > 10_000


def test_the_imports_made_before_forking_a_worker_start_no_thread_and_no_numpy():
    """`course autograde --student` imports the worker's module and the sandbox's launcher before it
    forks its worker (autograder.cli._early_worker): do they leave the process single-threaded (a
    fork needs that; otherwise the submission is graded in the command's own process) and without
    numpy (which the worker imports once its sandbox is launched, with one BLAS thread)?"""
    import json
    import subprocess
    import sys

    code = ("import json, sys, threading; import autograder.cli; from autograder.batch import worker; "
            "from autograder.sandbox import process; "
            "print(json.dumps([threading.active_count(), 'numpy' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [1, False]
