"""Measure the sandbox: start-up costs, and the grader's peak memory under flooding submissions.

    .venv/bin/python tools/bench_sandbox.py            # everything (about a minute)
    .venv/bin/python tools/bench_sandbox.py startup    # zygote start, fork per submission/problem, round trip
    .venv/bin/python tools/bench_sandbox.py flood      # the grader's peak RSS on flood cases
    .venv/bin/python tools/bench_sandbox.py problems [N] [ROUNDS] [CALLS]   # CPU per problem process, by side
    .venv/bin/python tools/bench_sandbox.py --help     # these, with problems' defaults

Each flood case runs in its own process, so its peak RSS (ru_maxrss) is its own; the figure
reported is the peak minus the process's RSS just before the case started. Not a test: figures
depend on the machine and its load (record them in docs/ with the date and the machine).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.cli import positive_count  # noqa: E402
from autograder.config import Limits  # noqa: E402
from autograder.sandbox.host import SandboxHost  # noqa: E402

LIMITS = Limits(cell_seconds=30, total_seconds=600, call_seconds=30, submission_seconds=900, max_restarts=50)


def cells(*sources: str) -> list[dict]:
    return [{"index": i, "label": f"cell {i}", "source": s} for i, s in enumerate(sources, 1)]


def median_ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.2f} ms"


def startup() -> None:
    starts, spawns = [], []
    for _ in range(5):
        t = time.perf_counter()
        host = SandboxHost()
        host.start()
        starts.append(time.perf_counter() - t)
        t = time.perf_counter()
        host._spawn()
        spawns.append(time.perf_counter() - t)
        host.close()
    print(f"host start (bubblewrap + zygote + probe run)   {median_ms(starts)}")
    print(f"zygote start alone (bubblewrap + numpy import) {median_ms(spawns)}")
    x = np.random.default_rng(0).standard_normal((64, 64))
    with SandboxHost() as host:
        host.start()
        subs, forks, calls, singles, batches = [], [], [], [], []
        for _ in range(30):
            t = time.perf_counter()
            run = host.submission(cells("import numpy as np\ndef f(x):\n    return x"), LIMITS)
            subs.append(time.perf_counter() - t)
            for k in range(8):
                t = time.perf_counter()
                p = run.problem(f"p{k}")
                p.call("f", (x,))
                forks.append(time.perf_counter() - t)
                for _ in range(10):
                    t = time.perf_counter()
                    p.call("f", (x,))
                    calls.append(time.perf_counter() - t)
            t = time.perf_counter()
            for _ in range(10):
                p.call("f", (x,))
            singles.append(time.perf_counter() - t)
            t = time.perf_counter()
            p.call_many([("f", (x,), {})] * 10)
            batches.append(time.perf_counter() - t)
            run.close()
        print(f"submission (namespaces, fresh template, 1-cell notebook) {median_ms(subs)}")
        print(f"problem (clean-up, fork of the template, first call)     {median_ms(forks)}")
        print(f"call round trip (64x64 float64 there and back)          {median_ms(calls)}")
        print(f"10 calls one by one / in one call_many                   {median_ms(singles)} / {median_ms(batches)}")


FLOODS = {
    "many-cells": ("100,000 one-line code cells", LIMITS, [f"x = {i}" for i in range(100_000)] +
                   ["def f():\n    return 1"], "f", 1),
    "printing-cells": ("45,000 cells each printing 64 KiB", Limits(**{**LIMITS.__dict__, "cell_seconds": 30}),
                       ["print('x' * 65536)"] * 45_000 + ["def f():\n    return 1"], "f", 1),
    "big-returns-refused": ("every call returns 255 MB (return_mb 16: refused in the child)", LIMITS,
                            ["import numpy as np\ndef f():\n    return np.ones(255 * 2**20 // 8)"], "f", 10),
    "big-returns-allowed": ("every call returns 255 MB (return_mb 300: all of it crosses)",
                            Limits(**{**LIMITS.__dict__, "return_mb": 300, "memory_mb": 4096}),
                            ["import numpy as np\ndef f():\n    return np.ones(255 * 2**20 // 8)"], "f", 10),
    "forged-frame": ("the child announces a 255 MB reply and sends it slowly", LIMITS,
                     ["import gc, struct, time\nfrom autograder.sandbox import protocol\n"
                      "def f():\n    for c in [o for o in gc.get_objects() if type(o) is protocol.Channel]:\n"
                      "        try:\n            protocol._sock_sendall(c.sock, struct.pack('!Q', 255 * 2**20))\n"
                      "        except OSError:\n            pass\n    time.sleep(60)"], "f", 3),
}


def _proc_stat(pid: int) -> dict[str, int]:
    text = Path(f"/proc/{pid}/stat").read_text()
    f = text[text.rindex(")") + 2:].split()         # f[0] is field 3 (state)
    return {"minflt": int(f[7]), "cminflt": int(f[8]), "cpu": int(f[11]) + int(f[12]), "ccpu": int(f[13]) + int(f[14])}


def _descendants(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            out += [int(child), *_descendants(int(child))]
    return out


def _ns_pids(pid: int) -> list[str]:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(line for line in status.splitlines() if line.startswith("NSpid:")).split()[1:]


def problems(n: int = 300, rounds: int = 3, calls: int = 1) -> None:
    """CPU per problem process, all in, on a correct submission's template: the template (the
    fork), the problem processes (user + system of the children it reaped), the supervisor (its
    sweeps) and this trusted process (its requests), with `calls` calls per problem (a real
    problem's checks make about 13). Read from /proc (clock ticks: use a few hundred problems
    per round)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import nbformat
    from submissions import Case, build

    nb = nbformat.reads(build(Case("correct")).decode(), as_version=4)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    x = np.random.default_rng(0).standard_normal((4, 8))
    args = (x, np.ones(8), np.zeros(8))
    rows: dict[str, list[float]] = {k: [] for k in ("template", "problem", "supervisor", "trusted", "all", "faults",
                                                 "template faults")}
    with SandboxHost() as host:
        host.start()
        for _ in range(rounds):
            with host.submission(cells(*sources), LIMITS) as run:
                run.problem("first").call("layer_norm", args)
                below = {pid: _ns_pids(pid) for pid in _descendants(os.getpid())}
                template = next(p for p, ns in below.items() if len(ns) >= 3 and ns[-1] == str(run._template_pid))
                supervisor = next(p for p, ns in below.items() if len(ns) >= 3 and ns[-1] == "1")
                t0, s0, r0 = _proc_stat(template), _proc_stat(supervisor), resource.getrusage(resource.RUSAGE_SELF)
                for k in range(n):
                    problem = run.problem(f"p{k}")
                    for _ in range(calls):
                        problem.call("layer_norm", args)
                run.problem("last").call("layer_norm", args)     # the template reaps the n-th here
                t1, s1, r1 = _proc_stat(template), _proc_stat(supervisor), resource.getrusage(resource.RUSAGE_SELF)
            got = {"template": (t1["cpu"] - t0["cpu"]) * tick_ms / n,
                   "problem": (t1["ccpu"] - t0["ccpu"]) * tick_ms / n,
                   "supervisor": (s1["cpu"] - s0["cpu"]) * tick_ms / n,
                   "trusted": (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1000 / n,
                   "faults": (t1["cminflt"] - t0["cminflt"]) / n,
                   "template faults": (t1["minflt"] - t0["minflt"]) / n}
            got["all"] = got["template"] + got["problem"] + got["supervisor"] + got["trusted"]
            for key, value in got.items():
                rows[key].append(value)
    for key, values in rows.items():
        unit = "minor faults" if "faults" in key else "ms CPU"
        print(f"per problem process, {key:15s} median {statistics.median(values):7.2f} {unit}   "
              f"(rounds: {' '.join(f'{v:.2f}' for v in values)})")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def flood_case(name: str) -> dict:
    what, limits, sources, fn, repeat = FLOODS[name]
    host = SandboxHost(memory_mb=limits.memory_mb)
    host.start()
    before = rss_mb()
    t = time.perf_counter()
    run = host.submission(cells(*sources), limits)
    outcomes = []
    for _ in range(repeat):
        try:
            value = run.problem("p").call(fn).value
            outcomes.append(type(value).__name__)
        except Exception as exc:  # noqa: BLE001 - the outcome is what is measured
            outcomes.append(type(exc).__name__)
    seconds = time.perf_counter() - t
    kept = sum(len(c.stdout) for c in run.report.cells)
    run.close()
    host.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"case": what, "rss_before_mb": round(before, 1), "peak_mb": round(peak, 1),
            "grader_growth_mb": round(peak - before, 1), "seconds": round(seconds, 1),
            "outcomes": sorted(set(outcomes)), "stdout_kept_chars": kept}


