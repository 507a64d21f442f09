"""Starting grading workers: the temporary folders of their logs."""
from __future__ import annotations

import os
import subprocess
import sys

from autograder.batch.launch import LOG_PREFIX, log_folder, sweep_log_folders


def _dead_pid() -> int:
    """The pid of a process this test started and reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_log_folders_of_commands_no_longer_running_are_swept(tmp_path):
    """Is a folder left by a killed command removed, and are the others kept?"""
    dead = tmp_path / f"{LOG_PREFIX}{_dead_pid()}-abc"
    alive = tmp_path / f"{LOG_PREFIX}{os.getpid()}-def"
    unnamed = tmp_path / f"{LOG_PREFIX}xyz"          # the old naming, without a pid
    other = tmp_path / "unrelated-123-abc"
    for folder in (dead, alive, unnamed, other):
        folder.mkdir()
        (folder / "worker-1.log").write_text("log\n")

    removed = sweep_log_folders(tmp_path)

    assert removed == [dead]
    assert not dead.exists()
    assert alive.exists() and unnamed.exists() and other.exists()


def test_a_new_log_folder_is_named_after_this_process():
    """Does the folder carry this process's pid, so that a later sweep knows whether it runs?"""
    folder = log_folder()
    try:
        assert folder.name.startswith(f"{LOG_PREFIX}{os.getpid()}-")
        assert folder.is_dir()
    finally:
        folder.rmdir()
