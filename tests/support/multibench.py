"""Several twin benches on one shared campaign: plan into PostgreSQL, serve the scripted stand-ins
(labelled: not VLAs), give each bench its own copy of the campaign folder, start `spabench run`
processes. Used by tests/e2e/test_multi_bench.py and benchmarks/multi_bench.py."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
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


class HeldConnection:
    """Holds one new connection to the stand-ins before their metadata frame until `release()`: the
    first one that arrives while `when()` is true (`holding` is set then). A bench connects afresh
    between trials, before the ledger begins the next attempt (the identity probe of
    spabench.rollout.policies), so a gate that opens only once a bench has completed an attempt and
    has none running holds that bench between two trials for as long as a test needs."""

    def __init__(self, when: Callable[[], bool]):
        self.when = when
        self.holding = threading.Event()
        self._released = threading.Event()
        self._lock = threading.Lock()

    def wrap(self, handle: Callable[[object], None]) -> Callable[[object], None]:
        def held(connection: object) -> None:
            with self._lock:   # connections are served on threads: one is held, once
                take = not self.holding.is_set() and self.when()
                if take:
                    self.holding.set()
            if take:
                self._released.wait()
            handle(connection)
        return held

    def release(self) -> None:
        self._released.set()


@contextlib.contextmanager
def stand_ins(hold: HeldConnection | None = None) -> Iterator[list[str]]:
    """The two scripted stand-in policies on free loopback ports; yields the `cards.*.port` overrides.
    `hold`: a gate on their new connections (a bench given only these servers is the one it holds)."""
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
        if hold is not None:   # before start(): the server serves the handler it has when it listens
            server._handle = hold.wrap(server._handle)
        server.start()
        servers.append(server)
        overrides.append(f"cards.{name}.port={port}")
    try:
        yield overrides
    finally:
        if hold is not None:
            hold.release()
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