def flood() -> None:
    for name in FLOODS:
        out = subprocess.run([sys.executable, __file__, "_flood", name], capture_output=True, text=True, timeout=3600)
        if out.returncode != 0:
            print(f"{name}: failed\n{out.stderr[-2000:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{r['case']}: grader RSS {r['rss_before_mb']} MB before, peak {r['peak_mb']} MB "
              f"(+{r['grader_growth_mb']} MB), {r['seconds']} s, outcomes {r['outcomes']}, "
              f"output kept {r['stdout_kept_chars']} chars")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tools/bench_sandbox.py", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", metavar="WHAT", help="what to measure (default: all)")
    sub.add_parser("all", help="startup, then flood (about a minute)")
    sub.add_parser("startup", help="zygote start, fork per submission and per problem, round trips")
    sub.add_parser("flood", help="the grader's peak resident memory on each flood case")
    pr = sub.add_parser("problems", help="CPU per problem process, by side (read from /proc)")
    pr.add_argument("n", nargs="?", type=positive_count, default=300, help="problem processes per round (default: 300)")
    pr.add_argument("rounds", nargs="?", type=positive_count, default=3, help="rounds (default: 3)")
    pr.add_argument("calls", nargs="?", type=positive_count, default=1, help="calls per problem (default: 1)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_flood"] and len(argv) == 2:    # one flood case in its own process, as flood() runs it
        print(json.dumps(flood_case(argv[1])))
        return 0
    args = _parser().parse_args(argv)
    what = args.what or "all"
    if what in ("all", "startup"):
        startup()
    if what in ("all", "flood"):
        flood()
    if what == "problems":
        problems(args.n, args.rounds, args.calls)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
