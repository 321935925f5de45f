"""A canvas as a PNG raster (300 dpi by default) drawn with Pillow.

Everything in the report's figures is axis-aligned except hatching and text, so rectangles and
lines are snapped to whole pixels (crisp edges, no anti-aliasing needed); the hatch is one
anti-aliased tile (drawn at 4x and reduced) repeated inside each hatched bar, aligned to the page
like the PDF's and SVG's; text is rasterised by FreeType from the same font file the layout
measured.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from spabench.analysis.drawing import fonts
from spabench.analysis.drawing.canvas import HATCH_PITCH, Canvas, Line, Rect, Text, hex_rgb

SUPERSAMPLE = 4


@lru_cache(maxsize=64)
def _font(weight: str, pixels: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(fonts.face(weight).path), pixels)


@lru_cache(maxsize=8)
def _hatch_tile(scale: float, width_pt: float = 0.6) -> tuple[Image.Image, int]:
    """An 'L' mask of one hatch period (the '/' line x + y = pitch) and its size in pixels."""
    period = max(2, round(HATCH_PITCH * scale))
    big = period * SUPERSAMPLE
    tile = Image.new("L", (big, big), 0)
    draw = ImageDraw.Draw(tile)
    stroke = max(1, round(width_pt * scale * SUPERSAMPLE))
    for shift in (-big, 0, big):  # the diagonal and its neighbours, so the tile wraps seamlessly
        draw.line([(shift, big), (shift + big, 0)], fill=255, width=stroke)
    return tile.resize((period, period), Image.Resampling.BOX), period


def _box(x0: float, y0: float, x1: float, y1: float, scale: float) -> tuple[int, int, int, int]:
    """Pixel box [left, top, right, bottom) of a rectangle in points, at least one pixel each way."""
    left, top = round(x0 * scale), round(y0 * scale)
    right, bottom = max(round(x1 * scale), left + 1), max(round(y1 * scale), top + 1)
    return left, top, right, bottom


def _fill(image: Image.Image, box: tuple[int, int, int, int], color) -> None:
    image.paste(color, box)


def _stroke_rect(image, box, width_px: int, color) -> None:
    left, top, right, bottom = box
    w = max(1, width_px)
    half = w // 2
    for edge in ((left - half, top - half, right + w - half, top - half + w),
                 (left - half, bottom - half, right + w - half, bottom - half + w),
                 (left - half, top - half, left - half + w, bottom + w - half),
                 (right - half, top - half, right - half + w, bottom + w - half)):
        image.paste(color, edge)


def _hatch(image: Image.Image, box, color, scale: float) -> None:
    tile, period = _hatch_tile(scale)
    left, top, right, bottom = box
    if right <= left or bottom <= top:
        return
    mask = Image.new("L", (right - left, bottom - top), 0)
    # tiles aligned to the page grid: the tile's diagonal is x + y = pitch, repeated every period
    start_x, start_y = -(left % period), -(top % period)
    for ty in range(start_y, bottom - top, period):
        for tx in range(start_x, right - left, period):
            mask.paste(tile, (tx, ty))
    image.paste(color, box, mask)


def _text(image: Image.Image, item: Text, dx: float, dy: float, scale: float) -> None:
    pixels = max(1, round(item.size * scale))
    font = _font(item.weight, pixels)
    bx, by = item.origin()
    color = hex_rgb(item.color)
    if item.rotation == 0:
        ImageDraw.Draw(image).text(((bx + dx) * scale, (by + dy) * scale), item.text, font=font, fill=color,
                                   anchor="ls")
        return
    # upright in a scratch mask, turned a quarter to read upwards, pasted with the text's colour
    left, top, right, bottom = font.getbbox(item.text, anchor="ls")
    margin = 2
    mask = Image.new("L", (right - left + 2 * margin, bottom - top + 2 * margin), 0)
    ImageDraw.Draw(mask).text((margin - left, margin - top), item.text, font=font, fill=255, anchor="ls")
    turned = mask.transpose(Image.Transpose.ROTATE_90)
    # the baseline start (margin - left, margin - top) of the mask lands on the text's origin
    ox, oy = margin - left, margin - top
    # after ROTATE_90 (counter-clockwise) a mask point (u, v) moves to (v, W - 1 - u)
    px = round((bx + dx) * scale) - oy
    py = round((by + dy) * scale) - (mask.width - 1 - ox)
    image.paste(color, (px, py, px + turned.width, py + turned.height), turned)


def to_png(canvas: Canvas, path: Path, dpi: int = 300) -> None:
    scale = dpi / 72
    dx, dy, width, height = canvas.page()
    image = Image.new("RGB", (math.ceil(width * scale), math.ceil(height * scale)), (255, 255, 255))
    for item in canvas.items:
        if isinstance(item, Rect):
            box = _box(item.x + dx, item.y + dy, item.x + item.w + dx, item.y + item.h + dy, scale)
            if item.fill:
                _fill(image, box, hex_rgb(item.fill))
            if item.hatch:
                _hatch(image, box, hex_rgb(item.hatch), scale)
            if item.edge and item.linewidth > 0:
                _stroke_rect(image, box, round(item.linewidth * scale), hex_rgb(item.edge))
        elif isinstance(item, Line):
            color, w = hex_rgb(item.color), max(1, round(item.width * scale))
            for (x0, y0), (x1, y1) in zip(item.points, item.points[1:]):
                if x0 == x1 or y0 == y1:  # axis-aligned: a crisp pixel-snapped bar of the line's width
                    half = w / 2 / scale
                    if x0 == x1:
                        box = _box(x0 + dx - half, min(y0, y1) + dy, x0 + dx + half, max(y0, y1) + dy, scale)
                    else:
                        box = _box(min(x0, x1) + dx, y0 + dy - half, max(x0, x1) + dx, y0 + dy + half, scale)
                    _fill(image, box, color)
                else:
                    ImageDraw.Draw(image).line([((x0 + dx) * scale, (y0 + dy) * scale),
                                                ((x1 + dx) * scale, (y1 + dy) * scale)], fill=color, width=w)
        else:
            _text(image, item, dx, dy, scale)
    image.save(path, format="png", compress_level=3, dpi=(dpi, dpi))
