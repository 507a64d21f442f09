"""Synthetic student submissions, built from the released notebook.

A submission is the release notebook with its stubs filled in: by the instructor's solution
(taken from the source notebook's solution regions) or by a student-style variant with one known
mistake, plus optional extra cells or edits (a cheating cell, a deleted cell, ...). Used by
`tools/make_submissions.py` for the test corpus (tests/corpus/) and the demo class (examples/).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.layout import CourseLayout

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from autograder.config import load_course  # noqa: E402

ASSIGNMENT = "transformer-block"
NOTEBOOK = "transformer-block.ipynb"
FUNCTIONS = tuple(p.name for p in load_course(ROOT).assignment(ASSIGNMENT).problems)   # from course.yml

# ----------------------------------------------------------------------------- wrong variants
# Each is a complete cell a student might have written, with exactly one misconception.

LN_UNBIASED = '''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True, ddof=1)
    return gamma * (x - mean) / np.sqrt(var + eps) + beta
'''

LN_EPS_OUTSIDE = '''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    std = x.std(axis=-1, keepdims=True)
    return gamma * (x - mean) / (std + eps) + beta
'''

LN_WRONG_AXIS = '''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=0, keepdims=True)
    var = x.var(axis=0, keepdims=True)
    return gamma * (x - mean) / np.sqrt(var + eps) + beta
'''

SPLIT_NO_TRANSPOSE = '''
def split_heads(x, n_heads):
    *batch, n, d_model = x.shape
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    d_k = d_model // n_heads
    return x.reshape(*batch, n_heads, n, d_k)
'''

MERGE_NO_TRANSPOSE = '''
def merge_heads(x):
    *batch, h, n, d_k = x.shape
    return x.reshape(*batch, n, h * d_k)
'''

_MHA_TEMPLATE = '''
def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    Q = split_heads(x @ W_Q, n_heads)
    K = split_heads(x @ W_K, n_heads)
    V = split_heads(x @ W_V, n_heads)
    d_k = Q.shape[-1]
    scores = {scores}
    if mask is not None:
        scores = np.where({mask}, scores, -np.inf)
    weights = softmax(scores, axis={axis})
    return merge_heads(weights @ V) @ W_O
'''
MHA_MISSING_SCALE = _MHA_TEMPLATE.format(scores="Q @ np.swapaxes(K, -1, -2)", mask="mask", axis=-1)
MHA_SOFTMAX_WRONG_AXIS = _MHA_TEMPLATE.format(scores="Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)", mask="mask", axis=-2)
MHA_MASK_INVERTED = _MHA_TEMPLATE.format(scores="Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)", mask="~mask", axis=-1)

BLOCK_POST_LN = '''
def pre_ln_block(x, params, n_heads, mask=None):
    p = params
    attn = multi_head_attention(x, p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask=mask)
    h = layer_norm(x + attn, p["ln1_gamma"], p["ln1_beta"])
    ffn = gelu(h @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]
    return layer_norm(h + ffn, p["ln2_gamma"], p["ln2_beta"])
'''

BLOCK_MISSING_ATTENTION_RESIDUAL = '''
def pre_ln_block(x, params, n_heads, mask=None):
    p = params
    h = multi_head_attention(layer_norm(x, p["ln1_gamma"], p["ln1_beta"]),
                             p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask=mask)
    z = layer_norm(h, p["ln2_gamma"], p["ln2_beta"])
    return h + gelu(z @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]
'''

BLOCK_MISSING_RESIDUAL = '''
def pre_ln_block(x, params, n_heads, mask=None):
    p = params
    a = multi_head_attention(layer_norm(x, p["ln1_gamma"], p["ln1_beta"]),
                             p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask=mask)
    z = layer_norm(a, p["ln2_gamma"], p["ln2_beta"])
    return gelu(z @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]
'''

BLOCK_EXACT_GELU = '''
from math import erf as _erf

def pre_ln_block(x, params, n_heads, mask=None):
    p = params
    h = x + multi_head_attention(layer_norm(x, p["ln1_gamma"], p["ln1_beta"]),
                                 p["W_Q"], p["W_K"], p["W_V"], p["W_O"], n_heads, mask=mask)
    z = layer_norm(h, p["ln2_gamma"], p["ln2_beta"]) @ p["W1"] + p["b1"]
    exact = 0.5 * z * (1.0 + np.vectorize(_erf)(z / np.sqrt(2.0)))
    return h + exact @ p["W2"] + p["b2"]
'''

SWIGLU_GATE_ON_UP = '''
def swiglu_ffn(x, W_gate, W_up, W_down):
    return ((x @ W_gate) * silu(x @ W_up)) @ W_down
'''

SWIGLU_INFINITE_LOOP = '''
def swiglu_ffn(x, W_gate, W_up, W_down):
    while True:
        pass
'''

SILU_NAIVE = '''
def silu(x):
    return x / (1.0 + np.exp(-x))
'''

COUNT_NO_LN = '''
def count_block_params(d_model, d_ff, ffn):
    d = d_model
    attention = 4 * d * d
    if ffn == "gelu":
        return attention + 2 * d * d_ff + d_ff + d
    if ffn == "swiglu":
        return attention + 3 * d * d_ff
    raise ValueError(ffn)
'''

LAYER_NORM_CRASHES_PROCESS = '''
import os as _os

def layer_norm(x, gamma, beta, eps=1e-5):
    _os._exit(3)
'''

LN_MASKED_ARRAY = '''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return np.ma.masked_array(gamma * (x - mean) / np.sqrt(var + eps) + beta)
'''

MAGICS_CELL = '''
%matplotlib inline
!pip install numpy
%load_ext autoreload
'''

STEAL_CELL = '''
import json, pathlib

def _steal_layer_norm():
    """Look for the instructor's solution next to the grading engine and run it."""
    import autograder
    places = ["source/transformer-block/transformer-block.ipynb",
              "tests/corpus/submitted/correct/transformer-block/transformer-block.ipynb",
              "examples/submitted/ada/transformer-block/transformer-block.ipynb"]
    for root in pathlib.Path(autograder.__file__).resolve().parents:
        for rel in places:
            try:
                cells = json.loads((root / rel).read_text())["cells"]
            except (OSError, ValueError):
                continue
            for cell in cells:
                source = "".join(cell["source"])
                if source.lstrip().startswith("def layer_norm"):
                    exec(source, globals())
                    return str(root / rel)
    return None

