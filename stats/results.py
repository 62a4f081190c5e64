"""Published results computed from an exported inputs document, and nothing else.

Issue 8: "Results are computed on demand from a snapshot of the valid ballots and scorecards;
the snapshot's inputs are exported and their hash logged, so anyone can recompute the published
numbers." The Django side (``stats.selectors.result_inputs``) writes the *inputs document*: the
tables the math reads (ballots, choices, scores, runs), the definition sections it needs and the
parameters (seed, replicates, interval level). :func:`compute_result` reads only that document
and returns the *result document*; ``python manage.py recompute_result`` runs the same function
on a downloaded inputs file. Pure Python on DataFrames: no Django.

Each result kind follows its protocol section:

- ``full_film_votes`` ("One-minute and two-minute voting", "Publication levels"): Bradley-Terry
  with cluster-bootstrap intervals (prompt, then run), the win matrix, prompt sensitivity, the
  counts behind each label and the label itself from ``stats.publication``.
- ``segment`` ("Public segment result"): "within-segment quality", one panel at a time, clusters
  prompt, run, segment and voter; never combined with full-film results.
- ``holistic_choice`` and ``jury_dimensions`` ("Five-minute and longer evaluation", "Quality
  dimensions"): per panel, each dimension separately with intervals, Krippendorff's alpha, the
  descriptive label for small juries, and the power analysis behind a winner claim.
- ``tovaki_scorecards`` (Tovaki ``scoring`` and ``publication_gate``): exact weighted totals, the
  close-result rule with the required scope language, disagreement flags.
- ``reliability`` ("Reliability result"): every started run by final state, per entry, with
  cost and wall time.

Pools never mix: an inputs document is one round, and a round is one pool (its duration class,
prompt track, interaction class, asset policy and benchmark class, in ``pool``); panels are
computed one at a time (``stats.jury_results.single_panel``); full-film and segment results are
different kinds. Every ranking row must name runs of the round's own main ranking:
:func:`main_runs` keeps only conforming, non-exhibition runs with a review proxy (the rule of
``stats.pools.split_main_and_reliability``), and rows showing any other output (another round's,
a nonconforming or an exhibition output) are dropped before any fit. Automated critics have no
input table, and tables carry only their declared columns (:data:`TABLE_COLUMNS`), so a
critic's output cannot enter a ranking calculation.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from duel.canonical import canonical_json
from stats import bootstrap as bs
from stats import bradley_terry as bt
from stats import jury_results, pools, power, publication, scorecards
from stats.agreement import AgreementUndefined

INPUTS_FORMAT = "duel-result-inputs/1"
# The calculation's version. It is part of the inputs document (and so of its hash): when a
# calculation changes, the same ballots give a new snapshot instead of silently new numbers.
METHOD = "duel-results/1"

FULL_FILM_VOTES = "full_film_votes"
SEGMENT = "segment"
JURY_DIMENSIONS = "jury_dimensions"
HOLISTIC_CHOICE = "holistic_choice"
TOVAKI_SCORECARDS = "tovaki_scorecards"
RELIABILITY = "reliability"
RESULT_KINDS: tuple[str, ...] = (
    FULL_FILM_VOTES,
    SEGMENT,
    JURY_DIMENSIONS,
    HOLISTIC_CHOICE,
    TOVAKI_SCORECARDS,
    RELIABILITY,
)

# Round fields that make a pool (stats.pools.POOL_KEYS minus result_kind and panel, which the
# result kind and the per-panel computation carry).
ROUND_POOL_FIELDS: tuple[str, ...] = (
    "duration_class",
    "prompt_track",
    "interaction_class",
    "source_asset_policy",
    "benchmark_class",
)

# Columns of each exported table, in order. The CSV download writes them in this order too.
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": (
        "run",
        "label",
        "prompt",
        "final_state",
        "exhibition",
        "has_proxy",
    ),
    "ballots": (
        "ballot_id",
        "sha256",
        "prompt",
        "voter",
        "run_a",
        "run_b",
        "a",
        "b",
        "outcome",
        "synthetic",
    ),
    "segment_votes": (
        "voter",
        "panel",
        "prompt",
        "segment",
        "run_a",
        "run_b",
        "a",
        "b",
        "outcome",
    ),
    "choices": ("juror", "panel", "prompt", "run_a", "run_b", "a", "b", "outcome"),
    "scores": (
        "scorecard_id",
        "juror",
        "panel",
        "prompt",
        "task_lane",
        "run",
        "system",
        "dimension",
        "score",
    ),
    "complete_view": ("panel", "label", "jurors"),
    "reliability_runs": (
        "run",
        "label",
        "prompt",
        "state",
        "final_state",
        "exhibition",
        "has_proxy",
        "wall_time_s",
        "attempts",
        "retry_reasons",
        "failure_codes",
        "output_sha256",
        "cost",
    ),
    "entries": ("label", "path", "exhibition"),
}

# The tables of each result kind's inputs document.
KIND_TABLES: dict[str, tuple[str, ...]] = {
    FULL_FILM_VOTES: ("ballots", "runs"),
    SEGMENT: ("segment_votes", "runs"),
    HOLISTIC_CHOICE: ("choices", "complete_view", "runs"),
    JURY_DIMENSIONS: ("scores", "complete_view", "runs"),
    TOVAKI_SCORECARDS: ("scores", "runs"),
    RELIABILITY: ("reliability_runs", "entries"),
}

# Number of decimals kept for floats in a result document, so the published numbers do not
# depend on the last bits of a platform's floating-point library.
FLOAT_DECIMALS = 9
UNFINISHED = "unfinished"  # a started run that has no final state yet

CRITICS_STATEMENT = (
    "Automated critics (for example the media pipeline's measurements) produce diagnostic "
    "reports only. They are not an input of any ranking calculation and never decide rank."
)


class InvalidInputs(ValueError):
    """The document is not an inputs document this code can compute from."""


# ---------------------------------------------------------------------------------------------
# The inputs document


def table(rows: Iterable[Mapping[str, Any]], name: str) -> dict[str, Any]:
    """An exported table: ``{"columns": [...], "rows": [[...], ...]}`` in the declared order."""
    columns = TABLE_COLUMNS[name]
    return {"columns": list(columns), "rows": [[row[c] for c in columns] for row in rows]}


def table_frame(inputs: Mapping[str, Any], name: str) -> pd.DataFrame:
    """One table of an inputs document as a DataFrame (object columns, as exported)."""
    tables = inputs.get("tables") or {}
    if name not in tables:
        raise InvalidInputs(f"the inputs have no {name!r} table")
    data = tables[name]
    return pd.DataFrame(data["rows"], columns=data["columns"], dtype=object)


def table_csv(inputs: Mapping[str, Any], name: str) -> str:
    """One table as CSV (header row, then one line per row; booleans as true/false)."""

    def cell(value: Any) -> Any:
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (list, dict)):
            return canonical_json(value).decode("utf-8")
        return value

    tables = inputs.get("tables") or {}
    if name not in tables:
        raise InvalidInputs(f"the inputs have no {name!r} table")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(tables[name]["columns"])
    for row in tables[name]["rows"]:
        writer.writerow([cell(v) for v in row])
    return buffer.getvalue()


def _check(inputs: Mapping[str, Any]) -> str:
    if inputs.get("format") != INPUTS_FORMAT:
        raise InvalidInputs(f"not a {INPUTS_FORMAT} document (format {inputs.get('format')!r})")
    if inputs.get("method") != METHOD:
        raise InvalidInputs(
            f"the inputs were exported for method {inputs.get('method')!r}; this code computes "
            f"{METHOD!r}"
        )
    kind = inputs.get("result_kind")
    if kind not in RESULT_KINDS:
        raise InvalidInputs(f"unknown result kind {kind!r}")
    return kind


def compute_result(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The result document for an inputs document (see the module docstring)."""
    kind = _check(inputs)
    compute = {
        FULL_FILM_VOTES: _votes_result,
        SEGMENT: _segment_result,
        HOLISTIC_CHOICE: _holistic_result,
        JURY_DIMENSIONS: _dimensions_result,
        TOVAKI_SCORECARDS: _tovaki_result,
        RELIABILITY: _reliability_result,
    }[kind]
    result = compute(inputs)
    result = {
        "result_kind": kind,
        "round": inputs.get("round"),
        "method": METHOD,
        "protocol": inputs.get("protocol"),
        "pool": inputs.get("pool"),
        "parameters": inputs.get("parameters"),
        "critics": CRITICS_STATEMENT,
        **result,
    }
    return clean(result)


