"""nbgrader's settings for a course, read as nbgrader reads them: the nbgrader_config.py of the
Jupyter config folders (a hub's /etc/jupyter, which students' `nbgrader submit` reads too), then the
course's own, later files winning. A file that cannot be loaded is skipped, as nbgrader skips it.
Loading the course's file imports nbgrader (about a second): done once per process and set of files."""
from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path
from typing import Any

from .layout import NBGRADER_CONFIG


def config_files(course_root: Path) -> tuple[tuple[str, int], ...]:
    """The folders whose nbgrader_config.py nbgrader reads for the course, in order, each with its
    file's modification time."""
    from jupyter_core.paths import jupyter_config_path

    files = []
    for folder in [*reversed(jupyter_config_path()), str(course_root)]:
        with contextlib.suppress(OSError):
            files.append((folder, os.stat(os.path.join(folder, NBGRADER_CONFIG)).st_mtime_ns))
    return tuple(files)


def nbgrader_settings(course_root: Path, files: tuple[tuple[str, int], ...] | None = None) -> Any:
    """The merged traitlets Config (read it; do not change it: it is shared within the process), of
    `files` when given (`config_files(course_root)` already listed)."""
    return _load(config_files(course_root) if files is None else files)


@functools.lru_cache(maxsize=8)
def _load(files: tuple[tuple[str, int], ...]) -> Any:
    """The files' settings merged in order (their modification times in the key: a changed file is
    read again)."""
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    cfg = Config()
    for folder, _ in files:
        with contextlib.suppress(Exception):   # nbgrader too goes on without a file it cannot load
            cfg.merge(PyFileConfigLoader(NBGRADER_CONFIG, path=folder).load_config())
    return cfg
