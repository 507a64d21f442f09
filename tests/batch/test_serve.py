"""`course serve` keeps a warm worker between commands: `course autograde --student` grades on it
when it would grade the same way itself (same graders, course.yml, release, --insecure), with the
same results as without it; a stale server says so and stops; only its own user can reach it; it
stops on SIGTERM or when idle, removing its socket and its sandbox."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autograder.batch import serve
from autograder.layout import CourseLayout
from tests.conftest import course_with_students

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
A = "transformer-block"
STUDENTS = ("ada", "alan")
WAIT_SECONDS = 600            # generous: a loaded machine
USED = re.compile(r"grading on the warm worker of `course serve` \(pid (\d+)\)")


def _env() -> dict[str, str]:
    return dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))


def _course_cmd(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder.cli", *args, "--course-dir", str(course)],
                          capture_output=True, text=True, env=_env(), timeout=WAIT_SECONDS)


class _Server:
    """`course serve` in a process of its own, its output collected line by line."""

    def __init__(self, course: Path, *extra: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.cli", "serve", A, "--course-dir", str(course),
                                      *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=_env(), start_new_session=True)
        self.lines: list[str] = []
        self._pumping = threading.Thread(target=self._pump, daemon=True)
        self._pumping.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, prefix: str) -> str:
        end = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < end:
            found = [ln for ln in self.lines if ln.startswith(prefix)]
            if found:
                return found[0]
            if self.proc.poll() is not None:
                self._pumping.join(timeout=30)     # the last lines (it ends at the end of the output)
                found = [ln for ln in self.lines if ln.startswith(prefix)]
                assert found, f"course serve ended ({self.proc.returncode}) without {prefix!r}:\n{self.output}"
                return found[0]
            time.sleep(0.05)
        raise AssertionError(f"no {prefix!r} from course serve:\n{self.output}")

    def descendants(self) -> set[int]:
        """This server's live descendants (by parent pid, read from /proc)."""
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        found, frontier = set(), {self.proc.pid}
        while frontier:
            frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
            found |= frontier
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def course(tmp_path: Path) -> Path:
    return course_with_students(tmp_path / "course", STUDENTS)


@pytest.fixture
def server(course: Path):
    started = _Server(course, "--idle-minutes", "30")
    try:
        started.wait_for("serving ")
        yield started
    finally:
        started.stop()


def _graded(course: Path, sid: str) -> dict:
    """results.json less what depends on timing or on the grading key's arrival."""
    doc = json.loads(CourseLayout(course).results_json(sid, A).read_text())
    doc.pop("execution_time", None)
    doc["extra_data"].pop("grading_key", None)

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in ("duration", "execution_time", "seconds", "graded_at")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return strip(doc)


def test_serve_grades_a_student_as_a_cold_command_does(course: Path, server: _Server):
    """Does `--student` grade on the running server, with the same results.json as without a server?"""
    run = _course_cmd(course, "autograde", A, "--student", "ada", "--wait")
    assert run.returncode == 0, run.stderr
    used = USED.search(run.stderr)
    assert used and int(used.group(1)) == server.proc.pid, run.stderr
    assert not USED.search(run.stdout), "a notice about the run, on stderr: stdout is the report alone"
    served = _graded(course, "ada")
    server.wait_for("graded 1 submission")

    server.stop()
    assert not serve.socket_path(course, A).exists()
    cold = _course_cmd(course, "autograde", A, "--student", "ada", "--force", "--wait")
    assert cold.returncode == 0, cold.stderr
    assert not USED.search(cold.stdout + cold.stderr)
    assert served["score"] == _graded(course, "ada")["score"]
    assert served == _graded(course, "ada")


