"""Who may talk to a spabench policy server: loopback, or a client holding the API key (used by the servers and the clients alike).

A server bound to a non-loopback address without an API key lets anyone on the network drive the
arm's policy; it is refused unless the operator says so explicitly (`allow_insecure=true`).
"""

from __future__ import annotations

import ipaddress

from spabench.errors import ConfigError, shown

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    host = str(host).strip("[]")
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_port(port, command: str) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"{command}: port is {shown(port)} (allowed: an integer 0..65535)")
    return port


def check_bind(host: str, api_key, allow_insecure, command: str) -> None:
    """Refuse a non-loopback bind without an API key unless `allow_insecure` is true."""
    if not isinstance(host, str) or not host:
        raise ConfigError(f"{command}: host is {shown(host)} (allowed: an address such as 127.0.0.1)")
    if allow_insecure not in (None, True, False):
        raise ConfigError(f"{command}: allow_insecure is {shown(allow_insecure)} (allowed: true, false)")
    if is_loopback(host) or api_key:
        return
    if not allow_insecure:
        raise ConfigError(
            f"{command}: host={host} listens beyond this machine without an api_key, so anyone on the "
            "network could drive this policy. Set api_key=<secret> (clients send it), bind host=127.0.0.1 "
            "(reach it through an SSH tunnel), or accept the risk explicitly with allow_insecure=true")


_WARNED: set[str] = set()


def warn_plain_key(url: str, api_key, policy: str) -> bool:
    """Warn once per URL when an API key would travel unencrypted (ws:// or http://) to another host."""
    import logging
    from urllib.parse import urlsplit

    if not api_key:
        return False
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "http") or is_loopback(parts.hostname or ""):
        return False
    if url in _WARNED:
        return False
    _WARNED.add(url)
    logging.getLogger("spabench.policy").warning(
        "policy '%s': the API key is sent unencrypted to %s (%s://); anyone on the path can read it. "
        "Use wss:// or https:// (or an SSH tunnel to 127.0.0.1)", policy, parts.hostname, parts.scheme)
    return True
