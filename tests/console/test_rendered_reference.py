"""A rendered reference before the first attempt (issue 18, item 8), in Chromium at 1366x768.

Measured before: the first placement of each scene had only the checklist's numbers ("Reference
image: none yet"), and "turned +120 deg" had no documented zero or direction. Now the scene's first
reset shows the twin's rendering of the specification (overhead and middle, overlaid on the live
views) and the top-down placement diagram; once the evaluation's first attempt exists, the next reset
shows the real reference and the rendered one side by side. A real `spabench run operator=web` on
the twin with the scripted stand-in servers (the console's shared bench_session: its first scene reset
at 1366x768, then the second trial's reset after attempt 1); the files are the campaign's cached renders."""

from __future__ import annotations

import pytest

from spabench.operator.checklist import REFERENCE_DIR
from spabench.operator.scene_reference import RENDERED_DIR

pytestmark = [pytest.mark.sim, pytest.mark.slow]


def test_first_placement_shows_the_rendered_reference_then_both(bench_session):
    first, second = bench_session["first_placement"], bench_session["second_placement"]
    campaign = bench_session["campaign"]
    assert not bench_session["errors"], bench_session["errors"]
    assert first["banner"] and first["overlay_tools"]
    assert sorted(first["overlays"]) == [["ref-middle", "ref rendered"], ["ref-overhead", "ref rendered"]]
    assert all(n.endswith("live + rendered reference (twin)") for n in first["names"]), first["names"]
    assert first["figures"] == ["Placement diagram (seen from above; 1 cm grid)", "overhead: rendered (twin)",
                                "middle: rendered (twin)"]
    assert first["placement_px"] == [1000]
    assert "0° = the object's length points forward" in first["note"] and "counterclockwise" in first["note"]
    assert first["screenshot"].stat().st_size > 50_000
    assert not second["banner"]
    assert sorted(second["overlays"]) == [["ref-middle", "ref"], ["ref-overhead", "ref"]]  # the real reference
    assert second["figures"] == ["Placement diagram (seen from above; 1 cm grid)",
                                 "overhead: rendered (twin)", "overhead: real reference (first attempt)",
                                 "middle: rendered (twin)", "middle: real reference (first attempt)"]
    # drawn once for the scene, kept in the campaign folder: diagram, sheet and the two views
    files = sorted(p.name.rsplit(".", 2)[1] for p in (campaign / REFERENCE_DIR / RENDERED_DIR).glob("*.png"))
    assert files == ["middle", "overhead", "placement", "sheet"]
