"""Headless Chromium for the console benchmarks, in its own process (as an operator's browser is).

    python benchmarks/_browser.py URL stream SECONDS   # keep the bench page open, streaming
    python benchmarks/_browser.py URL estop N          # N times: wait for a rollout, press Space

In estop mode each press prints one JSON line {"t_ms": Date.now() at the key handler}.
"""

from __future__ import annotations

import json
import random
import sys
import time

ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def main() -> None:
    url, mode, amount = sys.argv[1], sys.argv[2], float(sys.argv[3])
    from playwright.sync_api import sync_playwright

    rng = random.Random(0)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        print(json.dumps({"ready": True}), flush=True)
        if mode == "stream":
            time.sleep(amount)
        else:
            pressed = -1
            for _ in range(int(amount)):
                # a rollout this page has not stopped yet (the phase version moves on every new rollout)
                page.wait_for_function(f"() => state.phase === 'rollout' && state.version !== {pressed}", timeout=120_000)
                pressed = page.evaluate("() => state.version")
                time.sleep(rng.uniform(0.4, 1.2))
                page.keyboard.press("Escape")
                page.wait_for_function("() => window.__lastStop", timeout=10_000)
                stop = page.evaluate("() => { const s = window.__lastStop; window.__lastStop = null; return s; }")
                print(json.dumps({"t_ms": stop["t"]}), flush=True)
        browser.close()


if __name__ == "__main__":
    main()