# ---------------------------------------------------------------------------------------------
# JSON-safe values


def clean(value: Any) -> Any:
    """JSON-safe copy: numpy scalars to Python, floats rounded, NaN/inf to None, tuples to
    lists, Fractions to exact text."""
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if not math.isfinite(number):
            return None
        rounded = round(number, FLOAT_DECIMALS)
        return 0.0 if rounded == 0 else rounded
    if isinstance(value, Fraction):
        return str(value)
    if value is None or isinstance(value, str):
        return value
    if pd.isna(value):
        return None
    return str(value)


def compare_results(
    published: Any, recomputed: Any, *, rel_tol: float = 1e-9, abs_tol: float = 1e-9
) -> list[str]:
    """Differences between two result documents (empty when they match).

    Floats match within the tolerances; everything else must be equal.
    """
    differences: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if len(differences) >= 50:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                if key not in a or key not in b:
                    differences.append(f"{path}/{key}: present on one side only")
                else:
                    walk(a[key], b[key], f"{path}/{key}")
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                differences.append(f"{path}: {len(a)} items vs {len(b)}")
                return
            for k, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{path}[{k}]")
        elif (
            isinstance(a, float | int)
            and isinstance(b, float | int)
            and not isinstance(a, bool)
            and not isinstance(b, bool)
        ):
            if not math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=abs_tol):
                differences.append(f"{path}: {a!r} vs {b!r}")
        elif a != b:
            differences.append(f"{path}: {a!r} vs {b!r}")

    walk(published, recomputed, "")
    return differences


