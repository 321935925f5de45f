"""The console's connection bounds rest on uvicorn's private H11Protocol (uvicorn has no public hook
for accepting or closing connections), so the `console` extra pins uvicorn to the tested range and
these tests fail loudly when the installed uvicorn is outside it or no longer has what
console.connections uses (issue 34: the requirement was an unbounded `uvicorn>=0.30`)."""

from __future__ import annotations

import http.client
import importlib.metadata
import time
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from spabench.console.app import ConsoleContext, build_app
from spabench.console.config import ConsoleConfig
from spabench.console.connections import PAGE_PATHS, UVICORN_INTERNALS, page_reserve
from spabench.console.server import ConsoleServer
from spabench.ledger import Ledger

from .conftest import REPO, free_port


def _console_requirement(name: str) -> Requirement:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["console"]
    (req,) = [Requirement(r) for r in extras if Requirement(r).name == name]
    return req


def test_the_installed_uvicorn_is_within_the_pinned_range():
    req = _console_requirement("uvicorn")
    assert any(spec.operator == "<" for spec in req.specifier), f"{req}: no upper bound on a private API"
    installed = importlib.metadata.version("uvicorn")
    assert req.specifier.contains(installed, prereleases=True), \
        f"uvicorn {installed} is installed, the console extra pins {req}: test console.connections and move the pin"


def test_what_the_console_uses_of_uvicorns_h11_protocol_exists(tmp_path):
    from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

    for method in UVICORN_INTERNALS["H11Protocol"]:
        assert callable(getattr(H11Protocol, method, None)), f"uvicorn's H11Protocol has no {method}()"
    row = {"trial_id": "E0000-P1", "evaluation_id": "E0000", "policy": "p", "card": "c", "alias": "P1",
           "task": "counting", "condition": "id", "scene_id": "counting-id-000", "scene_condition": "id",
           "matched_group": None, "cell": "two|cube", "withheld": False, "instruction": "Put two cubes in the bowl.",
           "instruction_variant": "original", "order": 0, "timer_s": 5.0, "control_hz": 30.0}
    Ledger.create(tmp_path / Ledger.FILENAME, [row], "h", {"campaign": "conn"}).close()
    cfg = ConsoleConfig(port=free_port(), max_connections=8)
    server = ConsoleServer(build_app(ConsoleContext(campaign_dir=Path(tmp_path), cfg=cfg)), cfg).start()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        assert issubclass(server.protocol, H11Protocol)
        conn.request("GET", "/api/bench/state")   # a page request, over a kept-alive connection
        reply = conn.getresponse()
        reply.read()
        assert reply.status == 200
        (proto,) = server._server.server_state.connections
        assert isinstance(proto, server.protocol)
        for attr in UVICORN_INTERNALS["H11Protocol instance"]:
            assert hasattr(proto, attr), f"uvicorn's H11Protocol instances have no {attr!r}"
        assert proto.connections is server._server.server_state.connections
        assert isinstance(proto.cycle, RequestResponseCycle)
        for attr in UVICORN_INTERNALS["RequestResponseCycle instance"]:
            assert hasattr(proto.cycle, attr), f"uvicorn's RequestResponseCycle has no {attr!r}"
        assert proto.cycle.scope["path"] == "/api/bench/state"
        # the server thread marks the cycle complete after writing the body the client already read
        deadline = time.monotonic() + 10
        while not proto.cycle.response_complete:
            assert time.monotonic() < deadline, "the state request's cycle never completed"
            time.sleep(0.01)
        # what the subclass derived from them: a page connection, between requests
        assert proto._page_since is not None and proto._idle_since is not None
        assert "/api/bench/state".startswith(PAGE_PATHS) and page_reserve(cfg) == 8
    finally:
        conn.close()
        server.stop()
