"""Browser tests of the console: Debian's Chromium driven by Playwright (no downloaded browser), a
small twin campaign run from the page by a real `spabench run operator=web`, real policy servers
on loopback, the real ledger and recorded MP4s."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.campaigns import LOADED_DEADMAN_S, by_alias, planned_timer

CHROMIUM = os.environ.get("SPABENCH_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
REPO = Path(__file__).resolve().parents[2]
# The README's screenshots. Every run takes them (into the test's temporary folder); with
# SPABENCH_SCREENSHOTS=update they replace the committed ones, so a plain test run leaves the tree clean.
COMMITTED_SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
# One evaluation, two policies: the first attempt is checklist-only, the second gets its reference.
SMALL_CAMPAIGN = ["campaign=demo_twin", "campaign.tasks=[object_state]", "campaign.counts.id=1",
                  *[f"campaign.counts.{c}=0" for c in ("ood", "direct", "paraphrase_ood", "paraphrase_direct",
                                                       "novel_object", "no_intervention")],
                  planned_timer(60.0)]   # time to act during a rollout (a counted run keeps the planned timer)


def screenshot(page, name: str, tmp: Path) -> Path:
    path = tmp / name
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("SPABENCH_SCREENSHOTS") == "update":
        shutil.copy(path, COMMITTED_SCREENSHOTS / name)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict:
    return dict(os.environ, MUJOCO_GL="egl", PYOPENGL_PLATFORM="egl", HF_HUB_OFFLINE="1",
                PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))


def spabench(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spabench.cli.main", *args], cwd=REPO, env=env(),
                          capture_output=True, text=True, **kw)


def wait_http(url: str, timeout: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited with {proc.returncode} before {url} answered")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout} s")


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.js_errors = errors
    yield pg
    ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture(scope="session")
def policy_servers():
    """The two scripted stand-ins (not VLAs) over the openpi protocol, each on a free port."""
    import yaml

    from spabench.standins.serve import ServeScriptedConfig, build_server

    suite = yaml.safe_load((REPO / "conf/suite/spabench.yaml").read_text())
    ports, servers = {}, []
    for name, mode in (("scripted_compositional", "compositional"), ("scripted_memorising", "memorising")):
        card = yaml.safe_load((REPO / f"conf/policy/{name}.yaml").read_text())
        card["port"] = ports[name] = free_port()
        _, server = build_server(ServeScriptedConfig.from_mapping(
            {"policy": card, "mode": mode, "port": card["port"], "host": "127.0.0.1", "seed": 0, "suite": suite}))
        server.__enter__()
        servers.append(server)
    yield ports
    for server in servers:
        server.__exit__(None, None, None)


def plan_small(out: Path) -> Path:
    proc = spabench("plan", f"out={out}", *SMALL_CAMPAIGN, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


RATER = "Ada Lovelace"   # operator.rater= of the harness's sessions (fills the page's rater field)


def start_run(campaign: Path, ports: dict, console_port: int, log: Path, *extra: str,
              rater: str | None = RATER) -> subprocess.Popen:
    """`spabench run operator=web` of `campaign`; `rater=None`: the page asks for the name."""
    args = [sys.executable, "-m", "spabench.cli.main", "run", f"campaign={campaign}", "bench=sim_demo",
            *([f"operator.rater={rater}"] if rater else []), *extra,
            "operator=web", f"operator.console.port={console_port}", f"operator.console.deadman_s={LOADED_DEADMAN_S}",
            "operator.console.camera_check_s=0.5", *by_alias(campaign, [f"cards.{n}.port={p}" for n, p in ports.items()])]
    return subprocess.Popen(args, cwd=REPO, env=env(), stdout=log.open("w"), stderr=subprocess.STDOUT, text=True)


def policy_words(campaign: Path) -> set[str]:
    from spabench.console.views import policy_names
    from spabench.ledger import Ledger

    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        return policy_names(ledger.trials())


def assert_blind(page, words: set[str], where: str) -> None:
    """Nothing the page shows (text, attributes, form values) names a policy."""
    html = page.evaluate("() => document.documentElement.outerHTML + '\\n' + document.body.innerText + '\\n' + "
                         "Array.from(document.querySelectorAll('input,textarea,select')).map(e => e.value).join(' ')")
    leaked = sorted(w for w in words if w.lower() in html.lower())
    assert words and not leaked, f"{where}: the page names {leaked}"


def _phase(page, phase: str, timeout: float = 90_000) -> None:
    """Wait for the bench page to show `phase`; on a timeout, fail with what the page and the console
    showed instead (the phase, the page's error line, the server's state) so a loaded-CI failure says why."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(f"() => document.querySelector('#phase').textContent === '{phase}'", timeout=timeout)
    except PlaywrightTimeout:
        shown = page.evaluate("() => ({phase: document.querySelector('#phase')?.textContent, "
                              "error: document.querySelector('#error')?.textContent, "
                              "message: document.querySelector('#message')?.textContent})")
        try:
            import httpx

            origin = page.url.split("/bench")[0]
            state = httpx.get(origin + "/api/bench/state", timeout=5).json()
            state = {k: state.get(k) for k in ("phase", "error", "message", "all_live", "problems", "cameras")}
        except Exception as exc:  # the console is gone: that is the news
            state = {"unreachable": repr(exc)}
        raise AssertionError(f"the bench page never showed {phase!r} within {timeout / 1000:.0f} s; "
                             f"page: {shown}; console state: {state}") from None