# ---------------------------------------------------------------------------------------------
# Runs: what may enter a ranking


def _true(value: Any) -> bool:
    """A boolean cell, as exported (``True``) or read back from CSV (``"true"``)."""
    return value is True or str(value).lower() == "true"


def _as_bool(series: pd.Series) -> pd.Series:
    return series.map(_true).astype(bool)


def main_runs(inputs: Mapping[str, Any]) -> tuple[set[str], list[str]]:
    """Run ids eligible for the main ranking and the qualified systems (entry labels).

    A run enters the main ranking only when it finished ``completed_conforming``, is not an
    exhibition (``stats.pools.split_main_and_reliability``) and has a review proxy to judge. A
    qualified system is an entry with at least one such run (protocol: Publication levels).
    """
    runs = table_frame(inputs, "runs")
    final_states = inputs["definition"]["final_states"]
    finished = runs[runs["final_state"].astype(str) != ""].copy()
    if finished.empty:
        return set(), []
    finished["exhibition"] = _as_bool(finished["exhibition"])
    main, _ = pools.split_main_and_reliability(finished, final_states=final_states)
    main = main[_as_bool(main["has_proxy"])]
    return set(main["run"].astype(str)), sorted(set(main["label"].astype(str)))


def _ranking_rows(frame: pd.DataFrame, allowed: set[str], sides: Sequence[str]) -> pd.DataFrame:
    """Rows whose runs are all in the main ranking (a nonconforming or exhibition output on any
    side keeps the row out)."""
    if frame.empty:
        return frame
    keep = np.ones(len(frame), dtype=bool)
    for side in sides:
        keep &= frame[side].astype(str).isin(allowed).to_numpy()
    return frame.loc[keep].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# Pairwise results (votes, segment votes, holistic choices)


def _display(values: Any, inputs: Mapping[str, Any]) -> Any:
    scale = inputs["parameters"]["display_scale"]
    return bt.display_points(
        values, anchor=scale["anchor"], points_per_natural_log=scale["points_per_natural_log"]
    )


def _win_matrix(comparisons: pd.DataFrame, systems: Sequence[str]) -> dict[str, Any]:
    names = [s for s in systems if s in set(comparisons["a"]) | set(comparisons["b"])]
    if len(comparisons) == 0 or not names:
        return {"systems": [], "wins": []}
    matrix = bt.win_matrix(comparisons[["a", "b", "outcome"]], systems=names)
    return {"systems": names, "wins": matrix.to_numpy().tolist()}


