"""Policy servers and clients: binds, tracebacks, frame sizes, keys in clear (issue 10, part 7)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from spabench.errors import ConfigError
from spabench.network import check_bind, warn_plain_key
from spabench.policy.codec_openpi import Packer
from spabench.policy.http_transport import base_url
from spabench.serve.openpi_server import DEFAULT_MAX_FRAME_BYTES, OpenPiServer


def _boom(obs):
    raise RuntimeError("secret internal detail\nline two")


def test_non_loopback_bind_needs_a_key_or_explicit_consent():
    check_bind("127.0.0.1", None, False, "serve")
    check_bind("0.0.0.0", "k", False, "serve")
    check_bind("0.0.0.0", None, True, "serve")
    with pytest.raises(ConfigError, match="without an api_key"):
        check_bind("0.0.0.0", None, False, "serve")


def _first_error(server: OpenPiServer, headers=None, payload=None) -> str:
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{server.port}", max_size=None, additional_headers=headers) as ws:
        ws.recv()  # metadata
        ws.send(payload if payload is not None else Packer().pack({"observation/state": np.zeros(6)}))
        return ws.recv()


def test_unauthenticated_clients_get_no_traceback():
    with OpenPiServer(_boom, {}, port=0) as server:
        text = _first_error(server)
    assert text == "RuntimeError: secret internal detail" and "Traceback" not in text
    with OpenPiServer(_boom, {}, port=0, api_key="k") as server:  # the key holder gets the upstream frame
        text = _first_error(server, headers={"Authorization": "Api-Key k"})
    assert "Traceback" in text


def test_frames_above_the_limit_close_the_connection():
    from websockets.exceptions import ConnectionClosed

    assert DEFAULT_MAX_FRAME_BYTES >= 2 * 640 * 480 * 3 + 64 * 1024
    frames = {"observation/image": np.zeros((480, 640, 3), np.uint8),
              "observation/wrist_image": np.zeros((480, 640, 3), np.uint8), "observation/state": np.zeros(6)}
    with OpenPiServer(lambda obs: {"actions": np.zeros((10, 6))}, {}, port=0) as server:
        assert isinstance(_first_error(server, payload=Packer().pack(frames)), bytes)   # two native frames fit
    with (
        OpenPiServer(lambda obs: {"actions": np.zeros((10, 6))}, {}, port=0, max_frame_bytes=100_000) as server,
        pytest.raises(ConnectionClosed) as closed,
    ):
        _first_error(server, payload=Packer().pack(frames))
    assert closed.value.rcvd is None or closed.value.rcvd.code == 1009


def test_clients_warn_once_for_a_key_in_clear(caplog):
    with caplog.at_level(logging.WARNING):
        assert warn_plain_key("ws://10.1.2.3:8000", "k", "pi05")
        assert not warn_plain_key("ws://10.1.2.3:8000", "k", "pi05")       # once
        assert not warn_plain_key("wss://10.1.2.3:8000", "k", "pi05")
        assert not warn_plain_key("http://127.0.0.1:8000", "k", "pi05")
        assert not warn_plain_key("http://10.9.9.9:8000", None, "pi05")
    assert sum("unencrypted" in r.message for r in caplog.records) == 1


def test_https_hosts_keep_the_card_port():
    assert base_url("https://gpu.lab", 8443) == "https://gpu.lab:8443"
    assert base_url("https://gpu.lab:9000/", 8443) == "https://gpu.lab:9000"
    assert base_url("10.0.0.5", 8000) == "http://10.0.0.5:8000"
