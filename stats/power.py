"""Power analysis for a paired-preference winner claim (exact binomial and normal approximation).

Protocol, "Five-minute and longer evaluation": "Use a power analysis before a formal winner
claim"; "Publication levels": "Use a power analysis before a formal endurance winner claim."

Setting: each complete-view juror gives one holistic paired choice between systems X and Y.
Under "no preference" a choice for X is a fair coin (``p0 = 0.5``). The claim "X wins" is made
when the number of choices for X reaches the exact binomial test's critical value. The power
is the probability of making that claim when jurors truly prefer X with probability ``p``.

Exact binomial power is not monotone in ``n``: the critical value moves in integer steps, so
the attained size (and with it the power) saws up and down. We report both the smallest ``n``
that reaches the target power and the smallest ``n`` from which every larger ``n`` (up to a
search limit) also does; staff should plan with the latter.

Ties: a juror who declines to choose carries no information for the sign test; pass the
expected tie rate to inflate the number of jurors to recruit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

Alternative = Literal["greater", "two-sided"]


def _check(p: float, alpha: float, alternative: str, p0: float = 0.5) -> None:
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    if not 0 < p < 1:
        raise ValueError("p must be between 0 and 1")
    if not 0 < p0 < 1:
        raise ValueError("p0 must be between 0 and 1")
    if alternative not in ("greater", "two-sided"):
        raise ValueError("alternative must be 'greater' or 'two-sided'")


def critical_wins(n: int, *, alpha: float = 0.05, alternative: Alternative = "two-sided") -> int:
    """Smallest number of choices for X out of ``n`` at which the exact test (``p0 = 0.5``)
    rejects "no preference" in X's favour: ``P(W >= k | p0) <= alpha`` (``alpha / 2`` for a
    two-sided test, whose p-value for the symmetric null is twice the smaller tail).
    Returns ``n + 1`` when no outcome is significant.
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    _check(0.5, alpha, alternative)
    level = alpha if alternative == "greater" else alpha / 2.0
    k = np.arange(n + 2)
    tail = stats.binom.sf(k - 1, n, 0.5)  # P(W >= k)
    ok = np.flatnonzero(tail <= level)
    return int(ok[0]) if ok.size else n + 1


def exact_binomial_power(
    n: int,
    p: float,
    *,
    alpha: float = 0.05,
    alternative: Alternative = "two-sided",
) -> float:
    """Probability that the exact test declares X the winner, when jurors prefer X with
    probability ``p`` (``p > 0.5``).

    Only rejections in X's favour count: a two-sided test that wrongly crowns Y is an error,
    not power.
    """
    _check(p, alpha, alternative)
    k = critical_wins(n, alpha=alpha, alternative=alternative)
    return float(stats.binom.sf(k - 1, n, p))


def normal_approximation_n(
    p: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: Alternative = "two-sided",
) -> int:
    """Textbook sample size for a one-sample proportion test against 0.5:
    ``n = ((z_a * 0.5 + z_b * sqrt(p (1 - p))) / (p - 0.5)) ** 2``, rounded up."""
    _check(p, alpha, alternative)
    if p <= 0.5:
        raise ValueError("the true preference must exceed 0.5")
    z_a = stats.norm.isf(alpha if alternative == "greater" else alpha / 2.0)
    z_b = stats.norm.isf(1.0 - power)
    n = ((z_a * 0.5 + z_b * math.sqrt(p * (1.0 - p))) / (p - 0.5)) ** 2
    return math.ceil(n - 1e-9)


@dataclass(frozen=True)
class JurorPlan:
    """How many complete-view jurors a winner claim needs."""

    p: float
    alpha: float
    target_power: float
    alternative: str
    exact_n: int  # smallest n whose exact power reaches the target
    stable_n: int  # smallest n from which every n up to the search limit reaches it
    exact_power: float  # power at stable_n
    critical_wins: int  # choices for the winner needed at stable_n
    normal_n: int  # normal-approximation sample size, for comparison
    tie_rate: float
    jurors: int  # stable_n inflated for ties: jurors to recruit
    search_limit: int


def jurors_needed(
    p: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: Alternative = "two-sided",
    tie_rate: float = 0.0,
    search_limit: int | None = None,
) -> JurorPlan:
    """Complete-view jurors needed for a winner claim at true preference ``p``.

    Searches ``n`` upward with the exact binomial power. ``search_limit`` (default: twice the
    normal-approximation size plus 100) bounds both the search and the "every larger n" check.
    """
    _check(p, alpha, alternative)
    if p <= 0.5:
        raise ValueError("the true preference must exceed 0.5")
    if not 0 < power < 1:
        raise ValueError("power must be between 0 and 1")
    if not 0 <= tie_rate < 1:
        raise ValueError("tie_rate must be in [0, 1)")
    normal_n = normal_approximation_n(p, alpha=alpha, power=power, alternative=alternative)
    limit = search_limit if search_limit is not None else 2 * normal_n + 100
    ns = np.arange(1, limit + 1)
    level = alpha if alternative == "greater" else alpha / 2.0
    # Critical value per n: smallest k with P(W >= k | 0.5) <= level, via the binomial
    # quantile, then nudged to the exact boundary.
    k = stats.binom.isf(level, ns, 0.5).astype(int) + 1
    k = np.maximum(k, 0)
    too_big = stats.binom.sf(k - 2, ns, 0.5) <= level  # P(W >= k - 1) already small enough
    while too_big.any():
        k = np.where(too_big, k - 1, k)
        too_big = (k > 0) & (stats.binom.sf(k - 2, ns, 0.5) <= level)
    too_small = stats.binom.sf(k - 1, ns, 0.5) > level
    while too_small.any():
        k = np.where(too_small, k + 1, k)
        too_small = (k <= ns) & (stats.binom.sf(k - 1, ns, 0.5) > level)
    powers = np.where(k <= ns, stats.binom.sf(k - 1, ns, p), 0.0)
    reach = powers >= power
    if not reach.any():
        raise ValueError(f"power {power} not reached for n <= {limit}; raise search_limit")
    exact_n = int(ns[np.argmax(reach)])
    below = np.flatnonzero(~reach)
    stable_index = int(below[-1] + 1) if below.size else 0
    if stable_index >= ns.size:
        raise ValueError(f"power {power} not stably reached for n <= {limit}; raise search_limit")
    stable_n = int(ns[stable_index])
    jurors = math.ceil(stable_n / (1.0 - tie_rate) - 1e-9)
    return JurorPlan(
        p=p,
        alpha=alpha,
        target_power=power,
        alternative=alternative,
        exact_n=exact_n,
        stable_n=stable_n,
        exact_power=float(powers[stable_index]),
        critical_wins=int(k[stable_index]),
        normal_n=normal_n,
        tie_rate=tie_rate,
        jurors=jurors,
        search_limit=limit,
    )
