"""Any local LeRobot policy checkpoint as an openpi-protocol `infer_fn`.

This is the safe route for LeRobot checkpoints: the checkpoint is loaded from a local folder on the
policy host (no hub access: HF_HUB_OFFLINE=1), and the harness speaks msgpack over a websocket to
it instead of LeRobot's pickle-over-gRPC async server.

Observation mapping (openpi request key -> LeRobot input feature):

    observation/state              -> observation.state            float32 (D,)
    observation/images/<cam>       -> observation.images.<cam>     uint8 HxWx3 (generic form)
    observation/wrist_image        -> observation.images.<cam>     for the one image feature whose
                                                                   camera name contains "wrist"
    observation/image              -> observation.images.<cam>     for `middle` (else `front`,
                                                                   else the only non-wrist camera)
    observation/environment_state  -> observation.environment_state
    prompt                         -> task                         (language-conditioned policies)

`key_map` ({lerobot_feature: openpi_key}) overrides any of these. Images arrive uint8 HWC and are
converted to float CHW in [0, 1] (resized to the feature's HxW when they differ); the checkpoint's
saved pre-processor then batches, moves and normalises, the policy predicts one chunk
(`predict_action_chunk`, `chunk_size` x action_dim) and the saved post-processor unnormalises it.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spabench.errors import ConfigError, DataError
from spabench.policy.identity import DIGEST_KEY, checkpoint_digest

log = logging.getLogger(__name__)

__all__ = ["LeRobotPolicy", "FeatureSource", "default_key_map"]

PREPROCESSOR_FILE = "policy_preprocessor.json"
POSTPROCESSOR_FILE = "policy_postprocessor.json"
_IMAGE_PREFIX = "observation.images."
_MAIN_CAMERAS = ("middle", "front", "main", "image")


@dataclass(frozen=True)
class FeatureSource:
    feature: str      # LeRobot input feature, e.g. observation.images.middle
    request_key: str  # openpi request key, e.g. observation/image
    kind: str         # "visual" | "vector"
    shape: tuple[int, ...]


def default_key_map(features: dict[str, Any]) -> dict[str, str]:
    """{lerobot_feature: openpi_key} for a policy's input features (see the module docstring)."""
    mapping: dict[str, str] = {}
    cameras = [k[len(_IMAGE_PREFIX):] for k in features if k.startswith(_IMAGE_PREFIX)]
    non_wrist = [c for c in cameras if "wrist" not in c]
    main = next((c for c in _MAIN_CAMERAS if c in non_wrist), non_wrist[0] if len(non_wrist) == 1 else None)
    for key in features:
        if key.startswith(_IMAGE_PREFIX):
            cam = key[len(_IMAGE_PREFIX):]
            if "wrist" in cam and sum("wrist" in c for c in cameras) == 1:
                mapping[key] = "observation/wrist_image"
            elif cam == main:
                mapping[key] = "observation/image"
            else:
                mapping[key] = f"observation/images/{cam}"
        else:
            mapping[key] = key.replace(".", "/")
    return mapping


