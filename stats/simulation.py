"""Synthetic pairwise ballots from known Bradley-Terry strengths.

Used by the tests (recovery and coverage of known strengths), the benchmark, and demo rounds
(issue 8: ``simulate_votes`` fills demo rounds with synthetic voters of known preferences;
the Django command marks such ballots synthetic, this module only draws them).

Cluster structure is simulated on purpose: each prompt shifts every system's strength by a
normal "prompt effect" and each production run by a "run effect", so votes on one prompt or
run are correlated, as real votes are. That is what the cluster bootstrap must account for.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def simulate_ballots(
    strengths: pd.Series,
    *,
    n_ballots: int,
    n_prompts: int,
    n_voters: int,
    rng: np.random.Generator,
    runs_per_system: int = 1,
    prompt_effect_sd: float = 0.0,
    run_effect_sd: float = 0.0,
    tie_probability: float = 0.0,
) -> pd.DataFrame:
    """Draw ``n_ballots`` pairwise ballots.

    Each ballot picks a prompt and a voter uniformly, an unordered pair of distinct systems
    uniformly, a random side order, and one of each system's runs for that prompt. With
    probability ``tie_probability`` it is a tie; otherwise side a wins with probability
    ``1 / (1 + exp(-(s_a - s_b)))``, where ``s`` is the system's strength plus its prompt and run
    effects. Columns: ``a``, ``b``, ``outcome``, ``prompt``, ``run_a``, ``run_b``, ``voter``
    (categoricals, so a million rows stay small and fast to encode).
    """
    names = list(strengths.index)
    k = len(names)
    if k < 2:
        raise ValueError("need at least two systems")
    theta = strengths.to_numpy(dtype=float)
    prompt = rng.integers(0, n_prompts, n_ballots)
    voter = rng.integers(0, n_voters, n_ballots)
    first = rng.integers(0, k, n_ballots)
    second = (first + rng.integers(1, k, n_ballots)) % k
    run_first = rng.integers(0, runs_per_system, n_ballots)
    run_second = rng.integers(0, runs_per_system, n_ballots)
    prompt_eff = rng.normal(0.0, prompt_effect_sd, (n_prompts, k)) if prompt_effect_sd else None
    run_eff = (
        rng.normal(0.0, run_effect_sd, (n_prompts, k, runs_per_system)) if run_effect_sd else None
    )

    def effective(system: np.ndarray, run: np.ndarray) -> np.ndarray:
        value = theta[system].copy()
        if prompt_eff is not None:
            value += prompt_eff[prompt, system]
        if run_eff is not None:
            value += run_eff[prompt, system, run]
        return value

    p_first = 1.0 / (1.0 + np.exp(effective(second, run_second) - effective(first, run_first)))
    first_wins = rng.random(n_ballots) < p_first
    tie = rng.random(n_ballots) < tie_probability
    outcome = np.where(tie, 2, np.where(first_wins, 0, 1))  # 0 = first, 1 = second, 2 = tie
    swap = rng.random(n_ballots) < 0.5
    a = np.where(swap, second, first)
    b = np.where(swap, first, second)
    run_a = np.where(swap, run_second, run_first)
    run_b = np.where(swap, run_first, run_second)
    side_outcome = np.where(outcome == 2, 2, np.where(swap, 1 - outcome, outcome))

    system_cat = pd.CategoricalDtype(names)
    width = len(str(max(n_prompts, n_voters)))
    prompt_names = [f"P{p:0{width}d}" for p in range(n_prompts)]
    run_names = [
        f"{names[s]}/P{p:0{width}d}/r{r}"
        for p in range(n_prompts)
        for s in range(k)
        for r in range(runs_per_system)
    ]

    def run_codes(system: np.ndarray, run: np.ndarray) -> np.ndarray:
        return (prompt * k + system) * runs_per_system + run

    return pd.DataFrame(
        {
            "a": pd.Categorical.from_codes(a, dtype=system_cat),
            "b": pd.Categorical.from_codes(b, dtype=system_cat),
            "outcome": pd.Categorical.from_codes(side_outcome, categories=["a", "b", "tie"]),
            "prompt": pd.Categorical.from_codes(prompt, categories=prompt_names),
            "run_a": pd.Categorical.from_codes(run_codes(a, run_a), categories=run_names),
            "run_b": pd.Categorical.from_codes(run_codes(b, run_b), categories=run_names),
            "voter": pd.Categorical.from_codes(
                voter, categories=[f"V{v:0{width}d}" for v in range(n_voters)]
            ),
        }
    )
