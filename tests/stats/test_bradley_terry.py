"""Bradley-Terry fit: a textbook data set with published estimates, ties, and the named errors.

Reference data: Agresti, Categorical Data Analysis (2nd ed., 2002), Sec. 10.6, Table 10.10:
1987 home and away wins among the seven American League East baseball teams (13 games per
pair). Table 10.11 (column 3) gives the Bradley-Terry estimates without a home-field effect,
with Baltimore as the reference: Milwaukee 1.58, Detroit 1.44, Toronto 1.29, New York 1.25,
Boston 1.11, Cleveland 0.68, and standard errors about 0.3. The R package BradleyTerry2
reproduces them to four places (tests/baseball.Rout.save: 1.5814, 1.4364, 1.2945, 1.2476,
1.1077, 0.6839; SEs 0.3433, 0.3396, 0.3367, 0.3359, 0.3339, 0.3319).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from stats import bradley_terry as bt

# (home, away, home wins, away wins)
BASEBALL = [
    ("Milwaukee", "Detroit", 4, 3),
    ("Milwaukee", "Toronto", 4, 2),
    ("Milwaukee", "New York", 4, 3),
    ("Milwaukee", "Boston", 6, 1),
    ("Milwaukee", "Cleveland", 4, 2),
    ("Milwaukee", "Baltimore", 6, 0),
    ("Detroit", "Milwaukee", 3, 3),
    ("Detroit", "Toronto", 4, 2),
    ("Detroit", "New York", 4, 3),
    ("Detroit", "Boston", 6, 0),
    ("Detroit", "Cleveland", 6, 1),
    ("Detroit", "Baltimore", 4, 3),
    ("Toronto", "Milwaukee", 2, 5),
    ("Toronto", "Detroit", 4, 3),
    ("Toronto", "New York", 2, 4),
    ("Toronto", "Boston", 4, 3),
    ("Toronto", "Cleveland", 4, 2),
    ("Toronto", "Baltimore", 6, 0),
    ("New York", "Milwaukee", 3, 3),
    ("New York", "Detroit", 5, 1),
    ("New York", "Toronto", 2, 5),
    ("New York", "Boston", 4, 3),
    ("New York", "Cleveland", 4, 2),
    ("New York", "Baltimore", 6, 1),
    ("Boston", "Milwaukee", 5, 1),
    ("Boston", "Detroit", 2, 5),
    ("Boston", "Toronto", 3, 3),
    ("Boston", "New York", 4, 2),
    ("Boston", "Cleveland", 5, 2),
    ("Boston", "Baltimore", 6, 0),
    ("Cleveland", "Milwaukee", 2, 5),
    ("Cleveland", "Detroit", 3, 3),
    ("Cleveland", "Toronto", 3, 4),
    ("Cleveland", "New York", 4, 3),
    ("Cleveland", "Boston", 4, 2),
    ("Cleveland", "Baltimore", 2, 4),
    ("Baltimore", "Milwaukee", 2, 5),
    ("Baltimore", "Detroit", 1, 5),
    ("Baltimore", "Toronto", 1, 6),
    ("Baltimore", "New York", 2, 4),
    ("Baltimore", "Boston", 1, 6),
    ("Baltimore", "Cleveland", 3, 4),
]
AGRESTI_TABLE_10_11 = {
    "Milwaukee": 1.58,
    "Detroit": 1.44,
    "Toronto": 1.29,
    "New York": 1.25,
    "Boston": 1.11,
    "Cleveland": 0.68,
    "Baltimore": 0.00,
}
BRADLEYTERRY2 = {
    "Milwaukee": (1.5814, 0.3433),
    "Detroit": (1.4364, 0.3396),
    "Toronto": (1.2945, 0.3367),
    "New York": (1.2476, 0.3359),
    "Boston": (1.1077, 0.3339),
    "Cleveland": (0.6839, 0.3319),
}


def baseball_games() -> pd.DataFrame:
    rows = []
    for home, away, home_wins, away_wins in BASEBALL:
        rows += [(home, away, "a")] * home_wins + [(home, away, "b")] * away_wins
    return pd.DataFrame(rows, columns=["a", "b", "outcome"])


def frame(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["a", "b", "outcome"])


def test_every_pair_played_thirteen_games() -> None:
    wins = bt.win_matrix(baseball_games())
    games = wins + wins.T
    off_diagonal = games.to_numpy()[~np.eye(7, dtype=bool)]
    assert (off_diagonal == 13).all()


def test_fit_reproduces_agresti_table_10_11() -> None:
    strengths = bt.fit(baseball_games())
    relative = strengths - strengths["Baltimore"]
    for team, published in AGRESTI_TABLE_10_11.items():
        assert round(relative[team], 2) == pytest.approx(published, abs=1e-9), team


def test_fit_and_standard_errors_match_bradleyterry2_to_four_places() -> None:
    games = baseball_games()
    strengths = bt.fit(games)
    cov = bt.strength_covariance(bt.win_matrix(games), strengths)
    for team, (estimate, se) in BRADLEYTERRY2.items():
        assert strengths[team] - strengths["Baltimore"] == pytest.approx(estimate, abs=5e-5)
        ref = "Baltimore"
        var = cov.loc[team, team] + cov.loc[ref, ref] - 2 * cov.loc[team, ref]
        assert math.sqrt(var) == pytest.approx(se, abs=5e-5)


def test_strengths_are_centred_natural_logs_indexed_by_system() -> None:
    strengths = bt.fit(baseball_games())
    assert strengths.name == "strength"
    assert list(strengths.index) == sorted(AGRESTI_TABLE_10_11)
    assert strengths.mean() == pytest.approx(0.0, abs=1e-12)


def test_mle_score_equations_hold() -> None:
    """At the MLE each system's expected wins equal its observed wins."""
    games = baseball_games()
    strengths = bt.fit(games)
    wins = bt.win_matrix(games)
    theta = strengths.to_numpy()
    p = 1 / (1 + np.exp(theta[None, :] - theta[:, None]))
    played = (wins + wins.T).to_numpy()
    expected = (played * p).sum(axis=1) - np.diag(played * p)
    assert expected == pytest.approx(wins.sum(axis=1).to_numpy(), abs=1e-8)


