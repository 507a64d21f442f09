"""CPU per submission of each sandbox role (zygote, supervisor, template, problem), from the kernel.

    sudo .venv/bin/python tools/sandbox_roles.py [--n 100] [--workers 1] [--repeat 1] [--json FILE]

Grades a cohort (the one `bench_autograde.py` uses) with `course autograde`, while listening to the
kernel's taskstats exit records (generic netlink; needs root): every process that ends reports its
name (comm), user and system CPU time in microseconds, and its page faults. Sandbox processes name
themselves by role (`zygote.ROLE_NAMES`); only the command's own tree is counted (by the parents
the records name: on a shared machine other commands' sandboxes report too), its processes that
are not in the sandbox as the trusted side, by their names. Every sandbox process ends with the
command (the zygote last), so each has reported by the time it returns.

Prints, per role: processes per submission, CPU per submission and per process, minor page faults
per process. Not a test: figures depend on the machine and its load; compare runs made in the same
minutes (A/B alternated).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import bench_autograde as bench  # noqa: E402

try:
    from autograder.sandbox.zygote import ROLE_NAMES
except ImportError:                     # a version before the role names: processes are told apart by depth
    ROLE_NAMES = {}

# generic netlink and taskstats (linux/genetlink.h, linux/taskstats.h)
NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
TASKSTATS_CMD_GET = 1
TASKSTATS_CMD_ATTR_REGISTER_CPUMASK = 3
TASKSTATS_TYPE_PID = 1
TASKSTATS_TYPE_STATS = 3
TASKSTATS_TYPE_AGGR_PID = 4
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
SOL_NETLINK = 270
RCVBUF = 32 * 2**20
# offsets in struct taskstats (stable since version 1; fields are only ever appended)
COMM_AT, COMM_LEN = 80, 32
PIDS_AT = 128                          # ac_pid, ac_ppid (u32 each)
TIMES_AT = 152                         # ac_utime, ac_stime (u64, microseconds), ac_minflt, ac_majflt


@dataclass(frozen=True)
class Exit:
    """One ended process (or thread) as the kernel reported it."""
    pid: int
    ppid: int
    comm: str
    cpu_us: int
    minflt: int


def _attrs(data: bytes) -> dict[int, bytes]:
    out, at = {}, 0
    while at + 4 <= len(data):
        length, kind = struct.unpack_from("HH", data, at)
        if length < 4:
            break
        out[kind & 0x3FFF] = data[at + 4:at + length]
        at += (length + 3) & ~3
    return out


def _attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def _request(sock: socket.socket, family: int, cmd: int, attrs: bytes, seq: int) -> None:
    body = struct.pack("BBH", cmd, 1, 0) + attrs
    sock.send(struct.pack("IHHII", 16 + len(body), family, NLM_F_REQUEST, seq, 0) + body)


def _messages(data: bytes) -> list[tuple[int, bytes]]:
    out, at = [], 0
    while at + 16 <= len(data):
        length, kind = struct.unpack_from("IH", data, at)
        if length < 16:
            break
        out.append((kind, data[at + 16:at + length]))
        at += (length + 3) & ~3
    return out


def _check_ack(sock: socket.socket, what: str) -> bytes:
    for kind, body in _messages(sock.recv(65536)):
        if kind == NLMSG_ERROR:
            err = struct.unpack_from("i", body)[0]
            if err:
                raise OSError(-err, f"{what}: {os.strerror(-err)}")
        else:
            return body
    return b""


class ExitListener(threading.Thread):
    """Collects the taskstats record of every task that ends on any CPU while it runs."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.exits: list[Exit] = []
        self.lost = 0
        self._stop_flag = threading.Event()
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, 33, RCVBUF)     # SO_RCVBUFFORCE (root)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        self.sock.bind((0, 0))
        _request(self.sock, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, _attr(CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0"), 1)
        reply = _attrs(_check_ack(self.sock, "taskstats family")[4:])
        self.family = struct.unpack("H", reply[CTRL_ATTR_FAMILY_ID][:2])[0]
        cpus = f"0-{os.cpu_count() - 1}\0".encode() if (os.cpu_count() or 1) > 1 else b"0\0"
        _request(self.sock, self.family, TASKSTATS_CMD_GET, _attr(TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, cpus), 2)
        self.sock.settimeout(0.2)

    def run(self) -> None:
        while not self._stop_flag.is_set():
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError:                   # ENOBUFS: records dropped (the buffer overflowed)
                self.lost += 1
                continue
            for kind, body in _messages(data):
                if kind != self.family:
                    continue
                aggr = _attrs(body[4:]).get(TASKSTATS_TYPE_AGGR_PID)
                if aggr is None:
                    continue
                stats = _attrs(aggr).get(TASKSTATS_TYPE_STATS)
                if stats is None or len(stats) < TIMES_AT + 32:
                    continue
                comm = stats[COMM_AT:COMM_AT + COMM_LEN].split(b"\0", 1)[0].decode("utf-8", "replace")
                pid, ppid = struct.unpack_from("II", stats, PIDS_AT)
                utime, stime, minflt, _ = struct.unpack_from("QQQQ", stats, TIMES_AT)
                self.exits.append(Exit(pid, ppid, comm, utime + stime, minflt))

    def stop(self) -> None:
        self._stop_flag.set()
        self.join()
        self.sock.close()


def tree(exits: list[Exit], root: int) -> list[Exit]:
    """The records of `root` and every process below it (by the parents the records name). An
    orphan (bubblewrap's inner process, whose outer one ends first) names its new parent: this
    process, a child subreaper (see `main`), which starts nothing else."""
    parent = {e.pid: e.ppid for e in exits}
    me = os.getpid()
    out = []
    for e in exits:
        p, hops = e.pid, 0
        while p != root and p in parent and parent[p] != me and hops < 64:
            p, hops = parent[p], hops + 1
        if p == root or parent.get(p) == me:
            out.append(e)
    return out


BY_DEPTH = ("zygote", "supervisor", "template", "problem")     # below bubblewrap, where processes have no role names


def by_role(exits: list[Exit], root: int) -> dict[str, list[Exit]]:
    """Records grouped by sandbox role; the command's other processes under "trusted: <name>".
    Processes without a role name (a version before the names) by their depth below bubblewrap."""
    roles = {name: role for role, name in ROLE_NAMES.items()}
    out: dict[str, list[Exit]] = defaultdict(list)
    mine = {e.pid for e in tree(exits, root)}
    record = {e.pid: e for e in exits}
    for e in exits:
        if e.pid not in mine:               # another command's (other runs on a shared machine)
            continue
        if e.comm in roles:
            out[roles[e.comm]].append(e)
        else:
            depth, p = 0, e
            while p.comm != "bwrap" and p.ppid in record and depth < 64:
                depth, p = depth + 1, record[p.ppid]
            if p.comm == "bwrap" and depth > 0:
                out[BY_DEPTH[min(depth, len(BY_DEPTH)) - 1]].append(e)
            else:
                out[f"trusted: {e.comm}"].append(e)
    return out


def run_once(course: Path, workers: int, env: dict[str, str]) -> tuple[dict[str, list[Exit]], float, int]:
    listener = ExitListener()
    listener.start()
    started = time.perf_counter()
    proc = subprocess.Popen(bench.course_cmd(course, "--force", workers=workers), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc.wait()
    wall = time.perf_counter() - started
    time.sleep(0.5)                         # the last records (the zygote's) arrive after the command ends
    listener.stop()
    if proc.returncode != 0:
        raise SystemExit(f"course autograde exited with {proc.returncode}")
    return by_role(listener.exits, proc.pid), wall, listener.lost


def report(groups: dict[str, list[Exit]], n: int) -> list[dict[str, object]]:
    rows = []
    for role, items in groups.items():
        cpu = sum(e.cpu_us for e in items) / 1000
        rows.append({"role": role, "processes": len(items), "per_submission": len(items) / n,
                     "cpu_ms_per_submission": cpu / n, "cpu_ms_per_process": cpu / len(items),
                     "minflt_per_process": sum(e.minflt for e in items) / len(items)})
    rows.sort(key=lambda r: -float(r["cpu_ms_per_submission"]))     # type: ignore[arg-type]
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100, help="cohort size (default 100)")
    p.add_argument("--workers", type=int, default=1, help="workers of `course autograde` (default 1)")
    p.add_argument("--repeat", type=int, default=1, help="rounds (default 1); each is printed")
    p.add_argument("--json", metavar="FILE", help="write every round's rows and scores to FILE")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("sandbox_roles.py: taskstats needs root", file=sys.stderr)
        return 2
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)     # PR_SET_CHILD_SUBREAPER: see `tree`
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    subs = bench.cohort(args.n)
    scratch = Path(tempfile.mkdtemp(prefix="sandbox-roles-"))
    rounds = []
    try:
        course = bench.make_course(scratch / "course", subs)
        for i in range(args.repeat):
            groups, wall, lost = run_once(course, args.workers, env)
            rows = report(groups, args.n)
            results = bench.our_results(course, [s.student for s in subs])
            scores = {s: r["score"] for s, r in results.items()}
            total = sum(v for v in scores.values() if isinstance(v, (int, float)))
            sandbox = sum(float(r["cpu_ms_per_submission"]) for r in rows      # type: ignore[arg-type]
                          if not str(r["role"]).startswith("trusted"))
            print(f"round {i + 1}: {args.n} submissions, {args.workers} worker(s), wall {wall:.1f} s"
                  f"{f', {lost} receive overflows (records lost)' if lost else ''}")
            print(f"  {'role':34s} {'procs/sub':>9s} {'ms/sub':>8s} {'ms/proc':>8s} {'faults/proc':>11s}")
            for r in rows:
                print(f"  {str(r['role'])[:34]:34s} {r['per_submission']:9.2f} {r['cpu_ms_per_submission']:8.2f} "
                      f"{r['cpu_ms_per_process']:8.2f} {r['minflt_per_process']:11.0f}")
            print(f"  sandbox total {sandbox:.2f} ms CPU per submission; scores: {len(scores)}, sum {total:.2f}")
            rounds.append({"wall": wall, "lost": lost, "rows": rows, "scores": scores})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rounds, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
