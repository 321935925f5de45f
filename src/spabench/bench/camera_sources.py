"""How a bench file's camera `index_or_path` becomes the source field of its LeRobot camera config.

The camera class itself comes from LeRobot's own registry (`CameraConfig.get_choice_class(type)`,
which LeRobot's camera modules and spabench.bench.cameras fill); this table only says, per
registered type name, which field `index_or_path` fills and what it accepts. Light: no LeRobot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PATTERN = "pattern"   # spabench_replay: the numbered test pattern instead of a file


@dataclass(frozen=True)
class CameraSource:
    allowed: str                                   # what index_or_path may be, for the error message
    accepts: Callable[[Any], bool]
    kwargs: Callable[[str, Any], dict[str, Any]]   # (camera name, index_or_path) -> config fields
    lerobot_module: str = ""                       # the module whose import registers the config class
    defaults: dict[str, Any] = field(default_factory=dict)


CAMERA_SOURCES: dict[str, CameraSource] = {}


def register_camera_source(type_name: str, source: CameraSource) -> None:
    CAMERA_SOURCES[type_name] = source


def _opencv(name: str, raw: Any) -> dict[str, Any]:
    if isinstance(raw, int) or (isinstance(raw, str) and raw.isdigit()):
        return {"index_or_path": int(raw)}
    return {"index_or_path": Path(str(raw))}


def _zmq(name: str, raw: Any) -> dict[str, Any]:
    host, _, port = str(raw).partition(":")
    out: dict[str, Any] = {"server_address": host, "camera_name": name}
    if port:
        out["port"] = int(port)
    return out


def _replay(name: str, raw: Any) -> dict[str, Any]:
    from spabench.paths import resolve

    return {"source": raw if raw == PATTERN else str(resolve(raw)), "label": name}


register_camera_source("opencv", CameraSource(
    "a device index like 0 or a path like /dev/video2",
    lambda v: isinstance(v, (int, str)) and not isinstance(v, bool), _opencv, "lerobot.cameras.opencv"))
register_camera_source("intelrealsense", CameraSource(
    "the RealSense serial number or name, see `lerobot-find-cameras realsense`",
    lambda v: bool(str(v or "").strip()), lambda name, v: {"serial_number_or_name": str(v)},
    "lerobot.cameras.realsense"))
register_camera_source("zmq", CameraSource(
    "host:port of the ZMQ camera server (or put server_address/port/camera_name in extra)",
    lambda v: isinstance(v, (str, int)), _zmq, "lerobot.cameras.zmq"))
register_camera_source("spabench_replay", CameraSource(
    "'pattern', or a path ending in .mp4 or .npz",
    lambda v: isinstance(v, str) and (v == PATTERN or v.endswith((".mp4", ".npz"))), _replay,
    "spabench.bench.cameras"))