def _pairwise_fit(
    comparisons: pd.DataFrame,
    clusters: Sequence[str],
    inputs: Mapping[str, Any],
) -> dict[str, Any]:
    """Bradley-Terry with cluster-bootstrap intervals and prompt sensitivity, on the display
    scale. ``status`` says why no rating exists when the data cannot give one."""
    params = inputs["parameters"]
    if len(comparisons) == 0:
        return {"status": "no_data", "reason": "no valid comparison in the main ranking"}
    if len(set(comparisons["a"]) | set(comparisons["b"])) < 2:
        return {"status": "no_data", "reason": "fewer than two systems were compared"}
    frame = comparisons.copy()
    for column in ("a", "b", "outcome", "prompt", "run_a", "run_b", "voter", "segment"):
        if column in frame.columns:
            frame[column] = frame[column].astype(str)
    try:
        boot = bs.bootstrap_bradley_terry(
            frame,
            clusters,
            seed=int(params["seed"]),
            n_replicates=int(params["n_replicates"]),
            level=float(params["level"]),
        )
        intervals = boot.intervals()
    except bt.BradleyTerryError as exc:
        return {"status": "not_estimable", "reason": str(exc)}
    sensitivity = bs.prompt_sensitivity(frame)
    tops = _loo_tops(sensitivity)
    shown = _display(intervals, inputs)
    ratings = {
        str(system): {
            "strength": float(intervals.loc[system, "estimate"]),
            "rating": float(shown.loc[system, "estimate"]),
            "lower": float(shown.loc[system, "lower"]),
            "upper": float(shown.loc[system, "upper"]),
        }
        for system in intervals.index
    }
    points = inputs["parameters"]["display_scale"]["points_per_natural_log"]
    left_out = []
    for prompt_key, row in sensitivity.strengths.iterrows():
        left_out.append(
            {
                "prompt": str(prompt_key),
                "ratings": {str(s): float(_display(v, inputs)) for s, v in row.items()},
                "top": None if pd.isna(tops.loc[prompt_key]) else str(tops.loc[prompt_key]),
            }
        )
    return {
        "status": "ok",
        "ratings": ratings,
        "order": [str(s) for s in intervals.index],
        # For the label only (removed before publication). On the display scale, so the
        # label's reasons quote the numbers readers see; the Leader rule compares bounds, which
        # an increasing affine map leaves unchanged.
        "intervals": shown,
        "loo_top": tops,  # idem
        "bootstrap": {
            "seed": boot.seed,
            "n_replicates": boot.n_replicates,
            "level": boot.level,
            "clusters": list(boot.clusters),
            "failed_replicates": boot.failed_replicates,
            "n_ballots": boot.n_ballots,
            "n_leaves": boot.n_leaves,
        },
        "prompt_sensitivity": {
            "left_out": left_out,
            "failed": [str(p) for p in sensitivity.failed],
            "top_is_stable": _top_is_stable(sensitivity, tops),
            "max_shift_points": {
                str(s): float(v) * points for s, v in sensitivity.max_shift.items()
            },
        },
    }


def _loo_tops(sensitivity: bs.PromptSensitivity) -> pd.Series:
    """The top system of each leave-one-prompt-out refit (None where the refit failed).

    Computed row by row: ``PromptSensitivity.top`` calls ``idxmax`` on rows that may be all
    NaN, which pandas 3 refuses.
    """
    strengths = sensitivity.strengths
    tops = [
        None if row.isna().any() else row.astype(float).idxmax() for _, row in strengths.iterrows()
    ]
    return pd.Series(tops, index=strengths.index, dtype=object)


def _top_is_stable(sensitivity: bs.PromptSensitivity, tops: pd.Series) -> bool:
    """Every refit succeeded and kept the full-data top system on top (the rule of
    ``PromptSensitivity.top_is_stable``, on :func:`_loo_tops`)."""
    if sensitivity.failed or tops.empty:
        return False
    leader = sensitivity.estimate.idxmax()
    return bool(all(t == leader for t in tops))


def _system_rows(
    systems: Sequence[str],
    fit: Mapping[str, Any],
    counts: publication.PoolCounts,
    label: publication.PublicationResult | None,
) -> list[dict[str, Any]]:
    """One row per qualified system: rating and interval (when estimable), the counts behind
    its label, and its label. Rated systems first, best first."""
    ratings = fit.get("ratings") or {}
    order = [s for s in fit.get("order", []) if s in systems]
    order += sorted(s for s in systems if s not in order)
    rows = []
    for rank, system in enumerate(order, start=1):
        row: dict[str, Any] = {"label": system, "rank": rank if system in ratings else None}
        row.update(ratings.get(system, {"strength": None, "rating": None, "lower": None}))
        row.setdefault("upper", None)
        if system in counts.systems.index:
            row["counts"] = {k: int(v) for k, v in counts.systems.loc[system].items()}
        if label is not None:
            entry = label.label_of(system)
            row["publication"] = {
                "key": entry.key,
                "text": entry.text,
                "reasons": list(entry.reasons),
            }
        rows.append(row)
    return rows


def _publish_fit(fit: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fit.items() if k not in ("intervals", "loo_top", "ratings", "order")}


