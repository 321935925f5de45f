"""Pre-flight: each server's advertised chunk size, action dimension and inputs against its card,
before the robot connects. Real servers on loopback (`spabench serve lerobot` with a tiny offline
ACT checkpoint, the GR00T test server), the real emulated arm for `run`."""

from __future__ import annotations

import io

import pytest

from spabench.errors import ConfigError
from spabench.ledger import Ledger
from spabench.policy.groot_client import GrootClient
from spabench.policy.preflight import advertised, check_card_against_server, mismatches
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_CONFIG
from spabench.serve.commands import ServeLerobotConfig
from tests.integration.harness import make_campaign, make_cfg
from tests.policy.wire_helpers import make_card
from tests.support.feetech_bus import EmulatedBus
from tests.support.servers.groot_server import GrootTestServer


def test_advertised_facts_by_protocol():
    meta = {"server": "spabench serve lerobot", "chunk_size": 20, "action_dim": 6,
            "inputs": {"observation/state": "observation.state", "observation/image": "observation.images.front"}}
    assert advertised(meta) == {"horizon": ("chunk_size", 20), "action_dim": ("action_dim", 6),
                                "inputs": ("inputs", ["observation/image", "observation/state"])}
    groot = {"modality_config": {"action": {"delta_indices": list(range(16)), "modality_keys": ["single_arm"]}}}
    assert advertised(groot) == {"horizon": ("modality_config.action.delta_indices", 16)}
    assert advertised({"reset_pose": [0.0] * 6}) == {}  # stock openpi metadata: free-form, nothing stated


def test_a_mismatch_names_the_card_field_and_both_values():
    card = make_card("openpi", 8000, horizon=100, cameras={"observation/image": "middle"})
    meta = {"chunk_size": 20, "action_dim": 7,
            "inputs": {"observation/state": "observation.state", "observation/image": "observation.images.front",
                       "observation/wrist_image": "observation.images.wrist"}}
    problems = mismatches(card, meta)
    assert problems[0] == "card field 'horizon' is 100, the server's 'chunk_size' is 20"
    assert problems[1] == "card field 'action_dim' is 6, the server's 'action_dim' is 7"
    assert "observation/wrist_image" in problems[2] and "'cameras'" in problems[2]
    with pytest.raises(ConfigError) as err:
        check_card_against_server(card, meta, "127.0.0.1:8000")
    assert str(err.value).count("\n") == 0 and "127.0.0.1:8000" in str(err.value)
    check_card_against_server(make_card("openpi", 8000, horizon=20, cameras={
        "observation/image": "middle", "observation/wrist_image": "wrist"}), {**meta, "action_dim": 6}, "x")


def test_groot_modality_config_gives_the_horizon():
    with GrootTestServer(horizon=16) as srv:
        card = make_card("groot", srv.port, cameras={"front": "middle", "wrist": "wrist"}, horizon=8,
                         execute_steps=8)
        client = GrootClient(card)
        try:
            meta = client.connect()
        finally:
            client.close()
    assert mismatches(card, meta) == ["card field 'horizon' is 8, the server's "
                                      "'modality_config.action.delta_indices' is 16"]


@pytest.mark.bench
def test_run_refuses_a_lerobot_server_whose_chunk_size_is_not_the_cards(tmp_path):
    """Measured on main: a server advertising a chunk of CHUNK_SIZE passed pre-flight against a card
    saying 100, and the first trial went invalid after the arm had homed."""
    from spabench.serve.commands import make_lerobot_server
    from tests.support.tiny_act import CHUNK_SIZE, build_tiny_act

    checkpoint = build_tiny_act(tmp_path / "act")
    server = make_lerobot_server(ServeLerobotConfig.from_mapping({"checkpoint": str(checkpoint), "port": 0}))
    campaign = make_campaign(tmp_path, n=2)
    with EmulatedBus() as bus, server:
        cfg = make_cfg(campaign, bus.port, server.port, timer_s=1.0, ema_alpha=None,
                       policy={"horizon": 100, "execute_steps": 100})
        out = io.StringIO()
        assert run(cfg, out=out) == EXIT_CONFIG
        assert bus.goal_writes() == []  # the arm was never driven
    text = out.getvalue()
    assert f"card field 'horizon' is 100, the server's 'chunk_size' is {CHUNK_SIZE}" in text, text
    ledger = Ledger.open(campaign / "ledger.sqlite")
    assert [ledger.attempts_for(t.trial_id) for t in ledger.trials()] == [[], []]
    ledger.close()
