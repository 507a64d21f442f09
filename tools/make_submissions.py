"""Write the synthetic submissions: the test corpus and the demo class.

    .venv/bin/python tools/make_submissions.py            # rewrite tests/corpus/ and examples/
    .venv/bin/python tools/make_submissions.py --check    # exit 1 if either is out of date

tests/corpus/submitted/<case>/transformer-block/transformer-block.ipynb, with
tests/corpus/expected.json (what grading each case must show);
examples/submitted/<student>/transformer-block/transformer-block.ipynb and examples/roster.csv.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import nbformat

from autograder.layout import EXAMPLES, ROSTER_FILE, CourseLayout

sys.path.insert(0, str(Path(__file__).resolve().parent))
from submissions import (
    ASSIGNMENT,
    BLOCK_EXACT_GELU,
    BLOCK_MISSING_ATTENTION_RESIDUAL,
    BLOCK_MISSING_RESIDUAL,
    BLOCK_POST_LN,
    CHEAT_CELL,
    COUNT_NO_LN,
    FUNCTIONS,
    LAYER_NORM_CRASHES_PROCESS,
    LN_EPS_OUTSIDE,
    LN_FLOAT32,
    LN_MASKED_ARRAY,
    LN_UNBIASED,
    LN_WRONG_AXIS,
    MAGICS_CELL,
    MERGE_NO_TRANSPOSE,
    MHA_MASK_INVERTED,
    MHA_MASK_UPCAST,
    MHA_MISSING_SCALE,
    MHA_SOFTMAX_WRONG_AXIS,
    NOTEBOOK,
    RMS_CENTRED,
    ROOT,
    SILU_NAIVE,
    SILU_RELU,
    SILU_TANH,
    SPLIT_NO_TRANSPOSE,
    STEAL_CELL,
    SWIGLU_GATE_ON_UP,
    SWIGLU_INFINITE_LOOP,
    Case,
    build,
    mistake_cell,
    solution_index,
)


def _drop_non_solution_code(nb):
    """Delete every public-check and test cell (students do this)."""
    keep = set(solution_index(nb).values())
    nb.cells = [c for i, c in enumerate(nb.cells) if i in keep or c.cell_type != "code" or i == _setup(nb)]
    return nb


def _setup(nb) -> int:
    for i, c in enumerate(nb.cells):
        if c.cell_type == "code":
            return i
    return 0


def _delete_solution(fn):
    def edit(nb):
        del nb.cells[solution_index(nb)[fn]]
        return nb
    return edit


def _duplicate_all_code(nb):
    out = []
    for c in nb.cells:
        out.append(c)
        if c.cell_type == "code":
            out.append(nbformat.from_dict(json.loads(json.dumps(c))))
            out[-1].pop("id", None)
            out[-1]["id"] = f"{c.get('id', 'cell')}-dup"
    nb.cells = out
    return nb


def _reverse_after_setup(nb):
    """Solution cells in reverse order, checks first: functions still all get defined."""
    s = _setup(nb)
    sols = set(solution_index(nb).values())
    head = nb.cells[: s + 1]
    rest = [c for i, c in enumerate(nb.cells) if i > s and i not in sols]
    nb.cells = head + rest + [nb.cells[i] for i in sorted(sols, reverse=True)]
    return nb


def _rename(fn, new):
    def edit(nb):
        cell = nb.cells[solution_index(nb)[fn]]
        cell.source = cell.source.replace(f"def {fn}(", f"def {new}(")
        return nb
    return edit


def _syntax_error_in(fn):
    def edit(nb):
        cell = nb.cells[solution_index(nb)[fn]]
        cell.source = cell.source.replace(f"def {fn}(", f"def {fn}((", 1)
        return nb
    return edit


def _as_v3(case: Case) -> bytes:
    nb = nbformat.reads(build(case).decode(), as_version=4)
    return nbformat.writes(nbformat.convert(nb, 3)).encode()


RAISES_CELL = 'raise RuntimeError("this cell was left broken")'
PRINTS_CELL = 'for _ in range(20000):\n    print("debugging output " * 10)'

PARTIAL_DONE = ("layer_norm", "split_heads", "merge_heads")
PARTIAL_NOT_GRADED = ("pre_ln_block", "swiglu_ffn")
# every other problem of course.yml is left as the release's stub, so it loses points: a problem
# added to course.yml joins this list without an edit here
PARTIAL_LOSES = tuple(f for f in FUNCTIONS if f not in PARTIAL_DONE + PARTIAL_NOT_GRADED)

CORPUS: list[Case] = [
    Case("correct", description="every function right"),
    Case("unanswered", done=(), zero=True, not_graded=("multi_head_attention", "pre_ln_block", "swiglu_ffn"),
         description="the release notebook as handed out"),
    Case("partial", done=PARTIAL_DONE, lose=PARTIAL_LOSES, not_graded=PARTIAL_NOT_GRADED,
         description="only layer_norm, split_heads and merge_heads written: the block needs the unwritten "
                     "multi_head_attention and swiglu_ffn the unwritten silu, so those are not graded"),
    Case("ln_unbiased", variants=(("layer_norm", LN_UNBIASED),), lose=("layer_norm",),
         diagnoses=("layer_norm.unbiased_variance",)),
    Case("ln_eps_outside", variants=(("layer_norm", LN_EPS_OUTSIDE),), lose=("layer_norm",),
         diagnoses=("layer_norm.eps_outside_sqrt",)),
    Case("rms_centred", variants=(("rms_norm", RMS_CENTRED),), lose=("rms_norm",),
         diagnoses=("rms_norm.subtracts_mean",)),
    Case("ln_wrong_axis", variants=(("layer_norm", LN_WRONG_AXIS),), lose=("layer_norm",),
         diagnoses=("layer_norm.wrong_axis",)),
    Case("split_no_transpose", variants=(("split_heads", SPLIT_NO_TRANSPOSE),), lose=("split_heads",),
         diagnoses=("split_heads.reshape_without_transpose",)),
    Case("merge_no_transpose", variants=(("merge_heads", MERGE_NO_TRANSPOSE),), lose=("merge_heads",),
         diagnoses=("merge_heads.reshape_without_transpose",)),
    Case("mha_missing_scale", variants=(("multi_head_attention", MHA_MISSING_SCALE),),
         lose=("multi_head_attention",), diagnoses=("multi_head_attention.missing_scale",)),
    Case("mha_softmax_wrong_axis", variants=(("multi_head_attention", MHA_SOFTMAX_WRONG_AXIS),),
         lose=("multi_head_attention",), diagnoses=("multi_head_attention.softmax_wrong_axis",)),
    Case("mha_mask_inverted", variants=(("multi_head_attention", MHA_MASK_INVERTED),),
         lose=("multi_head_attention",), not_graded=("pre_ln_block",),
         diagnoses=("multi_head_attention.mask_inverted",),
         description="on one token every key is blocked: multi_head_attention returns NaN whatever its input, so "
                     "pre_ln_block cannot be checked through it there (not graded), and graded through it elsewhere"),
    Case("block_post_ln", variants=(("pre_ln_block", BLOCK_POST_LN),), lose=("pre_ln_block",),
         diagnoses=("pre_ln_block.post_ln",)),
    Case("block_post_ln_on_wrong_layer_norm", variants=(("layer_norm", LN_UNBIASED), ("pre_ln_block", BLOCK_POST_LN)),
         lose=("layer_norm", "pre_ln_block"), diagnoses=("layer_norm.unbiased_variance", "pre_ln_block.post_ln"),
         description="a Post-LN block on the student's own layer_norm, which uses the sample variance: the block is "
                     "named Post-LN (its variant run on that layer_norm), not localised to its residual path"),
    Case("block_layer_norm_eps", variants=(mistake_cell("pre_ln_block.smaller_layer_norm_eps"),),
         lose=("pre_ln_block",), diagnoses=("pre_ln_block.smaller_layer_norm_eps",),
         description="the block passes eps=1e-6 to both of its LayerNorms: charged by the float64 checks, "
                     "named for it; the float32 check's tokens are spread so that eps cannot show there"),
    Case("block_missing_residual", variants=(("pre_ln_block", BLOCK_MISSING_RESIDUAL),),
         lose=("pre_ln_block",), diagnoses=("pre_ln_block.missing_residual",)),
    Case("block_missing_attention_residual", variants=(("pre_ln_block", BLOCK_MISSING_ATTENTION_RESIDUAL),),
         lose=("pre_ln_block",), diagnoses=("pre_ln_block.missing_attention_residual",)),
    Case("block_exact_gelu", variants=(("pre_ln_block", BLOCK_EXACT_GELU),), lose=("pre_ln_block",),
         diagnoses=("pre_ln_block.exact_gelu",)),
    Case("swiglu_gate_on_up", variants=(("swiglu_ffn", SWIGLU_GATE_ON_UP),), lose=("swiglu_ffn",),
         diagnoses=("swiglu_ffn.gate_on_up_branch",)),
    Case("silu_naive", variants=(("silu", SILU_NAIVE),), diagnoses=("silu.exp_overflow",),
         description="x / (1 + exp(-x)) overflows with a warning for large negative x but returns the right "
                     "values: advice, no points lost"),
    Case("silu_relu", variants=(("silu", SILU_RELU),), lose=("silu",), diagnoses=("silu.relu",),
         description="silu = ReLU, which agrees with SiLU to machine precision on inputs of size 50 and more: "
                     "the large-input check has ordinary inputs among its large ones, so no silu points"),
    Case("silu_tanh", variants=(("silu", SILU_TANH),),
         description="x * (1 + tanh(x / 2)) / 2 is SiLU too, finite and warning-free: full marks"),
    Case("ln_float32", variants=(("layer_norm", LN_FLOAT32),), lose=("layer_norm",),
         diagnoses=("general.computed_in_lower_precision",),
         description="layer_norm casts x to float32 (the result is float64 again, through gamma): named as "
                     "a computation in lower precision, never as a stage such as eps handling"),
    Case("mha_mask_upcast", variants=(("multi_head_attention", MHA_MASK_UPCAST),), lose=("multi_head_attention",),
         diagnoses=("general.float32_upcast",),
         description="the boolean mask applied as scores + (1 - mask) * -1e9, a float64 array: float32 inputs "
                     "with a mask come back float64 (multi_head_attention's masked float32 check; pre_ln_block, "
                     "which only passes the mask on, is not charged)"),
    Case("count_no_layernorm", variants=(("count_block_params", COUNT_NO_LN),), lose=("count_block_params",),
         diagnoses=("count_block_params.missing_norm_params",)),
    Case("cheater", variants=(("layer_norm", LN_UNBIASED),), early_cells=(CHEAT_CELL,), lose=("layer_norm",),
         diagnoses=("layer_norm.unbiased_variance",),
         description="ln_unbiased plus a cell that patches np.allclose, np.isclose and np.testing"),
    Case("steals_solutions", done=tuple(f for f in FUNCTIONS if f != "layer_norm"), extra_cells=(STEAL_CELL,),
         lose=("layer_norm",), not_graded=("pre_ln_block",),
         description="layer_norm left unwritten; a cell looks for the instructor's "
         "solution in the course folder (source/, the corpus, the examples) and runs it: all hidden"),
    Case("swiglu_hangs", variants=(("swiglu_ffn", SWIGLU_INFINITE_LOOP),), lose=("swiglu_ffn",),
         note="restarted", description="an infinite loop in swiglu_ffn costs swiglu_ffn only"),
    Case("layer_norm_kills_process", variants=(("layer_norm", LAYER_NORM_CRASHES_PROCESS),), lose=("layer_norm",),
         not_graded=("pre_ln_block",), note="restarted",
         description="os._exit inside layer_norm costs layer_norm; pre_ln_block, which calls it, is not graded"),
    Case("returns_masked_array", variants=(("layer_norm", LN_MASKED_ARRAY),), lose=("layer_norm",),
         not_graded=("pre_ln_block",),
         description="right numbers in an ndarray subclass: a wrong answer with a clear message (and the "
                     "block, which passes it on, is not graded)"),
    Case("ipython_magics", extra_cells=(MAGICS_CELL,), note="magic",
         description="%matplotlib and !pip lines are skipped with a note"),
    # broken files and edited notebooks
    Case("not_json", raw=b'{"cells": [ {"cell_type": "code", "source": "def layer_norm(', zero=True,
         note="not valid notebook JSON"),
    Case("empty_file", raw=b"", zero=True, note="empty file"),
    Case("no_code_cells", raw=nbformat.writes(nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("I ran out of time.", id="only-prose")])).encode(),
         zero=True, note="no code cells"),
    Case("syntax_error", edit=_syntax_error_in("silu"), lose=("silu",), not_graded=("swiglu_ffn",), note="SyntaxError",
         description="silu's cell does not compile, so swiglu_ffn (which calls it) cannot be graded"),
    Case("renamed_function", edit=_rename("layer_norm", "layernorm"), lose=("layer_norm",),
         not_graded=("pre_ln_block",),
         description="layer_norm renamed: pre_ln_block still calls layer_norm, so it cannot be graded"),
    Case("cells_deleted", edit=_drop_non_solution_code, description="every check and test cell deleted"),
    Case("solution_deleted", edit=_delete_solution("count_block_params"), lose=("count_block_params",)),
    Case("cells_duplicated", edit=_duplicate_all_code),
    Case("cells_reordered", edit=_reverse_after_setup, note="NameError"),
    Case("cell_raises", extra_cells=(RAISES_CELL,), note="RuntimeError"),
    Case("prints_a_lot", extra_cells=(PRINTS_CELL,)),
]
# nbformat 3 needs the built v4 notebook first
CORPUS.append(Case("nbformat3", raw=_as_v3(Case("v3")), note="format 3"))

# The demo class: a dozen students.
DEMO: list[tuple[str, str, Case]] = [
    ("ada", "Ada Lovelace", Case("ada")),
    ("alan", "Alan Turing", Case("alan")),
    ("grace", "Grace Hopper", Case("grace", variants=(("silu", SILU_NAIVE),))),
    ("katherine", "Katherine Johnson", Case("katherine", variants=(("layer_norm", LN_UNBIASED),))),
    ("edsger", "Edsger Dijkstra", Case("edsger", variants=(("split_heads", SPLIT_NO_TRANSPOSE),
                                                           ("merge_heads", MERGE_NO_TRANSPOSE)))),
    ("barbara", "Barbara Liskov", Case("barbara", variants=(("multi_head_attention", MHA_MISSING_SCALE),
                                                            ("rms_norm", RMS_CENTRED)))),
    ("donald", "Donald Knuth", Case("donald", variants=(("pre_ln_block", BLOCK_POST_LN),))),
    ("frances", "Frances Allen", Case("frances", variants=(("swiglu_ffn", SWIGLU_GATE_ON_UP),
                                                          ("count_block_params", COUNT_NO_LN)))),
    ("john", "John Backus", Case("john", done=("layer_norm", "split_heads", "merge_heads", "silu"))),
    # patches numpy before any test cell runs: nbgrader's in-kernel tests then pass everything
    ("mallory", "Mallory Patch", Case("mallory", variants=(("layer_norm", LN_UNBIASED),), early_cells=(CHEAT_CELL,))),
    ("radia", "Radia Perlman", Case("radia", variants=(("multi_head_attention", MHA_MASK_INVERTED),),
                                    edit=_rename("count_block_params", "count_params"))),
    ("late_joiner", "", Case("late_joiner", variants=(("pre_ln_block", BLOCK_MISSING_ATTENTION_RESIDUAL),))),
    ("ken", "Ken Thompson", Case("ken", raw=b'{"nbformat": 4, "cells": [')),
]
NOT_ON_ROSTER = {"late_joiner"}
ON_TIME = "2026-11-16 18:00:00.000000 UTC"
LATE_STAMPS = {"alan": "2026-11-17 09:30:00.000000 UTC"}   # due 2026-11-16 23:59 UTC + 15 min grace


def expected(case: Case) -> dict:
    return {"lose": list(case.lose), "not_graded": list(case.not_graded), "zero": case.zero,
            "diagnoses": list(case.diagnoses), "note": case.note, "description": case.description}


def outputs() -> dict[Path, bytes]:
    files: dict[Path, bytes] = {}
    corpus = CourseLayout(ROOT / "tests" / "corpus")
    for case in CORPUS:
        files[corpus.submission(case.name, ASSIGNMENT) / NOTEBOOK] = build(case)
    files[corpus.root / "expected.json"] = (json.dumps({c.name: expected(c) for c in CORPUS}, indent=1) + "\n").encode()
    examples = CourseLayout(ROOT / EXAMPLES)
    roster = ["id,first_name,last_name,email"]
    for sid, full, case in DEMO:
        files[examples.submission(sid, ASSIGNMENT) / NOTEBOOK] = build(case)
        # nbgrader's collect writes when each submission arrived; one student is a day late.
        files[examples.submission(sid, ASSIGNMENT) / "timestamp.txt"] = LATE_STAMPS.get(sid, ON_TIME).encode()
        if sid not in NOT_ON_ROSTER:
            first, _, last = full.partition(" ")
            roster.append(f"{sid},{first},{last},{sid}@example.edu")
    files[examples.root / ROSTER_FILE] = ("\n".join(roster) + "\n").encode()
    return files


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only report files that are out of date")
    args = p.parse_args(argv)
    stale = []
    for path, data in outputs().items():
        if not path.exists() or path.read_bytes() != data:
            stale.append(path)
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    for path in stale:
        print(("out of date: " if args.check else "wrote ") + str(path.relative_to(ROOT)))
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
