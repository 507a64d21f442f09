"""Benchmark: `course autograde` against `nbgrader autograde` on a synthetic cohort, same run, same files.

    .venv/bin/python tools/bench_autograde.py                      # the full run (see docs/benchmarks.md)
    .venv/bin/python tools/bench_autograde.py --n 20 --repeat 1 --large 0   # quick, for development

What it does, in one process:
1. Builds a cohort of N submissions of the assignment (`cohort(n)`): correct notebooks, the student form of
   every catalogued mistake (tools/submissions.py), a copy that patches numpy's comparisons, and broken
   files (syntax error, a raising cell, a deleted or renamed function, an infinite loop, a process that
   exits, a file that is not a notebook, an empty file). The kinds are interleaved, so any prefix is mixed.
2. Copies the course into two scratch folders in a temporary directory and writes the same cohort into
   both (nbgrader's layout: submitted/<student>/<assignment>/<notebook>, roster.csv listing everyone).
3. nbgrader: `nbgrader generate_assignment` once (setup, not timed in the figures), then
   `nbgrader autograde <a> --force`. Ours: `course autograde <a> --course-dir DIR --force`, and with
   `--workers W` for each W asked when `course autograde --help` offers the flag. Each side runs --repeat
   times, the order alternating; medians are reported. The venv's bin goes first on PATH (alembic).
4. A one-student batch per round on a freshly written submission (`--student`), for both tools: its
   wall clock gives the two-point estimate of fixed and marginal cost, and for ours the time from the
   command's start until that student's results.json and feedback page exist (first feedback). Ours
   once more per round with `course serve` running (a warm worker kept between commands; started and
   stopped around that one command, untimed): its first feedback is reported beside the cold one.
5. With --large M (default 1000): one course-only batch of M submissions per worker setting, with the
   memory of every process sampled over the run (flat or growing); nbgrader is not run on M, its time is
   extrapolated from its own per-submission and fixed cost measured in step 3 (and said so).

Per run: wall clock; CPU of the whole tree (user + system of the command and every descendant it waited
for, from wait4); the resident memory of every process in the tree sampled every 0.05 s (peak per process,
named by its command line); results from results.json (ours) and the gradebook (nbgrader). The machine's
load average is recorded before and after. The report is Markdown on stdout (tables ready to paste into
docs/benchmarks.md) and, with --json FILE, every raw figure as JSON. Not a test: figures depend on the
machine and its load.
"""
from __future__ import annotations

import argparse
import datetime as dt
import functools
import importlib.metadata as md
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_submissions import RAISES_CELL, _delete_solution, _rename, _syntax_error_in
from submissions import (
    ASSIGNMENT,
    CHEAT_CELL,
    LAYER_NORM_CRASHES_PROCESS,
    LN_UNBIASED,
    NOTEBOOK,
    ROOT,
    SWIGLU_INFINITE_LOOP,
    Case,
    build,
    mistake_cell,
)

from assignments.transformer_block.mistakes import catalogue
from autograder.config import load_course
from autograder.cpus import available_cores
from autograder.layout import NBGRADER_CONFIG, ROSTER_FILE, CourseLayout, copy_course
from autograder.toolpath import tool, tool_env

SAMPLE_SECONDS = 0.05
HANG_STUDENT = "hang01"
ON_TIME = "2026-11-16 18:00:00.000000 UTC"     # before the due date: no late penalty on either side
CORRECT_EVERY = 4                               # every 4th submission of the cohort is a correct one
BROKEN_EVERY = 9                                # among the others, every 9th is a broken file
# The scratch course's secret, the same in every run: each student's hidden inputs (and so their score)
# are then the same from one run, branch or machine to the next, and per-student scores can be compared
# across runs. (A fresh secret per run drew new inputs for everyone: s0030's 91.43 vs 89.71 was that.)
BENCH_SECRET = "bench-cohort-secret-0123456789abcdef"

# The targets, checked at the end of the report.
TARGET_MARGINAL_MS_PER_CORE = 40.0
TARGET_RATIO = 25.0
TARGET_TWO_WORKERS = 1.8
TARGET_LARGE_N, TARGET_LARGE_S = 1000, 30.0
TARGET_WORKER_MB = 150.0
TARGET_FIRST_FEEDBACK_S = 0.6


# ----------------------------------------------------------------------------- the cohort

@dataclass(frozen=True)
class Template:
    """One kind of submission: what it is and the bytes of its notebook file."""
    kind: str          # "correct", "mistake", "cheat" or "broken"
    name: str          # the mistake id or the broken case's name
    data: bytes
    filename: str = NOTEBOOK


@dataclass(frozen=True)
class Submission:
    student: str
    template: Template


PYTHON_SCRIPT = b'import numpy as np\n\ndef layer_norm(x, gamma, beta, eps=1e-5):\n    return x\n'


def hang_template() -> Template:
    """An infinite loop in swiglu_ffn: its cost is set by course.yml's limits, not by the grader."""
    return Template("broken", "infinite_loop", build(Case("infinite_loop",
                                                          variants=(("swiglu_ffn", SWIGLU_INFINITE_LOOP),))))


def broken_templates(hang: bool = False) -> list[Template]:
    """Broken files, the most instructive first (a small cohort gets the first few); the infinite loop
    only with `hang`."""
    def t(name: str, case: Case) -> Template:
        return Template("broken", name, build(case))
    return [
        t("syntax_error", Case("syntax_error", edit=_syntax_error_in("silu"))),
        *([hang_template()] if hang else []),
        t("cell_raises", Case("cell_raises", extra_cells=(RAISES_CELL,))),
        t("missing_function", Case("missing_function", edit=_delete_solution("count_block_params"))),
        Template("broken", "not_a_notebook", PYTHON_SCRIPT),       # a Python script saved as .ipynb
        t("renamed_function", Case("renamed_function", edit=_rename("layer_norm", "layernorm"))),
        t("process_exits", Case("process_exits", variants=(("layer_norm", LAYER_NORM_CRASHES_PROCESS),))),
        Template("broken", "empty_file", b""),
    ]


@functools.cache
def templates(hang: bool = False) -> tuple[tuple[Template, ...], tuple[Template, ...]]:
    """(correct, others): the correct notebook, and every mistake, the patching copy and the broken files,
    interleaved so that broken files come every BROKEN_EVERY places."""
    correct = [Template("correct", "correct", build(Case("correct")))]
    by_function: dict[str, list[Template]] = {}
    for m in catalogue.mistakes():
        function, code = mistake_cell(m.id)
        by_function.setdefault(function, []).append(
            Template("mistake", m.id, build(Case(m.id, variants=((function, code),)))))
    mistakes = []            # one function after the other, round robin
    while any(by_function.values()):
        for group in by_function.values():
            if group:
                mistakes.append(group.pop(0))
    mistakes.insert(len(mistakes) // 2, Template(
        "cheat", "numpy_patched", build(Case("cheat", variants=(("layer_norm", LN_UNBIASED),),
                                             early_cells=(CHEAT_CELL,)))))
    others: list[Template] = []
    broken = broken_templates(hang)
    while mistakes or broken:
        if broken and len(others) % BROKEN_EVERY == 1:
            others.append(broken.pop(0))
        elif mistakes:
            others.append(mistakes.pop(0))
        else:
            others.append(broken.pop(0))
    return tuple(correct), tuple(others)


