"""`spabench console campaign=DIR`: the browser console for a campaign, in the foreground.

Review and scoring work at once; the bench page shows live trials when a session runs with
`spabench run campaign=DIR operator=web` (that command serves this same console itself)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from spabench.config import CampaignInput
from spabench.console.config import ConsoleConfig, operator_group
from spabench.errors import ConfigError
from spabench.suite.config import suite_group


@dataclass
class ConsoleCommandConfig(CampaignInput):
    """`spabench console`."""

    command: ClassVar[str] = "console"

    operator: Any = operator_group()
    suite: Any = suite_group()


def serve_console(campaign_dir: Path, console: ConsoleConfig, rater: str, suite: Any = None, out=None) -> int:
    """Serve the console for `campaign_dir` until Ctrl-C. Returns the exit code."""
    from spabench.console.app import ConsoleContext, build_app
    from spabench.console.server import ConsoleServer
    from spabench.ledger import Ledger

    out = out or sys.stdout
    if not Ledger.exists(campaign_dir):
        raise ConfigError(f"console: {campaign_dir} has no {Ledger.FILENAME} or {Ledger.POINTER} (allowed: a "
                          "campaign folder written by `spabench plan`)")
    Ledger.open(campaign_dir, readonly=True).close()   # a PostgreSQL ledger that cannot be reached: say so now
    ctx = ConsoleContext(campaign_dir=campaign_dir, cfg=console, rater=rater, suite=suite)
    server = ConsoleServer(build_app(ctx), console).start()   # listening first: port=0 prints the port it got
    try:
        print(f"console for {campaign_dir} on http://{console.host}:{server.port}/ (review: /review)"
              + (f"\naccess token required (non-loopback bind): open /?token={server.token}" if server.token
                 else ""), file=out, flush=True)
        server.wait()
    except KeyboardInterrupt:   # Ctrl-C ends the console, as it did when the server ran in this thread
        pass
    finally:
        server.stop()
    return 0


def console(cfg: ConsoleCommandConfig) -> int:
    """Thin adapter from the typed config (spabench console campaign=DIR [operator.console.*])."""
    from spabench.paths import campaign_folder
    from spabench.suite.config import load_suite_of

    campaign_dir = campaign_folder(cfg.campaign_dir, "console")
    op = cfg.need("operator")
    try:
        suite = load_suite_of(cfg.need("suite"))
    except Exception as exc:  # review still works without scene specifications (no checklists)
        print(f"warning: suite not loaded ({exc}); checklists show scene ids only", file=sys.stderr)
        suite = None
    return serve_console(campaign_dir, ConsoleConfig.from_mapping(op.console), op.rater, suite)
