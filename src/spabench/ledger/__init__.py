"""The campaign ledger: plan, attempts, scores and events in one SQLite file (no LeRobot, no torch)."""

from spabench.ledger.ledger import Ledger, LedgerError, validate_plan
from spabench.ledger.schema import (
    OUTCOME_COLUMNS,
    STOP_REASONS,
    TRIAL_COLUMNS,
    AttemptRow,
    ScoreRow,
    TrialRow,
)

__all__ = [
    "Ledger", "LedgerError", "validate_plan", "TrialRow", "AttemptRow", "ScoreRow",
    "TRIAL_COLUMNS", "OUTCOME_COLUMNS", "STOP_REASONS",
]
