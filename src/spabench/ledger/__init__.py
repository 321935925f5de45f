"""The campaign ledger: plan, attempts, scores, claims and events behind one storage interface (SQLite
for one bench, PostgreSQL for several); no LeRobot, no torch."""

from spabench.ledger.integrity import LedgerDamaged, LedgerStorageError
from spabench.ledger.ledger import (
    BenchSessionActive,
    ClaimLost,
    Ledger,
    LedgerError,
    SceneSetTaken,
    ScoreConflict,
    validate_plan,
)
from spabench.ledger.lock import CampaignLock, LedgerLocked
from spabench.ledger.schema import (
    OUTCOME_COLUMNS,
    TRIAL_COLUMNS,
    AttemptRow,
    ScoreRow,
    TrialRow,
)
from spabench.suite.rules import STOP_REASONS

__all__ = [
    "Ledger", "LedgerError", "BenchSessionActive", "ClaimLost", "SceneSetTaken", "ScoreConflict", "LedgerLocked", "LedgerDamaged", "LedgerStorageError",
    "CampaignLock", "validate_plan", "TrialRow", "AttemptRow", "ScoreRow",
    "TRIAL_COLUMNS", "OUTCOME_COLUMNS", "STOP_REASONS",
]
