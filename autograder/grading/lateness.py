"""Late submissions: when a submission was made (nbgrader's timestamp.txt) and what the course's
late policy takes off for it."""
from __future__ import annotations

import datetime as dt
import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..config import Assignment

TIMESTAMP_FILE = "timestamp.txt"   # written by nbgrader's collect/submit into each submission folder
TIMESTAMP_MAX_BYTES = 4096


@dataclass(frozen=True)
class Lateness:
    submitted_at: dt.datetime | None
    late_days: int          # started days after the due date (plus grace); 0 when on time
    fraction: float         # share of the score taken off, 0..1
    due: dt.datetime | None = None   # the student's due date, extension included
    extension: str = ""     # the student's extension in words ("2 days"), "" when none

    def note(self, penalty_points: float) -> str:
        if self.late_days == 0:
            return ""
        whose = f"your due date (with your extension of {self.extension})" if self.extension else "the due date"
        if self.fraction >= 1:
            return (f"Submitted {self.late_days} day(s) after {whose}, past the last accepted day: late "
                    f"penalty of 100% ({penalty_points:g} points, all of the autograder's score).")
        return (f"Submitted {self.late_days} day(s) after {whose}: late penalty of "
                f"{self.fraction:.0%} ({penalty_points:g} points).")


def parse_timestamp(text: str) -> dt.datetime:
    """nbgrader's '2026-12-14 23:59:00.123456 UTC' or an ISO 8601 time; naive times are UTC.

    nbgrader writes the stamp with `%Z` of its `Exchange.timezone` (UTC unless configured), so a
    course or hub set to another zone writes its name: '2026-12-16 07:00:00.000000 EST' is read in
    that zone (a name the time zone database does not know is a ValueError, as any unreadable stamp)."""
    text = text.strip()
    if text.endswith(" UTC"):
        text = text[: -len(" UTC")] + "+00:00"
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        when, _, zone = text.rpartition(" ")
        if not zone.isalpha():
            raise
        value = dt.datetime.fromisoformat(when).replace(tzinfo=_zone(zone))
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _zone(name: str) -> dt.tzinfo:
    """The time zone database's zone of this name ('EST', 'CET', 'GMT'); ValueError when it has none."""
    import zoneinfo

    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}") from None


def submission_time(folder: Path) -> tuple[dt.datetime | None, str]:
    """(time, note): the submission's timestamp, or None with a note when it is unreadable."""
    from ..notebooks import RefusedFile, read_regular

    path = folder / TIMESTAMP_FILE
    if not os.path.lexists(path):
        return None, ""
    try:
        text = read_regular(path, TIMESTAMP_MAX_BYTES).decode("utf-8", errors="replace")
        return parse_timestamp(text), ""
    except RefusedFile as exc:
        return None, f"{exc} The submission was treated as on time."
    except ValueError:
        return None, f"{TIMESTAMP_FILE} could not be read as a time; the submission was treated as on time."


def lateness(assignment: Assignment, submitted_at: dt.datetime | None, student: str = "") -> Lateness:
    """How late `student`'s submission is against their own due date (course.yml's `due` plus their
    entry in `extensions`), and what the late policy takes off for it."""
    due = assignment.due_for(student)
    extension = assignment.extensions.get(student)
    words = extension.describe() if extension is not None and extension.delta else ""
    if submitted_at is None or due is None:
        return Lateness(submitted_at, 0, 0.0, due, words)
    policy = assignment.late_policy
    deadline = due + dt.timedelta(minutes=policy.grace_minutes)
    late = (submitted_at - deadline).total_seconds()
    if late <= 0:
        return Lateness(submitted_at, 0, 0.0, due, words)
    days = math.ceil(late / 86400)
    if policy.max_late_days is not None and days > policy.max_late_days:
        return Lateness(submitted_at, days, 1.0, due, words)
    return Lateness(submitted_at, days, min(1.0, policy.penalty_per_day * days), due, words)
