"""Starting a grading worker process (autograder.batch.worker) and holding its end of the connection.

Standard library only, so that `course autograde --student ID` can start its worker before the
command's own imports: the worker's start-up (numpy, the sandbox, pytest and the graders'
collection) then runs on one core while the command imports, reads the course and prepares the
feedback page on the other (see `autograder.cli`). `LocalPool` starts its workers here too.

    started = launch(course_dir, assignment, insecure=False, logs=folder)
    ...                                   # LocalPool(..., early=started) adopts it, or:
    started.close()                       # asks it to quit (it leaves once it has started)
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .wire import Connection, socket_pair

QUIT_SECONDS = 30.0          # for a worker asked to quit while it starts (its start-up is bounded)


@dataclass
class StartedWorker:
    """A worker process just started: the process, our end of its connection, its stderr log."""
    popen: subprocess.Popen[bytes]
    conn: Connection
    log: Path

    def close(self) -> None:
        """A worker that was never used: ask it to quit and wait for it (killed after QUIT_SECONDS)."""
        try:
            self.conn.send({"op": "quit"})
        except OSError:
            pass
        self.conn.close()
        try:
            self.popen.wait(timeout=QUIT_SECONDS)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.popen.wait()


def launch(course_dir: str, assignment: str, *, insecure: bool, cpu: int | None = None,
           logs: Path | None = None) -> StartedWorker:
    """Start `python -m autograder.batch.worker` for the course folder `course_dir` (absolute) in its
    own session, its stderr in a log file under `logs` (default: a new temporary folder)."""
    conn, fd = socket_pair()
    folder = logs if logs is not None else Path(tempfile.mkdtemp(prefix="autograder-workers-"))
    log = folder / f"worker-{len(os.listdir(folder)) + 1}.log"
    argv = [sys.executable, "-m", "autograder.batch.worker", "--course-dir", course_dir,
            "--assignment", assignment, "--fd", str(fd)] + (["--insecure"] if insecure else [])
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    try:
        with open(log, "wb") as err:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                     pass_fds=(fd,), start_new_session=True, cwd=course_dir)
    except BaseException:
        conn.close()
        raise
    finally:
        os.close(fd)
    return StartedWorker(popen=popen, conn=conn, log=log)
