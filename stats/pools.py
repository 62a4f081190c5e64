"""Rating pools: what the protocol keeps apart is never fitted together.

Protocol: "Never combine duration classes in one rating pool" (Duration classes); "Do not
combine their results" (Prompt tracks); "Do not mix autonomous and interactive results"
(Interaction classes); "Do not mix asset policies in one result pool" (Source assets); the two
benchmark classes measure different things (Benchmark classes); "Publish segment results
separately ... Do not combine full-film and segment scores" (Public segment result); "Keep
audience and craft panels separate. Do not combine their scores" (Five-minute and longer
evaluation).

And: a duration-nonconforming output "Publish it in the reliability result. Do not include it in
the main preference ranking"; a creative intervention turns a run into an exhibition; "Every
started run remains in the reliability dataset" (Reliability result).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

POOL_KEYS: tuple[str, ...] = (
    "duration_class",
    "prompt_track",
    "interaction_class",
    "source_asset_policy",
    "benchmark_class",
    "result_kind",
    "panel",
)
RESULT_KINDS: tuple[str, ...] = ("full_film", "segment")
# The one final state that enters the main ranking (a name from the definition's final_states).
CONFORMING_STATE = "completed_conforming"


class MixedPools(ValueError):
    """Rows from different pools were passed to one ranking."""

    def __init__(self, differing: dict[str, list[Any]]) -> None:
        self.differing = differing
        shown = "; ".join(f"{k}: {', '.join(map(repr, v))}" for k, v in differing.items())
        super().__init__(f"refusing to mix result pools ({shown})")


def _as_key(value: Any) -> Any:
    return None if pd.isna(value) else value


def pool_of(rows: pd.DataFrame, keys: Sequence[str] = POOL_KEYS) -> dict[str, Any]:
    """The single pool the rows belong to, as ``{key: value}``; raise :class:`MixedPools`.

    Every key must be a column (pass ``keys`` explicitly to drop one that does not apply, e.g.
    ``panel`` for public pairwise ballots). A missing value (NaN/None) counts as a value of its
    own, so unlabelled rows never slip into a labelled pool.
    """
    missing = [k for k in keys if k not in rows.columns]
    if missing:
        raise ValueError(f"rows lack pool column(s) {', '.join(missing)}")
    if len(rows) == 0:
        raise ValueError("no rows")
    differing: dict[str, list[Any]] = {}
    pool: dict[str, Any] = {}
    for key in keys:
        values = pd.unique(pd.Series(rows[key].astype(object)).map(_as_key))
        if len(values) > 1:
            differing[key] = sorted(values, key=repr)
        else:
            pool[key] = values[0]
    if "result_kind" in pool and pool["result_kind"] not in RESULT_KINDS:
        raise ValueError(f"unknown result_kind {pool['result_kind']!r}; known: {RESULT_KINDS}")
    if differing:
        raise MixedPools(differing)
    return pool


def split_pools(
    rows: pd.DataFrame, keys: Sequence[str] = POOL_KEYS
) -> dict[tuple[Any, ...], pd.DataFrame]:
    """Rows grouped by pool key (in ``keys`` order); each group can be ranked on its own."""
    missing = [k for k in keys if k not in rows.columns]
    if missing:
        raise ValueError(f"rows lack pool column(s) {', '.join(missing)}")
    frame = rows.copy()
    key_frame = frame[list(keys)].astype(object).map(_as_key)
    groups: dict[tuple[Any, ...], pd.DataFrame] = {}
    for key, index in key_frame.groupby(list(keys), dropna=False, sort=False).groups.items():
        key_tuple = key if isinstance(key, tuple) else (key,)
        groups[tuple(_as_key(k) for k in key_tuple)] = frame.loc[index]
    return groups


def split_main_and_reliability(
    runs: pd.DataFrame,
    *,
    final_states: Sequence[str],
    final_state: str = "final_state",
    exhibition: str = "exhibition",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Separate runs (or rows keyed by run) eligible for the main ranking.

    Returns ``(main, reliability)``. ``main`` keeps only rows whose ``final_state`` is
    ``completed_conforming`` and that are not exhibitions. ``reliability`` keeps every row
    (every started run remains in the reliability dataset) with an ``excluded_from_main``
    column saying why a row is not in the main ranking (empty when it is).

    ``final_states`` is the definition's list (``Protocol.final_states``); an unknown state is
    an error, not a silent exclusion.
    """
    if final_state not in runs.columns:
        raise ValueError(f"rows lack the {final_state!r} column")
    states = runs[final_state]
    unknown = sorted(set(states.dropna()) - set(final_states))
    if unknown or states.isna().any():
        raise ValueError(f"unknown or missing final state(s): {unknown or ['<missing>']}")
    if CONFORMING_STATE not in final_states:
        raise ValueError(f"the definition's final states lack {CONFORMING_STATE!r}")
    is_exhibition = (
        runs[exhibition].fillna(False).astype(bool)
        if exhibition in runs.columns
        else pd.Series(False, index=runs.index)
    )
    reason = np.where(
        states.to_numpy() != CONFORMING_STATE,
        "final state " + states.astype(str).to_numpy(),
        "",
    ).astype(object)
    reason = np.where(
        is_exhibition.to_numpy(),
        np.where(reason == "", "exhibition", reason + "; exhibition"),
        reason,
    )
    reliability = runs.copy()
    reliability["excluded_from_main"] = reason
    main = runs.loc[reason == ""].copy()
    return main, reliability


def ballots_for_main_ranking(
    ballots: pd.DataFrame,
    main_runs: Sequence[Any],
    *,
    run_columns: tuple[str, str] = ("run_a", "run_b"),
) -> pd.DataFrame:
    """Keep ballots whose two runs are both in the main ranking.

    A ballot that shows a nonconforming or exhibition output on either side does not enter the
    main preference ranking.
    """
    allowed = set(main_runs)
    keep = ballots[run_columns[0]].isin(allowed) & ballots[run_columns[1]].isin(allowed)
    return ballots.loc[keep]