def test_serve_grades_command_after_command(course: Path, server: _Server):
    """Does one server grade several commands in turn, each student with their own result?"""
    for sid in STUDENTS:
        run = _course_cmd(course, "autograde", A, "--student", sid, "--force")
        assert run.returncode == 0, run.stderr
        assert USED.search(run.stderr), run.stderr
    server.wait_for("graded 1 submission for pid")
    end = time.monotonic() + 30
    while "(2 in all)" not in server.output and time.monotonic() < end:
        time.sleep(0.05)
    assert "(2 in all)" in server.output
    for sid in STUDENTS:
        assert _graded(course, sid)["tests"], sid


def test_a_changed_grader_makes_the_server_stale(course: Path, server: _Server):
    """Once a grader file changes, is the server left unused (the student graded all the same) and stopped?"""
    grader = next(CourseLayout(course).graders("transformer_block").glob("test_*.py"))
    grader.write_text(grader.read_text() + "\n# edited after the server started\n")
    run = _course_cmd(course, "autograde", A, "--student", "ada")
    assert run.returncode == 0, run.stderr
    assert "course serve: not used (stale)" in run.stderr and "course serve" not in run.stdout
    assert not USED.search(run.stderr)
    assert json.loads(CourseLayout(course).results_json("ada", A).read_text())["score"] > 0
    assert server.proc.wait(timeout=WAIT_SECONDS) == 0
    assert "stopped: stale" in server.wait_for("stopped:")
    assert not serve.socket_path(course, A).exists()


def test_an_insecure_command_does_not_use_a_sandboxed_server(course: Path, server: _Server):
    """Is a command that grades differently (--insecure) refused, while the server stays for the others?"""
    run = _course_cmd(course, "autograde", A, "--student", "ada", "--insecure")
    assert run.returncode == 0, run.stderr
    assert "course serve: not used (this server grades differently" in run.stderr
    assert server.proc.poll() is None
    again = _course_cmd(course, "autograde", A, "--student", "ada", "--force")
    assert USED.search(again.stderr), again.stderr


def _started(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot), None once it has ended (or is a zombie):
    a pid taken again by another process does not count as the same process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def test_a_second_server_for_the_same_assignment_is_refused(course: Path, server: _Server):
    """Does a second `course serve` of the same course and assignment stop with one line naming the first?"""
    second = _course_cmd(course, "serve", A)
    assert second.returncode == 2
    assert f"already serves this assignment of this course (pid {server.proc.pid})" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    assert server.proc.poll() is None and serve.socket_path(course, A).exists()


def test_sigterm_stops_the_server_its_sandbox_and_its_socket(course: Path, server: _Server):
    """Does SIGTERM end the server with its sandbox's processes and remove its socket?"""
    children = {pid: _started(pid) for pid in server.descendants()}
    assert children, "a warm server holds its sandbox's processes"
    server.proc.terminate()
    assert server.proc.wait(timeout=60) == 0
    end = time.monotonic() + 30

    def alive() -> set[int]:
        return {pid for pid, started in children.items() if started is not None and _started(pid) == started}
    while alive() and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(), f"left running: {alive()}"
    assert server.wait_for("stopped:") == "stopped: SIGTERM"
    assert not serve.socket_path(course, A).exists()


def test_an_idle_server_stops(course: Path):
    """Does a server with nothing to grade for --idle-minutes stop by itself and remove its socket?"""
    idle = _Server(course, "--idle-minutes", "0.02")
    try:
        assert idle.wait_for("serving ").endswith("stops on Ctrl-C, or after 0.02 idle minutes")
        assert idle.proc.wait(timeout=WAIT_SECONDS) == 0
        assert "nothing to grade for 0.02 minutes" in idle.wait_for("stopped:")
        assert not serve.socket_path(course, A).exists()
    finally:
        idle.stop()


def test_a_socket_folder_others_may_enter_is_not_used(course: Path, server: _Server):
    """Is a server whose socket folder others could enter (not 0700) ignored by the command?"""
    folder = serve.socket_path(course, A).parent
    os.chmod(folder, 0o755)
    try:
        assert serve.connect(course, A) is None
        run = _course_cmd(course, "autograde", A, "--student", "ada")
        assert run.returncode == 0, run.stderr
        assert not USED.search(run.stdout + run.stderr)
    finally:
        os.chmod(folder, 0o700)
    assert serve.connect(course, A) is not None


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("python3", path="/usr/bin"),
                    reason="switching to another user needs root")
