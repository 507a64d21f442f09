"""The user's cache of derived data: read back as written, and never read from a folder or file
that another user could have written."""
from __future__ import annotations

import importlib.util
import marshal
import os
import tempfile
from pathlib import Path

import pytest

from autograder import usercache


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_an_entry_is_read_back_as_written(temp: Path):
    """Is a value written under (kind, key) read back, in a folder only this user may open?"""
    usercache.write_entry("names", "k1", ["a", "b"])
    assert usercache.read_entry("names", "k1") == ["a", "b"]
    assert usercache.read_entry("names", "k2") is None
    folder = usercache.cache_dir()
    assert folder is not None and folder.parent == temp
    assert folder.stat().st_mode & 0o777 == 0o700


def test_a_folder_others_may_write_is_not_used(temp: Path):
    """Is nothing read from, or written to, a cache folder that other users may write into?"""
    usercache.write_entry("names", "k", ["a"])
    folder = usercache.cache_dir()
    assert folder is not None
    folder.chmod(0o777)
    assert usercache.cache_dir() is None
    assert usercache.read_entry("names", "k") is None
    usercache.write_entry("names", "other", ["b"])
    assert not (folder / "names-other.json").exists()


def test_a_link_in_place_of_the_folder_is_not_followed(temp: Path):
    """Is a symbolic link where the folder should be refused (someone else's folder behind it)?"""
    elsewhere = temp / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (temp / f"course-autograder-{os.getuid()}").symlink_to(elsewhere)
    assert usercache.cache_dir() is None
    usercache.write_entry("names", "k", ["a"])
    assert list(elsewhere.iterdir()) == []


def test_a_damaged_or_oversized_entry_reads_as_absent(temp: Path):
    """Is an entry that is not JSON, or larger than the cap, read as absent (computed again)?"""
    usercache.write_entry("names", "k", ["a"])
    folder = usercache.cache_dir()
    assert folder is not None
    (folder / "names-k.json").write_text("[not json")
    assert usercache.read_entry("names", "k") is None
    (folder / "names-k.json").write_text("[" + " " * usercache.ENTRY_MAX_BYTES + "]")
    assert usercache.read_entry("names", "k") is None


def test_bytecode_is_kept_in_the_cache_only_where_it_may_not_be_written_beside(temp: Path, monkeypatch):
    """Where bytecode may not be written beside the sources, is a module imported in the block compiled
    into the cache (and the interpreter's settings put back), and is nothing changed elsewhere?"""
    import importlib
    import sys

    (temp / "src").mkdir()
    (temp / "src" / "cached_mod_for_test.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(temp / "src"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    with usercache.bytecode():
        assert sys.pycache_prefix is not None and not sys.dont_write_bytecode
        importlib.import_module("cached_mod_for_test")
    assert sys.pycache_prefix is None and sys.dont_write_bytecode
    sys.modules.pop("cached_mod_for_test", None)
    folder = usercache.cache_dir()
    assert folder is not None and list((folder / "bytecode").rglob("cached_mod_for_test.*.pyc"))
    assert not (temp / "src" / "__pycache__").exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    with usercache.bytecode():
        assert sys.pycache_prefix is None


def _module(folder: Path) -> Path:
    source = folder / "mod.py"
    source.write_text("VALUE = 42\n")
    return source


def test_the_sandbox_uses_current_bytecode_beside_its_module(temp: Path):
    """Is the bytecode beside a module (as `make venv` compiles it) used while it matches the
    source, and one compiled into this user's cache once the source has changed since?"""
    import py_compile

    source = _module(temp)
    py_compile.compile(str(source), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    beside = Path(importlib.util.cache_from_source(str(source)))
    assert usercache.sandbox_bytecode(source) == beside
    source.write_text("VALUE = 43  # changed\n")
    cached = usercache.sandbox_bytecode(source)
    assert cached is not None and cached != beside and cached.parent == usercache.cache_dir()
    assert cached.stat().st_mode & 0o777 == 0o644
    assert usercache.sandbox_bytecode(source) == cached          # compiled once
    namespace: dict[str, object] = {}
    exec(marshal.loads(cached.read_bytes()[16:]), namespace)
    assert namespace["VALUE"] == 43


def test_bytecode_others_may_write_or_of_another_kind_is_not_used(temp: Path):
    """Is bytecode that a group or other users may write, or an unchecked-hash file (it could be
    stale), passed over for a copy compiled into the cache?"""
    import py_compile

    source = _module(temp)
    beside = Path(importlib.util.cache_from_source(str(source)))
    py_compile.compile(str(source), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    beside.chmod(0o664)
    assert usercache.sandbox_bytecode(source) not in (beside, None)
    py_compile.compile(str(source), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    beside.chmod(0o644)
    assert usercache.sandbox_bytecode(source) not in (beside, None)
    py_compile.compile(str(source), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    assert usercache.sandbox_bytecode(source) == beside


def test_no_bytecode_without_a_cache_folder_of_ones_own(temp: Path):
    """With no current bytecode beside the module and a cache folder that others may write, is
    there none (the sandbox compiles the module itself, as before)?"""
    source = _module(temp)
    folder = usercache.cache_dir()
    assert folder is not None
    folder.chmod(0o777)
    assert usercache.sandbox_bytecode(source) is None
