"""Shared helpers for the fault and fuzz suite (issue 10)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CSV = REPO / "tests" / "analysis" / "data" / "example_outcomes.csv"


def cli(*args: str, cwd: Path | None = None, timeout: float = 120, env: dict | None = None):
    """`spabench <args>` in a fresh interpreter (what a user runs); returns the CompletedProcess."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "SPABENCH_ROOT": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "spabench.cli.main", *args], cwd=cwd or REPO,
                          env=full_env, capture_output=True, text=True, timeout=timeout)


def one_error(proc) -> str:
    """The run failed with one clear line (no traceback) on stderr or stdout; returns the text."""
    text = proc.stderr + proc.stdout
    assert proc.returncode != 0, text
    assert "Traceback" not in text, text
    return text


@pytest.fixture
def example_csv() -> Path:
    return EXAMPLE_CSV