def _votes_result(inputs: Mapping[str, Any]) -> dict[str, Any]:
    definition = inputs["definition"]
    pool = inputs["pool"]
    allowed, systems = main_runs(inputs)
    every = table_frame(inputs, "ballots")
    ballots = _ranking_rows(every, allowed, ("run_a", "run_b"))
    levels = publication.PublicationLevels.from_definition(definition)
    clusters = bs.bootstrap_clusters(definition, "full_film")
    fit = _pairwise_fit(ballots, clusters, inputs) if systems else {"status": "no_data"}
    counts = publication.pool_counts(
        ballots.astype({c: str for c in ("a", "b", "prompt", "voter", "run_a", "run_b")}),
        systems=systems,
    )
    label = (
        publication.publication_label(
            levels,
            duration_class=pool["duration_class"],
            counts=counts,
            intervals=fit.get("intervals"),
            loo_top=fit.get("loo_top"),
        )
        if systems
        else None
    )
    return {
        "title": "Full-film preference (blind pairwise votes)",
        "status": fit["status"],
        "reason": fit.get("reason"),
        "systems": _system_rows(systems, fit, counts, label),
        "win_matrix": _win_matrix(ballots, systems),
        "publication": None if label is None else label.as_dict(),
        "counts": {
            "valid_ballots": int(len(every)),
            "ballots_in_main_ranking": int(len(ballots)),
            "ballots_outside_main_ranking": int(len(every) - len(ballots)),
            "synthetic_ballots": int(_as_bool(ballots["synthetic"]).sum()) if len(ballots) else 0,
            "prompts": counts.prompts,
            "voters": counts.voters,
            "qualified_systems": len(systems),
        },
        **_publish_fit(fit),
    }