def answer_estop_cause(page, cause: str, text: str = "") -> None:
    """After an e-stop the bench page asks why (issue 19): choose `cause`, say `text`, record it."""
    _phase(page, "estop_cause", timeout=30_000)
    page.check(f"#ec-causes input[value={cause}]")
    if text:
        page.fill("#ec-text", text)
    page.click("#submit-cause")


def _steps_at_least(page, n: int) -> None:
    page.wait_for_function(f"() => Number(document.querySelector('#steps').textContent) >= {n}", timeout=90_000)


def session_at_reset(page, tmp_path: Path, policy_servers: dict) -> tuple[Path, subprocess.Popen]:
    """A small campaign's web run (log in tmp_path/run.log), its page past the camera check at the
    first scene reset; returns the campaign folder and the run process (the caller ends it)."""
    campaign = plan_small(tmp_path / "campaign")
    port = free_port()
    proc = start_run(campaign, policy_servers, port, tmp_path / "run.log")
    try:
        wait_http(f"http://127.0.0.1:{port}/api/meta", 120, proc)
        page.goto(f"http://127.0.0.1:{port}/bench")
        _phase(page, "camera_check")
        page.wait_for_function("() => !document.querySelector('#confirm-cameras').disabled", timeout=30_000)
        page.click("#confirm-cameras")
        _phase(page, "reset")
        page.wait_for_function("() => document.querySelectorAll('#card-checklist input[type=checkbox]').length > 0",
                               timeout=30_000)
    except BaseException:
        proc.terminate()
        proc.wait(10)
        raise
    return campaign, proc


