"""A rendered reference for every scene, drawn lazily once per scene into the campaign folder.

The real reference (spabench.operator.checklist) only exists after an evaluation's first attempt,
so the first placement had nothing to look at. This one exists from the specification alone: the
twin's overhead and middle views of the scene (spabench.sim.reference) and the top-down placement
diagram (spabench.operator.placement), plus one sheet with all three for a desktop viewer. Drawn the
first time it is asked for and kept in DIR/references/rendered/, named by scene id and a digest of
everything drawn, so an edited specification or bench geometry draws anew. A session whose operator
places scenes asks ahead, in a background process (spabench.operator.render_ahead), so that a person
placing a new scene finds it drawn; asking here when it is not is the fallback. Without MuJoCo (or
when the twin cannot render here) the diagram is still drawn and `problem` says why the views are
missing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spabench.atomic import write_atomically
from spabench.operator.checklist import REFERENCE_DIR
from spabench.operator.placement import draw_placement

if TYPE_CHECKING:
    from spabench.operator.base import SessionView

log = logging.getLogger(__name__)

RENDERED_DIR = "rendered"            # under DIR/references/
VIEWS: tuple[str, ...] = ("overhead", "middle")
REVISION = 1                         # bump when the drawing changes: cached files are drawn anew
VIEWS_PENDING = "the twin's views are still being drawn in the background; they show once drawn"


@dataclass(frozen=True)
class RenderedReference:
    """One scene's rendered reference: the files, and why the twin's views are missing if they are."""

    scene_id: str
    placement: Path                                   # the top-down placement diagram
    sheet: Path                                       # diagram and views in one image (desktop viewer)
    views: dict[str, Path] = field(default_factory=dict)   # camera -> the twin's rendering
    problem: str = ""
    drawn: bool = False                               # this call drew it (it was not in the cache)

    def drawing_views(self) -> bool:
        """The twin's views are being drawn in the background (views=False found them missing)."""
        return self.problem == VIEWS_PENDING

    def files(self) -> dict[str, Path]:
        """{"placement": ..., "overhead": ..., "middle": ...} of what exists."""
        return {"placement": self.placement, **self.views}


def drawing_ahead(session: SessionView) -> bool:
    """True while the session's background worker (spabench.operator.render_ahead) draws the twin's
    views: an operator then asks for the diagram only (`views=False`) and never renders them itself."""
    ahead = session.render_ahead
    return ahead is not None and bool(ahead.alive)


def _digest(scene: Any, objects: Mapping[str, Any], geometry: Any, home: Mapping[str, float] | None) -> str:
    used = {p.object_id: objects.get(p.object_id) for p in scene.objects}
    text = repr((REVISION, scene, sorted(used.items()), geometry, sorted((home or {}).items())))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _write_png(path: Path, rgb: Any) -> None:
    from PIL import Image

    write_atomically(path, lambda tmp: Image.fromarray(rgb).save(tmp, format="PNG"))


def _sheet(placement: Path, views: dict[str, Path], out: Path) -> None:
    """The diagram on the left, the twin's views stacked on the right (each labelled)."""
    from PIL import Image, ImageDraw

    diagram = Image.open(placement).convert("RGB")
    tiles = []
    for name, path in views.items():
        img = Image.open(path).convert("RGB")
        img.thumbnail((diagram.height * 4 // 6, diagram.height // 2))
        ImageDraw.Draw(img).text((8, 6), f"{name} (twin, from the specification)", fill=(255, 255, 255))
        tiles.append(img)
    width = diagram.width + max((t.width for t in tiles), default=0)
    sheet = Image.new("RGB", (width, max(diagram.height, sum(t.height for t in tiles))), "white")
    sheet.paste(diagram, (0, 0))
    y = 0
    for tile in tiles:
        sheet.paste(tile, (diagram.width, y))
        y += tile.height
    write_atomically(out, lambda tmp: sheet.save(tmp, format="PNG"))


def rendered_reference(campaign_dir: str | os.PathLike, suite: Any, scene: Any,
                       home: Mapping[str, float] | None = None, views: bool = True) -> RenderedReference:
    """The scene's rendered reference, drawn now if this campaign has not drawn it yet.

    `suite`: has `objects` and `geometry`; `home`: the bench's home pose (joint -> bench units), where
    the twin puts the arm. `views=False`: draw the placement diagram only (when missing) and leave
    the twin's views to the background worker (spabench.operator.render_ahead) that is drawing them:
    seconds of rendering are never spent while a person waits; `problem` then says they are coming
    (the sheet is where the worker will write them with the diagram)."""
    objects, geometry = suite.objects, suite.geometry
    folder = Path(campaign_dir) / REFERENCE_DIR / RENDERED_DIR
    stem = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', scene.scene_id)}-{_digest(scene, objects, geometry, home)}"
    paths = {name: folder / f"{stem}.{name}.png" for name in ("placement", "sheet", *VIEWS)}
    problem = ""
    drawn = not all(p.exists() for p in paths.values())
    if drawn:
        folder.mkdir(parents=True, exist_ok=True)
        if not paths["placement"].exists():
            draw_placement(scene, objects, geometry, paths["placement"])
        if not all(paths[v].exists() for v in VIEWS):
            if not views:
                return RenderedReference(scene.scene_id, paths["placement"], paths["sheet"],
                                         {v: paths[v] for v in VIEWS if paths[v].exists()}, VIEWS_PENDING, True)
            problem = _render_views(scene, objects, geometry, home, {v: paths[v] for v in VIEWS})
        if not problem or not paths["sheet"].exists():
            _sheet(paths["placement"], {v: paths[v] for v in VIEWS if paths[v].exists()}, paths["sheet"])
    return RenderedReference(scene.scene_id, paths["placement"], paths["sheet"],
                             {v: paths[v] for v in VIEWS if paths[v].exists()}, problem, drawn)


def _render_views(scene: Any, objects: Mapping[str, Any], geometry: Any, home: Mapping[str, float] | None,
                  out: dict[str, Path]) -> str:
    """Render the twin's views into `out`; "" when done, else why not (the diagram still serves)."""
    try:
        from spabench.sim.reference import render_scene
    except ImportError as exc:
        return f"the twin cannot render here ({exc}; install the sim extra: pip install -e '.[sim]')"
    try:
        frames = render_scene(scene, objects, geometry, views=tuple(out), home=home)
    except Exception as exc:  # no GL here, a scene the twin cannot build: the diagram still serves
        log.warning("the twin could not render scene %s: %s", scene.scene_id, exc)
        return f"the twin could not render this scene: {exc}"
    for name, rgb in frames.items():
        _write_png(out[name], rgb)
    return ""
