"""Diagnosis beyond the catalogue: the held-out mistakes (tools/heldout_mistakes.py, never in the
catalogue) graded for real under two hidden-input seeds, against the goal, and docs/diagnosis.md
up to date."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import measure_diagnosis  # noqa: E402
from heldout_mistakes import HELD_OUT  # noqa: E402

from assignments.transformer_block.mistakes import catalogue  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    return measure_diagnosis.measure(tmp_path_factory.mktemp("heldout"))


def test_the_held_out_mistakes_are_not_in_the_catalogue():
    """Is every held-out mistake written apart from the catalogue, with diagnoses that exist?"""
    ids = {m.id for m in catalogue}
    assert all(set(item.right) <= ids for item in HELD_OUT)
    assert len({item.name for item in HELD_OUT}) == len(HELD_OUT) >= 80
    assert sum(item.batch == "fresh" for item in HELD_OUT) >= 30


def test_every_held_out_mistake_loses_points(measured):
    """Is each held-out mistake really a mistake (graded, it loses points)?"""
    assert [m.name for m in measured if m.lost <= 0] == []


@pytest.mark.parametrize("batch", ["development", "fresh"])
def test_diagnosis_names_or_localises_at_least_90_percent_the_same_under_two_seeds(measured, batch):
    """Do 90% or more of each batch get a named diagnosis or a localised stage, the same under both seeds?"""
    items = [m for m in measured if m.batch == batch]
    share = sum(m.diagnosed for m in items) / len(items)
    assert share >= measure_diagnosis.GOAL, [m.name for m in items if not m.diagnosed]


def test_no_diagnosis_depends_on_the_seed(measured):
    """Does every held-out mistake get the same diagnoses under both hidden-input seeds?"""
    assert [m.name for m in measured if not m.stable] == []


def test_the_report_in_docs_is_up_to_date(measured):
    """Is docs/diagnosis.md what tools/measure_diagnosis.py writes today?"""
    assert measure_diagnosis.DOC.read_text() == measure_diagnosis.report(measured), \
        "stale: run .venv/bin/python tools/measure_diagnosis.py"
