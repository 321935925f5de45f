"""GrootClient against a GR00T-conforming ZeroMQ REP server on loopback (both wire variants)."""

from __future__ import annotations

import io

import msgpack
import numpy as np
import pytest

from spabench.errors import ConfigError, ProtocolError
from spabench.policy.client import PolicyFault
from spabench.policy.groot_client import GrootClient, decode_message, encode_message
from tests.policy.wire_helpers import expected_actions, interrupt_main_when, make_card, make_obs, wait_until
from tests.support.servers.groot_server import GrootTestServer

CAMERAS = {"front": "middle", "wrist": "wrist"}
DEFAULT_GROUPS = [[0, 1, 2, 3, 4], [5]]


def settled(srv: GrootTestServer) -> int:
    """The server's reply count once every received request has been answered."""
    wait_until(lambda: srv.replies == len(srv.received))
    return srv.replies


def groot_card(port: int, **overrides):
    fields = dict(cameras=CAMERAS, horizon=16, execute_steps=8)
    fields.update(overrides)
    return make_card("groot", port, **fields)


@pytest.fixture
def server():
    with GrootTestServer() as srv:
        yield srv


@pytest.fixture
def client(server):
    c = GrootClient(groot_card(server.port, timeout_s=10.0))  # a budget a loaded machine cannot exceed
    c.connect()
    yield c
    c.close()


# -- codec byte facts ------------------------------------------------------------------------


def test_ndarray_is_tagged_npy_bytes_written_without_pickle():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    raw = msgpack.unpackb(encode_message({"x": arr}), raw=False)
    tagged = raw["x"]
    assert tagged["__ndarray_class__"] is True
    reference = io.BytesIO()
    np.save(reference, arr, allow_pickle=False)
    assert tagged["as_npy"] == reference.getvalue()
    assert tagged["as_npy"].startswith(b"\x93NUMPY")
    back = decode_message(encode_message({"x": arr}))["x"]
    assert back.dtype == np.float32 and np.array_equal(back, arr)