def _per_panel(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    if frame.empty:
        return []
    return [
        (str(panel), rows.reset_index(drop=True))
        for panel, rows in frame.groupby(frame["panel"].astype(str), sort=True)
    ]


def _complete_view(inputs: Mapping[str, Any], systems: Sequence[str]) -> dict[str, int]:
    """Per panel, the complete-view jurors behind the result: the smallest count over the
    qualified systems (protocol: "Give every system pair equal complete-view exposure"; a
    result is only as strong as its least-seen system). A system without a count has 0."""
    frame = table_frame(inputs, "complete_view")
    out: dict[str, int] = {}
    for panel, rows in frame.groupby(frame["panel"].astype(str), sort=True):
        counts = {str(k): int(v) for k, v in zip(rows["label"], rows["jurors"], strict=True)}
        out[panel] = min((counts.get(s, 0) for s in systems), default=0)
    return out


def _segment_result(inputs: Mapping[str, Any]) -> dict[str, Any]:
    definition = inputs["definition"]
    allowed, systems = main_runs(inputs)
    every = table_frame(inputs, "segment_votes")
    votes = _ranking_rows(every, allowed, ("run_a", "run_b"))
    clusters = bs.bootstrap_clusters(definition, "segment")
    panels = []
    for panel, rows in _per_panel(votes):
        fit = _pairwise_fit(rows, clusters, inputs)
        counts = publication.pool_counts(rows.astype(str), systems=systems)
        panels.append(
            {
                "panel": panel,
                "status": fit["status"],
                "reason": fit.get("reason"),
                "systems": _system_rows(systems, fit, counts, None),
                "win_matrix": _win_matrix(rows, systems),
                "counts": {
                    "votes": int(len(rows)),
                    "prompts": counts.prompts,
                    "voters": counts.voters,
                    "segments": int(rows[["prompt", "segment"]].drop_duplicates().shape[0]),
                },
                **_publish_fit(fit),
            }
        )
    name = definition.get("segment_result_name") or "within-segment quality"
    return {
        "title": f"Segment result: {name}",
        "status": "ok" if panels else "no_data",
        "statement": (
            f"This result measures {name}. It does not measure full story quality, and it is "
            "never combined with the full-film result."
        ),
        "panels": panels,
        "counts": {
            "valid_votes": int(len(every)),
            "votes_outside_main_ranking": int(len(every) - len(votes)),
        },
    }


def _power_block(rows: pd.DataFrame, order: Sequence[str], jurors: int | None, inputs) -> dict:
    """The power analysis behind a formal winner claim (protocol: "Use a power analysis before a
    formal winner claim").

    From the jurors' direct holistic choices between the top two systems: the exact binomial
    test of "no preference" (``stats.power.critical_wins``) and the number of complete-view
    jurors a claim needs at the observed preference (``stats.power.jurors_needed``, exact
    binomial). The claim is supported only when the test rejects and the panel has at least that
    many complete-view jurors. ``alpha`` and ``power`` are recorded in the inputs.
    """
    settings = inputs["parameters"]["power"]
    alpha, target = float(settings["alpha"]), float(settings["power"])
    block: dict[str, Any] = {"alpha": alpha, "power": target, "complete_view_jurors": jurors}
    if len(order) < 2:
        return {**block, "supported": False, "reason": "fewer than two rated systems"}
    top, second = order[0], order[1]
    pair = rows[
        ((rows["a"] == top) & (rows["b"] == second)) | ((rows["a"] == second) & (rows["b"] == top))
    ]
    decided = pair[pair["outcome"] != "tie"]
    chosen = np.where(decided["outcome"] == "a", decided["a"], decided["b"])
    n = int(len(decided))
    wins = int((chosen == top).sum())
    block.update(top=top, second=second, direct_choices=n, choices_for_top=wins)
    if n == 0:
        return {**block, "supported": False, "reason": "no direct choice between the top two"}
    share = wins / n
    critical = power.critical_wins(n, alpha=alpha)
    significant = wins >= critical
    block.update(observed_preference=share, critical_wins=critical, exact_test=significant)
    needed = None
    if 0.5 < share < 1.0:
        plan = power.jurors_needed(share, alpha=alpha, power=target)
        needed = plan.jurors
        block.update(jurors_needed=needed, normal_approximation_jurors=plan.normal_n)
    enough = needed is None or (jurors is not None and jurors >= needed)
    block["supported"] = bool(significant and enough and share > 0.5)
    return block


def _holistic_result(inputs: Mapping[str, Any]) -> dict[str, Any]:
    definition = inputs["definition"]
    pool = inputs["pool"]
    allowed, systems = main_runs(inputs)
    every = table_frame(inputs, "choices")
    choices = _ranking_rows(every, allowed, ("run_a", "run_b"))
    clusters = bs.bootstrap_clusters(definition, "full_film")
    levels = publication.PublicationLevels.from_definition(definition)
    complete = _complete_view(inputs, systems)
    panels = []
    for panel, rows in _per_panel(choices):
        rows = rows.astype(str)
        fit = _pairwise_fit(rows, clusters, inputs)
        counts = publication.pool_counts(rows, systems=systems, voter="juror")
        jurors = complete.get(panel)
        power_block = _power_block(rows, fit.get("order", []), jurors, inputs)
        label = publication.publication_label(
            levels,
            duration_class=pool["duration_class"],
            counts=counts,
            intervals=fit.get("intervals"),
            loo_top=fit.get("loo_top"),
            complete_view_jurors=jurors,
            winner_claim_powered=power_block["supported"],
        )
        try:
            alpha = jury_results.choice_agreement(rows)
        except AgreementUndefined:
            alpha = None
        panels.append(
            {
                "panel": panel,
                "status": fit["status"],
                "reason": fit.get("reason"),
                "systems": _system_rows(systems, fit, counts, label),
                "win_matrix": _win_matrix(rows, systems),
                "publication": label.as_dict(),
                "agreement": {"krippendorff_alpha_nominal": alpha},
                "power": power_block,
                "counts": {
                    "choices": int(len(rows)),
                    "prompts": counts.prompts,
                    "jurors": counts.voters,
                    "complete_view_jurors": jurors,
                },
                **_publish_fit(fit),
            }
        )
    return {
        "title": "Full-film result: holistic paired choice (juries)",
        "status": "ok" if panels else "no_data",
        "statement": "Audience and craft panels are published separately and never combined.",
        "panels": panels,
        "counts": {
            "valid_choices": int(len(every)),
            "choices_outside_main_ranking": int(len(every) - len(choices)),
        },
    }


def _dimension_labels(definition: Mapping[str, Any]) -> dict[str, str]:
    return {d["key"]: d.get("label", d["key"]) for d in definition.get("quality_dimensions", [])}


def _dimensions_result(inputs: Mapping[str, Any]) -> dict[str, Any]:
    definition = inputs["definition"]
    pool = inputs["pool"]
    params = inputs["parameters"]
    allowed, systems = main_runs(inputs)
    every = table_frame(inputs, "scores")
    scores = _ranking_rows(every, allowed, ("run",))
    clusters = bs.bootstrap_clusters(definition, "full_film")
    levels = publication.PublicationLevels.from_definition(definition)
    complete = _complete_view(inputs, systems)
    names = _dimension_labels(definition)
    panels = []
    for panel, rows in _per_panel(scores):
        frame = rows.astype({c: str for c in ("juror", "prompt", "run", "system", "dimension")})
        frame["score"] = pd.to_numeric(frame["score"].astype(str))
        table_ = jury_results.dimension_results(
            frame,
            clusters,
            seed=int(params["seed"]),
            n_replicates=int(params["n_replicates"]),
            level=float(params["level"]),
        )
        agreement = jury_results.dimension_agreement(frame, level="ordinal")
        alphas = {
            str(d): a for d, a in zip(agreement["dimension"], agreement["alpha"], strict=True)
        }
        jurors = complete.get(panel)
        try:
            descriptive = publication.is_descriptive(levels, pool["duration_class"], jurors or 0)
        except KeyError:
            descriptive = None
        order = [d for d in names if d in set(table_["dimension"])]
        order += sorted(set(table_["dimension"]) - set(order))
        dimensions = []
        for dimension in order:
            part = table_[table_["dimension"] == dimension]
            dimensions.append(
                {
                    "dimension": dimension,
                    "name": names.get(dimension, dimension),
                    "krippendorff_alpha_ordinal": alphas.get(dimension),
                    "systems": [
                        {
                            "label": str(r.system),
                            "mean": r.mean,
                            "lower": r.lower,
                            "upper": r.upper,
                            "scores": r.scores,
                            "jurors": r.jurors,
                            "prompts": r.prompts,
                            "runs": r.runs,
                            "failed_replicates": r.failed_replicates,
                        }
                        for r in part.itertuples()
                    ],
                }
            )
        panels.append(
            {
                "panel": panel,
                "descriptive": descriptive,
                "complete_view_jurors": jurors,
                "minimum_complete_view": (definition.get("jury") or {})
                .get("minimum_complete_view", {})
                .get(pool["duration_class"]),
                "dimensions": dimensions,
                "counts": {"scores": int(len(frame)), "jurors": int(frame["juror"].nunique())},
            }
        )
    return {
        "title": "Full-film result: quality dimensions (juries)",
        "status": "ok" if panels else "no_data",
        "statement": (
            "Each dimension is published separately; there is no weighted composite. Audience "
            "and craft panels are never combined."
        ),
        "bootstrap": {
            "seed": int(params["seed"]),
            "n_replicates": int(params["n_replicates"]),
            "level": float(params["level"]),
            "clusters": list(clusters),
        },
        "panels": panels,
        "counts": {
            "valid_scores": int(len(every)),
            "scores_outside_main_ranking": int(len(every) - len(scores)),
        },
    }


def _tovaki_result(inputs: Mapping[str, Any]) -> dict[str, Any]:
    definition = inputs["definition"]
    allowed, systems = main_runs(inputs)
    every = table_frame(inputs, "scores")
    scores = _ranking_rows(every, allowed, ("run",))
    rule = scorecards.ScoringRule.from_definition(definition)
    names = _dimension_labels(definition)
    panels = []
    for panel, rows in _per_panel(scores):
        frame = pd.DataFrame(
            {
                "system": rows["system"].astype(str),
                "reviewer": rows["juror"].astype(str),
                "dimension": rows["dimension"].astype(str),
                "score": rows["score"].astype(str),
                "task": rows["task_lane"].astype(str),
            }
        )
        entry: dict[str, Any] = {"panel": panel, "reviewers": int(frame["reviewer"].nunique())}
        try:
            published = scorecards.publish_totals(frame, rule)
        except (scorecards.InvalidScores, ValueError) as exc:
            entry.update(status="not_computable", reason=str(exc))
            panels.append(entry)
            continue
        means: dict[str, dict[str, str]] = {}
        for (system, dimension), part in frame.groupby(["system", "dimension"], sort=True):
            values = [scorecards.exact(v) for v in part["score"]]
            means.setdefault(system, {})[dimension] = str(sum(values, Fraction(0)) / len(values))
        flags = published.flags
        entry.update(
            status="ok",
            totals=[
                {
                    "label": str(system),
                    "total": str(total),
                    "total_points": float(total),
                    "dimension_means": means.get(str(system), {}),
                }
                for system, total in published.totals.items()
            ],
            close_result={
                "first": str(published.close.first),
                "second": str(published.close.second),
                "difference": str(published.close.difference),
                "threshold": str(published.close.threshold),
                "distinguishable": published.close.distinguishable,
            },
            statement=published.statement,
            disagreements=[
                {k: clean(v) for k, v in row.items()}
                for row in flags[flags["flag"]].to_dict(orient="records")
            ],
            disagreement_range=str(rule.disagreement_range),
        )
        panels.append(entry)
    return {
        "title": "Scored result: weighted scorecards",
        "status": "ok" if any(p.get("status") == "ok" for p in panels) else "no_data",
        "scope_language": rule.scope_language,
        "close_result_rule": rule.close_result_rule,
        "universal_best_claim_allowed": rule.universal_best_claim_allowed,
        "weights": dict(rule.weights),
        "dimension_names": names,
        "qualified_systems": systems,
        "panels": panels,
        "counts": {
            "valid_scores": int(len(every)),
            "scores_outside_main_ranking": int(len(every) - len(scores)),
        },
    }


# ---------------------------------------------------------------------------------------------
# Reliability


def _reliability_result(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Every started run by final state, per entry, with cost and wall time.

    Protocol, "Reliability result": "Every started run remains in the reliability dataset";
    nonconforming and exhibition outputs are listed here with why they are not in the main
    ranking.
    """
    from decimal import Decimal

    definition = inputs["definition"]
    final_states = list(definition["final_states"])
    cost_fields = list(definition.get("cost_fields") or [])
    runs = table_frame(inputs, "reliability_runs")
    entries = table_frame(inputs, "entries")
    reasons: dict[str, str] = {}
    finished = runs[runs["final_state"].astype(str) != ""].copy()
    if not finished.empty:
        finished["exhibition"] = _as_bool(finished["exhibition"])
        _, marked = pools.split_main_and_reliability(finished, final_states=final_states)
        reasons = dict(zip(marked["run"].astype(str), marked["excluded_from_main"], strict=True))
    rows = []
    for run in runs.to_dict(orient="records"):
        state = str(run["final_state"]) or UNFINISHED
        reason = reasons.get(str(run["run"]), "not finished")
        if not reason and not _true(run["has_proxy"]):
            reason = "no review proxy"
        rows.append(
            {
                "run": run["run"],
                "label": run["label"],
                "prompt": run["prompt"],
                "final_state": state,
                "exhibition": _true(run["exhibition"]),
                "in_main_ranking": reason == "",
                "excluded_from_main": reason,
                "wall_time_s": None if run["wall_time_s"] is None else float(run["wall_time_s"]),
                "attempts": int(run["attempts"]),
                "retry_reasons": list(run["retry_reasons"] or []),
                "failure_codes": list(run["failure_codes"] or []),
                "output_sha256": run["output_sha256"] or None,
                "cost": dict(run["cost"] or {}),
            }
        )
    per_entry = []
    columns = final_states + [UNFINISHED]
    for entry in entries.to_dict(orient="records"):
        mine = [r for r in rows if r["label"] == entry["label"]]
        by_state = {state: sum(1 for r in mine if r["final_state"] == state) for state in columns}
        walls = [r["wall_time_s"] for r in mine if r["wall_time_s"] is not None]
        totals = {
            name: str(sum((Decimal(str(r["cost"].get(name, "0"))) for r in mine), Decimal(0)))
            for name in cost_fields
        }
        per_entry.append(
            {
                "label": entry["label"],
                "path": entry["path"],
                "exhibition": _true(entry["exhibition"]),
                "started_runs": len(mine),
                "by_final_state": by_state,
                "completed_conforming_share": (
                    by_state.get(pools.CONFORMING_STATE, 0) / len(mine) if mine else None
                ),
                "in_main_ranking": sum(1 for r in mine if r["in_main_ranking"]),
                "wall_time_s": {
                    "total": float(sum(walls)) if walls else None,
                    "mean": float(np.mean(walls)) if walls else None,
                    "max": float(max(walls)) if walls else None,
                },
                "cost": totals,
                "retries": sum(len(r["retry_reasons"]) for r in mine),
            }
        )
    return {
        "title": "Reliability result",
        "status": "ok" if rows else "no_data",
        "statement": (
            "Every started run remains in the reliability dataset. Nonconforming and exhibition "
            "outputs are listed here and never enter the main ranking."
        ),
        "final_states": columns,
        "cost_fields": cost_fields,
        "currency": (inputs.get("pool") or {}).get("currency"),
        "entries": per_entry,
        "runs": rows,
        "counts": {"started_runs": len(rows), "entries": len(per_entry)},
    }
