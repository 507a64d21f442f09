"""The declared-schema machinery behind course.yml: one `setting(...)` line gives reading, errors and docs."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

import pytest

from autograder import schema
from autograder.errors import ConfigError
from autograder.schema import NON_NEGATIVE, POSITIVE, setting


@dataclass(frozen=True)
class Extension:
    """Extra time for one student."""
    days: float = setting(check=POSITIVE, help="days added to the due date")
    reason: str | None = setting(None, help="shown to TAs")


@dataclass(frozen=True)
class Settings:
    """A toy section with one key of each kind."""
    mode: Literal["fast", "careful"] = setting("careful", help="how to run")
    verbose: bool = setting(False, help="say more")
    retries: int = setting(2, check=NON_NEGATIVE, help="how often to try again")
    tags: tuple[str, ...] = setting((), help="labels")
    extensions: dict[str, Extension] = setting(factory=dict, help="by student id")
    opens: dt.datetime | None = setting(None, help="when it opens")


def read(data: dict) -> Settings:
    value = schema.read(Settings, data)
    assert isinstance(value, Settings)
    return value


def error(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        read(data)
    return str(info.value)


def test_schema_defaults_come_from_the_declaration():
    """Does an empty mapping give every declared default?"""
    assert read({}) == Settings(mode="careful", verbose=False, retries=2, tags=(), extensions={}, opens=None)


def test_schema_reads_each_kind_of_value():
    """Are literals, booleans, integers, lists, mappings of sections and date-times converted?"""
    s = read({"mode": "fast", "verbose": True, "retries": 0, "tags": ["a", "b"],
              "extensions": {"ada": {"days": 2}, "bob": {"days": 0.5, "reason": "ill"}},
              "opens": "2026-12-01T09:00:00"})
    assert (s.mode, s.verbose, s.retries, s.tags) == ("fast", True, 0, ("a", "b"))
    assert s.extensions == {"ada": Extension(2.0, None), "bob": Extension(0.5, "ill")}
    assert s.opens == dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC), "a time without zone is UTC"


@pytest.mark.parametrize(("data", "expected"), [
    ({"mode": "slow"}, 'mode: expected one of fast, careful, got "slow"'),
    ({"verbose": "yes"}, 'verbose: expected true or false, got "yes"'),
    ({"retries": -1}, "retries: expected an integer >= 0, got -1"),
    ({"retries": 1.5}, "retries: expected an integer >= 0, got 1.5"),
    ({"tags": "a"}, 'tags: expected a list, got "a"'),
    ({"tags": ["a", 3]}, "tags[1]: expected a non-empty string, got 3"),
    ({"extensions": {"ada": {"days": 0}}}, "extensions.ada.days: expected a positive number, got 0"),
    ({"extensions": {"ada": {"hours": 5}}}, "extensions.ada.hours: unknown key (expected one of: days, reason)"),
    ({"extensions": {"ada": {}}}, "extensions.ada.days: missing (required)"),
    ({"extensions": ["ada"]}, "extensions: expected a mapping, got a list"),
    ({"colour": "red"}, "colour: unknown key"),
])
def test_schema_errors_name_the_key_path(data, expected):
    """Does every wrong value give one line naming its key path and what was expected?"""
    message = error(data)
    assert "\n" not in message
    assert message.startswith(expected)


def test_schema_reference_lists_every_declared_key():
    """Does the reference page show each key with its type, default and help, nested sections included?"""
    page = schema.reference(Settings, title="T", intro="I")
    assert "| `retries` | an integer >= 0 | `2` | how often to try again |" in page
    assert "| `mode` | one of fast, careful | `careful` | how to run |" in page
    assert "## `extensions.<name>`" in page
    assert "| `days` | a positive number | required | days added to the due date |" in page
