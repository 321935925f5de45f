"""The servers part of `bench check`: each card's policy server, its protocol, identity and latency.

Which cards: the campaign's (campaign=DIR, as `run` loads them, overrides included), else the one
named as at `run` (`policy=pi05 policy.port=8001`) and every `cards.<card>.<field>=` given. Each is
checked as `run`'s pre-flight does (the port's protocol, the card against the server's metadata,
the server's identity), then timed over `requests` inference requests at a real payload: every bench
camera at its configured size (the pictures the cameras part took where there are some), the arm's
state and a prompt of the suite's kind, through the card's own client (its resize and encoding
included). From the p90 latency and the steps a chunk executes follows the control rate the server
can keep up with; below the card's control_hz the check fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from spabench.commission.record import CheckRecord
from spabench.errors import SpabenchError

PROMPT = "Place the closed white cup in the bowl."


def cards_to_check(cfg: Any) -> dict[str, Any]:
    """label -> PolicyCard: the campaign's cards (by alias when blinded) or the ones named."""
    from spabench.rollout.policies import load_cards

    if cfg.campaign_dir is not None:
        from spabench.ledger import Ledger

        with Ledger.open(cfg.campaign_dir, readonly=True) as ledger:
            trials = ledger.trials()
        blind = any(t.alias != t.policy for t in trials)
        aliases = {t.alias: t.card for t in trials}
        cards = load_cards(list(dict.fromkeys(t.card for t in trials)), cfg.cards, cfg.group_dirs("policy"), cfg.policy,
                           aliases=aliases, blind=blind)
        if blind:
            by_card = {c: a for a, c in aliases.items()}
            return {by_card[name]: card for name, card in cards.items()}
        return cards
    names = ([cfg.policy.name] if cfg.policy is not None else []) + [n for n in cfg.cards
                                                                     if cfg.policy is None or n != cfg.policy.name]
    return load_cards(names, cfg.cards, cfg.group_dirs("policy"), cfg.policy) if names else {}


def payload(bench: Any, pictures: dict[str, np.ndarray]) -> Any:
    """An observation like the rollout's: every bench camera at its configured size, the arm at home."""
    from spabench.bench.bench import Observation

    rng = np.random.default_rng(0)
    images = {}
    for name, (h, w, _) in bench.camera_shapes.items():
        picture = pictures.get(name)
        images[name] = (picture if picture is not None and picture.shape == (h, w, 3)
                        else rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    return Observation(t=time.monotonic(), state=bench.home_pose.copy(), images=images)


def check_servers(cfg: Any, bench: Any, record: CheckRecord, say: Callable[[str], None],
                  pictures: dict[str, np.ndarray]) -> None:
    """Every card's server (module docstring); one item per card."""
    try:
        cards = cards_to_check(cfg)
    except SpabenchError as exc:
        record.add("servers", "cards", False, f"the policy cards could not be loaded: {exc}")
        return
    if not cards:
        record.add("servers", "cards", True, "no policy server named (campaign=DIR, policy=<card> or "
                   "cards.<card>.port=N)", warn=True)
        return
    rows = []
    obs = payload(bench, pictures)
    for label, card in cards.items():
        row = _check_one(label, card, obs, int(cfg.requests), say)
        rows.append(row)
        if row["problem"]:
            record.add("servers", label, False, row["problem"])
        else:
            record.add("servers", label, True,
                       f"{label} at {row['endpoint']}: {row['protocol']}, p50 {row['p50_ms']} ms, p90 {row['p90_ms']} ms, "
                       f"max {row['max_ms']} ms over {row['requests']} requests; chunk {row['chunk']}, allows "
                       f"{row['control_hz_allowed']} Hz (card {card.control_hz:g} Hz)")
    record.parts["servers"] = {"rows": rows, "requests": int(cfg.requests), "prompt": PROMPT,
                               "payload": {n: list(img.shape) for n, img in obs.images.items()}}


def _check_one(label: str, card: Any, obs: Any, requests: int, say: Callable[[str], None]) -> dict[str, Any]:
    from spabench.policy.endpoints import check_protocol
    from spabench.policy.factory import make_client
    from spabench.policy.identity import identity_of
    from spabench.policy.preflight import check_card_against_server

    endpoint = f"{card.host}:{card.port}"
    row: dict[str, Any] = {"card": label, "endpoint": endpoint, "protocol": card.protocol, "identity": None,
                           "p50_ms": None, "p90_ms": None, "max_ms": None, "chunk": None, "requests": 0,
                           "control_hz_allowed": None, "card_control_hz": card.control_hz,
                           "images_sent": sorted(card.cameras), "problem": ""}
    who = f"policy card '{label}'"
    client = None
    try:
        check_protocol(card, who)
        client = make_client(card)
        try:
            metadata = dict(client.connect() or {})
        except Exception as exc:  # noqa: BLE001 - every client says why in its own words
            row["problem"] = (f"server: {who} at {endpoint} ({card.protocol}) does not answer: "
                              f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; start its server "
                              "(policies/<family>.md) or fix the card's host/port")
            return row
        check_card_against_server(card, metadata, endpoint)
        identity = identity_of(card, metadata, local_source="local")
        row["identity"] = identity.describe()
        client.reset()
        times, chunk = [], 0
        for i in range(requests):
            started = time.perf_counter()
            result = client.infer(obs, PROMPT)
            times.append(time.perf_counter() - started)
            chunk = len(result)
            if (i + 1) % max(1, requests // 4) == 0 or i + 1 == requests:
                say(f"  servers: {label} {i + 1}/{requests} requests")
    except SpabenchError as exc:
        row["problem"] = f"server: {who} at {endpoint}: {exc}"
        return row
    except Exception as exc:  # noqa: BLE001 - a server fault is the item's finding, not a crash of the check
        row["problem"] = f"server: {who} at {endpoint} failed during the latency requests: {exc}"
        return row
    finally:
        if client is not None:
            client.close()
    ms = np.array(times) * 1000.0
    executed = min(chunk, card.execute_steps or chunk)
    p90 = float(np.percentile(ms, 90))
    allowed = executed / (p90 / 1000.0) if p90 > 0 else float("inf")
    row.update({"p50_ms": round(float(np.percentile(ms, 50)), 1), "p90_ms": round(p90, 1),
                "max_ms": round(float(ms.max()), 1), "chunk": chunk, "executed_steps": executed,
                "requests": requests, "control_hz_allowed": round(allowed, 1)})
    if allowed < card.control_hz:
        row["problem"] = (f"server: {who} at {endpoint}: p90 latency {p90:.0f} ms for a chunk of {executed} executed "
                          f"steps allows {allowed:.1f} Hz, below the card's control_hz {card.control_hz:g}: the arm "
                          "would wait for actions (a faster GPU, a smaller image_size, or more execute_steps)")
    return row

