"""Third-party imports left out of this project's processes: jsonschema's optional format-check
libraries, which nbformat and nbgrader never use, while notebooks are still read and validated."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, sys
from autograder import cli
code = cli.main(["release", "no-such-assignment"])
import nbformat, jsonschema
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
nbformat.validate(nb)
broken = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
del broken.cells[0]["source"]
try:
    nbformat.validate(broken)
    refused = False
except nbformat.ValidationError:
    refused = True
print(json.dumps({"code": code, "left_out": [m for m in ("rfc3987_syntax", "webcolors", "jsonpointer")
                                             if m in sys.modules and sys.modules[m] is None],
                  "refused": refused, "iri": "iri" in jsonschema.FormatChecker().checkers}))
"""


def test_the_course_command_reads_notebooks_without_jsonschemas_format_libraries(tmp_path: Path):
    """Does a `course` command leave out jsonschema's format-check libraries, yet nbformat still
    accept a valid notebook and refuse a broken one?"""
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, check=True)
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen == {"code": 2, "left_out": ["rfc3987_syntax", "webcolors", "jsonpointer"],
                    "refused": True, "iri": False}
