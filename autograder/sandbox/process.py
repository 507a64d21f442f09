"""The sandbox host as an operating-system process: starting it, and killing and reaping it.

The host is bubblewrap running the zygote (or, with --insecure where bubblewrap cannot run, the
zygote alone). Everything below the zygote lives in bubblewrap's PID namespace and dies with it;
processes of one submission are killed from inside, by that submission's supervisor. This class
is the one place where the trusted side kills and reaps a process.
"""
from __future__ import annotations

import os
import signal
import subprocess
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

# Puts the shell into the given cgroups (its pid, before it becomes bubblewrap), then runs the
# command: `sh -c SCRIPT sh N procs-file... command...`.
_ENTER_CGROUPS = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 97; shift; n=$((n-1)); done; exec "$@"'


def _kill(proc: subprocess.Popen[bytes]) -> int | None:
    if proc.returncode is not None:
        return proc.returncode
    try:
        os.killpg(proc.pid, signal.SIGKILL)      # its own session and group: nothing it started outlives it
    except (ProcessLookupError, PermissionError):
        pass
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:            # stuck in the kernel; nothing more can be done
        return None


class HostProcess:
    """One running host. `kill()` is idempotent and also runs if the object is dropped."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], pass_fds: Sequence[int],
                 log_path: Path, cgroup_procs: Sequence[str] = ()):
        argv = list(argv)
        if cgroup_procs:
            argv = ["/bin/sh", "-c", _ENTER_CGROUPS, "sh", str(len(cgroup_procs)), *cgroup_procs, *argv]
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=log, env=dict(env), pass_fds=tuple(pass_fds),
                                         start_new_session=True, close_fds=True, cwd="/")
        self._finalizer = weakref.finalize(self, _kill, self.proc)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> int | None:
        """SIGKILL the host's process group and reap it; returns its exit status."""
        self._finalizer.detach()
        return _kill(self.proc)

    def log_tail(self, limit: int = 2000) -> str:
        """The end of what the host wrote to stderr (bubblewrap's own errors, a zygote traceback)."""
        try:
            data = self.log_path.read_bytes()[-limit:]
        except OSError:
            return ""
        return data.decode("utf-8", "replace").strip()
