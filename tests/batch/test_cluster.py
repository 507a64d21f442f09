"""`course autograde --scheduler ADDRESS`: the warm workers on a real Dask cluster (a
distributed.LocalCluster with two worker processes) give the scores of a local run, and the
client alone writes the gradebook."""
from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autograder.api import prepare_demo
from autograder.config import load_course
from autograder.layout import CourseLayout
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


def _autograde_on(folder, address):
    return subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                           "--course-dir", str(folder), "--scheduler", address],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="5s"))


def _hold(folder, student, seconds):
    """Put a first cell that sleeps `seconds` into the student's notebook (a worker stays on it)."""
    (notebook,) = CourseLayout(folder).submission(student, "transformer-block").glob("*.ipynb")
    doc = json.loads(notebook.read_text())
    doc["cells"].insert(0, {"cell_type": "code", "execution_count": None, "id": "hold", "metadata": {},
                            "outputs": [], "source": f"import time\ntime.sleep({seconds})"})
    notebook.write_text(json.dumps(doc))


def _kill_groups(started):
    """SIGKILL the process group of each of the `started` processes still running, and reap them."""
    for proc in started:
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("address, why", [
    ("nonsense", "missing port number"),
    ("foo://host:8786", "unknown address scheme 'foo'"),
    ("tcp://127.0.0.1:99999", "no such port"),
])
def test_a_malformed_scheduler_address_is_one_line(tmp_path, address, why):
    """Given an address that cannot be a scheduler's, does the command say why in one line, at once?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    done = _autograde_on(folder, address)
    assert done.returncode == 2, done.stdout + done.stderr
    line = done.stderr.strip()
    assert line.startswith(f"course: error: --scheduler {address!r} is not a Dask scheduler address (")
    assert why in line and len(line.splitlines()) == 1


class _NotDask:
    """A TCP server on a free local port that is not Dask: on each connection it either answers an
    HTTP error at once and hangs up ("answers"), or reads and says nothing until the client goes
    ("waits", as a web server does for the end of a request line that never comes)."""

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:         # closed: the test is over
                return
            with conn:
                if self.behaviour == "answers":
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                    continue
                conn.settimeout(30)
                with contextlib.suppress(OSError):
                    while conn.recv(65536):
                        pass

    def close(self):
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)     # wakes the accept() (closing alone does not)
        self.listener.close()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()


@pytest.mark.parametrize("behaviour, why", [
    ("answers", "it is not a Dask scheduler"),
    ("waits", "it did not answer as a Dask scheduler within 10 s"),
])
def test_a_server_that_is_not_dask_at_the_scheduler_address_is_one_line(tmp_path, behaviour, why):
    """Pointed at a port where something else listens (the dashboard's web server, say), does the
    command say it is not a scheduler in one line and return, grading nothing?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    server = _NotDask(behaviour)
    try:
        done = _autograde_on(folder, server.address)
    finally:
        server.close()
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (f"course: error: Dask scheduler {server.address}: something listens there, but "
                                   f"{why} (the dashboard's port? the scheduler's is usually 8786)")
    assert not CourseLayout(folder).autograded_dir.exists()


def test_the_scheduler_check_works_from_inside_a_running_event_loop():
    """Called from code already inside an event loop (the Python API in a Jupyter kernel, say), does
    the scheduler check still find a real scheduler (not refuse it for the loop it runs in)?"""
    from autograder.batch.cluster import check_scheduler

    async def inside() -> None:
        check_scheduler(address)

    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        asyncio.run(inside())


def test_a_dask_workers_address_is_not_taken_for_the_schedulers(tmp_path):
    """Given a Dask worker's address instead of its scheduler's, does the command say so in one line?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        worker = next(iter(cluster.scheduler_info["workers"]))
        done = _autograde_on(folder, worker)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (f"course: error: Dask scheduler {worker}: a Dask Worker answers there, not the "
                                   "scheduler (give the scheduler's address, e.g. tcp://host:8786)")


def _descendants(pid: int) -> set[int]:
    """The processes below `pid` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
    found, todo = set(), [pid]
    while todo:
        above = todo.pop()
        children = [child for child, parent in parents.items() if parent == above]
        found.update(children)
        todo.extend(children)
    return found


def test_a_dask_worker_killed_mid_batch_costs_no_submission(graded_demo, tmp_path):
    """When a Dask worker process is killed while it grades, is its submission graded again elsewhere,
    do the scores equal a local run's, and are the killed worker's sandbox processes gone?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    shutil.copy2(load_course(graded_demo.folder).secret_file, load_course(folder).secret_file)
    held = "ada"            # first in the batch; a first cell that sleeps keeps a worker on her for 15 s
    _hold(folder, held, 15)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        proc = subprocess.Popen([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                                 "--course-dir", str(folder), "--scheduler", cluster.scheduler_address],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            end, address = time.monotonic() + 300, None
            while address is None and proc.poll() is None and time.monotonic() < end:
                address = next((worker for worker, keys in client.processing().items()
                                if any(str(key).startswith(f"grade-{held}-") for key in keys)), None)
                time.sleep(0.05)
            assert address is not None, "the held submission was never seen being graded"
            time.sleep(2)   # inside the held cell by now
            pid = client.run(os.getpid, workers=[address])[address]
            sandbox = _descendants(pid)
            assert sandbox, "the Dask worker grading had no sandbox processes"
            os.kill(pid, signal.SIGKILL)
            output, _ = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, output
    assert auto_scores(folder) == auto_scores(graded_demo.folder)
    end = time.monotonic() + 30
    while {p for p in sandbox if os.path.exists(f"/proc/{p}")} and time.monotonic() < end:
        time.sleep(0.1)
    assert not {p for p in sandbox if os.path.exists(f"/proc/{p}")}, "the killed worker's sandbox outlived it"


def test_a_tls_cluster_grades_with_dasks_tls_settings_and_says_when_they_are_missing(tmp_path):
    """On a cluster that requires TLS, does the command grade with the certificates of Dask's own TLS
    settings, and without them say in one line that no TLS connection could be made?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    security = distributed.security.Security(
        tls_ca_file=str(cert), tls_client_cert=str(cert), tls_client_key=str(key), tls_scheduler_cert=str(cert),
        tls_scheduler_key=str(key), tls_worker_cert=str(cert), tls_worker_key=str(key), require_encryption=True)
    tls_env = {"DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(cert),
               "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(cert),
               "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(key)}
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  host="127.0.0.1", protocol="tls://", security=security) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tls://")
        command = [sys.executable, "-m", "autograder.cli", "autograde", "transformer-block", "--course-dir",
                   str(folder), "--student", "ada", "--wait", "--scheduler", address]
        without = subprocess.run(command, capture_output=True, text=True, timeout=120)
        graded = subprocess.run(command, capture_output=True, text=True, timeout=300, env=dict(os.environ, **tls_env))
    assert without.returncode == 2, without.stdout + without.stderr
    line = without.stderr.strip()
    assert line.startswith(f"course: error: Dask scheduler {address}: no TLS connection (")
    assert line.endswith("the client's certificates come from Dask's distributed.comm.tls settings)")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert json.loads(CourseLayout(folder).results_json("ada", "transformer-block").read_text())["score"] == 100


def test_a_dask_worker_without_the_course_folder_says_where_it_must_be(tmp_path):
    """On a Dask worker whose machine lacks the course folder, does the grading worker not start,
    and say that the folder must be at the same path on every worker?"""
    from autograder.batch.cluster import _WarmThread

    missing = tmp_path / "not-shared" / "course"
    warm = _WarmThread(str(missing), "transformer-block", False)
    try:
        assert warm.worker is None
        assert warm.error == (f"the course folder {missing} is not on this worker's machine (it must be at the same "
                              "path on every Dask worker, e.g. on a shared file system; see docs/cluster.md)")
    finally:
        warm.close()


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


def test_a_recycled_grading_worker_whose_restart_fails_once_is_started_again_for_the_next_submission(
        tmp_path, monkeypatch):
    """When a Dask worker's grading worker is recycled and its fresh start fails once (a fork refused for a
    moment), is it started again for the next submission, rather than every later one failing and the batch
    stopping?"""
    from autograder.batch import cluster

    starts = []
    real = cluster.Worker

    def flaky(*args, **kwargs):
        starts.append(1)
        if len(starts) == 2:
            raise OSError(11, "Resource temporarily unavailable")
        return real(*args, **kwargs)

    monkeypatch.setattr(cluster, "Worker", flaky)
    warm = cluster._WarmThread(str(prepare_demo(ROOT, tmp_path / "course")), "transformer-block", False)
    try:
        warm.call(lambda w: setattr(w, "recycle", True))
        assert warm.call(lambda w: w is not None and w.host is not None)
        assert len(starts) == 3 and warm.error == ""
    finally:
        warm.close()
        gc.unfreeze()


def test_a_grading_workers_start_that_raises_anything_leaves_its_thread_answering(tmp_path, monkeypatch):
    """When the check for the course folder itself raises (a stale NFS handle: Path.is_file lets ESTALE
    through) as a recycled grading worker starts again, does its thread live on, answering each next
    submission with no worker and the reason (so the client stops the batch in one line) rather than
    leaving the batch waiting for ever, and does it start once the folder reads again?"""
    import concurrent.futures
    import errno

    from autograder.batch import cluster

    stale = []

    class FlakyPath(type(Path())):
        def is_file(self) -> bool:
            if stale:
                raise OSError(errno.ESTALE, "Stale file handle")
            return super().is_file()

    monkeypatch.setattr(cluster, "Path", FlakyPath)
    warm = cluster._WarmThread(str(prepare_demo(ROOT, tmp_path / "course")), "transformer-block", False)

    def call(fn):
        future = concurrent.futures.Future()
        warm._jobs.put((fn, future))
        return future.result(timeout=120)

    try:
        assert warm.error == ""
        stale.append(1)
        call(lambda w: setattr(w, "recycle", True))
        assert call(lambda w: (w, warm.error)) == (None, "OSError: [Errno 116] Stale file handle")
        stale.clear()
        assert call(lambda w: w is not None and warm.error == "")
    finally:
        warm.close()
        gc.unfreeze()


def test_losing_the_scheduler_mid_batch_stops_it_and_leaves_the_rest_as_it_was(graded_demo, tmp_path):
    """When the scheduler itself goes away while a batch grades, does the command stop in one line
    (exit 2) naming it, leaving the submission still being graded with its earlier results.json, page
    and gradebook grades, rather than writing it (and every other pending one) as crashed?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    shutil.copytree(CourseLayout(graded_demo.folder).autograded_dir, CourseLayout(folder).autograded_dir)
    shutil.copy2(load_course(graded_demo.folder).secret_file, load_course(folder).secret_file)
    shutil.copy2(graded_demo.folder / "gradebook.db", folder / "gradebook.db")
    layout = CourseLayout(folder)
    held = "ada"            # a first cell that sleeps keeps a worker on her while the scheduler is killed
    _hold(folder, held, 20)
    before = layout.results_json(held, "transformer-block").read_bytes()
    scheduler_file = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--port", "0",
                                  "--no-dashboard",
                                  "--scheduler-file", str(scheduler_file)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    workers = None
    try:
        end = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < end:
            time.sleep(0.1)
        time.sleep(0.5)
        address = json.loads(scheduler_file.read_text())["address"]
        workers = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "2",
                                    "--nthreads", "1", "--no-dashboard"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        with distributed.Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            proc = subprocess.Popen([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                                     "--force", "--course-dir", str(folder), "--scheduler", address],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                end, seen = time.monotonic() + 300, False
                while not seen and proc.poll() is None and time.monotonic() < end:
                    seen = any(str(key).startswith(f"grade-{held}-")
                               for keys in client.processing().values() for key in keys)
                    time.sleep(0.05)
                assert seen, "the held submission was never seen being graded"
                time.sleep(2)
                os.kill(scheduler.pid, signal.SIGKILL)
                out, err = proc.communicate(timeout=300)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    finally:
        _kill_groups((workers, scheduler))
    assert proc.returncode == 2, out + err
    lines = err.strip().splitlines()
    assert lines[-1].startswith(f"course: error: Dask scheduler {address}: the connection to it was lost"), err
    assert "not graded, left as they were; run the command again" in lines[-1]
    assert "GRADER ERROR" not in out
    assert layout.results_json(held, "transformer-block").read_bytes() == before
    held_grades = {k: v for k, v in auto_scores(folder).items() if k[0] == held}
    assert held_grades and held_grades == {k: v for k, v in auto_scores(graded_demo.folder).items() if k[0] == held}
    assert not [sid for sid, r in results_of(folder).items() if r["extra_data"]["state"] == "crashed"]


def test_a_dask_worker_grading_another_copy_of_a_submission_keys_it_by_that_copy(tmp_path, monkeypatch):
    """When a Dask worker's machine holds an older copy of katherine's submission than the client's (a
    shared file system not yet in sync), is the result kept under the copy it graded, with a WARNING,
    so that the next run grades her submission as it now is rather than calling it unchanged?"""
    from autograder.grading.fingerprint import submission_hash, submission_of

    folder = prepare_demo(ROOT, tmp_path / "course")
    layout = CourseLayout(folder)
    for sid in os.listdir(layout.submitted_dir):
        if sid not in ("ada", "katherine"):
            shutil.rmtree(layout.submitted_dir / sid)
    [old] = layout.submission("ada", "transformer-block").glob("*.ipynb")      # the worker's stale copy
    monkeypatch.setenv("STALE_STUDENT", "katherine")                         # read by the worker's preload
    monkeypatch.setenv("STALE_NOTEBOOK", str(old))
    preload = os.path.join(os.path.dirname(__file__), "stale_copy_preload.py")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  preload=[preload]) as cluster:
        done = _autograde_on(folder, cluster.scheduler_address)
    assert done.returncode == 0, done.stdout + done.stderr
    warnings = [ln for ln in done.stdout.splitlines() if ln.startswith("WARNING: katherine: the Dask worker read")]
    assert len(warnings) == 1, done.stdout
    assert not any(ln.startswith("WARNING: ada:") for ln in done.stdout.splitlines()), done.stdout
    graded = json.loads(layout.results_json("katherine", "transformer-block").read_text())
    assert graded["score"] == 100.0                     # ada's notebook, as the worker read it
    key = graded["extra_data"]["grading_key"]
    assert submission_of(key) == submission_hash(old.parent) != submission_hash(
        layout.submission("katherine", "transformer-block"))
    again = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                            "--course-dir", str(folder)], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    lines = again.stdout.splitlines()
    assert any(ln.startswith("graded") and " katherine " in ln for ln in lines), again.stdout
    assert any(ln.startswith("unchanged") and " ada " in ln for ln in lines), again.stdout
    regraded = json.loads(layout.results_json("katherine", "transformer-block").read_text())
    assert regraded["score"] < 100.0


def test_a_dask_worker_with_another_copy_of_course_yml_refuses_the_batch(tmp_path, monkeypatch):
    """When a Dask worker's machine holds another course.yml (other points for silu) than the client's,
    does the batch stop in one line naming the worker, before any submission is graded?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    monkeypatch.setenv("STALE_POINTS", "silu:7")                             # read by the worker's preload
    preload = os.path.join(os.path.dirname(__file__), "stale_copy_preload.py")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  preload=[preload]) as cluster:
        done = _autograde_on(folder, cluster.scheduler_address)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("course: error: Dask worker tcp://") and line.endswith(
        ": its copy of the course's graders, release, course.yml or this package differs from this machine's (a shared "
        "file system not yet in sync, or another install); nothing was graded, run the command again"), line
    assert not list(CourseLayout(folder).autograded_dir.glob("*/transformer-block/results.json"))


