"""The dated record of one bench check: its items, and the report.json + report.html it is kept as.

An item is one thing checked (a motor's supply, a camera's rate, a server's latency): `ok` False fails
the check and its `message` is the one line the terminal prints for it; `warn` items are shown but do
not fail. Each part keeps its measured values (`parts[<part>]`) for the report's tables.
"""

from __future__ import annotations

import html
import json
import platform
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
FORMAT = 1


@dataclass
class Item:
    part: str          # bus, calibration, health, pose, cameras, servers, system
    name: str          # what was checked (a motor, a camera, a card)
    ok: bool
    message: str       # one line: what was found (and, failing, what to do)
    warn: bool = False


@dataclass
class CheckRecord:
    """Everything one check found; `write` keeps it in a folder."""

    bench: dict[str, Any]
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    finished: str = ""
    items: list[Item] = field(default_factory=list)
    parts: dict[str, Any] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)
    pictures: dict[str, str] = field(default_factory=dict)   # camera -> file name inside the folder
    frames: dict[str, Any] = field(default_factory=dict, repr=False)   # camera -> its last frame (not written)
    only: list[str] = field(default_factory=list)   # the parts run when not all (`parts=`)

    def add(self, part: str, name: str, ok: bool, message: str, *, warn: bool = False) -> Item:
        item = Item(part, name, ok, message, warn)
        self.items.append(item)
        return item

    @property
    def failures(self) -> list[Item]:
        return [i for i in self.items if not i.ok]

    @property
    def passed(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": "spabench bench check", "started": self.started,
                "finished": self.finished, "result": "pass" if self.passed else "fail",
                "failures": [f"{i.part}: {i.message}" for i in self.failures],
                "bench": self.bench, "host": platform.node(), "items": [asdict(i) for i in self.items],
                "parts": self.parts, "timings_s": self.timings_s, "pictures": self.pictures, "only": self.only}

    def write(self, folder: Path) -> None:
        """report.json and report.html into `folder` (which already holds the pictures)."""
        self.finished = self.finished or datetime.now(UTC).isoformat(timespec="seconds")
        (folder / REPORT_JSON).write_text(json.dumps(self.as_dict(), indent=2, default=_plain) + "\n")
        (folder / REPORT_HTML).write_text(render_html(self))


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


MOTOR_COLUMNS = ["name", "id", "answered", "model_number", "firmware", "voltage_v", "temperature_c", "current_ma",
                 "status", "torque_enable", "torque_limit", "max_torque_limit", "position"]


def render_html(record: CheckRecord) -> str:
    """One self-contained page (the pictures are files beside it): the result, every failed item,
    then each part's measurements."""
    d = record.as_dict()
    verdict = "PASS" if record.passed else "FAIL"
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>Bench check {_e(record.started)}</title>",
           "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
           "padding:2px 6px}.fail{color:#b00}.ok{color:#070}.warn{color:#a60}img{max-width:320px;margin:4px}</style>",
           "</head><body>",
           f"<h1>Bench check: <span class='{'ok' if record.passed else 'fail'}'>{verdict}</span></h1>",
           f"<p>Started {_e(record.started)}, finished {_e(record.finished)} on {_e(d['host'])}; bench "
           f"{_e(record.bench.get('name'))} ({_e(record.bench.get('type'))})"
           + (f"; only these parts: {_e(', '.join(record.only))}" if record.only else "") + "</p>"]
    if record.failures:
        out.append("<h2>Failed</h2><ul>" + "".join(f"<li class='fail'>{_e(i.part)}: {_e(i.message)}</li>"
                                                  for i in record.failures) + "</ul>")
    out.append("<h2>Every item</h2>" + _table(
        [{**asdict(i), "result": "fail" if not i.ok else "warn" if i.warn else "ok"} for i in record.items],
        ["part", "name", "result", "message"]))
    bus = record.parts.get("bus")
    if bus and bus.get("motors"):
        out.append(f"<h2>Bus</h2><p>Port {_e(bus.get('port'))}; calibration file {_e(bus.get('calibration_file'))}</p>")
        out.append(_table(bus["motors"], MOTOR_COLUMNS))
    cameras = record.parts.get("cameras")
    if cameras:
        out.append("<h2>Cameras</h2>" + _table(cameras.get("rows", []), ["name", "width", "height", "configured_fps",
                                                                       "measured_hz", "new_frames_hz", "problem"]))
        out.append("<p>" + "".join(f"<figure style='display:inline-block'><img src='{_e(f)}' alt='{_e(n)}'>"
                                   f"<figcaption>{_e(n)}</figcaption></figure>"
                                   for n, f in record.pictures.items()) + "</p>")
    servers = record.parts.get("servers")
    if servers:
        out.append("<h2>Servers</h2>" + _table(servers.get("rows", []), ["card", "endpoint", "protocol", "identity",
                                                                       "p50_ms", "p90_ms", "max_ms", "chunk",
                                                                       "control_hz_allowed", "problem"]))
    system = record.parts.get("system")
    if system:
        out.append("<h2>System</h2>" + _table([{"what": k, "value": v} for k, v in system.items()], ["what", "value"]))
    if record.timings_s:
        out.append("<h2>Time per part</h2>" + _table([{"part": k, "seconds": v} for k, v in record.timings_s.items()],
                                                     ["part", "seconds"]))
    out.append("</body></html>\n")
    return "\n".join(out)
