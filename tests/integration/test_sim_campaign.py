"""The embedded default: a planned campaign on the MuJoCo twin, the scripted policy served over the
openpi protocol, the auto operator scoring with the sim evaluator. All real parts."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest
import yaml

from spabench.ledger import Ledger
from spabench.record.reader import EpisodeReader
from spabench.rollout.commands import RunConfig, run
from spabench.rollout.exits import EXIT_OK
from tests.support.campaigns import card_aliases

pytestmark = pytest.mark.sim


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _smoke_on_the_twin(tmp_path, operator: dict):
    """The smoke campaign planned into tmp_path/c, its scripted server (not started) and the run config."""
    from spabench.plan.commands import PlanConfig, plan
    from spabench.standins.serve import ServeScriptedConfig, build_server

    suite = yaml.safe_load(Path("conf/suite/spabench.yaml").read_text())
    campaign = yaml.safe_load(Path("conf/campaign/smoke.yaml").read_text())
    operator = dict(operator)
    if "timer_s" in operator:   # the test's short rollouts are planned (a counted run keeps the planned timer)
        campaign["policies"] = [{**p, "timer_s": operator.pop("timer_s")} for p in campaign["policies"]]
    plan(PlanConfig.from_mapping({"campaign": campaign, "suite": suite, "out": str(tmp_path / "c")}))
    card = yaml.safe_load(Path("conf/policy/scripted_compositional.yaml").read_text())
    card["port"] = _free_port()
    _, server = build_server(ServeScriptedConfig.from_mapping({"policy": card, "mode": "compositional", "seed": 0,
                                                               "suite": suite}))
    bench = yaml.safe_load(Path("conf/bench/sim.yaml").read_text())
    for cam in bench["cameras"].values():
        cam["width"], cam["height"] = 64, 48
    cfg = RunConfig.from_mapping({"campaign_dir": str(tmp_path / "c"), "bench": bench, "suite": suite,
                                  "operator": operator,   # the server listens where `cards.<card or alias>.port=` says
                                  "cards": {card_aliases(tmp_path / "c")["scripted_compositional"]: {"port": card["port"]}}})
    return cfg, server


def test_smoke_campaign_on_the_twin(tmp_path, monkeypatch):
    pytest.importorskip("mujoco")
    from spabench.sim.bench import SimBench

    adopted = []
    real_adopt = SimBench.adopt_suite

    def adopt_suite(self, suite):  # the real hook, observed: the twin scores by the session's suite
        adopted.append(suite.relation_rule)
        real_adopt(self, suite)

    monkeypatch.setattr(SimBench, "adopt_suite", adopt_suite)
    cfg, server = _smoke_on_the_twin(tmp_path, {"type": "auto", "timer_s": 3.0})
    with server:
        assert run(cfg, out=io.StringIO()) == EXIT_OK
    assert adopted == [cfg.need("suite").relation]
    ledger = Ledger.open(tmp_path / "c" / "ledger.sqlite")
    outcomes = ledger.outcomes()
    ledger.close()
    assert len(outcomes) == 1 and outcomes.loc[0, "valid"] and outcomes.loc[0, "rater"] == "sim_evaluator"
    with EpisodeReader(tmp_path / "c" / outcomes.loc[0, "episode_path"]) as ep:
        assert ep.complete and ep.attrs["bench_type"] == "sim" and len(ep) > 5
        assert ep.count_frames("overhead") == int((ep.frame_index("overhead") >= 0).sum())


def test_the_twin_stages_the_scene_for_the_terminal_operator_too(tmp_path, monkeypatch):
    """Measured on main: with operator=terminal the twin never built the scene, and the empty table
    became the reference image for every later policy."""
    pytest.importorskip("mujoco")
    from spabench.operator.checklist import SCENE_STAGED, reference_image
    from spabench.sim.bench import SimBench

    staged = []
    real_load_scene = SimBench.load_scene

    def load_scene(self, scene):  # the real twin hook, observed
        staged.append(scene.scene_id)
        return real_load_scene(self, scene)

    monkeypatch.setattr(SimBench, "load_scene", load_scene)
    cfg, server = _smoke_on_the_twin(tmp_path, {"type": "terminal", "timer_s": 2.0, "keys": False,
                                                "status_line": False, "rater": "Ada"})
    with server:
        # Enter = scene ready; l = leave the attempt unscored
        assert run(cfg, out=io.StringIO(), stdin=io.StringIO("\nl\n")) == EXIT_OK
    ledger = Ledger.open(tmp_path / "c" / "ledger.sqlite")
    trial = ledger.trials()[0]
    attempt = ledger.attempts_for(trial.trial_id)[0]
    assert staged == [trial.scene_id]
    assert [e["payload"]["by"] for e in ledger.events(attempt.attempt_id, kind=SCENE_STAGED)] == ["twin"]
    assert reference_image(ledger, tmp_path / "c", trial.evaluation_id) is not None
    ledger.close()
