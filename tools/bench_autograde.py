"""Side-by-side benchmark: `nbgrader autograde` against `course autograde` on the example class.

Usage (from the repository root):

    .venv/bin/python tools/bench_autograde.py [--repeat N] [--out docs/benchmarks.md] [--keep]

What it does:
1. Builds two scratch course folders in a temporary directory, each assembled like `course demo`
   (course.yml, roster, nbgrader_config.py, source/, release/, assignments/ and the bundled example
   submissions), so both tools grade the same files.
2. nbgrader side: `nbgrader generate_assignment <a> --force` once (timed, reported as setup), then
   `nbgrader autograde <a> --force`; totals from the nbgrader gradebook.
3. Our side: `course autograde <a> --course-dir DIR`; totals from
   autograded/<student>/<a>/results.json.
4. N rounds, interleaved (the order of the two tools alternates between rounds). Each round runs
   the whole class and a one-student batch (`--student`) for each tool; the pair gives a two-point
   estimate of the fixed cost per run and the cost per submission.
5. After the timed rounds, one untimed extra: a copy of the patching submission with its patch
   cell moved to the top of the notebook (so it runs before the notebook's own test cells), graded
   by both tools.
6. Writes a Markdown report (machine, versions, command, timings, scores, floors, reading).

Every figure in the report is measured by this script in that run. Peak memory: `ru_maxrss` from
wait4() (the largest single process of the tree) and, when /proc allows, the summed RSS of the
whole process tree sampled every 0.1 s (short peaks between samples are missed).
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata as md
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.layout import CourseLayout
from autograder.toolpath import tool, tool_env

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "transformer-block"
ONE_STUDENT = "ada"                   # the one-student batch: a correct submission
SECURITY_PAIR = ("mallory", "katherine")
EARLY_PATCH_STUDENT = "mallory_early"  # built by this script in the scratch folders only
PATCH_MARKER = "np.allclose ="
SAMPLE_SECONDS = 0.1


# ----------------------------------------------------------------------------- data

@dataclass(frozen=True)
class Run:
    """One timed command."""
    tool: str            # "nbgrader" or "course"
    scope: str           # "class" or "one"
    round: int
    wall_s: float
    cpu_s: float         # user + system time of the whole tree (children that were waited for)
    exit_code: int
    maxrss_kb: int       # ru_maxrss from wait4: the largest single process of the tree
    tree_peak_kb: int | None  # summed RSS of the process tree, sampled; None if not measurable


@dataclass(frozen=True)
class Summary:
    """Timings of one tool and scope over all rounds."""
    tool: str
    scope: str
    walls: tuple[float, ...]
    cpus: tuple[float, ...]
    maxrss_kb: int
    tree_peak_kb: int | None
    exit_codes: tuple[int, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.walls)

    @property
    def minimum(self) -> float:
        return min(self.walls)

    @property
    def cpu_share(self) -> float:
        """Median CPU time over wall time: 1.0 is one CPU kept busy for the whole run."""
        return statistics.median(c / w for c, w in zip(self.cpus, self.walls))


@dataclass(frozen=True)
class OurScore:
    """One student's line from our results.json (score after, raw_score before the late penalty)."""
    score: float | None
    raw_score: float | None
    late_penalty: float | None
    max_score: float | None
    seconds: float | None
    test_seconds: float | None   # sum of the graders' own per-test durations
    state: str
    diagnoses: tuple[str, ...]


@dataclass(frozen=True)
class PatchPosition:
    """Where the patching cell sits in the original notebook (0-based cell index)."""
    index: int
    n_cells: int
    after_every_test: bool


@dataclass(frozen=True)
class Floors:
    """Start-up costs measured on this machine, in seconds (medians)."""
    python_numpy: float
    kernel_one_cell: float


@dataclass(frozen=True)
class Report:
    """Everything the Markdown report is rendered from."""
    machine: dict
    command: str
    repeat: int
    students: tuple[str, ...]
    generate_s: float
    generate_exit: int
    warmups: tuple[Run, ...]
    summaries: tuple[Summary, ...]
    nbgrader_scores: dict
    nbgrader_max: float | None
    nbgrader_penalties: dict
    nbgrader_failed: tuple[str, ...]
    our_scores: dict
    early_nbgrader: float | None
    early_ours: OurScore | None
    patch: PatchPosition | None
    floors: Floors
    loadavg_before: tuple[float, float, float]
    loadavg_after: tuple[float, float, float]
    extra_notes: tuple[str, ...] = field(default=())


