"""A rendered reference before the first attempt (issue 18, item 8), in Chromium at 1366x768.

Measured before: the first placement of each scene had only the checklist's numbers ("Reference
image: none yet"), and "turned +120 deg" had no documented zero or direction. Now the scene's first
reset shows the twin's rendering of the specification (overhead and middle, overlaid on the live
views) and the top-down placement diagram; once the evaluation's first attempt exists, the next reset
shows the real reference and the rendered one side by side. A real `spabench run operator=web` on
the twin with the scripted stand-in servers; the files are the campaign's cached renders."""

from __future__ import annotations

import pytest

from spabench.operator.checklist import REFERENCE_DIR
from spabench.operator.scene_reference import RENDERED_DIR

from .conftest import _phase, screenshot, session_at_reset

pytestmark = [pytest.mark.sim, pytest.mark.slow]

LOADED = "(sel) => Array.from(document.querySelectorAll(sel)).length > 0 && " \
         "Array.from(document.querySelectorAll(sel)).every(i => i.complete && i.naturalWidth > 0)"


def _natural(page, selector: str) -> list[int]:
    return page.eval_on_selector_all(selector, "els => els.map(e => e.naturalWidth)")


def test_first_placement_shows_the_rendered_reference_then_both(tmp_path, browser, policy_servers):
    ctx = browser.new_context(viewport={"width": 1366, "height": 768})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    campaign, proc = session_at_reset(page, tmp_path, policy_servers)
    try:
        # the twin's views come from the session's background worker, while the page already shows
        # the placement diagram (a loaded machine draws them for minutes; only bounds a hang)
        page.wait_for_function("() => document.querySelectorAll('img.ref.rendered').length === 2", timeout=300_000)
        page.wait_for_function(LOADED, arg="img.ref.rendered, #rendered-grid img", timeout=30_000)
        first = {
            "banner": page.is_visible("#first-attempt"),
            "overlays": page.eval_on_selector_all("img.ref", "els => els.map(e => [e.id, e.className])"),
            "names": page.eval_on_selector_all("#overlays .name", "els => els.map(e => e.textContent)"),
            "figures": page.eval_on_selector_all("#rendered-grid figcaption", "els => els.map(e => e.textContent)"),
            "placement_px": _natural(page, "#rendered-placement"),
            "note": page.text_content("#rendered-note"),
            "overlay_tools": page.is_visible("#overlay-tools"),
        }
        shot = screenshot(page, "bench_first_placement.png", tmp_path)
        # trial 1 runs and stops; trial 2 (same evaluation, the other policy) has its real reference
        page.click("#ready")
        _phase(page, "rollout")
        page.wait_for_function("() => Number(document.querySelector('#steps').textContent) >= 30", timeout=90_000)
        page.click("#stop")
        _phase(page, "score")
        page.click("#leave")
        _phase(page, "reset")
        page.wait_for_function(LOADED, arg="#rendered-grid img, img.ref", timeout=60_000)
        second = {
            "banner": page.is_visible("#first-attempt"),
            "overlays": page.eval_on_selector_all("img.ref", "els => els.map(e => [e.id, e.className])"),
            "figures": page.eval_on_selector_all("#rendered-grid figcaption", "els => els.map(e => e.textContent)"),
        }
        page.click("#end-session")
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        ctx.close()
    assert not errors, errors
    assert first["banner"] and first["overlay_tools"]
    assert sorted(first["overlays"]) == [["ref-middle", "ref rendered"], ["ref-overhead", "ref rendered"]]
    assert all(n.endswith("live + rendered reference (twin)") for n in first["names"]), first["names"]
    assert first["figures"] == ["Placement diagram (seen from above; 1 cm grid)", "overhead: rendered (twin)",
                                "middle: rendered (twin)"]
    assert first["placement_px"] == [1000]
    assert "0° = the object's length points forward" in first["note"] and "counterclockwise" in first["note"]
    assert shot.stat().st_size > 50_000
    assert not second["banner"]
    assert sorted(second["overlays"]) == [["ref-middle", "ref"], ["ref-overhead", "ref"]]  # the real reference
    assert second["figures"] == ["Placement diagram (seen from above; 1 cm grid)",
                                 "overhead: rendered (twin)", "overhead: real reference (first attempt)",
                                 "middle: rendered (twin)", "middle: real reference (first attempt)"]
    # drawn once for the scene, kept in the campaign folder: diagram, sheet and the two views
    files = sorted(p.name.rsplit(".", 2)[1] for p in (campaign / REFERENCE_DIR / RENDERED_DIR).glob("*.png"))
    assert files == ["middle", "overhead", "placement", "sheet"]
