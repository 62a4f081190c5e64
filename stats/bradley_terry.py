"""Bradley-Terry maximum likelihood on aggregated pairwise counts.

Protocol: "One-minute and two-minute voting" says to "use Bradley-Terry maximum likelihood
estimation" (definition key ``voting.estimator = "bradley_terry_mle"``); the holistic paired
choice of full-film juries is fitted the same way.

Model: system ``i`` beats system ``j`` with probability ``1 / (1 + exp(theta_j - theta_i))``.
``theta`` is a natural-log strength; only differences are identified, so every fit is centred
to mean zero.

Ties: a tie counts as half a win for each side. This is the classic "split the tie" rule: the
estimating equations become ``wins_i + ties_i / 2 = expected wins_i``, the fit stays on the
aggregated win matrix, and a tie pulls the two strengths together without a separate tie
parameter (a Davidson model would need one more parameter and a model choice we do not make).

The fit only ever sees the aggregated ``n x n`` win matrix (ballots are counted once), so
refitting is independent of the number of ballots. That is what makes a 1,000-replicate
cluster bootstrap over a million ballots cheap (see ``stats.bootstrap``).

Existence: the maximum likelihood estimate is finite and unique exactly when, for every split of
the systems into two groups, each group has at least one win (or tie) against the other
(Zermelo 1929; Ford 1957), i.e. when the directed "beat or tied" graph is strongly connected.
We raise :class:`DisconnectedComparisonGraph` when some systems were never compared, directly
or through others, and :class:`NoFiniteEstimate` when the graph is connected but a group never
wins (or never loses) against the rest, so its strength would run off to infinity. We never
silently regularise; ``prior`` is an explicit, recorded option (see :func:`fit`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from stats.diagnostic_guard import refuse_diagnostic

OUTCOMES: tuple[str, ...] = ("a", "b", "tie")

# Display scale for leaderboards: the chess/Elo convention, 400 points per factor of ten in
# odds, so a 400-point gap means 10:1 odds. It is a presentation choice, not a protocol rule.
DISPLAY_POINTS_PER_NATURAL_LOG: float = 400.0 / math.log(10.0)
DISPLAY_ANCHOR: float = 1000.0

_TOL = 1e-10
_MAX_ITER = 200


class BradleyTerryError(ValueError):
    """Base class: the comparisons do not determine finite Bradley-Terry strengths."""


class DisconnectedComparisonGraph(BradleyTerryError):
    """Some systems were never compared, directly or through others, with the rest.

    Strengths in different components are on unrelated scales; no ranking across them exists.
    """

    def __init__(self, components: Sequence[Sequence[str]]) -> None:
        self.components = [list(c) for c in components]
        shown = "; ".join("{" + ", ".join(map(str, c)) + "}" for c in self.components)
        super().__init__(
            f"the comparison graph is disconnected into {len(self.components)} groups that were "
            f"never compared with each other: {shown}"
        )


class NoFiniteEstimate(BradleyTerryError):
    """A group of systems never lost (or never won) against the others: the MLE is infinite."""

    def __init__(self, never_lost: Sequence[str], never_won: Sequence[str]) -> None:
        self.never_lost = list(never_lost)
        self.never_won = list(never_won)
        super().__init__(
            "no finite maximum likelihood estimate: "
            f"{{{', '.join(map(str, self.never_lost))}}} never lost (or tied) against "
            f"{{{', '.join(map(str, self.never_won))}}}; collect more comparisons or pass an "
            "explicit prior"
        )


class InvalidComparisons(ValueError):
    """The comparisons table is malformed (missing columns, unknown outcomes, self-pairs)."""


# ---------------------------------------------------------------------------------------------
# Counting


def _validate(comparisons: pd.DataFrame) -> None:
    missing = [c for c in ("a", "b", "outcome") if c not in comparisons.columns]
    if missing:
        raise InvalidComparisons(f"comparisons lack column(s) {', '.join(missing)}")
    outcome = comparisons["outcome"]
    bad = ~outcome.isin(OUTCOMES)
    if bad.any():
        values = sorted({repr(v) for v in outcome[bad].unique()})
        raise InvalidComparisons(
            f"outcome must be one of {', '.join(OUTCOMES)}; found {', '.join(values[:5])}"
        )
    if comparisons["a"].isna().any() or comparisons["b"].isna().any():
        raise InvalidComparisons("a system is missing (NaN) in column a or b")
    same = comparisons["a"].to_numpy() == comparisons["b"].to_numpy()
    if same.any():
        raise InvalidComparisons(
            f"{int(same.sum())} comparison(s) put a system against itself "
            f"(e.g. {comparisons['a'][same].iloc[0]!r})"
        )


def encode_comparisons(
    comparisons: pd.DataFrame, systems: Sequence[str] | None = None
) -> tuple[pd.Index, np.ndarray, np.ndarray, np.ndarray]:
    """Validate and encode comparisons as integer codes.

    Returns ``(systems, i, j, score)`` where ``i`` and ``j`` index ``systems`` for sides a and b,
    and ``score`` is side a's share of the win: 1 (a won), 0 (b won) or 0.5 (tie).
    Systems are sorted, so the encoding does not depend on row order. Diagnostic data (an
    automated critic's output) is refused here, the door every fit goes through.
    """
    refuse_diagnostic(comparisons, "Bradley-Terry")
    _validate(comparisons)
    a = comparisons["a"]
    b = comparisons["b"]
    if systems is None:
        both = pd.concat([a, b], ignore_index=True)
        index = pd.Index(np.asarray(pd.unique(both), dtype=object)).sort_values()
    else:
        index = pd.Index(list(systems))
        if not index.is_unique:
            raise InvalidComparisons("systems must be unique")
    i = index.get_indexer(a)
    j = index.get_indexer(b)
    if (i < 0).any() or (j < 0).any():
        raise InvalidComparisons("a comparison names a system outside the given systems")
    outcome = comparisons["outcome"].to_numpy()
    score = np.where(outcome == "a", 1.0, np.where(outcome == "b", 0.0, 0.5))
    return index, i.astype(np.intp), j.astype(np.intp), score


def wins_from_codes(i: np.ndarray, j: np.ndarray, score: np.ndarray, n: int) -> np.ndarray:
    """The ``n x n`` win matrix: ``W[x, y]`` = wins of x over y, ties counted half to each."""
    flat = np.bincount(i * n + j, weights=score, minlength=n * n)
    flat += np.bincount(j * n + i, weights=1.0 - score, minlength=n * n)
    return flat.reshape(n, n)


def win_matrix(comparisons: pd.DataFrame, systems: Sequence[str] | None = None) -> pd.DataFrame:
    """Aggregated win matrix: rows are winners, columns losers, ties count half to each side.

    ``W.loc[x, y] + W.loc[y, x]`` is the number of comparisons between x and y. This is the
    table published beside the ratings (issue 8: "the win matrix").
    """
    index, i, j, score = encode_comparisons(comparisons, systems)
    wins = wins_from_codes(i, j, score, len(index))
    frame = pd.DataFrame(wins, index=index.copy(), columns=index.copy())
    frame.index.name = "winner"
    frame.columns.name = "loser"
    return frame


# ---------------------------------------------------------------------------------------------
# Graph checks


def _closure(adjacency: np.ndarray) -> np.ndarray:
    """Reflexive-transitive closure of boolean adjacency matrices (batched on axis 0)."""
    n = adjacency.shape[-1]
    reach = adjacency | np.eye(n, dtype=bool)
    steps = max(1, math.ceil(math.log2(max(n, 2))))
    for _ in range(steps):
        r = reach.astype(np.float32)
        reach = (r @ r) > 0
    return reach


def graph_status(wins: np.ndarray) -> np.ndarray:
    """Per win matrix (batched on axis 0): 0 = finite MLE exists, 1 = disconnected, 2 = no
    finite estimate (connected, but some group never beat or tied the rest)."""
    w = np.asarray(wins)
    batched = w if w.ndim == 3 else w[None]
    beat = batched > 0
    played = beat | np.swapaxes(beat, 1, 2)
    connected = _closure(played).all(axis=(1, 2))
    strong = _closure(beat).all(axis=(1, 2))
    status = np.where(~connected, 1, np.where(~strong, 2, 0))
    return status if w.ndim == 3 else status[:1]


def _components(adjacency: np.ndarray) -> list[list[int]]:
    reach = _closure(adjacency[None])[0]
    seen: set[int] = set()
    groups: list[list[int]] = []
    for k in range(adjacency.shape[0]):
        if k in seen:
            continue
        group = [int(x) for x in np.flatnonzero(reach[k] & reach[:, k])]
        seen.update(group)
        groups.append(group)
    return groups


def check_estimable(wins: np.ndarray, systems: Sequence[str]) -> None:
    """Raise the named error when the win matrix has no unique finite MLE."""
    beat = np.asarray(wins) > 0
    played = beat | beat.T
    names = list(systems)
    if not _closure(played[None])[0].all():
        groups = _components(played)
        raise DisconnectedComparisonGraph([[names[k] for k in g] for g in groups])
    reach = _closure(beat[None])[0]
    if not reach.all():
        # A strongly connected component that nothing outside it ever beat is a group that
        # never lost; report the first such "top" group and everyone it never lost to.
        for group in _components(beat):
            inside = np.zeros(len(names), dtype=bool)
            inside[group] = True
            if not beat[~inside][:, inside].any():
                raise NoFiniteEstimate(
                    [names[k] for k in group], [names[k] for k in np.flatnonzero(~inside)]
                )
        raise NoFiniteEstimate([], names)  # pragma: no cover - a top group always exists


# ---------------------------------------------------------------------------------------------
# Fitting


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _loglik(wins: np.ndarray, theta: np.ndarray) -> np.ndarray:
    diff = theta[:, :, None] - theta[:, None, :]
    return (wins * _log_sigmoid(diff)).sum(axis=(1, 2))


def fit_wins_batch(
    wins: np.ndarray,
    *,
    prior: float = 0.0,
    start: np.ndarray | None = None,
    tol: float = _TOL,
    max_iter: int = _MAX_ITER,
) -> tuple[np.ndarray, np.ndarray]:
    """Fit many win matrices at once (shape ``(R, n, n)``) by damped Newton-Raphson.

    Returns ``(theta, ok)``: centred strengths of shape ``(R, n)`` and a boolean mask of the
    matrices whose MLE exists and converged; rows with ``ok == False`` are NaN. Used by the
    bootstrap, where a resampled matrix may lose connectivity.

    Newton on the concave log-likelihood: gradient ``W_i - sum_j N_ij p_ij``, Hessian minus the
    weighted Laplacian ``N_ij p_ij (1 - p_ij)``. The Laplacian is singular along the all-ones
    direction (strengths are only identified up to a constant), so we solve with
    ``L + 11'/n``, which leaves steps orthogonal to ones and keeps the mean at zero. Steps are
    halved until the log-likelihood does not decrease, so convergence does not depend on the
    starting point.
    """
    w = np.array(wins, dtype=float)
    if w.ndim != 3 or w.shape[1] != w.shape[2]:
        raise ValueError("wins must have shape (R, n, n)")
    n_rep, n, _ = w.shape
    w[:, np.arange(n), np.arange(n)] = 0.0
    if prior < 0:
        raise ValueError("prior must be >= 0")
    if prior > 0:
        observed = (w + np.swapaxes(w, 1, 2)) > 0
        w = w + (prior / 2.0) * observed
    status = graph_status(w)
    ok = status == 0
    theta = np.zeros((n_rep, n))
    if start is not None:
        theta[:] = np.asarray(start, dtype=float) - np.mean(start, axis=-1, keepdims=True)
    games = w + np.swapaxes(w, 1, 2)
    won = w.sum(axis=2)
    scale = np.maximum(games.sum(axis=2).max(axis=1), 1.0)
    ones = np.full((n, n), 1.0 / n)
    active = ok.copy()
    converged = np.zeros(n_rep, dtype=bool)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        th = theta[idx]
        g_ = games[idx]
        p = 1.0 / (1.0 + np.exp(th[:, None, :] - th[:, :, None]))
        grad = won[idx] - (g_ * p).sum(axis=2)
        small = np.abs(grad).max(axis=1) <= tol * scale[idx]
        converged[idx[small]] = True
        active[idx[small]] = False
        keep = ~small
        idx, th, g_, p, grad = idx[keep], th[keep], g_[keep], p[keep], grad[keep]
        if idx.size == 0:
            break
        info = g_ * p * (1.0 - p)
        lap = -info
        lap[:, np.arange(n), np.arange(n)] = info.sum(axis=2)
        step = np.linalg.solve(lap + ones, grad[:, :, None])[:, :, 0]
        base = _loglik(w[idx], th)
        t = np.ones(idx.size)
        cand = th + step
        for _half in range(60):
            worse = _loglik(w[idx], cand) < base - 1e-13 * np.abs(base)
            if not worse.any():
                break
            t = np.where(worse, t / 2.0, t)
            cand = np.where(worse[:, None], th + t[:, None] * step, cand)
        cand -= cand.mean(axis=1, keepdims=True)
        theta[idx] = cand
        tiny = np.abs(t[:, None] * step).max(axis=1) <= tol
        converged[idx[tiny]] = True
        active[idx[tiny]] = False
    ok &= converged
    theta[~ok] = np.nan
    return theta, ok


def fit_wins(
    wins: np.ndarray | pd.DataFrame,
    systems: Sequence[str] | None = None,
    *,
    prior: float = 0.0,
) -> pd.Series:
    """Fit strengths from a win matrix (``W[x, y]`` = wins of x over y, ties half each).

    Raises :class:`DisconnectedComparisonGraph` or :class:`NoFiniteEstimate` when no unique
    finite MLE exists. See :func:`fit` for ``prior``.
    """
    if isinstance(wins, pd.DataFrame):
        names = list(wins.index) if systems is None else list(systems)
        w = wins.loc[names, names].to_numpy(dtype=float)
    else:
        w = np.asarray(wins, dtype=float)
        names = list(range(w.shape[0])) if systems is None else list(systems)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] != len(names):
        raise ValueError("wins must be a square matrix matching systems")
    if len(names) < 2:
        raise BradleyTerryError("Bradley-Terry needs at least two systems")
    if (w < 0).any() or not np.isfinite(w).all():
        raise ValueError("win counts must be finite and non-negative")
    effective = w.copy()
    np.fill_diagonal(effective, 0.0)
    if prior > 0:
        observed = (effective + effective.T) > 0
        effective = effective + (prior / 2.0) * observed
    check_estimable(effective, names)
    theta, ok = fit_wins_batch(w[None], prior=prior)
    if not ok[0]:  # pragma: no cover - estimable matrices converge
        raise BradleyTerryError("Newton-Raphson did not converge")
    series = pd.Series(theta[0], index=pd.Index(names, name="system"), name="strength")
    return series


def fit(comparisons: pd.DataFrame, *, prior: float = 0.0) -> pd.Series:
    """Bradley-Terry strengths from pairwise comparisons.

    ``comparisons`` has columns ``a``, ``b`` (system identifiers) and ``outcome`` (``"a"``,
    ``"b"`` or ``"tie"``); other columns are ignored. Returns a Series of natural-log strengths
    indexed by system (sorted), centred to mean zero, so ``exp(s[x] - s[y])`` is the odds that x
    beats y.

    Maximum likelihood on the aggregated win matrix (damped Newton-Raphson, run until every
    score equation is met to 1e-10 times the largest per-system comparison count). A tie
    counts as half a win for each side.

    ``prior`` (default 0, none): when positive, adds ``prior`` virtual comparisons, split
    evenly, to every pair that was actually compared. It makes the estimate finite when a system
    never lost or never won, at the price of shrinking strengths toward each other; it never
    bridges systems that were not compared, so a disconnected graph still raises. Publish the
    value with any result that uses it.

    Raises :class:`InvalidComparisons` for a malformed table,
    :class:`DisconnectedComparisonGraph` and :class:`NoFiniteEstimate` (both ``ValueError``)
    when no unique finite MLE exists.
    """
    index, i, j, score = encode_comparisons(comparisons)
    wins = wins_from_codes(i, j, score, len(index))
    return fit_wins(wins, list(index), prior=prior)


def strength_covariance(wins: np.ndarray | pd.DataFrame, strengths: pd.Series) -> pd.DataFrame:
    """Model-based (Fisher information) covariance of the centred strengths.

    The inverse information is taken on the mean-zero subspace (Moore-Penrose pseudo-inverse of
    the weighted Laplacian), so ``var(s[x] - s[y])`` is the usual contrast variance. This is
    the textbook standard error, which assumes independent comparisons; published intervals
    come from the cluster bootstrap instead, because votes on one prompt or run are not
    independent (protocol: "Do not bootstrap individual votes alone").
    """
    names = list(strengths.index)
    w = wins.loc[names, names].to_numpy(float) if isinstance(wins, pd.DataFrame) else wins
    w = np.asarray(w, dtype=float)
    theta = strengths.to_numpy(dtype=float)
    games = w + w.T
    np.fill_diagonal(games, 0.0)
    p = 1.0 / (1.0 + np.exp(theta[None, :] - theta[:, None]))
    info = games * p * (1.0 - p)
    lap = np.diag(info.sum(axis=1)) - info
    cov = np.linalg.pinv(lap)
    return pd.DataFrame(cov, index=strengths.index.copy(), columns=strengths.index.copy())


def win_probability(strengths: pd.Series, x: str, y: str) -> float:
    """Model probability that x beats y."""
    return float(1.0 / (1.0 + math.exp(strengths[y] - strengths[x])))


def display_points(
    values: pd.Series | pd.DataFrame | np.ndarray | float,
    *,
    anchor: float = DISPLAY_ANCHOR,
    points_per_natural_log: float = DISPLAY_POINTS_PER_NATURAL_LOG,
) -> pd.Series | pd.DataFrame | np.ndarray | float:
    """Affine map of centred strengths (or interval bounds) to display points.

    ``anchor + points_per_natural_log * value``. Use on values that are already centred (the
    output of :func:`fit`, bootstrap interval bounds) so bounds and estimates share one scale.
    """
    return anchor + points_per_natural_log * values


def display_scale(
    strengths: pd.Series,
    *,
    anchor: float = DISPLAY_ANCHOR,
    points_per_natural_log: float = DISPLAY_POINTS_PER_NATURAL_LOG,
    reference: str | None = None,
) -> pd.Series:
    """Leaderboard ratings: ``anchor`` at the mean strength (or at ``reference``), 400 points
    per factor of ten in odds by default (400 / ln 10 points per natural-log unit).

    The display scale carries no information beyond the strengths; it only makes differences
    readable ("+120 points" = 1.99:1 odds).
    """
    centre = strengths[reference] if reference is not None else strengths.mean()
    ratings = display_points(
        strengths - centre, anchor=anchor, points_per_natural_log=points_per_natural_log
    )
    ratings.name = "rating"
    return ratings
