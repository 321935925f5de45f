"""report.html: the Markdown report as one self-contained page (figures inlined, no external URL).

The converter handles exactly the Markdown subset report.md is written in (headings, pipe tables,
bullet lists, paragraphs, images, **bold**, `code`, backslash escapes), so the page needs no
Markdown library. Images are replaced by data: URIs of the figure files, so the page opens offline
and can be mailed as one file.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping
from pathlib import Path

_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)]+)\)$")
_LINK = re.compile(r"\[(?P<text>[^\]]+)\]\((?P<href>[^)\s]+)\)")
_ESCAPED = re.compile(r"\\([\\`*{}\[\]()<>#|~$_!+\-.])")
_MIME = {".svg": "image/svg+xml", ".png": "image/png"}

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;max-width:1200px;
margin:2em auto;padding:0 1em;color:#1f2933;line-height:1.45}
h1,h2,h3{line-height:1.2} h2{border-bottom:1px solid #d9d9d9;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.86em;display:block;overflow-x:auto}
th,td{border:1px solid #d0d7de;padding:.25em .55em;text-align:left;white-space:nowrap}
th{background:#f3f4f6} tr:nth-child(even) td{background:#fafafa}
code{background:#f3f4f6;padding:0 .25em;border-radius:3px;font-size:.92em}
figure{margin:1.2em 0} figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.9em;color:#52606d}
"""


def _inline(text: str) -> str:
    """Inline Markdown -> HTML: escapes, `code`, **bold**, links to local files."""
    placeholders: list[str] = []

    def keep(fragment: str) -> str:
        placeholders.append(fragment)
        return f"\x00{len(placeholders) - 1}\x00"

    text = re.sub(r"`([^`]*)`", lambda m: keep(f"<code>{html.escape(m.group(1))}</code>"), text)
    text = _ESCAPED.sub(lambda m: keep(html.escape(m.group(1))), text)
    text = html.escape(text, quote=False)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    text = _LINK.sub(lambda m: f'<a href="{html.escape(m.group("href"))}">{m.group("text")}</a>', text)
    return re.sub("\x00(\\d+)\x00", lambda m: placeholders[int(m.group(1))], text)


def _cells(line: str) -> list[str]:
    """Split a pipe-table row, keeping escaped pipes inside cells."""
    body = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    return [c.strip().replace("\x01", "\\|") for c in body.replace("\\|", "\x01").split("|")]


def markdown_to_html(markdown: str, images: Mapping[str, Path], captions: Mapping[str, str] | None = None,
                     title: str = "Spa-Bench report") -> str:
    """The page for `markdown`; every image whose source is a key of `images` is inlined from that file.

    An image whose file is not in `images` raises ValueError: the page must not point outside itself.
    """
    captions = captions or {}
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(title)}</title>",
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<style>{STYLE}</style></head><body>"]
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        heading = re.match(r"^(#{1,6})\s+(.*)$", stripped)
        image = _IMAGE.match(stripped)
        if heading:
            level = len(heading.group(1))
            anchor = re.sub(r"[^a-z0-9]+", "-", heading.group(2).lower()).strip("-")
            out.append(f'<h{level} id="{anchor}">{_inline(heading.group(2))}</h{level}>')
            i += 1
        elif image:
            src = image.group("src")
            if src not in images:
                raise ValueError(f"report.html: image {src!r} is not one of the report's figures")
            path = Path(images[src])
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            mime = _MIME.get(path.suffix.lower(), "application/octet-stream")
            caption = f"<figcaption>{_inline(captions[src])}</figcaption>" if src in captions else ""
            out.append(f'<figure><img src="data:{mime};base64,{data}" alt="{html.escape(image.group("alt"))}" '
                       f'data-figure="{html.escape(src)}">{caption}</figure>')
            i += 1
        elif stripped.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(lines[i])
                i += 1
            header, body = _cells(rows[0]), [r for r in rows[1:] if not re.match(r"^\|[\s:|-]+\|$", r.strip())]
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in header) + "</tr></thead><tbody>")
            out += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in _cells(r)) + "</tr>" for r in body]
            out.append("</tbody></table>")
        elif stripped.startswith("- "):
            out.append("<ul>")
            while i < len(lines) and lines[i].strip().startswith("- "):
                out.append(f"<li>{_inline(lines[i].strip()[2:])}</li>")
                i += 1
            out.append("</ul>")
        else:
            paragraph = []
            while i < len(lines) and lines[i].strip() and not re.match(r"^(#|\||- |!\[)", lines[i].strip()):
                paragraph.append(lines[i].strip())
                i += 1
            out.append(f"<p>{_inline(' '.join(paragraph))}</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