def test_a_batch_whose_cluster_loses_every_worker_stops_in_one_line(tmp_path, monkeypatch):
    """When the cluster's last worker goes (its SLURM job ended) while a submission is still to be
    graded, does the batch stop, once the cluster has had no worker for a while, with one line
    saying so, instead of waiting for ever for workers that may never come?"""
    from autograder.batch import cluster as cluster_module
    from autograder.batch.worker import Task

    monkeypatch.setattr(cluster_module, "_NO_WORKERS_SECONDS", 1.0, raising=False)
    monkeypatch.setattr(cluster_module, "_WORKERS_CHECK_SECONDS", 0.2, raising=False)
    folder = prepare_demo(ROOT, tmp_path / "course")
    held = CourseLayout(folder).submission("ada", "transformer-block")
    _hold(folder, "ada", 60)
    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp://", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address,
                                   "--nthreads", "1", "--no-nanny", "--no-dashboard"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            client.wait_for_workers(1, timeout=120)
            with cluster_module.DaskPool(cluster.scheduler_address, folder, "transformer-block") as pool:
                pool.start()
                graded = pool.run([Task(student="ada", folder=str(held), seed=1)])
                outcome: list[BaseException | None] = []

                def run() -> None:
                    try:
                        next(graded)
                    except BaseException as exc:  # noqa: BLE001 - looked at below
                        outcome.append(exc)

                thread = threading.Thread(target=run, daemon=True)
                thread.start()
                end = time.monotonic() + 120
                while not any(client.processing().values()) and time.monotonic() < end:
                    time.sleep(0.05)
                assert any(client.processing().values()), "the held submission was never seen being graded"
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
                thread.join(timeout=30)     # cluster still up: only the missing workers can end the wait
                assert not thread.is_alive(), "the batch still waits for a worker"
        finally:
            _kill_groups((worker,))
    [error] = outcome
    assert isinstance(error, cluster_module.ClusterUnavailable)
    assert str(error) == (f"Dask scheduler {cluster.scheduler_address}: the cluster has had no workers for 1 s "
                          "mid-batch (their jobs ended?); 1 submission not graded, left as they were; run the "
                          "command again once workers have joined")


