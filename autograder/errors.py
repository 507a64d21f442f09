"""The project's own exceptions. The CLI turns any of them into one line and exit code 2."""


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
