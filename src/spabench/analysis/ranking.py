"""A Bradley-Terry ranking with ties (Davidson 1970) from same-scene pairs: secondary to the rates.

Every shared evaluation (comparisons.SHARED_KEY) that two policies both ran is one comparison: a
win for the policy that succeeded where the other failed, a tie when both succeeded or both failed.
Davidson's model: P(i beats j) = pi_i / D, P(tie) = nu sqrt(pi_i pi_j) / D, with
D = pi_i + pi_j + nu sqrt(pi_i pi_j). Fitted by its fixed-point (MM-type) iteration, every
bootstrap replicate at once in numpy. Half a virtual tie per compared pair keeps a policy that never
wins finite.

Only policies linked by comparisons can be ranked against each other. The comparison graph
(policies; an edge where two ran a common evaluation) is split into its connected components and
each is ranked on its own, with its own strengths (centred within it), tie parameter and
bootstrap: concatenating two labs' outcomes gives two rankings, never one across them.

Intervals: a cluster bootstrap. The resampled unit is a matched scene (task and matched_group:
an OOD scene with its direct control and paraphrases), or a single shared evaluation where there is
no matched group, so the correlated comparisons of one scene stay together. Cost: the pair tables
of each component's distinct outcome patterns, weighted per replicate by one matrix product, so
time and memory grow with the comparisons inside components, not with the square of all policies.

The ranking summarises many conditions with unequal difficulty into one scale; the per-condition
rates remain the primary result.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from spabench.analysis.bootstrap import contrast_rng
from spabench.analysis.comparisons import shared_outcomes
from spabench.analysis.matching import valid_rollouts

RANKING_COLUMNS: tuple[str, ...] = (
    "component", "rank", "policy", "strength", "ci_low", "ci_high", "rank_low", "rank_high", "wins", "losses",
    "ties", "comparisons", "tie_parameter",
)
PRIOR_TIES = 0.5
ITERATIONS = 300
CHUNK_CELLS = 4_000_000          # bound on the floats of one block of pair tables or of replicates
TIE_TOLERANCE = 1e-6             # log-strengths closer than this are tied (the fit converges to 1e-10)


def _counts(patterns: np.ndarray, weights: np.ndarray):
    """Wins W[b, i, j] (i succeeded, j failed), ties T[b, i, j] and comparisons C[b, i, j] for each
    row b of integer pattern weights: the pattern pair tables weighted by one matrix product per
    block of patterns (exact: integer counts in float64)."""
    p, k = patterns.shape
    counts = np.zeros((len(weights), 3 * k * k))
    step = max(1, CHUNK_CELLS // (3 * k * k))
    for start in range(0, p, step):
        block = patterns[start:start + step]
        success = np.nan_to_num(block, nan=0.0)
        failure = np.where(np.isnan(block), 0.0, 1.0 - np.nan_to_num(block))
        present = (~np.isnan(block)).astype(float)

        def pair(first, second):
            return (first[:, :, None] * second[:, None, :]).reshape(len(first), k * k)

        tables = np.hstack([pair(success, failure), pair(success, success) + pair(failure, failure),
                            pair(present, present)])
        counts += np.asarray(weights[:, start:start + step], dtype=float) @ tables
    counts = counts.reshape(-1, 3, k, k)
    return counts[:, 0], counts[:, 1], counts[:, 2]


def fit_davidson(wins: np.ndarray, ties: np.ndarray, iterations: int = ITERATIONS):
    """Log-strengths (centred, shape [B, k]) and tie parameters nu [B] from W[b,i,j] and T[b,i,j]
    (T symmetric, zero diagonal). Pairs never compared carry no information."""
    k = wins.shape[-1]
    eye = np.eye(k, dtype=bool)
    wins = np.where(eye, 0.0, wins)
    ties = np.where(eye, 0.0, ties)
    compared = wins + np.swapaxes(wins, -1, -2) + ties
    ties = ties + PRIOR_TIES * (compared > 0)
    n = wins + np.swapaxes(wins, -1, -2) + ties
    score = wins.sum(-1) + ties.sum(-1) / 2  # W_i + T_i / 2
    total_ties = ties.sum((-1, -2)) / 2
    # the iteration runs on [k, k, B] arrays (replicates last, contiguous: a few times faster for a
    # handful of policies) and in s = sqrt(pi), where sqrt(pi_i pi_j) = s_i s_j and
    # sum_j q_ij sqrt(pi_j / pi_i) = (q s)_i / s_i: one quotient q = n / D serves both updates
    n = np.ascontiguousarray(np.moveaxis(n, 0, -1))
    score = np.ascontiguousarray(score.T)
    pi = np.ones(score.shape)
    nu = np.ones(score.shape[1])
    q = np.empty(n.shape)
    for _ in range(iterations):
        s = np.sqrt(pi)
        np.multiply(s[:, None, :], s[None, :, :], out=q)
        q *= nu
        q += pi[:, None, :]
        q += pi[None, :, :]                                      # D_ij
        np.divide(n, q, out=q)
        qs = np.einsum("ijb,jb->ib", q, s)
        denominator = q.sum(1) + 0.5 * nu * qs / s
        new = np.where(denominator > 0, score / np.where(denominator > 0, denominator, 1), pi)
        new /= np.exp(np.log(new).mean(0))
        nu = total_ties / np.maximum((s * qs).sum(0) / 2, 1e-300)
        converged = bool(np.all(np.abs(new - pi) <= 1e-10 * np.abs(pi)))  # np.allclose(rtol=1e-10, atol=0)
        pi = new
        if converged:
            break
    return np.log(pi.T), nu


def comparison_components(present: np.ndarray) -> np.ndarray:
    """Component label per policy (column of `present`: evaluations x policies, True where it ran)
    of the comparison graph, numbered in order of each component's first policy. Found on the
    sparse evaluation-policy graph (linear in the rollouts)."""
    n_rows, k = present.shape
    rows, columns = np.nonzero(present)
    graph = coo_matrix((np.ones(len(rows)), (rows, n_rows + columns)), shape=(n_rows + k, n_rows + k))
    labels = connected_components(graph, directed=False)[1][n_rows:]
    first = {label: i for i, label in reversed(list(enumerate(labels)))}
    order = {label: n for n, label in enumerate(sorted(first, key=first.__getitem__))}
    return np.array([order[label] for label in labels])


def _clusters(outcomes: pd.DataFrame, index: pd.MultiIndex) -> np.ndarray:
    """Cluster id per shared evaluation: its matched scene (task, matched_group) when it has one,
    else the evaluation itself."""
    valid = valid_rollouts(outcomes)
    named = valid[valid["matched_group"] != ""]
    group = named.groupby(list(index.names))["matched_group"].first()
    frame = index.to_frame(index=False)
    matched = group.reindex(index).to_numpy()
    keys = np.where(pd.isna(matched), "evaluation\x1f" + frame["condition"].astype(str) + "\x1f"
                    + frame["evaluation_id"].astype(str) + "\x1f" + frame["instruction_variant"].astype(str),
                    "scene\x1f" + pd.Series(matched, dtype=object).fillna("").astype(str))
    keys = frame["task"].astype(str).to_numpy() + "\x1f" + keys
    if "lab" in frame.columns:   # a matched group names a scene of one lab
        keys = frame["lab"].astype(str).to_numpy() + "\x1f" + keys
    return np.unique(keys, return_inverse=True)[1]


def shared_ranks(strengths: np.ndarray) -> np.ndarray:
    """Competition ranks along the last axis: 1 + the number of strictly stronger policies, so
    tied strengths share the better rank. Ranking by position instead (argsort) gave every tie to
    the policy in the earlier column: a symmetric resample favoured whoever the CSV listed first."""
    stronger = strengths[..., None, :] > strengths[..., :, None] + TIE_TOLERANCE
    return stronger.sum(-1) + 1


def _rank_component(values: np.ndarray, clusters: np.ndarray, n_resamples: int, rng: np.random.Generator):
    """(point strengths, replicate strengths [B, k], nu, W, T, C) of one connected component."""
    k = values.shape[1]
    codes = np.where(np.isnan(values), 2, values).astype(np.int64)
    _, first, pattern = np.unique(codes, axis=0, return_index=True, return_inverse=True)
    patterns = values[first]
    pattern = pattern.reshape(-1)
    # each cluster as a vector of pattern counts; identical clusters pooled into one resampling unit
    _, cluster = np.unique(clusters, return_inverse=True)
    member = np.zeros((cluster.max() + 1, len(patterns)), dtype=np.int64)
    np.add.at(member, (cluster.reshape(-1), pattern), 1)
    kinds, frequency = np.unique(member, axis=0, return_counts=True)
    n_clusters = int(frequency.sum())
    draws = rng.multinomial(n_clusters, frequency / n_clusters, size=n_resamples)
    weights = np.vstack([frequency @ kinds, draws @ kinds])
    wins, ties, compared = _counts(patterns, weights)
    chunk = max(1, CHUNK_CELLS // (k * k * 8))
    parts = [fit_davidson(wins[i:i + chunk], ties[i:i + chunk]) for i in range(0, len(weights), chunk)]
    strength = np.vstack([part[0] for part in parts])
    nu = np.concatenate([part[1] for part in parts])
    return strength[0], strength[1:], float(nu[0]), wins[0], ties[0], compared[0]


def bradley_terry_ranking(outcomes: pd.DataFrame, n_resamples: int = 1000, seed: int = 0,
                          alpha: float = 0.05) -> pd.DataFrame:
    """The ranking table (RANKING_COLUMNS): per connected component of the comparison graph
    (`component` 1, 2, ...), its policies best first with ranks within the component. Tied
    strengths share a rank (in the point ranking and in every replicate) and list in name order:
    the table depends on the rows, not on their order."""
    empty = pd.DataFrame(columns=list(RANKING_COLUMNS))
    wide = shared_outcomes(outcomes)
    if wide.shape[1] < 2:
        return empty
    # policies in name order, not the CSV's: the columns fix each component's bootstrap stream and
    # the order of tied rows, so the same rows in any order give the same ranking.csv
    wide = wide[sorted(wide.columns, key=str)]
    values = wide.to_numpy(dtype=float)
    keep = (~np.isnan(values)).sum(1) >= 2  # an evaluation only one policy ran compares nothing
    if not keep.any():
        return empty
    values = values[keep]
    clusters = _clusters(outcomes, wide.index[keep])
    policies = np.array(wide.columns)
    present = ~np.isnan(values)
    labels = comparison_components(present)
    rows = []
    for component in range(labels.max() + 1):
        members = np.flatnonzero(labels == component)
        if len(members) < 2:
            continue  # compared with nobody (every evaluation it shares has no other policy)
        mine = present[:, members].any(axis=1)
        rng = contrast_rng(seed, "bradley_terry", *map(str, policies[members]))
        point, replicates, nu, wins, ties, compared = _rank_component(values[np.ix_(mine, members)], clusters[mine],
                                                                      n_resamples, rng)
        ranks = shared_ranks(replicates)
        places = shared_ranks(point)
        low, high = np.quantile(replicates, [alpha / 2, 1 - alpha / 2], axis=0)
        rank_low, rank_high = np.quantile(ranks, [alpha / 2, 1 - alpha / 2], axis=0)
        for i in np.argsort(-point, kind="stable"):
            rows.append((component + 1, int(places[i]), policies[members[i]], float(point[i]), float(low[i]),
                         float(high[i]), int(rank_low[i]), int(rank_high[i]), int(wins[i].sum()),
                         int(wins[:, i].sum()), int(ties[i].sum() - ties[i, i]),
                         int(compared[i].sum() - compared[i, i]), nu))
    table = pd.DataFrame(rows, columns=list(RANKING_COLUMNS))
    # components renumbered 1, 2, ... over those ranked (a lone policy has no ranking)
    table["component"] = table["component"].map({c: n for n, c in enumerate(dict.fromkeys(table["component"]), 1)})
    return table
