"""make_client dispatches by protocol and imports protocol modules only when asked."""

from __future__ import annotations

import sys

import pytest

from spabench.policy.card import PROTOCOLS, load_card
from spabench.policy.client import PolicyClient
from spabench.policy.factory import CLIENTS, make_client
from spabench.policy.openpi_client import OpenPiClient

CARD_FOR = {"openpi": "pi05", "groot": "groot_fllm", "molmoact2": "molmoact2", "vla0": "vla0"}


def test_every_protocol_has_a_client_entry():
    assert set(CLIENTS) == set(PROTOCOLS)


def test_openpi_card_gets_an_unconnected_openpi_client():
    client = make_client(load_card("pi05"))
    assert isinstance(client, OpenPiClient) and not client.connected
    assert client.uri == "ws://127.0.0.1:8000"


@pytest.mark.parametrize("protocol", sorted(CARD_FOR.keys() - {"openpi"}))
def test_other_protocols_dispatch_to_their_module(protocol):
    _, class_name = CLIENTS[protocol]
    client = make_client(load_card(CARD_FOR[protocol]))
    assert type(client).__name__ == class_name and isinstance(client, PolicyClient)


def test_loading_a_card_imports_no_network_stack():
    code = ("import sys; from spabench.policy.card import load_card; load_card('pi05'); "
            "print(any(m in sys.modules for m in ('websockets', 'zmq', 'torch', 'lerobot')))")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
