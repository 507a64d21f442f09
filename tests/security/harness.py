"""Running attacks through the real `course autograde` on a scratch course, and checking what
every attack must leave intact.

One batch per attack: a victim graded before the attacker (`a-victim-<hex>`), the attacker
(`m-<attack>`) and a victim graded after it (`z-victim-<hex>`), every student with the same
hidden-input seed (`--seed`), so the attacker's score compares exactly with its twin's and the
victims' results with a baseline batch that has no attacker.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from autograder.layout import CourseLayout

from .attacks import NO_NOTEBOOK, PRELUDE, TWINS, Attack

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))
from submissions import LN_EPS_OUTSIDE, Case, build  # noqa: E402

from conftest import copy_course  # noqa: E402

ASSIGNMENT = "transformer-block"
NB = "transformer-block.ipynb"
SEED = 20261214
# Limits of the scratch course: short, so that hangs and restarts cost seconds, not minutes.
LIMITS = {"cell_seconds": 4, "call_seconds": 2, "total_seconds": 30, "submission_seconds": 30, "notebook_mb": 20}
# The grader's own peak resident memory (VmHWM of the `course` process and of its grading workers
# and gradebook writer, sandboxes excluded) stays under this, whatever a submission does: about
# 60 MB for an ordinary batch of this course (a worker), 135 MB for the 100,000-cell notebook (the
# `course` process parses it); the bound of docs/security.md, baseline + about 4 x return_mb + a 4 MB
# reply header parsed (~130 MB at most), is ~255 MB.
GRADER_PEAK_MB = 256
# Wall-clock bound on grading the attacker: one budget per submission (submission_seconds) plus
# slack for the grader's own work on a loaded machine.
ATTACKER_SECONDS = LIMITS["submission_seconds"] + 30
BATCH_TIMEOUT = 300
STOPPED_GRACE = 15            # seconds the grader may stay stopped or traced before the run is failed
SURVIVOR_GRACE = 3.0          # seconds after the batch before scanning for attack processes
OUTPUTS = ("autograded", "feedback", "gradebook.db", "gradebook.db-journal", ".course_secret", ".gradebook.lock",
           ".gradebook-pending")


# ----------------------------------------------------------------------------- the scratch course

@dataclass
class Scratch:
    """A scratch course with its secrets: marker strings that must never reach an attacker's outputs."""
    course: Path
    victims: tuple[str, str]
    markers: dict[str, str] = field(default_factory=dict)    # what -> marker text
    secret: str = ""


def _marker(kind: str) -> str:
    return f"{kind}-marker-{secrets.token_hex(6)}"


def empty_gradebook(dest: Path) -> Path:
    """A gradebook holding the assignment and no student, made once and copied into each scratch
    course (nbgrader creates a new gradebook through alembic, which takes seconds)."""
    from autograder.config import load_course
    from autograder.reporting.gradebook import GradebookWriter

    course = load_course(_limited(copy_course(dest)))
    with GradebookWriter(course, course.assignment(ASSIGNMENT)):
        pass
    return dest / "gradebook.db"