def test_object_arrays_are_refused_both_ways():
    with pytest.raises(ValueError):
        encode_message({"x": np.array([{"a": 1}], dtype=object)})
    evil = io.BytesIO()
    np.save(evil, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    message = msgpack.packb({"x": {"__ndarray_class__": True, "as_npy": evil.getvalue()}}, use_bin_type=True)
    with pytest.raises(ProtocolError, match="object arrays are refused"):
        decode_message(message)


def test_modality_config_decodes_to_plain_dicts_in_both_forms():
    n16 = msgpack.packb({"video": {"__ModalityConfig_class__": True, "as_json": {"modality_keys": ["front"]}}})
    n15 = msgpack.packb({"video": {"__ModalityConfig_class__": True, "as_json": '{"modality_keys": ["video.front"]}'}})
    assert decode_message(n16) == {"video": {"modality_keys": ["front"]}}
    assert decode_message(n15) == {"video": {"modality_keys": ["video.front"]}}


# -- N1.6 round trip -------------------------------------------------------------------------


def test_n16_round_trip_layout_joint_order_and_execute_steps(server, client):
    assert client.metadata["modality_config"]["video"]["modality_keys"] == ["front", "wrist"]
    obs = make_obs(height=48, width=64)
    chunk = client.infer(obs, "put the cup left of the bowl")
    assert chunk.actions.shape == (8, 6) and chunk.actions.dtype == np.float64
    np.testing.assert_allclose(chunk.actions, expected_actions(obs.state, 16, DEFAULT_GROUPS)[:8], rtol=1e-6)
    assert chunk.chunk_id == 1 and chunk.rtt_s == pytest.approx(chunk.received_t - chunk.sent_t)
    assert chunk.server_ms is None

    endpoint, data = server.received[-1]
    assert endpoint == "get_action" and set(data) == {"observation", "options"}
    video = data["observation"]["video"]
    assert video["front"].shape == (1, 1, 48, 64, 3) and video["front"].dtype == np.uint8
    assert int(video["front"][0, 0, 0, 0, 0]) == 22 and int(video["wrist"][0, 0, 0, 0, 0]) == 11
    state = data["observation"]["state"]
    assert state["single_arm"].dtype == np.float32 and state["single_arm"].shape == (1, 1, 5)
    np.testing.assert_allclose(state["gripper"][0, 0], [60.0])
    assert data["observation"]["language"] == {"annotation.human.task_description": [["put the cup left of the bowl"]]}
    assert client.infer(obs, "again").chunk_id == 2


def test_reset_is_sent_at_episode_start(server, client):
    assert server.resets == 0
    client.reset()
    client.reset()
    assert server.resets == 2
    assert [e for e, _ in server.received].count("reset") == 2
    assert server.received[-1][1] == {"options": None}


def test_action_groups_are_placed_by_joint_name_not_by_order():
    groups = {"gripper": 1, "single_arm": 5}
    with GrootTestServer(state_groups=groups, action_groups=groups) as srv:
        card = groot_card(srv.port, extra={
            "connect_attempts": 1,
            "state_groups": {"gripper": ["gripper"],
                             "single_arm": ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll"]},
        })
        with GrootClient(card) as client:
            obs = make_obs()
            chunk = client.infer(obs, "x")
    np.testing.assert_allclose(chunk.actions, expected_actions(obs.state, 16, [[5], [0, 1, 2, 3, 4]])[:8], rtol=1e-6)


# -- N1.5 -------------------------------------------------------------------------------------


def test_n15_flat_keys_and_flat_reply():
    with GrootTestServer(version="n1.5") as srv:
        card = groot_card(srv.port, extra={"connect_attempts": 1, "groot_version": "n1.5"})
        with GrootClient(card) as client:
            client.reset()  # N1.5 has no reset endpoint: a ping instead, and no server error
            obs = make_obs()
            chunk = client.infer(obs, "stack the blocks")
        endpoints = [e for e, _ in srv.received]
        assert "reset" not in endpoints and endpoints.count("ping") == 2
        _, data = srv.received[-1]
    assert data["video.front"].shape == (1, 48, 64, 3)
    assert data["state.single_arm"].shape == (1, 5)
    assert data["annotation.human.task_description"] == ["stack the blocks"]
    np.testing.assert_allclose(chunk.actions, expected_actions(obs.state, 16, DEFAULT_GROUPS)[:8], rtol=1e-6)


def test_n15_server_squeezes_one_joint_groups_as_upstream_and_the_client_accepts():
    """Issue 9 (measured on main): upstream Gr00tPolicy np.squeeze()s its reply, so the gripper group
    arrives as (16,); the client rejected it as a wrong shape and the old test server sent (16, 1)."""
    import zmq

    with GrootTestServer(version="n1.5") as srv:
        ctx = zmq.Context()
        sock = ctx.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(f"tcp://127.0.0.1:{srv.port}")
        obs = {"video.front": np.zeros((1, 48, 64, 3), np.uint8), "video.wrist": np.zeros((1, 48, 64, 3), np.uint8),
               "state.single_arm": np.zeros((1, 5)), "state.gripper": np.zeros((1, 1)),
               "annotation.human.task_description": ["x"]}
        sock.send(encode_message({"endpoint": "get_action", "data": obs}))
        raw = decode_message(sock.recv())
        sock.close()
        ctx.term()
        assert raw["action.gripper"].shape == (16,) and raw["action.single_arm"].shape == (16, 5)
        card = groot_card(srv.port, extra={"connect_attempts": 1, "groot_version": "n1.5"})
        with GrootClient(card) as client:
            obs = make_obs()
            chunk = client.infer(obs, "x")
    assert chunk.actions.shape == (8, 6)
    np.testing.assert_allclose(chunk.actions, expected_actions(obs.state, 16, DEFAULT_GROUPS)[:8], rtol=1e-6)


def test_torch_pickle_n15_server_gets_one_clear_error_and_is_never_unpickled(monkeypatch):
    """An Isaac-GR00T server from before the msgpack wire answers torch.save pickles."""
    import multiprocessing.reduction  # noqa: F401
    import pickle

    import torch  # noqa: F401

    # Imported before pickle is patched (measured under load: the server thread's first `import
    # torch` took past the 2 s ping budget, and multiprocessing.reduction, imported by torch inside
    # the patch, kept `refuse` as ForkingPickler.loads for the rest of the session, so a later
    # recording's encoder queue raised it and that session waited 300 s for its videos)
    def refuse(*a, **k):  # the client must never unpickle what a server sent
        raise AssertionError("the client unpickled a reply")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    with GrootTestServer(version="n1.5-torch") as srv:
        card = groot_card(srv.port, extra={"connect_attempts": 1, "groot_version": "n1.5"})
        client = GrootClient(card)
        with pytest.raises(ProtocolError) as err:
            client.connect()
        client.close()
    text = str(err.value)
    assert "torch.save pickle" in text and "older Isaac-GR00T N1.5" in text and "msgpack" in text
    assert "not valid msgpack" not in text


# -- faults -----------------------------------------------------------------------------------


def test_nan_reply_is_a_protocol_error(server, client):
    server.faults.nan = True
    with pytest.raises(ProtocolError, match=r"'single_arm'.*non-finite"):
        client.infer(make_obs(), "x")


def test_wrong_shape_reply_names_field_and_expected_shape(server, client):
    server.faults.wrong_shape = True
    with pytest.raises(ProtocolError, match=r"'single_arm' has shape \(16, 4\); expected \(16, 5\)"):
        client.infer(make_obs(), "x")


def test_error_reply_is_a_policy_fault_with_the_server_text(server, client):
    server.faults.error = "CUDA out of memory"
    with pytest.raises(PolicyFault, match="CUDA out of memory"):
        client.infer(make_obs(), "x")
    server.faults.error = None
    assert client.infer(make_obs(), "x").actions.shape == (8, 6)  # the REP/REQ pair stayed in step


def test_timeout_recreates_the_socket_and_never_reads_the_late_reply():
    with GrootTestServer() as srv:
        # a 1 s budget: the recovered call must fit in it on a loaded machine too
        client = GrootClient(groot_card(srv.port, timeout_s=1.0))
        client.connect()
        srv.faults.delay_s = 1.6
        replies_before = settled(srv)
        first = make_obs(state=[1, 1, 1, 1, 1, 1])
        with pytest.raises(PolicyFault, match="no reply to 'get_action'"):
            client.infer(first, "x")
        assert client._socket is None  # closed, not reused
        srv.faults.delay_s = 0.0
        # the server sends the late reply (into the void: its peer socket is gone) ...
        wait_until(lambda: srv.replies == replies_before + 1)
        second = make_obs(state=[50, 40, 30, 20, 10, 5])
        # ... and the new socket must get the answer to the new observation, not the late one
        chunk = client.infer(second, "y")
        client.close()
    np.testing.assert_allclose(chunk.actions, expected_actions(second.state, 16, DEFAULT_GROUPS)[:8], rtol=1e-6)


def test_ctrl_c_during_a_request_leaves_no_half_read_reply():
    with GrootTestServer() as srv:
        client = GrootClient(groot_card(srv.port, timeout_s=30.0))
        client.connect()
        srv.faults.delay_s = 2.0     # the reply is held while the Ctrl-C lands
        replies_before = settled(srv)
        asked = srv.action_requests
        # Ctrl-C once the server has the request (measured before: a 0.15 s timer)
        interrupt_main_when(lambda: srv.action_requests > asked)
        with pytest.raises(KeyboardInterrupt):
            client.infer(make_obs(state=[1, 1, 1, 1, 1, 1]), "x")
        assert client._socket is None
        srv.faults.delay_s = 0.0
        wait_until(lambda: srv.replies == replies_before + 1, timeout_s=30.0)
        second = make_obs(state=[9, 8, 7, 6, 5, 4])
        chunk = client.infer(second, "y")
        client.close()
    np.testing.assert_allclose(chunk.actions, expected_actions(second.state, 16, DEFAULT_GROUPS)[:8], rtol=1e-6)


@pytest.mark.slow
def test_server_dying_mid_episode_is_a_policy_fault():
    with GrootTestServer() as srv:
        client = GrootClient(groot_card(srv.port, timeout_s=1.0))
        client.connect()
        srv.faults.die_after = 1
        assert client.infer(make_obs(), "x").actions.shape == (8, 6)
        with pytest.raises(PolicyFault):
            client.infer(make_obs(), "x")
        with pytest.raises(PolicyFault):
            client.reset()
        client.close()


def test_connect_to_no_server_fails_clearly():
    with GrootTestServer() as srv:
        port = srv.port
    client = GrootClient(groot_card(port, timeout_s=0.2))
    with pytest.raises(PolicyFault, match="no answer to 'ping' after 1 attempt"):
        client.connect()
    client.close()


def test_card_keys_unknown_to_the_checkpoint_fail_at_connect(server):
    client = GrootClient(groot_card(server.port, cameras={"top": "middle"}))
    with pytest.raises(ConfigError, match=r"video key\(s\) \['top'\].*allowed: front, wrist"):
        client.connect()
    client.close()


def test_api_token_from_the_card_environment_variable(monkeypatch):
    with GrootTestServer(api_token="s3cret") as srv:
        monkeypatch.setenv("GROOT_TEST_TOKEN", "s3cret")
        with GrootClient(groot_card(srv.port, api_key_env="GROOT_TEST_TOKEN")) as client:
            assert client.infer(make_obs(), "x").actions.shape == (8, 6)
        monkeypatch.setenv("GROOT_TEST_TOKEN", "wrong")
        client = GrootClient(groot_card(srv.port, api_key_env="GROOT_TEST_TOKEN"))
        with pytest.raises(PolicyFault, match="Unauthorized"):
            client.connect()
        client.close()


def test_bad_card_extra_is_a_config_error():
    with pytest.raises(ConfigError, match="groot_version"):
        GrootClient(groot_card(5555, extra={"groot_version": "n2"}))
    with pytest.raises(ConfigError, match=r"leaves joints \['gripper'\]"):
        GrootClient(groot_card(5555, extra={"action_groups": {"arm": ["shoulder_pan", "shoulder_lift",
                                                                      "elbow_flex", "wrist_flex", "wrist_roll"]}}))
    with pytest.raises(ConfigError, match="elbow"):
        GrootClient(groot_card(5555, extra={"state_groups": {"arm": ["elbow"]}}))


def test_close_from_another_thread_aborts_an_in_flight_request():
    import threading

    with GrootTestServer() as srv:
        client = GrootClient(groot_card(srv.port, timeout_s=5.0))
        client.connect()
        srv.faults.delay_s = 3.0
        replies_before = settled(srv)
        threading.Timer(0.2, client.close).start()
        with pytest.raises(PolicyFault):
            client.infer(make_obs(), "x")
        assert srv.replies == replies_before  # aborted before the server answered
        with pytest.raises(PolicyFault, match="closed"):
            client.infer(make_obs(), "x")
        srv.faults.delay_s = 0.0
