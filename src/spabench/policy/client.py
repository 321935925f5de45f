"""What every policy client offers the rollout, whatever its wire protocol.

A client turns one observation and the instruction into one `ActionChunk`: joint-order actions,
already cut to the card's `execute_steps`, with timing. Infrastructure trouble (server unreachable,
timeout, connection lost, server-side exception) is a `PolicyFault`: the attempt is invalid and
re-run, never scored as a policy failure. A reply that breaks the protocol (wrong shape, NaN) is a
`spabench.errors.ProtocolError`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import numpy as np

from spabench.errors import ProtocolError, SpabenchError

__all__ = ["PolicyClient", "ActionChunk", "PolicyFault", "ProtocolError"]


class PolicyFault(SpabenchError):
    """The policy server could not be used (unreachable, timed out, closed, raised): invalid attempt."""

    grpc_code: str | None = None   # the gRPC status name, for a fault a gRPC call raised


@dataclass
class ActionChunk:
    """Actions for the next `len(actions)` control ticks, in `vocabulary.JOINTS` order.

    `sent_t`/`received_t` are `time.monotonic()` stamps of the request; `rtt_s` their difference;
    `server_ms` the server's own inference time when it reports one.
    """

    actions: np.ndarray
    chunk_id: int
    sent_t: float
    received_t: float
    rtt_s: float
    server_ms: float | None = None

    def __len__(self) -> int:
        return int(self.actions.shape[0])


class PolicyClient(abc.ABC):
    """A connection to one policy server, driven by a `PolicyCard`.

    Life cycle: `connect()` once (returns the server's metadata), `reset()` at every episode start,
    `infer()` per chunk, `close()` at the end. Clients are used from one thread at a time (the
    broker's request thread); `close()` may be called from another thread to abort.
    """

    card: Any
    metadata: dict
    # Between trials the session checks the server's identity with a fresh connection (its metadata on
    # connect). False where a connection is not cheap or the identity is the client's own choice
    # (LeRobot's gRPC server loads whatever checkpoint the client names at connect).
    identity_probe_between_trials: bool = True

    @abc.abstractmethod
    def connect(self) -> dict:
        """Open the connection and return the server's metadata (may be empty)."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Start a new episode on the server (new session or an explicit reset message)."""

    @abc.abstractmethod
    def infer(self, obs: Any, instruction: str) -> ActionChunk:
        """One action chunk for this observation; raises PolicyFault or ProtocolError."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection; idempotent."""

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
