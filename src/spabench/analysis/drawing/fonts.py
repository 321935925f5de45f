"""The figures' typeface, read straight from its TrueType file: metrics for layout, and subsets to embed.

One face gives every format the same glyphs and advance widths: the layout measures text with the
font's own `hmtx` advances, the PDF embeds a TrueType subset of exactly the glyphs drawn (journals
ask for embedded TrueType/Type 1 fonts, not Type 3), and the PNG rasterises the same file.

The subset keeps the original glyph ids (unused glyphs become empty and the id space is cut after
the highest one used), so text can be written as glyph ids with an identity map and no table needs
renumbering; composite glyphs bring their components along.
"""

from __future__ import annotations

import importlib.util
import struct
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

FAMILY = "DejaVu Sans"
FILES = {"normal": "DejaVuSans.ttf", "bold": "DejaVuSans-Bold.ttf"}
# tables a PDF viewer needs from an embedded TrueType program (ISO 32000-1, 9.9), plus OS/2 and post
KEPT_TABLES = (b"OS/2", b"cvt ", b"fpgm", b"glyf", b"head", b"hhea", b"hmtx", b"loca", b"maxp", b"post",
               b"prep")


class FontError(RuntimeError):
    """The figures' font file is missing or is not a TrueType font this reader understands."""


