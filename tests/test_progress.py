"""`course autograde`'s progress: a bar with rate and time left on a terminal, plain lines when piped, both on
standard error, as are notices about the run; standard output holds the per-student lines."""
from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from autograder.progress import Progress
from tests.conftest import ROOT


def test_piped_progress_is_plain_lines_with_rate_and_time_left():
    """Piped, are there a few plain progress lines (not one per submission) on standard error, the last at the
    total, and nothing of them on standard output?"""
    out, err = io.StringIO(), io.StringIO()
    progress = Progress(out=out, err=err, bar=False)
    for done in range(1, 101):
        progress.update(done, 100)
    progress.close()
    assert out.getvalue() == ""
    lines = err.getvalue().splitlines()
    assert 2 <= len(lines) <= 12
    assert all(line.startswith("progress: ") for line in lines)
    assert lines[-1].startswith("progress: 100/100 submissions (") and lines[-1].endswith("/s)")
    assert "\r" not in err.getvalue()


def test_piped_progress_measures_its_rate_from_the_first_result_on(monkeypatch):
    """After ten minutes before the first result (another command held the gradebook lock), then ten
    results a second, do the plain lines give that rate and the few seconds left, not a rate and a time
    left diluted by the wait?"""
    from autograder import progress as module

    clock = [0.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    err = io.StringIO()
    progress = Progress(out=io.StringIO(), err=err, bar=False)
    clock[0] = 600.0
    for done in range(1, 101):
        progress.update(done, 100)
        clock[0] += 0.1
    lines = err.getvalue().splitlines()
    assert lines[0] == "progress: 1/100 submissions"
    assert "progress: 10/100 submissions (10.0/s, about 9 s left)" in lines, lines
    assert lines[-1] == "progress: 100/100 submissions (10.0/s)"


def test_piped_progress_time_left_follows_the_graded_ones_after_the_unchanged_ones(monkeypatch):
    """When 900 submissions unchanged since the last run come at once, then 100 graded at ten a
    second, does the time left, once grading has run a while, follow the grading's rate (not the
    burst's)?"""
    from autograder import progress as module

    clock = [0.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    err = io.StringIO()
    progress = Progress(out=io.StringIO(), err=err, bar=False)
    for done in range(1, 901):
        progress.update(done, 1000)
        clock[0] += 0.0001
    for done in range(901, 1001):
        clock[0] += 0.1
        progress.update(done, 1000)
    lines = err.getvalue().splitlines()
    assert lines[-1] == "progress: 1000/1000 submissions (10.0/s)", lines
    late = [line for line in lines if 920 < int(line.split()[1].split("/")[0]) < 1000]
    assert late and all(", about " in line for line in late), lines
    for line in late:
        done = int(line.split()[1].split("/")[0])
        assert f"(10.0/s, about {round((1000 - done) / 10)} s left)" in line, line


@pytest.mark.parametrize("bar", [False, True])
def test_a_notice_goes_to_standard_error_and_a_students_line_to_standard_output(bar):
    """Is a notice about the run (a wait for the gradebook) written on standard error, with or without a bar,
    while a student's line stays on standard output?"""
    out, err = io.StringIO(), io.StringIO()
    progress = Progress(out=out, err=err, bar=bar)
    progress.update(1, 4)
    progress.notice("waiting for the gradebook: process 12 is still writing it")
    progress.line("graded    ada   100.00/100")
    progress.close()
    assert out.getvalue() == "graded    ada   100.00/100\n"
    assert "waiting for the gradebook: process 12 is still writing it\n" in err.getvalue()


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


def _bar_on_a_real_terminal(rows: int, columns: int) -> str:
    """What a batch's progress draws on standard error when that is a pseudo-terminal of this size
    (0x0: a terminal that does not know its size, as under `script` run from a non-terminal)."""
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    code = ("from autograder.progress import Progress\n"
            "p = Progress()\n"
            "for done in range(5):\n"
            "    p.update(done, 4)\n"
            "p.close()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=secondary, cwd=ROOT)
    os.close(secondary)
    drawn = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:         # EIO: the child has closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    os.close(primary)
    assert proc.wait(timeout=60) == 0
    return drawn.decode()


@pytest.mark.parametrize("rows, columns", [(24, 100), (0, 0)])
def test_the_bar_is_drawn_on_a_real_terminal_even_one_that_does_not_know_its_size(rows, columns):
    """On a real terminal, sized or reporting 0x0 (where tqdm on its own draws nothing), is the bar
    drawn with its count and rate, within the terminal's width when it has one?"""
    drawn = _bar_on_a_real_terminal(rows, columns)
    assert "grading:" in drawn and "4/4" in drawn and "submission/s" in drawn
    widest = max(len(line) for line in drawn.replace("\r\n", "\r").split("\r"))
    assert widest <= (columns or 80)
