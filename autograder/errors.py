"""The project's own exceptions. The CLI turns any of them into one line and exit code 2.

`raise_on_sigterm` turns SIGTERM into an exception that a command chooses, as Ctrl-C is turned into
KeyboardInterrupt: `course autograde`, `course validate` and `course serve` each stop on it as they
choose, cleaning up on their way out."""
from __future__ import annotations

import signal
import threading
from collections.abc import Callable


class CourseError(Exception):
    """A user-facing problem (bad config, missing file, failed release); the message is one line."""


class ConfigError(CourseError):
    """course.yml is malformed; the message names the key path."""


class ReleaseError(CourseError):
    """Generating or checking the student release failed."""


class SandboxUnavailable(CourseError):
    """The sandbox cannot be set up on this machine (one line: why, and how to fix it)."""


class ExportError(CourseError):
    """An export would give grades to the wrong students or be refused as a whole; nothing is written."""


def raise_on_sigterm(exception: type[BaseException], *args: object) -> Callable[[], None]:
    """From now on SIGTERM raises `exception(*args)` in this process; what is returned puts the previous
    handler back (the default one when the previous was not set from Python). Only the main thread may
    set a handler: called on another (a test running a command), SIGTERM is left as it is."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def raise_it(*_: object) -> None:
        raise exception(*args)

    previous = signal.signal(signal.SIGTERM, raise_it)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)

    return restore
