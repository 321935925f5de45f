"""report.html: the Markdown report as one self-contained page (figures inlined, no external URL).

report.md is CommonMark with pipe tables; markdown-it-py renders it (raw HTML in the text is
escaped, never passed through). Images are replaced by data: URIs of the figure files, so the page
opens offline and can be mailed as one file.
"""

from __future__ import annotations

import base64
import gc
import html
import re
from collections.abc import Mapping
from pathlib import Path

_MIME = {".svg": "image/svg+xml", ".png": "image/png"}

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;max-width:1200px;
margin:2em auto;padding:0 1em;color:#1f2933;line-height:1.45}
h1,h2,h3{line-height:1.2} h2{border-bottom:1px solid #d9d9d9;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.86em;display:block;overflow-x:auto}
th,td{border:1px solid #d0d7de;padding:.25em .55em;text-align:left;white-space:nowrap}
th{background:#f3f4f6} tr:nth-child(even) td{background:#fafafa}
code{background:#f3f4f6;padding:0 .25em;border-radius:3px;font-size:.92em}
img{max-width:100%;height:auto;border:1px solid #eee;margin:1.2em 0 .3em}
"""


def _renderer(images: Mapping[str, Path]):
    """CommonMark + tables, raw HTML escaped; each image inlined from its file in `images`, each
    heading given an id (its text, lower case, dashes) so sections can be linked."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")

    def image(renderer, tokens, idx, options, env):
        token = tokens[idx]
        src = str(token.attrGet("src") or "")
        if src not in images:
            raise ValueError(f"report.html: image {src!r} is not one of the report's figures")
        path = Path(images[src])
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        mime = _MIME.get(path.suffix.lower(), "application/octet-stream")
        alt = renderer.renderInlineAsText(token.children or [], options, env)
        return (f'<img src="data:{mime};base64,{data}" alt="{html.escape(alt)}" '
                f'data-figure="{html.escape(src)}">')

    def heading_ids(state):
        for i, token in enumerate(state.tokens):
            if token.type == "heading_open":
                text = state.tokens[i + 1].content
                token.attrSet("id", re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-"))

    md.add_render_rule("image", image)
    md.core.ruler.push("heading_ids", heading_ids)
    return md


def markdown_to_html(markdown: str, images: Mapping[str, Path], title: str = "Spa-Bench report") -> str:
    """The page for `markdown`; every image whose source is a key of `images` is inlined from that file.

    An image whose file is not in `images` raises ValueError: the page must not point outside itself.
    """
    enabled = gc.isenabled()
    gc.disable()   # markdown-it makes an object per piece of text (~470k for a 175-policy report) and the
    try:           # cyclic collector kept rescanning them all (parse 2.9 -> 1.3 s); it runs again after
        body = _renderer(images).render(markdown)
    finally:
        if enabled:
            gc.enable()
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">\n'
            f"<title>{html.escape(title)}</title>\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<style>{STYLE}</style></head><body>\n{body}</body></html>\n")
