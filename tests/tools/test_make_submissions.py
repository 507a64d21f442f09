"""The committed corpus and demo class are what the generator makes from the current release."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_corpus_and_examples_are_up_to_date():
    """Do tests/corpus/ and examples/ match tools/make_submissions.py run on today's release notebook?"""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "make_submissions.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, "stale; run tools/make_submissions.py:\n" + proc.stdout + proc.stderr
