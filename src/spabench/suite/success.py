"""The Relational Placement success rule as one suite setting (conf/suite `relation`).

Two published bounds exist. The paper: the target ends within 3 inches (7.62 cm) of the reference,
centre to centre, inside the +-45 degree sector around the requested direction (`bound: paper`, the
default, because the paper is the published definition and what its numbers were scored by). The
authors' evaluation sheets: a 2-8 cm edge gap in the requested direction with the centroid direction
within +-45 degrees (`bound: sheet`). The rule travels with the loaded suite (`Suite.relation_rule`):
the checklist prints `describe()`, the twin's evaluator calls `holds()`, the generator and the
suite contracts place and check scenes with `clearly_holds()` / `clearly_fails()`, the README quotes
the default: one rule, one place. Scenes are generated for the configured rule; the two bounds
cannot always both be met (a no-movement target 2-8 cm edge to edge from a wide reference can sit
more than 7.62 cm centre to centre), so changing the bound means `spabench suite generate`.
"""

from __future__ import annotations

from dataclasses import dataclass

from spabench.config import check_fields, field_error, opt, typed_node
from spabench.suite.vocabulary import RELATION_HALF_ANGLE_DEG, RELATION_RADIUS_CM

BOUNDS = ("paper", "sheet")
SHEET_EDGE_GAP_CM = (2.0, 8.0)

__all__ = ["RelationRule", "DEFAULT_RELATION_RULE", "BOUNDS"]


@dataclass  # not frozen: Hydra overrides set fields on it
class RelationRule:
    bound: str = opt("paper", choices=BOUNDS)        # paper (centre distance) | sheet (edge gap): the published ones
    max_distance_cm: float = opt(RELATION_RADIUS_CM, gt=0)   # paper: centre distance bound
    min_edge_gap_cm: float = opt(SHEET_EDGE_GAP_CM[0], lo=0)   # sheet: edge gap range
    max_edge_gap_cm: float = SHEET_EDGE_GAP_CM[1]
    half_angle_deg: float = opt(RELATION_HALF_ANGLE_DEG, gt=0, lt=90)

    def __post_init__(self) -> None:
        check_fields(self, "conf/suite", "relation.")
        if not self.min_edge_gap_cm < self.max_edge_gap_cm:
            raise field_error("conf/suite", "relation", f"min_edge_gap_cm {self.min_edge_gap_cm:g} must be below "
                              f"max_edge_gap_cm {self.max_edge_gap_cm:g}")

    @classmethod
    def from_mapping(cls, data) -> RelationRule:
        return typed_node(cls, data, "conf/suite", "relation.")

    def holds(self, distance_cm: float, angle_deg: float, edge_gap_cm: float | None = None) -> bool:
        """Whether a target at (centre distance, angle off the direction[, edge gap]) satisfies the rule."""
        if angle_deg > self.half_angle_deg or distance_cm <= 0:
            return False
        if self.bound == "paper":
            return distance_cm <= self.max_distance_cm
        gap = edge_gap_cm if edge_gap_cm is not None else distance_cm
        return self.min_edge_gap_cm <= gap <= self.max_edge_gap_cm

    def clearly_holds(self, distance_cm: float, angle_deg: float, edge_gap_cm: float | None,
                      margin_cm: float, margin_deg: float) -> bool:
        """The rule holds with room to spare: still true if the target moved `margin_cm` / turned
        `margin_deg` the wrong way (a no-movement scene must not hinge on a millimetre)."""
        if angle_deg > self.half_angle_deg - margin_deg or distance_cm <= 0:
            return False
        if self.bound == "paper":
            return distance_cm <= self.max_distance_cm - margin_cm
        gap = edge_gap_cm if edge_gap_cm is not None else distance_cm
        return self.min_edge_gap_cm + margin_cm <= gap <= self.max_edge_gap_cm - margin_cm

    def clearly_fails(self, distance_cm: float, angle_deg: float, edge_gap_cm: float | None,
                      margin_cm: float, margin_deg: float) -> bool:
        """The rule fails with room to spare (a scene that needs movement must need it)."""
        if angle_deg >= self.half_angle_deg + margin_deg:
            return True
        if self.bound == "paper":
            return distance_cm >= self.max_distance_cm + margin_cm
        gap = edge_gap_cm if edge_gap_cm is not None else distance_cm
        return gap >= self.max_edge_gap_cm + margin_cm or gap <= self.min_edge_gap_cm - margin_cm

    def describe(self) -> str:
        """One line for checklists and docs."""
        if self.bound == "paper":
            return (f"the target ends within {self.max_distance_cm:.2f} cm (3 in) of the reference, centre to "
                    f"centre, inside the +-{self.half_angle_deg:.0f} deg sector of the requested direction "
                    f"(the paper's bound)")
        return (f"the target ends with a {self.min_edge_gap_cm:g}-{self.max_edge_gap_cm:g} cm edge gap from the "
                f"reference in the requested direction, centroid direction within +-{self.half_angle_deg:.0f} deg "
                f"(the authors' evaluation sheets)")

    def as_dict(self) -> dict:
        return {"bound": self.bound, "max_distance_cm": self.max_distance_cm,
                "min_edge_gap_cm": self.min_edge_gap_cm, "max_edge_gap_cm": self.max_edge_gap_cm,
                "half_angle_deg": self.half_angle_deg}


DEFAULT_RELATION_RULE = RelationRule()