# ----------------------------------------------------------------------------- scratch courses

def build_course(dest: Path) -> Path:
    """A scratch course folder assembled the way `course demo` assembles .demo/."""
    from autograder.api import prepare_demo
    return prepare_demo(ROOT, dest)


def submitted_students(course: Path) -> tuple[str, ...]:
    """Student folders holding this assignment."""
    layout = CourseLayout(course)
    return tuple(sorted(p.name for p in layout.submitted_dir.iterdir()
                        if layout.submission(p.name, ASSIGNMENT).is_dir()))


def _patch_index(cells: list) -> int | None:
    return next((i for i, c in enumerate(cells)
                 if c.get("cell_type") == "code" and PATCH_MARKER in "".join(c.get("source", ""))), None)


def patch_position(course: Path, student: str = "mallory") -> PatchPosition | None:
    """Where the patching cell sits in a submission, relative to the nbgrader test cells."""
    notebooks = sorted(CourseLayout(course).submission(student, ASSIGNMENT).glob("*.ipynb"))
    if not notebooks:
        return None
    cells = json.loads(notebooks[0].read_text(encoding="utf-8"))["cells"]
    idx = _patch_index(cells)
    if idx is None:
        return None
    tests = [i for i, c in enumerate(cells) if (c.get("metadata", {}).get("nbgrader") or {}).get("grade")]
    return PatchPosition(index=idx, n_cells=len(cells), after_every_test=all(i < idx for i in tests))


def add_early_patch_copy(course: Path, source_student: str = "mallory",
                         new_student: str = EARLY_PATCH_STUDENT) -> bool:
    """Copy a submission with its patch cell moved to the top (right after the first code cell).

    The notebook is edited as JSON so nothing else changes. False if no patch cell is found.
    """
    src = CourseLayout(course).submission(source_student, ASSIGNMENT)
    dst = CourseLayout(course).submission(new_student, ASSIGNMENT)
    notebooks = sorted(src.glob("*.ipynb"))
    if not notebooks:
        return False
    nb = json.loads(notebooks[0].read_text(encoding="utf-8"))
    cells = nb["cells"]
    idx = _patch_index(cells)
    if idx is None:
        return False
    patch = cells.pop(idx)
    first_code = next(i for i, c in enumerate(cells) if c.get("cell_type") == "code")
    cells.insert(first_code + 1, patch)
    shutil.copytree(src, dst, dirs_exist_ok=True)      # the same files (timestamp.txt included)
    (dst / notebooks[0].name).write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return True


# ----------------------------------------------------------------------------- measuring