def test_a_worker_joining_mid_batch_without_the_course_stops_the_batch_and_crashes_no_one(tmp_path, monkeypatch):
    """When a Dask worker whose machine lacks the course folder joins while a batch grades, is no
    submission written as crashed (a 0 in the gradebook) for having landed on it: does the batch
    stop in one line naming that worker, leaving what it did not grade as it was?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    layout = CourseLayout(folder)
    students = ("ada", "alan", "grace")
    for sid in os.listdir(layout.submitted_dir):
        if sid not in students:
            shutil.rmtree(layout.submitted_dir / sid)
    for sid in students:     # each keeps the one good worker busy while the other joins
        _hold(folder, sid, 15)
    monkeypatch.setenv("BROKEN_WORKER", "no-course")                         # read by the late worker's preload
    preload = os.path.join(os.path.dirname(__file__), "broken_worker_preload.py")
    started: list[subprocess.Popen] = []

    def worker(*extra: str) -> None:
        started.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads",
                                         "1", "--no-nanny", "--no-dashboard", *extra], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True))

    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp://", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        address = cluster.scheduler_address
        try:
            worker()
            client.wait_for_workers(1, timeout=120)
            proc = subprocess.Popen([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                                     "--course-dir", str(folder), "--scheduler", address],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
            started.append(proc)
            end = time.monotonic() + 120
            while not any(client.processing().values()) and proc.poll() is None and time.monotonic() < end:
                time.sleep(0.05)
            assert any(client.processing().values()), "no submission was seen being graded"
            worker("--preload", preload)
            out, err = proc.communicate(timeout=120)
        finally:
            _kill_groups(started)
    assert proc.returncode == 2, out + err
    line = err.strip().splitlines()[-1]
    assert line.startswith("course: error: Dask worker tcp://"), err
    assert f"the course folder {folder} is not on this worker's machine" in line
    assert line.endswith("not graded, left as they were; run the command again once that worker can grade or has "
                         "left the cluster")
    assert "GRADER ERROR" not in out
    assert not [sid for sid, r in results_of(folder).items() if r["extra_data"]["state"] == "crashed"]


def test_a_worker_dying_while_the_grading_workers_start_is_one_line(tmp_path, monkeypatch):
    """When a Dask worker dies as the batch sets up its grading worker (its nanny killed it for
    memory, its job ended), does the command say so in one line (exit 2), grading nothing, rather
    than end in Dask's traceback?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    monkeypatch.setenv("BROKEN_WORKER", "dies")                              # read by the worker's preload
    preload = os.path.join(os.path.dirname(__file__), "broken_worker_preload.py")
    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp://", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address,
                                   "--nthreads", "1", "--no-nanny", "--no-dashboard", "--preload", preload],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            client.wait_for_workers(1, timeout=120)
            done = _autograde_on(folder, cluster.scheduler_address)
        finally:
            _kill_groups((worker,))
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"course: error: Dask scheduler {cluster.scheduler_address}: a worker failed while the "
                           "grading workers started ("), line
    assert line.endswith("did it run out of memory, or its job end?); nothing was graded, run the command again")
    assert not CourseLayout(folder).autograded_dir.exists()
