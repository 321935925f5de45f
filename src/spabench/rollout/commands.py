"""`spabench run campaign=DIR [operator=...]`: run (or resume) a planned campaign on its bench.

The bench kind the campaign was planned for is binding: the CLI picks that kind's bench preset when
no `bench=` is given, and a bench of the other kind (twin for a robot campaign or the reverse) is
refused unless `dry_run=true`, whose attempts are marked dry_run (`spabench.rollout.binding`).

This module maps how a session ended to the command's exit code (`spabench.rollout.exits`); the
session itself, its order of things and its e-stop are `spabench.rollout.session`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spabench.bench.errors import BenchFault
from spabench.errors import SpabenchError
from spabench.ledger import LedgerStorageError
from spabench.rollout.exits import EXIT_BENCH, EXIT_CONFIG, EXIT_OK, EXIT_SIGINT, EXIT_STORAGE
from spabench.rollout.session import Session

if TYPE_CHECKING:  # annotations only: spabench.config builds the groups and sits above every package
    from spabench.config import SpabenchConfig


def run(cfg: SpabenchConfig, out: Any = None, stdin: Any = None) -> int:
    """Entry point of `spabench run`. Returns the exit code."""
    from spabench.rollout.space import NoSpaceForAttempt

    session = Session(cfg, out=out, stdin=stdin)
    code = EXIT_OK
    try:
        try:
            if not session.open():
                return session.end_by_estop() if session.controls.estopped() else EXIT_OK
        except SpabenchError as exc:  # nothing has moved: a config, ledger, policy or bench problem
            session.say(f"error: {exc}")
            return EXIT_BENCH if isinstance(exc, BenchFault) else EXIT_CONFIG
        code = session.loop()
    except (LedgerStorageError, NoSpaceForAttempt) as exc:  # nothing more can be recorded: stop here
        session.running_reason = "storage_error"
        session.say(f"session stopped, the arm holds: {exc}")
        code = EXIT_STORAGE
    except SpabenchError as exc:
        session.say(f"error: {exc}")
        code = EXIT_BENCH
    except KeyboardInterrupt:
        session.say("Ctrl-C: stopping; the arm holds")
        code = EXIT_SIGINT
    finally:
        # a Ctrl-C while shutting down (videos, ledger, bus) latches an e-stop; the cleanup goes on
        with session.controls.sigint_aborts():
            session.close()
    return code
