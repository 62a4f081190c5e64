"""Full-film jury results: per-dimension scores with cluster-bootstrap intervals, the holistic
paired choice through Bradley-Terry, and inter-rater agreement, one panel at a time.

Protocol, "Five-minute and longer evaluation" and "Quality dimensions": "Keep audience and
craft panels separate. Do not combine their scores." "Require one holistic paired choice.
Publish each dimension separately. ... Do not create a weighted composite after viewing
results. Publish inter-rater agreement." Intervals resample the definition's
``bootstrap_clusters.full_film`` levels (prompt, then production run), never single scores.

No function here combines dimensions: there is deliberately no composite for AI Duel
(``weighted_composite_allowed: false``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from stats import bootstrap as bs
from stats.agreement import AgreementUndefined, alpha_long


class MixedPanels(ValueError):
    """Scores or choices from more than one panel were passed together."""


def single_panel(frame: pd.DataFrame, *, panel: str = "panel") -> Any:
    """The one panel in ``frame``; raise :class:`MixedPanels` if there are several."""
    if panel not in frame.columns:
        raise ValueError(f"rows lack the {panel!r} column: panels must be explicit")
    values = pd.unique(frame[panel].astype(object))
    if len(values) != 1 or pd.isna(values[0]):
        shown = ", ".join(sorted(map(repr, values)))
        raise MixedPanels(
            f"audience and craft panels are never combined; got panels {shown}. "
            "Compute each panel's result separately."
        )
    return values[0]


def dimension_results(
    scores: pd.DataFrame,
    clusters: Sequence[str],
    *,
    seed: int | np.random.Generator,
    n_replicates: int = bs.DEFAULT_REPLICATES,
    level: float = bs.DEFAULT_LEVEL,
    panel: str = "panel",
) -> pd.DataFrame:
    """Mean score per (dimension, system) with percentile cluster-bootstrap intervals.

    ``scores``: one row per juror's score, columns ``panel``, ``juror``, ``prompt``, ``run``,
    ``system``, ``dimension``, ``score``. ``clusters`` from
    ``bootstrap.bootstrap_clusters(protocol, "full_film")``. Runs are resampled within their
    system and prompt, so every system keeps its run count in each replicate.

    Returns columns ``panel``, ``dimension``, ``system``, ``mean``, ``lower``, ``upper``,
    ``scores``, ``jurors``, ``prompts``, ``runs``, ``failed_replicates`` (replicates in which
    the system had no score for that dimension).
    """
    which = single_panel(scores, panel=panel)
    needed = ["juror", "prompt", "system", "dimension", "score"]
    missing = [c for c in needed if c not in scores.columns]
    if missing:
        raise ValueError(f"scores lack column(s) {', '.join(missing)}")
    values = pd.to_numeric(scores["score"], errors="raise").to_numpy(dtype=float)
    if not np.isfinite(values).all():
        raise ValueError("scores must be finite numbers")
    rng = bs.rng_from_seed(seed)
    design = bs.ClusterDesign.from_frame(scores, clusters, sides=bs.SINGLE_SIDE)
    cells = scores[["dimension", "system"]].astype(object)
    cell_code, cell_index = pd.factorize(pd.MultiIndex.from_frame(cells), sort=True)
    n_cells = len(cell_index)
    leaf = design.leaf_of_row
    # Per leaf and cell: sum of scores and number of scores.
    flat = leaf * n_cells + cell_code
    size = design.n_leaves * n_cells
    sums = np.bincount(flat, weights=values, minlength=size).reshape(design.n_leaves, n_cells)
    counts = np.bincount(flat, minlength=size).reshape(design.n_leaves, n_cells).astype(float)
    means = sums.sum(axis=0) / counts.sum(axis=0)
    reps = []
    for weights in design.leaf_weights(n_replicates, rng):
        with np.errstate(invalid="ignore", divide="ignore"):
            reps.append((weights @ sums) / (weights @ counts))
    replicates = np.concatenate(reps)
    failed = np.isnan(replicates).sum(axis=0)
    lower = np.full(n_cells, np.nan)
    upper = np.full(n_cells, np.nan)
    for c in range(n_cells):
        good = replicates[:, c][~np.isnan(replicates[:, c])]
        if good.size:
            lo, hi = bs.percentile_interval(good[:, None], level)
            lower[c], upper[c] = lo[0], hi[0]
    grouped = scores.assign(_cell=cell_code).groupby("_cell")
    out = pd.DataFrame(
        {
            "panel": which,
            "dimension": [d for d, _ in cell_index],
            "system": [s for _, s in cell_index],
            "mean": means,
            "lower": lower,
            "upper": upper,
            "scores": counts.sum(axis=0).astype(int),
            "jurors": grouped["juror"].nunique().to_numpy(),
            "prompts": grouped["prompt"].nunique().to_numpy(),
            "runs": grouped["run"].nunique().to_numpy() if "run" in scores.columns else 0,
            "failed_replicates": failed.astype(int),
        }
    )
    return out.sort_values(["dimension", "mean"], ascending=[True, False]).reset_index(drop=True)


def holistic_choice_result(
    choices: pd.DataFrame,
    clusters: Sequence[str],
    *,
    seed: int | np.random.Generator,
    n_replicates: int = bs.DEFAULT_REPLICATES,
    level: float = bs.DEFAULT_LEVEL,
    prior: float = 0.0,
    panel: str = "panel",
) -> bs.BradleyTerryBootstrap:
    """Bradley-Terry strengths of the holistic paired choice with cluster-bootstrap intervals.

    ``choices``: one row per juror's choice, columns ``panel``, ``a``, ``b``, ``outcome``,
    ``prompt``, ``run_a``, ``run_b`` (and ``juror``). One panel only.
    """
    single_panel(choices, panel=panel)
    return bs.bootstrap_bradley_terry(
        choices, clusters, seed=seed, n_replicates=n_replicates, level=level, prior=prior
    )


def dimension_agreement(
    scores: pd.DataFrame, *, panel: str = "panel", level: str = "ordinal"
) -> pd.DataFrame:
    """Krippendorff's alpha per dimension (ordinal by default): units are (prompt, run) films,
    coders are jurors. ``alpha`` is NaN where it is undefined (no variation or no pairs)."""
    which = single_panel(scores, panel=panel)
    unit = ["prompt", "run"] if "run" in scores.columns else ["prompt", "system"]
    rows = []
    for dimension, part in scores.groupby("dimension", sort=True):
        try:
            alpha = alpha_long(part, unit=unit, coder="juror", value="score", level=level)
        except AgreementUndefined:
            alpha = float("nan")
        rows.append((which, dimension, alpha, part["juror"].nunique(), len(part)))
    return pd.DataFrame(rows, columns=["panel", "dimension", "alpha", "jurors", "scores"])


def choice_agreement(choices: pd.DataFrame, *, panel: str = "panel") -> float:
    """Krippendorff's alpha (nominal) of holistic choices: units are the compared run pairs,
    the value is the chosen system (or "tie"), so side randomization does not matter."""
    single_panel(choices, panel=panel)
    run_a = choices["run_a"].astype(str).to_numpy()
    run_b = choices["run_b"].astype(str).to_numpy()
    pair = np.where(run_a < run_b, run_a + "|" + run_b, run_b + "|" + run_a)
    chosen = np.where(
        choices["outcome"] == "a",
        choices["a"].astype(str),
        np.where(choices["outcome"] == "b", choices["b"].astype(str), "tie"),
    )
    frame = pd.DataFrame(
        {"pair": pair, "prompt": choices["prompt"].astype(str), "juror": choices["juror"]}
    )
    frame["choice"] = chosen
    return alpha_long(
        frame, unit=["prompt", "pair"], coder="juror", value="choice", level="nominal"
    )
