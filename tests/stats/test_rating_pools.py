"""Pools never mix what the protocol keeps apart; nonconforming and exhibition runs stay out of
the main ranking and in the reliability result."""

from __future__ import annotations

import pandas as pd
import pytest

from rounds.protocols import Protocol
from stats import pools

PROTOCOL = Protocol.load("ai-duel-0.1")
BASE = {
    "duration_class": "minute_1",
    "prompt_track": "brief_to_film",
    "interaction_class": "autonomous",
    "source_asset_policy": "no_uploaded_media",
    "benchmark_class": "best_complete_system",
    "result_kind": "full_film",
    "panel": "audience",
}
ALTERNATIVES = {
    "duration_class": "minute_2",
    "prompt_track": "script_to_film",
    "interaction_class": "interactive",
    "source_asset_policy": "stock_media_allowed",
    "benchmark_class": "common_visual_engine",
    "result_kind": "segment",
    "panel": "craft",
}


def rows(*changes: dict) -> pd.DataFrame:
    return pd.DataFrame([dict(BASE, system=f"S{k}", **c) for k, c in enumerate(changes)])


def test_one_pool_passes_and_is_returned() -> None:
    assert pools.pool_of(rows({}, {}, {})) == BASE


@pytest.mark.parametrize("key", pools.POOL_KEYS)
def test_each_pool_key_refuses_a_mix(key: str) -> None:
    with pytest.raises(pools.MixedPools) as info:
        pools.pool_of(rows({}, {key: ALTERNATIVES[key]}))
    assert list(info.value.differing) == [key]
    assert isinstance(info.value, ValueError)


def test_missing_value_is_a_pool_of_its_own() -> None:
    with pytest.raises(pools.MixedPools):
        pools.pool_of(rows({}, {"panel": None}))


def test_missing_pool_column_is_refused_unless_dropped_explicitly() -> None:
    public_votes = rows({}, {}).drop(columns=["panel"])
    with pytest.raises(ValueError, match="panel"):
        pools.pool_of(public_votes)
    keys = [k for k in pools.POOL_KEYS if k != "panel"]
    assert pools.pool_of(public_votes, keys)["duration_class"] == "minute_1"


def test_unknown_result_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="result_kind"):
        pools.pool_of(rows({"result_kind": "trailer"}))


def test_split_pools_groups_rows_by_every_key() -> None:
    frame = rows({}, {"panel": "craft"}, {}, {"duration_class": "minute_2"})
    groups = pools.split_pools(frame)
    assert len(groups) == 3
    for key, part in groups.items():
        assert pools.pool_of(part) == dict(zip(pools.POOL_KEYS, key, strict=True))
    assert sum(len(p) for p in groups.values()) == len(frame)


def test_nonconforming_and_exhibition_runs_leave_the_main_ranking_only() -> None:
    runs = pd.DataFrame(
        {
            "run": ["r1", "r2", "r3", "r4", "r5"],
            "final_state": [
                "completed_conforming",
                "completed_nonconforming",
                "completed_conforming",
                "provider_failed",
                "completed_nonconforming",
            ],
            "exhibition": [False, False, True, False, True],
        }
    )
    main, reliability = pools.split_main_and_reliability(runs, final_states=PROTOCOL.final_states)
    assert main["run"].tolist() == ["r1"]
    assert reliability["run"].tolist() == runs["run"].tolist()  # every started run stays
    assert reliability["excluded_from_main"].tolist() == [
        "",
        "final state completed_nonconforming",
        "exhibition",
        "final state provider_failed",
        "final state completed_nonconforming; exhibition",
    ]


def test_unknown_final_state_is_an_error_not_a_silent_exclusion() -> None:
    runs = pd.DataFrame({"final_state": ["completed_conforming", "finished"]})
    with pytest.raises(ValueError, match="finished"):
        pools.split_main_and_reliability(runs, final_states=PROTOCOL.final_states)


def test_ballots_touching_an_excluded_run_leave_the_main_ranking() -> None:
    ballots = pd.DataFrame({"run_a": ["r1", "r1", "r2"], "run_b": ["r3", "r2", "r3"]})
    kept = pools.ballots_for_main_ranking(ballots, ["r1", "r3"])
    assert kept.index.tolist() == [0]
