"""How `course autograde` shows a batch's progress: a bar with rate and ETA (tqdm) on a terminal,
plain lines when standard error is piped or written to a file.

    progress = Progress(out=sys.stdout, err=sys.stderr)
    api.autograde(..., log=progress.line, progress=progress.update, notice=progress.notice)
    progress.close()

Standard output holds the command's report alone (each student's line, then the summary), for a
script to read; the progress, bar or lines, and the notices about the run itself (a wait for the
gradebook, a `course serve` server used or not) go to standard error.
"""
from __future__ import annotations

import os
import sys
import time
from collections import deque
from typing import Any, TextIO

PLAIN_EVERY_SECONDS = 5.0      # piped: a progress line at each tenth of the batch, and between tenths once
                               # a submission is done this long after the last line
RATE_OVER = 20                 # piped: the rate is measured over the last this many submissions


def _eta(seconds: float) -> str:
    whole = max(round(seconds), 0)
    return f"{whole // 60}:{whole % 60:02d}" if whole >= 60 else f"{whole} s"


class Progress:
    """Per-student lines (`line`, on `out`), notices about the run (`notice`, on `err`) and the batch's
    progress (`update(done, total)`, on `err`)."""

    def __init__(self, *, out: TextIO | None = None, err: TextIO | None = None, bar: bool | None = None):
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.bar = self.err.isatty() if bar is None else bar
        self._tqdm: Any = None
        self._seen: deque[tuple[float, int]] = deque(maxlen=RATE_OVER + 1)   # (when, done): the last updates
        self._last_line = 0.0
        self._last_tenth = 0

    def line(self, text: str) -> None:
        """A line of the command's report, on `out`."""
        self._write(text, self.out)

    def notice(self, text: str) -> None:
        """A line about the run itself, on `err`."""
        self._write(text, self.err)

    def _write(self, text: str, stream: TextIO) -> None:
        """`text` on `stream`, above the bar when one is drawn."""
        if self._tqdm is not None:
            self._tqdm.write(text, file=stream)
        else:
            print(text, file=stream, flush=True)

    def update(self, done: int, total: int) -> None:
        """`done` of `total` submissions have their results written."""
        if self.bar:
            self._update_bar(done, total)
        else:
            self._update_plain(done, total)

    def _update_bar(self, done: int, total: int) -> None:
        if self._tqdm is None:
            from tqdm import tqdm
            self._tqdm = tqdm(total=total, unit="submission", file=self.err, smoothing=0.1, desc="grading",
                              **self._size())
        self._tqdm.total = total
        self._tqdm.update(done - self._tqdm.n)

    def _size(self) -> dict[str, Any]:
        """tqdm's size options: follow the terminal's size, or a fixed 80x24 when the terminal does not
        know its own (0x0, as under `script` from a non-terminal or some log collectors), where
        tqdm would otherwise draw nothing at all."""
        try:
            size = os.get_terminal_size(self.err.fileno())
        except (AttributeError, OSError, ValueError):
            size = os.terminal_size((0, 0))
        if size.columns > 0 and size.lines > 0:
            return {"dynamic_ncols": True}
        return {"ncols": size.columns if size.columns > 0 else 80, "nrows": size.lines if size.lines > 0 else 24}

    def _update_plain(self, done: int, total: int) -> None:
        """A line at each tenth, and between tenths at most every PLAIN_EVERY_SECONDS. The rate is
        measured from the first update on, as the bar's is: what came before it (the workers' start,
        a wait for another command's gradebook lock) says nothing of how fast the rest goes; and over
        the last RATE_OVER updates once there are more: the submissions not graded again (unchanged
        since the last run) come first, all at once, and would make the time left of those graded
        after them look far too short."""
        if total < 2:
            return
        now = time.monotonic()
        self._seen.append((now, done))
        tenth = done * 10 // max(total, 1)
        if done < total and tenth == self._last_tenth and now - self._last_line < PLAIN_EVERY_SECONDS:
            return
        self._last_tenth, self._last_line = tenth, now
        since, first = self._seen[0]
        elapsed = now - since
        if elapsed <= 0 or done <= first:
            print(f"progress: {done}/{total} submissions", file=self.err, flush=True)
            return
        rate = (done - first) / elapsed
        eta = f", about {_eta((total - done) / rate)} left" if done < total else ""
        print(f"progress: {done}/{total} submissions ({rate:.1f}/s{eta})", file=self.err, flush=True)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
