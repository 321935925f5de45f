"""MolmoAct2Client against a MolmoAct2-conforming /act HTTP server on loopback."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from spabench.errors import ConfigError, ProtocolError
from spabench.policy.client import PolicyFault
from spabench.policy.molmoact2_client import MolmoAct2Client, json_numpy_dumps, json_numpy_loads
from tests.policy.wire_helpers import expected_actions, interrupt_main_when, make_card, make_obs
from tests.support.servers.molmoact2_server import MolmoAct2TestServer

CAMERAS = {"external_cam": "middle", "wrist_cam": "wrist"}
TAG = "so100_so101_molmoact2"


def molmo_card(port: int, extra=None, **overrides):
    fields = dict(cameras=CAMERAS, horizon=30, execute_steps=10,
                  extra={"connect_attempts": 1, "normalization_tag": TAG, **(extra or {})})
    fields.update(overrides)
    return make_card("molmoact2", port, **fields)


@pytest.fixture
def server():
    with MolmoAct2TestServer() as srv:
        yield srv


@pytest.fixture
def client(server):
    c = MolmoAct2Client(molmo_card(server.port, timeout_s=10.0))  # a budget a loaded machine cannot exceed
    c.connect()
    yield c
    c.close()


# -- json_numpy byte facts -------------------------------------------------------------------


def test_json_numpy_encoding_is_base64_raw_bytes_with_descr_and_shape():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    # np.float32 is not a Python float subclass, so it goes through the codec (np.float64 would not)
    obj = json.loads(json_numpy_dumps({"a": arr, "img": np.zeros((2, 2, 3), np.uint8), "s": np.float32(2.5)}))
    assert obj["a"] == {"__numpy__": base64.b64encode(arr.tobytes()).decode(), "dtype": "<f4", "shape": [2, 3]}
    assert obj["img"]["dtype"] == "|u1" and obj["img"]["shape"] == [2, 2, 3]
    assert obj["s"]["shape"] == [] and obj["s"]["dtype"] == "<f4"
    back = json_numpy_loads(json_numpy_dumps({"a": arr, "s": np.float32(2.5)}))
    assert back["a"].dtype == np.float32 and np.array_equal(back["a"], arr)
    assert back["s"] == 2.5 and np.ndim(back["s"]) == 0 and back["s"].dtype == np.float32


def test_json_numpy_refuses_object_dtypes():
    with pytest.raises(TypeError):
        json_numpy_dumps({"x": np.array([object()], dtype=object)})
    with pytest.raises(ProtocolError, match="not a plain numeric dtype"):
        json_numpy_loads('{"x": {"__numpy__": "AAAA", "dtype": "|O", "shape": [1]}}')
    with pytest.raises(ProtocolError, match="malformed json_numpy"):
        json_numpy_loads('{"x": {"__numpy__": "AAAA", "dtype": "<f8", "shape": [5]}}')


# -- round trips ------------------------------------------------------------------------------


def test_round_trip_json_numpy_native_frames_and_joint_order(server, client):
    assert client.metadata["norm_tag"] == TAG and client.metadata["status"] == "ok"
    obs = make_obs(height=36, width=64)
    chunk = client.infer(obs, "put the block in the bowl")
    assert chunk.actions.shape == (10, 6)
    np.testing.assert_allclose(chunk.actions, expected_actions(obs.state, 30)[:10], rtol=1e-6)
    assert chunk.server_ms is not None and chunk.server_ms >= 1.0
    payload = server.received[-1]
    assert payload["external_cam"].shape == (36, 64, 3) and payload["external_cam"].dtype == np.uint8
    assert int(payload["external_cam"][0, 0, 0]) == 22 and int(payload["wrist_cam"][0, 0, 0]) == 11
    assert payload["state"].dtype == np.float32
    np.testing.assert_allclose(payload["state"], obs.state)
    assert payload["instruction"] == "put the block in the bowl"
    assert payload["normalization_tag"] == TAG
    assert client.infer(obs, "x").chunk_id == 2


def test_jpeg_form_is_refused_by_an_upstream_like_server(server):
    """Issue 9: no upstream MolmoAct2 server decodes `images_jpeg`; it answers 400 for the missing camera."""
    card = molmo_card(server.port, extra={"image_encoding": "jpeg"})
    with (
        MolmoAct2Client(card) as client,
        pytest.raises(PolicyFault, match=r"missing required field: 'external_cam'"),
    ):
        client.infer(make_obs(height=120, width=160), "x")


def test_round_trip_compact_jpeg_form_with_the_documented_server_change():
    srv = MolmoAct2TestServer(accept_jpeg=True).start()
    card = molmo_card(srv.port, extra={"image_encoding": "jpeg", "jpeg_keys": {"external_cam": "top"}})
    try:
        with MolmoAct2Client(card) as client:
            obs = make_obs(height=120, width=160)
            chunk = client.infer(obs, "x")
    finally:
        srv.stop()
    server = srv
    np.testing.assert_allclose(chunk.actions, expected_actions(obs.state, 30)[:10], rtol=1e-6)
    payload = server.received[-1]
    assert set(payload["images_jpeg"]) == {"top", "wrist_cam"}
    assert "external_cam" not in payload
    assert server.decoded_jpeg_shapes[-1] == {"top": (120, 160, 3), "wrist_cam": (120, 160, 3)}


def test_reset_checks_the_server_each_episode(server, client):
    before = server.status_requests
    client.reset()
    assert server.status_requests == before + 1


def test_normalization_tag_mismatch_fails_at_connect(server):
    client = MolmoAct2Client(molmo_card(server.port, extra={"normalization_tag": "franka_droid"}))
    with pytest.raises(ConfigError, match="norm_tag 'so100_so101_molmoact2'"):
        client.connect()


def test_unready_server_fails_at_connect(server):
    server.faults.unhealthy = True
    with pytest.raises(PolicyFault, match="HTTP 503"):
        MolmoAct2Client(molmo_card(server.port)).connect()


# -- faults -----------------------------------------------------------------------------------


def test_nan_reply_is_a_protocol_error(server, client):
    server.faults.nan = True
    with pytest.raises(ProtocolError, match="'actions' holds non-finite"):
        client.infer(make_obs(), "x")


def test_wrong_shape_reply_names_field_and_expected_shape(server, client):
    server.faults.wrong_shape = True
    with pytest.raises(ProtocolError, match=r"'actions' has shape \(30, 5\); expected \(30, 6\)"):
        client.infer(make_obs(), "x")


def test_error_reply_is_a_policy_fault(server, client):
    server.faults.error = "CUDA error"
    with pytest.raises(PolicyFault, match="HTTP 500.*CUDA error"):
        client.infer(make_obs(), "x")


def test_timeout_then_recovery_with_the_new_observation(server):
    # a 1 s budget: the recovered call must fit in it on a loaded machine too
    client = MolmoAct2Client(molmo_card(server.port, timeout_s=1.0))
    client.connect()
    server.faults.delay_s = 1.6
    with pytest.raises(PolicyFault, match="within 1 s"):
        client.infer(make_obs(state=[1, 1, 1, 1, 1, 1]), "x")
    server.faults.delay_s = 0.0
    second = make_obs(state=[7, 6, 5, 4, 3, 2])
    chunk = client.infer(second, "y")
    np.testing.assert_allclose(chunk.actions, expected_actions(second.state, 30)[:10], rtol=1e-6)
    client.close()


def test_ctrl_c_mid_request_drops_the_connection(server):
    client = MolmoAct2Client(molmo_card(server.port, timeout_s=30.0))
    client.connect()
    server.faults.delay_s = 2.0     # the reply is held while the Ctrl-C lands
    asked = server.action_requests
    # Ctrl-C once the server has the request (measured before: a 0.15 s timer)
    interrupt_main_when(lambda: server.action_requests > asked)
    with pytest.raises(KeyboardInterrupt):
        client.infer(make_obs(state=[1, 1, 1, 1, 1, 1]), "x")
    assert client.http._session is None  # pooled connection thrown away
    server.faults.delay_s = 0.0
    second = make_obs(state=[3, 3, 3, 3, 3, 3])
    np.testing.assert_allclose(client.infer(second, "y").actions, expected_actions(second.state, 30)[:10], rtol=1e-6)
    client.close()


def test_server_dying_mid_episode(server, client):
    server.faults.die_after = 1
    assert client.infer(make_obs(), "x").actions.shape == (10, 6)
    with pytest.raises(PolicyFault):
        client.infer(make_obs(), "x")
    with pytest.raises(PolicyFault):  # gone for good: connection refused
        client.infer(make_obs(), "x")


def test_bad_extra_is_a_config_error():
    with pytest.raises(ConfigError, match="image_encoding"):
        MolmoAct2Client(molmo_card(8000, extra={"image_encoding": "png"}))
    with pytest.raises(ConfigError, match="jpeg_quality"):
        MolmoAct2Client(molmo_card(8000, extra={"jpeg_quality": 0}))