def font_dir() -> Path:
    """matplotlib's bundled copy of DejaVu Sans: present wherever the package is installed, so every
    machine draws with the same file (found without importing matplotlib)."""
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or not spec.submodule_search_locations:
        raise FontError("the figures' font (DejaVu Sans) ships with matplotlib, which is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "mpl-data" / "fonts" / "ttf"


@dataclass
class Face:
    """One TrueType face: character map, advances and vertical metrics in font units."""
    path: Path
    data: bytes
    tables: dict[bytes, tuple[int, int]]   # tag -> (offset, length)
    units_per_em: int
    ascent: int
    descent: int                           # positive: depth below the baseline
    cap_height: int
    bbox: tuple[int, int, int, int]
    advances: list[int]
    cmap: dict[int, int]
    num_glyphs: int
    long_loca: bool
    postscript_name: str
    _loca: list[int] | None = field(default=None, repr=False)

    def table(self, tag: bytes) -> bytes:
        offset, length = self.tables[tag]
        return self.data[offset:offset + length]

    def glyph(self, char: str) -> int:
        return self.cmap.get(ord(char), 0)   # 0 = .notdef: a character the face lacks draws as a box

    def glyphs(self, text: str) -> list[int]:
        return [self.cmap.get(ord(c), 0) for c in text]

    def advance(self, gid: int) -> int:
        return self.advances[gid] if gid < len(self.advances) else self.advances[-1]

    def width(self, text: str, size: float) -> float:
        """Advance width of `text` at `size` points, in points (no kerning: every format lays out
        glyph by glyph with the same advances)."""
        cmap, advances = self.cmap, self.advances
        return sum(advances[cmap.get(ord(c), 0)] for c in text) * size / self.units_per_em

    def em(self, units: float, size: float) -> float:
        return units * size / self.units_per_em

    # ------------------------------------------------------------ subsetting

    def loca(self) -> list[int]:
        if self._loca is None:
            raw = self.table(b"loca")
            if self.long_loca:
                self._loca = list(struct.unpack(f">{self.num_glyphs + 1}I", raw[:4 * (self.num_glyphs + 1)]))
            else:
                self._loca = [2 * v for v in struct.unpack(f">{self.num_glyphs + 1}H", raw[:2 * (self.num_glyphs + 1)])]
        return self._loca

    def closure(self, gids) -> list[int]:
        """The glyph ids with every component of a composite glyph, and .notdef."""
        glyf_offset = self.tables[b"glyf"][0]
        loca, data = self.loca(), self.data
        seen, todo = {0}, list(gids)
        while todo:
            gid = todo.pop()
            if gid in seen and gid != 0:
                continue
            seen.add(gid)
            start, end = loca[gid], loca[gid + 1]
            if end - start < 10 or struct.unpack_from(">h", data, glyf_offset + start)[0] >= 0:
                continue
            pos = glyf_offset + start + 10
            while True:
                flags, component = struct.unpack_from(">HH", data, pos)
                todo.append(component)
                pos += 4 + (4 if flags & 0x1 else 2)
                pos += 2 if flags & 0x8 else 4 if flags & 0x40 else 8 if flags & 0x80 else 0
                if not flags & 0x20:
                    break
        return sorted(seen)

    def subset(self, gids) -> bytes:
        """A TrueType program holding only `gids` (and their components), ids unchanged."""
        keep = self.closure(gids)
        count = keep[-1] + 1
        loca, glyf = self.loca(), self.table(b"glyf")
        wanted = set(keep)
        pieces, offsets, position = [], [], 0
        for gid in range(count):
            offsets.append(position)
            if gid in wanted:
                piece = glyf[loca[gid]:loca[gid + 1]]
                piece += b"\0" * (-len(piece) % 4)
                pieces.append(piece)
                position += len(piece)
        offsets.append(position)
        hhea = bytearray(self.table(b"hhea"))
        metrics = min(struct.unpack_from(">H", hhea, 34)[0], count)
        struct.pack_into(">H", hhea, 34, metrics)
        # the kept (advance, lsb) pairs, then the lsb-only entries of ids past the original pairs
        hmtx, pairs = self.table(b"hmtx"), len(self.advances)
        hmtx = hmtx[:4 * metrics] + hmtx[4 * pairs:4 * pairs + 2 * (count - metrics)]
        maxp = bytearray(self.table(b"maxp"))
        struct.pack_into(">H", maxp, 4, count)
        head = bytearray(self.table(b"head"))
        struct.pack_into(">I", head, 8, 0)      # checkSumAdjustment, set below
        struct.pack_into(">h", head, 50, 1)     # long loca
        post = bytearray(self.table(b"post")[:32])
        struct.pack_into(">I", post, 0, 0x00030000)  # version 3: no glyph names
        tables = {b"glyf": b"".join(pieces), b"loca": struct.pack(f">{len(offsets)}I", *offsets),
                  b"hhea": bytes(hhea), b"hmtx": hmtx, b"maxp": bytes(maxp), b"head": bytes(head),
                  b"post": bytes(post)}
        for tag in KEPT_TABLES:
            if tag not in tables and tag in self.tables:
                tables[tag] = self.table(tag)
        return _sfnt(tables)


def _checksum(data: bytes) -> int:
    data += b"\0" * (-len(data) % 4)
    return sum(struct.unpack(f">{len(data) // 4}I", data)) & 0xFFFFFFFF


def _sfnt(tables: dict[bytes, bytes]) -> bytes:
    """An sfnt file from its tables: directory, 4-byte aligned tables, head's checkSumAdjustment."""
    tags = sorted(tables)
    n = len(tags)
    power = 1 << (n.bit_length() - 1)
    header = struct.pack(">IHHHH", 0x00010000, n, 16 * power, power.bit_length() - 1, 16 * (n - power))
    offset = 12 + 16 * n
    directory, body = [], []
    for tag in tags:
        data = tables[tag]
        directory.append(struct.pack(">4sIII", tag, _checksum(data), offset, len(data)))
        padded = data + b"\0" * (-len(data) % 4)
        body.append(padded)
        offset += len(padded)
    font = bytearray(header + b"".join(directory) + b"".join(body))
    head_at = 12 + 16 * n + sum(len(b) for t, b in zip(tags, body) if t < b"head")
    struct.pack_into(">I", font, head_at + 8, (0xB1B0AFBA - _checksum(bytes(font))) & 0xFFFFFFFF)
    return bytes(font)


def _parse_cmap(raw: bytes) -> dict[int, int]:
    """Unicode -> glyph id from the best Unicode subtable (format 12, else format 4)."""
    count = struct.unpack_from(">H", raw, 2)[0]
    subtables = {}
    for i in range(count):
        platform, encoding, offset = struct.unpack_from(">HHI", raw, 4 + 8 * i)
        fmt = struct.unpack_from(">H", raw, offset)[0]
        if (platform, encoding) in ((3, 10), (0, 4), (0, 6)) and fmt == 12:
            subtables.setdefault(12, offset)
        elif (platform, encoding) in ((3, 1), (0, 3), (0, 4), (0, 6)) and fmt == 4:
            subtables.setdefault(4, offset)
    mapping: dict[int, int] = {}
    if 12 in subtables:
        offset = subtables[12]
        groups = struct.unpack_from(">I", raw, offset + 12)[0]
        for g in range(groups):
            start, end, first = struct.unpack_from(">III", raw, offset + 16 + 12 * g)
            for code in range(start, end + 1):
                mapping[code] = first + code - start
        return mapping
    if 4 not in subtables:
        raise FontError("no Unicode character map (cmap format 4 or 12)")
    offset = subtables[4]
    segments = struct.unpack_from(">H", raw, offset + 6)[0] // 2
    ends = struct.unpack_from(f">{segments}H", raw, offset + 14)
    starts = struct.unpack_from(f">{segments}H", raw, offset + 16 + 2 * segments)
    deltas = struct.unpack_from(f">{segments}h", raw, offset + 16 + 4 * segments)
    range_at = offset + 16 + 6 * segments
    ranges = struct.unpack_from(f">{segments}H", raw, range_at)
    for i, (start, end, delta, rng) in enumerate(zip(starts, ends, deltas, ranges)):
        for code in range(start, end + 1):
            if code == 0xFFFF:
                continue
            if rng == 0:
                gid = (code + delta) & 0xFFFF
            else:
                at = range_at + 2 * i + rng + 2 * (code - start)
                gid = struct.unpack_from(">H", raw, at)[0]
                gid = (gid + delta) & 0xFFFF if gid else 0
            if gid:
                mapping[code] = gid
    return mapping


def _postscript_name(face_path: Path, raw: bytes | None) -> str:
    if raw:
        count, strings = struct.unpack_from(">HH", raw, 2)
        for i in range(count):
            platform, encoding, _, name_id, length, offset = struct.unpack_from(">6H", raw, 6 + 12 * i)
            if name_id == 6:
                text = raw[strings + offset:strings + offset + length]
                return text.decode("utf-16-be" if platform in (0, 3) else "latin-1")
    return face_path.stem


def read_face(path: Path) -> Face:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise FontError(f"cannot read the figures' font {path}: {error.strerror}") from None
    try:
        version, count = struct.unpack_from(">IH", data, 0)
        if version not in (0x00010000, 0x74727565):
            raise FontError(f"{path} is not a TrueType font (sfnt version {version:#x})")
        tables = {}
        for i in range(count):
            tag, _, offset, length = struct.unpack_from(">4sIII", data, 12 + 16 * i)
            tables[tag] = (offset, length)

        def table(tag: bytes) -> bytes:
            offset, length = tables[tag]
            return data[offset:offset + length]

        head, hhea, maxp = table(b"head"), table(b"hhea"), table(b"maxp")
        units = struct.unpack_from(">H", head, 18)[0]
        bbox = struct.unpack_from(">4h", head, 36)
        long_loca = struct.unpack_from(">h", head, 50)[0] == 1
        ascent, descent = struct.unpack_from(">hh", hhea, 4)
        metrics = struct.unpack_from(">H", hhea, 34)[0]
        glyphs = struct.unpack_from(">H", maxp, 4)[0]
        advances = list(struct.unpack_from(f">{2 * metrics}H", table(b"hmtx"))[0::2])
        os2 = table(b"OS/2") if b"OS/2" in tables else b""
        cap = struct.unpack_from(">h", os2, 88)[0] if len(os2) >= 90 else int(0.72 * units)
        return Face(Path(path), data, tables, units, ascent, -descent, cap, tuple(bbox), advances,
                    _parse_cmap(table(b"cmap")), glyphs, long_loca,
                    _postscript_name(Path(path), table(b"name") if b"name" in tables else None))
    except (struct.error, KeyError) as error:
        raise FontError(f"{path}: not a TrueType font this reader understands ({error})") from None


@lru_cache(maxsize=None)
def face(weight: str = "normal") -> Face:
    """The figures' face of a weight ('normal' or 'bold'), read once per process."""
    if weight not in FILES:
        raise ValueError(f"font weight {weight!r}: allowed {', '.join(FILES)}")
    return read_face(font_dir() / FILES[weight])


def compressed_subset(weight: str, gids) -> tuple[bytes, int]:
    """(zlib-compressed subset program, its uncompressed length) for a PDF FontFile2 stream."""
    program = face(weight).subset(gids)
    return zlib.compress(program, 6), len(program)
