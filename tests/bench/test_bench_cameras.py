"""The spabench_replay LeRobot camera: registration, pacing, replay, and lost-camera faults."""

from __future__ import annotations

import time
from itertools import pairwise

import av
import numpy as np
import pytest
from lerobot.cameras import CameraConfig, make_cameras_from_configs
from lerobot.utils.errors import DeviceNotConnectedError

from spabench.bench.cameras import (
    SpabenchReplayCamera,
    SpabenchReplayCameraConfig,
    decode_index,
    render,
)


def make_camera(**kw) -> SpabenchReplayCamera:
    kw.setdefault("fps", 30)
    kw.setdefault("width", 64)
    kw.setdefault("height", 48)
    cams = make_cameras_from_configs({"wrist": SpabenchReplayCameraConfig(**kw)})
    return cams["wrist"]


def test_registered_the_lerobot_way():
    assert CameraConfig.get_choice_class("spabench_replay") is SpabenchReplayCameraConfig
    cam = make_camera()
    assert isinstance(cam, SpabenchReplayCamera)
    assert (cam.width, cam.height, cam.fps) == (64, 48, 30)


@pytest.mark.parametrize("bad", [{"fps": 0}, {"width": 10}, {"height": None}, {"source": "x.avi"}])
def test_config_validation(bad):
    kw = {"fps": 30, "width": 64, "height": 48, **bad}
    with pytest.raises(ValueError, match="spabench_replay camera"):
        SpabenchReplayCameraConfig(**kw)


@pytest.mark.parametrize("index", [0, 1, 2, 255, 4097, 2**24 - 1])
def test_pattern_index_round_trip(index):
    assert decode_index(render(640, 480, index)) == index
    assert decode_index(render(24, 8, index)) == index


def test_pattern_index_survives_mp4_encoding(tmp_path):
    path = tmp_path / "pattern.mp4"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
        for i in range(40):
            for packet in stream.encode(av.VideoFrame.from_ndarray(render(320, 240, 1000 + i), format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    with av.open(str(path)) as inp:
        decoded = [decode_index(f.to_ndarray(format="rgb24")) for f in inp.decode(video=0)]
    assert decoded == list(range(1000, 1040))


def test_pacing_async_read_delivers_each_new_frame_once():
    cam = make_camera(fps=60)
    cam.connect()
    try:
        t0 = time.perf_counter()
        indices = [decode_index(cam.async_read(timeout_ms=1000)) for _ in range(12)]
        elapsed = time.perf_counter() - t0
        assert all(b > a for a, b in pairwise(indices)), indices  # never the same frame twice
        # the counter is the camera clock: it never runs ahead of elapsed time at 60 fps
        assert indices[-1] - indices[0] <= elapsed * 60 + 2
        latest = cam.read_latest()
        assert decode_index(latest) == cam.latest_index()
        assert latest.shape == (48, 64, 3) and latest.dtype == np.uint8
    finally:
        cam.disconnect()


def test_frozen_camera_read_latest_times_out():
    cam = make_camera()
    cam.connect()
    try:
        cam.read_latest()
        cam.freeze()
        time.sleep(0.12)
        with pytest.raises(TimeoutError, match="too old"):
            cam.read_latest(max_age_ms=60)
        cam.async_read(timeout_ms=50)  # the last frame from before the freeze, unconsumed so far
        with pytest.raises(TimeoutError, match="Timed out waiting"):
            cam.async_read(timeout_ms=50)
        before = cam.latest_index()
        cam.unfreeze()
        frame = cam.async_read(timeout_ms=1000)
        assert decode_index(frame) > before + 1  # the counter jumped: frames were lost while frozen
    finally:
        cam.disconnect()


def test_lost_camera_raises_like_lerobot():
    cam = make_camera()
    cam.connect()
    cam.stop()
    with pytest.raises(RuntimeError, match="read thread is not running"):
        cam.read_latest()
    with pytest.raises(RuntimeError, match="read thread is not running"):
        cam.read()
    cam.disconnect()
    with pytest.raises(DeviceNotConnectedError):
        cam.read_latest()
    with pytest.raises(DeviceNotConnectedError):
        cam.disconnect()


def test_npz_replay_in_order_then_lost_when_not_looping(tmp_path):
    frames = np.stack([np.full((48, 64, 3), 10 * i, dtype=np.uint8) for i in range(12)])
    np.savez(tmp_path / "clip.npz", frames=frames)
    cam = make_camera(source=str(tmp_path / "clip.npz"), fps=60, loop=False)
    cam.connect()
    try:
        seen = [int(cam.read()[40, 40, 0]) for _ in range(3)]
        assert seen == sorted(seen) and len(set(seen)) == 3 and set(seen) <= set(range(0, 120, 10))
        time.sleep(0.4)  # past the end of a 12-frame clip at 60 fps
        with pytest.raises(RuntimeError, match="read thread is not running"):
            cam.read_latest()
    finally:
        cam.disconnect()


def test_mp4_replay_is_resized_and_loops(tmp_path):
    path = tmp_path / "clip.mp4"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=30)
        stream.width, stream.height, stream.pix_fmt = 128, 96, "yuv420p"
        for _i in range(3):
            img = np.zeros((96, 128, 3), dtype=np.uint8)
            img[..., 0] = 200  # red
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    cam = make_camera(source=str(path), fps=60, stamp_index=True)
    cam.connect()
    try:
        frames = [cam.async_read(timeout_ms=1000) for _ in range(8)]  # more frames than the file holds
        assert all(f.shape == (48, 64, 3) for f in frames)
        below_band = frames[-1][20:, :, :].reshape(-1, 3).mean(axis=0)
        assert below_band[0] > 150 and below_band[2] < 60  # RGB order preserved (red stays red)
        indices = [decode_index(f) for f in frames]
        assert indices == sorted(indices) and len(set(indices)) == len(indices)
    finally:
        cam.disconnect()


def test_missing_file_fails_connect(tmp_path):
    cam = make_camera(source=str(tmp_path / "absent.mp4"))
    with pytest.raises(ConnectionError, match="does not exist"):
        cam.connect()
    assert not cam.is_connected