def test_another_user_cannot_reach_the_server(course: Path, server: _Server):
    """Can a process of another user connect to the server's socket? (It must not.)"""
    path = serve.socket_path(course, A)
    probe = ("import socket, sys\n"
             "s = socket.socket(socket.AF_UNIX)\n"
             "try:\n    s.connect(sys.argv[1])\nexcept OSError as e:\n    print(type(e).__name__)\n"
             "else:\n    print('connected')\n")
    run = subprocess.run(["/usr/bin/python3", "-c", probe, str(path)], user=65534, group=65534,
                         capture_output=True, text=True, timeout=60, cwd="/")
    assert run.stdout.strip() == "PermissionError", run.stdout + run.stderr
    with socket.socket(socket.AF_UNIX) as mine:          # its own user still can
        mine.connect(str(path))


def test_a_command_that_greets_late_is_still_served(course: Path, server: _Server):
    """Is a command that connects at once but greets seconds later (waiting for the previous command's
    gradebook commit) still served?"""
    from autograder.config import load_course

    started = serve.connect(course, A)
    assert started is not None
    try:
        time.sleep(3.0)
        loaded = load_course(course)
        assert serve.greet(started, serve.identity(loaded, loaded.assignment(A), insecure=False)) is None
        assert started.greeting is not None and started.greeting["pid"] == server.proc.pid
    finally:
        started.close()


def _hanging_submission(course: Path, sid: str) -> None:
    """`sid`'s submission: ada's notebook with swiglu_ffn redefined to loop forever (each call stopped
    at call_seconds), so that grading it takes seconds, the server busy meanwhile."""
    layout = CourseLayout(course)
    folder = layout.submission(sid, A)
    shutil.copytree(layout.submission("ada", A), folder)
    notebook = next(folder.glob("*.ipynb"))
    doc = json.loads(notebook.read_text())
    doc["cells"].append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                         "source": "def swiglu_ffn(x, W_gate, W_up, W_down):\n    while True:\n        pass\n"})
    notebook.write_text(json.dumps(doc))


def test_ctrl_c_on_a_busy_server_grades_without_it(course: Path, server: _Server):
    """Ctrl-C on the server while it grades a command's student: does the command grade the student
    without it (a real result, not a crashed 0), saying the server stopped, and does the server stop
    without greenlet noise?"""
    _hanging_submission(course, "slow")
    client = subprocess.Popen([sys.executable, "-m", "autograder.cli", "autograde", A, "--student", "slow",
                               "--course-dir", str(course)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=_env())
    assert client.stderr is not None
    first = client.stderr.readline()
    assert USED.search(first), first
    time.sleep(2.0)                            # the server is grading now (swiglu_ffn's calls take 5 s each)
    assert server.proc.poll() is None
    os.kill(server.proc.pid, signal.SIGINT)
    out, err = client.communicate(timeout=WAIT_SECONDS)
    assert server.proc.wait(timeout=WAIT_SECONDS) == 130
    server.wait_for("course: interrupted")
    assert "GreenletExit" not in server.output, server.output
    assert client.returncode == 0, first + out + err
    assert f"course serve: the server (pid {server.proc.pid}) stopped while grading slow; grading without it" in err
    assert "GRADER ERROR" not in out
    doc = json.loads(CourseLayout(course).results_json("slow", A).read_text())
    assert doc["extra_data"]["state"] == "graded"
    scores = {p["problem"]: p["score"] for p in doc["extra_data"]["problems"]}
    assert scores["swiglu_ffn"] == 0 and scores["layer_norm"] == 12
    assert not serve.socket_path(course, A).exists()
