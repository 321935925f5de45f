"""The protocol's EMA filter, checked against hand-computed numbers (all exact in binary)."""

from __future__ import annotations

import numpy as np
import pytest

from spabench.errors import ConfigError
from spabench.rollout.ema import EmaFilter

MEASURED = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 50.0])


def test_hand_computed_sequence_with_gripper_unfiltered():
    ema = EmaFilter(0.25)
    ema.reset(MEASURED)
    out1 = ema(np.array([4.0, 8.0, -4.0, 0.0, 2.0, 10.0]))
    out2 = ema(np.array([4.0, 8.0, -4.0, 0.0, 2.0, 90.0]))
    out3 = ema(np.zeros(6))
    # a~1 = 0.25 a1 + 0.75 m;  a~2 = 0.25 a2 + 0.75 a~1;  a~3 = 0.75 a~2; gripper = raw
    np.testing.assert_array_equal(out1, [1.0, 2.0, -1.0, 0.0, 0.5, 10.0])
    np.testing.assert_array_equal(out2, [1.75, 3.5, -1.75, 0.0, 0.875, 90.0])
    np.testing.assert_array_equal(out3, [1.3125, 2.625, -1.3125, 0.0, 0.65625, 0.0])


def test_continuous_across_chunk_boundaries():
    chunk_a = np.array([[8.0] * 6, [8.0] * 6])
    chunk_b = np.array([[0.0] * 6, [0.0] * 6])
    streamed = EmaFilter(0.25)
    streamed.reset(np.zeros(6))
    per_chunk = [streamed(row) for chunk in (chunk_a, chunk_b) for row in chunk]
    # chunk B's first output still carries chunk A's state: 0.75 * 3.5 = 2.625, not 0
    assert per_chunk[2][0] == 2.625
    whole = EmaFilter(0.25)
    whole.reset(np.zeros(6))
    np.testing.assert_array_equal(per_chunk, [whole(r) for r in np.vstack([chunk_a, chunk_b])])


def test_reset_between_rollouts_starts_from_the_measured_joints():
    ema = EmaFilter(0.25)
    ema.reset(np.zeros(6))
    ema(np.full(6, 100.0))
    ema.reset(np.full(6, 4.0))
    np.testing.assert_array_equal(ema(np.full(6, 8.0)), [5.0, 5.0, 5.0, 5.0, 5.0, 8.0])
    np.testing.assert_array_equal(ema.state, [5.0, 5.0, 5.0, 5.0, 5.0, 8.0])


def test_none_is_identity_and_input_is_not_modified():
    ema = EmaFilter(None)
    raw = np.array([1.0, 2, 3, 4, 5, 6])
    out = ema(raw)
    np.testing.assert_array_equal(out, raw)
    out[0] = 99
    assert raw[0] == 1.0 and not ema.enabled


def test_use_before_reset_and_bad_alpha_fail_clearly():
    with pytest.raises(RuntimeError, match="before reset"):
        EmaFilter(0.25)(np.zeros(6))
    for alpha in (0.0, -0.1, 1.5):
        with pytest.raises(ConfigError, match="alpha"):
            EmaFilter(alpha)
    assert EmaFilter(1.0).alpha == 1.0