def test_two_systems_closed_form() -> None:
    # 7 wins to 3: the log-odds difference is ln(7/3).
    strengths = bt.fit(frame([("X", "Y", "a")] * 7 + [("X", "Y", "b")] * 3))
    assert strengths["X"] - strengths["Y"] == pytest.approx(math.log(7 / 3), abs=1e-10)


def test_tie_counts_half_a_win_to_each_side() -> None:
    with_ties = frame([("X", "Y", "a")] * 3 + [("X", "Y", "tie")] * 2 + [("X", "Y", "b")])
    # 3 + 1 = 4 wins for X, 1 + 1 = 2 for Y
    strengths = bt.fit(with_ties)
    assert strengths["X"] - strengths["Y"] == pytest.approx(math.log(4 / 2), abs=1e-10)
    wins = bt.win_matrix(with_ties)
    assert wins.loc["X", "Y"] == 4.0 and wins.loc["Y", "X"] == 2.0


def test_side_order_does_not_matter() -> None:
    games = baseball_games()
    flipped = pd.DataFrame(
        {
            "a": games["b"],
            "b": games["a"],
            "outcome": games["outcome"].map({"a": "b", "b": "a", "tie": "tie"}),
        }
    )
    pd.testing.assert_series_equal(bt.fit(games), bt.fit(flipped.sample(frac=1, random_state=3)))


def test_disconnected_graph_raises_named_error() -> None:
    games = frame(
        [("A", "B", "a"), ("B", "A", "a"), ("C", "D", "a"), ("D", "C", "a"), ("C", "D", "tie")]
    )
    with pytest.raises(bt.DisconnectedComparisonGraph) as info:
        bt.fit(games)
    assert isinstance(info.value, ValueError)
    assert sorted(map(sorted, info.value.components)) == [["A", "B"], ["C", "D"]]


def test_system_that_never_lost_raises_no_finite_estimate() -> None:
    games = frame(
        [("A", "B", "a"), ("A", "C", "a"), ("B", "C", "a"), ("C", "B", "a"), ("B", "A", "b")]
    )
    with pytest.raises(bt.NoFiniteEstimate) as info:
        bt.fit(games)
    assert info.value.never_lost == ["A"]
    assert sorted(info.value.never_won) == ["B", "C"]


