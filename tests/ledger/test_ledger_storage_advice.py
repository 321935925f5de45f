"""A ledger that cannot be opened or written names the real cause. Measured on main: with the process
out of file descriptors, opening a campaign's SQLite ledger said "not a spabench ledger (unable to open
database file)", and a failed ledger write always said "Free space or fix the disk"."""

from __future__ import annotations

import pytest
from tests.ledger.conftest import HASH
from tests.support.descriptors import no_descriptors_left

from spabench.errors import DataError
from spabench.ledger import Ledger
from spabench.ledger.integrity import LedgerStorageError


def test_no_descriptor_left_is_not_called_a_broken_ledger_nor_a_full_disk(tmp_path, plan_rows):
    Ledger.create(tmp_path / "camp", plan_rows, HASH, {"campaign": "unit"}).close()
    with no_descriptors_left(), pytest.raises(LedgerStorageError) as caught:
        Ledger.open(tmp_path / "camp")
    text = str(caught.value)
    assert "cannot open the ledger" in text and "nothing was changed" in text, text
    assert "too many open files" in text.lower() and "ulimit -n" in text, text
    assert "not a spabench ledger" not in text and "Free space" not in text, text
    Ledger.open(tmp_path / "camp").close()   # with descriptors back it opens: nothing was harmed


def test_a_file_that_is_not_a_database_is_still_not_a_spabench_ledger(tmp_path):
    (tmp_path / "ledger.sqlite").write_bytes(b"garbage" * 200)
    with pytest.raises(DataError, match="not a spabench ledger"):
        Ledger.open(tmp_path)


def test_a_write_error_on_a_disk_with_room_does_not_say_free_space(tmp_path):
    text = str(LedgerStorageError(tmp_path / "ledger.sqlite", "disk I/O error"))
    assert "cannot write the ledger (disk I/O error)" in text and "not full" in text, text
    assert "Free space" not in text
