"""The formgrader copy's text, with each cell's validation and text kept: nbformat's text and checks."""
from __future__ import annotations

import copy
import logging
import warnings

import nbformat
import pytest

from autograder.reporting import notebook_text as nt
from conftest import PROJECT

RELEASED = nbformat.read(PROJECT.release("transformer-block") / "transformer-block.ipynb", as_version=4)


@pytest.fixture(autouse=True)
def empty_memo():
    nt._MEMO.clear()
    yield
    nt._MEMO.clear()


def variant(i: int) -> nbformat.NotebookNode:
    """The released notebook as student `i` might hand it in: some cells changed, one with outputs."""
    nb = copy.deepcopy(RELEASED)
    code = [c for c in nb.cells if c.cell_type == "code"]
    code[i % len(code)].source += f"\n# student {i}\n"
    code[(3 * i) % len(code)].outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"run {i}\nok\n")]
    code[0].metadata["trusted"] = True
    nb.metadata["signature"] = "transient"
    return nb


def written(nb) -> str:
    """What nbformat's own writer gives for `nb` (on a copy: it validates and may repair in place)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbformat.writes(copy.deepcopy(nb))


def test_every_copy_is_nbformats_text_whatever_was_kept_before():
    """Written one after another (cells shared, changed, the same notebook twice), is each notebook's
    text the one nbformat.writes gives, and is what every copy shares kept?"""
    notebooks = [variant(i) for i in (0, 1, 2, 1, 0, 7)]
    for nb in notebooks:
        assert nt.notebook_text(copy.deepcopy(nb)) == written(nb)
    assert len(nt._MEMO.entries) < len(RELEASED.cells) + 3 * len(notebooks)
    assert all(valid and text for valid, text in nt._MEMO.entries.values())


def test_cells_without_an_id_or_with_one_id_twice_are_repaired_as_nbformat_repairs_them():
    """When a cell has no id, or two cells have one id, is the notebook repaired (new ids, nbformat's
    warning) even though its cells were seen before?"""
    nt.notebook_text(variant(0))
    twice = variant(0)
    twice.cells[1].id = twice.cells[0].id
    missing = variant(0)
    del missing.cells[2]["id"]
    for nb, warning in ((twice, nbformat.warnings.DuplicateCellId), (missing, nbformat.warnings.MissingIDFieldWarning)):
        with pytest.warns(warning):
            text = nt.notebook_text(nb)
        ids = [c["id"] for c in nbformat.reads(text, as_version=4).cells]
        assert len(set(ids)) == len(ids) == len(RELEASED.cells)
        assert text == written(nb)                      # the repaired notebook is what was written


def heading(message: str) -> tuple[str, ...]:
    """An error's first lines, up to the place of the instance (its text, made when the record is
    read, shows the notebook as it is then: split into lines)."""
    what, where, instance = message.split("\n\n")[:3]
    return what, where, instance.splitlines()[0]


def test_an_invalid_notebook_is_logged_with_nbformats_error_each_time(caplog):
    """When a notebook holds an invalid cell (and cells seen valid before), is nbformat's error for the
    whole notebook logged, for every copy, and is its text still nbformat's?"""
    nt.notebook_text(variant(0))
    bad = variant(0)
    bad.cells[4]["unknown"] = 1
    with pytest.raises(nbformat.ValidationError) as error:
        nbformat.validate(copy.deepcopy(bad))
    expected = heading(f"Notebook JSON is invalid: {error.value}")
    assert expected[2] == "On instance['cells'][4]:"          # the place in the whole notebook
    text = written(bad)
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.ERROR):
            assert nt.notebook_text(copy.deepcopy(bad)) == text
        assert [heading(r.getMessage()) for r in caplog.records] == [expected]


def test_what_is_kept_stays_within_its_bound(monkeypatch):
    """With room for only a few cells, are the least recently used dropped, and the texts still right?"""
    monkeypatch.setattr(nt, "CACHE_CHARS", 20_000)
    for i in range(6):
        nb = variant(i)
        assert nt.notebook_text(copy.deepcopy(nb)) == written(nb)
        assert nt._MEMO.chars == sum(len(k) + len(v[1]) for k, v in nt._MEMO.entries.items()) <= 20_000


def test_every_installed_v4_schema_checks_cells_one_by_one():
    """Does every v4 schema nbformat has (4.0 to 4.5) check the cells only item by item, so that
    keeping each cell's validity is sound, and is a later minor version (unknown schema) not kept?"""
    assert all(nt._cells_are_independent(minor) for minor in range(nbformat.v4.nbformat_minor + 1))
    assert not nt._cells_are_independent(nbformat.v4.nbformat_minor + 1)
    newer = variant(0)
    newer.nbformat_minor = nbformat.v4.nbformat_minor + 1
    assert nt._validator_tag(newer) == ""


@pytest.mark.parametrize(("major", "minor", "ids", "wanted"), [
    (4.0, 5, True, 5), (4, 5.0, True, 5), (4, "4", False, 4), (4, None, True, 5), (4, float("nan"), False, 4),
    (4, "5" * 5000, True, 5), (4, True, True, 5),
])
def test_format_numbers_that_are_no_integers_are_made_integers_before_validating(major, minor, ids, wanted):
    """A notebook whose nbformat is 4.0, or whose nbformat_minor is a float, digits, null, NaN, a
    bool or far too long: nbformat's validator asserts integers. Is its text nbformat's own for the
    notebook with integer numbers (a whole number kept, else the minor version its cells fit)?"""
    nb = variant(1)
    if not ids:
        for cell in nb.cells:
            del cell["id"]
    fixed = copy.deepcopy(nb)
    fixed.nbformat, fixed.nbformat_minor = 4, wanted
    nb.nbformat, nb.nbformat_minor = major, minor
    assert nt.notebook_text(nb) == written(fixed)
    assert type(nb.nbformat) is int and type(nb.nbformat_minor) is int
