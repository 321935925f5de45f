"""Per-card overrides for multi-policy campaigns (`cards.<name>.<field>=...` on `spabench run`)."""

from __future__ import annotations

import pytest

from spabench.errors import ConfigError
from spabench.rollout.commands import RunConfig
from spabench.rollout.policies import load_cards


def _load(names: list[str], cards: dict) -> dict:
    """The cards `run` loads for a campaign with these card names, given `cards.<card>.<field>=...`."""
    cfg = RunConfig.from_mapping({"cards": cards})
    return load_cards(names, cfg.cards, cfg.group_dirs("policy"))


def test_a_field_of_one_card_is_overridden_and_the_others_are_untouched():
    cards = _load(["pi05", "vla0"], {"pi05": {"host": "10.1.2.3", "port": 9000}})
    assert (cards["pi05"].host, cards["pi05"].port) == ("10.1.2.3", 9000)
    assert cards["vla0"].port == 10000 and cards["vla0"].timer_s == 90


def test_an_override_for_a_card_outside_the_campaign_is_refused():
    with pytest.raises(ConfigError, match="no policy card or alias 'groot_fft'.*allowed: pi05"):
        _load(["pi05"], {"groot_fft": {"port": 1}})


def test_an_override_is_validated_like_the_card_itself():
    with pytest.raises(ConfigError, match="ema_alpha"):
        _load(["groot_fft"], {"groot_fft": {"ema_alpha": 1.5}})
