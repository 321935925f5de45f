"""The bench page at the operator laptop's 1366x768: "Scene ready" is in view without scrolling at
the first scene reset (the longest page: checklist, overlays, the rendered reference)."""

from __future__ import annotations

import pytest

from .conftest import screenshot, session_at_reset

pytestmark = [pytest.mark.sim, pytest.mark.slow]


@pytest.fixture
def laptop_page(browser):
    ctx = browser.new_context(viewport={"width": 1366, "height": 768})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


IN_VIEW = """(sel) => { const e = document.querySelector(sel), r = e.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return { box: [r.left, r.top, r.right, r.bottom], scrollY: window.scrollY, page: document.body.scrollHeight,
             inside: r.width > 0 && r.height > 0 && r.left >= 0 && r.top >= 0 &&
                     r.right <= window.innerWidth && r.bottom <= window.innerHeight,
             hit: hit === e || e.contains(hit) }; }"""


def test_scene_ready_is_in_view_at_1366x768(laptop_page, tmp_path, policy_servers):
    page = laptop_page
    campaign, proc = session_at_reset(page, tmp_path, policy_servers)
    try:
        page.wait_for_function("() => document.querySelector('#alignment').textContent !== ''", timeout=30_000)
        where = page.evaluate(IN_VIEW, "#ready")
        assert where["page"] > 768, where          # the page is longer than the window ...
        assert where["scrollY"] == 0 and where["inside"] and where["hit"], where   # ... and the button is in view
        page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
        where = page.evaluate(IN_VIEW, "#ready")
        assert where["inside"] and where["hit"], where
        # the last of the page is not hidden behind the bar: scrolled to the end, the end-session button shows
        assert page.evaluate(IN_VIEW, "#end-session")["hit"]
        screenshot(page, "bench_reset_1366.png", tmp_path)
    finally:
        proc.terminate()
        proc.wait(30)
