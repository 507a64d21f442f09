"""The one helper that puts this environment's commands (nbgrader, alembic, jupyter) first on PATH."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from autograder.toolpath import bin_dir, tool, tool_env, tools_on_path


def test_tool_env_puts_this_environment_first_and_keeps_the_rest():
    """Does the environment for a child process start PATH with this interpreter's folder, keeping the rest?"""
    env = tool_env({"PATH": "/usr/bin:/bin", "LANG": "C"})
    assert env["PATH"].split(os.pathsep) == [str(Path(sys.executable).parent), "/usr/bin", "/bin"]
    assert env["LANG"] == "C"
    assert tool_env({})["PATH"] == str(bin_dir())


def test_tools_on_path_restores_the_previous_path(monkeypatch):
    """Within the block PATH starts with this environment; afterwards is it exactly what it was (or unset)?"""
    monkeypatch.setenv("PATH", "/only/here")
    with tools_on_path():
        assert os.environ["PATH"].split(os.pathsep)[0] == str(bin_dir())
    assert os.environ["PATH"] == "/only/here"
    monkeypatch.delenv("PATH")
    with tools_on_path():
        assert os.environ["PATH"] == str(bin_dir())
    assert "PATH" not in os.environ


def test_tool_names_the_command_beside_this_interpreter():
    """Is an installed command given by its full path, and an unknown one left to PATH lookup?"""
    name = Path(sys.executable).name
    assert tool(name) == sys.executable
    assert tool("no-such-command-here") == "no-such-command-here"
