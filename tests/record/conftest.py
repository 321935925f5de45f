"""The ledger tests' small plan (`plan_rows`), for `ledger collect`'s hand-made campaigns."""

from __future__ import annotations

from tests.ledger.conftest import plan_rows  # noqa: F401  (a fixture)
