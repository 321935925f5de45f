"""A tiny, randomly initialised ACT checkpoint built offline, saved the LeRobot way.

`build_tiny_act(folder)` writes config.json + model.safetensors + the policy pre/post-processors
(normalisation stats included) exactly as a trained checkpoint folder looks, so `serve lerobot`
can load it with HF_HUB_OFFLINE=1. No backbone weights are downloaded
(`pretrained_backbone_weights=None`). `tiny_act_checkpoint` is a session-scoped pytest fixture.
"""

from __future__ import annotations

from pathlib import Path

import pytest

STATE_DIM = 6
ACTION_DIM = 6
CHUNK_SIZE = 10
IMAGE_SHAPE = (3, 48, 64)  # C, H, W
CAMERAS = ("middle", "wrist")


def build_tiny_act(folder: str | Path, *, chunk_size: int = CHUNK_SIZE, seed: int = 0) -> Path:
    """Build and save a tiny ACT policy with its processors into `folder`; returns the folder."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.act.processor_act import make_act_pre_post_processors

    torch.manual_seed(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    input_features = {"observation.state": PolicyFeature(FeatureType.STATE, (STATE_DIM,))}
    for cam in CAMERAS:
        input_features[f"observation.images.{cam}"] = PolicyFeature(FeatureType.VISUAL, IMAGE_SHAPE)
    output_features = {"action": PolicyFeature(FeatureType.ACTION, (ACTION_DIM,))}
    config = ACTConfig(
        input_features=input_features,
        output_features=output_features,
        chunk_size=chunk_size,
        n_action_steps=chunk_size,
        pretrained_backbone_weights=None,
        dim_model=32,
        n_heads=2,
        dim_feedforward=64,
        n_encoder_layers=1,
        n_decoder_layers=1,
        n_vae_encoder_layers=1,
        latent_dim=8,
        device="cpu",
    )
    policy = ACTPolicy(config)
    # Joint-space statistics in the units the bench reports (degrees, gripper 0..100).
    stats = {
        "observation.state": {"mean": torch.zeros(STATE_DIM), "std": torch.full((STATE_DIM,), 30.0)},
        "action": {"mean": torch.tensor([0.0, 10.0, -10.0, 5.0, 0.0, 40.0]),
                   "std": torch.full((ACTION_DIM,), 20.0)},
    }
    for cam in CAMERAS:
        stats[f"observation.images.{cam}"] = {"mean": torch.full((3, 1, 1), 0.5),
                                             "std": torch.full((3, 1, 1), 0.25)}
    preprocessor, postprocessor = make_act_pre_post_processors(config, dataset_stats=stats)
    policy.save_pretrained(folder)
    preprocessor.save_pretrained(folder)
    postprocessor.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_act_checkpoint(tmp_path_factory) -> Path:
    """One tiny ACT checkpoint folder per test session."""
    return build_tiny_act(tmp_path_factory.mktemp("tiny_act"))
