"""Starting grading workers: the temporary folders of their logs."""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from autograder import tempdirs
from autograder.batch.launch import LOG_PREFIX, log_folder


def _folder(name: str) -> Path:
    folder = Path(tempfile.gettempdir()) / name
    folder.mkdir()
    (folder / "worker-1.log").write_text("a worker's stderr\n")
    return folder


def test_a_new_log_folder_replaces_those_of_killed_commands():
    """Is a log folder left by a command that no longer runs removed when the next command makes
    its own, while the folders of running commands are kept?"""
    ended = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = tempdirs.process_start(ended.pid)
    ended.kill()
    ended.wait()
    left = _folder(f"{LOG_PREFIX}{ended.pid}-{started}-test")
    running = _folder(f"{tempdirs.owned_prefix(LOG_PREFIX)}test")
    new = None
    try:
        new = log_folder()
        assert new.name.startswith(tempdirs.owned_prefix(LOG_PREFIX)) and new.is_dir()
        assert not left.exists()
        assert running.exists()
    finally:
        for folder in (left, running, new):
            if folder is not None and folder.exists():
                for f in folder.iterdir():
                    f.unlink()
                folder.rmdir()
