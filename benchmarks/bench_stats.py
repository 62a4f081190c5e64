"""Benchmark: Bradley-Terry fit + 1,000 cluster-bootstrap replicates on 1,000,000 ballots.

Issue 8: "A fit and 1,000 cluster-bootstrap replicates on 1,000,000 synthetic ballots among 20
systems and 50 prompts (goal: under 10 s on this machine), against a per-ballot
logistic-regression fit of the same data in the same run, as a ratio, with the largest rating
difference between the two."

The per-ballot baseline maximises the same likelihood one ballot at a time (L-BFGS with an
analytic gradient over every ballot, ties as half a win, as in the aggregated fit). Its time
times 1,000 is what a bootstrap that refits from ballots would cost.

Run: ``.venv/bin/python benchmarks/bench_stats.py [--ballots N] [--replicates R] [--seed S]``
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rounds.protocols import Protocol  # noqa: E402
from stats import bootstrap as bs  # noqa: E402
from stats import bradley_terry as bt  # noqa: E402
from stats.simulation import simulate_ballots  # noqa: E402


def per_ballot_logistic_fit(i: np.ndarray, j: np.ndarray, score: np.ndarray, n: int) -> np.ndarray:
    """Bradley-Terry as a logistic regression on every ballot (no aggregation)."""

    def loss_and_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        d = theta[i] - theta[j]
        # -[y log s(d) + (1 - y) log s(-d)]
        loss = float(np.sum(score * np.logaddexp(0.0, -d) + (1.0 - score) * np.logaddexp(0.0, d)))
        resid = 1.0 / (1.0 + np.exp(-d)) - score
        grad = np.bincount(i, weights=resid, minlength=n)
        grad -= np.bincount(j, weights=resid, minlength=n)
        return loss, grad

    result = optimize.minimize(
        loss_and_grad,
        np.zeros(n),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 1000, "ftol": 1e-15, "gtol": 1e-9},
    )
    theta = result.x - result.x.mean()
    return theta, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ballots", type=int, default=1_000_000)
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--prompts", type=int, default=50)
    parser.add_argument("--runs", type=int, default=2, help="runs per system per prompt")
    parser.add_argument("--voters", type=int, default=20_000)
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--result-kind",
        choices=("full_film", "segment"),
        default="full_film",
        help="which bootstrap_clusters entry of the definition to resample",
    )
    parser.add_argument("--segments", type=int, default=6, help="segments per prompt (segment)")
    args = parser.parse_args()

    print(f"python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}")
    print(f"cpus available: {len(os.sched_getaffinity(0))}")
    rng = np.random.default_rng(args.seed)
    names = [f"S{k:02d}" for k in range(args.systems)]
    true = pd.Series(np.linspace(-1.5, 1.5, args.systems), index=names)
    t0 = time.perf_counter()
    ballots = simulate_ballots(
        true,
        n_ballots=args.ballots,
        n_prompts=args.prompts,
        n_voters=args.voters,
        runs_per_system=args.runs,
        rng=rng,
        prompt_effect_sd=0.2,
        run_effect_sd=0.1,
        tie_probability=0.05,
    )
    print(
        f"simulated {len(ballots):,} ballots, {args.systems} systems, {args.prompts} prompts, "
        f"{args.runs} runs/system/prompt, {args.voters:,} voters in "
        f"{time.perf_counter() - t0:.2f} s"
    )
    if args.result_kind == "segment":
        ballots["segment"] = rng.integers(0, args.segments, len(ballots))
    clusters = bs.bootstrap_clusters(Protocol.load("ai-duel-0.1"), args.result_kind)

    t0 = time.perf_counter()
    strengths = bt.fit(ballots)
    t_fit = time.perf_counter() - t0

    t0 = time.perf_counter()
    result = bs.bootstrap_bradley_terry(
        ballots, clusters, seed=args.seed, n_replicates=args.replicates
    )
    intervals = result.intervals()
    t_boot = time.perf_counter() - t0

    t0 = time.perf_counter()
    sensitivity = bs.prompt_sensitivity(ballots)
    t_loo = time.perf_counter() - t0

    systems, i, j, score = bt.encode_comparisons(ballots)
    t0 = time.perf_counter()
    theta_lr, lr = per_ballot_logistic_fit(i, j, score, len(systems))
    t_lr = time.perf_counter() - t0

    diff_points = np.abs(
        bt.display_points(strengths.to_numpy()) - bt.display_points(theta_lr)
    ).max()
    widths = bt.DISPLAY_POINTS_PER_NATURAL_LOG * (intervals["upper"] - intervals["lower"])

    print()
    print(f"clusters (from the definition, {args.result_kind}): {', '.join(clusters)}")
    print(f"leaves (distinct cluster-key cells):        {result.n_leaves:,}")
    print(f"aggregated fit (encode + count + Newton):   {t_fit:8.3f} s")
    print(
        f"fit + {result.n_replicates:,} cluster-bootstrap replicates:  {t_boot:8.3f} s "
        f"(goal < 10 s; failed replicates: {result.failed_replicates})"
    )
    print(f"leave-one-prompt-out refits ({len(sensitivity.strengths)}):       {t_loo:8.3f} s")
    print(
        f"per-ballot logistic regression (L-BFGS):   {t_lr:8.3f} s "
        f"({lr.nit} iterations, {lr.nfev} evaluations over every ballot)"
    )
    print(f"ratio per-ballot fit / aggregated fit:      {t_lr / t_fit:8.1f} x")
    print(
        f"per-ballot bootstrap, extrapolated (1,000 x per-ballot fit): {1000 * t_lr:8.0f} s, "
        f"{1000 * t_lr / t_boot:.0f} x the cluster bootstrap"
    )
    print(f"largest rating difference, aggregated vs per-ballot: {diff_points:.2e} display points")
    print(
        f"95% interval width: median {widths.median():.1f}, max {widths.max():.1f} display points"
    )
    print(f"top system stable under leave-one-prompt-out: {sensitivity.top_is_stable()}")


if __name__ == "__main__":
    main()
