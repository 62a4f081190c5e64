"""Exact binomial power for a paired-preference winner claim, checked against values computed
by hand with integer binomial coefficients."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from stats import power


def upper_tail(n: int, k: int, p: Fraction | float) -> Fraction | float:
    """P(W >= k) for W ~ Binomial(n, p), summed term by term."""
    return sum(math.comb(n, x) * p**x * (1 - p) ** (n - x) for x in range(k, n + 1))


def brute_critical(n: int, level: float) -> int:
    """Smallest k with P(W >= k | 1/2) <= level, in exact integer arithmetic."""
    bound = Fraction(level).limit_denominator(10**9) * 2**n
    tail = 0
    for k in range(n, -1, -1):
        tail += math.comb(n, k)
        if tail > bound:
            return k + 1
    return 0


def test_ten_jurors_one_sided() -> None:
    # P(W >= 9 | 0.5) = 11/1024 = 0.0107 <= 0.05 < P(W >= 8) = 56/1024 = 0.0547
    assert power.critical_wins(10, alpha=0.05, alternative="greater") == 9
    # Power at p = 0.8: 10 * 0.8^9 * 0.2 + 0.8^10 = 0.3758096384
    assert power.exact_binomial_power(10, 0.8, alpha=0.05, alternative="greater") == (
        pytest.approx(0.3758096384, abs=1e-12)
    )


def test_twenty_jurors_one_sided() -> None:
    # P(W >= 15 | 0.5) = 21700 / 2^20 = 0.0207; P(W >= 14) = 60460 / 2^20 = 0.0577
    assert upper_tail(20, 15, Fraction(1, 2)) == Fraction(21700, 2**20)
    assert power.critical_wins(20, alpha=0.05, alternative="greater") == 15
    assert power.exact_binomial_power(20, 0.75, alternative="greater") == pytest.approx(
        float(upper_tail(20, 15, Fraction(3, 4))), abs=1e-12
    )


def test_two_sided_uses_half_alpha_per_tail() -> None:
    # Two-sided at 0.05 rejects in X's favour when P(W >= k) <= 0.025.
    for n in (5, 6, 12, 17, 20, 33):
        assert power.critical_wins(n, alternative="two-sided") == brute_critical(n, 0.025)
        assert power.critical_wins(n, alternative="greater") == brute_critical(n, 0.05)


def test_too_few_jurors_can_never_win() -> None:
    # With 5 jurors even 5-0 has P = 1/32 = 0.031 > 0.025: no two-sided claim is possible.
    assert power.critical_wins(5, alternative="two-sided") == 6
    assert power.exact_binomial_power(5, 0.9, alternative="two-sided") == 0.0


def test_exact_power_saws_up_and_down() -> None:
    powers = [power.exact_binomial_power(n, 0.7, alternative="greater") for n in range(10, 40)]
    assert any(b < a for a, b in zip(powers, powers[1:], strict=False))


def brute_plan(p: float, level: float, target: float, limit: int) -> tuple[int, int]:
    reach = []
    for n in range(1, limit + 1):
        k = brute_critical(n, level)
        reach.append(k <= n and upper_tail(n, k, p) >= target)
    first = reach.index(True) + 1
    last_miss = max(i for i, r in enumerate(reach) if not r) + 1
    return first, last_miss + 1


@pytest.mark.parametrize(
    "p, alternative, level",
    [(0.75, "two-sided", 0.025), (0.75, "greater", 0.05), (0.8, "two-sided", 0.025)],
)
def test_jurors_needed_matches_brute_force(p: float, alternative: str, level: float) -> None:
    plan = power.jurors_needed(p, alpha=0.05, power=0.8, alternative=alternative)
    exact_n, stable_n = brute_plan(p, level, 0.8, plan.search_limit)
    assert (plan.exact_n, plan.stable_n) == (exact_n, stable_n)
    assert plan.exact_n <= plan.stable_n
    assert plan.exact_power >= 0.8
    assert plan.critical_wins == brute_critical(plan.stable_n, level)
    assert plan.jurors == plan.stable_n


def test_normal_approximation_formula() -> None:
    # ((z_.025 * 0.5 + z_.2 * sqrt(0.75 * 0.25)) / 0.25)^2 = 28.92 -> 29
    z_a, z_b = 1.959963984540054, 0.8416212335729143
    expected = math.ceil(((z_a * 0.5 + z_b * math.sqrt(0.1875)) / 0.25) ** 2)
    assert power.normal_approximation_n(0.75) == expected == 29
    # one-sided, p = 0.6: 152.5 -> 153
    assert power.normal_approximation_n(0.6, alternative="greater") == 153


def test_exact_and_normal_sizes_are_reported_side_by_side() -> None:
    plan = power.jurors_needed(0.6, alternative="greater")
    assert plan.normal_n == 153
    assert abs(plan.stable_n - plan.normal_n) < 20
    assert plan.exact_power >= 0.8


def test_ties_inflate_the_jurors_to_recruit() -> None:
    plan = power.jurors_needed(0.75, tie_rate=0.2)
    assert plan.jurors == math.ceil(plan.stable_n / 0.8)


@pytest.mark.parametrize("p", [0.5, 0.4, 1.0])
def test_a_claim_needs_a_true_preference(p: float) -> None:
    with pytest.raises(ValueError):
        power.jurors_needed(p)