def cohort(n: int, prefix: str = "s", hang: bool = False) -> list[Submission]:
    """N submissions: every CORRECT_EVERY-th correct, the rest cycling through `templates()`'s others.
    Every template appears once n reaches one full cycle (about 100)."""
    correct, others = templates(hang)
    out, k = [], 0
    for i in range(n):
        if i % CORRECT_EVERY == 0:
            tpl = correct[0]
        else:
            tpl, k = others[k % len(others)], k + 1
        out.append(Submission(f"{prefix}{i + 1:04d}", tpl))
    return out


def cycle_length(hang: bool = False) -> int:
    """The cohort size at which every template has appeared once."""
    _, others = templates(hang)
    return len(others) + -(-len(others) // (CORRECT_EVERY - 1))


def write_submission(course: Path, sub: Submission) -> Path:
    folder = CourseLayout(course).submission(sub.student, ASSIGNMENT)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / sub.template.filename).write_bytes(sub.template.data)
    (folder / "timestamp.txt").write_text(ON_TIME)
    return folder


def remove_student(course: Path, student: str) -> None:
    layout = CourseLayout(course)
    for folder in (layout.submission(student, ASSIGNMENT), layout.autograded(student, ASSIGNMENT),
                   layout.feedback(student, ASSIGNMENT)):
        shutil.rmtree(folder.parent if folder.parent.name == student else folder, ignore_errors=True)


STOCK_NBGRADER_CONFIG = """\
# Stock nbgrader: the course's own nbgrader_config.py routes `nbgrader autograde` through this
# project's engine; the benchmark compares with nbgrader as it comes.
c = get_config()  # noqa: F821
c.CourseDirectory.root = {root!r}
c.CourseDirectory.db_url = {db!r}
"""


def make_course(dest: Path, subs: list[Submission], roster_extra: tuple[str, ...] = (),
                stock_nbgrader: bool = False) -> Path:
    """A scratch copy of the course with the cohort under submitted/, everyone on the roster and the
    fixed BENCH_SECRET. With `stock_nbgrader`, its nbgrader_config.py only sets the folder and gradebook
    (nbgrader as it comes)."""
    copy_course(ROOT, dest)
    load_course(dest).secret_file.write_text(BENCH_SECRET + "\n", encoding="utf-8")
    if stock_nbgrader:
        (dest / NBGRADER_CONFIG).write_text(STOCK_NBGRADER_CONFIG.format(
            root=str(dest), db=f"sqlite:///{dest / 'gradebook.db'}"))
    for sub in subs:
        write_submission(dest, sub)
    ids = [s.student for s in subs] + list(roster_extra)
    rows = ["id,first_name,last_name,email"] + [f"{i},Student,{i},{i}@example.edu" for i in ids]
    (dest / ROSTER_FILE).write_text("\n".join(rows) + "\n")
    return dest


def composition(subs: list[Submission]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in subs:
        out[s.template.kind] = out.get(s.template.kind, 0) + 1
    return out


# ----------------------------------------------------------------------------- measuring

def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as fh:
                out.extend(int(x) for x in fh.read().split())
        except OSError:
            pass
    return out


PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
TICK = os.sysconf("SC_CLK_TCK")


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return None


def process_name(pid: int, root: int, root_cmd: str) -> str:
    """A short name for a process from its command line: `-m module`, a script's name, or the program."""
    raw = _read(f"/proc/{pid}/cmdline")
    if raw is None:
        return "?"
    args = [a for a in raw.split("\0") if a]
    cmd = " ".join(args)
    if pid == root:
        return "main: " + _short(args)
    if cmd == root_cmd:
        return "fork of main"
    return _short(args)


def _short(args: list[str]) -> str:
    if not args:
        return "?"
    prog = os.path.basename(args[0])
    if prog.startswith("python"):
        if "-m" in args:
            i = args.index("-m")
            return f"python -m {args[i + 1]}" if i + 1 < len(args) else "python -m"
        if "-c" in args:
            i = args.index("-c")
            code = args[i + 1] if i + 1 < len(args) else ""
            return "python -c " + (code[:40] + "...")
        scripts = [a for a in args[1:] if not a.startswith("-")]
        return f"python {os.path.basename(scripts[0])}" if scripts else "python"
    if prog in ("bwrap",):
        return "bwrap"
    return prog


@dataclass
class ProcessTrace:
    pid: int
    name: str
    first_s: float
    last_s: float = 0.0
    peak_kb: int = 0
    cpu_s: float = 0.0                       # last seen user + system time of this process alone
    samples: list[tuple[float, int]] = field(default_factory=list)


class TreeSampler(threading.Thread):
    """Samples every process of a tree: RSS and CPU per process, and the summed RSS of the tree."""

    def __init__(self, pid: int, started: float, every: float = SAMPLE_SECONDS) -> None:
        super().__init__(daemon=True)
        self.root, self.started, self.every = pid, started, every
        self.procs: dict[int, ProcessTrace] = {}
        self.tree_peak_kb = 0
        self._stop_event = threading.Event()
        self._root_cmd = ""

    def sample(self) -> None:
        now = time.perf_counter() - self.started
        if not self._root_cmd:
            raw = _read(f"/proc/{self.root}/cmdline") or ""
            self._root_cmd = " ".join(a for a in raw.split("\0") if a)
        total, stack, seen = 0, [self.root], set()
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            stat = _read(f"/proc/{pid}/stat")
            statm = _read(f"/proc/{pid}/statm")
            if stat is None or statm is None:
                continue
            try:
                rss = int(statm.split()[1]) * PAGE_KB
                fields = stat.rsplit(")", 1)[1].split()
                cpu = (int(fields[11]) + int(fields[12])) / TICK
            except (IndexError, ValueError):
                continue
            trace = self.procs.get(pid)
            if trace is None:
                trace = self.procs[pid] = ProcessTrace(pid, process_name(pid, self.root, self._root_cmd), now)
            elif trace.name == "fork of main" or trace.name == "?":
                trace.name = process_name(pid, self.root, self._root_cmd)   # a fork may exec later
            trace.last_s, trace.cpu_s = now, max(trace.cpu_s, cpu)
            trace.peak_kb = max(trace.peak_kb, rss)
            trace.samples.append((now, rss))
            total += rss
            stack.extend(_children(pid))
        self.tree_peak_kb = max(self.tree_peak_kb, total)

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.every)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


