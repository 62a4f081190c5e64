"""Publication labels at every threshold edge, with the thresholds read from the definition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rounds.protocols import Protocol
from stats import publication as pub

PROTOCOL = Protocol.load("ai-duel-0.1")
LEVELS = pub.PublicationLevels.from_definition(PROTOCOL)
SECTION = PROTOCOL.publication_levels
PROV = LEVELS.requirements(pub.PROVISIONAL)
RANK = LEVELS.requirements(pub.RANKED)
PILOT_BELOW = LEVELS.pilot_below_votes
SHORT = LEVELS.vote_threshold_classes[0]
LONG = "minute_15"
LONG_MIN_JURORS = PROTOCOL.jury["minimum_complete_view"][LONG]

# A system that meets Ranked exactly; each case moves one count to one side of one edge.
AT_RANKED = {name: RANK.get(name, PROV.get(name, 0)) for name in ("votes", "prompts", "opponents")}
AT_RANKED["voters"] = RANK["voters"]


def counts(rows: dict[str, dict[str, int]], prompts: int = 10) -> pub.PoolCounts:
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "system"
    return pub.PoolCounts(systems=table, prompts=prompts, ballots=0, voters=0)


def board(target: dict[str, int], *, others: int = 3) -> pub.PoolCounts:
    """The target system ``T`` plus comfortable Ranked opponents."""
    rows = {"T": target}
    for k in range(others):
        rows[f"O{k}"] = dict(AT_RANKED, votes=AT_RANKED["votes"] + 50)
    return counts(rows)


def with_(**changes: int) -> dict[str, int]:
    return dict(AT_RANKED, **changes)


def test_thresholds_are_the_definitions() -> None:
    assert PILOT_BELOW == SECTION["pilot"]["max_valid_votes_exclusive"]
    assert PROV == {
        "votes": SECTION["provisional"]["min_votes"],
        "prompts": SECTION["provisional"]["min_prompts"],
        "opponents": SECTION["provisional"]["min_opponents"],
    }
    assert RANK["voters"] == SECTION["ranked"]["min_voters"]
    assert LEVELS.vote_threshold_classes == ("minute_1", "minute_2")


PROVISIONAL_FLOOR = dict(
    votes=PROV["votes"], prompts=PROV["prompts"], opponents=PROV["opponents"], voters=0
)

EDGES = [
    # (case, target counts, expected label)
    ("votes one below pilot limit", dict(PROVISIONAL_FLOOR, votes=PILOT_BELOW - 1), pub.PILOT),
    ("votes at pilot limit", dict(PROVISIONAL_FLOOR, votes=PILOT_BELOW), pub.PROVISIONAL),
    ("provisional votes - 1", dict(PROVISIONAL_FLOOR, votes=PROV["votes"] - 1), pub.PILOT),
    ("provisional prompts - 1", dict(PROVISIONAL_FLOOR, prompts=PROV["prompts"] - 1), pub.PILOT),
    ("provisional prompts", dict(PROVISIONAL_FLOOR, prompts=PROV["prompts"]), pub.PROVISIONAL),
    (
        "provisional opponents - 1",
        dict(PROVISIONAL_FLOOR, opponents=PROV["opponents"] - 1),
        pub.PILOT,
    ),
    ("ranked exactly", with_(), pub.RANKED),
    ("ranked votes - 1", with_(votes=RANK["votes"] - 1), pub.PROVISIONAL),
    ("ranked prompts - 1", with_(prompts=RANK["prompts"] - 1), pub.PROVISIONAL),
    ("ranked opponents - 1", with_(opponents=RANK["opponents"] - 1), pub.PROVISIONAL),
    ("ranked voters - 1", with_(voters=RANK["voters"] - 1), pub.PROVISIONAL),
    (
        "ranked votes but provisional prompts - 1",
        with_(prompts=PROV["prompts"] - 1),
        pub.PILOT,
    ),
]


@pytest.mark.parametrize("case, target, expected", EDGES, ids=[e[0] for e in EDGES])
def test_vote_threshold_edges(case: str, target: dict[str, int], expected: str) -> None:
    result = pub.publication_label(LEVELS, duration_class=SHORT, counts=board(target))
    label = result.label_of("T")
    assert label.key == expected, label.reasons
    assert label.text == SECTION[expected]["label"]
    assert label.counts == target
    if expected != pub.RANKED:
        assert label.reasons  # says which requirement was missed


def test_exact_edge_values_from_the_definition() -> None:
    """The 99/100, 299/300, 4/5 and 5/6 prompts, 74/75 voters edges of protocol 0.1."""
    assert (PILOT_BELOW, PROV["votes"], RANK["votes"]) == (100, 100, 300)
    assert (PROV["prompts"], RANK["prompts"]) == (5, 6)
    assert (PROV["opponents"], RANK["opponents"], RANK["voters"]) == (2, 3, 75)


def test_board_label_is_the_weakest_system() -> None:
    pool = counts({"A": with_(), "B": with_(), "C": with_(votes=RANK["votes"] - 1)})
    result = pub.publication_label(LEVELS, duration_class=SHORT, counts=pool)
    assert result.result_type == pub.LEADERBOARD
    assert result.key == pub.PROVISIONAL


def test_open_record_for_one_qualified_system() -> None:
    pool = counts({"A": dict(votes=0, prompts=0, opponents=0, voters=0)}, prompts=1)
    result = pub.publication_label(PROTOCOL, duration_class=SHORT, counts=pool)
    assert result.result_type == result.key == pub.OPEN_RECORD
    assert result.text == SECTION["open_record"]["label"]
    assert (
        result.statement
        == SECTION["open_record_statement"]
        == ("One prompt, one run, no quality rank.")
    )


def test_head_to_head_for_two_qualified_systems() -> None:
    pool = counts({"A": with_(), "B": with_()})
    result = pub.publication_label(LEVELS, duration_class=SHORT, counts=pool)
    assert result.key == pub.HEAD_TO_HEAD
    assert {s.key for s in result.systems} == {pub.HEAD_TO_HEAD}
    assert result.label_of("A").counts == with_()


@pytest.mark.parametrize("duration_class", [SHORT, LONG])
@pytest.mark.parametrize("n_systems", [2, 3])
def test_one_prompt_comparison_is_a_challenge_result(duration_class: str, n_systems: int) -> None:
    pool = counts({f"S{k}": with_() for k in range(n_systems)}, prompts=1)
    result = pub.publication_label(LEVELS, duration_class=duration_class, counts=pool)
    assert result.result_type == result.key == SECTION["one_prompt_result"]
    assert "not a general system rank" in result.reasons[0]


def intervals(rows: dict[str, tuple[float, float, float]]) -> pd.DataFrame:
    return pd.DataFrame.from_dict(rows, orient="index", columns=["estimate", "lower", "upper"])


CLEAR = intervals({"A": (1.0, 0.6, 1.4), "B": (0.2, -0.1, 0.5), "C": (-1.2, -1.5, -0.9)})


def ranked_board() -> pub.PoolCounts:
    return counts({"A": with_(), "B": with_(), "C": with_()})


def test_leader_when_ranked_stable_and_non_overlapping() -> None:
    result = pub.publication_label(
        LEVELS, duration_class=SHORT, counts=ranked_board(), intervals=CLEAR, loo_top=["A"] * 10
    )
    assert result.leader == "A"
    assert result.label_of("A").key == pub.LEADER
    assert result.label_of("A").text == SECTION["leader"]["label"]
    assert result.label_of("B").key == pub.RANKED
    assert result.key == pub.RANKED


@pytest.mark.parametrize(
    "top_lower, second_upper, leader",
    [(0.51, 0.5, "A"), (0.5, 0.5, None), (0.49, 0.5, None)],
    ids=["apart", "touching", "overlapping"],
)
def test_leader_needs_strictly_non_overlapping_intervals(
    top_lower: float, second_upper: float, leader: str | None
) -> None:
    iv = intervals({"A": (1.0, top_lower, 1.4), "B": (0.2, -0.1, second_upper), "C": (-1, -2, 0)})
    result = pub.publication_label(
        LEVELS, duration_class=SHORT, counts=ranked_board(), intervals=iv, loo_top=["A"] * 5
    )
    assert result.leader == leader


@pytest.mark.parametrize(
    "loo_top",
    [["A", "A", "B"], ["A", np.nan], [], None],
    ids=["top changes", "failed refit", "no refits", "not given"],
)
def test_leader_needs_a_stable_top(loo_top: list | None) -> None:
    result = pub.publication_label(
        LEVELS, duration_class=SHORT, counts=ranked_board(), intervals=CLEAR, loo_top=loo_top
    )
    assert result.leader is None
    assert result.label_of("A").key == pub.RANKED
    assert any("no Leader" in r for r in result.reasons)


def test_leader_needs_the_top_system_to_be_ranked() -> None:
    pool = counts({"A": with_(voters=RANK["voters"] - 1), "B": with_(), "C": with_()})
    result = pub.publication_label(
        LEVELS, duration_class=SHORT, counts=pool, intervals=CLEAR, loo_top=["A"] * 5
    )
    assert result.leader is None
    assert result.label_of("A").key == pub.PROVISIONAL


def long_pool(prompts: int, runs: list[int]) -> pub.PoolCounts:
    rows = {
        f"S{k}": dict(votes=20, prompts=prompts, opponents=2, voters=10, runs=r)
        for k, r in enumerate(runs)
    }
    return counts(rows, prompts=prompts)


MIN_PROMPTS = SECTION["long_form_min_prompts"]


@pytest.mark.parametrize(
    "prompts, runs, jurors, expected",
    [
        (MIN_PROMPTS, [3, 3, 3], LONG_MIN_JURORS, pub.LEADERBOARD),
        (MIN_PROMPTS - 1, [3, 3, 3], LONG_MIN_JURORS, pub.DESCRIPTIVE),
        (MIN_PROMPTS, [3, 3, 2], LONG_MIN_JURORS, pub.DESCRIPTIVE),
        (MIN_PROMPTS, [3, 3, 3], LONG_MIN_JURORS - 1, pub.DESCRIPTIVE),
        (MIN_PROMPTS, [3, 3, 3], None, pub.DESCRIPTIVE),
    ],
    ids=["meets all", "prompts - 1", "unequal runs", "jurors - 1", "jurors unknown"],
)
def test_long_form_leaderboard_rules(
    prompts: int, runs: list[int], jurors: int | None, expected: str
) -> None:
    result = pub.publication_label(
        LEVELS,
        duration_class=LONG,
        counts=long_pool(prompts, runs),
        complete_view_jurors=jurors,
    )
    assert result.key == expected
    # Vote thresholds never apply to long form: 20 votes is not a Pilot here.
    assert all(s.key in (pub.LEADERBOARD, pub.DESCRIPTIVE) for s in result.systems)


def test_long_form_leader_needs_a_powered_winner_claim() -> None:
    common = dict(
        duration_class=LONG,
        counts=long_pool(MIN_PROMPTS, [2, 2, 2]),
        complete_view_jurors=LONG_MIN_JURORS,
        intervals=intervals({"S0": (1, 0.6, 1.4), "S1": (0, -0.2, 0.2), "S2": (-1, -2, 0)}),
        loo_top=["S0"] * MIN_PROMPTS,
    )
    assert pub.publication_label(LEVELS, **common).leader is None
    assert pub.publication_label(LEVELS, winner_claim_powered=True, **common).leader == "S0"


def test_run_counts_can_be_given_explicitly() -> None:
    result = pub.publication_label(
        LEVELS,
        duration_class=LONG,
        counts=long_pool(MIN_PROMPTS, [1, 1, 1]),
        complete_view_jurors=LONG_MIN_JURORS,
        run_counts={"S0": 3, "S1": 3, "S2": 4},
    )
    assert result.key == pub.DESCRIPTIVE
    assert "unequal run counts" in result.reasons[0]


def test_pool_counts_per_system() -> None:
    ballots = pd.DataFrame(
        {
            "a": ["A", "A", "B", "C"],
            "b": ["B", "C", "C", "A"],
            "outcome": ["a", "b", "tie", "a"],
            "prompt": ["p1", "p2", "p1", "p3"],
            "voter": ["v1", "v1", "v2", "v3"],
            "run_a": ["ra1", "ra2", "rb1", "rc3"],
            "run_b": ["rb1", "rc2", "rc1", "ra3"],
        }
    )
    pool = pub.pool_counts(ballots, systems=["A", "B", "C", "D"])
    assert pool.prompts == 3 and pool.ballots == 4 and pool.voters == 3
    assert pool.systems.loc["A"].to_dict() == {
        "votes": 3,
        "prompts": 3,
        "opponents": 2,
        "voters": 2,
        "runs": 3,
    }
    assert pool.systems.loc["D"].sum() == 0
    with pytest.raises(ValueError, match="outside the qualified list"):
        pub.pool_counts(ballots, systems=["A", "B"])


def test_is_descriptive_reads_the_jury_minimum() -> None:
    assert pub.is_descriptive(PROTOCOL, LONG, LONG_MIN_JURORS - 1)
    assert not pub.is_descriptive(PROTOCOL, LONG, LONG_MIN_JURORS)


def test_tovaki_has_no_publication_levels() -> None:
    with pytest.raises(pub.NoPublicationLevels):
        pub.PublicationLevels.from_definition(Protocol.load("tovaki-2026-r1"))


def test_result_serialises_to_plain_json_types() -> None:
    import json

    result = pub.publication_label(
        LEVELS, duration_class=SHORT, counts=ranked_board(), intervals=CLEAR, loo_top=["A"]
    )
    data = json.loads(json.dumps(result.as_dict()))
    assert data["leader"] == "A"
    assert data["systems"][0]["counts"]["votes"] == AT_RANKED["votes"]


def test_open_record_from_an_empty_ballot_table() -> None:
    empty = pd.DataFrame(columns=["a", "b", "outcome", "prompt", "voter"])
    pool = pub.pool_counts(empty, systems=["Solo"])
    assert pool.systems.loc["Solo"].sum() == 0
    result = pub.publication_label(LEVELS, duration_class=SHORT, counts=pool)
    assert result.key == pub.OPEN_RECORD
