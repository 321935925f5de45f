"""Which trial a bench runs next, and its claim on a scene set when several benches share a ledger.

One bench (SQLite) simply takes the lowest-order pending trial. Several benches (PostgreSQL) each claim
whole scene sets (evaluation ids) with a lease that a thread beside the control loop renews, so a set
comes free only when its bench dies or hangs."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews this bench's claim on its scene set while it works (a thread beside the control loop),
    so the lease lapses only when the bench process dies or hangs."""

    def __init__(self, claims: SceneSetClaims, every_s: float):
        self.claims, self.every_s = claims, every_s
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = self.claims
        while not self._stop.wait(self.every_s):
            claim = c.claim
            if claim is None:
                continue
            try:
                if not c.ledger.renew_claim(c.bench_id, claim, c.lease_s) and c.claim == claim:
                    self.lost = claim
                    log.warning("bench %s lost its claim on scene set %s (its lease lapsed and another bench "
                                "took it over)", c.bench_id, claim)
            except Exception as exc:  # a ledger hiccup: the next renewal tries again, the lease is longer
                log.warning("lease renewal for scene set %s failed: %s", claim, exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class SceneSetClaims:
    """The scene set (evaluation id) this bench holds on a shared ledger, and the next trial to run."""

    def __init__(self, ledger: Any, bench_id: str, lease_s: float, say: Callable[[str], None]):
        self.ledger, self.bench_id, self.lease_s, self.say = ledger, bench_id, lease_s, say
        self.multi_bench = bool(ledger.storage.multi_bench)
        self.claim: str | None = None
        self.keeper: LeaseKeeper | None = None
        # a dry run: its attempts consume no trial, so the trials it ran are skipped here instead
        self.dry_run = False
        self.dry_ran: set[str] = set()
        # policies whose pending trials are not scheduled: a decided comparison (rollout.stopping)
        self.skip: set[str] = set()
        self.lost_set: tuple[str, str] | None = None   # (scene set, the bench that took it), not yet said

    def start(self) -> None:
        """On a shared ledger: say so and renew leases from now on (every third of the lease)."""
        if not self.multi_bench:
            return
        self.say(f"bench {self.bench_id}: shared ledger {self.ledger.location}; claims whole scene sets, "
                 f"lease {self.lease_s:g} s")
        self.keeper = LeaseKeeper(self, self.lease_s / 3.0)

    def stop(self) -> None:
        """Stops renewing; the claim is kept: this bench resumes it first, else it lapses."""
        if self.keeper is not None:
            self.keeper.stop()

    def lost(self, evaluation_id: str | None = None, holder: str | None = None,
             attempt_id: str | None = None) -> None:
        """Another bench took the set over: this bench's lease lapsed while it was paused or stalled.

        What this bench does in the lost set ends here: it begins nothing more there, and the attempt
        it was in (`attempt_id`, when the loss showed at its finish) stays as the taker recorded it,
        invalid ('interrupted', once) with its trial run again by the taker; this bench's finish
        wrote nothing, so the attempt is never counted twice nor complete. The loss is an event of
        the campaign (`scene_set_lost`) and is said when the next set is claimed (or none is left)."""
        eid = evaluation_id or self.claim
        self.claim = None
        if eid is None or self.lost_set is not None and self.lost_set[0] == eid:
            return
        self.lost_set = (eid, holder or "?")
        self.ledger.log_event(None, "scene_set_lost", {"evaluation_id": eid, "bench_id": self.bench_id,
                                                       "to_bench": holder, "attempt_id": attempt_id})

    def _holder(self, evaluation_id: str) -> str | None:
        return next((c["bench_id"] for c in self.ledger.claims() if c["evaluation_id"] == evaluation_id), None)

    def _say_lost(self, then: str) -> None:
        """'lost scene set X to bench B ...; moving on to scene set Y' (or: none is left)."""
        if self.lost_set is not None:
            eid, holder = self.lost_set
            self.lost_set = None
            self.say(f"bench {self.bench_id}: lost scene set {eid} to bench {holder} (its lease lapsed while "
                     f"this bench was paused or stalled); {then}")

    def next_trial(self) -> Any:
        """The next trial this bench runs. One bench (SQLite): the lowest-order pending trial. Several
        benches (PostgreSQL): the next trial of this bench's scene set; when the set is done, claim the
        next free one; when every pending set is held by another bench, wait (a dead bench's lease
        lapses and its set comes free). A dry run takes each pending trial once, in plan order, and
        claims nothing (its attempts count for no set)."""
        if self.dry_run:
            return next((t for t in self.ledger.pending_trials() if t.trial_id not in self.dry_ran), None)
        if not self.multi_bench:
            if self.skip:
                return next((t for t in self.ledger.pending_trials() if t.policy not in self.skip), None)
            return self.ledger.next_trial()
        waiting = False
        while True:
            if self.claim is not None and self.keeper is not None and self.keeper.lost == self.claim:
                self.lost(self.claim, self._holder(self.claim))
            if self.claim is not None:
                trial = self.ledger.next_trial(self.claim)
                if trial is not None:
                    return trial
                done, self.claim = self.claim, None      # first, so the lease keeper stops renewing it
                self.ledger.release_claim(self.bench_id, done)
            eid = self.ledger.claim_scene_set(self.bench_id, self.lease_s)
            if eid is not None:
                self.claim = eid
                if self.lost_set is not None:
                    self._say_lost(f"moving on to scene set {eid}")
                else:
                    self.say(f"bench {self.bench_id}: claimed scene set {eid}")
                continue
            if not self.ledger.pending_trials():
                self._say_lost("no scene set is left for it")
                return None
            self._say_lost("every other pending scene set is held by another bench")
            if not waiting:
                held = sorted({c["bench_id"] for c in self.ledger.claims() if c["bench_id"]})
                self.say(f"bench {self.bench_id}: every pending scene set is held by another bench "
                         f"({', '.join(held) or '?'}); waiting for them (a lapsed lease frees a set)")
                waiting = True
            time.sleep(min(self.lease_s / 3.0, 2.0))
