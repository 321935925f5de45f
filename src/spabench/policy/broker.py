"""The action-chunk broker: a queue of actions fed by a background request thread.

The control loop never waits for the network. Each tick it hands the broker the latest observation
(`submit_observation`) and takes one action (`next_action`). When no more than
`card.request_threshold` actions are queued and no request is in flight, the observation is sent
to the policy server on the broker's own thread, so the next chunk is computed while the current
one executes; its first `card.execute_steps` actions are appended behind the ones still queued.
With threshold 0 the next request goes out when the queue runs dry and the loop holds meanwhile
(`next_action()` returns None), which is openpi's stock behaviour.

Every episode has a token. `start_episode` clears the queue, resets the policy session on the
request thread (after any request still in flight), and a reply that belongs to an earlier episode
is dropped. A failure on the request thread is kept and raised as `PolicyFault` by the next
`next_action()` call, until the next episode starts.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spabench.errors import ProtocolError
from spabench.policy.client import ActionChunk, PolicyClient, PolicyFault

log = logging.getLogger(__name__)

__all__ = ["ActionBroker"]

_MAX_CHUNK_RECORDS = 256


@dataclass
class _ResetJob:
    episode: int
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


@dataclass
class _InferJob:
    episode: int
    obs: Any
    instruction: str


class ActionBroker:
    """Background chunk requests for one client; one episode at a time."""

    def __init__(self, client: PolicyClient, card) -> None:
        self.client = client
        self.card = card
        self._cond = threading.Condition()
        self._queue: deque[tuple[np.ndarray, int]] = deque()
        self._episode = 0
        self._instruction: str | None = None
        self._reset_job: _ResetJob | None = None
        self._infer_job: _InferJob | None = None
        self._in_flight_episode: int | None = None
        self._fault: BaseException | None = None
        self._stopped = False
        self.chunks: dict[int, ActionChunk] = {}   # chunk_id -> timing of this episode's chunks
        self.requests = 0                          # requests sent this episode
        self.stale_dropped = 0                     # replies dropped because their episode ended
        self._thread = threading.Thread(target=self._run, name=f"policy-broker-{card.name}",
                                        daemon=True)
        self._thread.start()

    # -- control-loop side -----------------------------------------------------------------
    def start_episode(self, instruction: str) -> None:
        """New episode: drop queued actions, reset the policy session, arm the first request.

        Blocks until the reset is done (it runs on the request thread, after any request of the
        previous episode still in flight); raises PolicyFault when it fails.
        """
        with self._cond:
            if self._stopped:
                raise PolicyFault("action broker is stopped")
            self._episode += 1
            job = _ResetJob(self._episode)
            self._instruction = str(instruction)
            self._queue.clear()
            self._infer_job = None
            self._fault = None
            self._reset_job = job
            self.chunks = {}
            self.requests = 0
            self._cond.notify_all()
        limit = 4 * self.card.timeout_s + 10.0
        if not job.done.wait(limit):
            raise PolicyFault(f"policy '{self.card.name}': episode reset did not finish within {limit:g} s")
        if job.error is not None:
            raise _as_fault(job.error, self.card.name, "reset") from job.error

    def submit_observation(self, obs: Any) -> bool:
        """Offer the latest observation; returns True when it became a request."""
        with self._cond:
            if self._instruction is None:
                raise RuntimeError("submit_observation() before start_episode()")
            if self._stopped or self._fault is not None:
                return False
            if self._in_flight_episode == self._episode or self._infer_job is not None:
                return False
            if len(self._queue) > self.card.request_threshold:
                return False
            self._infer_job = _InferJob(self._episode, obs, self._instruction)
            self._cond.notify_all()
            return True

    def next_action(self) -> tuple[np.ndarray, int] | None:
        """The next (action (6,), chunk_id), or None when the queue is empty (the loop holds)."""
        with self._cond:
            if self._fault is not None:
                raise _as_fault(self._fault, self.card.name, "inference") from self._fault
            if not self._queue:
                return None
            action, chunk_id = self._queue.popleft()
            return action.copy(), chunk_id

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._queue)

    @property
    def in_flight(self) -> bool:
        """A request for the current episode is waiting to be sent or for its reply."""
        with self._cond:
            return self._infer_job is not None or self._in_flight_episode == self._episode

    @property
    def episode(self) -> int:
        return self._episode

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the request thread; a request in flight is aborted by closing the client."""
        with self._cond:
            self._stopped = True
            busy = self._in_flight_episode is not None
            self._cond.notify_all()
        if busy:
            try:
                self.client.close()
            except Exception:  # aborting: the close error is of no further use
                log.debug("client close during broker stop failed", exc_info=True)
        self._thread.join(timeout_s if timeout_s is not None else self.card.timeout_s + 2.0)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- request thread --------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self._stopped or self._reset_job or self._infer_job):
                    self._cond.wait()
                if self._stopped:
                    return
                reset, infer = self._reset_job, self._infer_job
                if reset is not None:       # a reset goes first; the inference job waits for the next turn
                    self._reset_job, infer = None, None
                elif infer is not None:
                    self._infer_job = None
                    self._in_flight_episode = infer.episode
                    self.requests += 1
            if reset is not None:
                self._do_reset(reset)
            elif infer is not None:
                self._do_infer(infer)

    def _do_reset(self, job: _ResetJob) -> None:
        try:
            self.client.reset()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of start_episode
            job.error = exc
        finally:
            job.done.set()

    def _do_infer(self, job: _InferJob) -> None:
        chunk: ActionChunk | None = None
        error: BaseException | None = None
        try:
            chunk = self.client.infer(job.obs, job.instruction)
        except Exception as exc:  # noqa: BLE001 - surfaced on the loop's next next_action()
            error = exc
        with self._cond:
            self._in_flight_episode = None
            if job.episode != self._episode or self._stopped:
                self.stale_dropped += 1
                log.debug("dropped a reply of episode %d (now %d)", job.episode, self._episode)
            elif error is not None:
                self._fault = error
            elif chunk is not None:
                actions = np.asarray(chunk.actions, dtype=np.float64)[: self.card.execute_steps]
                self._queue.extend((row, chunk.chunk_id) for row in actions)
                self.chunks[chunk.chunk_id] = chunk
                if len(self.chunks) > _MAX_CHUNK_RECORDS:
                    self.chunks.pop(next(iter(self.chunks)))
            self._cond.notify_all()


def _as_fault(exc: BaseException, name: str, what: str) -> PolicyFault:
    if isinstance(exc, PolicyFault):
        return PolicyFault(str(exc))
    if isinstance(exc, ProtocolError):
        return PolicyFault(f"policy '{name}' {what}: protocol error: {exc}")
    return PolicyFault(f"policy '{name}' {what} failed: {type(exc).__name__}: {exc}")
