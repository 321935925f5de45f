"""Fixtures for the analysis tests (the generator lives in analysis_synthetic.py)."""

from __future__ import annotations

import pytest
from analysis_synthetic import Synthetic, synthetic_campaign


@pytest.fixture(scope="session")
def synthetic() -> Synthetic:
    return synthetic_campaign()
