"""Every catalogued mistake as a student writes it: graded for real, and the public checks that catch it.

    .venv/bin/python tools/public_checks.py            # grade them all, write docs/public-checks.md
    .venv/bin/python tools/public_checks.py --check    # exit 1 if docs/public-checks.md is out of date

For each mistake in assignments/transformer_block/mistakes.py, tools/submissions.py holds its student
form (the instructor's solution of one function with that one misconception). Each form is put into
the release notebook; its code cells run top to bottom as a student's "Run All" would (every cell,
recording which public-check cells and visible grade-cell tests raise), and the notebooks are graded
by `course autograde` in a scratch course with a fixed hidden-input seed. The table says, per
mistake, which public checks catch it, what they say, and how many hidden points it costs (and where).
"""
from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generated_doc
from submissions import ASSIGNMENT, MISTAKE_FORMS, NOTEBOOK, ROOT, UNCAUGHT_ON_PURPOSE, Case, build, mistake_cell

from assignments.transformer_block.mistakes import catalogue
from autograder.config import load_course
from autograder.layout import ROSTER_FILE, CourseLayout, copy_course

DOC = ROOT / "docs" / "public-checks.md"
SEED = 1                 # the hidden-input seed every mistake is graded with
THRESHOLD = 3.0          # a mistake costing this many points or more must be caught by a public check


@dataclass(frozen=True)
class Row:
    mistake: str
    function: str                      # the function the mistake is in
    caught_by: tuple[str, ...]         # the public cells that raise, in notebook order
    message: str                       # the first of them: what it says (first line, shortened)
    lost: float                        # hidden points lost in total
    lost_by_problem: tuple[tuple[str, float], ...]
    diagnoses: tuple[str, ...]         # what real grading named

    @property
    def lost_elsewhere(self) -> tuple[str, ...]:
        return tuple(p for p, pts in self.lost_by_problem if pts > 0 and p != self.function)


def mistake_notebooks() -> dict[str, bytes]:
    """The release notebook with each catalogued mistake's student form, by mistake id."""
    out = {}
    for mistake in catalogue.mistakes():
        function, code = mistake_cell(mistake.id)
        out[mistake.id] = build(Case(mistake.id, variants=((function, code),)))
    return out


def _label(cell: dict) -> str:
    """'public checks of `f`' for a check cell, 'visible test of `f`' for a grade cell, else ''."""
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
    if grade_id.startswith("test_"):
        return f"visible test of `{grade_id[len('test_'):]}`"
    cell_id = cell.get("id", "")
    if cell_id.endswith("-check"):
        return f"public checks of `{cell_id[:-len('-check')].replace('-', '_')}`"
    return ""


def public_failures(notebook: bytes) -> list[tuple[str, str]]:
    """(label, first line of the error) of every public cell that raises, running all cells in order."""
    nb = json.loads(notebook)
    namespace: dict = {"__name__": "__main__"}
    failures = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        try:
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(compile(source, "<cell>", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - a cell's error is the finding
            label = _label(cell)
            if label:
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                failures.append((label, f"{type(exc).__name__}: {text}" if text else type(exc).__name__))
    return failures


def grade(notebooks: dict[str, bytes], workdir: Path, seed: int = SEED) -> dict[str, dict]:
    """Grade the notebooks with `course autograde` in a scratch course; results.json by mistake id."""
    course = copy_course(ROOT, workdir / "course")
    layout = CourseLayout(course)
    for student, data in notebooks.items():
        folder = layout.submission(student, ASSIGNMENT)
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_bytes(data)
    (course / ROSTER_FILE).write_text("id\n" + "\n".join(notebooks) + "\n")
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", ASSIGNMENT, "--seed", str(seed),
                           "--course-dir", str(course)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"course autograde failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return {s: json.loads(layout.results_json(s, ASSIGNMENT).read_text()) for s in notebooks}


def rows(workdir: Path, seed: int = SEED) -> list[Row]:
    notebooks = mistake_notebooks()
    results = grade(notebooks, workdir, seed)
    out = []
    for mistake, data in notebooks.items():
        r = results[mistake]
        caught = public_failures(data)
        labels = tuple(dict.fromkeys(label for label, _ in caught))
        lost = tuple((p["problem"], round(p["max_score"] - p["score"], 2)) for p in r["extra_data"]["problems"])
        out.append(Row(mistake=mistake, function=MISTAKE_FORMS[mistake].function, caught_by=labels,
                       message=caught[0][1] if caught else "",
                       lost=round(r["max_score"] - r["extra_data"]["raw_score"], 2), lost_by_problem=lost,
                       diagnoses=tuple(r["extra_data"]["diagnoses"])))
    return out


def _points(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _cut(text: str, limit: int = 110) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def table(rows_: list[Row], seed: int = SEED) -> str:
    """docs/public-checks.md."""
    problems = [p.name for p in load_course(ROOT).assignment(ASSIGNMENT).problems]
    order = {p: i for i, p in enumerate(problems)}
    lines = [
        "# Public checks against the mistakes catalogue",
        "",
        "Generated by `tools/public_checks.py` (checked by `tests/tools/test_public_checks.py`; do not edit).",
        "Every mistake in `assignments/transformer_block/mistakes.py` is written the way a student writes it",
        "(`MISTAKE_FORMS` in `tools/submissions.py`: the solution of one function with that one misconception),",
        "put into the release notebook, run top to bottom like *Run All* (every cell), and graded by",
        f"`course autograde` with hidden-input seed {seed}.",
        "",
        "- **caught by**: the public cells that raise: a function's *public checks* cell, or the visible part of",
        "  its graded cell; the message is what the first of them says (it points at the cause, never at a",
        "  hidden expected value).",
        "- **hidden points**: what the hidden graders take off, all in the problem that holds the mistake unless",
        "  marked. Advice (numpy warnings, modified arguments) costs nothing.",
        f"- Every mistake that costs {_points(THRESHOLD)} points or more is caught by a public check, or the",
        "  last column says why it deliberately is not.",
        "",
        "| mistake | hidden points | caught by | what the public check says |",
        "|---|---:|---|---|",
    ]
    for row in sorted(rows_, key=lambda r: (order.get(r.function, len(order)), r.mistake)):
        elsewhere = "".join(f" ({_points(pts)} in `{p}`)" for p, pts in row.lost_by_problem
                            if pts > 0 and p != row.function)
        if row.caught_by:
            caught, says = ", ".join(row.caught_by), _cut(row.message)
        elif row.mistake in UNCAUGHT_ON_PURPOSE:
            caught, says = "not caught, on purpose", _cut(UNCAUGHT_ON_PURPOSE[row.mistake], 300)
        elif row.lost < THRESHOLD:
            caught, says = "not caught", f"costs under {_points(THRESHOLD)} points"
        else:
            caught, says = "**NOT CAUGHT**", "costs 3 points or more: add a public check or give the reason"
        lines.append(f"| `{row.mistake}` | {_points(row.lost)}{elsewhere} | {caught} | {says} |")
    caught_big = sum(1 for r in rows_ if r.lost >= THRESHOLD and r.caught_by)
    big = sum(1 for r in rows_ if r.lost >= THRESHOLD)
    lines += ["", f"{len(rows_)} mistakes; {big} cost {_points(THRESHOLD)} points or more, and "
              f"{caught_big} of those are caught by a public check.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return generated_doc.main(DOC, lambda tmp: table(rows(tmp)), __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