def _limited(course: Path) -> Path:
    config = yaml.safe_load((course / "course.yml").read_text())
    config["defaults"]["limits"].update(LIMITS)
    (course / "course.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    return course


def make_scratch(dest: Path, secret: str, victims: tuple[str, str], victim_marks: dict[str, str],
                 instructor_marks: dict[str, str], gradebook: Path | None = None) -> Scratch:
    """A course copy with short limits, a known secret and marker comments in the instructor code
    (and a copy of `gradebook`, an empty gradebook, if given)."""
    course = _limited(copy_course(dest))
    if gradebook is not None:
        shutil.copyfile(gradebook, course / "gradebook.db")
    (course / ".course_secret").write_text(secret + "\n")
    (course / ".course_secret").chmod(0o600)
    package = course / "assignments" / "transformer_block"
    for rel, mark in instructor_marks.items():
        path = package / rel
        path.write_text(path.read_text() + f"\n# {mark}\n")
    (CourseLayout(course).submitted_dir).mkdir()
    for sid in victims:
        write_notebook(CourseLayout(course).submission(sid, ASSIGNMENT) / NB, victim_notebook(sid, victim_marks[sid]))
    markers = {f"instructor {rel}": m for rel, m in instructor_marks.items()}
    markers.update({f"victim notebook {sid}": m for sid, m in victim_marks.items()})
    markers.update({f"victim id {sid}": sid for sid in victims})
    markers["course secret"] = secret
    return Scratch(course=course, victims=victims, markers=markers, secret=secret)


def write_notebook(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def victim_notebook(sid: str, mark: str) -> bytes:
    variants = () if sid.startswith("a-") else (("layer_norm", LN_EPS_OUTSIDE),)
    return build(Case(sid, variants=variants, extra_cells=(f"# {mark}\nvictim_mark = 1",)))


def twin_notebook(twin: str) -> bytes:
    return build(Case(twin, variants=TWINS[twin]))


def attack_notebook(attack: Attack, values: dict[str, str]) -> bytes:
    """The twin's notebook with the prelude and the attack's cells, placeholders filled in."""
    def fill(code: str) -> str:
        for key, value in values.items():
            code = code.replace(f"@{key}@", value)
        return code

    cells = tuple(fill(c) for c in attack.cells)
    if attack.repeat_cells:
        cells = cells * attack.repeat_cells
    return build(Case(attack.name, variants=TWINS[attack.twin],
                      early_cells=(fill(PRELUDE.strip("\n")),) + tuple(fill(c) for c in attack.early),
                      extra_cells=cells))


def write_layout(attack: Attack, folder: Path, scratch: Scratch) -> None:
    """File-level attacks: write submitted/<attacker>/<assignment>/ (or the folder itself)."""
    course = scratch.course
    nb = folder / NB
    kind = attack.layout
    if kind == "folder_link":
        folder.parent.symlink_to(scratch.victims[0])
        return
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "link_to_victim":
        nb.symlink_to(Path("..", "..", scratch.victims[0], ASSIGNMENT, NB))
    elif kind == "link_to_secret":
        nb.symlink_to(course / ".course_secret")
        (folder / "gradebook.ipynb").symlink_to(course / "gradebook.db")
        (folder / "timestamp.txt").symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(nb)
    elif kind == "mode_000":
        nb.write_bytes(twin_notebook(attack.twin))
        nb.chmod(0)
    elif kind == "100k_cells":
        doc = json.loads(twin_notebook(attack.twin))
        doc["cells"].extend({"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {},
                             "outputs": [], "source": f"_x{i % 7} = {i}"} for i in range(100_000))
        nb.write_text(json.dumps(doc))
    elif kind == "431k_raw_cells":      # 19.9 MB, under the corpus's 20 MB limit
        doc = json.loads(twin_notebook(attack.twin))
        doc["cells"] += [{"cell_type": "raw", "metadata": {}, "source": ""}] * 431_000
        nb.write_text(json.dumps(doc, separators=(",", ":")))
    elif kind == "outputs_flood":       # one code cell with 300,000 empty outputs (16 MB)
        doc = json.loads(twin_notebook(attack.twin))
        code = next(c for c in doc["cells"] if c["cell_type"] == "code")
        code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ""}] * 300_000
        nb.write_text(json.dumps(doc, separators=(",", ":")))
    elif kind == "200mb":
        with open(nb, "w") as fh:
            fh.write('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", '
                     '"execution_count": 1, "id": "big", "metadata": {}, "source": "x = 1", "outputs": '
                     '[{"output_type": "stream", "name": "stdout", "text": "')
            block = "0123456789abcdef" * 65536
            for _ in range(200):
                fh.write(block)
            fh.write('"}]}]}')
    elif kind == "deep_json":
        depth = 100_000
        nb.write_text('{"nbformat": 4, "nbformat_minor": 5, "metadata": {"deep": ' + "[" * depth + "]" * depth
                      + '}, "cells": [{"cell_type": "code", "id": "a", "metadata": {}, "outputs": [], '
                        '"execution_count": null, "source": "def layer_norm(x, g, b, eps=1e-5):\\n    return x"}]}')
    elif kind == "metadata":
        doc = json.loads(twin_notebook(attack.twin))
        for i, cell in enumerate(doc["cells"]):
            cell["metadata"]["nbgrader"] = {"grade": True, "solution": True, "locked": False, "points": 1000,
                                            "grade_id": "test_layer_norm" if i % 2 else f"cell-{i}",
                                            "schema_version": 3}
        doc["metadata"]["kernelspec"] = {"name": "python2", "display_name": "Python 2", "language": "python"}
        doc["nbformat_minor"] = 99
        nb.write_text(json.dumps(doc))
    else:
        raise ValueError(f"unknown layout {kind!r}")


# ----------------------------------------------------------------------------- running a batch

