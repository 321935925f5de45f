"""`spabench export lerobot campaign_dir=DIR out=OUT [reencode=true codec=libx264 crf=23]
[include_invalid=true] [repo_id=org/name]`: recorded episodes -> LeRobotDataset v3."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from spabench.errors import SpabenchError
from spabench.paths import campaign_folder

if TYPE_CHECKING:  # annotations only: spabench.config builds the groups and sits above every package
    from spabench.config import SpabenchConfig


def export_lerobot(cfg: SpabenchConfig, out_stream=None) -> int:
    out_stream = out_stream or sys.stdout
    if cfg.campaign_dir is None or cfg.out is None:
        print("error: export lerobot needs campaign=DIR (a recorded campaign) and out=DIR (a new folder)",
              file=out_stream)
        return 2
    from spabench.record.export import export_lerobot_dataset

    started = time.perf_counter()
    try:
        report = export_lerobot_dataset(campaign_folder(cfg.campaign_dir, "export lerobot"), cfg.out,
                                        repo_id=cfg.repo_id, include_invalid=cfg.include_invalid,
                                        reencode=cfg.reencode, codec=cfg.codec, crf=cfg.crf)
    except SpabenchError as exc:
        print(f"error: {exc}", file=out_stream)
        return 2
    print(f"LeRobotDataset v3 written to {report.root}: {report.episodes} episode(s), {report.frames} frames; "
          f"{report.copied} camera stream(s) copied, {report.reencoded} re-encoded, "
          f"{time.perf_counter() - started:.1f} s"
          + (f"; skipped {', '.join(report.skipped)}" if report.skipped else ""), file=out_stream)
    return 0
