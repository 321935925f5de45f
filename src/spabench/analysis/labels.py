"""Display names: how a policy is named in figures, report.md and report.html (the data keep ids).

Defaults are the names the paper prints (spabench.suite.vocabulary.POLICY_LABELS); `display_names.<id>=...` in the report's config
overrides any of them (a lab may prefer "GR00T-N1.7 F-LLM" to "GR00T Frozen LLM").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spabench.suite.vocabulary import POLICY_LABELS


def display_names(policies: Iterable[str], overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """{policy id: display name} for `policies`: override, else published name, else the id itself."""
    overrides = dict(overrides or {})
    names = {}
    for policy in policies:
        name = overrides.get(policy) or POLICY_LABELS.get(policy) or policy
        names[policy] = " ".join(str(name).split())
    return names