def check_device(device: str) -> None:
    """`device=` names a torch device this machine has (torch would fail deep inside the checkpoint load)."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"serve lerobot: device={device!r} is not a torch device ({str(exc).splitlines()[0]}; "
                          "allowed: cpu, cuda, cuda:N, mps)") from None
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (dev.index or 0) >= count:
            raise ConfigError(f"serve lerobot: device={device}: torch sees {count} CUDA GPU(s) on this machine "
                              f"(torch {torch.__version__}, built for CUDA {torch.version.cuda or 'none'}); "
                              "use device=cpu or a GPU it lists")
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"serve lerobot: device={device}: this machine has no Apple MPS device; use device=cpu")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"serve lerobot: device={device}: not supported here (allowed: cpu, cuda, cuda:N, mps)")


class LeRobotPolicy:
    """A loaded checkpoint; call it with an openpi observation dict, get `{"actions": (chunk, D)}`."""

    def __init__(self, checkpoint: str | os.PathLike, device: str = "cpu",
                 key_map: dict[str, str] | None = None) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        check_device(device)
        self.checkpoint = Path(checkpoint).expanduser().resolve()
        self._check_folder()
        self.checkpoint_digest = checkpoint_digest(self.checkpoint)  # before loading: what was read
        import torch
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors

        self._torch = torch
        self.device = device
        try:
            config = PreTrainedConfig.from_pretrained(str(self.checkpoint))
        except Exception as exc:
            raise DataError(self.checkpoint / "config.json", f"not a LeRobot policy config: {exc}") from None
        config.device = device
        policy_cls = get_policy_class(config.type)
        self.policy = policy_cls.from_pretrained(str(self.checkpoint), config=config)
        self.policy.to(device)
        self.policy.eval()
        self.config = config
        overrides = {"device_processor": {"device": device}}
        self.preprocessor, self.postprocessor = make_pre_post_processors(
            config, pretrained_path=str(self.checkpoint), preprocessor_overrides=overrides,
        )
        self._lock = threading.Lock()
        features = dict(config.input_features)
        mapping = default_key_map(features)
        for feature, request_key in (key_map or {}).items():
            if feature not in features:
                raise ConfigError(f"key_map: {feature!r} is not an input feature of {self.checkpoint} "
                                  f"(allowed: {', '.join(features)})")
            mapping[feature] = request_key
        self.sources = [
            FeatureSource(feature=f, request_key=mapping[f],
                          kind="visual" if f.startswith(_IMAGE_PREFIX) else "vector",
                          shape=tuple(int(d) for d in features[f].shape))
            for f in features
        ]
        action = config.output_features.get("action")
        self.action_dim = int(action.shape[0]) if action is not None else None
        self.chunk_size = int(getattr(config, "chunk_size", 0) or getattr(config, "n_action_steps", 1))

    def _check_folder(self) -> None:
        if not self.checkpoint.is_dir():
            raise ConfigError(f"checkpoint={self.checkpoint}: not a folder (a local LeRobot checkpoint "
                              "folder with config.json, model.safetensors and the processors is needed)")
        for name in ("config.json", "model.safetensors", PREPROCESSOR_FILE, POSTPROCESSOR_FILE):
            if not (self.checkpoint / name).exists():
                raise DataError(self.checkpoint, f"missing {name}; save the policy together with its "
                                "pre/post-processors (policy.save_pretrained + processor.save_pretrained)")

    @property
    def metadata(self) -> dict[str, Any]:
        """Sent to every client on connect; `checkpoint_digest` lets the harness pin what answered."""
        return {
            "server": "spabench serve lerobot",
            "policy_type": self.config.type,
            "checkpoint": self.checkpoint.name,
            DIGEST_KEY: self.checkpoint_digest,
            "chunk_size": self.chunk_size,
            "action_dim": self.action_dim,
            "inputs": {s.request_key: s.feature for s in self.sources},
        }

    def reset(self) -> None:
        with self._lock:
            self.policy.reset()

    def _tensor(self, source: FeatureSource, value: Any):
        torch = self._torch
        if value is None:
            raise KeyError(source.request_key)
        arr = np.asarray(value)
        if source.kind == "visual":
            if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:
                raise ValueError(f"{source.request_key}: expected an HxWx3 uint8 image for "
                                 f"{source.feature}, got {arr.dtype} {arr.shape}")
            _, height, width = source.shape
            if arr.shape[:2] != (height, width):
                import cv2

                arr = cv2.resize(arr, (width, height), interpolation=cv2.INTER_AREA)
            return torch.from_numpy(np.ascontiguousarray(arr)).permute(2, 0, 1).float().div_(255.0)
        arr = arr.astype(np.float32)
        if arr.shape != source.shape:
            raise ValueError(f"{source.request_key}: expected shape {source.shape} for {source.feature}, "
                             f"got {arr.shape}")
        return torch.from_numpy(arr)

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        torch = self._torch
        batch: dict[str, Any] = {}
        for source in self.sources:
            if source.request_key not in request:
                raise KeyError(f"request lacks {source.request_key!r} (for {source.feature}); "
                               f"received keys: {sorted(request)}")
            batch[source.feature] = self._tensor(source, request[source.request_key]).unsqueeze(0)
        batch["task"] = str(request.get("prompt", ""))
        with self._lock, torch.inference_mode():
            batch = self.preprocessor(batch)
            chunk = self.policy.predict_action_chunk(batch)
            if chunk.ndim == 2:
                chunk = chunk.unsqueeze(0)
            chunk = self.postprocessor(chunk)
        actions = chunk[0].detach().to("cpu", torch.float32).numpy()
        return {"actions": np.ascontiguousarray(actions)}
