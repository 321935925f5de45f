"""LeRobotGrpcClient: the pickle refusal, the restricted unpickler, and a round trip against
LeRobot's own async-inference PolicyServer (a subprocess on loopback, tiny ACT on CPU)."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from spabench.errors import ConfigError, ProtocolError
from spabench.policy.client import PolicyFault
from spabench.policy.lerobot_grpc_client import LeRobotGrpcClient, is_loopback_host, restricted_loads
from tests.policy.wire_helpers import make_card, make_obs, wait_until
from tests.support.tiny_act import CHUNK_SIZE, tiny_act_checkpoint  # noqa: F401 - pytest fixture

REPO_ROOT = Path(__file__).resolve().parents[2]


def grpc_card(port: int, host: str = "127.0.0.1", extra=None, **overrides):
    fields = dict(host=host, cameras={"middle": "middle", "wrist": "wrist"}, horizon=CHUNK_SIZE, execute_steps=5,
                  timeout_s=10.0, extra={"policy_type": "act", "pretrained_name_or_path": "/ckpt",
                                         "connect_attempts": 1, **(extra or {})})
    fields.update(overrides)
    return make_card("lerobot_grpc", port, **fields)


# -- the pickle hazard -----------------------------------------------------------------------


@pytest.mark.parametrize("host", ["10.0.0.5", "gpu-box.lab", "192.168.1.20", "localhost.evil.example"])
def test_refuses_non_loopback_hosts_naming_the_hazard(host):
    with pytest.raises(ConfigError, match=r"pickle.*issue 3047.*spabench serve lerobot"):
        LeRobotGrpcClient(grpc_card(8080, host=host))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_hosts_are_accepted(host):
    assert is_loopback_host(host)
    LeRobotGrpcClient(grpc_card(8080, host=host))


def test_remote_host_only_with_explicit_opt_in():
    client = LeRobotGrpcClient(grpc_card(8080, host="10.0.0.5", allow_remote_pickle=True))
    assert client.address == "10.0.0.5:8080"


def test_required_extra_keys():
    with pytest.raises(ConfigError, match="extra.pretrained_name_or_path"):
        LeRobotGrpcClient(grpc_card(8080, extra={"pretrained_name_or_path": ""}))


class _Trap:
    """Unpickling this would create a file: what an attacker's payload looks like."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_restricted_unpickler_refuses_foreign_globals(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(ProtocolError, match="refused to unpickle global"):
        restricted_loads(pickle.dumps([_Trap(marker)]))
    assert not marker.exists()


def test_restricted_unpickler_reads_a_timed_action_chunk():
    import torch
    from lerobot.async_inference.helpers import TimedAction

    rows = torch.arange(12, dtype=torch.float32).reshape(2, 6)
    chunk = [TimedAction(timestamp=1.0, timestep=7 + i, action=row) for i, row in enumerate(rows)]
    back = restricted_loads(pickle.dumps(chunk))
    assert [a.get_timestep() for a in back] == [7, 8]
    assert torch.equal(torch.stack([a.get_action() for a in back]), rows)


def test_stale_chunks_are_recognised():
    import torch
    from lerobot.async_inference.helpers import TimedAction

    client = LeRobotGrpcClient(grpc_card(8080, extra={"actions_per_chunk": 2}, horizon=2, execute_steps=2))
    data = pickle.dumps([TimedAction(1.0, 3 + i, torch.zeros(6)) for i in range(2)])
    assert client._decode(data, timestep=4) is None  # answers observation #3: stale
    assert client._decode(data, timestep=3).shape == (2, 6)
    bad = pickle.dumps([TimedAction(1.0, 3 + i, torch.full((6,), float("nan"))) for i in range(2)])
    with pytest.raises(ProtocolError, match="non-finite"):
        client._decode(bad, timestep=3)


# -- round trip against LeRobot's PolicyServer -----------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", autouse=True)
def policy_server(tmp_path_factory):
    """`python -m lerobot.async_inference.policy_server` on 127.0.0.1 (its logs/ go to a tmp dir).

    Autouse so the server's start-up (importing torch) overlaps the module's quick tests."""
    workdir = tmp_path_factory.mktemp("policy_server")
    port = _free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO_ROOT))
    with open(workdir / "server.log", "w") as log:  # the server writes to its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "lerobot.async_inference.policy_server", "--host=127.0.0.1", f"--port={port}",
             "--fps=30", "--inference_latency=0", "--obs_queue_timeout=1"],
            cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    yield proc, port
    if proc.poll() is None:
        proc.terminate()
        proc.wait(10)