def finish_estopped_session(proc: subprocess.Popen, tmp_path: Path, campaign: Path, during: str) -> tuple[str, dict]:
    """Wait for a web run that a console e-stop key ended (exit 3, EXIT_BENCH) and check its one estop
    event (source 'console key', in stage `during`); returns the run's log and that event."""
    from spabench.ledger import Ledger

    try:
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
    log = (tmp_path / "run.log").read_text()
    assert proc.returncode == 3, log[-3000:]   # EXIT_BENCH: the e-stop ended the session
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        events = ledger.events(kind="estop")
        ended = [(a.trial_id, a.stop_reason, a.invalid_reason) for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
    assert len(events) == 1, (events, ended, log[-3000:])   # exactly one e-stop (else: what ended the session)
    (event,) = events
    assert event["payload"]["source"] == "console key" and event["payload"]["during"] == during, event
    return log, event


LOADED = "(sel) => Array.from(document.querySelectorAll(sel)).length > 0 && " \
         "Array.from(document.querySelectorAll(sel)).every(i => i.complete && i.naturalWidth > 0)"


def _placement(page, images: str, shot_dir: Path | None) -> dict:
    """What a scene reset shows of its placement references (tests/console/test_rendered_reference.py),
    once `images` are loaded; with `shot_dir`, its screenshot at 1366x768 (bench_first_placement.png)."""
    page.wait_for_function(LOADED, arg=images, timeout=60_000)
    seen = {
        "banner": page.is_visible("#first-attempt"),
        "overlays": page.eval_on_selector_all("img.ref", "els => els.map(e => [e.id, e.className])"),
        "names": page.eval_on_selector_all("#overlays .name", "els => els.map(e => e.textContent)"),
        "figures": page.eval_on_selector_all("#rendered-grid figcaption", "els => els.map(e => e.textContent)"),
        "placement_px": page.eval_on_selector_all("#rendered-placement", "els => els.map(e => e.naturalWidth)"),
        "note": page.text_content("#rendered-note"),
        "overlay_tools": page.is_visible("#overlay-tools"),
    }
    if shot_dir is not None:
        size = page.viewport_size
        page.set_viewport_size({"width": 1366, "height": 768})
        seen["screenshot"] = screenshot(page, "bench_first_placement.png", shot_dir)
        page.set_viewport_size(size)
    return seen


@pytest.fixture(scope="session")
def bench_session(tmp_path_factory, browser, policy_servers):
    """A two-trial twin campaign run end to end from the bench page; returns what the page showed."""
    campaign = plan_small(tmp_path_factory.mktemp("console") / "campaign")
    port = free_port()
    log = campaign.parent / "run.log"
    proc = start_run(campaign, policy_servers, port, log)
    shown: dict = {"trials": [], "dom": [], "log": log, "campaign": campaign, "screenshots": []}
    ctx = browser.new_context(viewport={"width": 1400, "height": 1100})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def snap(where):
        shown["dom"].append((where, page.evaluate(
            "() => document.documentElement.outerHTML + '\\n' + document.body.innerText + '\\n' + "
            "Array.from(document.querySelectorAll('input,textarea,select')).map(e => e.value).join(' ')")))

    try:
        wait_http(f"http://127.0.0.1:{port}/api/meta", 120, proc)
        page.goto(f"http://127.0.0.1:{port}/bench")
        # camera check: five named, live cameras with resolution and measured rate
        _phase(page, "camera_check")
        page.wait_for_function("() => document.querySelector('#cc-status').textContent.includes('All five')", timeout=30_000)
        shown["cameras"] = page.eval_on_selector_all(
            "#cc-grid .cam", "els => els.map(e => [e.dataset.camera, e.querySelector('.info').textContent])")
        page.wait_for_function("() => Array.from(document.querySelectorAll('#cc-grid img')).every(i => i.naturalWidth > 0)",
                               timeout=30_000)
        snap("camera check")
        page.click("#confirm-cameras")
        for k in range(2):
            _phase(page, "reset")
            page.wait_for_function("() => document.querySelector('#card-alias').textContent !== ''")
            card = {key: page.text_content(f"#card-{key}") for key in ("alias", "trial", "task", "condition", "instruction", "eta")}
            card["first_attempt"] = page.is_visible("#first-attempt")
            if k == 0:   # the twin's views come from the session's background worker (only bounds a hang)
                page.wait_for_function("() => document.querySelectorAll('img.ref.rendered').length === 2",
                                       timeout=300_000)
                shown["first_placement"] = _placement(page, "img.ref.rendered, #rendered-grid img", campaign.parent)
            else:        # the same evaluation's second scene reset: the real reference of attempt 1 as well
                shown["second_placement"] = _placement(page, "#rendered-grid img, img.ref", None)
            card["reference_images"] = page.locator("img.ref:not(.rendered)").count()
            card["rendered_overlays"] = page.locator("img.ref.rendered").count()
            card["checklist"] = page.eval_on_selector_all("#card-checklist li", "els => els.map(e => e.textContent)")
            if k == 1:
                page.wait_for_function("() => /threshold/.test(document.querySelector('#alignment').textContent) && "
                                       "/middle \\d/.test(document.querySelector('#alignment').textContent)", timeout=30_000)
                page.fill("#opacity", "60")
                page.dispatch_event("#opacity", "input")
                page.wait_for_function("() => Array.from(document.querySelectorAll('img.live, img.ref')).every(i => i.naturalWidth > 0)",
                                       timeout=30_000)
                card["alignment_text"] = page.text_content("#alignment")
                shown["screenshots"].append(screenshot(page, "bench_reset.png", campaign.parent))
            snap(f"reset {k}")
            if k == 0:
                page.click("#ready")
            else:
                page.keyboard.press("Enter")
            _phase(page, "rollout")
            _steps_at_least(page, 90)
            page.wait_for_function("() => Array.from(document.querySelectorAll('#live-grid img')).every(i => i.naturalWidth > 0)",
                                   timeout=30_000)
            card["live"] = {key: page.text_content(f"#{key}") for key in ("time-left", "rate", "latency", "steps")}
            if k == 1:
                shown["screenshots"].append(screenshot(page, "bench_rollout.png", campaign.parent))
            snap(f"rollout {k}")
            if k == 0:
                page.click("#stop")
            else:
                page.keyboard.press("s")
            _phase(page, "score")
            card["failure_mode_labels"] = page.eval_on_selector_all("#modes label", "els => els.map(e => e.textContent)")
            if k == 0:
                page.check("input[name=success][value=no]")
                page.check("input[name=failure_mode][value=timeout_or_incomplete]")
                page.fill("#note", "stopped early from the console")
            else:
                page.check("input[name=success][value=yes]")
                page.fill("#note", "clean pick")
            snap(f"score {k}")
            page.click("#submit-score")
            page.wait_for_function("() => document.querySelector('#last-score').dataset.score", timeout=10_000)
            card["saved"] = page.eval_on_selector("#last-score", "e => JSON.parse(e.dataset.score)")
            page.evaluate("() => { delete document.querySelector('#last-score').dataset.score; }")
            shown["trials"].append(card)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        ctx.close()
    shown["returncode"] = proc.returncode
    shown["errors"] = errors
    return shown


def wait_encoded(campaign: Path, timeout: float = 60.0) -> None:
    """Until every episode folder of the campaign is final (the last videos finish after the rollout)."""
    from spabench.ledger import Ledger
    from spabench.record.recorder import resolve_episode_dir

    deadline = time.monotonic() + timeout
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        paths = [a.episode_path for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
    while any(resolve_episode_dir(campaign / p).name.endswith(".partial") for p in paths) and time.monotonic() < deadline:
        time.sleep(0.2)


@contextmanager
def review_server(campaign: Path):
    """A console of a finished campaign (in this process), once its last videos are encoded; yields its URL."""
    from spabench.console.app import ConsoleContext, build_app
    from spabench.console.config import ConsoleConfig
    from spabench.console.server import ConsoleServer
    from spabench.suite import load_suite

    wait_encoded(campaign)
    cfg = ConsoleConfig(port=free_port())
    server = ConsoleServer(build_app(ConsoleContext(campaign_dir=campaign, cfg=cfg, rater=RATER,
                                                    suite=load_suite(REPO / "tasks", REPO / "hardware"))), cfg).start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def review_console(bench_session):
    """The console of the finished campaign (in this process), for the review pages."""
    campaign = bench_session["campaign"]
    with review_server(campaign) as url:
        yield url, campaign
