"""`spabench serve scripted`: the config -> server wiring (the server itself is exercised closed-loop
in test_scripted.py)."""

from __future__ import annotations

import pytest

from spabench.errors import ConfigError
from spabench.policy.card import load_card
from spabench.standins.serve import ServeScriptedConfig, build_server


def cfg(**top):
    base = {"mode": "compositional", "host": "127.0.0.1", "port": None, "seed": 0, "grasp_noise_cm": 0.0,
            "api_key": None, "policy": load_card("scripted_compositional"),
            "suite": {"root": "tasks", "hardware": "hardware"}}
    base.update(top)
    return ServeScriptedConfig.from_mapping(base)


def test_config_builds_a_not_a_vla_server(suite):
    policy, server = build_server(cfg(mode="memorising", seed=5, grasp_noise_cm=0.5))
    assert server.port == 8765                       # null port: the policy card's
    assert policy.mode == "memorising" and policy.seed == 5 and policy.grasp_noise_cm == 0.5
    assert server.metadata["is_vla"] is False and server.metadata["policy"] == "scripted_memorising"
    assert "reset" in server.metadata["endpoints"] and server.reset_fn == policy.reset
    _, other = build_server(cfg(port=9123, api_key="k"))
    assert other.port == 9123 and other.api_key == "k"


@pytest.mark.parametrize("bad,field", [({"mode": "clever"}, "mode"), ({"grasp_noise_cm": -1}, "grasp_noise_cm"),
                                       ({"seed": "x"}, "seed")])
def test_bad_config_names_the_field(suite, bad, field):
    with pytest.raises(ConfigError, match=field):
        build_server(cfg(**bad))
