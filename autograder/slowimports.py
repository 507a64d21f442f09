"""Third-party imports this project's processes leave out because they are slow and unused here.

jsonschema, which nbformat and nbgrader import, imports optional libraries for its string "format"
checks when they are installed (jupyter-events pulls them in). rfc3987-syntax builds an Earley
parser for RFC 3987 as it is imported: 1-2.6 s of CPU on the hosts measured, paid by every command
that reads a notebook through nbformat. These libraries serve only a validator given a format
checker; nbformat validates without one (with fastjsonschema where it can), nbgrader's schemas use
no such format, and nothing else in the `course` command or its writer process validates JSON. Each
is imported by jsonschema alone (checked with `python -X importtime`), which then simply knows
fewer formats, as it does wherever the libraries are absent.
"""
from __future__ import annotations

import sys

FORMAT_CHECK_MODULES = ("rfc3987_syntax", "rfc3986_validator", "rfc3339_validator", "webcolors",
                        "uri_template", "isoduration", "fqdn", "jsonpointer")


def skip_format_checkers() -> None:
    """Let jsonschema import without its optional format-check libraries in this process (a
    library imported already is kept)."""
    for name in FORMAT_CHECK_MODULES:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