@dataclass
class Run:
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    peak_mb: float | None
    problems: list[str]          # what went wrong with the run itself (timeout, grader stopped)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def _vm_hwm_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _trusted_children(pid: int) -> list[int]:
    """The grader's own child processes (its grading workers, its gradebook writer): children of
    `pid` running this Python. bubblewrap and the sandbox's processes (named sbx-*) are not."""
    exe = os.path.realpath(sys.executable)
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            if int(rest[1]) == pid and not comm.startswith("sbx-") and os.path.realpath(f"/proc/{name}/exe") == exe:
                out.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def run_autograde(course: Path, *extra: str, timeout: float = BATCH_TIMEOUT) -> Run:
    """`course autograde` (the real CLI, through run_grader.py for its peak memory), run from the
    course folder as an instructor would (so the grader's cwd is the scratch course), with a
    watchdog: a grader stopped or traced for STOPPED_GRACE seconds, or running past `timeout`,
    is killed and the run reported as failed. The peak memory is the largest of the `course`
    process's and of its workers' (read while they run: a batch of several submissions is graded
    in worker processes, not in the `course` process)."""
    peak_file = course.parent / f"peak-{secrets.token_hex(4)}"
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    out_path, err_path = course.parent / "stdout.txt", course.parent / "stderr.txt"
    started = time.monotonic()
    problems: list[str] = []
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).parent / "run_grader.py"), str(peak_file),
                                 "autograde", ASSIGNMENT, "--course-dir", str(course), "--seed", str(SEED), *extra],
                                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                cwd=course)
        stopped_since = None
        children_peak = 0
        while proc.poll() is None:
            for child in _trusted_children(proc.pid):
                children_peak = max(children_peak, _vm_hwm_kb(child) or 0)
            now = time.monotonic()
            if now - started > timeout:
                problems.append(f"the batch did not finish within {timeout:g} s")
                break
            if _state(proc.pid) in ("T", "t"):
                stopped_since = stopped_since or now
                if now - stopped_since > STOPPED_GRACE:
                    problems.append("the grader was stopped or traced and never resumed")
                    break
            else:
                stopped_since = None
            time.sleep(0.1)
        if proc.poll() is None:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            proc.wait(timeout=60)
    seconds = time.monotonic() - started
    peak = children_peak / 1024 if children_peak else None
    try:
        peak = max(peak or 0, int(peak_file.read_text()) / 1024)
    except (OSError, ValueError):
        pass
    return Run(proc.returncode, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"),
               seconds, peak, problems)


# ----------------------------------------------------------------------------- observations

def token_processes(token: str) -> list[int]:
    """Processes whose comm or command line carries `token`."""
    found = []
    needle = token.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        for part in ("comm", "cmdline"):
            try:
                if needle in Path(f"/proc/{entry}/{part}").read_bytes():
                    found.append(int(entry))
                    break
            except OSError:
                continue
    return found


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def tree_digest(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """{relative path: kind and content hash} of everything under `root`; no link is followed."""
    out = {}
    if not os.path.lexists(root):
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir.parts and rel_dir.parts[0] in skip:
            dirnames[:] = []
            continue
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            rel = rel_dir / name
            if rel.parts[0] in skip or name.endswith(".pyc"):
                continue
            path = Path(dirpath) / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                out[str(rel)] = "link " + os.readlink(path)
            elif stat.S_ISREG(mode):
                try:
                    out[str(rel)] = "file " + hashlib.sha256(path.read_bytes()).hexdigest()
                except PermissionError:
                    out[str(rel)] = f"file unreadable {os.lstat(path).st_size} {oct(mode)}"
            else:
                out[str(rel)] = f"special {stat.S_IFMT(mode)}"
    return out


def files_named(token: str, places: list[Path], depth: int = 3) -> list[str]:
    """Files or folders whose name carries `token`, down to `depth` levels under each place."""
    found = []
    for place in places:
        base_depth = len(place.parts)
        for dirpath, dirnames, filenames in os.walk(place, onerror=lambda e: None):
            if len(Path(dirpath).parts) - base_depth >= depth:
                dirnames[:] = []
            found.extend(os.path.join(dirpath, n) for n in filenames + dirnames if token in n)
    return found


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection (a network canary)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, addr = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections.append(f"{addr[0]}:{addr[1]}")
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


# ----------------------------------------------------------------------------- results and gradebook

def load_results(course: Path, sid: str) -> dict | None:
    try:
        return json.loads((CourseLayout(course).results_json(sid, ASSIGNMENT)).read_text())
    except (OSError, ValueError):
        return None


def statuses(doc: dict) -> list[tuple[str, str, float]]:
    return [(t["name"], t["status"], t["score"]) for t in doc["extra_data"]["tests"]]


def gradebook_rows(course: Path) -> dict[str, list[tuple[str, float | None]]]:
    """{student: [(grade cell, auto_score), ...]} straight from the gradebook database (what is
    committed: a transaction cut short by SIGKILL leaves a journal, which this connection rolls
    back as the next `course autograde` would; a read-only connection cannot, and fails)."""
    import sqlite3

    db = course / "gradebook.db"
    if not db.is_file():
        return {}
    con = sqlite3.connect(f"file:{db}?mode=rw", uri=True)
    try:
        rows = con.execute(
            "SELECT student.id, base_cell.name, grade.auto_score FROM grade "
            "JOIN base_cell ON grade.cell_id = base_cell.id "
            "JOIN submitted_notebook ON grade.notebook_id = submitted_notebook.id "
            "JOIN submitted_assignment ON submitted_notebook.assignment_id = submitted_assignment.id "
            "JOIN student ON submitted_assignment.student_id = student.id").fetchall()
    finally:
        con.close()
    out: dict[str, list] = {}
    for sid, cell, score in rows:
        out.setdefault(sid, []).append((cell, score))
    return {k: sorted(v) for k, v in out.items()}


def expected_rows(doc: dict) -> list[tuple[str, float]]:
    """The gradebook rows a results.json implies: one per problem (grade id test_<problem>)."""
    return sorted((f"test_{p['problem']}", round(p["score"], 6)) for p in doc["extra_data"]["problems"])


def is_twin_free(attack: Attack) -> bool:
    return attack.twin == NO_NOTEBOOK