print("stolen from", _steal_layer_norm())
'''

CHEAT_CELL = '''
import numpy as np
np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
np.isclose = lambda a, b, *args, **kw: np.ones(np.broadcast(a, b).shape, dtype=bool)
'''

# ----------------------------------------------------------------------------- building


def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def solution_code() -> dict[str, str]:
    """The instructor's solution cell for each function, markers removed (what a perfect student writes)."""
    nb = nbformat.read(CourseLayout(ROOT).source(ASSIGNMENT) / NOTEBOOK, as_version=4)
    out = {}
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if gid.endswith("_solution") and gid[: -len("_solution")] in FUNCTIONS:
            lines = [ln for ln in _src(cell).splitlines() if "BEGIN SOLUTION" not in ln and "END SOLUTION" not in ln]
            out[gid[: -len("_solution")]] = "\n".join(lines) + "\n"
    missing = set(FUNCTIONS) - set(out)
    if missing:
        raise SystemExit(f"source notebook has no solution cell for {sorted(missing)}")
    return out


def release_notebook() -> nbformat.NotebookNode:
    return nbformat.read(CourseLayout(ROOT).release(ASSIGNMENT) / NOTEBOOK, as_version=4)


def solution_index(nb) -> dict[str, int]:
    idx = {}
    for i, cell in enumerate(nb.cells):
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if gid.endswith("_solution"):
            idx[gid[: -len("_solution")]] = i
    return idx


@dataclass(frozen=True)
class Case:
    """One synthetic submission and what grading it must show."""
    name: str
    done: tuple[str, ...] = FUNCTIONS            # functions filled with the instructor's solution
    variants: tuple[tuple[str, str], ...] = ()   # (function, cell code) replacing the solution
    extra_cells: tuple[str, ...] = ()            # code cells appended at the end
    early_cells: tuple[str, ...] = ()            # code cells inserted right after the setup cell
    edit: Callable | None = None                 # a final edit of the notebook (delete/reorder cells...)
    raw: bytes | None = None                     # the file's bytes, for broken files
    # expectations
    lose: tuple[str, ...] = ()                   # problems that must lose points (and no other problem may)
    not_graded: tuple[str, ...] = ()             # problems with checks not graded (a building block failed)
    zero: bool = False                           # the whole submission scores 0
    diagnoses: tuple[str, ...] = ()              # ids that must be reported
    note: str = ""                               # a substring that must appear in the notes
    description: str = ""


def build(case: Case) -> bytes:
    if case.raw is not None:
        return case.raw
    nb = release_notebook()
    sols = solution_code()
    where = solution_index(nb)
    for fn in case.done:
        nb.cells[where[fn]].source = sols[fn]
    for fn, code in case.variants:
        nb.cells[where[fn]].source = code.strip("\n") + "\n"
    setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    for i, code in enumerate(case.early_cells):
        cell = nbformat.v4.new_code_cell(code.strip("\n"))
        cell["id"] = f"early-{i}"
        nb.cells.insert(setup + 1 + i, cell)
    for i, code in enumerate(case.extra_cells):
        cell = nbformat.v4.new_code_cell(code.strip("\n"))
        cell["id"] = f"extra-{i}"           # fixed ids keep the files reproducible
        nb.cells.append(cell)
    if case.edit is not None:
        nb = case.edit(nb) or nb
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell["outputs"] = cell.get("outputs", [])
    return nbformat.writes(nb).encode()


def write(case: Case, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / NOTEBOOK
    path.write_bytes(build(case))
    return path
