"""The alignment gate at the terminal's ready gate, on the twin: one evaluation, two policies. The
first attempt makes the reference; before the second, a cup is left right in front of the middle and
the overhead camera (alignment about 0.33). "Scene ready" then measures the scene below the threshold and the
rollout starts only once a reason is typed; the attempt stores the value and the reason and the
report lists it. All real parts (twin, scripted policy servers over openpi, ledger, recorded MP4s)."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import numpy as np
import pytest
import yaml

from spabench.ledger import Ledger
from spabench.rollout.commands import EXIT_OK, RunConfig, run
from tests.support.campaigns import card_aliases

pytestmark = [pytest.mark.sim, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
SMALL = {"tasks": ["object_state"], "counts": {"id": 1, "ood": 0, "direct": 0, "paraphrase_ood": 0,
                                               "paraphrase_direct": 0, "novel_object": 0, "no_intervention": 0}}
REASON = "reference photo predates the new table mat"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _campaign(tmp_path):
    """demo_twin cut to one evaluation (two trials), its two scripted servers, and the run config."""
    from spabench.plan.commands import PlanConfig, plan
    from spabench.standins.serve import ServeScriptedConfig, build_server

    suite = yaml.safe_load((REPO / "conf/suite/spabench.yaml").read_text())
    campaign = yaml.safe_load((REPO / "conf/campaign/demo_twin.yaml").read_text())
    campaign.update(tasks=SMALL["tasks"], counts={**campaign.get("counts", {}), **SMALL["counts"]},
                    policies=[{**p, "timer_s": 1.5} for p in campaign["policies"]])   # short rollouts, planned
    plan(PlanConfig.from_mapping({"campaign": campaign, "suite": suite, "out": str(tmp_path / "c")}))
    servers, cards = [], {}
    for name, mode in (("scripted_compositional", "compositional"), ("scripted_memorising", "memorising")):
        card = yaml.safe_load((REPO / f"conf/policy/{name}.yaml").read_text())
        card["port"] = _free_port()
        cards[name] = {"port": card["port"]}
        servers.append(build_server(ServeScriptedConfig.from_mapping(
            {"policy": card, "mode": mode, "seed": 0, "suite": suite}))[1])
    bench = yaml.safe_load((REPO / "conf/bench/sim_demo.yaml").read_text())
    cfg = RunConfig.from_mapping(
        {"campaign_dir": str(tmp_path / "c"), "bench": bench, "suite": suite,
         "cards": {card_aliases(tmp_path / "c")[n]: v for n, v in cards.items()},
         "operator": {"type": "terminal", "keys": False, "status_line": False,
                      "rater": "Ada Lovelace"}})
    return cfg, servers


def _in_front_of(world, camera: str, distance_m: float) -> np.ndarray:
    """A point `distance_m` in front of a twin camera's lens (MuJoCo cameras look along -z)."""
    import mujoco

    cid = mujoco.mj_name2id(world.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    return world.data.cam_xpos[cid] - distance_m * world.data.cam_xmat[cid].reshape(3, 3)[:, 2]


def _cups_before_the_lenses_in_the_second_scene(monkeypatch):
    from spabench.sim.bench import SimBench

    real_load = SimBench.load_scene
    loads = []

    def load_scene(self, scene):   # the real twin; the second placement is wrong
        real_load(self, scene)
        loads.append(scene.scene_id)
        if len(loads) == 2:
            world = self.robot.world
            cups = sorted(o for o in world.object_poses() if "white_cup" in o)
            for obj, cam in zip(cups, ("middle", "overhead"), strict=True):  # held up in front of the lens
                world.set_object_pose(obj, _in_front_of(world, cam, 0.07))

    monkeypatch.setattr(SimBench, "load_scene", load_scene)
    return loads


def _run(cfg, servers, stdin: str) -> tuple[int, str]:
    out = io.StringIO()
    for s in servers:
        s.__enter__()
    try:
        code = run(cfg, out=out, stdin=io.StringIO(stdin))
    finally:
        for s in servers:
            s.__exit__(None, None, None)
    return code, out.getvalue()


def test_below_the_threshold_the_terminal_starts_only_with_a_reason(tmp_path, monkeypatch):
    pytest.importorskip("mujoco")
    loads = _cups_before_the_lenses_in_the_second_scene(monkeypatch)
    cfg, servers = _campaign(tmp_path)
    with Ledger.open(tmp_path / "c") as ledger:   # an earlier session aborted the first trial
        aborted = ledger.begin_attempt(ledger.trials()[0].trial_id)
        ledger.finish_attempt(aborted, "invalid", "abort", invalid_reason="operator_abort")
    # trial 1: Enter, leave unscored. Trial 2: Enter -> below; Enter (back to the scene); Enter -> below;
    # "ok" (too short: nothing starts); Enter -> below; the reason -> the rollout starts; leave unscored.
    code, said = _run(cfg, servers, f"\nl\n\n\n\nok\n\n{REASON}\nl\n")
    assert code == EXIT_OK, said[-3000:]
    assert len(loads) == 2
    assert said.count("below the threshold 0.85") == 3, said
    assert "the reason 'ok' is too short: a reason needs at least 3 characters; nothing started" in said
    # the header: trial k of N, the time left (unknown before a complete attempt), the re-run announced
    assert "trial 1 of 2 · time left: unknown (nothing timed yet)" in said
    assert f"NOTE: re-run of trial {aborted.rsplit('-', 1)[0]} after operator_abort (attempt {aborted})" in said
    assert "trial 2 of 2 · about " in said and " s/trial, cycles this session)" in said
    assert max(len(line) for line in said.splitlines() if line.startswith("trial ")) <= 79
    with Ledger.open(tmp_path / "c", readonly=True) as ledger:
        first, second = ledger.trials()
        (_, a1) = ledger.attempts_for(first.trial_id)
        (a2,) = ledger.attempts_for(second.trial_id)   # one attempt: the refused answers started nothing
        assert a1.alignment is None and a1.alignment_override is None   # the reference attempt
        assert a2.alignment is not None and a2.alignment < 0.85 and a2.alignment_override == REASON
        (event,) = [e["payload"] for e in ledger.events(a2.attempt_id, "scene_alignment")]
        assert event["below_threshold"] and event["override_reason"] == REASON
        assert min(event["scores"].values()) == a2.alignment and set(event["scores"]) == {"middle", "overhead"}
    print(f"alignment of the pushed scene: {event['scores']}")

    from spabench.analysis.alignment import below_threshold_lines, campaign_below_threshold

    rows = campaign_below_threshold(tmp_path / "c")
    assert [(r.attempt_id, r.reason, r.threshold) for r in rows] == [(a2.attempt_id, REASON, 0.85)]
    text = "\n".join(below_threshold_lines(rows))
    assert "## Attempts started below the alignment threshold" in text
    assert a2.attempt_id.replace("-", "\\-") in text or a2.attempt_id in text
    assert f"{a2.alignment:.3f}" in text


def test_without_a_reason_the_rollout_below_the_threshold_never_starts(tmp_path, monkeypatch):
    pytest.importorskip("mujoco")
    _cups_before_the_lenses_in_the_second_scene(monkeypatch)
    cfg, servers = _campaign(tmp_path)
    code, said = _run(cfg, servers, "\nl\n\n")   # trial 2: Enter -> below; then the input ends
    assert "below the threshold 0.85" in said
    with Ledger.open(tmp_path / "c", readonly=True) as ledger:
        first, second = ledger.trials()
        assert len(ledger.attempts_for(first.trial_id)) == 1
        assert ledger.attempts_for(second.trial_id) == []
