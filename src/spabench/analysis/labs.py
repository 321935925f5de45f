"""Labs and benches as a factor: success per lab (or bench) with Wilson intervals, and whether the
labs' rates of one policy x condition differ beyond chance.

The factor is the outcomes' `lab` column, or for a campaign run on several benches the ledger's
`bench_id`. Rates pool the tasks of a condition (task=all). The heterogeneity test compares the
labs' success counts of one policy x condition: Fisher's exact test (two-sided) for two labs, the
Pearson chi-square test of homogeneity for more (scipy.stats; no continuity correction), p = 1 when
every rollout of the cell succeeded or every one failed. A lab is flagged when p < 0.05 and its
adjusted standardised residual exceeds 1.96 in size; the p-values are not adjusted for the number
of cells tested, so about one cell in twenty is flagged by chance alone.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from scipy.stats import chi2_contingency, fisher_exact

from spabench.analysis.exact import wilson
from spabench.analysis.outcomes import LAB, policies_in_order
from spabench.analysis.rates import condition_rollouts
from spabench.escaping import markdown_text
from spabench.suite.vocabulary import CONDITIONS

BENCH = "bench_id"
PLURAL = {"lab": "labs", "bench": "benches"}
ALPHA = 0.05
FACTOR_COLUMNS = ("policy", "condition", "successes", "trials", "rate", "wilson_low", "wilson_high")
HETEROGENEITY_COLUMNS = ("policy", "condition", "labs", "trials", "test", "statistic", "p_value", "flagged")
FISHER = "Fisher exact (two-sided)"
CHI_SQUARE = "Pearson chi-square (homogeneity)"


def factors_of(outcomes: pd.DataFrame) -> list[str]:
    """The factors to split by: `lab` when the outcomes name more than one lab, `bench_id` when a
    campaign ran on more than one bench."""
    return [c for c in (LAB, BENCH) if c in outcomes.columns and len(names_of(outcomes, c)) > 1]


def names_of(outcomes: pd.DataFrame, column: str) -> list[str]:
    """The factor's levels in order of first appearance (an empty cell is '?')."""
    return list(dict.fromkeys(outcomes[column].fillna("").astype(str).str.strip().replace("", "?")))


def factor_table(outcomes: pd.DataFrame, column: str, alpha: float = ALPHA) -> pd.DataFrame:
    """Successes, trials, rate and Wilson interval per policy x condition x level (task=all)."""
    labelled = condition_rollouts(outcomes)
    labelled = labelled[labelled["condition"].isin(CONDITIONS)]
    if labelled.empty:
        return pd.DataFrame(columns=[column, *FACTOR_COLUMNS])
    labelled = labelled.assign(**{column: labelled[column].fillna("").astype(str).str.strip().replace("", "?")})
    table = (labelled.groupby(["policy", "condition", column], sort=False)["success"]
             .agg(successes="sum", trials="size").reset_index())
    table["successes"] = table["successes"].astype(int)
    table["rate"] = table["successes"] / table["trials"]
    table["wilson_low"], table["wilson_high"] = wilson(table["successes"].to_numpy(), table["trials"].to_numpy(),
                                                       alpha)
    policy = {p: i for i, p in enumerate(policies_in_order(outcomes))}
    condition = {c: i for i, c in enumerate(CONDITIONS)}
    level = {n: i for i, n in enumerate(names_of(outcomes, column))}
    order = {"policy": policy, "condition": condition, column: level}
    table = table.sort_values(["policy", "condition", column], key=lambda c: c.map(order[c.name]), kind="stable")
    return table.reset_index(drop=True)[[column, *FACTOR_COLUMNS]]


def heterogeneity(successes: np.ndarray, trials: np.ndarray) -> tuple[str, float, float, np.ndarray]:
    """(test, statistic, p, adjusted residual per level) for the levels' success counts of one cell:
    Fisher's exact test for two levels (statistic: the odds ratio), Pearson's chi-square for more."""
    successes, trials = np.asarray(successes, dtype=int), np.asarray(trials, dtype=int)
    table = np.column_stack([successes, trials - successes])
    total, k = table.sum(), table.sum(0)
    test = FISHER if len(successes) == 2 else CHI_SQUARE
    if (k == 0).any():   # every rollout succeeded, or every one failed: nothing differs
        return test, float("nan"), 1.0, np.zeros(len(successes))
    expected = np.outer(table.sum(1), k) / total
    row_share, column_share = table.sum(1) / total, k / total
    residual = (table[:, 0] - expected[:, 0]) / np.sqrt(expected[:, 0] * (1 - row_share) * (1 - column_share[0]))
    if len(successes) == 2:
        statistic, p = fisher_exact(table, alternative="two-sided")
    else:
        statistic, p, _, _ = chi2_contingency(table, correction=False)
    return test, float(statistic), float(p), residual


