"""`spabench bench check`: commission the bench in one command and keep the dated record.

Safe on a live arm: nothing here enables torque or sends a goal (the bus is read through
spabench.bench.inspection). Each part adds its items to one CheckRecord; the record is written as
report.json + report.html under `out` (default bench-checks/<date-time>/ in the current folder), and
the exit code says whether every item passed (one line per failed item on the terminal).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, ClassVar

from spabench.commission.record import REPORT_HTML, CheckRecord
from spabench.config import CampaignInput, CardKeys, opt
from spabench.errors import ConfigError
from spabench.policy.card import policy_group
from spabench.sim.bench_config import bench_group

EXIT_PASSED = 0
EXIT_FAILED = 1          # the check ran and something failed (config errors exit 2 before it runs)
CHECKS_DIR = "bench-checks"


@dataclass
class BenchCheckConfig(CampaignInput, CardKeys):
    """`spabench bench check`."""

    command: ClassVar[str] = "bench check"

    out: Path | None = opt(None, "the check's report folder (null: bench-checks/<date-time>/)")
    requests: int = opt(20, 'inference requests per policy server for its latency (p50/p90/max)', lo=1, hi=10000)
    camera_s: float = opt(3.0, "how long `bench check` measures each camera's frame rate (seconds; longer until every camera could show three new frames)", lo=0.1, hi=600.0)
    camera_references: Path | None = opt(None, 'where `bench check` keeps one reference picture per camera (null: bench-checks/references/<robot_id>/ in the current folder)')
    parts: list[str] | None = opt(None, 'only these parts, e.g. [servers] after a policy server moved (null: bus, cameras, servers, system)')
    accept_cameras: bool = opt(False, "the cameras' views are right as they are now (a camera was moved on purpose): store them as the new references instead of refusing a camera that looks like another's")
    bench: Any = bench_group()
    policy: Any = policy_group()


def default_out(now: datetime | None = None) -> Path:
    """bench-checks/<date-time>/ in the current folder (local time, sortable)."""
    stamp = (now or datetime.now()).strftime("%Y-%m-%d_%H-%M-%S")
    return Path.cwd() / CHECKS_DIR / stamp


Part = Callable[[BenchCheckConfig, Any, CheckRecord, Path, Callable[[str], None]], None]


def _bus_part(cfg: BenchCheckConfig, bench: Any, record: CheckRecord, staging: Path, say: Callable[[str], None]) -> None:
    from spabench.commission.bus import check_bus

    check_bus(bench, record, say)


def _cameras_part(cfg: BenchCheckConfig, bench: Any, record: CheckRecord, staging: Path,
                  say: Callable[[str], None]) -> None:
    from spabench.commission.cameras import check_cameras

    check_cameras(bench, record, staging, say, seconds=cfg.camera_s, references=cfg.camera_references,
                  accept=cfg.accept_cameras)


def _servers_part(cfg: BenchCheckConfig, bench: Any, record: CheckRecord, staging: Path,
                  say: Callable[[str], None]) -> None:
    from spabench.commission.servers import check_servers

    check_servers(cfg, bench, record, say, record.frames)


def _system_part(cfg: BenchCheckConfig, bench: Any, record: CheckRecord, staging: Path,
                 say: Callable[[str], None]) -> None:
    from spabench.commission.system import check_system

    check_system(cfg, bench, record, staging)


# The parts in the order they run: name -> function(cfg, bench, record, staging folder, say).
PARTS: dict[str, Part] = {"bus": _bus_part, "cameras": _cameras_part, "servers": _servers_part,
                          "system": _system_part}


def chosen_parts(parts: list | None) -> list[str]:
    """The parts `parts=` names, in the order they run (all when null); a ConfigError before anything runs."""
    if parts is None:
        return list(PARTS)
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise ConfigError(f"bench check: parts={parts}: {'unknown part ' + repr(unknown[0]) if unknown else 'empty'} "
                          f"(allowed: a list of {', '.join(PARTS)}, or null for all)")
    return [p for p in PARTS if p in parts]


def bench_check(cfg: BenchCheckConfig, out: IO[str] | None = None) -> int:
    """Run every part, write the record, print one line per failed item; 0 when all passed."""
    from spabench.outputs import replace_output

    stream = out or sys.stdout

    def say(text: str) -> None:
        print(text, file=stream, flush=True)

    chosen = chosen_parts(cfg.parts)
    bench_cfg = cfg.need("bench")
    folder = Path(cfg.out) if cfg.out is not None else default_out()
    record = CheckRecord(bench=_bench_summary(bench_cfg), only=[] if len(chosen) == len(PARTS) else chosen)
    bench = bench_cfg.make_bench()
    with replace_output(folder, "bench check") as staging:
        for name in chosen:
            part = PARTS[name]
            say(f"bench check: {name} ...")
            started = time.perf_counter()
            part(cfg, bench, record, staging, say)
            record.timings_s[name] = round(time.perf_counter() - started, 3)
        record.write(staging)
    if cfg.campaign_dir is not None:
        _log_in_campaign(cfg.campaign_dir, record, folder)
    for item in record.items:
        if item.warn:
            say(f"  note {item.part}: {item.message}")
    for item in record.failures:
        say(f"FAIL {item.part}: {item.message}")
    verdict = "passed" if record.passed else f"failed ({len(record.failures)} item(s))"
    say(f"bench check {verdict}; report: {folder / REPORT_HTML}")
    return EXIT_PASSED if record.passed else EXIT_FAILED


def _log_in_campaign(campaign_dir: Path, record: CheckRecord, folder: Path) -> None:
    """A `bench_check` ledger event: `run` and the report find the campaign's checks there."""
    from spabench.bench_record import EVENT, CheckSummary
    from spabench.ledger import Ledger

    with Ledger.open(campaign_dir) as ledger:
        ledger.log_event(None, EVENT, CheckSummary.from_report(record.as_dict(), str(folder)).as_event())


def _bench_summary(bench_cfg: Any) -> dict[str, Any]:
    return {"name": getattr(bench_cfg, "name", None) or bench_cfg.robot_id, "type": bench_cfg.type,
            "robot_id": bench_cfg.robot_id, "port": getattr(bench_cfg, "port", None),
            "cameras": {n: {"type": c.type, "index_or_path": str(c.index_or_path), "width": c.width,
                            "height": c.height, "fps": c.fps} for n, c in (bench_cfg.cameras or {}).items()}}
