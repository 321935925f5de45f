"""Several twin benches on one shared campaign: plan into PostgreSQL, serve the scripted stand-ins
(labelled: not VLAs), give each bench its own copy of the campaign folder, start `spabench run`
processes. Used by tests/e2e/test_multi_bench.py and benchmarks/multi_bench.py."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support.campaigns import by_alias, planned_timer

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ("scripted_compositional", "scripted_memorising")

# A tiny campaign: relational_placement only, two stand-in policies; `sets` evaluation ids.
def campaign_overrides(id_: int = 2, ood: int = 2, direct: int = 1, timer_s: float = 1.0) -> list[str]:
    return ["campaign=demo_twin", "campaign.tasks=[relational_placement]",
            f"campaign.counts.id={id_}", f"campaign.counts.ood={ood}", f"campaign.counts.direct={direct}",
            "campaign.counts.paraphrase_ood=0", "campaign.counts.paraphrase_direct=0",
            "campaign.counts.cross_task=0", "campaign.counts.novel_object=0", "campaign.counts.no_intervention=0",
            "campaign.counts.no_movement=0", "campaign.counts.movement_required=0", planned_timer(timer_s)]


def cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spabench.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or os.environ.copy(), cwd=ROOT)


def plan(out: Path, url: str | None, overrides: list[str], env: dict | None = None) -> None:
    args = ["plan", *overrides, f"out={out}"] + ([f"ledger={url}"] if url else [])
    proc = cli(*args, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def bench_copies(campaign: Path, n: int) -> list[Path]:
    """One campaign folder per bench (what a lab copies to each bench: config, plan, ledger pointer)."""
    out = []
    for i in range(1, n + 1):
        folder = campaign.parent / f"bench{i}"
        shutil.copytree(campaign, folder)
        out.append(folder)
    return out


@contextlib.contextmanager
def stand_ins() -> Iterator[list[str]]:
    """The two scripted stand-in policies on free loopback ports; yields the `cards.*.port` overrides."""
    import yaml

    from spabench.standins.serve import ServeScriptedConfig, build_server
    from tests.support.pg_cluster import _free_port

    suite = yaml.safe_load((ROOT / "conf" / "suite" / "spabench.yaml").read_text())
    servers, overrides = [], []
    for name in POLICIES:
        card = yaml.safe_load((ROOT / "conf" / "policy" / f"{name}.yaml").read_text())
        port = _free_port()
        mode = "memorising" if "memoris" in name else "compositional"
        _, server = build_server(ServeScriptedConfig.from_mapping(
            {"policy": card, "mode": mode, "port": port, "host": "127.0.0.1", "seed": 0, "suite": suite}))
        server.start()
        servers.append(server)
        overrides.append(f"cards.{name}.port={port}")
    try:
        yield overrides
    finally:
        for server in servers:
            server.stop()


def start_bench(folder: Path, bench_id: str, ports: list[str], *, lease_s: float = 5.0,
                env: dict | None = None, log: Path | None = None) -> subprocess.Popen:
    args = [sys.executable, "-m", "spabench.cli.main", "run", f"campaign={folder}", "bench=sim_demo",
            "operator=auto", "operator.wait_videos_s=60", f"bench_id={bench_id}",
            f"lease_s={lease_s}", *by_alias(folder, ports)]
    env = dict(env or os.environ, MUJOCO_GL="egl", PYOPENGL_PLATFORM="egl")
    with open(log or folder / "run.log", "w") as out:  # the run keeps its own copy of the descriptor
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
