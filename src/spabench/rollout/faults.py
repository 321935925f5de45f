"""Which infrastructure fault ended an episode. Every one makes the attempt invalid (re-run), never a
policy failure. Classified by exception type so that the loop needs no knowledge of each backend."""

from __future__ import annotations

from spabench.errors import ProtocolError, SafetyError


def _policy_fault_types() -> tuple[type, ...]:
    try:
        from spabench.policy.client import PolicyFault
    except ImportError:  # pragma: no cover - the policy module is part of the package
        return ()
    return (PolicyFault,)


def _names(exc: BaseException) -> str:
    return " ".join(c.__name__.lower() for c in type(exc).__mro__)


def classify(exc: BaseException, where: str) -> str:
    """An invalid reason from vocabulary `rollout.types.INVALID_REASONS`.

    where: "policy" (broker/client calls) or "bench" (observe/act).
    """
    if isinstance(exc, ProtocolError):
        return "protocol_error"
    if isinstance(exc, _policy_fault_types()):
        return "server_lost"
    if isinstance(exc, SafetyError):
        return "safety_error"
    if where == "policy":
        return "protocol_error" if "protocol error" in str(exc).lower() else "server_lost"
    component = getattr(exc, "component", None)  # spabench.bench.errors.BenchFault
    if isinstance(component, str):
        return "camera_lost" if component.startswith("camera") else "bus_error"
    names = _names(exc)
    text = f"{names} {exc}".lower()
    if "camera" in text or "frame" in names:
        return "camera_lost"
    return "bus_error"


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]
