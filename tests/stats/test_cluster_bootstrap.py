"""Cluster bootstrap: protocol clusters, reproducibility, coverage of known strengths, prompt
sensitivity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rounds.protocols import Protocol
from stats import bootstrap as bs
from stats import bradley_terry as bt
from stats.simulation import simulate_ballots

TRUE = pd.Series([-0.8, -0.3, 0.0, 0.4, 0.7], index=list("ABCDE"))
TRUE = TRUE - TRUE.mean()
FULL_FILM = bs.bootstrap_clusters(Protocol.load("ai-duel-0.1"), "full_film")


def ballots(seed: int, **overrides) -> pd.DataFrame:
    options = dict(
        n_ballots=1500,
        n_prompts=30,
        n_voters=200,
        runs_per_system=2,
        prompt_effect_sd=0.4,
        run_effect_sd=0.2,
    )
    options.update(overrides)
    return simulate_ballots(TRUE, rng=np.random.default_rng(seed), **options)


def test_clusters_come_from_the_definition() -> None:
    protocol = Protocol.load("ai-duel-0.1")
    assert FULL_FILM == tuple(protocol.definition["bootstrap_clusters"]["full_film"])
    assert bs.bootstrap_clusters(protocol.definition, "segment") == tuple(
        protocol.definition["bootstrap_clusters"]["segment"]
    )
    with pytest.raises(bs.ClusterError):
        bs.bootstrap_clusters(Protocol.load("tovaki-2026-r1"), "full_film")


def test_same_seed_same_replicates_whatever_the_row_order() -> None:
    data = ballots(1)
    first = bs.bootstrap_bradley_terry(data, FULL_FILM, seed=11, n_replicates=50)
    shuffled = data.sample(frac=1.0, random_state=4).reset_index(drop=True)
    again = bs.bootstrap_bradley_terry(shuffled, FULL_FILM, seed=11, n_replicates=50)
    pd.testing.assert_frame_equal(first.replicates, again.replicates)
    other = bs.bootstrap_bradley_terry(data, FULL_FILM, seed=12, n_replicates=50)
    assert not np.allclose(first.replicates.to_numpy(), other.replicates.to_numpy())


def test_default_is_one_thousand_replicates_with_the_seed_recorded() -> None:
    result = bs.bootstrap_bradley_terry(ballots(2, n_ballots=600), FULL_FILM, seed=5)
    assert result.n_replicates == 1000 == bs.DEFAULT_REPLICATES
    assert result.seed == 5 and result.clusters == FULL_FILM and result.level == 0.95


def test_seed_is_required_and_must_be_an_integer_or_generator() -> None:
    with pytest.raises(TypeError):
        bs.bootstrap_bradley_terry(ballots(3, n_ballots=300), FULL_FILM, seed="7")  # type: ignore[arg-type]


def test_point_estimate_equals_the_plain_fit() -> None:
    data = ballots(4)
    result = bs.bootstrap_bradley_terry(data, FULL_FILM, seed=1, n_replicates=20)
    pd.testing.assert_series_equal(result.estimate, bt.fit(data))


def test_missing_cluster_columns_are_refused() -> None:
    data = ballots(5, n_ballots=300).drop(columns=["run_b"])
    with pytest.raises(bs.ClusterError, match="run_b"):
        bs.bootstrap_bradley_terry(data, FULL_FILM, seed=1, n_replicates=10)


def test_a_run_id_shared_by_two_systems_is_refused() -> None:
    data = ballots(6, n_ballots=300)
    data["run_a"] = data["run_a"].astype(str)
    data["run_b"] = data["run_b"].astype(str)
    data.loc[data.index[0], "run_a"] = data.loc[data.index[0], "run_b"]
    with pytest.raises(bs.ClusterError, match="two prompts or two systems"):
        bs.ClusterDesign.from_frame(data, FULL_FILM)


def test_replicate_weights_resample_whole_clusters_and_average_one() -> None:
    data = ballots(7, n_ballots=2000)
    design = bs.ClusterDesign.from_frame(data, FULL_FILM)
    weights = np.concatenate(list(design.leaf_weights(400, np.random.default_rng(0))))
    assert weights.shape == (400, design.n_leaves)
    assert design.n_leaves < len(data)  # ballots are aggregated, never resampled one by one
    assert abs(weights.mean() - 1.0) < 0.02
    # A prompt that is not drawn takes every one of its leaves with it.
    first_prompt = design.leaf_prompt == 0
    dropped = weights[:, first_prompt].sum(axis=1) == 0
    assert dropped.any()
    # Weights are products of integer draw counts.
    assert np.array_equal(weights, np.round(weights))


def test_segment_clusters_resample_segments_and_voters() -> None:
    data = ballots(8, n_ballots=1200)
    data["segment"] = np.random.default_rng(1).integers(0, 4, len(data))
    clusters = bs.bootstrap_clusters(Protocol.load("ai-duel-0.1"), "segment")
    design = bs.ClusterDesign.from_frame(data, clusters)
    assert design.seg_count.tolist() == [4] * 30
    weights = np.concatenate(list(design.leaf_weights(300, np.random.default_rng(2))))
    assert abs(weights.mean() - 1.0) < 0.05
    result = bs.bootstrap_bradley_terry(data, clusters, seed=3, n_replicates=100)
    intervals = result.intervals()
    assert (intervals["lower"] <= intervals["estimate"]).all()
    assert (intervals["estimate"] <= intervals["upper"]).all()


def test_known_strengths_fall_inside_their_intervals() -> None:
    # Small cluster effects: large ones shrink the marginal (population-averaged) strengths
    # below the conditional ones the simulation is parameterised by.
    data = ballots(9, n_ballots=6000, n_prompts=40, prompt_effect_sd=0.15, run_effect_sd=0.05)
    result = bs.bootstrap_bradley_terry(data, FULL_FILM, seed=9, n_replicates=400)
    intervals = result.intervals().loc[TRUE.index]
    inside = (intervals["lower"] <= TRUE) & (TRUE <= intervals["upper"])
    assert inside.all(), intervals.assign(true=TRUE)
    assert result.failed_replicates == 0


def test_coverage_of_known_strengths_is_at_least_nominal() -> None:
    """40 simulated rounds x 5 systems: the 95% intervals cover the true strengths about as
    often as stated. Resampling both prompts and runs (the protocol's clusters) is slightly
    conservative (about 0.98 in longer runs of this simulation); resampling single ballots
    instead ignores the prompt and run effects and covers clearly less often."""
    cluster_hits, ballot_hits = [], []
    for k in range(40):
        data = ballots(100 + k)
        cluster = bs.bootstrap_bradley_terry(data, FULL_FILM, seed=k, n_replicates=200)
        iv = cluster.intervals().loc[TRUE.index]
        cluster_hits.append(((iv["lower"] <= TRUE) & (TRUE <= iv["upper"])).to_numpy())
        # Per-ballot bootstrap: every ballot its own "prompt".
        naive = data.assign(prompt=np.arange(len(data)).astype(str))
        iv = bs.bootstrap_bradley_terry(naive, ("prompt",), seed=k, n_replicates=200).intervals()
        iv = iv.loc[TRUE.index]
        ballot_hits.append(((iv["lower"] <= TRUE) & (TRUE <= iv["upper"])).to_numpy())
    cluster_coverage = float(np.mean(cluster_hits))
    ballot_coverage = float(np.mean(ballot_hits))
    assert 0.92 <= cluster_coverage <= 1.0
    assert ballot_coverage < cluster_coverage - 0.05


def test_display_intervals_share_the_rating_scale() -> None:
    result = bs.bootstrap_bradley_terry(ballots(10), FULL_FILM, seed=1, n_replicates=50)
    display = result.display()
    intervals = result.intervals()
    scale = bt.DISPLAY_POINTS_PER_NATURAL_LOG
    assert display["rating"].to_numpy() == pytest.approx(
        bt.DISPLAY_ANCHOR + scale * intervals["estimate"].to_numpy()
    )
    assert (display["lower"] <= display["rating"]).all()


def test_failed_replicates_are_counted_not_hidden() -> None:
    # System E appears on one prompt only: replicates that do not draw it cannot place E.
    data = ballots(11, n_ballots=1500)
    first = data["prompt"].cat.categories[0]
    data = data[((data["a"] != "E") & (data["b"] != "E")) | (data["prompt"] == first)]
    result = bs.bootstrap_bradley_terry(data, FULL_FILM, seed=2, n_replicates=200)
    assert 0 < result.failed_replicates < 200
    assert result.replicates.isna().any(axis=1).sum() == result.failed_replicates
    assert result.intervals()["lower"].notna().all()


def test_prompt_sensitivity_refits_without_each_prompt() -> None:
    data = ballots(12)
    sensitivity = bs.prompt_sensitivity(data)
    assert len(sensitivity.strengths) == 30 and not sensitivity.failed
    # Refit by hand without one prompt.
    left_out = sensitivity.strengths.index[3]
    by_hand = bt.fit(data[data["prompt"] != left_out])
    assert sensitivity.strengths.loc[left_out].to_numpy() == pytest.approx(
        by_hand.to_numpy(), abs=1e-8
    )
    assert sensitivity.top_is_stable()
    assert (sensitivity.max_shift > 0).all()


def test_prompt_sensitivity_reports_a_prompt_without_which_no_estimate_exists() -> None:
    data = ballots(13, n_ballots=800)
    first = data["prompt"].cat.categories[0]
    data = data[((data["a"] != "E") & (data["b"] != "E")) | (data["prompt"] == first)]
    sensitivity = bs.prompt_sensitivity(data)
    assert sensitivity.failed == (first,)
    assert not sensitivity.top_is_stable()