def _children(pid: int) -> list[int]:
    """Direct children of a process, from /proc/<pid>/task/*/children."""
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as fh:
                    out.extend(int(x) for x in fh.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return out


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss_kb(root: int) -> int:
    """Summed resident memory of a process and all its descendants, now."""
    total, stack, seen = 0, [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _rss_kb(pid)
        stack.extend(_children(pid))
    return total


def tree_sampling_available() -> bool:
    return os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


class TreeSampler(threading.Thread):
    """Samples the summed RSS of a process tree until stopped; keeps the peak."""

    def __init__(self, pid: int, every: float = SAMPLE_SECONDS) -> None:
        super().__init__(daemon=True)
        self.pid, self.every, self.peak_kb = pid, every, 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak_kb = max(self.peak_kb, tree_rss_kb(self.pid))
            self._stop_event.wait(self.every)

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        return self.peak_kb


def run_timed(cmd: list[str], *, cwd: Path, env: dict, log: Path, tool: str, scope: str,
              rnd: int, sample: bool) -> Run:
    """Run a command to completion; wall clock, exit code and memory. Output goes to `log`."""
    with open(log, "wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        sampler = TreeSampler(proc.pid) if sample else None
        if sampler:
            sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        peak = sampler.stop() if sampler else None
    return Run(tool=tool, scope=scope, round=rnd, wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime,
               exit_code=proc.returncode,
               maxrss_kb=usage.ru_maxrss, tree_peak_kb=peak)


def bench_env() -> dict:
    """The caller's environment with the venv's bin first on PATH (nothing else changed)."""
    return tool_env()


def nbgrader_cmd(*args: str) -> list[str]:
    return [tool("nbgrader"), *args]


def course_cmd(*args: str) -> list[str]:
    return [tool("course"), *args]


def measure_floors(env: dict, workdir: Path, repeat: int = 3) -> Floors:
    """Start-up floors: a Python that imports numpy; a Jupyter kernel that runs one cell."""
    py = sys.executable

    def wall(code: str) -> float:
        started = time.perf_counter()
        subprocess.run([py, "-c", code], cwd=workdir, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - started

    numpy_walls = [wall("import numpy") for _ in range(max(repeat, 5))]
    kernel_code = (
        "import time, nbformat\n"
        "from nbclient import NotebookClient\n"
        "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('import numpy as np; np.ones(3).sum()')])\n"
        "t = time.perf_counter()\n"
        "NotebookClient(nb, kernel_name='python3', timeout=60).execute()\n"
        "print(time.perf_counter() - t)\n"
    )
    kernel_walls = []
    for _ in range(repeat):
        out = subprocess.run([py, "-c", kernel_code], cwd=workdir, env=env, check=True,
                             capture_output=True, text=True).stdout
        kernel_walls.append(float(out.strip().splitlines()[-1]))
    return Floors(python_numpy=statistics.median(numpy_walls),
                  kernel_one_cell=statistics.median(kernel_walls))


# ----------------------------------------------------------------------------- scores

def read_nbgrader_scores(course: Path, students: tuple[str, ...]) -> tuple[dict, float | None, dict]:
    """Each student's total (before any late penalty), the maximum, and each recorded late penalty,
    from the course's nbgrader gradebook."""
    from nbgrader.api import Gradebook, MissingEntry
    scores: dict[str, float | None] = {}
    penalties: dict[str, float | None] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        try:
            max_score = gb.find_assignment(ASSIGNMENT).max_score
        except MissingEntry:
            max_score = None
        for s in students:
            try:
                sub = gb.find_submission(ASSIGNMENT, s)
                scores[s], penalties[s] = sub.score, sub.late_submission_penalty
            except MissingEntry:
                scores[s] = penalties[s] = None
    return scores, max_score, penalties


def read_our_score(course: Path, student: str) -> OurScore:
    """One student's total, grading time and diagnoses from results.json."""
    path = CourseLayout(course).results_json(student, ASSIGNMENT)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return OurScore(None, None, None, None, None, None, "no results.json", ())
    extra = data.get("extra_data", {})
    tests = extra.get("tests") or data.get("tests") or []
    durations = [t.get("duration") for t in tests if isinstance(t.get("duration"), (int, float))]
    return OurScore(score=data.get("score"), raw_score=extra.get("raw_score", data.get("score")),
                    late_penalty=extra.get("late_penalty"), max_score=data.get("max_score"),
                    seconds=data.get("execution_time"), test_seconds=sum(durations) if durations else None,
                    state=extra.get("state", "?"), diagnoses=tuple(extra.get("diagnoses", ())))


def nbgrader_failures(log: Path) -> tuple[str, ...]:
    """Students nbgrader reported an error for, from its log."""
    text = log.read_text(encoding="utf-8", errors="replace")
    return tuple(sorted(set(re.findall(r"error processing assignment '[^']*' for student '([^']+)'", text))))


# ----------------------------------------------------------------------------- machine

def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "not installed"


def machine_info() -> dict:
    """What the figures depend on: CPUs, memory, versions, BLAS setting, the repository commit."""
    model, mem = "?", "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "?"
    return {
        "cpus (nproc)": str(len(os.sched_getaffinity(0))),
        "cpu model": model,
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "nbgrader": _version("nbgrader"),
        "nbclient": _version("nbclient"),
        "jupyter_client": _version("jupyter_client"),
        "ipykernel": _version("ipykernel"),
        "pytest": _version("pytest"),
        "course-autograder": _version("course-autograder"),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE") or "unset",
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE") or "unset",
        "repository commit": commit,
        "date (UTC)": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"),
    }


# ----------------------------------------------------------------------------- summarising

def summarise(runs: list[Run], tool: str, scope: str) -> Summary:
    mine = [r for r in runs if r.tool == tool and r.scope == scope]
    peaks = [r.tree_peak_kb for r in mine if r.tree_peak_kb is not None]
    return Summary(tool=tool, scope=scope, walls=tuple(r.wall_s for r in mine), cpus=tuple(r.cpu_s for r in mine),
                   maxrss_kb=max(r.maxrss_kb for r in mine),
                   tree_peak_kb=max(peaks) if peaks else None,
                   exit_codes=tuple(r.exit_code for r in mine))


def two_point_fit(class_s: float, one_s: float, n: int) -> tuple[float, float]:
    """(fixed seconds per run, seconds per submission) from a class batch and a one-student batch."""
    per_sub = (class_s - one_s) / (n - 1) if n > 1 else class_s
    return one_s - per_sub, per_sub


# ----------------------------------------------------------------------------- rendering

def _mb(kb: int | None) -> str:
    return "n/a" if kb is None else f"{kb / 1024:.0f} MB"


def _pts(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _by(report: Report, tool: str, scope: str) -> Summary:
    return next(s for s in report.summaries if s.tool == tool and s.scope == scope)


def _fooled(patched: float | None, plain: float | None) -> str:
    if patched is None or plain is None:
        return "not measured"
    if patched > plain + 1e-6:
        return f"**fooled**: {patched:.2f} with the patch against {plain:.2f} without"
    return f"not fooled: {patched:.2f} with the patch, {plain:.2f} without"


def render(report: Report) -> str:
    """The Markdown report."""
    n = len(report.students)
    nb_c, nb_1 = _by(report, "nbgrader", "class"), _by(report, "nbgrader", "one")
    us_c, us_1 = _by(report, "course", "class"), _by(report, "course", "one")
    nb_fixed, nb_per = two_point_fit(nb_c.median, nb_1.median, n)
    us_fixed, us_per = two_point_fit(us_c.median, us_1.median, n)
    ratio = nb_c.median / us_c.median
    ratio_min = nb_c.minimum / us_c.minimum
    m = report.machine
    mal, kat = SECURITY_PAIR
    L: list[str] = []
    a = L.append

    a("# Benchmark: `course autograde` against `nbgrader autograde`")
    a("")
    a(f"Generated by `tools/bench_autograde.py` on {m['date (UTC)']} (repository commit "
      f"`{m['repository commit']}`). Every figure below was measured by that script in that run, on the "
      "machine described here; rerun it to refresh the page.")
    a("")
    a("## What was measured")
    a("")
    a(f"- The example class in `examples/submitted/`: {n} submissions of `{ASSIGNMENT}` "
      f"({', '.join(report.students)}).")
    a("- Two scratch course folders in a temporary directory, each assembled like `course demo` "
      "(course.yml, roster, nbgrader_config.py, source/, release/, assignments/, the same submissions).")
    a(f"- nbgrader: `nbgrader generate_assignment {ASSIGNMENT} --force` once (setup, not in the "
      f"ratio), then `nbgrader autograde {ASSIGNMENT} --force`, run in the course folder so its "
      "`nbgrader_config.py` sets the root and the gradebook. Totals from the gradebook "
      "(`nbgrader.api.Gradebook`).")
    a(f"- Ours: `course autograde {ASSIGNMENT} --course-dir DIR`. Totals from "
      f"`{CourseLayout(Path()).results_json('<student>', ASSIGNMENT)}`.")
    a("- Before the rounds, one untimed warm-up per tool (a one-student batch): the first run in a fresh "
      "folder also creates state (our gradebook and course secret; nbgrader's gradebook already exists "
      "after `generate_assignment`) and fills the file cache. Its time is listed apart.")
    a(f"- {report.repeat} rounds; the two tools alternate which goes first. Each round times the whole "
      f"class and a one-student batch (`--student {ONE_STUDENT}`) per tool. Wall clock from start to "
      "exit of the command, PATH with `.venv/bin` first, the environment otherwise unchanged.")
    a("- Per-run fixed cost and per-submission cost are a two-point estimate from the medians: "
      f"per submission = (class - one) / ({n} - 1); fixed = one - per submission.")
    a("- Memory: `ru_maxrss` from `wait4()` is the largest single process of the command's tree; "
      "\"tree peak\" sums the RSS of every process in the tree, sampled every "
      f"{SAMPLE_SECONDS:g} s (short peaks between samples are missed; the sampler itself runs during "
      "the timed commands and costs a little CPU on both sides alike).")
    a("")
    a("## Machine")
    a("")
    a("| | |")
    a("|---|---|")
    for k, v in m.items():
        a(f"| {k} | {v} |")
    a(f"| load average before / after | {' '.join(f'{x:.2f}' for x in report.loadavg_before)} / "
      f"{' '.join(f'{x:.2f}' for x in report.loadavg_after)} |")
    a("")
    a("The load average is the machine's (other processes were free to run): on "
      f"{m['cpus (nproc)']} CPUs a load near {m['cpus (nproc)']} means the tools competed for CPU, "
      "which widens the spread between rounds.")
    a("")
    a("## Command")
    a("")
    a("```")
    a(report.command)
    a("```")
    a("")
    a("## Timings")
    a("")
    a("| tool | batch | median wall | min wall | rounds (s) | CPU / wall | exit codes "
      "| largest process (ru_maxrss) | tree peak (sampled) |")
    a("|---|---|---|---|---|---|---|---|---|")
    for s in (nb_c, us_c, nb_1, us_1):
        label = "nbgrader autograde" if s.tool == "nbgrader" else "course autograde"
        batch = f"class ({n})" if s.scope == "class" else f"one (`{ONE_STUDENT}`)"
        a(f"| {label} | {batch} | {s.median:.2f} s | {s.minimum:.2f} s | "
          f"{', '.join(f'{w:.2f}' for w in s.walls)} | {s.cpu_share:.2f} | {', '.join(map(str, s.exit_codes))} | "
          f"{_mb(s.maxrss_kb)} | {_mb(s.tree_peak_kb)} |")
    a("")
    a("| figure | nbgrader | ours |")
    a("|---|---|---|")
    a(f"| wall per submission, class median / {n} | {nb_c.median / n:.2f} s | {us_c.median / n:.2f} s |")
    a(f"| per submission (two-point estimate) | {nb_per:.2f} s | {us_per:.2f} s |")
    a(f"| fixed cost per run (two-point estimate) | {nb_fixed:.2f} s | {us_fixed:.2f} s |")
    a(f"| setup: `nbgrader generate_assignment` (once) | {report.generate_s:.2f} s "
      f"(exit {report.generate_exit}) | none needed |")
    warm = {w.tool: w for w in report.warmups}
    if warm:
        a(f"| warm-up: first one-student batch in the fresh folder (not in the rounds) | "
          f"{warm['nbgrader'].wall_s:.2f} s | {warm['course'].wall_s:.2f} s |")
    a("")
    graded_secs = [o.seconds for o in report.our_scores.values() if o.seconds is not None]
    if graded_secs:
        a(f"Our results.json files put the grading of the {len(graded_secs)} submissions (load, child process, "
          f"pytest session) at {sum(graded_secs):.2f} s in total in the last class run "
          f"(median {statistics.median(graded_secs):.2f} s, slowest: "
          + ", ".join(f"{sid} {o.seconds:.2f} s" for sid, o in sorted(
              ((k, v) for k, v in report.our_scores.items() if v.seconds is not None),
              key=lambda kv: -kv[1].seconds)[:2])
          + f"); that run's wall clock was {us_c.walls[-1]:.2f} s, so {us_c.walls[-1] - sum(graded_secs):.2f} s "
          "went to start-up, feedback pages, results files and the gradebook.")
        a("")
    a(f"**Ratio nbgrader / ours, whole class: {ratio:.2f} on medians, {ratio_min:.2f} on minimums** "
      "(above 1 means ours is faster).")
    a("")
    a("Start-up floors on this machine (medians):")
    a("")
    a(f"- `python -c \"import numpy\"`: {report.floors.python_numpy:.3f} s")
    a(f"- start a Jupyter kernel, run one cell, shut it down (nbclient): {report.floors.kernel_one_cell:.3f} s")
    a("")
    if report.nbgrader_failed:
        a(f"nbgrader reported an error for: {', '.join(report.nbgrader_failed)} (hence its exit code 1); "
          "it went on with the other students.")
        a("")
    a("## Scores")
    a("")
    a("The totals are not expected to agree. nbgrader's come from the notebook's own test cells (the "
      "visible asserts plus the `### BEGIN HIDDEN TESTS` blocks), all-or-nothing per cell and run "
      "inside the student's kernel; ours come from the hidden graders in `assignments/`, many checks "
      "per problem with points shared out among them, run in the trusted process against the "
      "student's functions in a separate child process. Ours also gives partial credit and names "
      "known mistakes (diagnoses). Our hidden inputs are drawn per student from the course secret, "
      "which is new in every scratch folder, so our partial-credit fractions can move a little from "
      "one run of this script to the next; nbgrader's test cells use fixed seeds.")
    a("")
    nmax = _pts(report.nbgrader_max)
    a(f"Both totals are before any late penalty (of {nmax}); the late-penalty column shows what each "
      "tool recorded: nbgrader's `late_submission_penalty` in its gradebook, ours from course.yml's "
      "`late_policy` (results.json `score` = `raw_score` - penalty).")
    a("")
    a("| student | nbgrader | ours | late penalty: nbgrader / ours | our state | our seconds | our diagnoses |")
    a("|---|---|---|---|---|---|---|")

    def penalty(nb: float | None, us: float | None) -> str:
        return "-" if not nb and not us else f"{_pts(nb)} / {_pts(us)}"

    for s in report.students:
        ours = report.our_scores[s]
        name = f"**{s}**" if s in SECURITY_PAIR else s
        a(f"| {name} | {_pts(report.nbgrader_scores.get(s))} | {_pts(ours.raw_score)} | "
          f"{penalty(report.nbgrader_penalties.get(s), ours.late_penalty)} | {ours.state} | "
          f"{_pts(ours.seconds)} | {', '.join(ours.diagnoses) or '-'} |")
    if report.early_ours is not None or report.early_nbgrader is not None:
        e = report.early_ours
        a(f"| *{EARLY_PATCH_STUDENT}* (extra, untimed) | {_pts(report.early_nbgrader)} | "
          f"{_pts(e.raw_score if e else None)} | {penalty(None, e.late_penalty if e else None)} | "
          f"{e.state if e else 'n/a'} | {_pts(e.seconds if e else None)} | "
          f"{', '.join(e.diagnoses) if e and e.diagnoses else '-'} |")
    a("")
    a("### The security anchor")
    a("")
    a(f"`{mal}` and `{kat}` have the same wrong `layer_norm` (variance with ddof=1); `{mal}` adds a cell "
      "that replaces `np.allclose`, `np.isclose` and `np.testing.assert_allclose` with functions that "
      "always agree. A grader that cannot be fooled gives them the same total.")
    a("")
    a(f"- nbgrader: {_fooled(report.nbgrader_scores.get(mal), report.nbgrader_scores.get(kat))}.")
    a(f"- ours: {_fooled(report.our_scores[mal].raw_score, report.our_scores[kat].raw_score)}.")
    if report.early_ours is not None or report.early_nbgrader is not None:
        a(f"- `{EARLY_PATCH_STUDENT}`, nbgrader: "
          f"{_fooled(report.early_nbgrader, report.nbgrader_scores.get(kat))}.")
        a(f"- `{EARLY_PATCH_STUDENT}`, ours: "
          f"{_fooled(report.early_ours.raw_score if report.early_ours else None, report.our_scores[kat].raw_score)}.")
    a("")
    pp = report.patch
    if pp is not None:
        where = (f"cell {pp.index + 1} of {pp.n_cells}, "
                 + ("after every test cell" if pp.after_every_test else "before some of the test cells"))
        a(f"In `{mal}`'s notebook the patch cell is {where}. nbgrader runs the notebook from top to "
          "bottom in one kernel, so a patch only affects the test cells that run after it: whether "
          "nbgrader is fooled depends on where the cell sits.")
        a("")
    if report.early_ours is not None or report.early_nbgrader is not None:
        a(f"`{EARLY_PATCH_STUDENT}` is built by the script in the scratch folders only: `{mal}`'s "
          "notebook with the patch cell moved right after the first code cell, graded once by both "
          "tools after the timed rounds (it is not in the timings or the submission count). Our "
          "graders never run in the student's process, so the position of the patch cannot matter "
          "to them.")
        a("")
    for note in report.extra_notes:
        a(note)
        a("")
    a("## Reading")
    a("")
    graded = [o for o in report.our_scores.values() if o.seconds is not None]
    per_student = statistics.median(o.seconds for o in graded) if graded else None
    checks = [o.test_seconds for o in graded if o.test_seconds is not None]
    check_median = statistics.median(checks) if checks else None
    faster = "faster" if ratio > 1 else "slower"
    a(f"- On this class ours was {faster} than nbgrader: {us_c.median:.2f} s against {nb_c.median:.2f} s "
      f"(medians of {report.repeat}), a ratio of {ratio:.2f}.")
    a(f"- Per submission: nbgrader {nb_per:.2f} s, ours {us_per:.2f} s (two-point estimates). nbgrader "
      "starts a Jupyter kernel per notebook, sends it every cell over ZeroMQ and waits for each reply; "
      f"the bare kernel floor measured here is {report.floors.kernel_one_cell:.2f} s"
      + (f", {report.floors.kernel_one_cell / nb_per:.0%} of its per-submission estimate; the rest is "
         "running the notebook (solutions, public checks, test cells) and nbconvert's pre- and "
         "post-processing." if nb_per > report.floors.kernel_one_cell else
         ", not below its per-submission estimate: the spread between rounds is too large here for "
         "the two-point estimate to split the cost further."))
    if per_student is not None:
        check_txt = (f"; the graders' own per-test durations sum to a median of {check_median:.3f} s"
                     if check_median is not None else "")
        a(f"- Ours starts one fresh interpreter per submission (`python -s -P -m autograder.sandbox.child`, "
          f"which imports numpy and runs the notebook's cells: the `import numpy` floor alone is "
          f"{report.floors.python_numpy:.2f} s) and one full pytest session per submission in the "
          "trusted process (collection of the grader modules, fixtures, then every check as a call "
          f"across the pipe). results.json puts one submission at a median of {per_student:.2f} s"
          f"{check_txt}"
          + (f", so {check_median / per_student:.0%} of a submission's time is the checks themselves "
             "(calls across the pipe included) and the rest is process start, notebook execution and "
             "pytest's own machinery." if check_median is not None and per_student > 0 else ".")
          + f" (The mean of those times is {statistics.mean(o.seconds for o in graded):.2f} s against the "
          f"two-point estimate of {us_per:.2f} s; the estimate also carries each submission's feedback "
          "page, results.json and gradebook rows, and the spread between rounds.)")
    a(f"- Fixed cost per run: nbgrader {nb_fixed:.2f} s, ours {us_fixed:.2f} s. nbgrader imports its "
      "application stack (traitlets, nbconvert, SQLAlchemy) and opens the gradebook; ours imports numpy, "
      "pytest and the engine, loads the instructor code, opens the nbgrader gradebook through "
      "nbgrader's API to record the grades, and prints the summary table.")
    a(f"- Spread: the class batch took {nb_c.minimum:.2f}-{max(nb_c.walls):.2f} s with nbgrader and "
      f"{us_c.minimum:.2f}-{max(us_c.walls):.2f} s with ours; the one-student batch "
      f"{nb_1.minimum:.2f}-{max(nb_1.walls):.2f} s and {us_1.minimum:.2f}-{max(us_1.walls):.2f} s. "
      "The machine was shared with other work, so a difference between two single rounds smaller "
      f"than that spread means nothing; the ratio is {ratio:.2f} on medians and {ratio_min:.2f} on "
      "minimums, and the two-point estimates inherit the spread.")
    a(f"- CPU over wall time (median): nbgrader {nb_c.cpu_share:.2f}, ours {us_c.cpu_share:.2f}. Both "
      "grade one submission after the other, so neither can use more than about one CPU for long; "
      "nbgrader's figure also shows time spent waiting for the kernel.")
    a(f"- Memory: the largest single process was {_mb(nb_c.maxrss_kb)} for nbgrader and "
      f"{_mb(us_c.maxrss_kb)} for ours; the sampled tree peak was {_mb(nb_c.tree_peak_kb)} and "
      f"{_mb(us_c.tree_peak_kb)}. Both trees hold one parent and one short-lived process per "
      "submission (a kernel, or our child) at a time."
      + (" Our tree peak equals our largest process: no sample caught the parent and a child "
         "together above the parent's own peak."
         if us_c.tree_peak_kb is not None and us_c.tree_peak_kb <= us_c.maxrss_kb * 1.05 else ""))
    a("")
    return "\n".join(L)


# ----------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="rounds per tool (default 3)")
    p.add_argument("--out", default="docs/benchmarks.md", help="Markdown report, relative to the repository root")
    p.add_argument("--keep", action="store_true", help="keep the scratch folders and logs")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")

    env = bench_env()
    sample = tree_sampling_available()
    tmp = Path(tempfile.mkdtemp(prefix="bench_autograde_"))
    logs = tmp / "logs"
    logs.mkdir()
    print(f"scratch: {tmp}", flush=True)
    try:
        loadavg_before = os.getloadavg()
        nb_dir, us_dir = build_course(tmp / "nbgrader"), build_course(tmp / "ours")
        students = submitted_students(nb_dir)
        assert students == submitted_students(us_dir)

        gen = run_timed(nbgrader_cmd("generate_assignment", ASSIGNMENT, "--force"), cwd=nb_dir, env=env,
                        log=logs / "generate.log", tool="nbgrader", scope="setup", rnd=0, sample=False)
        print(f"generate_assignment: {gen.wall_s:.2f} s (exit {gen.exit_code})", flush=True)

        commands = {
            ("nbgrader", "class"): (nbgrader_cmd("autograde", ASSIGNMENT, "--force"), nb_dir),
            ("nbgrader", "one"): (nbgrader_cmd("autograde", ASSIGNMENT, "--force", "--student", ONE_STUDENT), nb_dir),
            ("course", "class"): (course_cmd("autograde", ASSIGNMENT, "--course-dir", str(us_dir)), us_dir),
            ("course", "one"): (course_cmd("autograde", ASSIGNMENT, "--course-dir", str(us_dir),
                                           "--student", ONE_STUDENT), us_dir),
        }
        # One untimed warm-up per tool: the first run in a fresh folder also creates state
        # (our gradebook and course secret) and fills the page cache; it is reported apart.
        warmups = []
        for tool in ("nbgrader", "course"):
            cmd, cwd = commands[(tool, "one")]
            w = run_timed(cmd, cwd=cwd, env=env, log=logs / f"{tool}-warmup.log", tool=tool,
                          scope="first", rnd=0, sample=False)
            warmups.append(w)
            print(f"warm-up  {tool:8s} one   {w.wall_s:6.2f} s  exit {w.exit_code}", flush=True)
        runs: list[Run] = []
        for rnd in range(1, args.repeat + 1):
            tools = ("nbgrader", "course") if rnd % 2 else ("course", "nbgrader")
            for scope in ("one", "class"):   # class last: the scores are read from the class batches
                for tool in tools:
                    cmd, cwd = commands[(tool, scope)]
                    r = run_timed(cmd, cwd=cwd, env=env, log=logs / f"{tool}-{scope}-{rnd}.log",
                                  tool=tool, scope=scope, rnd=rnd, sample=sample)
                    runs.append(r)
                    print(f"round {rnd} {tool:8s} {scope:5s} {r.wall_s:6.2f} s  exit {r.exit_code}  "
                          f"maxrss {_mb(r.maxrss_kb)}  tree {_mb(r.tree_peak_kb)}", flush=True)
        nb_scores, nb_max, nb_penalties = read_nbgrader_scores(nb_dir, students)
        our_scores = {s: read_our_score(us_dir, s) for s in students}
        failed = nbgrader_failures(logs / f"nbgrader-class-{args.repeat}.log")

        early_nb = early_us = None
        notes: list[str] = []
        if add_early_patch_copy(nb_dir) and add_early_patch_copy(us_dir):
            for cmd, cwd, name in (
                    (nbgrader_cmd("autograde", ASSIGNMENT, "--force", "--student", EARLY_PATCH_STUDENT),
                     nb_dir, "nbgrader-early.log"),
                    (course_cmd("autograde", ASSIGNMENT, "--course-dir", str(us_dir), "--student",
                                EARLY_PATCH_STUDENT), us_dir, "course-early.log")):
                with open(logs / name, "wb") as out:
                    subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
            early_nb = read_nbgrader_scores(nb_dir, (EARLY_PATCH_STUDENT,))[0].get(EARLY_PATCH_STUDENT)
            early_us = read_our_score(us_dir, EARLY_PATCH_STUDENT)
        else:
            notes.append(f"No cell containing `{PATCH_MARKER}` was found in mallory's notebook, so the "
                         f"`{EARLY_PATCH_STUDENT}` extra was skipped.")

        floors = measure_floors(env, tmp)
        report = Report(
            machine=machine_info(),
            command=f".venv/bin/python tools/bench_autograde.py --repeat {args.repeat} --out {args.out}",
            repeat=args.repeat, students=students, generate_s=gen.wall_s, generate_exit=gen.exit_code,
            warmups=tuple(warmups),
            summaries=tuple(summarise(runs, t, s) for t in ("nbgrader", "course") for s in ("class", "one")),
            nbgrader_scores=nb_scores, nbgrader_max=nb_max, nbgrader_penalties=nb_penalties, nbgrader_failed=failed,
            our_scores=our_scores,
            early_nbgrader=early_nb, early_ours=early_us, patch=patch_position(nb_dir), floors=floors,
            loadavg_before=loadavg_before, loadavg_after=os.getloadavg(), extra_notes=tuple(notes))
        out = (ROOT / args.out) if not Path(args.out).is_absolute() else Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render(report), encoding="utf-8")
        print(f"wrote {out}", flush=True)
    finally:
        if args.keep:
            print(f"kept {tmp}", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
