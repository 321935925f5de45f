"""Issue 38: a comparison campaign's bench page shows "keep going" / "decided" with the evidence so far
at the scene reset and the score, by aliases only, the same words the terminal printed; absent while
the arm moves. A real `spabench run operator=web` on the twin with the scripted stand-ins, real Chromium."""

from __future__ import annotations

import re

import pytest

from .conftest import (
    SMALL_CAMPAIGN,
    _phase,
    assert_blind,
    free_port,
    policy_words,
    spabench,
    start_run,
    wait_http,
)

pytestmark = [pytest.mark.sim, pytest.mark.slow]

# two evaluations (two pairs) of the harness's small campaign, with the stopping rule of a vs b
COMPARISON = [*(a for a in SMALL_CAMPAIGN if not a.startswith("campaign.counts.id=")), "campaign.counts.id=2",
              "+campaign.stopping.kind=sequential", "+campaign.stopping.a=scripted_compositional",
              "+campaign.stopping.b=scripted_memorising"]


def _panel(page) -> dict:
    return page.evaluate("() => ({hidden: document.querySelector('#comparison').hidden, "
                         "pair: document.querySelector('#cmp-pair').textContent, "
                         "verdict: document.querySelector('#cmp-verdict').textContent, "
                         "evidence: document.querySelector('#cmp-evidence').textContent, "
                         "rule: document.querySelector('#cmp-rule').textContent})")


def _panel_says(page, text: str) -> dict:
    page.wait_for_function(f"() => !document.querySelector('#comparison').hidden && "
                           f"document.querySelector('#cmp-verdict').textContent.includes({text!r})", timeout=30_000)
    return _panel(page)


def _run_attempt(page) -> None:
    """Scene ready, stop the rollout at once, score a failure (both policies fail: a concordant pair)."""
    page.click("#ready")
    _phase(page, "rollout")
    assert _panel(page)["hidden"]   # not while the arm moves
    page.click("#stop")
    _phase(page, "score")
    page.check("input[name=success][value=no]")
    page.check("input[name=failure_mode][value=timeout_or_incomplete]")


def test_comparison_panel_shows_the_evidence_so_far(tmp_path, page, policy_servers):
    campaign = tmp_path / "campaign"
    planned = spabench("plan", f"out={campaign}", *COMPARISON, timeout=120)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    words = policy_words(campaign)
    port = free_port()
    log = tmp_path / "run.log"
    proc = start_run(campaign, policy_servers, port, log)
    try:
        wait_http(f"http://127.0.0.1:{port}/api/meta", 120, proc)
        page.goto(f"http://127.0.0.1:{port}/bench")
        _phase(page, "camera_check")
        assert _panel(page)["hidden"]
        page.wait_for_function("() => !document.querySelector('#confirm-cameras').disabled", timeout=30_000)
        page.click("#confirm-cameras")
        seen = []
        for k in range(2):   # the first pair: both policies on the first evaluation
            _phase(page, "reset")
            page.wait_for_function("() => document.querySelector('#card-alias').textContent !== ''", timeout=30_000)
            seen.append(page.text_content("#card-alias"))
            panel = _panel_says(page, "keep going · 0 pairs so far")
            assert panel["evidence"] == "No pair yet." and panel["rule"].endswith("no pair yet: keep going")
            assert_blind(page, words, f"reset {k}")
            _run_attempt(page)
            panel = _panel_says(page, "keep going · 0 pairs so far")   # scoring this attempt: before it counts
            assert_blind(page, words, f"score {k}")
            page.click("#submit-score")
        assert len(set(seen)) == 2, seen
        assert set(_panel(page)["pair"].split(" vs ")) == set(seen)   # a vs b, named by their aliases
        # after the first scored pair: keep going, one pair, the terminal's own line
        _phase(page, "reset")
        panel = _panel_says(page, "keep going · 1 pair so far")
        assert re.fullmatch(r"e-value 1 of threshold [\d.]+ · discordant pairs 0 \(\S+ won 0, \S+ won 0\)",
                            panel["evidence"]), panel
        assert_blind(page, words, "reset after the first pair")
        looks = [line for line in log.read_text().splitlines() if line.startswith("comparison ")]
        assert looks[-1] == panel["rule"], (looks, panel)
        assert ": 1 pairs, discordant 0 " in looks[-1] and looks[-1].endswith(": keep going")
        assert not any(w in line for w in words for line in looks)
        page.click("#end-session")
        _phase(page, "ended", timeout=30_000)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
    assert proc.returncode == 0, log.read_text()[-3000:]


def test_no_panel_without_a_stopping_rule(tmp_path, page, policy_servers):
    """The harness's plain campaign: its scene reset shows no comparison panel (the state has none)."""
    from .conftest import session_at_reset

    campaign, proc = session_at_reset(page, tmp_path, policy_servers)
    try:
        state = page.evaluate("() => api('/api/bench/state')")
        assert state["phase"] == "reset" and "comparison" not in state
        assert _panel(page)["hidden"]
    finally:
        proc.terminate()
        proc.wait(10)
