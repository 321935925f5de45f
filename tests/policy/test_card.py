"""Policy cards: the shipped cards load (directly and through the CLI's OmegaConf merge); bad
values fail with one error naming the field and the allowed values."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from spabench.errors import ConfigError, SpabenchError
from spabench.paths import conf_dir
from spabench.policy.card import PolicyCard, available_cards, load_card

CARDS = ("pi05", "molmoact2", "groot_fllm", "groot_fft", "vla0", "act_local",
         "scripted_compositional", "scripted_memorising")


def test_all_shipped_cards_are_present_and_valid():
    assert set(CARDS) <= set(available_cards())
    for name in CARDS:
        card = load_card(name)
        assert card.name == name
        assert card.timer_s == (90.0 if name == "vla0" else 60.0)
        assert card.control_hz == (10.0 if name == "vla0" else 30.0)
        assert set(card.cameras.values()) == {"middle", "wrist"}


def test_card_facts():
    pi05 = load_card("pi05")
    assert (pi05.protocol, pi05.port, pi05.horizon, pi05.image_size) == ("openpi", 8000, 50, [224, 224])
    assert pi05.cameras == {"observation/image": "middle", "observation/wrist_image": "wrist"}
    assert (pi05.state_key, pi05.prompt_key) == ("observation/state", "prompt")
    assert load_card("molmoact2").horizon == 30
    for name in ("groot_fllm", "groot_fft"):
        groot = load_card(name)
        assert (groot.protocol, groot.port, groot.horizon, groot.ema_alpha) == ("groot", 5555, 16, 0.25)
    assert load_card("groot_fllm").pre_rollout_assist is None
    assert load_card("groot_fft").pre_rollout_assist == {"type": "lift", "dz_mm": 10.0}
    vla0 = load_card("vla0")
    assert (vla0.protocol, vla0.port, vla0.horizon, vla0.execute_steps) == ("vla0", 10000, 8, 4)
    for mode, port in (("compositional", 8765), ("memorising", 8766)):
        card = load_card(f"scripted_{mode}")
        assert (card.protocol, card.port) == ("openpi", port)
        assert card.extra_keys == {"observation/privileged": "privileged"}
    assert load_card("act_local").protocol == "openpi"


@pytest.mark.parametrize("name", CARDS)
def test_cards_validate_through_the_cli_schema_merge(name):
    data = yaml.safe_load((conf_dir() / "policy" / f"{name}.yaml").read_text())
    card = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(PolicyCard), data))
    assert isinstance(card, PolicyCard) and card == load_card(name)


def test_cli_merge_surfaces_the_config_error():
    data = yaml.safe_load((conf_dir() / "policy" / "pi05.yaml").read_text())
    data["ema_alpha"] = 2.0
    with pytest.raises(Exception) as info:
        OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(PolicyCard), data))
    error = info.value if isinstance(info.value, SpabenchError) else info.value.__cause__
    assert isinstance(error, ConfigError) and "ema_alpha" in str(error)


def _card(**overrides):
    fields = dict(name="c", protocol="openpi", port=8000, horizon=10)
    fields.update(overrides)
    return PolicyCard(**fields)


@pytest.mark.parametrize("overrides, pattern", [
    ({"protocol": "grpc"}, r"field 'protocol': 'grpc' \(allowed: openpi \| groot \| molmoact2 \| vla0 \| lerobot_grpc\)"),
    ({"ema_alpha": 0.0}, r"field 'ema_alpha': 0.0 \(allowed: a number > 0 and <= 1, or null\)"),
    ({"ema_alpha": 1.5}, r"field 'ema_alpha'"),
    ({"execute_steps": 11}, r"field 'execute_steps': 11 \(allowed: an integer 1..horizon \(10\)"),
    ({"timer_s": 0}, r"field 'timer_s': 0 \(allowed: a number > 0"),
    ({"control_hz": -1.0}, r"field 'control_hz'"),
    ({"horizon": 0}, r"field 'horizon'"),
    ({"port": 70000}, r"field 'port'"),
    ({"cameras": {"observation/image": "top"}},
     r"field 'cameras.observation/image': 'top' \(allowed: wrist \| middle \| left \| right \| overhead"),
    ({"extra_keys": {"observation/privileged": "secret"}}, r"field 'extra_keys.observation/privileged'"),
    ({"image_size": [224]}, r"field 'image_size': .*\[height, width\]"),
    ({"request_threshold": 10}, r"field 'request_threshold': 10 \(allowed: an integer 0..execute_steps-1"),
    ({"action_dim": 5}, r"field 'action_dim'"),
    ({"pre_rollout_assist": {"type": "push", "dz_mm": 10}}, r"field 'pre_rollout_assist.type': 'push' \(allowed: lift\)"),
    ({"pre_rollout_assist": {"type": "lift", "dz_mm": 500}}, r"field 'pre_rollout_assist.dz_mm'"),
    ({"timeout_s": float("nan")}, r"field 'timeout_s'"),
])
def test_bad_values_name_the_field_and_the_allowed_values(overrides, pattern):
    with pytest.raises(ConfigError, match=pattern):
        _card(**overrides)


def test_defaults_and_alpha_one():
    card = _card(ema_alpha=1.0)
    assert card.execute_steps == 10 and card.request_threshold == 0 and card.ema_alpha == 1.0
    assert card.period_s == pytest.approx(1 / 30)


def test_unknown_field_and_unknown_card(tmp_path: Path):
    path = tmp_path / "typo.yaml"
    path.write_text("name: typo\nprotocol: openpi\nport: 8000\nhorizon: 10\nhorizn: 5\n")
    with pytest.raises(ConfigError, match=rf"{path}: field 'horizn': unknown field \(allowed: name, protocol"):
        load_card(path)
    with pytest.raises(ConfigError, match=r"unknown policy card 'nope' in .*policy \(allowed: .*pi05"):
        load_card("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nprotocol: zmq\nport: 8000\nhorizon: 10\n")
    with pytest.raises(ConfigError, match=rf"{bad}: policy card 'bad': field 'protocol'"):
        load_card(bad)


def test_api_key_from_the_named_environment_variable(monkeypatch):
    card = _card(api_key_env="SPABENCH_CARD_KEY")
    monkeypatch.setenv("SPABENCH_CARD_KEY", "k")
    assert card.api_key() == "k"
    monkeypatch.delenv("SPABENCH_CARD_KEY")
    with pytest.raises(ConfigError, match="'api_key_env' .*SPABENCH_CARD_KEY.*not set"):
        card.api_key()
    assert _card().api_key() is None
