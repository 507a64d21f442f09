"""The command-line tools of this Python environment (nbgrader, alembic, jupyter) come first on PATH.

nbgrader shells out to `alembic` when it creates a gradebook, `course release` runs the `nbgrader`
command, and kernels started for `course validate` must be this environment's Python. When the
`course` command (or a test) runs without the environment activated, PATH does not name its bin
folder; these two helpers put it first, for a child process or for the duration of a block.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path


def bin_dir() -> Path:
    """The folder holding this interpreter and the commands installed beside it."""
    return Path(sys.executable).parent


def _with_bin_first(path: str | None) -> str:
    return os.pathsep.join([str(bin_dir())] + ([path] if path else []))


def tool_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `base` (default: this process's environment) with `bin_dir()` first on PATH."""
    env = dict(os.environ if base is None else base)
    env["PATH"] = _with_bin_first(env.get("PATH"))
    return env


def tool(name: str) -> str:
    """The path of command `name` in `bin_dir()` when it is there, else the bare name (found on PATH)."""
    exe = bin_dir() / name
    return str(exe) if exe.exists() else name


@contextlib.contextmanager
def tools_on_path() -> Iterator[None]:
    """Within the block, this process's PATH starts with `bin_dir()` (for libraries that start
    commands themselves); the previous PATH is restored afterwards."""
    old = os.environ.get("PATH")
    os.environ["PATH"] = _with_bin_first(old)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = old