@dataclass(frozen=True)
class ProcessFigure:
    """One process of a run: peak RSS, its own CPU, its life, and how its RSS moved (flat or not)."""
    name: str
    pid: int
    peak_mb: float
    cpu_s: float
    alive_s: float
    early_mb: float | None     # largest RSS over 10-20% of its life, after start-up (long-lived processes only)
    late_mb: float | None      # largest RSS over the last 10% of its life


@dataclass(frozen=True)
class Run:
    """One timed command."""
    tool: str                  # "nbgrader" or "course"
    scope: str                 # "class", "one", "served" (one, with `course serve` running) or "large"
    workers: int | None        # --workers passed, None when not passed
    n: int                     # submissions in the batch
    round: int
    wall_s: float
    cpu_s: float               # user + system of every process the command started (cgroup; else wait4)
    waited_cpu_s: float        # user + system of the command and the descendants it reaped (wait4)
    cpu_source: str            # "cgroup" or "wait4"
    exit_code: int
    maxrss_mb: float           # ru_maxrss from wait4: the largest single process of the tree
    tree_peak_mb: float        # summed RSS of the tree, sampled
    processes: tuple[ProcessFigure, ...] = ()
    first_feedback_s: float | None = None   # results.json and page of the watched student exist

    @property
    def per_sub_wall_ms(self) -> float:
        return 1000 * self.wall_s / self.n

    @property
    def per_sub_cpu_ms(self) -> float:
        return 1000 * self.cpu_s / self.n


def _figures(sampler: TreeSampler, long_lived: float) -> tuple[ProcessFigure, ...]:
    out = []
    for tr in sampler.procs.values():
        alive = tr.last_s - tr.first_s
        early = late = None
        if alive >= long_lived and len(tr.samples) >= 10:
            # after start-up (imports, first submission): 10-20% of its life, against its last 10%
            a0, a1, b0 = tr.first_s + 0.1 * alive, tr.first_s + 0.2 * alive, tr.last_s - 0.1 * alive
            window = [r for t, r in tr.samples if a0 <= t <= a1] or [r for t, r in tr.samples if t <= a1]
            early = max(window) / 1024
            late = max(r for t, r in tr.samples if t >= b0) / 1024
        out.append(ProcessFigure(tr.name, tr.pid, tr.peak_kb / 1024, tr.cpu_s, alive, early, late))
    return tuple(sorted(out, key=lambda p: -p.peak_mb))


class CpuCgroup:
    """A cgroup holding one command and everything it starts, for its CPU time: processes that are never
    reaped by the command (a sandbox's namespace init, a zygote's children) escape wait4's accounting,
    not the cgroup's. cgroup v1 `cpuacct` or v2 `cpu.stat`; unavailable (None) without the rights."""

    _count = 0

    def __init__(self) -> None:
        CpuCgroup._count += 1
        name = f"bench-autograde-{os.getpid()}-{CpuCgroup._count}"
        self.path: Path | None = None
        self.v2 = False
        candidates = [(Path("/sys/fs/cgroup/cpuacct") / name, False)]
        own = next((ln.split(":", 2)[2] for ln in (_read("/proc/self/cgroup") or "").splitlines()
                    if ln.startswith("0::")), None)
        if own is not None and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            candidates.insert(0, (Path("/sys/fs/cgroup") / own.lstrip("/") / name, True))
        for path, v2 in candidates:
            try:
                path.mkdir()
            except OSError:
                continue
            self.path, self.v2 = path, v2
            break

    def enter(self) -> None:
        """Called in the child before exec: move it into the cgroup."""
        if self.path is not None:
            with open(self.path / "cgroup.procs", "w") as fh:
                fh.write(str(os.getpid()))

    def cpu_s(self) -> float | None:
        if self.path is None:
            return None
        try:
            if self.v2:
                for line in (self.path / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec"):
                        return int(line.split()[1]) / 1e6
                return None
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        if self.path is not None:
            for _ in range(50):
                try:
                    self.path.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)       # the last processes are still leaving


def run_timed(cmd: list[str], *, cwd: Path, env: dict, log: Path, tool_name: str, scope: str,
              workers: int | None, n: int, rnd: int, watch: tuple[Path, ...] = (), timeout: float = 3600) -> Run:
    """Run a command to completion, sampling its process tree; with `watch`, also the time at which
    every watched file exists. After `timeout` seconds the command's process group is killed (exit -9)."""
    first_feedback: list[float] = []

    def watcher(started: float, done: threading.Event) -> None:
        while not done.is_set():
            if all(p.exists() for p in watch):
                first_feedback.append(time.perf_counter() - started)
                return
            time.sleep(0.002)

    cgroup = CpuCgroup()
    with open(log, "wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=cgroup.enter if cgroup.path else None)
        sampler = TreeSampler(proc.pid, started)
        sampler.start()
        done = threading.Event()
        wt = threading.Thread(target=watcher, args=(started, done), daemon=True) if watch else None
        if wt:
            wt.start()
        killer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        killer.daemon = True
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
            killer.cancel()
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)       # interrupted: the command's own process group goes too
            proc.wait()
            cgroup.remove()
            raise
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.stop()
        done.set()
        if wt:
            wt.join()
    if watch and not first_feedback and all(p.exists() for p in watch):
        first_feedback.append(wall)
    waited_cpu = usage.ru_utime + usage.ru_stime
    time.sleep(0.05)                     # processes killed at the end finish leaving the cgroup
    tree_cpu = cgroup.cpu_s()
    cgroup.remove()
    return Run(tool=tool_name, scope=scope, workers=workers, n=n, round=rnd, wall_s=wall,
               cpu_s=tree_cpu if tree_cpu is not None else waited_cpu, waited_cpu_s=waited_cpu,
               cpu_source="cgroup" if tree_cpu is not None else "wait4", exit_code=proc.returncode,
               maxrss_mb=usage.ru_maxrss / 1024, tree_peak_mb=sampler.tree_peak_kb / 1024,
               processes=_figures(sampler, long_lived=max(1.0, 0.5 * wall)),
               first_feedback_s=first_feedback[0] if first_feedback else None)


def workers_supported(env: dict) -> bool:
    """Whether this `course autograde` takes --workers (the flag is detected, not assumed)."""
    out = subprocess.run([tool("course"), "autograde", "--help"], env=env, capture_output=True, text=True)
    return "--workers" in out.stdout


def course_cmd(course: Path, *extra: str, workers: int | None = None) -> list[str]:
    cmd = [tool("course"), "autograde", ASSIGNMENT, "--course-dir", str(course), *extra]
    return cmd + (["--workers", str(workers)] if workers is not None else [])


