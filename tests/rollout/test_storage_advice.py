"""A recording that cannot be written names its real cause. Measured on main (issue 22): with the
console flooded, the recorder failed with EMFILE and the session said "Free space or fix the disk"
on a disk with gigabytes free (EpisodeArrays also turned any error without a number into ENOSPC)."""

from __future__ import annotations

import pytest

from spabench.record.arrays import EpisodeArrays
from spabench.storage_advice import storage_advice
from tests.support.descriptors import no_descriptors_left


def _emfile_failure(tmp_path) -> str:
    """The text of a real failure to create an episode while the process is out of descriptors."""
    with no_descriptors_left():
        try:
            EpisodeArrays(tmp_path / "episode.h5", ("middle",), {"attempt_id": "x"})
        except Exception as exc:  # noqa: BLE001 - whatever h5py raises is what the session shows
            return f"{type(exc).__name__}: {exc}"
    pytest.fail("creating an episode succeeded with no descriptor left")


def test_too_many_open_files_is_not_called_a_full_disk(tmp_path):
    problem = _emfile_failure(tmp_path)
    advice = storage_advice(tmp_path, problem)
    assert "too many open files" in advice.lower() and "limit" in advice, (problem, advice)
    assert "free space" not in advice.lower()


def test_a_full_disk_and_an_unknown_failure_say_different_things(tmp_path):
    full = storage_advice(tmp_path, "OSError: [Errno 28] No space left on device")
    assert full.startswith("Free space")
    other = storage_advice(tmp_path, "OSError: episode.h5: Can't write data (file write failed)")
    assert "Free space" not in other and "not full" in other and "MiB free" in other
