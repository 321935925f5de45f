"""The exit codes of `spabench run`: what a script or the operator learns from how a session ended."""

from __future__ import annotations

EXIT_OK = 0
EXIT_CONFIG = 2           # nothing moved: a config, ledger or policy problem found before the bench
EXIT_BENCH = 3            # the bench faulted or was e-stopped; the arm holds
EXIT_INVALID_STREAK = 4   # MAX_CONSECUTIVE_INVALID attempts in a row were invalid
EXIT_STORAGE = 5          # nothing more can be recorded (disk, ledger storage)
EXIT_SERVER_DOWN = 6      # a policy server stayed down after a fault
EXIT_SIGINT = 130         # Ctrl-C