def start_server(course: Path, env: dict, log: Path, timeout: float = 300.0) -> subprocess.Popen:
    """`course serve` for the course, once it says it is serving (RuntimeError if it does not);
    its output goes on into `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([tool("course"), "serve", ASSIGNMENT, "--course-dir", str(course), "--idle-minutes", "30"],
                            cwd=course, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    got: list[str] = []

    def pump() -> None:
        with open(log, "w") as out:
            for line in proc.stdout:
                out.write(line)
                out.flush()
                got.append(line)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not any(line.startswith("serving ") for line in got):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_server(proc)
            raise RuntimeError("".join(got)[-500:] or f"exit status {proc.poll()}")
        time.sleep(0.05)
    return proc


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def nbgrader_cmd(*extra: str) -> list[str]:
    return [tool("nbgrader"), "autograde", ASSIGNMENT, *extra]


# ----------------------------------------------------------------------------- results

def our_results(course: Path, students: list[str]) -> dict[str, dict]:
    layout, out = CourseLayout(course), {}
    for s in students:
        try:
            data = json.loads(layout.results_json(s, ASSIGNMENT).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            out[s] = {"score": None, "state": "no results.json", "seconds": None}
            continue
        extra = data.get("extra_data", {})
        out[s] = {"score": extra.get("raw_score", data.get("score")), "state": extra.get("state", "?"),
                  "seconds": data.get("execution_time")}
    return out


def nbgrader_failures(log: Path) -> list[str]:
    """Students nbgrader reported an error for, from its log."""
    text = log.read_text(encoding="utf-8", errors="replace")
    return sorted(set(re.findall(r"error processing assignment '[^']*' for student '([^']+)'", text)))


def nbgrader_scores(course: Path, students: list[str]) -> dict[str, float | None]:
    from nbgrader.api import Gradebook, MissingEntry
    out: dict[str, float | None] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for s in students:
            try:
                out[s] = gb.find_submission(ASSIGNMENT, s).score
            except MissingEntry:
                out[s] = None
    return out


# ----------------------------------------------------------------------------- machine

def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "not installed"


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_info() -> dict:
    model = "?"
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        branch = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit, dirty, branch = "?", "", "?"
    return {
        "date (UTC)": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"),
        "commit": commit + (" (modified)" if dirty else ""), "branch": branch,
        "cpus": len(os.sched_getaffinity(0)), "cpu model": model, "python": platform.python_version(),
        "numpy": _version("numpy"), "nbgrader": _version("nbgrader"), "pytest": _version("pytest"),
    }


# ----------------------------------------------------------------------------- the benchmark

@dataclass
class Bench:
    args: argparse.Namespace
    env: dict
    tmp: Path
    workers: list[int | None]
    runs: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    load: list[tuple[str, str]] = field(default_factory=list)
    scores: dict = field(default_factory=dict)
    generate_s: float | None = None
    command: str = ""
    cohort: list[Submission] = field(default_factory=list)
    courses: tuple[Path | None, Path | None] = (None, None)
    nbgrader_failed: list[str] = field(default_factory=list)

    def log(self, msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    def timed(self, cmd: list[str], **kw: object) -> Run:
        return run_timed(cmd, timeout=self.args.timeout, **kw)  # type: ignore[arg-type]

    def record(self, run: Run) -> Run:
        self.runs.append(run)
        if run.exit_code < 0:
            self.notes.append(f"`{run.tool} autograde` ({run.scope}, {_w(run.workers)}, N={run.n}) was killed "
                              f"(signal {-run.exit_code}) after {run.wall_s:.0f} s: no figure is derived from it.")
        ff = f"  first feedback {run.first_feedback_s:.3f} s" if run.first_feedback_s is not None else ""
        self.log(f"  {run.tool:8s} {run.scope:5s} w={run.workers if run.workers is not None else '-'} "
                 f"n={run.n:<5d} round {run.round}: {run.wall_s:7.2f} s wall {run.cpu_s:7.2f} s CPU "
                 f"exit {run.exit_code}  largest {run.maxrss_mb:.0f} MB{ff}")
        return run

    def note_load(self, when: str) -> None:
        self.load.append((when, _uptime()))
        self.log(f"load {when}: {self.load[-1][1]}")

    def side_by_side(self) -> None:
        a = self.args
        subs = cohort(a.n, hang=a.hang_in_cohort)
        self.cohort = subs
        fresh = [f"fresh{r:02d}" for r in range(1, a.repeat + 1)]
        served = [f"served{r:02d}" for r in range(1, a.repeat + 1)]
        extra = (*fresh, *served, HANG_STUDENT)
        ours = make_course(self.tmp / "ours", subs, extra)
        nbg = make_course(self.tmp / "nbgrader", subs, extra, stock_nbgrader=True) if not a.no_nbgrader else None
        self.courses = (ours, nbg)
        logs = self.tmp / "logs"
        if nbg is not None:
            t = time.perf_counter()
            gen = subprocess.run([tool("nbgrader"), "generate_assignment", ASSIGNMENT, "--force"], cwd=nbg,
                                 env=self.env, capture_output=True, text=True)
            self.generate_s = time.perf_counter() - t
            if gen.returncode != 0:
                raise SystemExit(f"nbgrader generate_assignment failed:\n{gen.stdout[-2000:]}{gen.stderr[-2000:]}")
        # untimed warm-up: the first run creates the gradebook and fills the file cache
        warm = Submission("warmup", templates()[0][0])
        for course, cmd in ((ours, course_cmd(ours, "--student", "warmup")),
                            (nbg, nbgrader_cmd("--student", "warmup"))):
            if course is None:
                continue
            write_submission(course, warm)
            subprocess.run(cmd, cwd=course, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            remove_student(course, "warmup")
        fresh_sub = templates()[0][0]
        for rnd in range(1, a.repeat + 1):
            sides = ["course", "nbgrader"] if rnd % 2 else ["nbgrader", "course"]
            for side in sides:
                if side == "nbgrader":
                    if nbg is None:
                        continue
                    self.record(self.timed(nbgrader_cmd("--force"), cwd=nbg, env=self.env,
                                          log=logs / f"nbgrader-class-{rnd}.log", tool_name="nbgrader",
                                          scope="class", workers=None, n=len(subs), rnd=rnd))
                    if rnd == a.repeat:
                        self.scores["nbgrader"] = nbgrader_scores(nbg, [s.student for s in subs])
                        self.nbgrader_failed = nbgrader_failures(logs / f"nbgrader-class-{rnd}.log")
                    sid = fresh[rnd - 1]
                    write_submission(nbg, Submission(sid, fresh_sub))
                    self.record(self.timed(nbgrader_cmd("--force", "--student", sid), cwd=nbg, env=self.env,
                                          log=logs / f"nbgrader-one-{rnd}.log", tool_name="nbgrader",
                                          scope="one", workers=None, n=1, rnd=rnd))
                    remove_student(nbg, sid)
                    continue
                for w in self.workers:
                    self.record(self.timed(course_cmd(ours, "--force", workers=w), cwd=ours, env=self.env,
                                          log=logs / f"course-class-w{w}-{rnd}.log", tool_name="course",
                                          scope="class", workers=w, n=len(subs), rnd=rnd))
                    self.scores.setdefault("course", {})[f"w{w}-r{rnd}"] = our_results(
                        ours, [s.student for s in subs])
                sid = fresh[rnd - 1]
                write_submission(ours, Submission(sid, fresh_sub))
                layout = CourseLayout(ours)
                watch = (layout.results_json(sid, ASSIGNMENT),
                         layout.feedback(sid, ASSIGNMENT) / NOTEBOOK.replace(".ipynb", ".html"))
                self.record(self.timed(course_cmd(ours, "--student", sid), cwd=ours,
                                      env=self.env, log=logs / f"course-one-{rnd}.log", tool_name="course",
                                      scope="one", workers=None, n=1, rnd=rnd, watch=watch))
                remove_student(ours, sid)
                self.served_one(ours, Submission(served[rnd - 1], fresh_sub), rnd)

    def served_one(self, ours: Path, sub: Submission, rnd: int) -> None:
        """One fresh submission graded by `course autograde --student` while `course serve` keeps a
        warm worker for the assignment (started before, untimed; stopped after). The command's own
        figures: the server's grading CPU is not in them."""
        logs = self.tmp / "logs"
        try:
            server = start_server(ours, self.env, logs / f"course-serve-{rnd}.log")
        except RuntimeError as exc:
            self.notes.append(f"course serve did not start (round {rnd}): {exc}")
            return
        try:
            write_submission(ours, sub)
            layout = CourseLayout(ours)
            watch = (layout.results_json(sub.student, ASSIGNMENT),
                     layout.feedback(sub.student, ASSIGNMENT) / NOTEBOOK.replace(".ipynb", ".html"))
            log = logs / f"course-served-{rnd}.log"
            self.record(self.timed(course_cmd(ours, "--student", sub.student), cwd=ours, env=self.env, log=log,
                                   tool_name="course", scope="served", workers=None, n=1, rnd=rnd, watch=watch))
            if "warm worker of `course serve`" not in log.read_text(errors="replace"):
                self.notes.append(f"round {rnd}: the --student command did not grade on `course serve`")
            remove_student(ours, sub.student)
        finally:
            stop_server(server)

    def hang(self) -> None:
        """The infinite loop, graded alone by each tool (once): what one hanging submission costs."""
        if self.args.hang_in_cohort:
            return
        ours, nbg = self.courses
        sub = Submission(HANG_STUDENT, hang_template())
        for course, cmd, name in ((ours, course_cmd(ours, "--student", HANG_STUDENT),
                                   "course"),
                                  (nbg, nbgrader_cmd("--force", "--student", HANG_STUDENT), "nbgrader")):
            if course is None:
                continue
            write_submission(course, sub)
            self.record(self.timed(cmd, cwd=course, env=self.env, log=self.tmp / "logs" / f"{name}-hang.log",
                                  tool_name=name, scope="hang", workers=None,
                                  n=1, rnd=1))
            remove_student(course, HANG_STUDENT)

    def large(self) -> None:
        a = self.args
        if a.large <= 0:
            return
        subs = cohort(a.large, prefix="L", hang=a.hang_in_cohort)
        big = make_course(self.tmp / "large", subs)
        subprocess.run(course_cmd(big, "--student", subs[0].student), cwd=big,
                       env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)   # warm-up
        for w in self.workers:
            self.note_load(f"before the {a.large} run ({_w(w)})")
            self.record(self.timed(course_cmd(big, "--force", workers=w), cwd=big, env=self.env,
                                  log=self.tmp / "logs" / f"course-large-w{w}.log", tool_name="course",
                                  scope="large", workers=w, n=len(subs), rnd=1))
            res = our_results(big, [s.student for s in subs])
            missing = [s for s, r in res.items() if r["score"] is None]
            if missing:
                self.notes.append(f"large run (workers {w}): {len(missing)} submissions without results.json")


