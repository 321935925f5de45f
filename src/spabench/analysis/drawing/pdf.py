"""A canvas as a one-page PDF with its fonts embedded as TrueType subsets.

Text is drawn with Type 0 / CIDFontType2 fonts (Identity-H, glyph ids as codes) whose FontFile2 is a
subset of DejaVu Sans holding the glyphs used, plus a ToUnicode map so the text can be searched and
copied. No dates or producer strings: the same canvas always gives the same bytes.
"""

from __future__ import annotations

import hashlib
import math
import zlib

from spabench.analysis.drawing import fonts
from spabench.analysis.drawing.canvas import HATCH_PITCH, Canvas, Line, Rect, Text, hex_rgb, number


def _n(value: float) -> str:
    return number(value, 3)


def _color(color: str, op: str) -> str:
    r, g, b = hex_rgb(color)
    return f"{_n(r / 255)} {_n(g / 255)} {_n(b / 255)} {op}"


def hatch_segments(x: float, y: float, w: float, h: float) -> list[tuple[float, float, float, float]]:
    """The '/' diagonals x + y = k * HATCH_PITCH (page coordinates, y down) inside a rectangle, as
    (x_a, y_a, x_b, y_b): the same lines the SVG pattern and the PNG tile draw."""
    segments = []
    k = math.ceil((x + y) / HATCH_PITCH)
    while k * HATCH_PITCH <= x + w + y + h:
        c = k * HATCH_PITCH
        x_a, x_b = max(x, c - (y + h)), min(x + w, c - y)
        if x_b > x_a:
            segments.append((x_a, c - x_a, x_b, c - x_b))
        k += 1
    return segments


class _Fonts:
    """The glyphs used per weight, and their PDF resource names."""

    def __init__(self):
        self.used: dict[str, dict[int, str]] = {}

    def encode(self, item: Text) -> tuple[str, str]:
        face = fonts.face(item.weight)
        used = self.used.setdefault(item.weight, {})
        codes = []
        for char in item.text:
            gid = face.glyph(char)
            used.setdefault(gid, char)
            codes.append(f"{gid:04X}")
        return ("F" + item.weight[0].upper()), "".join(codes)


def _content(canvas: Canvas, dx: float, dy: float, height: float, used: _Fonts) -> bytes:
    ops: list[str] = []

    def y_up(y: float) -> float:
        return height - (y + dy)

    for item in canvas.items:
        if isinstance(item, Rect):
            x, y0 = item.x + dx, y_up(item.y + item.h)
            if item.fill:
                ops.append(f"{_color(item.fill, 'rg')} {_n(x)} {_n(y0)} {_n(item.w)} {_n(item.h)} re f")
            if item.hatch:
                lines = hatch_segments(item.x + dx, item.y + dy, item.w, item.h)
                ops.append(f"q {_n(x)} {_n(y0)} {_n(item.w)} {_n(item.h)} re W n {_color(item.hatch, 'RG')} 0.6 w")
                ops += [f"{_n(xa)} {_n(height - ya)} m {_n(xb)} {_n(height - yb)} l" for xa, ya, xb, yb in lines]
                ops.append("S Q")
            if item.edge and item.linewidth > 0:
                ops.append(f"{_color(item.edge, 'RG')} {_n(item.linewidth)} w {_n(x)} {_n(y0)} {_n(item.w)} "
                           f"{_n(item.h)} re S")
        elif isinstance(item, Line):
            path = " ".join(f"{_n(px + dx)} {_n(y_up(py))} {'m' if i == 0 else 'l'}"
                            for i, (px, py) in enumerate(item.points))
            ops.append(f"{_color(item.color, 'RG')} {_n(item.width)} w {path} S")
        else:
            name, codes = used.encode(item)
            bx, by = item.origin()
            bx, by = bx + dx, y_up(by)
            matrix = "1 0 0 1" if item.rotation == 0 else "0 1 -1 0"
            ops.append(f"BT {_color(item.color, 'rg')} /{name} {_n(item.size)} Tf {matrix} {_n(bx)} {_n(by)} Tm "
                       f"<{codes}> Tj ET")
    return "\n".join(ops).encode("ascii")


