"""The writer process's quick import of nbgrader.api: nbgrader's own models and SQL without the Jupyter
server extensions, and the plain import when the quick one does not fit the installed nbgrader."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

PROBE = """
import json, sys
from autograder.batch import writer
{before}
how = writer.import_nbgrader_api()
import nbgrader.api
print(json.dumps({{"how": how, "server_extensions": "nbgrader.server_extensions" in sys.modules,
                  "nbconvert": "nbconvert" in sys.modules, "setuptools": "setuptools" in sys.modules,
                  "requests": "requests.api" in sys.modules,
                  "gradebook": nbgrader.api.Gradebook.__module__}}))
{after}
"""


def probe(tmp_path: Path, before: str = "", after: str = "") -> dict[str, object]:
    """Run the import in a fresh interpreter (as the writer does) and report what was imported."""
    out = subprocess.run([sys.executable, "-c", PROBE.format(before=before, after=after)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.splitlines()[0])


def test_the_writer_imports_nbgraders_api_without_its_server_extensions(tmp_path):
    """Is nbgrader.api imported without nbgrader's server extensions, nbconvert or setuptools?"""
    seen = probe(tmp_path)
    assert seen == {"how": "light", "server_extensions": False, "nbconvert": False, "setuptools": False,
                    "requests": False, "gradebook": "nbgrader.api"}


def test_when_nbgrader_differs_the_plain_import_is_used(tmp_path):
    """When nbgrader.api lacks a name the project uses, is the partial import dropped and the plain one done?"""
    seen = probe(tmp_path, before="writer.NBGRADER_API_NAMES += ('NoSuchModel',)")
    assert str(seen["how"]).startswith("plain import of nbgrader.api (ImportError: nbgrader.api has no NoSuchModel")
    assert seen["server_extensions"] is True


def test_what_was_deferred_still_works_when_used(tmp_path):
    """Does nbgrader's archive helper, whose setuptools import was deferred, still unpack an archive, and
    does nbgrader's JupyterHub plugin reach the real requests?"""
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as zf:
        zf.writestr("inside/hello.txt", "hello")
    after = ("import nbgrader.utils, nbgrader.auth.jupyterhub as hub\n"
             "nbgrader.utils.unpack_archive('a.zip', 'out')\n"
             "print(json.dumps([hub.requests.request.__module__, type(sys.modules['requests']).__name__]))")
    out = subprocess.run([sys.executable, "-c", PROBE.format(before="", after=after)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, check=True)
    assert (tmp_path / "out" / "inside" / "hello.txt").read_text() == "hello"
    assert json.loads(out.stdout.splitlines()[1]) == ["requests.api", "module"]
