"""`spabench export lerobot campaign_dir=DIR out=OUT [reencode=true codec=libx264 crf=23]
[include_invalid=true] [repo_id=org/name]`: recorded episodes -> LeRobotDataset v3."""

from __future__ import annotations

import sys
import time
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

    started = time.perf_counter()
    try:
        report = export_lerobot_dataset(campaign_dir, out, repo_id=cfg.get("repo_id"),
                                        include_invalid=bool(cfg.get("include_invalid", False)),
                                        reencode=bool(cfg.get("reencode", False)),
                                        codec=str(cfg.get("codec", "libx264")), crf=int(cfg.get("crf", 23)))
    except SpabenchError as exc:
        print(f"error: {exc}", file=out_stream)
        return 2
    print(f"LeRobotDataset v3 written to {report.root}: {report.episodes} episode(s), {report.frames} frames; "
          f"{report.copied} camera stream(s) copied, {report.reencoded} re-encoded, "
          f"{time.perf_counter() - started:.1f} s"
          + (f"; skipped {', '.join(report.skipped)}" if report.skipped else ""), file=out_stream)
    return 0
