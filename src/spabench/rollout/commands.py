"""`spabench run campaign=DIR [operator=...]`: run (or resume) a planned campaign on its bench.

The bench kind the campaign was planned for is binding: the CLI picks that kind's bench preset when
no `bench=` is given, and a bench of the other kind (twin for a robot campaign or the reverse) is
refused unless `dry_run=true`, whose attempts are marked dry_run (`spabench.rollout.binding`).

This module maps how a session ended to the command's exit code (`spabench.rollout.exits`); the
session itself, its order of things and its e-stop are `spabench.rollout.session`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from spabench.bench.errors import BenchFault
from spabench.config import CampaignInput, CardKeys, LedgerKeys, opt
from spabench.console.config import operator_group
from spabench.errors import SpabenchError
from spabench.ledger import LedgerStorageError
from spabench.rollout.exits import EXIT_BENCH, EXIT_CONFIG, EXIT_OK, EXIT_SIGINT, EXIT_STORAGE
from spabench.rollout.session import Session
from spabench.sim.bench_config import bench_group
from spabench.suite.config import suite_group


@dataclass
class RunConfig(CampaignInput, CardKeys, LedgerKeys):
    """`spabench run`."""

    command: ClassVar[str] = "run"

    max_trials: int | None = opt(None, 'stop after this many trials (null: every pending one)', lo=1)
    reason: str | None = opt(None, "why a new policy server identity is accepted (required with accept_new_identity=true)")
    dry_run: bool = opt(False, 'allow running on a bench of another kind than the campaign was planned for (twin vs robot); its attempts are marked dry_run')
    bench_id: str | None = opt(None, "this bench's name in a shared ledger (null: the host name)")
    launch: bool = opt(False, "start the campaign's policy servers from their cards' launch: blocks first and stop them at the end")
    accept_new_identity: bool = opt(False, "go on although a policy server's identity (checkpoint, metadata) differs from the one the campaign pinned; needs reason=")
    lease_s: float = opt(60.0, 'on a shared ledger, a claim lapses this long after its bench went silent (seconds)', lo=0.001)
    reconnect_s: float = opt(180.0, 'on a shared ledger, how long a lost connection to its database is retried (with backoff) before the session stops; the arm holds meanwhile (seconds)', lo=0.0)
    camera_references: Path | None = opt(None, "the cameras' reference pictures `bench check` stored (null: bench-checks/references/<robot_id>/ in the current folder)")
    accept_cameras: bool = opt(False, "go on although a camera looks like another's reference (recorded in the ledger)")
    bench: Any = bench_group()
    operator: Any = operator_group()
    suite: Any = suite_group()


def run(cfg: RunConfig, out: Any = None, stdin: Any = None) -> int:
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
