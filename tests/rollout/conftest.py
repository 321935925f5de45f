"""Fixtures for the loop tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def card():
    from spabench.policy.card import PolicyCard

    return PolicyCard(name="stub", protocol="openpi", port=8000, horizon=10, execute_steps=5,
                      control_hz=100.0, timer_s=0.3, ema_alpha=0.25)
