"""`course autograde`'s progress: a bar with rate and time left on a terminal, plain lines when piped."""
from __future__ import annotations

import io

from autograder.progress import Progress


def test_piped_progress_is_plain_lines_with_rate_and_time_left():
    """Piped, are there a few plain progress lines (not one per submission), the last at the total?"""
    out = io.StringIO()
    progress = Progress(out=out, err=io.StringIO(), bar=False)
    for done in range(1, 101):
        progress.update(done, 100)
    progress.close()
    lines = out.getvalue().splitlines()
    assert 2 <= len(lines) <= 12
    assert all(line.startswith("progress: ") for line in lines)
    assert lines[-1].startswith("progress: 100/100 submissions (") and lines[-1].endswith("/s)")
    assert "\r" not in out.getvalue()


def test_a_terminal_gets_a_bar_with_rate_and_eta():
    """On a terminal, is there a bar showing the count, the rate and the time left, and do the
    per-student lines still reach standard output?"""
    out, err = io.StringIO(), io.StringIO()
    progress = Progress(out=out, err=err, bar=True)
    progress.update(1, 4)
    progress.line("graded    ada   100.00/100")
    progress.update(4, 4)
    progress.close()
    assert "graded    ada" in out.getvalue()
    bar = err.getvalue()
    assert "4/4" in bar and "submission/s" in bar and "<" in bar     # tqdm: [elapsed<remaining, rate]
