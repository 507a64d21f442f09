"""The real graders of transformer-block, collected once per test module, for tests that run them
against a notebook's functions in-process (test_seed_independence, test_graders)."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.config import load_course
from autograder.grading.session import GraderSession, load_instructor_code

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def session():
    course = load_course(ROOT)
    assignment = course.assignment("transformer-block")
    s = GraderSession(assignment, load_instructor_code(course, assignment))
    yield s
    s.close()
