"""Shared set-up for the end-to-end runs: emulated arm, small replay cameras, an openpi server,
a one-trial ledger, and the typed config `run(cfg)` receives."""

from __future__ import annotations

import dataclasses
import shutil
import threading
from pathlib import Path

import numpy as np
import yaml

from spabench.ledger import Ledger, TrialRow
from spabench.rollout.commands import RunConfig
from spabench.serve.openpi_server import OpenPiServer
from spabench.suite.vocabulary import CAMERAS
from tests.support.feetech_bus import DEFAULT_CALIBRATION_FILE

ROBOT_ID = "spabench_follower"
HORIZON = 10


def trial_rows(n: int = 1, card: str = "itest") -> list[TrialRow]:
    return [TrialRow(trial_id=f"E{i:04d}-P1", evaluation_id=f"E{i:04d}", policy=card, card=card, alias="P1",
                     task="object_state", condition="id", scene_id=f"object_state-id-{i + 1:03d}",
                     scene_condition="id", matched_group=None, cell="upside_down|white_cup", withheld=False,
                     instruction="Place the closed white cup in the bowl.", instruction_variant="original",
                     timer_s=60.0, order=i) for i in range(n)]


def make_campaign(tmp_path: Path, n: int = 1) -> Path:
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    Ledger.create(campaign / "ledger.sqlite", trial_rows(n), "itest-hash", {"campaign": "itest"}).close()
    calib = tmp_path / "calibration"
    calib.mkdir()
    shutil.copy(DEFAULT_CALIBRATION_FILE, calib / f"{ROBOT_ID}.json")
    return campaign


class WaveServer:
    """OpenPiServer with a deterministic policy: every chunk steps shoulder_pan and elbow_flex away
    from the measured state by a fixed ramp. Fault switches: `nan_after`, `bad_shape_after`."""

    def __init__(self, nan_after: int | None = None, bad_shape_after: int | None = None, delay_s: float = 0.0):
        self.nan_after, self.bad_shape_after, self.delay_s = nan_after, bad_shape_after, delay_s
        self.calls = 0
        self.seen_keys: set[str] = set()
        self.server = OpenPiServer(self.infer, {"policy": "wave", "horizon": HORIZON}, port=0)

    def infer(self, obs: dict) -> dict:
        import time

        self.calls += 1
        self.seen_keys |= set(obs)
        time.sleep(self.delay_s)
        state = np.asarray(obs["observation/state"], dtype=np.float64)
        actions = np.tile(state, (HORIZON, 1))
        ramp = np.linspace(1.0, 4.0, HORIZON)
        actions[:, 0] += ramp
        actions[:, 2] -= ramp
        if self.nan_after is not None and self.calls > self.nan_after:
            actions[3, 1] = np.nan
        if self.bad_shape_after is not None and self.calls > self.bad_shape_after:
            actions = actions[:, :4]
        return {"actions": actions.astype(np.float32), "server_timing": {"infer_ms": 1.0}}

    def __enter__(self) -> WaveServer:
        self.server.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop()

    @property
    def port(self) -> int:
        return self.server.port


def plan_timer(campaign: Path, timer_s: float) -> None:
    """The test campaign plans `timer_s` for every trial not yet complete (a counted run may not
    change the planned timer; see rollout.binding.check_timer_binding). A SQLite ledger only."""
    import sqlite3

    path = campaign / "ledger.sqlite"
    if not path.is_file():
        return
    with sqlite3.connect(path) as db:
        db.execute("UPDATE trials SET timer_s = ? WHERE trial_id NOT IN (SELECT trial_id FROM attempts "
                   "WHERE status = 'complete')", (float(timer_s),))
    db.close()


def make_cfg(campaign: Path, bus_port: str, policy_port: int, **kwargs) -> RunConfig:
    """The typed config `run(cfg)` receives (see cfg_data for the keys)."""
    return run_config(cfg_data(campaign, bus_port, policy_port, **kwargs))


def run_config(data: dict) -> RunConfig:
    """RunConfig from cfg_data's mapping. `run` reads no policy group: it loads each planned card by name
    from a lab's folder (config_dir/policy/) or conf/policy/, so the test card (data["policy"], a mapping
    or a PolicyCard) is written where a lab keeps its cards: config_dir/policy/<name>.yaml, config_dir
    defaulting to a `lab` folder next to the campaign."""
    data = dict(data)
    card = data.pop("policy", None)
    if card is not None:
        if dataclasses.is_dataclass(card):
            card = dataclasses.asdict(card)
        elif not isinstance(card, dict):   # an OmegaConf node
            from omegaconf import OmegaConf

            card = OmegaConf.to_container(card, resolve=True)
        lab = Path(data.get("config_dir") or Path(data["campaign_dir"]).parent / "lab")
        (lab / "policy").mkdir(parents=True, exist_ok=True)
        (lab / "policy" / f"{card['name']}.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
        data["config_dir"] = str(lab)
    return RunConfig.from_mapping(data)


def cfg_data(campaign: Path, bus_port: str, policy_port: int, *, timer_s: float = 2.0, width: int = 32,
             height: int = 24, operator: dict | None = None, ema_alpha: float | None = 0.25,
             bench: dict | None = None, policy: dict | None = None, **top) -> dict:
    calib = campaign.parent / "calibration"
    plan_timer(campaign, timer_s)
    cfg = {
        "campaign_dir": str(campaign),
        "max_trials": None,
        "bench": {
            "type": "so101", "port": bus_port, "robot_id": ROBOT_ID, "calibration_dir": str(calib),
            "cameras": {c: {"type": "spabench_replay", "index_or_path": "pattern", "width": width,
                            "height": height, "fps": 30} for c in CAMERAS},
            "fps": 30, "max_relative_target": 10.0, "home_speed_deg_s": 120.0, **(bench or {}),
        },
        "operator": {"type": "unattended", "status_line": False, "keys": False,
                     "wait_videos_s": 60, **(operator or {})},
        "policy": {"name": "itest", "protocol": "openpi", "host": "127.0.0.1", "port": policy_port,
                   "horizon": HORIZON, "execute_steps": HORIZON, "control_hz": 30, "timer_s": 60,
                   "timeout_s": 3.0, "ema_alpha": ema_alpha, "request_threshold": 2,
                   "cameras": {"observation/image": "middle", "observation/wrist_image": "wrist"},
                   **(policy or {})},
        "suite": {"root": "tasks", "hardware": "hardware"},
    }
    cfg.update(top)
    return cfg


def after(seconds: float, fn, *args) -> threading.Timer:
    t = threading.Timer(seconds, fn, args=args)
    t.daemon = True
    t.start()
    return t


def when(predicate, fn, *args, timeout: float = 60.0) -> threading.Thread:
    """Call fn(*args) on a background thread as soon as predicate() holds."""
    import time

    def watch():
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                fn(*args)
                return
            time.sleep(0.01)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t
