"""`spabench export lerobot campaign_dir=DIR out=OUT`: recorded episodes -> LeRobotDataset v3."""

from __future__ import annotations

import sys
from typing import Any

from spabench.errors import SpabenchError


def export_lerobot(cfg: Any, out_stream=None) -> int:
    out_stream = out_stream or sys.stdout
    campaign_dir, out = cfg.get("campaign_dir"), cfg.get("out")
    if not campaign_dir or not out:
        print("error: export lerobot needs campaign_dir=DIR (a recorded campaign) and out=DIR (a new folder)",
              file=out_stream)
        return 2
    from spabench.record.export import export_lerobot_dataset

    try:
        root = export_lerobot_dataset(campaign_dir, out)
    except SpabenchError as exc:
        print(f"error: {exc}", file=out_stream)
        return 2
    print(f"LeRobotDataset v3 written to {root}", file=out_stream)
    return 0
