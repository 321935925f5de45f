"""The embedded default: a planned campaign on the MuJoCo twin, the scripted policy served over the
openpi protocol, the auto operator scoring with the sim evaluator. All real parts."""

from __future__ import annotations

import io
import os
import socket

import pytest
from omegaconf import OmegaConf

from spabench.ledger import Ledger
from spabench.record.reader import EpisodeReader
from spabench.rollout.commands import EXIT_OK, run

pytestmark = pytest.mark.sim
os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering (set before mujoco is imported)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_smoke_campaign_on_the_twin(tmp_path):
    pytest.importorskip("mujoco")
    from spabench.plan.commands import plan
    from spabench.sim.serve import build_server

    suite = OmegaConf.load("conf/suite/spabench.yaml")
    plan(OmegaConf.create({"campaign": OmegaConf.load("conf/campaign/smoke.yaml"), "suite": suite,
                           "out": str(tmp_path / "c")}))
    card = OmegaConf.load("conf/policy/scripted_compositional.yaml")
    card.port = _free_port()
    _, server = build_server(OmegaConf.create({"policy": card, "mode": "compositional", "port": card.port,
                                               "host": "127.0.0.1", "seed": 0, "suite": suite}))
    bench = OmegaConf.load("conf/bench/sim.yaml")
    for cam in bench.cameras.values():
        cam.width, cam.height = 64, 48
    cfg = OmegaConf.create({"campaign_dir": str(tmp_path / "c"), "bench": bench, "policy": card, "suite": suite,
                            "operator": {"type": "auto", "timer_s": 3.0}, "max_trials": None})
    with server:
        assert run(cfg, out=io.StringIO()) == EXIT_OK
    ledger = Ledger.open(tmp_path / "c" / "ledger.sqlite")
    outcomes = ledger.outcomes()
    ledger.close()
    assert len(outcomes) == 1 and outcomes.loc[0, "valid"] and outcomes.loc[0, "rater"] == "sim_evaluator"
    with EpisodeReader(tmp_path / "c" / outcomes.loc[0, "episode_path"]) as ep:
        assert ep.complete and ep.attrs["bench_type"] == "sim" and len(ep) > 5
        assert ep.count_frames("overhead") == int((ep.frame_index("overhead") >= 0).sum())
