"""`serve lerobot` with a tiny ACT checkpoint built offline, answering real openpi requests."""

from __future__ import annotations

import json

import numpy as np
import pytest

from spabench.errors import ConfigError, DataError
from spabench.policy.card import load_card
from spabench.policy.client import PolicyFault
from spabench.policy.openpi_client import OpenPiClient
from spabench.serve.commands import ServeLerobotConfig, make_lerobot_server
from tests.support.tiny_act import CHUNK_SIZE, tiny_act_checkpoint  # noqa: F401 (fixture)

from .openpi_helpers import make_obs


@pytest.fixture(scope="module")
def lerobot_server(tiny_act_checkpoint):  # noqa: F811
    server = make_lerobot_server(ServeLerobotConfig.from_mapping({"checkpoint": str(tiny_act_checkpoint), "host": "127.0.0.1",
                                  "port": 0, "api_key": None, "device": "cpu"}))
    server.start()
    yield server
    server.stop()


def _card(port, **overrides):
    card = load_card("act_local")
    fields = {**card.__dict__, "port": port, "horizon": CHUNK_SIZE, "execute_steps": CHUNK_SIZE,
              "request_threshold": 0, **overrides}
    return type(card)(**fields)


def test_tiny_act_answers_a_real_openpi_request(lerobot_server):
    client = OpenPiClient(_card(lerobot_server.port))
    meta = client.connect()
    assert meta["policy_type"] == "act" and meta["chunk_size"] == CHUNK_SIZE
    assert meta["action_dim"] == 6
    assert meta["inputs"] == {"observation/state": "observation.state",
                              "observation/image": "observation.images.middle",
                              "observation/wrist_image": "observation.images.wrist"}
    client.reset()                                   # the reset endpoint calls policy.reset()
    assert lerobot_server.resets == 1
    chunk = client.infer(make_obs(marker=1.0), "put the red block in the bowl")
    assert chunk.actions.shape == (CHUNK_SIZE, 6) and np.all(np.isfinite(chunk.actions))
    again = client.infer(make_obs(marker=1.0), "put the red block in the bowl")
    np.testing.assert_allclose(again.actions, chunk.actions, rtol=1e-5)  # eval mode: deterministic
    other = client.infer(make_obs(marker=40.0), "put the red block in the bowl")
    assert not np.allclose(other.actions, chunk.actions)  # the state reaches the model
    assert chunk.server_ms is not None
    client.close()


def test_missing_camera_key_is_a_server_error_naming_it(lerobot_server):
    client = OpenPiClient(_card(lerobot_server.port, cameras={"observation/image": "middle"}))
    with pytest.raises(PolicyFault, match="observation/wrist_image"):
        client.infer(make_obs(), "go")
    client.close()


def test_bad_checkpoint_folders(tmp_path, tiny_act_checkpoint):  # noqa: F811
    with pytest.raises(ConfigError, match="checkpoint=DIR is required"):
        make_lerobot_server(ServeLerobotConfig.from_mapping({"checkpoint": None}))
    with pytest.raises(ConfigError, match="not a folder"):
        make_lerobot_server(ServeLerobotConfig.from_mapping({"checkpoint": str(tmp_path / "absent")}))
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_text(json.dumps({"type": "act"}))
    with pytest.raises(DataError, match="missing model.safetensors"):
        make_lerobot_server(ServeLerobotConfig.from_mapping({"checkpoint": str(partial)}))
