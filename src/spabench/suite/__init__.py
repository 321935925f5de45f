"""The benchmark as data: objects, task matrices, prompts, frozen scenes, bench geometry, and the design
contracts that make them a valid Spa-Bench suite. Imports neither LeRobot nor torch.
"""

from spabench.suite.contracts import RULES, Violation, check_suite, validate_suite
from spabench.suite.loader import load_suite
from spabench.suite.resolvers import resolve_targets
from spabench.suite.spec import ArgumentSpec, ConceptSpec, Suite, SuiteManifest, TaskSpec

__all__ = [
    "load_suite",
    "Suite",
    "TaskSpec",
    "ArgumentSpec",
    "ConceptSpec",
    "SuiteManifest",
    "validate_suite",
    "check_suite",
    "Violation",
    "RULES",
    "resolve_targets",
]
