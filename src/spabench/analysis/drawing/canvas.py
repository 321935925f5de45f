"""A figure as a short list of primitives in points, shared by the PNG, PDF and SVG writers.

The report's figures need four things: filled rectangles (optionally hatched), straight lines,
and text, horizontal or turned 90 degrees. Describing them once, in points with y growing
downwards, lets three small writers turn the same list into each format, and lets the canvas know
the exact extent of every item (text from the font's advances), so the page is sized to its
content and nothing can be clipped.

Every item carries a `role` ("bar", "count", "row_label", ...) so the figures' rules (a label on
every bar, visible 0% bars, normalised shares) are checked on the drawing itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spabench.analysis.drawing import fonts

HATCH_PITCH = 4.32  # points between hatch diagonals along a horizontal (18 px at 300 dpi: the tile repeats exactly)


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str | None
    edge: str | None = None
    linewidth: float = 0.0
    hatch: str | None = None   # colour of '/' diagonals drawn inside the rectangle
    role: str = ""
    data: tuple = ()           # what the rectangle shows (e.g. (rate, k, n)), for checks


@dataclass(frozen=True)
class Line:
    points: tuple[tuple[float, float], ...]
    color: str
    width: float
    role: str = ""


@dataclass(frozen=True)
class Text:
    """`x, y` is the anchor: `align` along the writing direction (start/middle/end) and `valign`
    across it (baseline, center = half the cap height above the baseline, top, bottom). With
    `rotation=90` the text reads upwards."""
    x: float
    y: float
    text: str
    size: float
    color: str = "#000000"
    weight: str = "normal"
    align: str = "start"
    valign: str = "baseline"
    rotation: int = 0
    role: str = ""

    def origin(self) -> tuple[float, float]:
        """The baseline start point, in canvas coordinates."""
        face = fonts.face(self.weight)
        along = {"start": 0.0, "middle": 0.5, "end": 1.0}[self.align] * face.width(self.text, self.size)
        across = {"baseline": 0.0, "center": face.em(face.cap_height, self.size) / 2,
                  "top": face.em(face.ascent, self.size), "bottom": -face.em(face.descent, self.size)}[self.valign]
        if self.rotation == 0:
            return self.x - along, self.y + across
        return self.x + across, self.y + along

    def extent(self) -> tuple[float, float, float, float]:
        """(x0, y0, x1, y1) of the text's box: advance width by ascent + descent."""
        face = fonts.face(self.weight)
        bx, by = self.origin()
        width = face.width(self.text, self.size)
        up, down = face.em(face.ascent, self.size), face.em(face.descent, self.size)
        if self.rotation == 0:
            return bx, by - up, bx + width, by + down
        return bx - up, by - width, bx + down, by


@dataclass
class Canvas:
    """Primitives in drawing order; `bounds()` is the union of their extents."""
    items: list = field(default_factory=list)
    pad: float = 3.6   # points of white around the content (0.05 in)

    def rect(self, x, y, w, h, fill, edge=None, linewidth=0.0, hatch=None, role="", data=()) -> Rect:
        item = Rect(float(x), float(y), float(w), float(h), fill, edge, float(linewidth), hatch, role, tuple(data))
        self.items.append(item)
        return item

    def line(self, points, color, width, role="") -> Line:
        item = Line(tuple((float(x), float(y)) for x, y in points), color, float(width), role)
        self.items.append(item)
        return item

    def text(self, x, y, text, size, **style) -> Text:
        item = Text(float(x), float(y), str(text), float(size), **style)
        self.items.append(item)
        return item

    def of_role(self, role: str) -> list:
        return [item for item in self.items if item.role == role]

    def bounds(self) -> tuple[float, float, float, float]:
        """(x0, y0, x1, y1) of everything drawn, padded."""
        x0 = y0 = float("inf")
        x1 = y1 = float("-inf")
        for item in self.items:
            if isinstance(item, Rect):
                half = item.linewidth / 2
                box = (item.x - half, item.y - half, item.x + item.w + half, item.y + item.h + half)
            elif isinstance(item, Line):
                half = item.width / 2
                xs, ys = [p[0] for p in item.points], [p[1] for p in item.points]
                box = (min(xs) - half, min(ys) - half, max(xs) + half, max(ys) + half)
            else:
                box = item.extent()
            x0, y0, x1, y1 = min(x0, box[0]), min(y0, box[1]), max(x1, box[2]), max(y1, box[3])
        if x0 == float("inf"):
            return 0.0, 0.0, 2 * self.pad, 2 * self.pad
        return x0 - self.pad, y0 - self.pad, x1 + self.pad, y1 + self.pad

    def page(self) -> tuple[float, float, float, float]:
        """(dx, dy, width, height): the shift that puts the bounds at the origin, and the page size."""
        x0, y0, x1, y1 = self.bounds()
        return -x0, -y0, x1 - x0, y1 - y0


def number(value: float, places: int) -> str:
    """A coordinate for a vector format: `places` decimals, trailing zeros dropped, never '-0'."""
    text = f"{value:.{places}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def hex_rgb(color: str) -> tuple[int, int, int]:
    """'#RRGGBB' (or 'white'/'black') -> 0-255 channels."""
    named = {"white": "#FFFFFF", "black": "#000000"}
    color = named.get(color, color)
    if len(color) != 7 or color[0] != "#":
        raise ValueError(f"colour {color!r}: expected #RRGGBB")
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)
