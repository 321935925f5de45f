"""Small conforming policy servers for loopback tests, written from the published wire facts.

Each one answers with deterministic actions derived from the request's joint state
(`reference_actions`: step t, joint j -> state[j] + (t + 1) * (j + 1) / 10), so a test can tell
whether joint order, chunk length and the observation that produced a reply are right. Each has
the same fault knobs (`Faults`): NaN reply, wrong shape, delay, error reply, die mid-episode.
"""

from tests.support.servers.common import Faults, reference_actions

__all__ = ["Faults", "reference_actions"]