def _to_unicode(used: dict[int, str]) -> bytes:
    entries = sorted(used.items())
    blocks = []
    for start in range(0, len(entries), 100):
        chunk = entries[start:start + 100]
        lines = "\n".join(f"<{gid:04X}> <{char.encode('utf-16-be').hex().upper()}>" for gid, char in chunk)
        blocks.append(f"{len(chunk)} beginbfchar\n{lines}\nendbfchar")
    return ("/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n"
            "/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
            "/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
            "1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n" + "\n".join(blocks)
            + "\nendcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n").encode("ascii")


def _subset_tag(weight: str, gids) -> str:
    """Six capital letters naming the subset (PDF convention: TAG+FontName), fixed by its glyphs."""
    digest = hashlib.sha1((weight + ",".join(map(str, sorted(gids)))).encode()).digest()
    return "".join(chr(ord("A") + b % 26) for b in digest[:6])


def to_pdf(canvas: Canvas, title: str = "") -> bytes:
    dx, dy, width, height = canvas.page()
    used = _Fonts()
    content = zlib.compress(_content(canvas, dx, dy, height, used), 6)
    objects: list[bytes] = []

    def add(body: bytes | str) -> int:
        objects.append(body.encode("latin-1") if isinstance(body, str) else body)
        return len(objects)

    def stream(data: bytes, extra: str = "") -> int:
        return add(f"<< /Length {len(data)} /Filter /FlateDecode{extra} >>\nstream\n".encode() + data
                   + b"\nendstream")

    font_refs = []
    for weight, glyphs in sorted(used.used.items()):
        face = fonts.face(weight)
        scale = 1000 / face.units_per_em
        program, length = fonts.compressed_subset(weight, glyphs)
        file_ref = stream(program, f" /Length1 {length}")
        name = f"{_subset_tag(weight, glyphs)}+{face.postscript_name}"
        x0, y0, x1, y1 = (round(v * scale) for v in face.bbox)
        descriptor = add(f"<< /Type /FontDescriptor /FontName /{name} /Flags 32 /FontBBox [{x0} {y0} {x1} {y1}] "
                         f"/ItalicAngle 0 /Ascent {round(face.ascent * scale)} /Descent {-round(face.descent * scale)} "
                         f"/CapHeight {round(face.cap_height * scale)} /StemV {140 if weight == 'bold' else 80} "
                         f"/FontFile2 {file_ref} 0 R >>")
        widths = " ".join(f"{gid} [{round(face.advance(gid) * scale)}]" for gid in sorted(glyphs))
        cid = add(f"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /{name} /CIDSystemInfo << /Registry (Adobe) "
                  f"/Ordering (Identity) /Supplement 0 >> /FontDescriptor {descriptor} 0 R /CIDToGIDMap /Identity "
                  f"/DW 1000 /W [{widths}] >>")
        unicode_ref = stream(zlib.compress(_to_unicode(glyphs), 6))
        font_refs.append((f"F{weight[0].upper()}",
                          add(f"<< /Type /Font /Subtype /Type0 /BaseFont /{name} /Encoding /Identity-H "
                              f"/DescendantFonts [{cid} 0 R] /ToUnicode {unicode_ref} 0 R >>")))
    content_ref = stream(content)
    resources = " ".join(f"/{name} {ref} 0 R" for name, ref in font_refs)
    # pages and catalog come last so their numbers are known: page = n+1, pages = n+2, catalog = n+3
    n = len(objects)
    add(f"<< /Type /Page /Parent {n + 2} 0 R /MediaBox [0 0 {_n(width)} {_n(height)}] "
        f"/Resources << /Font << {resources} >> >> /Contents {content_ref} 0 R >>")
    add(f"<< /Type /Pages /Kids [{n + 1} 0 R] /Count 1 >>")
    add(f"<< /Type /Catalog /Pages {n + 2} 0 R >>")
    info = add("<< /Title " + _pdf_string(title) + " >>") if title else None
    out = bytearray(b"%PDF-1.6\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for index, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{index} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    trailer = f"<< /Size {len(objects) + 1} /Root {n + 3} 0 R" + (f" /Info {info} 0 R" if info else "") + " >>"
    out += f"trailer\n{trailer}\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def _pdf_string(text: str) -> str:
    """A PDF text string: UTF-16BE with a byte-order mark, as hex (no escaping pitfalls)."""
    return "<FEFF" + text.encode("utf-16-be").hex().upper() + ">"
