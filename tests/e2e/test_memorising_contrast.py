"""The demo's memorising stand-in still shows the benchmark's signature on the regenerated suite:
ID > OOD and direct > OOD, per task pooled over every scene (decisions judged against each scene's
goal; the physics run of `make demo` is covered by test_demo_twin)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from spabench.standins.grounding import Grounder
from spabench.suite import resolvers
from tests.sim.payload import payload_from_spec
from tests.standins.test_scripted import reached


@pytest.fixture(scope="module")
def suite():
    from tests.sim.inventory import load_checkout_suite

    return load_checkout_suite()


def test_memorising_id_beats_ood_and_direct_beats_ood(suite):
    hits, totals = Counter(), Counter()
    for scene in suite.scenes.values():
        if scene.condition not in ("id", "ood"):
            continue
        payload = payload_from_spec(scene, suite.objects, suite.geometry)
        d = Grounder(suite, "memorising", np.random.default_rng(sum(map(ord, scene.scene_id)))).decide(
            scene.instructions.spatial, payload)
        hits[scene.condition] += reached(d, scene.goal, payload)
        totals[scene.condition] += 1
        if scene.matched_group:
            carrier = next((s for s in suite.scenes_for(scene.task, "direct")
                            if s.matched_group == scene.matched_group), scene)
            p2 = payload_from_spec(carrier, suite.objects, suite.geometry)
            d2 = Grounder(suite, "memorising", np.random.default_rng(0)).decide(carrier.instructions.direct, p2)
            hits["direct"] += reached(d2, resolvers.direct_goal(carrier), p2)
            totals["direct"] += 1
    rate = {c: hits[c] / totals[c] for c in totals}
    assert totals == {"id": 120, "ood": 300, "direct": 120}
    assert rate["id"] > rate["ood"] + 0.3 and rate["direct"] > rate["ood"] + 0.3, rate
