"""The shared-memory frames between the control process and the console process (issue 39): a reader
in another process never keeps a torn frame, sees the newest one, and its end leaves the control
process's segments in place (Python < 3.13's resource tracker would unlink them)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np

from spabench.console.shelf import FrameShelf, ShelfReader

READER = r"""
import json, sys, time
import numpy as np
from spabench.console.shelf import ShelfReader
r = ShelfReader(sys.argv[1])
seen, mixed, deadline = set(), 0, time.monotonic() + 20
r.want()
while len(seen) < 50 and time.monotonic() < deadline:
    r.want()
    frame = r.latest().get("middle")
    if frame is None:
        continue
    values = np.unique(frame)
    mixed += len(values) != 1          # a torn frame holds two frames' values
    seen.add(int(values[0]))
r.close()
print(json.dumps({"seen": len(seen), "mixed": mixed, "torn_retries": r.torn}), flush=True)
"""


def test_a_reader_process_gets_whole_frames_only_and_its_end_leaves_the_segments():
    shelf = FrameShelf()
    stop = threading.Event()
    frames = [np.full((480, 640, 3), k, np.uint8) for k in range(256)]

    def write() -> None:   # a frame of one value per put, as fast as it goes
        k = 0
        while not stop.is_set():
            shelf.put({"middle": frames[k % 256]})
            k += 1

    writer = threading.Thread(target=write, daemon=True)
    try:
        shelf.put({"middle": frames[0]})
        writer.start()
        proc = subprocess.run([sys.executable, "-c", READER, shelf.name], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        # whole frames only, and more than one: the reader follows the writer (how many it catches
        # between the writer's puts depends on the machine's load, not on the shelf)
        assert result["mixed"] == 0 and result["seen"] >= 2, result
        stop.set()
        writer.join(10)
        # the reader process has ended: the segments are still there, with the newest frame
        shelf.put({"middle": frames[7]})
        again = ShelfReader(shelf.name)
        try:
            assert np.array_equal(again.latest()["middle"], frames[7])
            assert again.latest().keys() == {"middle"}
        finally:
            again.close()
    finally:
        stop.set()
        shelf.close()


def test_a_new_shape_gets_a_new_segment_and_the_reader_follows_it():
    shelf = FrameShelf()
    reader = ShelfReader(shelf.name)
    try:
        assert reader.latest() == {}                 # nothing put yet
        before = reader.version()
        shelf.put({"wrist": np.full((48, 64, 3), 1, np.uint8)})
        assert reader.version() != before
        assert reader.latest()["wrist"].shape == (48, 64, 3)
        shelf.put({"wrist": np.full((96, 128, 3), 2, np.uint8), "nope": np.zeros((2, 2, 3), np.uint8)})
        latest = reader.latest()
        assert latest.keys() == {"wrist"} and latest["wrist"].shape == (96, 128, 3) and latest["wrist"].max() == 2
        assert not shelf.watched(2.0)
        reader.want()
        assert shelf.watched(2.0)
    finally:
        reader.close()
        shelf.close()