# ----------------------------------------------------------------------------- summarising

def _w(workers: int | None) -> str:
    return "no --workers" if workers is None else f"--workers {workers}"


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _sel(runs: list[Run], tool_name: str, scope: str, workers: int | None = None, any_workers: bool = False
         ) -> list[Run]:
    return [r for r in runs if r.tool == tool_name and r.scope == scope and (any_workers or r.workers == workers)]


@dataclass(frozen=True)
class Side:
    """Medians of one tool's class batches at one worker setting, and its marginal cost per submission."""
    label: str
    n: int
    wall: float
    cpu: float
    walls: tuple[float, ...]
    largest_mb: float
    tree_mb: float
    marginal_wall: float
    marginal_cpu: float
    marginal_from: str        # how the marginal cost was estimated

    @property
    def fixed_wall(self) -> float:
        return self.wall - self.n * self.marginal_wall

    @property
    def throughput(self) -> float:
        return self.n / self.wall


def side(runs: list[Run], tool_name: str, workers: int | None) -> Side | None:
    """A tool's class batches at one worker setting. Marginal cost: from the class batch and the large
    batch at the same setting when there is one (two sizes of the same cohort), else from the class batch
    and the one-student batches."""
    cls = _sel(runs, tool_name, "class", workers)
    if not cls:
        return None
    n, wall, cpu = cls[0].n, med([r.wall_s for r in cls]), med([r.cpu_s for r in cls])
    large = [r for r in _sel(runs, tool_name, "large", workers) if r.exit_code >= 0]
    one = _sel(runs, tool_name, "one", any_workers=True)
    if large and large[0].n > n:
        m = large[0].n
        mw, mc = (med([r.wall_s for r in large]) - wall) / (m - n), (med([r.cpu_s for r in large]) - cpu) / (m - n)
        how = f"N={n} and N={m}"
    elif one and n > 1:
        mw = (wall - med([r.wall_s for r in one])) / (n - 1)
        mc = (cpu - med([r.cpu_s for r in one])) / (n - 1)
        how = f"N={n} and one student"
    else:
        mw, mc, how = wall / n, cpu / n, "batch / N"
    label = tool_name if workers is None else f"{tool_name} --workers {workers}"
    return Side(label, n, wall, cpu, tuple(r.wall_s for r in cls), max(r.maxrss_mb for r in cls),
                max(r.tree_peak_mb for r in cls), mw, mc, how)


def memory_by_name(runs: list[Run]) -> list[tuple[str, int, float, float]]:
    """(process name, how many, largest peak MB, CPU seconds summed) over the runs, largest first."""
    agg: dict[str, list[float]] = {}
    for r in runs:
        for p in r.processes:
            a = agg.setdefault(p.name, [0, 0.0, 0.0])
            a[0] += 1
            a[1] = max(a[1], p.peak_mb)
            a[2] += p.cpu_s
    return sorted(((k, int(v[0]), v[1], v[2]) for k, v in agg.items()), key=lambda t: -t[2])


