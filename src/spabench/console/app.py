"""The console's ASGI app (Starlette): pages, static assets (all local, no CDN), the bench API over
the session's BenchChannel, the review API over the ledger, and recorded media with HTTP ranges.

Access: on loopback, open; bound to any other address, every request must carry the token
(`?token=` once, which sets a cookie, or `Authorization: Bearer <token>`); others get 401. On any
bind, console.guard admits state-changing requests only from the console's own pages (origin, CSRF
token, JSON body of bounded size) and only under the console's own host names.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import re
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from spabench.console.config import ConsoleConfig
from spabench.console.guard import new_csrf_token
from spabench.console.headers import SecurityHeaders
from spabench.console.live import live_bench_url
from spabench.console.views import Redactor, policy_names
from spabench.suite.vocabulary import CAMERAS

STATIC = Path(__file__).parent / "static"
COOKIE = "spabench_console_token"
COMMAND_WAIT_S = 4.0   # how long a page's command waits for the session's verdict (read within 1 s; under clients' 5 s)
PAGES = {"/": "index.html", "/bench": "bench.html", "/review": "review_list.html"}


@dataclass
class ConsoleContext:
    campaign_dir: Path
    cfg: ConsoleConfig
    rater: str = "operator"
    suite: Any = None
    channel: Any = None          # the session's BenchChannel (console.link.ChannelProxy in a console process)
    publisher: Any = None        # the FramePublisher encoding that session's live views
    operator: Any = None
    cache: dict = field(default_factory=dict)
    csrf: str = field(default_factory=new_csrf_token)  # per console: pages carry it, state changes need it

    def ledger(self, write: bool = False):
        from spabench.ledger import Ledger

        return Ledger.open(self.campaign_dir, readonly=not write)   # its SQLite file or its PostgreSQL pointer


class TokenGate:
    """ASGI middleware: refuse requests without the token (when one is set)."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token

    def _given(self, scope) -> tuple[str | None, bool]:
        query = parse_qs(scope.get("query_string", b"").decode())
        if query.get("token"):
            return query["token"][0], True
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip(), False
        cookie = SimpleCookie()
        with contextlib.suppress(Exception):
            cookie.load(headers.get("cookie", ""))
        return (cookie[COOKIE].value if COOKIE in cookie else None), False

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not self.token:
            return await self.app(scope, receive, send)
        given, from_query = self._given(scope)
        if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
            body = b"401: this console needs its access token (open the URL printed at start-up)"
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return

        async def send_with_cookie(message):
            if from_query and message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + [
                    (b"set-cookie", f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/".encode())]
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def build_app(ctx: ConsoleContext):
    """The console's Starlette app. Over 80 lines on purpose: every handler (5-15 lines each) is a
    closure over `ctx` and the request helpers defined first, and the route table at the end is the
    index of the console's whole HTTP API; split up, each handler would take the context as an
    argument and the table would point into several modules."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from spabench.console import review
    from spabench.console.channel import CommandConflict, CommandRefused
    from spabench.console.frames import StreamGate, encode_jpeg
    from spabench.console.guard import CSRF_HEADER, RequestGuard
    from spabench.console.server import resolve_token
    from spabench.operator.checklist import reference_frame

    with ctx.ledger() as ledger:
        redact = Redactor(policy_names(ledger.trials()))
        campaign = ledger.campaign

    def js(data: Any, status: int = 200) -> JSONResponse:
        return JSONResponse(redact(data), status_code=status, headers={"cache-control": "no-store"})

    def error(message: str, status: int = 400) -> JSONResponse:
        return js({"error": message}, status)

    def too_long(fields: dict[str, Any]) -> str | None:
        """Why a text field is refused (longer than operator.console.max_note_chars), or None."""
        limit = ctx.cfg.max_note_chars
        for name, value in fields.items():
            if isinstance(value, str) and len(value) > limit:
                return (f"{name} is {len(value)} characters long (allowed: at most {limit}, "
                        "operator.console.max_note_chars); nothing was saved")
        return None

    async def json_object(request: Request) -> dict:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise review.ReviewError("the request body is not JSON") from None
        if not isinstance(body, dict):
            raise review.ReviewError("the request body must be a JSON object")
        return body

    async def on_channel(method: str, *args: Any) -> Any:
        """A BenchChannel call off the event loop: in a console process the session's channel is a
        socket away (ChannelProxy: sent at once, awaited), in-process a worker thread runs it."""
        call_async = getattr(ctx.channel, "call_async", None)
        if call_async is not None:
            return await call_async(method, *args)
        return await run_in_threadpool(getattr(ctx.channel, method), *args)

    streams = StreamGate(ctx.cfg.max_stream_clients)
    html: dict[str, bytes] = {}

    def camera_of(request: Request) -> str:
        cam = request.path_params["camera"]
        if cam not in CAMERAS:
            raise review.ReviewError(f"camera {cam!r} (allowed: {', '.join(CAMERAS)})")
        return cam

    def recorded_camera_of(request: Request) -> str:
        """A recording's camera: the suite's names, or an imported dataset's own (a plain word)."""
        cam = request.path_params["camera"]
        if cam not in CAMERAS and not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", cam):
            raise review.ReviewError(f"camera {cam!r} (allowed: {', '.join(CAMERAS)} or an imported camera's name)")
        return cam

    def viewer(request: Request) -> tuple[str, bool]:
        rater = (request.query_params.get("rater") or ctx.rater).strip() or ctx.rater
        return rater, request.query_params.get("blind", "") in ("1", "true", "yes")

    async def page(request: Request):
        name = PAGES.get(request.url.path, "review.html")
        if name not in html:  # the page carries this session's CSRF token for its scripts
            text = (STATIC / name).read_text(encoding="utf-8")
            html[name] = text.replace("</head>", f'<meta name="spabench-csrf" content="{ctx.csrf}"></head>', 1).encode()
        return Response(html[name], media_type="text/html; charset=utf-8", headers={"cache-control": "no-store"})

    async def meta(request: Request):
        return js({"campaign": campaign, "rater": ctx.rater, "bench": ctx.channel is not None, "csrf_token": ctx.csrf,
                   "csrf_header": CSRF_HEADER, "max_note_chars": ctx.cfg.max_note_chars,
                   "cameras": list(CAMERAS), "threshold": ctx.cfg.alignment_threshold,
                   "roi": ctx.cfg.workspace_roi, "stream_hz": ctx.cfg.stream_hz})

    # ---- bench -------------------------------------------------------------------------------
    async def bench_state(request: Request):
        if ctx.channel is None:
            url = live_bench_url(ctx.campaign_dir)
            if url is not None:   # its E-STOP is on that page; this console has none
                return js({"phase": "offline", "live_console": url, "message": "a session of this campaign is "
                           "running in another console: its bench page (link above) has the E-STOP"})
            return js({"phase": "offline", "message": "no session is running in this console; start one with "
                       "`spabench run campaign=DIR operator=web`"})
        # the page's id (bench.js: VIEWER), so the closing console knows whether each page saw the end;
        # off the event loop: in a console process the channel is the session's, a call away
        return js(await on_channel("snapshot", request.query_params.get("viewer", "")[:64]))

    async def bench_command(request: Request):
        if ctx.channel is None:
            return error("no session is running", 409)
        ctx.channel.beat()   # a request from a bench page: the dead-man hears it
        body = await json_object(request)
        payload = body.get("payload") or {}
        if not isinstance(payload, dict):
            return error("payload must be a JSON object")
        why = too_long({k: v for k, v in payload.items()})
        if why is not None:
            return error(why)
        # the answer waits for the session's verdict, so a page never says "done" for a command the
        # session refused or that lost to another page's answer (which the 409 names)
        channel = ctx.channel
        try:
            ticket = await on_channel("post", str(body.get("command", "")), payload, body.get("version"))
            done = await run_in_threadpool(channel.outcome, ticket, COMMAND_WAIT_S)
        except CommandConflict as exc:
            return js({"error": str(exc), "conflict": {"answer": exc.answer}}, 409)
        except CommandRefused as exc:
            return error(str(exc), 409)
        return js({"ok": True} if done else {"ok": True, "pending": "the session has not taken it yet"},
                  200 if done else 202)

    async def bench_stop(request: Request):
        kind = request.path_params["kind"]
        if kind not in ("operator_stop", "abort", "estop"):
            return error(f"stop kind {kind!r} (allowed: operator_stop, abort, estop)")
        source = request.query_params.get("source", "button")
        if ctx.channel is None:
            return error("no session is attached to this console: nothing to stop", 409)
        ctx.channel.beat()
        try:
            await on_channel("stop", kind, f"console {source}")   # the e-stop: one socket write from here
        except CommandRefused as exc:
            return error(str(exc), 409)
        return js({"ok": True, "kind": kind})

    async def bench_frame(request: Request):
        cam = camera_of(request)
        client = request.client
        viewer = request.query_params.get("viewer") or (f"{client.host}:{client.port}" if client else "?")
        if not streams.admit(viewer[:64]):
            return error(f"the live views are already shown on {streams.limit} pages "
                         "(operator.console.max_stream_clients); close one", 503)
        data = ctx.publisher.jpeg(cam) if ctx.publisher is not None else None
        if data is None:
            return Response(status_code=204, headers={"cache-control": "no-store"})
        return Response(data, media_type="image/jpeg", headers={"cache-control": "no-store"})

    async def bench_reference(request: Request):
        cam = camera_of(request)
        op = ctx.operator
        path = (op.references or {}).get(cam) if op is not None else None
        if path is None:
            return error(f"no reference image for camera {cam} in this trial", 404)
        return FileResponse(path, headers={"cache-control": "no-store"})

    async def bench_rendered(request: Request):
        """The current scene's rendered reference: placement (diagram), overhead, middle (twin)."""
        view = request.path_params["view"]
        op = ctx.operator
        files = op.rendered.files() if op is not None and getattr(op, "rendered", None) is not None else {}
        if view not in files:
            return error(f"no rendered {view!r} for this scene (have: {', '.join(sorted(files)) or 'none'})", 404)
        return FileResponse(files[view], headers={"cache-control": "no-store"})

    # ---- review ------------------------------------------------------------------------------
    async def attempts(request: Request):
        rater, blind = viewer(request)
        q = request.query_params
        with ctx.ledger() as ledger:
            rows = review.list_attempts(ledger, rater=rater, blind=blind, unscored=q.get("unscored") in ("1", "true"),
                                        **{k: q.get(k, "") for k in review.LIST_FILTERS})
            options = review.filter_options(ledger)
        return js({"attempts": rows, "options": options, "rater": rater, "blind": blind})

    async def attempt(request: Request):
        rater, blind = viewer(request)
        with ctx.ledger() as ledger:
            data = review.attempt_detail(ledger, ctx.campaign_dir, ctx.suite, request.path_params["attempt_id"],
                                         rater=rater, blind=blind)
        return js(data)

    score_keys = ("rater", "success", "failure_mode", "note", "reason", "version")

    async def score(request: Request):
        body = await json_object(request)
        unknown = sorted(set(body) - set(score_keys))
        if unknown:
            return error(f"score: unknown field(s) {', '.join(map(repr, unknown))} (accepted: {', '.join(score_keys)})")
        why = too_long({k: body.get(k) for k in ("note", "reason", "rater", "failure_mode")})
        if why is not None:
            return error(why)
        from spabench.errors import SpabenchError

        _, blind = viewer(request)
        try:
            with ctx.ledger(write=True) as ledger:
                data = review.submit_score(ledger, request.path_params["attempt_id"], str(body.get("rater", "")),
                                           body.get("success"), body.get("failure_mode"), str(body.get("note") or ""),
                                           body.get("reason"), body.get("version"), blind=blind,
                                           view={k: request.query_params.get(k, "") for k in review.LIST_FILTERS})
        except review.ReviewConflict as exc:  # another tab saved first: say what, save nothing
            return js({"error": str(exc), **exc.data}, 409)
        except review.ReviewError:
            raise
        except SpabenchError as exc:  # the ledger refused (bad mode for this trial, locked, storage error)
            return error(str(exc), 409)
        return js({"ok": True, **data})

    def _attempt_row(attempt_id: str):
        with ctx.ledger() as ledger:
            try:
                a = ledger.attempt(attempt_id)
            except Exception:
                raise review.ReviewError(f"no attempt {attempt_id!r} in this campaign") from None
            return a, ledger.trial(a.trial_id)

    async def video(request: Request):
        cam = recorded_camera_of(request)
        a, _ = _attempt_row(request.path_params["attempt_id"])
        folder = review.episode_folder(ctx.campaign_dir, a)
        path = review.video_file(folder, cam) if folder is not None else None
        if path is None or not path.is_file():
            return error(f"no {cam} video for attempt {a.attempt_id} (still encoding, or not recorded)", 404)
        return FileResponse(path, media_type="video/mp4")

    def _jpeg_cached(key, make) -> Response:
        data = ctx.cache.get(key)
        if data is None:
            data = ctx.cache[key] = encode_jpeg(make(), 85)
            if len(ctx.cache) > 256:
                ctx.cache.pop(next(iter(ctx.cache)))
        return Response(data, media_type="image/jpeg")

    def frame(request: Request):
        cam, which = recorded_camera_of(request), request.path_params["which"]
        if which not in ("first", "last"):
            return error(f"frame {which!r} (allowed: first, last)")
        a, _ = _attempt_row(request.path_params["attempt_id"])
        return _jpeg_cached((a.attempt_id, cam, which), lambda: review.frame_at(ctx.campaign_dir, a, cam, which))

    def reference(request: Request):
        cam = camera_of(request)
        a, trial = _attempt_row(request.path_params["attempt_id"])
        with ctx.ledger() as ledger:
            path = reference_frame(ledger, ctx.campaign_dir, trial.evaluation_id, cam)
        if path is None:
            return error(f"no reference image yet for evaluation {trial.evaluation_id}", 404)
        return FileResponse(path)

    async def on_review_error(request: Request, exc: Exception):
        return error(str(exc), 404 if "no attempt" in str(exc) else 400)

    routes = [
        Route("/", page), Route("/bench", page), Route("/review", page), Route("/review/{attempt_id}", page),
        Route("/api/meta", meta),
        Route("/api/bench/state", bench_state), Route("/api/bench/command", bench_command, methods=["POST"]),
        Route("/api/bench/stop/{kind}", bench_stop, methods=["POST"]),
        Route("/api/bench/frame/{camera}.jpg", bench_frame), Route("/api/bench/reference/{camera}.png", bench_reference),
        Route("/api/bench/rendered/{view}.png", bench_rendered),
        Route("/api/attempts", attempts), Route("/api/attempts/{attempt_id}", attempt),
        Route("/api/attempts/{attempt_id}/score", score, methods=["POST"]),
        Route("/media/{attempt_id}/video/{camera}.mp4", video),
        Route("/media/{attempt_id}/frame/{which}/{camera}.jpg", frame),
        Route("/media/{attempt_id}/reference/{camera}.png", reference),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    token = resolve_token(ctx.cfg)
    # the token first (without it: 401, nothing else is said), then the guard's origin and size rules
    app = Starlette(routes=routes, middleware=[Middleware(TokenGate, token=token),
                                               Middleware(RequestGuard, cfg=ctx.cfg, csrf=ctx.csrf)],
                    exception_handlers={review.ReviewError: on_review_error})
    app.state.token = token
    app.state.csrf = ctx.csrf
    app.state.streams = streams
    return SecurityHeaders(app)   # outermost: every answer, also the gates' and the error handler's
