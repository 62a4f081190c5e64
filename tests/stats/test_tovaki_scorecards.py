"""Tovaki weighted totals, the close-result rule with exact arithmetic, disagreement flags and
the required scope language, all read from the definition."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pandas as pd
import pytest

from rounds.protocols import Protocol
from stats import scorecards as sc

TOVAKI = Protocol.load("tovaki-2026-r1")
RULE = sc.ScoringRule.from_definition(TOVAKI)
DIMENSIONS = [d["key"] for d in TOVAKI.scoring["dimensions"]]
REVIEWERS = ["r1", "r2", "r3"]


def uniform_scores(system: str, score: float, reviewers=REVIEWERS) -> list[dict]:
    return [
        {"system": system, "reviewer": r, "dimension": d, "score": score}
        for r, d in itertools.product(reviewers, DIMENSIONS)
    ]


def test_rule_comes_from_the_definition() -> None:
    scoring = TOVAKI.scoring
    assert dict(RULE.weights) == {d["key"]: d["weight"] for d in scoring["dimensions"]}
    assert sum(RULE.weights.values()) == scoring["weighted_total"] == 100
    assert (RULE.scale_min, RULE.scale_max, RULE.step) == (0, 5, Fraction(1, 2))
    assert RULE.disagreement_range == scoring["disagreement_flag_range_on_0_to_5_scale"]
    assert RULE.close_result_threshold == TOVAKI.publication_gate["close_result_threshold_points"]
    assert sc.DEFAULT_CLOSE_RESULT_THRESHOLD == RULE.close_result_threshold
    assert RULE.scope_language == "in this six-task Tovaki integration sample"


def test_ai_duel_forbids_a_weighted_composite() -> None:
    with pytest.raises(ValueError):
        sc.ScoringRule.from_definition(Protocol.load("ai-duel-0.1"))


def test_all_fives_is_one_hundred_and_all_zeros_is_zero() -> None:
    scores = pd.DataFrame(uniform_scores("A", 5) + uniform_scores("B", 0))
    totals = sc.weighted_totals(scores, RULE)
    assert totals.to_dict() == {"A": 100, "B": 0}
    assert all(isinstance(v, Fraction) for v in totals)


def test_total_is_the_weighted_mean_of_reviewers_scores() -> None:
    rows = uniform_scores("A", 3)
    # One reviewer gives 4.5 on prompt_adherence (weight 15): mean 3.5 there.
    for row in rows:
        if row["reviewer"] == "r1" and row["dimension"] == "prompt_adherence":
            row["score"] = 4.5
    totals = sc.weighted_totals(pd.DataFrame(rows), RULE)
    expected = Fraction(3 * 100, 5) + Fraction(15, 5) * Fraction(1, 2)
    assert totals["A"] == expected == Fraction(123, 2)


def test_totals_with_thirds_stay_exact() -> None:
    rows = uniform_scores("A", 4)
    rows[0]["score"] = 4.5  # r1, prompt_adherence: mean 25/6
    total = sc.weighted_totals(pd.DataFrame(rows), RULE)["A"]
    assert total == 80 + Fraction(15, 5) * Fraction(1, 6)
    assert total.denominator == 2


def test_plain_weights_need_the_scale() -> None:
    scores = pd.DataFrame(uniform_scores("A", 5))
    weights = dict(RULE.weights)
    with pytest.raises(ValueError, match="scale"):
        sc.weighted_totals(scores, weights)
    scale = tuple(TOVAKI.scoring["scale"][k] for k in ("min", "max", "step"))
    assert sc.weighted_totals(scores, weights, scale=scale)["A"] == 100


@pytest.mark.parametrize(
    "bad, message",
    [(5.5, "outside"), (-0.5, "outside"), (2.25, "step"), (None, "missing"), ("x", "not a number")],
)
def test_invalid_scores_are_refused(bad: object, message: str) -> None:
    rows = uniform_scores("A", 3)
    rows[0]["score"] = bad
    with pytest.raises(sc.InvalidScores, match=message):
        sc.weighted_totals(pd.DataFrame(rows), RULE)


def test_duplicate_unknown_and_missing_dimensions_are_refused() -> None:
    rows = uniform_scores("A", 3)
    with pytest.raises(sc.InvalidScores, match="twice"):
        sc.weighted_totals(pd.DataFrame(rows + rows[:1]), RULE)
    with pytest.raises(sc.InvalidScores, match="unknown dimension"):
        sc.weighted_totals(pd.DataFrame(rows + [dict(rows[0], dimension="vibes")]), RULE)
    with pytest.raises(sc.InvalidScores, match="no score for"):
        sc.weighted_totals(pd.DataFrame(rows[1:]), RULE)  # r1 skipped prompt_adherence


@pytest.mark.parametrize(
    "first, second, distinguishable",
    [
        (80.0, 77.0, True),  # exactly 3: distinguishable
        (80.0, 77.5, False),  # 2.5 < 3
        ("80.1", "77.1", True),  # 3 exactly in decimal, 2.9999999999999716 in binary floats
        (80.1, 77.1, True),
        (Fraction(241, 3), Fraction(232, 3), True),  # 80.333... - 77.333... = 3
        (Fraction(241, 3), Fraction(233, 3), False),
        (100, 97.01, False),
        (50, 47, True),
    ],
)
def test_close_result_rule_is_exact(first, second, distinguishable: bool) -> None:
    totals = {"A": first, "B": second, "C": 10}
    assert sc.top_two_distinguishable(totals) is distinguishable
    assert sc.top_two_distinguishable(totals, threshold=RULE.close_result_threshold) is (
        distinguishable
    )


def test_close_result_reports_the_working() -> None:
    result = sc.close_result(pd.Series({"B": 77.5, "A": 80.0, "C": 90}))
    assert (result.first, result.second) == ("C", "A")
    assert result.difference == 10 and result.distinguishable


def test_totals_from_scores_meet_the_rule_at_its_edge() -> None:
    # A: 4.0 everywhere = 80; B: 3.5 on 30 weight points and 4.0 elsewhere = 77.
    b_rows = uniform_scores("B", 4)
    for row in b_rows:
        if row["dimension"] in ("prompt_adherence", "temporal_stability"):
            row["score"] = 3.5
    scores = pd.DataFrame(uniform_scores("A", 4) + b_rows)
    totals = sc.weighted_totals(scores, RULE)
    assert totals.to_dict() == {"A": 80, "B": 77}
    assert sc.top_two_distinguishable(totals)


def test_disagreement_flag_at_a_range_of_three() -> None:
    rows = uniform_scores("A", 2)
    for row in rows:
        if row["reviewer"] == "r1" and row["dimension"] == "motion_contact":
            row["score"] = 5  # range 3: flagged
        if row["reviewer"] == "r2" and row["dimension"] == "camera_geography":
            row["score"] = 4.5  # range 2.5: not flagged
    flags = sc.disagreement_flags(pd.DataFrame(rows), RULE).set_index("dimension")
    assert bool(flags.loc["motion_contact", "flag"]) is True
    assert flags.loc["motion_contact", "range"] == 3
    assert bool(flags.loc["camera_geography", "flag"]) is False
    assert flags["flag"].sum() == 1


def test_disagreement_is_per_task_when_tasks_are_given() -> None:
    rows = []
    for task in ("relationship_handoff", "dialogue_reaction"):
        rows += [dict(r, task=task) for r in uniform_scores("A", 2)]
    rows[0]["score"] = 5  # one task, one dimension
    flags = sc.disagreement_flags(pd.DataFrame(rows), RULE)
    assert flags["flag"].sum() == 1
    assert flags.loc[flags["flag"], "task"].tolist() == ["relationship_handoff"]


def test_published_result_carries_the_scope_language() -> None:
    rows = uniform_scores("A", 4) + uniform_scores("B", 4)
    rows[0]["score"] = 4.5  # A ahead by 0.5 * 15 / 5 / 3 = 0.5
    close = pd.DataFrame(rows)
    result = sc.publish_totals(close, RULE)
    assert not result.close.distinguishable
    assert RULE.scope_language in result.statement
    assert "not distinguishable" in result.statement
    assert result.as_dict()["difference"] == "1/2"
    apart = pd.DataFrame(uniform_scores("A", 4) + uniform_scores("B", 3))
    result = sc.publish_totals(apart, RULE)
    assert result.close.distinguishable
    assert result.statement.endswith("20 ahead of B.")
    assert RULE.scope_language in result.statement
