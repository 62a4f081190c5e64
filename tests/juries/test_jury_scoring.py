"""Scorecard rules (juries/scoring.py) and conflict matching (juries/conflicts.py). Pure,
table-driven from the protocol definitions."""

from __future__ import annotations

from decimal import Decimal

import pytest

from juries.conflicts import Affiliation, Entrant, find_conflicts
from juries.schedules import seeded_rng
from juries.scoring import (
    AttentionRule,
    InvalidScorecard,
    ScoreScale,
    anchors_problems,
    anchors_sha256,
    anchors_template,
    disagreement,
    task_local_labels,
    validate_scores,
)
from rounds.protocols import Protocol

TOVAKI = Protocol.load("tovaki-2026-r1")
AI_DUEL = Protocol.load("ai-duel-0.1")
SCALE = ScoreScale.from_definition(TOVAKI.scoring["scale"])


def test_tovaki_scale_is_0_to_5_in_half_steps():
    assert SCALE.points()[:3] == [Decimal(0), Decimal("0.5"), Decimal(1)]
    assert SCALE.points()[-1] == Decimal(5) and len(SCALE.points()) == 11


@pytest.mark.parametrize("value", ["0", "0.5", "2.5", "5", 3, 4.5, "3.0"])
def test_scores_on_the_scale_are_accepted_exactly(value):
    assert SCALE.validate(value) == Decimal(str(value))


@pytest.mark.parametrize("value", ["-0.5", "5.5", "2.25", "0.1", 4.9, "nan", "inf", "x", True])
def test_scores_off_the_scale_or_step_are_refused(value):
    with pytest.raises(InvalidScorecard):
        SCALE.validate(value)


def test_a_scorecard_needs_exactly_the_protocols_dimensions():
    dims = TOVAKI.quality_dimensions
    assert len(dims) == 8
    full = {d: "3.5" for d in dims}
    assert validate_scores(full, dimensions=dims, scale=SCALE)[dims[0]] == Decimal("3.5")
    with pytest.raises(InvalidScorecard, match="missing"):
        validate_scores({d: "3" for d in dims[:-1]}, dimensions=dims, scale=SCALE)
    with pytest.raises(InvalidScorecard, match="unknown"):
        validate_scores({**full, "vibes": "5"}, dimensions=dims, scale=SCALE)


def test_tovaki_weights_sum_to_the_weighted_total():
    scoring = TOVAKI.scoring
    assert sum(d["weight"] for d in scoring["dimensions"]) == scoring["weighted_total"] == 100
    assert [d["key"] for d in scoring["dimensions"]] == TOVAKI.quality_dimensions


@pytest.mark.parametrize(
    "scores,flagged",
    [
        (["1", "4", "2"], True),  # range 3: "differ by 3 or more"
        (["0", "5", "5"], True),
        (["1.5", "4", "3"], False),  # range 2.5
        (["2", "2", "2"], False),
        (["4.5", "1.5"], True),
        (["3"], False),
    ],
)
def test_disagreement_flag_at_the_definitions_range(scores, flagged):
    flag_range = TOVAKI.scoring["disagreement_flag_range_on_0_to_5_scale"]
    assert disagreement(scores, flag_range=flag_range) is flagged


def test_task_local_labels_are_a_fresh_random_bijection_in_each_task():
    labels = TOVAKI.definition["controls"]["task_local_anonymous_labels"]
    assert labels == ["A", "B", "C", "D"]
    items = ["run-1", "run-2", "run-3", "run-4"]
    drawn = [task_local_labels(items, labels, rng=seeded_rng(f"task-{t}")) for t in range(12)]
    for mapping in drawn:
        assert sorted(mapping) == items and sorted(mapping.values()) == labels
    assert len({tuple(sorted(m.items())) for m in drawn}) > 1  # differs across tasks
    with pytest.raises(InvalidScorecard):
        task_local_labels([*items, "run-5"], labels, rng=seeded_rng("x"))


def test_anchors_must_cover_every_dimension_at_both_ends_before_freezing():
    dims = AI_DUEL.quality_dimensions
    scale = ScoreScale(Decimal(1), Decimal(5), Decimal(1))
    template = anchors_template(dims, scale)
    assert set(template) == set(dims)
    problems = anchors_problems(template, dimensions=dims, scale=scale)
    assert any("empty" in p for p in problems)
    filled = {d: {"1": "poor", "3": "fair", "5": "excellent"} for d in dims}
    assert anchors_problems(filled, dimensions=dims, scale=scale) == []
    no_top = {**filled, dims[0]: {"1": "poor"}}
    assert anchors_problems(no_top, dimensions=dims, scale=scale) == [
        f"{dims[0]}: needs an anchor at 5"
    ]
    off_scale = {**filled, dims[1]: {"1": "poor", "2.5": "?", "5": "great"}}
    assert (
        "not a point of the scale" in anchors_problems(off_scale, dimensions=dims, scale=scale)[0]
    )
    # The hash is over canonical anchors: "5.0" and "5" are one point.
    respelled = {d: {"1.0": "poor", "3": "fair", "5.00": "excellent"} for d in dims}
    assert anchors_sha256(respelled) == anchors_sha256(filled)


def test_the_attention_rule_is_stated_and_applied():
    rule = AttentionRule(min_correct=2)
    assert rule.passed(2) and rule.passed(3) and not rule.passed(1)
    statement = rule.statement(3)
    assert "fewer than 2 of the 3" in statement
    assert "never enter any quality score" in statement


def test_conflicts_match_excluded_relationships_with_system_or_vendor():
    excluded = AI_DUEL.jury["excluded_relationships"]
    entrants = [Entrant("S-1", "Cinemator", "Acme Films"), Entrant("S-2", "Reelix", "Reel Co")]
    found = find_conflicts(
        [
            Affiliation("  ACME   films ", "employee"),
            Affiliation("Reelix", "investor"),
            Affiliation("Reel Co", "other"),  # not an excluded relationship
            Affiliation("Unrelated Inc", "contractor"),
        ],
        entrants,
        excluded_relationships=excluded,
    )
    assert {(c.entrant_label, c.relationship, c.matched) for c in found} == {
        ("S-1", "employee", "vendor"),
        ("S-2", "investor", "system"),
    }
    for relationship in ("employee", "investor", "contractor", "affiliate"):
        assert find_conflicts(
            [Affiliation("Reelix", relationship)], entrants, excluded_relationships=excluded
        )
