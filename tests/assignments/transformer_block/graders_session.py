"""The real graders of transformer-block, collected once per test module, for tests that run them
against a notebook's functions in-process (test_seed_independence, test_graders): each makes its
`session` fixture with `session = graders_session.fixture()`. (A conftest.py in this folder would be
imported under the name `conftest`, which other test modules import from tests/conftest.py.)"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autograder.config import load_course
from autograder.grading.session import GraderSession, load_instructor_code

ROOT = Path(__file__).resolve().parents[3]


def _session() -> Iterator[GraderSession]:
    course = load_course(ROOT)
    assignment = course.assignment("transformer-block")
    s = GraderSession(assignment, load_instructor_code(course, assignment))
    yield s
    s.close()


def fixture() -> Callable[..., Any]:
    """A module-scoped `session` fixture: a GraderSession of the course's real graders."""
    return pytest.fixture(scope="module", name="session")(_session)
