"""A canvas as SVG: rectangles, paths and text kept as text (searchable and editable).

Sizes are in points (the page is `width`pt x `height`pt with a viewBox in points). Text is placed
at its computed baseline start, so the layout does not depend on a viewer's support for
`dominant-baseline`; the font is named with narrower fallbacks, so a viewer without DejaVu Sans
draws labels no wider than the layout measured them.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from spabench.analysis.drawing import fonts
from spabench.analysis.drawing.canvas import HATCH_PITCH, Canvas, Line, Rect, number

FONT_STACK = f"'{fonts.FAMILY}', 'Bitstream Vera Sans', Arial, Helvetica, sans-serif"


def _n(value: float) -> str:
    return number(value, 2)


def to_svg(canvas: Canvas, title: str = "") -> str:
    dx, dy, width, height = canvas.page()
    patterns: dict[str, str] = {}
    body: list[str] = []
    for item in canvas.items:
        if isinstance(item, Rect):
            x, y = _n(item.x + dx), _n(item.y + dy)
            w, h = _n(item.w), _n(item.h)
            stroke = (f' stroke="{item.edge}" stroke-width="{_n(item.linewidth)}"'
                      if item.edge and item.linewidth > 0 else "")
            if item.fill:
                body.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{item.fill}"/>')
            if item.hatch:
                pid = patterns.setdefault(item.hatch, f"hatch{len(patterns)}")
                body.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="url(#{pid})"/>')
            if stroke:
                body.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="none"{stroke}/>')
        elif isinstance(item, Line):
            path = " ".join(f"{'M' if i == 0 else 'L'}{_n(px + dx)} {_n(py + dy)}"
                            for i, (px, py) in enumerate(item.points))
            body.append(f'<path d="{path}" fill="none" stroke="{item.color}" stroke-width="{_n(item.width)}"/>')
        else:
            bx, by = item.origin()
            bx, by = bx + dx, by + dy
            turn = f' transform="rotate(-90 {_n(bx)} {_n(by)})"' if item.rotation == 90 else ""
            bold = ' font-weight="bold"' if item.weight == "bold" else ""
            body.append(f'<text x="{_n(bx)}" y="{_n(by)}" font-size="{_n(item.size)}"{bold} '
                        f'fill="{item.color}"{turn}>{escape(item.text)}</text>')
    pitch = _n(HATCH_PITCH)
    defs = "".join(
        f'<pattern id="{pid}" patternUnits="userSpaceOnUse" width="{pitch}" height="{pitch}">'
        f'<path d="M0 {pitch} L{pitch} 0 M-1 1 L1 -1 M{_n(HATCH_PITCH - 1)} {_n(HATCH_PITCH + 1)} '
        f'L{_n(HATCH_PITCH + 1)} {_n(HATCH_PITCH - 1)}" stroke="{color}" stroke-width="0.6"/></pattern>'
        for color, pid in patterns.items())
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(width)}pt" height="{_n(height)}pt" '
            f'viewBox="0 0 {_n(width)} {_n(height)}" font-family={quoteattr(FONT_STACK)} '
            f'style="white-space:pre">')
    parts = ['<?xml version="1.0" encoding="UTF-8"?>', head]
    if title:
        parts.append(f"<title>{escape(title)}</title>")
    if defs:
        parts.append(f"<defs>{defs}</defs>")
    parts.append(f'<rect width="{_n(width)}" height="{_n(height)}" fill="#FFFFFF"/>')
    parts += body
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