def test_system_that_never_won_raises_no_finite_estimate() -> None:
    games = frame([("A", "B", "a"), ("B", "A", "a"), ("C", "A", "b"), ("C", "B", "b")])
    with pytest.raises(bt.NoFiniteEstimate):
        bt.fit(games)


def test_a_single_tie_is_enough_for_a_finite_estimate() -> None:
    games = frame([("A", "B", "a"), ("A", "B", "a"), ("A", "B", "tie")])
    strengths = bt.fit(games)
    assert strengths["A"] - strengths["B"] == pytest.approx(math.log(2.5 / 0.5))


def test_explicit_prior_makes_a_perfect_record_finite_but_not_a_disconnected_graph() -> None:
    perfect = frame([("A", "B", "a")] * 4 + [("B", "C", "a"), ("C", "B", "a")])
    strengths = bt.fit(perfect, prior=1.0)
    assert np.isfinite(strengths).all()
    assert strengths.idxmax() == "A"
    disconnected = frame([("A", "B", "a"), ("C", "D", "a")])
    with pytest.raises(bt.DisconnectedComparisonGraph):
        bt.fit(disconnected, prior=1.0)


@pytest.mark.parametrize(
    "rows, message",
    [
        ([("A", "B", "win")], "outcome must be one of"),
        ([("A", "A", "a")], "against itself"),
    ],
)
def test_malformed_comparisons_are_refused(rows: list, message: str) -> None:
    with pytest.raises(bt.InvalidComparisons, match=message):
        bt.fit(frame(rows))


def test_missing_column_is_refused() -> None:
    with pytest.raises(bt.InvalidComparisons, match="outcome"):
        bt.fit(pd.DataFrame({"a": ["A"], "b": ["B"]}))


def test_batch_fit_matches_single_fits_and_flags_bad_matrices() -> None:
    good = bt.win_matrix(baseball_games()).to_numpy()
    bad = good.copy()
    bad[:, 0] = 0.0  # team 0 never lost
    theta, ok = bt.fit_wins_batch(np.stack([good, bad, good * 2]))
    assert ok.tolist() == [True, False, True]
    single = bt.fit_wins(good).to_numpy()
    assert theta[0] == pytest.approx(single, abs=1e-10)
    assert theta[2] == pytest.approx(single, abs=1e-10)  # doubling every count changes nothing
    assert np.isnan(theta[1]).all()


def test_fit_agrees_with_per_ballot_logistic_regression() -> None:
    rng = np.random.default_rng(5)
    names = list("ABCDE")
    true = np.array([-1.0, -0.4, 0.0, 0.5, 0.9])
    i = rng.integers(0, 5, 3000)
    j = (i + rng.integers(1, 5, 3000)) % 5
    win = rng.random(3000) < 1 / (1 + np.exp(true[j] - true[i]))
    games = pd.DataFrame(
        {"a": np.array(names)[i], "b": np.array(names)[j], "outcome": np.where(win, "a", "b")}
    )

    def loss(theta: np.ndarray) -> float:
        d = theta[i] - theta[j]
        return float(np.sum(np.logaddexp(0, -np.where(win, d, -d))))

    per_ballot = optimize.minimize(loss, np.zeros(5), method="BFGS", options={"gtol": 1e-8}).x
    per_ballot -= per_ballot.mean()
    assert bt.fit(games).to_numpy() == pytest.approx(per_ballot, abs=1e-5)


def test_display_scale_anchors_the_mean_and_uses_400_per_factor_ten() -> None:
    strengths = pd.Series({"A": math.log(10) / 2, "B": -math.log(10) / 2})
    ratings = bt.display_scale(strengths)
    assert ratings["A"] - ratings["B"] == pytest.approx(400.0)
    assert ratings.mean() == pytest.approx(bt.DISPLAY_ANCHOR)
    anchored = bt.display_scale(strengths, reference="B", anchor=1500)
    assert anchored["B"] == pytest.approx(1500) and anchored["A"] == pytest.approx(1900)


def test_win_probability_from_strengths() -> None:
    strengths = pd.Series({"A": math.log(3), "B": 0.0})
    assert bt.win_probability(strengths, "A", "B") == pytest.approx(0.75)
