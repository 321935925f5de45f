"""Which camera is which: each camera's view against one stored reference picture per camera.

Two USB cameras can come up in each other's device after a reboot; both still deliver frames, so
the camera check passes, and a whole campaign would record the wrist view as the overhead one. A
camera whose view is nearer another camera's reference than its own is refused, by `bench check`
(which stores the references on its first run) and by `run` at session start (with the override
accept_cameras=true, recorded in the ledger).

The comparison is deliberately coarse: a 32 x 24 area-averaged colour thumbnail and its mean
absolute difference, blind to sensor noise and to objects moved on the table, not to a whole view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

THUMB = (24, 32)          # rows, columns of the identity thumbnail
REFERENCES = "references"


def thumbnail(img: np.ndarray) -> np.ndarray:
    """Area-averaged THUMB-sized float RGB."""
    h, w = img.shape[:2]
    rows = np.array_split(np.arange(h), THUMB[0])
    cols = np.array_split(np.arange(w), THUMB[1])
    f = img.astype(np.float32)
    return np.array([[f[r[0]:r[-1] + 1, c[0]:c[-1] + 1].reshape(-1, f.shape[2]).mean(axis=0) for c in cols]
                     for r in rows])


def distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(np.abs(thumbnail(a) - thumbnail(b))))


def references_dir(setting: Path | None, robot_id: str) -> Path:
    """Where a bench's reference pictures live: `camera_references`, else bench-checks/references/<robot_id>/
    in the current (lab) folder."""
    return setting if setting is not None else Path.cwd() / "bench-checks" / REFERENCES / robot_id


def stored_references(folder: Path, names: Iterable[str]) -> dict[str, Path]:
    """The reference picture of each camera that has one."""
    return {n: folder / f"{n}.png" for n in names if (folder / f"{n}.png").is_file()}


def read_png(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def distances(views: Mapping[str, np.ndarray], refs: Mapping[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """camera -> reference camera -> difference (references of another size are not compared)."""
    return {n: {r: round(distance(img, ref), 2) for r, ref in refs.items() if ref.shape == img.shape}
            for n, img in views.items()}


def identity_problem(name: str, d: Mapping[str, float], nearest_of: Mapping[str, str]) -> str:
    """Why camera `name` is not itself ("" when its view is nearest its own reference, or it has none)."""
    if name not in d or min(d, key=lambda r: d[r]) == name:
        return ""
    other = min(d, key=lambda r: d[r])
    what = f"{name} and {other} look swapped" if nearest_of.get(other) == name else f"'{name}' shows the view of '{other}'"
    return (f"camera identity: {what}: camera '{name}' is nearer the reference picture of '{other}' "
            f"(difference {d[other]:g}) than its own ({d[name]:g}); check cameras.{name}.index_or_path "
            "(prefer /dev/v4l/by-id/ paths), or if the cameras were moved on purpose, store the new views "
            "with `spabench bench check ... accept_cameras=true`")


def identity_problems(views: Mapping[str, np.ndarray], refs: Mapping[str, np.ndarray]) -> dict[str, str]:
    """camera -> why it is not itself, for every camera that is not."""
    d = distances(views, refs)
    nearest = {n: min(x, key=lambda r: x[r]) for n, x in d.items() if x}
    found = {n: identity_problem(n, x, nearest) for n, x in d.items()}
    return {n: p for n, p in found.items() if p}