def heterogeneity_table(table: pd.DataFrame, column: str, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per policy x condition run by two or more levels of the factor (HETEROGENEITY_COLUMNS)."""
    rows = []
    for (policy, condition), cell in table.groupby(["policy", "condition"], sort=False):
        if len(cell) < 2:
            continue
        test, statistic, p, residual = heterogeneity(cell["successes"].to_numpy(), cell["trials"].to_numpy())
        flagged = [name for name, r in zip(cell[column], residual, strict=True) if p < alpha and abs(r) > 1.96]
        rows.append((policy, condition, ", ".join(cell[column]), int(cell["trials"].sum()), test, statistic, p,
                     ", ".join(flagged)))
    return pd.DataFrame(rows, columns=list(HETEROGENEITY_COLUMNS))


def factor_lines(outcomes: pd.DataFrame, name: Callable[[str], str] = str) -> list[str]:
    """The report's per-lab and per-bench sections; empty with one lab and one bench."""
    return [line for column in factors_of(outcomes) for line in _factor_lines(outcomes, column, name)]


def _factor_lines(outcomes: pd.DataFrame, column: str, name: Callable[[str], str]) -> list[str]:
    word = "lab" if column == LAB else "bench"
    table = factor_table(outcomes, column)
    tests = heterogeneity_table(table, column)
    levels = names_of(outcomes, column)
    lines = [f"## Success per {word}", "",
             f"{len(levels)} {PLURAL[word]}: {', '.join(markdown_text(n) for n in levels)}. Rates pool the tasks of a "
             f"condition, with Wilson 95% intervals (`{PLURAL[word]}.csv`). Matched pairs (direct controls, "
             f"paraphrases, shared evaluations) are formed within a {word} only." if column == LAB else
             f"{len(levels)} {PLURAL[word]}: {', '.join(markdown_text(n) for n in levels)}. Rates pool the tasks of a "
             f"condition, with Wilson 95% intervals (`{PLURAL[word]}.csv`).", ""]
    header = ["policy", "condition", *[markdown_text(n) for n in levels]]
    rows = []
    for (policy, condition), cell in table.groupby(["policy", "condition"], sort=False):
        by = {r[column]: r for _, r in cell.iterrows()}
        rows.append([markdown_text(name(policy)), condition, *[
            (f"{100 * by[n]['rate']:.1f}% [{100 * by[n]['wilson_low']:.1f}, {100 * by[n]['wilson_high']:.1f}] "
             f"({int(by[n]['successes'])}/{int(by[n]['trials'])})") if n in by else "" for n in levels]])
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows] + [""]
    if not tests.empty:
        lines += [f"Heterogeneity across {PLURAL[word]}, per policy x condition: Fisher's exact test (two-sided) for two "
                  f"{PLURAL[word]}, Pearson's chi-square test of homogeneity for more. A {word} is flagged when p < "
                  f"{ALPHA} and its adjusted standardised residual exceeds 1.96; the p-values are not adjusted "
                  f"for the {len(tests)} cells tested, so about one in twenty is flagged by chance "
                  f"(`{word}_heterogeneity.csv`).", "",
                  f"| policy | condition | test | p | flagged {word} |", "|---|---|---|---|---|"]
        lines += [f"| {markdown_text(name(r.policy))} | {r.condition} | {r.test} | "
                  f"{'<0.001' if r.p_value < 0.001 else f'{r.p_value:.3f}'} | {markdown_text(r.flagged) or '—'} |"
                  for r in tests.itertuples()]
        lines.append("")
    return lines


def factor_files(outcomes: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The sections' tables as files: `labs.csv`, `lab_heterogeneity.csv` (`benches.csv`, `bench_heterogeneity.csv`)."""
    files: dict[str, pd.DataFrame] = {}
    for column in factors_of(outcomes):
        word = "lab" if column == LAB else "bench"
        table = factor_table(outcomes, column)
        files |= {f"{PLURAL[word]}.csv": table, f"{word}_heterogeneity.csv": heterogeneity_table(table, column)}
    return files


def bench_names(outcomes: pd.DataFrame) -> list[str]:
    """The benches a campaign's rollouts ran on (the ledger's bench ids), in order of first use."""
    if BENCH not in outcomes.columns:
        return []
    return [n for n in names_of(outcomes, BENCH) if n != "?"]