@pytest.mark.slow
def test_round_trip_against_lerobot_policy_server(policy_server, tiny_act_checkpoint):  # noqa: F811
    proc, port = policy_server
    card = grpc_card(port, extra={"pretrained_name_or_path": str(tiny_act_checkpoint), "policy_device": "cpu",
                                  "connect_attempts": 60, "camera_shapes": {"middle": [48, 64], "wrist": [48, 64]}})
    client = LeRobotGrpcClient(card)
    meta = client.connect()
    assert meta["policy_type"] == "act" and meta["actions_per_chunk"] == CHUNK_SIZE
    client.reset()
    obs = make_obs(height=48, width=64)
    first = client.infer(obs, "pick up the cup")
    assert first.actions.shape == (5, 6) and np.isfinite(first.actions).all()
    assert first.chunk_id == 1 and first.rtt_s > 0
    again = client.infer(obs, "pick up the cup")  # must_go: never dropped as "too similar"
    np.testing.assert_allclose(again.actions, first.actions, rtol=1e-5)  # ACT at eval is deterministic
    moved = client.infer(make_obs(state=[60, 50, 40, 30, 20, 90], height=48, width=64), "pick up the cup")
    assert not np.allclose(moved.actions, first.actions)  # the server used the new observation
    client.reset()
    assert client.infer(obs, "pick up the cup").chunk_id == 4

    proc.terminate()
    proc.wait(10)
    wait_until(lambda: proc.poll() is not None)
    with pytest.raises(PolicyFault):
        client.infer(obs, "pick up the cup")
    client.close()


def test_empty_and_stale_chunks_are_skipped_until_the_right_one():
    """A scripted servicer on LeRobot's own stubs: first an empty Actions, then a chunk for an
    earlier observation, then the right one. Only the last may reach the robot."""
    from concurrent import futures

    import grpc
    import torch
    from lerobot.async_inference.helpers import TimedAction
    from lerobot.transport import services_pb2, services_pb2_grpc

    class Scripted(services_pb2_grpc.AsyncInferenceServicer):
        def __init__(self):
            self.timestep = None
            self.get_calls = 0
            self.pieces = []

        def Ready(self, request, context):  # noqa: N802 - gRPC method names
            return services_pb2.Empty()

        def SendPolicyInstructions(self, request, context):  # noqa: N802
            return services_pb2.Empty()

        def SendObservations(self, request_iterator, context):  # noqa: N802
            data = b""
            for piece in request_iterator:
                self.pieces.append(piece.transfer_state)
                data += piece.data
            # a test double trusting its own client; the real hazard is documented in the client
            self.timestep = pickle.loads(data).get_timestep()  # noqa: S301
            return services_pb2.Empty()

        def GetActions(self, request, context):  # noqa: N802
            self.get_calls += 1
            if self.get_calls == 1:
                return services_pb2.Actions(data=b"")
            first = self.timestep - (1 if self.get_calls == 2 else 0)
            value = -1.0 if self.get_calls == 2 else float(first)
            chunk = [TimedAction(0.0, first + i, torch.full((6,), value)) for i in range(CHUNK_SIZE)]
            return services_pb2.Actions(data=pickle.dumps(chunk))

    servicer = Scripted()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    services_pb2_grpc.add_AsyncInferenceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        client = LeRobotGrpcClient(grpc_card(port, timeout_s=5.0))
        client.connect()
        chunk = client.infer(make_obs(height=48, width=64), "x")
        client.close()
    finally:
        server.stop(0)
    assert servicer.get_calls == 3
    assert servicer.pieces == [3]  # one piece, TRANSFER_END
    assert chunk.actions.shape == (5, 6)
    assert np.all(chunk.actions == servicer.timestep)  # the right chunk, never the stale -1 one


def test_observation_pieces_follow_lerobots_transfer_states():
    from lerobot.transport import services_pb2

    client = LeRobotGrpcClient(grpc_card(8080))
    client._pb = services_pb2
    payload = bytes(range(256)) * (5 * 1024 * 1024 // 256)  # 5 MB: three 2 MB pieces
    pieces = list(client._pieces(payload))
    assert [p.transfer_state for p in pieces] == [services_pb2.TRANSFER_BEGIN, services_pb2.TRANSFER_MIDDLE,
                                                  services_pb2.TRANSFER_END]
    assert b"".join(p.data for p in pieces) == payload
    assert [p.transfer_state for p in client._pieces(b"small")] == [services_pb2.TRANSFER_END]
