"""Per-card overrides for multi-policy campaigns (`cards.<name>.<field>=...` on `spabench run`)."""

from __future__ import annotations

import pytest

from spabench.config import SpabenchConfig
from spabench.errors import ConfigError
from spabench.rollout.policies import load_cards


def test_a_field_of_one_card_is_overridden_and_the_others_are_untouched():
    cfg = SpabenchConfig.from_mapping({"cards": {"pi05": {"host": "10.1.2.3", "port": 9000}}})
    cards = load_cards(["pi05", "vla0"], cfg)
    assert (cards["pi05"].host, cards["pi05"].port) == ("10.1.2.3", 9000)
    assert cards["vla0"].port == 10000 and cards["vla0"].timer_s == 90


def test_an_override_for_a_card_outside_the_campaign_is_refused():
    with pytest.raises(ConfigError, match="no policy card or alias 'groot_fft'.*allowed: pi05"):
        load_cards(["pi05"], SpabenchConfig.from_mapping({"cards": {"groot_fft": {"port": 1}}}))


def test_an_override_is_validated_like_the_card_itself():
    with pytest.raises(ConfigError, match="ema_alpha"):
        load_cards(["groot_fft"], SpabenchConfig.from_mapping({"cards": {"groot_fft": {"ema_alpha": 1.5}}}))
