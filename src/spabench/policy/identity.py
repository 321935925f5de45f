"""Which server answered: a checkpoint digest and a digest of what the server advertised.

The identity of a policy server is what a campaign pins at its first connection and compares at
every later one, so that a server restarted with another checkpoint is never recorded under the
planned policy. Three facts make it up:

- the checkpoint digest, where it is known: the server's own (`spabench serve lerobot` advertises
  `checkpoint_digest`), else the digest of the card's local checkpoint (`checkpoint_digest()` below,
  over the folder's files), computed by spabench when it launched the server or, for a server
  started by hand or by another campaign's `servers up`, when it connects;
- a digest of the metadata the server advertised at connect (locations the client added, such as
  its URL, are left out: the same server reached through another tunnel is the same server);
- the protocol generation (the card's protocol, plus the GR00T wire generation).

Who started the server (spabench, a person, another campaign), its pid and command line are not part
of it: they are provenance (the `server_started` events), so one unchanged checkpoint is one identity.

Pure functions, no I/O beyond reading the checkpoint's files.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from spabench.errors import ConfigError

__all__ = ["ServerIdentity", "checkpoint_digest", "metadata_digest", "identity_of", "DIGEST_KEY",
           "is_digest"]

DIGEST_KEY = "checkpoint_digest"      # the metadata key a server advertises its checkpoint digest under
# Keys the clients add to the metadata that say where the server was reached, not what it is.
LOCATION_KEYS: frozenset[str] = frozenset({"url", "address", "endpoint"})
# Metadata keys that name the wire generation of a protocol (GR00T: n1.5 / n1.6 / n1.7).
GENERATION_KEYS: tuple[str, ...] = ("groot_version",)
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_CHUNK = 1 << 20


def is_digest(value: Any) -> bool:
    return isinstance(value, str) and bool(_DIGEST.match(value))


def checkpoint_digest(path: str | Path) -> str:
    """sha256 over a checkpoint's files (relative path, size and content of each, in path order).

    A folder is walked recursively; hidden entries (".cache", ".git") are skipped. A single file
    (e.g. a .pth) is hashed the same way with its own name. Renaming or moving the folder keeps the
    digest; changing, adding or removing a file changes it."""
    root = Path(path).expanduser()
    if root.is_file():
        files = [(root.name, root)]
    elif root.is_dir():
        files = sorted((p.relative_to(root).as_posix(), p) for p in root.rglob("*")
                       if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))
    else:
        raise ConfigError(f"checkpoint {root}: no such file or folder (a local checkpoint is needed to "
                          "compute its digest)")
    if not files:
        raise ConfigError(f"checkpoint {root}: the folder holds no files")
    outer = hashlib.sha256()
    for rel, file in files:
        inner = hashlib.sha256()
        with open(file, "rb") as fh:
            for block in iter(lambda: fh.read(_CHUNK), b""):
                inner.update(block)
        outer.update(f"{rel}\0{file.stat().st_size}\0{inner.hexdigest()}\n".encode())
    return "sha256:" + outer.hexdigest()


def _plain(value: Any) -> Any:
    """JSON-able form of metadata values (numpy arrays and scalars, bytes, tuples)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": hashlib.sha256(bytes(value)).hexdigest()}
    if hasattr(value, "tolist"):   # numpy array or scalar
        return _plain(value.tolist())
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def metadata_digest(metadata: Mapping[str, Any]) -> str:
    """sha256 of the advertised metadata in canonical JSON, without the client's location keys."""
    kept = {k: v for k, v in (metadata or {}).items() if k not in LOCATION_KEYS}
    text = json.dumps(_plain(kept), sort_keys=True, separators=(",", ":"), allow_nan=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class ServerIdentity:
    """What answered for one card. `digest_source` (provenance, not compared): "server" (advertised),
    "launch" (computed by spabench from the checkpoint it launched), "local" (computed from the card's
    local checkpoint for a server spabench did not launch) or None (unknown)."""

    protocol: str
    metadata_digest: str
    checkpoint_digest: str | None = None
    digest_source: str | None = None

    def key(self) -> tuple[str, str, str | None]:
        """The facts compared between connections."""
        return (self.protocol, self.metadata_digest, self.checkpoint_digest)

    def differs_from(self, other: ServerIdentity) -> bool:
        return self.key() != other.key()

    def describe(self) -> str:
        ckpt = (f"checkpoint {_short(self.checkpoint_digest)} ({self.digest_source})"
                if self.checkpoint_digest else "checkpoint unknown")
        return f"{ckpt}, metadata {_short(self.metadata_digest)}, protocol {self.protocol}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerIdentity:
        return cls(protocol=str(data["protocol"]), metadata_digest=str(data["metadata_digest"]),
                   checkpoint_digest=data.get("checkpoint_digest"), digest_source=data.get("digest_source"))


def _short(digest: str | None) -> str:
    return "unknown" if not digest else digest[: len("sha256:") + 12]


def identity_of(card: Any, metadata: Mapping[str, Any], local_digest: str | None = None,
                local_source: str = "launch") -> ServerIdentity:
    """The identity of the server that answered `card` with `metadata`.

    `local_digest`: the digest of the card's checkpoint computed on this machine, `local_source` says
    when ("launch": as spabench launched the server; "local": at connect, for a server spabench did not
    launch). A card naming `checkpoint_digest` must agree with every digest known (ConfigError
    otherwise), and a server advertising another digest than the local one is refused the same way."""
    advertised = metadata.get(DIGEST_KEY) if isinstance(metadata, Mapping) else None
    advertised = advertised if is_digest(advertised) else None
    where = f"policy card '{card.name}'"
    if advertised and local_digest and advertised != local_digest:
        said = "spabench launched it from" if local_source == "launch" else "the card's local checkpoint is"
        raise ConfigError(f"{where}: the server advertises checkpoint {_short(advertised)}, but {said} "
                          f"checkpoint {_short(local_digest)}; nothing has moved")
    expected = getattr(card, "checkpoint_digest", None)
    known = advertised or local_digest
    if expected and known and known != expected:
        raise ConfigError(f"{where}: field 'checkpoint_digest' is {_short(expected)}, but the server's "
                          f"checkpoint is {_short(known)} ({'server' if advertised else local_source}); "
                          "start the checkpoint the card names, or fix the card; nothing has moved")
    generation = next((f"{card.protocol}/{metadata[k]}" for k in GENERATION_KEYS
                       if isinstance(metadata, Mapping) and metadata.get(k)), card.protocol)
    return ServerIdentity(protocol=generation, metadata_digest=metadata_digest(metadata),
                          checkpoint_digest=known,
                          digest_source="server" if advertised else local_source if local_digest else None)
