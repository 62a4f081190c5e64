"""Jury results: one panel at a time, per-dimension means with cluster intervals, the holistic
choice through Bradley-Terry, agreement, and no composite."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from rounds.protocols import Protocol
from stats import bootstrap as bs
from stats import jury_results as jr

PROTOCOL = Protocol.load("ai-duel-0.1")
FULL_FILM = bs.bootstrap_clusters(PROTOCOL, "full_film")
DIMENSIONS = PROTOCOL.quality_dimensions[:3]
LEVEL = {"X": 4.0, "Y": 3.0, "Z": 2.0}


def jury_scores(seed: int, panel: str = "craft", jurors: int = 8, prompts: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for prompt, system, run in itertools.product(range(prompts), LEVEL, range(2)):
        film_effect = rng.normal(0, 0.3)
        for juror, dimension in itertools.product(range(jurors), DIMENSIONS):
            score = LEVEL[system] + film_effect + rng.normal(0, 0.5)
            rows.append(
                {
                    "panel": panel,
                    "juror": f"j{juror}",
                    "prompt": f"p{prompt}",
                    "run": f"{system}-p{prompt}-r{run}",
                    "system": system,
                    "dimension": dimension,
                    "score": float(np.clip(np.round(score), 1, 5)),
                }
            )
    return pd.DataFrame(rows)


def test_dimension_means_with_intervals_per_system() -> None:
    scores = jury_scores(1)
    result = jr.dimension_results(scores, FULL_FILM, seed=3, n_replicates=300)
    assert set(result["dimension"]) == set(DIMENSIONS)
    assert len(result) == len(DIMENSIONS) * len(LEVEL)
    by_hand = scores.groupby(["dimension", "system"])["score"].mean()
    for row in result.itertuples():
        assert row.mean == pytest.approx(by_hand[(row.dimension, row.system)])
        assert row.lower <= row.mean <= row.upper
        assert row.jurors == 8 and row.prompts == 6 and row.runs == 12
    # Best system first within each dimension.
    firsts = result.groupby("dimension")["system"].first()
    assert (firsts == "X").all()
    assert "composite" not in " ".join(result.columns)


def test_intervals_are_reproducible_and_clustered() -> None:
    scores = jury_scores(2)
    first = jr.dimension_results(scores, FULL_FILM, seed=9, n_replicates=200)
    shuffled = scores.sample(frac=1, random_state=2)
    again = jr.dimension_results(shuffled, FULL_FILM, seed=9, n_replicates=200)
    pd.testing.assert_frame_equal(first, again)
    # Treating every score as its own cluster (resampling single scores) gives narrower intervals
    # than the protocol's prompt/run clusters, because film effects are shared.
    naive = scores.assign(prompt=np.arange(len(scores)).astype(str))
    single = jr.dimension_results(naive, ("prompt",), seed=9, n_replicates=200)
    width = (first["upper"] - first["lower"]).mean()
    naive_width = (single["upper"] - single["lower"]).mean()
    assert naive_width < width


def test_mixed_panels_are_refused() -> None:
    mixed = pd.concat([jury_scores(3, "audience"), jury_scores(3, "craft")])
    with pytest.raises(jr.MixedPanels, match="never combined"):
        jr.dimension_results(mixed, FULL_FILM, seed=1, n_replicates=10)
    with pytest.raises(jr.MixedPanels):
        jr.dimension_agreement(mixed)
    with pytest.raises(ValueError, match="panel"):
        jr.dimension_results(jury_scores(3).drop(columns=["panel"]), FULL_FILM, seed=1)


def holistic_choices(seed: int, panel: str = "audience") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    strength = {"X": 1.0, "Y": 0.0, "Z": -1.0}
    rows = []
    for prompt in range(6):
        for juror in range(10):
            for sa, sb in itertools.combinations(strength, 2):
                ra, rb = rng.integers(0, 2, 2)
                win = rng.random() < 1 / (1 + np.exp(strength[sb] - strength[sa]))
                rows.append(
                    {
                        "panel": panel,
                        "juror": f"j{juror}",
                        "prompt": f"p{prompt}",
                        "a": sa,
                        "b": sb,
                        "run_a": f"{sa}-p{prompt}-r{ra}",
                        "run_b": f"{sb}-p{prompt}-r{rb}",
                        "outcome": "a" if win else "b",
                    }
                )
    return pd.DataFrame(rows)


def test_holistic_choice_uses_bradley_terry_per_panel() -> None:
    result = jr.holistic_choice_result(holistic_choices(4), FULL_FILM, seed=2, n_replicates=200)
    intervals = result.intervals()
    assert list(intervals.index) == ["X", "Y", "Z"]
    assert result.clusters == FULL_FILM
    mixed = pd.concat([holistic_choices(4, "audience"), holistic_choices(5, "craft")])
    with pytest.raises(jr.MixedPanels):
        jr.holistic_choice_result(mixed, FULL_FILM, seed=2, n_replicates=10)


def test_dimension_agreement_is_ordinal_alpha_per_dimension() -> None:
    agreement = jr.dimension_agreement(jury_scores(6))
    assert list(agreement["dimension"]) == sorted(DIMENSIONS)
    # Jurors agree on the system levels far more than chance.
    assert (agreement["alpha"] > 0.4).all()
    assert (agreement["jurors"] == 8).all()


def test_choice_agreement_ignores_side_order() -> None:
    choices = holistic_choices(7)
    swapped = choices.assign(
        a=choices["b"],
        b=choices["a"],
        run_a=choices["run_b"],
        run_b=choices["run_a"],
        outcome=choices["outcome"].map({"a": "b", "b": "a"}),
    )
    assert jr.choice_agreement(choices) == pytest.approx(jr.choice_agreement(swapped))
