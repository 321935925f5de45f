"""Episode recording: HDF5 arrays + one MP4 per camera (encoded off the control loop), reader, export.

Imports are lazy so that `import spabench.record` pulls in neither h5py nor PyAV until used.
"""

from __future__ import annotations

__all__ = ["Recorder", "RecorderConfig", "EpisodeReader", "EncoderPool", "EncoderSettings",
           "episode_dir", "resolve_episode_dir"]

_WHERE = {
    "Recorder": "spabench.record.recorder",
    "RecorderConfig": "spabench.record.recorder",
    "episode_dir": "spabench.record.recorder",
    "resolve_episode_dir": "spabench.record.recorder",
    "EpisodeReader": "spabench.record.reader",
    "EncoderPool": "spabench.record.video",
    "EncoderSettings": "spabench.record.video",
}


def __getattr__(name: str):
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(name)
