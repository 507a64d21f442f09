"""The command line shared by the scripts that generate a page of docs/ from a measurement:
write the page, or with --check only say whether the committed page is up to date."""
from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path


def main(doc: Path, build: Callable[[Path], str], description: str, argv: list[str] | None = None) -> int:
    """`build(scratch_dir)` returns the page's text; it is written to `doc`, or compared with it
    (--check: exit status 1 when they differ)."""
    name = f"{doc.parent.name}/{doc.name}"
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help=f"only report whether {name} is up to date")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        text = build(Path(tmp))
    if args.check:
        up_to_date = doc.is_file() and doc.read_text() == text
        print(f"{name} is " + ("up to date" if up_to_date else "out of date"))
        return 0 if up_to_date else 1
    doc.write_text(text)
    print(f"wrote {name}")
    return 0
