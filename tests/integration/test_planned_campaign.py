"""A campaign written by `spabench plan` (two policies, shared evaluation ids), run with the terminal
operator whose prompts are fed on stdin: checklist + ready gate, score prompt, reference image."""

from __future__ import annotations

import io
from pathlib import Path

import yaml

from spabench.ledger import Ledger
from spabench.plan.commands import PlanConfig
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_CONFIG, EXIT_OK
from tests.integration.harness import WaveServer, make_cfg
from tests.support.feetech_bus import DEFAULT_CALIBRATION_FILE, EmulatedBus


def _plan(tmp_path, policies):
    from spabench.plan.commands import plan

    campaign_cfg = yaml.safe_load(Path("conf/campaign/smoke.yaml").read_text())
    campaign_cfg.update(policies=policies, bench="so101")  # run below on the emulated SO-101
    out = tmp_path / "campaign"
    plan(PlanConfig.from_mapping({"campaign": campaign_cfg, "suite": yaml.safe_load(Path("conf/suite/spabench.yaml").read_text()),
                                      "out": str(out)}))
    (tmp_path / "calibration").mkdir()
    (tmp_path / "calibration" / "spabench_follower.json").write_bytes(DEFAULT_CALIBRATION_FILE.read_bytes())
    return out


REPLAYED = "replayed camera frames, not a placed scene"


def test_two_policies_terminal_operator(tmp_path, monkeypatch):
    policies = [{"name": "scripted_compositional", "card": "scripted_compositional", "timer_s": 20.0},
                {"name": "scripted_memorising", "card": "scripted_memorising", "timer_s": 20.0}]
    campaign = _plan(tmp_path, policies)
    ledger = Ledger.open(campaign / "ledger.sqlite")
    trials = ledger.trials()
    ledger.close()
    assert len(trials) == 2 and trials[0].evaluation_id == trials[1].evaluation_id
    with EmulatedBus() as bus, WaveServer() as s1, WaveServer() as s2:
        cfg = make_cfg(campaign, bus.port, s1.port, timer_s=1.0,
                       operator={"type": "terminal", "keys": True, "status_line": True, "rater": "Ada",
                                 # the gate always asks on trial 2 (replayed frames score about 0.5, but
                                 # a frame that happened to score above 0.85 would eat the reason line)
                                 "console": {"alignment_threshold": 1.0}},
                       # both cards point at local servers: the first by a lab card of its name (a lab
                       # folder comes before conf/policy), the other by port
                       policy={"name": trials[0].card})
        from spabench.policy.card import load_card

        other = load_card(trials[1].card)
        # trial 1: Enter at the gate, success "y", note; trial 2: Enter, then the override reason (the
        # replayed camera frames are not the reference scene: alignment about 0.5), "n", mode 1, note
        stdin = io.StringIO(f"\ny\nfine\n\n{REPLAYED}\nn\n1\nmissed it\n")
        out = io.StringIO()
        import spabench.rollout.session as session

        real_load = session.load_cards

        def load_cards(names, *args, **kw):  # point the second card at the second local server
            cards = real_load(names, *args, **kw)
            card = cards[other.name]
            card.port, card.horizon, card.execute_steps, card.pre_rollout_assist = s2.port, 10, 10, None
            card.cameras = {"observation/image": "middle", "observation/wrist_image": "wrist"}
            card.extra_keys = {}
            return cards

        monkeypatch.setattr(session, "load_cards", load_cards)
        code = run(cfg, out=out, stdin=stdin)
        text = out.getvalue()
        assert code == EXIT_OK, text
        assert s1.calls > 0 and s2.calls > 0
    assert "Scene ready?" in text and "to the robot's" in text and "Success?" in text
    # the policy names never reach the operator's screen (blind aliases)
    assert "scripted_compositional" not in text and "scripted_memorising" not in text
    assert "none yet" in text  # the first attempt of the evaluation has no reference
    assert (campaign / "references" / f"{trials[0].evaluation_id}.png").exists()  # the second one had
    ledger = Ledger.open(campaign / "ledger.sqlite")
    scores = [ledger.scores_for(ledger.attempts_for(t.trial_id)[0].attempt_id)[0] for t in trials]
    assert [(s.success, s.note) for s in scores] == [(True, "fine"), (False, "missed it")]
    assert ledger.next_trial() is None
    gated = [ledger.attempts_for(t.trial_id)[0] for t in trials]
    assert gated[0].alignment is None and gated[1].alignment < 1.0 and gated[1].alignment_override == REPLAYED
    ledger.close()


def test_resume_refuses_a_changed_campaign(tmp_path):
    campaign = _plan(tmp_path, [{"name": "scripted_compositional", "card": "scripted_compositional",
                                 "timer_s": 20.0}])
    cfg_path = campaign / "config.yaml"
    cfg_path.write_text(cfg_path.read_text().replace("seed: 1", "seed: 2"))
    with EmulatedBus() as bus:
        out = io.StringIO()
        assert run(make_cfg(campaign, bus.port, 9, timer_s=1.0), out=out) == EXIT_CONFIG
        assert "config hash" in out.getvalue()
        assert not bus.goal_writes()  # nothing moved