def render(b: Bench, machine: dict) -> tuple[str, dict]:
    """The Markdown report and the target verdicts."""
    a, runs = b.args, b.runs
    L: list[str] = []
    add = L.append
    add(f"### Run of {machine['date (UTC)']} UTC, {machine['branch']} at `{machine['commit']}`")
    add("")
    add(f"Command: `{b.command}`  ")
    add(f"Machine: {machine['cpus']} CPUs ({machine['cpu model']}), Python {machine['python']}, numpy "
        f"{machine['numpy']}, nbgrader {machine['nbgrader']}, pytest {machine['pytest']}.  ")
    for when, up in b.load:
        add(f"Load {when}: `{up}`  ")
    comp = composition(b.cohort)
    add(f"Cohort of {len(b.cohort)}: " + ", ".join(f"{v} {k}" for k, v in sorted(comp.items()))
        + f" (every template appears once the cohort reaches {cycle_length(a.hang_in_cohort)}). "
        + ("`course autograde` takes `--workers`." if b.workers != [None]
           else "`course autograde` has no `--workers` here: one serial batch."))
    add("")
    add(f"Medians of {a.repeat} rounds. Marginal cost per submission: the difference between two batch sizes "
        "over the difference in N (medians); fixed = batch - N x marginal. CPU is user + system of "
        "every process the command started: "
        + ("measured in a cgroup around the command (processes the command never reaps, like the sandbox's, "
           "included)." if all(r.cpu_source == "cgroup" for r in runs) else
           "from wait4 (**only the descendants the command reaped**: no cgroup could be made here)."))
    add("")
    add("| batch | N | wall (median) | wall per sub | CPU per sub | marginal wall | marginal CPU | marginal from "
        "| fixed | throughput | rounds (s) | largest process | tree peak |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    sides: dict[str, Side] = {}
    for tool_name, ws in (("nbgrader", [None]), ("course", b.workers)):
        for w in ws:
            s = side(runs, tool_name, w)
            if s is None:
                continue
            sides[s.label] = s
            add(f"| `{s.label}` | {s.n} | {s.wall:.2f} s | {1000 * s.wall / s.n:.0f} ms | "
                f"{1000 * s.cpu / s.n:.0f} ms | {1000 * s.marginal_wall:.0f} ms | {1000 * s.marginal_cpu:.0f} ms | "
                f"{s.marginal_from} | {s.fixed_wall:.2f} s | {s.throughput:.1f}/s | "
                f"{', '.join(f'{x:.2f}' for x in s.walls)} | "
                f"{s.largest_mb:.0f} MB | {s.tree_mb:.0f} MB |")
    one_c = _sel(runs, "course", "one", any_workers=True)
    one_n = _sel(runs, "nbgrader", "one")
    if one_c or one_n:
        add("")
        add("| one fresh submission | wall (median) | CPU | first feedback (results.json + page) | rounds (s) |")
        add("|---|---|---|---|---|")
        one_s = _sel(runs, "course", "served", any_workers=True)
        for label, rs in (("nbgrader autograde --student", one_n), ("course autograde --student", one_c),
                          ("course autograde --student, with course serve running", one_s)):
            if rs:
                ff = [r.first_feedback_s for r in rs if r.first_feedback_s is not None]
                add(f"| `{label}` | {med([r.wall_s for r in rs]):.2f} s | {med([r.cpu_s for r in rs]):.2f} s | "
                    + (f"{med(ff):.3f} s" if ff else "-") + f" | {', '.join(f'{r.wall_s:.2f}' for r in rs)} |")
    hangs = [r for r in runs if r.scope == "hang"]
    if hangs:
        add("")
        add("The infinite loop (`while True: pass` in swiglu_ffn), graded alone and kept out of the cohort: "
            "its cost is set by the time limits (ours: course.yml `cell_seconds`, `call_seconds`; nbgrader: "
            "its cell timeout), not by the grader. "
            + "; ".join(f"`{r.tool} --student`: {r.wall_s:.1f} s wall, {r.cpu_s:.1f} s CPU" for r in hangs) + ".")
    nbs = sides.get("nbgrader")
    ratios = {}
    if nbs:
        add("")
        add("| ratio nbgrader / course, same cohort, same run | wall | CPU | marginal wall | marginal CPU |")
        add("|---|---|---|---|---|")
        for label, s in sides.items():
            if label == "nbgrader":
                continue
            ratios[label] = (nbs.wall / s.wall, nbs.cpu / s.cpu)
            add(f"| `{label}` | {nbs.wall / s.wall:.1f}x | {nbs.cpu / s.cpu:.1f}x | "
                f"{nbs.marginal_wall / s.marginal_wall:.1f}x | {nbs.marginal_cpu / s.marginal_cpu:.1f}x |")
    large = _sel(runs, "course", "large", any_workers=True)
    if large:
        add("")
        add("| large batch (course only) | N | wall | wall per sub | CPU per sub | throughput | nbgrader, "
            "extrapolated | largest process | tree peak | exit |")
        add("|---|---|---|---|---|---|---|---|---|---|")
        for r in large:
            if r.exit_code < 0:
                add(f"| `course` {_w(r.workers)} | {r.n} | killed after {r.wall_s:.0f} s | - | - | - | - | "
                    f"{r.maxrss_mb:.0f} MB | {r.tree_peak_mb:.0f} MB | {r.exit_code} |")
                continue
            extra = (f"{nbs.fixed_wall + r.n * nbs.marginal_wall:.0f} s (from N={nbs.n})" if nbs else "not run")
            add(f"| `course --workers {r.workers}` | {r.n} | {r.wall_s:.1f} s | {r.per_sub_wall_ms:.0f} ms | "
                f"{r.per_sub_cpu_ms:.0f} ms | {r.n / r.wall_s:.1f}/s | {extra} | {r.maxrss_mb:.0f} MB | "
                f"{r.tree_peak_mb:.0f} MB | {r.exit_code} |" if r.workers is not None else
                f"| `course` | {r.n} | {r.wall_s:.1f} s | {r.per_sub_wall_ms:.0f} ms | {r.per_sub_cpu_ms:.0f} ms | "
                f"{r.n / r.wall_s:.1f}/s | {extra} | {r.maxrss_mb:.0f} MB | {r.tree_peak_mb:.0f} MB | {r.exit_code} |")
        add("")
        add("Processes of the large batch that lived through most of it: largest RSS over 10-20% of their life "
            "(after start-up) against the last 10% (flat or growing).")
        add("")
        add("| run | process | peak RSS | at 10-20% | last 10% | growth | own CPU |")
        add("|---|---|---|---|---|---|---|")
        for r in large:
            for p in r.processes:
                if p.early_mb is not None and p.late_mb is not None:
                    add(f"| {_w(r.workers)} | `{p.name}` (pid {p.pid}) | {p.peak_mb:.0f} MB | {p.early_mb:.0f} MB | "
                        f"{p.late_mb:.0f} MB | {p.late_mb - p.early_mb:+.0f} MB | {p.cpu_s:.1f} s |")
    add("")
    add("Peak RSS per process, by name, over every run of each tool (count = processes seen by the sampler):")
    add("")
    add("| tool | process | count | largest peak | CPU seen (sum) |")
    add("|---|---|---|---|---|")
    for tool_name in ("nbgrader", "course"):
        for name, count, peak, cpu in memory_by_name([r for r in runs if r.tool == tool_name])[:8]:
            if name == "?":
                continue
            add(f"| {tool_name} | `{name}` | {count} | {peak:.0f} MB | {cpu:.1f} s |")
    # scores: identical across course runs, nbgrader's beside ours per kind
    course_scores = b.scores.get("course", {})
    if course_scores:
        first = next(iter(course_scores.values()))
        same = all({k: v["score"] for k, v in s.items()} == {k: v["score"] for k, v in first.items()}
                   for s in course_scores.values())
        add("")
        add(f"Our scores identical across all {len(course_scores)} class batches (every worker setting and round): "
            f"**{'yes' if same else 'NO'}**.")
        states: dict[str, int] = {}
        for v in first.values():
            states[v["state"]] = states.get(v["state"], 0) + 1
        add("Our states: " + ", ".join(f"{k} {v}" for k, v in sorted(states.items())) + ".")
        secs = sorted(v["seconds"] for v in first.values() if v["seconds"] is not None)
        kind_of = {x.student: x.template.name for x in b.cohort}
        top = sorted(((v["seconds"], k) for k, v in first.items() if v["seconds"] is not None), reverse=True)[:2]
        slowest = "slowest: " + ", ".join(f"{kind_of.get(k, k)} {1000 * t:.0f} ms" for t, k in top)
        if secs:
            add(f"Our per-submission grading time from results.json: median {1000 * med(secs):.0f} ms, "
                f"90th percentile {1000 * secs[int(0.9 * (len(secs) - 1))]:.0f} ms, max {1000 * secs[-1]:.0f} ms"
                f" ({slowest}).")
        nbsc = b.scores.get("nbgrader")
        if nbsc:
            cheat = [s.student for s in b.cohort if s.template.kind == "cheat"]
            plain = [s.student for s in b.cohort if s.template.name == "layer_norm.unbiased_variance"]
            if cheat and plain:
                add(f"Patched numpy (`{cheat[0]}`) against the same mistake without the patch (`{plain[0]}`): "
                    f"nbgrader {nbsc.get(cheat[0])} vs {nbsc.get(plain[0])}, ours {first[cheat[0]]['score']} vs "
                    f"{first[plain[0]]['score']}.")
    if b.nbgrader_failed:
        kind_of = {x.student: x.template.name for x in b.cohort}
        add("")
        add("nbgrader reported an error for (hence its exit code 1; it went on with the others): "
            + ", ".join(f"{s} ({kind_of.get(s, '?')})" for s in b.nbgrader_failed) + ".")
    for note in b.notes:
        add("")
        add(note)
    verdicts = targets(b, sides, ratios)
    add("")
    add("| target (issue) | measured | verdict |")
    add("|---|---|---|")
    for t_name, measured, verdict in verdicts:
        add(f"| {t_name} | {measured} | {verdict} |")
    return "\n".join(L), {"sides": {k: asdict(v) for k, v in sides.items()}, "targets": verdicts}


def _verdict(ok: bool, miss: str) -> str:
    return "met" if ok else f"**missed** {miss}"


def targets(b: Bench, sides: dict[str, Side], ratios: dict) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    name = f"marginal cost <= {TARGET_MARGINAL_MS_PER_CORE:.0f} ms per submission per core"
    cores = available_cores()       # as `course autograde --workers` counts them (affinity, cgroup quota)

    def per_core(s: Side) -> float:
        return 1000 * s.marginal_wall * max(1, min(label_workers(s.label), cores))

    ours = [s for k, s in sides.items() if k != "nbgrader" and s.marginal_wall > 0]
    if ours:
        best = min(ours, key=per_core)
        pc = per_core(best)
        out.append((name, f"`{best.label}`: {1000 * best.marginal_wall:.0f} ms wall x "
                    f"{max(1, min(label_workers(best.label), cores))} core(s) = {pc:.0f} ms "
                    f"(marginal CPU {1000 * best.marginal_cpu:.0f} ms; {best.marginal_from})",
                    _verdict(pc <= TARGET_MARGINAL_MS_PER_CORE,
                             f"by {pc - TARGET_MARGINAL_MS_PER_CORE:.0f} ms "
                             f"({pc / TARGET_MARGINAL_MS_PER_CORE:.1f}x)")))
    elif any(k != "nbgrader" for k in sides):
        out.append((name, "not measurable: the two batch sizes gave no positive difference", "not measured"))
    if ratios:
        label, (rw, rc) = max(ratios.items(), key=lambda kv: kv[1][0])
        worst = min(rw, rc)
        out.append((f">= {TARGET_RATIO:.0f}x nbgrader's throughput, wall and CPU",
                    f"`{label}`: {rw:.1f}x wall, {rc:.1f}x CPU",
                    _verdict(worst >= TARGET_RATIO, f"at {worst:.1f}x: {TARGET_RATIO / worst:.1f}x short")))
    w1 = next((s for k, s in sides.items() if k.endswith("--workers 1")), None)
    w2 = next((s for k, s in sides.items() if k.endswith("--workers 2")), None)
    if w1 and w2:
        sp = w1.wall / w2.wall
        out.append((f"2 workers >= {TARGET_TWO_WORKERS}x one worker", f"{sp:.2f}x (class batch medians)",
                    _verdict(sp >= TARGET_TWO_WORKERS, f"by {TARGET_TWO_WORKERS - sp:.2f}")))
    else:
        out.append((f"2 workers >= {TARGET_TWO_WORKERS}x one worker", "not measurable (no --workers)", "not measured"))
    large = [r for r in _sel(b.runs, "course", "large", any_workers=True) if r.exit_code >= 0]
    if large:
        best_l = min(large, key=lambda r: r.wall_s)
        t = best_l.wall_s * TARGET_LARGE_N / best_l.n
        scaled = "" if best_l.n == TARGET_LARGE_N else f" (scaled from N={best_l.n})"
        out.append((f"{TARGET_LARGE_N} submissions in < {TARGET_LARGE_S:.0f} s on 2 cores",
                    f"{t:.1f} s{scaled}, {_w(best_l.workers)}",
                    _verdict(t < TARGET_LARGE_S, f"by {t - TARGET_LARGE_S:.1f} s ({t / TARGET_LARGE_S:.1f}x)")))
        peak, grow, peak_name, grow_name = 0.0, 0.0, "", ""
        for r in large:
            for p in r.processes:
                if p.early_mb is not None and p.late_mb is not None:
                    if p.peak_mb > peak:
                        peak, peak_name = p.peak_mb, p.name
                    if p.late_mb - p.early_mb > grow:
                        grow, grow_name = p.late_mb - p.early_mb, p.name
        out.append((f"peak <= {TARGET_WORKER_MB:.0f} MB per worker process, flat over {best_l.n}",
                    f"largest long-lived process {peak:.0f} MB (`{peak_name}`), largest growth after start-up "
                    f"{grow:+.0f} MB" + (f" (`{grow_name}`)" if grow_name else ""),
                    _verdict(peak <= TARGET_WORKER_MB and grow <= 10,
                             f"by {peak - TARGET_WORKER_MB:.0f} MB" if peak > TARGET_WORKER_MB
                             else f"(grew {grow:.0f} MB)")))
    ff = [r.first_feedback_s for r in _sel(b.runs, "course", "one", any_workers=True) if r.first_feedback_s]
    if ff:
        m = med(ff)
        out.append((f"first feedback within {TARGET_FIRST_FEEDBACK_S} s of the command starting",
                    f"{m:.3f} s (median of {len(ff)})",
                    _verdict(m <= TARGET_FIRST_FEEDBACK_S, f"by {m - TARGET_FIRST_FEEDBACK_S:.2f} s "
                             f"({m / TARGET_FIRST_FEEDBACK_S:.1f}x)")))
    ff = [r.first_feedback_s for r in _sel(b.runs, "course", "served", any_workers=True) if r.first_feedback_s]
    if ff:
        m = med(ff)
        out.append((f"first feedback within {TARGET_FIRST_FEEDBACK_S} s, with `course serve` running",
                    f"{m:.3f} s (median of {len(ff)}; rounds {', '.join(f'{x:.3f}' for x in ff)})",
                    _verdict(m <= TARGET_FIRST_FEEDBACK_S, f"by {m - TARGET_FIRST_FEEDBACK_S:.2f} s")))
    return out


def label_workers(label: str) -> int:
    """The worker count in a side's label (`course --workers 2`); 1 when none was passed."""
    return int(label.rsplit(" ", 1)[1]) if "--workers" in label else 1


# ----------------------------------------------------------------------------- main

def parse_workers(text: str) -> list[int]:
    try:
        ws = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--workers: {text!r} is not a comma-separated list of numbers") from exc
    if not ws or any(w < 1 for w in ws):
        raise argparse.ArgumentTypeError("--workers: each value must be at least 1")
    return ws


def to_json(b: Bench, machine: dict, extra: dict) -> str:
    """Every raw figure of a run (read back by `from_json`)."""
    return json.dumps({
        "machine": machine, "command": b.command, "load": b.load, "workers": b.workers,
        "cohort": [{"student": s.student, "kind": s.template.kind, "name": s.template.name} for s in b.cohort],
        "runs": [asdict(r) for r in b.runs], "scores": b.scores, "notes": b.notes,
        "nbgrader_failed": b.nbgrader_failed, **extra,
    }, indent=1, default=str) + "\n"


def from_json(path: Path) -> tuple[Bench, dict]:
    """A finished run read back from its --json file, to render its report again."""
    data = json.loads(path.read_text())
    runs = []
    for r in data["runs"]:
        procs = tuple(ProcessFigure(**p) for p in r.pop("processes"))
        runs.append(Run(**r, processes=procs))
    cohort_ = [Submission(c["student"], Template(c["kind"], c["name"], b"")) for c in data["cohort"]]
    args = argparse.Namespace(n=len(cohort_), repeat=max((r.round for r in runs), default=1),
                              hang_in_cohort=any(c.template.name == "infinite_loop" for c in cohort_))
    b = Bench(args, {}, path.parent, data["workers"], runs=runs, notes=list(data.get("notes", [])),
              load=[tuple(x) for x in data["load"]], scores=data["scores"], command=data["command"],
              cohort=cohort_, nbgrader_failed=list(data.get("nbgrader_failed", [])))
    for r in runs:
        if r.exit_code < 0 and not any(f"after {r.wall_s:.0f} s" in n for n in b.notes):
            b.notes.append(f"`{r.tool} autograde` ({r.scope}, {_w(r.workers)}, N={r.n}) was killed "
                           f"(signal {-r.exit_code}) after {r.wall_s:.0f} s: no figure is derived from it.")
    return b, data["machine"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100, help="cohort size graded by both tools (default 100)")
    p.add_argument("--repeat", type=int, default=3, help="rounds per tool; medians are reported (default 3)")
    p.add_argument("--workers", type=parse_workers, default=[1, 2],
                   help="worker counts passed as `course autograde --workers W`, comma-separated (default 1,2); "
                        "ignored when course autograde has no --workers")
    p.add_argument("--large", type=int, default=1000,
                   help="course-only batch of this many submissions, once per worker count (0: skip; default 1000)")
    p.add_argument("--hang-in-cohort", action="store_true",
                   help="put the infinite loop in the cohort's cycle (default: graded alone, reported apart)")
    p.add_argument("--no-nbgrader", action="store_true", help="skip nbgrader (development only)")
    p.add_argument("--json", metavar="FILE", help="write every raw figure to FILE as JSON")
    p.add_argument("--keep", action="store_true", help="keep the scratch folders and logs")
    p.add_argument("--timeout", type=float, default=3600,
                   help="kill a command still running after this many seconds (default 3600)")
    p.add_argument("--render", metavar="FILE", help="only print the report of a finished run's --json FILE")
    a = p.parse_args(argv)
    if a.render:
        try:
            b, machine = from_json(Path(a.render))
        except (OSError, ValueError, KeyError, TypeError) as exc:   # json's errors are ValueErrors
            p.error(f"--render {a.render}: not a finished run's --json file ({type(exc).__name__}: {exc})")
        print(render(b, machine)[0])
        return 0
    if a.n < 2 or a.repeat < 1:
        p.error("--n must be at least 2 and --repeat at least 1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # clean up (scratch, running command) on kill
    env = tool_env()
    workers: list[int | None] = list(a.workers) if workers_supported(env) else [None]
    tmp = Path(tempfile.mkdtemp(prefix="bench_autograde_"))
    (tmp / "logs").mkdir()
    b = Bench(a, env, tmp, workers)
    b.command = "python tools/bench_autograde.py " + " ".join(argv if argv is not None else sys.argv[1:])
    b.log(f"scratch: {tmp}")
    try:
        b.note_load("at the start")
        b.side_by_side()
        b.hang()
        b.note_load("after the side-by-side")
        b.large()
        b.note_load("at the end")
        machine = machine_info()
        text, extra = render(b, machine)
        print(text, flush=True)
        if a.json:
            Path(a.json).write_text(to_json(b, machine, extra))
            b.log(f"wrote {a.json}")
    finally:
        if a.keep:
            b.log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
