"""Turning a suite + campaign config into a trial plan (no LeRobot, no torch).

Per policy and condition the matched scene subsets, evaluation ids shared across policies, a seeded
counterbalanced run order and blind aliases; written into a new campaign ledger.
"""

from spabench.plan.config import CampaignConfig, PolicyEntry, campaign_from_mapping
from spabench.plan.planner import (
    Evaluation,
    Plan,
    build_plan,
    config_hash,
    evaluation_ids,
    hash_for_campaign_dir,
    open_campaign,
    write_campaign,
)

__all__ = [
    "CampaignConfig", "PolicyEntry", "campaign_from_mapping", "Evaluation", "Plan", "build_plan",
    "config_hash", "evaluation_ids", "hash_for_campaign_dir", "open_campaign", "write_campaign",
]
