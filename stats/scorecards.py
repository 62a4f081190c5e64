"""Tovaki weighted scorecards: totals out of 100, the close-result rule, disagreement flags.

Tovaki definition: ``scoring`` (0-5 scale in 0.5 steps; eight dimensions whose weights sum to
``weighted_total`` = 100; ``disagreement_flag_range_on_0_to_5_scale``) and
``publication_gate`` ("If the top two aggregate scores differ by less than 3 points out of 100,
report that they are not distinguishable in this sample"; required scope language "in this
six-task Tovaki integration sample"; no universal best claim).

All arithmetic is exact: scores are multiples of the step (halves), weights are integers, so a
total is a rational number and is kept as :class:`fractions.Fraction`. A difference of exactly 3
points is therefore exactly 3, never 2.9999999999999996.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pandas as pd

from rounds.protocols import load_definition
from stats.diagnostic_guard import refuse_diagnostic

_TOVAKI = "tovaki-2026-r1"
# Read once from the definition (not a second copy): the default ``threshold=3``.
DEFAULT_CLOSE_RESULT_THRESHOLD: Fraction = Fraction(
    load_definition(_TOVAKI)["publication_gate"]["close_result_threshold_points"]
)

Number = int | float | str | Decimal | Fraction


class InvalidScores(ValueError):
    """Scores outside the scale, off its step, duplicated, or for unknown dimensions."""


def exact(value: Number) -> Fraction:
    """Exact rational value. Floats are read through their shortest decimal repr, so 77.1
    means 771/10 (what the writer meant), not the binary double nearest to it."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a score")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidScores(f"not a finite number: {value!r}")
        return Fraction(repr(value))
    try:
        return Fraction(value)
    except (TypeError, ValueError) as exc:
        raise InvalidScores(f"not a number: {value!r}") from exc


@dataclass(frozen=True)
class ScoringRule:
    """The scoring and publication-gate rules of a scored protocol, as exact numbers."""

    weights: Mapping[str, int]
    scale_min: Fraction
    scale_max: Fraction
    step: Fraction
    weighted_total: int
    disagreement_range: Fraction
    close_result_threshold: Fraction
    scope_language: str | None = None
    close_result_rule: str | None = None
    universal_best_claim_allowed: bool = False

    @classmethod
    def from_definition(cls, source: Any) -> ScoringRule:
        """From a ``Protocol`` or a definition dict with ``scoring`` (and ``publication_gate``)."""
        definition = source.definition if hasattr(source, "definition") else source
        scoring = definition.get("scoring")
        if not scoring:
            raise ValueError("this protocol defines no weighted scoring")
        if definition.get("weighted_composite_allowed") is False:
            raise ValueError("this protocol forbids a weighted composite")
        gate = definition.get("publication_gate") or {}
        weights = {d["key"]: int(d["weight"]) for d in scoring["dimensions"]}
        total = int(scoring["weighted_total"])
        if sum(weights.values()) != total:
            raise ValueError(f"weights sum to {sum(weights.values())}, not {total}")
        threshold = gate.get("close_result_threshold_points")
        if threshold is None:
            threshold = scoring["tie_threshold_points_out_of_100"]
        return cls(
            weights=weights,
            scale_min=exact(scoring["scale"]["min"]),
            scale_max=exact(scoring["scale"]["max"]),
            step=exact(scoring["scale"]["step"]),
            weighted_total=total,
            disagreement_range=exact(scoring["disagreement_flag_range_on_0_to_5_scale"]),
            close_result_threshold=exact(threshold),
            scope_language=gate.get("required_scope_language"),
            close_result_rule=gate.get("close_result_rule"),
            universal_best_claim_allowed=bool(gate.get("universal_best_claim_allowed", False)),
        )


def _rule(weights: ScoringRule | Mapping[str, Number], scale: Any) -> ScoringRule:
    if isinstance(weights, ScoringRule):
        return weights
    if scale is None:
        raise ValueError(
            "pass a ScoringRule (ScoringRule.from_definition) or the scale "
            "(min, max, step) from the definition together with plain weights"
        )
    low, high, step = (exact(v) for v in scale)
    ints = {}
    for key, w in weights.items():
        value = exact(w)
        if value.denominator != 1 or value < 0:
            raise ValueError(f"weight of {key!r} must be a non-negative integer")
        ints[key] = int(value)
    total = sum(ints.values())
    if total <= 0:
        raise ValueError("weights must not all be zero")
    return ScoringRule(ints, low, high, step, total, Fraction(0), Fraction(0))


def _validated(scores: pd.DataFrame, rule: ScoringRule) -> pd.DataFrame:
    needed = ["system", "reviewer", "dimension", "score"]
    missing = [c for c in needed if c not in scores.columns]
    if missing:
        raise InvalidScores(f"scores lack column(s) {', '.join(missing)}")
    keys = ["system", "reviewer", "dimension"] + (["task"] if "task" in scores.columns else [])
    frame = scores[keys + ["score"]].copy()
    if frame[keys].isna().any().any():
        raise InvalidScores("a score row has no system, reviewer, dimension or task")
    unknown = sorted(set(frame["dimension"]) - set(rule.weights), key=str)
    if unknown:
        raise InvalidScores(f"unknown dimension(s): {unknown}")
    values = []
    for raw in frame["score"]:
        if raw is None or (isinstance(raw, float) and raw != raw):
            raise InvalidScores("a score is missing")
        value = exact(raw)
        if not rule.scale_min <= value <= rule.scale_max:
            raise InvalidScores(
                f"score {raw!r} outside {rule.scale_min}..{rule.scale_max} on the scorecard scale"
            )
        if (value - rule.scale_min) % rule.step != 0:
            raise InvalidScores(f"score {raw!r} is not a multiple of the {rule.step} step")
        values.append(value)
    frame["score"] = pd.Series(values, index=frame.index, dtype=object)
    dup = frame.duplicated(keys, keep=False)
    if dup.any():
        first = frame.loc[dup, keys].iloc[0].to_dict()
        raise InvalidScores(f"a reviewer scored the same cell twice: {first}")
    # A scorecard is complete: every reviewer scores every weighted dimension of what they
    # reviewed, so no dimension's mean rests on fewer reviewers than the others.
    card = [k for k in keys if k != "dimension"]
    required = {d for d, w in rule.weights.items() if w}
    for key, rows in frame.groupby(card, sort=True):
        absent = sorted(required - set(rows["dimension"]))
        if absent:
            names = dict(zip(card, key if isinstance(key, tuple) else (key,), strict=True))
            raise InvalidScores(f"scorecard {names} has no score for {absent}")
    return frame


def weighted_totals(
    scores: pd.DataFrame,
    weights: ScoringRule | Mapping[str, Number],
    *,
    scale: tuple[Number, Number, Number] | None = None,
) -> pd.Series:
    """Each system's weighted total out of the definition's ``weighted_total`` (100).

    ``scores``: columns ``system``, ``reviewer``, ``dimension``, ``score`` (optionally ``task``,
    for the six task lanes). A dimension's score is the mean of its scores over reviewers (and
    tasks); the total is ``sum(weight_d * mean_d) / scale_max``, i.e. the weighted mean of
    reviewers' scores rescaled to 100 when weights sum to 100. Every system must have every
    weighted dimension scored. Returns exact :class:`~fractions.Fraction` totals (object
    Series named ``total``), best first; ``.astype(float)`` for display.

    ``weights``: a :class:`ScoringRule` (from the definition), or a plain ``{dimension:
    weight}`` mapping together with ``scale=(min, max, step)`` read from the definition.
    """
    refuse_diagnostic(scores, "the scorecard totals")
    rule = _rule(weights, scale)
    frame = _validated(scores, rule)
    totals: dict[Any, Fraction] = {}
    for system, rows in frame.groupby("system", sort=True):
        per_dim: dict[str, list[Fraction]] = {}
        for dim, value in zip(rows["dimension"], rows["score"], strict=True):
            per_dim.setdefault(dim, []).append(value)
        absent = [d for d, w in rule.weights.items() if w and d not in per_dim]
        if absent:
            raise InvalidScores(f"system {system!r} has no score for {absent}")
        weighted = sum(
            (w * sum(per_dim[d], Fraction(0)) / len(per_dim[d]) for d, w in rule.weights.items()),
            Fraction(0),
        )
        # Rescale from the 0..max score scale to 0..weighted_total points.
        totals[system] = (weighted - rule.scale_min * rule.weighted_total) / (
            rule.scale_max - rule.scale_min
        )
    series = pd.Series(totals, dtype=object, name="total")
    series.index.name = "system"
    order = sorted(series.index, key=lambda s: (-series[s], str(s)))
    return series.loc[order]


@dataclass(frozen=True)
class CloseResult:
    """Whether the top two totals are distinguishable under the close-result rule."""

    distinguishable: bool
    first: Any
    second: Any
    difference: Fraction
    threshold: Fraction


def top_two_distinguishable(
    totals: pd.Series | Mapping[Any, Number],
    threshold: Number = DEFAULT_CLOSE_RESULT_THRESHOLD,
) -> bool:
    """True when the top two totals differ by at least ``threshold`` points (exactly).

    Rule (Tovaki ``publication_gate.close_result_rule``): "If the top two aggregate scores differ
    by less than 3 points out of 100, report that they are not distinguishable in this sample."
    So a difference of exactly 3 is distinguishable; 2.5 is not. The default threshold is read
    from the definition.
    """
    return close_result(totals, threshold).distinguishable


def close_result(
    totals: pd.Series | Mapping[Any, Number],
    threshold: Number = DEFAULT_CLOSE_RESULT_THRESHOLD,
) -> CloseResult:
    """The close-result rule with its working (the top two, their exact difference)."""
    items = list(totals.items())
    if len(items) < 2:
        raise ValueError("the close-result rule needs at least two totals")
    exact_items = sorted(((exact(v), k) for k, v in items), key=lambda t: (-t[0], str(t[1])))
    (best, first), (runner, second) = exact_items[0], exact_items[1]
    limit = exact(threshold)
    difference = best - runner
    return CloseResult(difference >= limit, first, second, difference, limit)


def disagreement_flags(
    scores: pd.DataFrame,
    weights: ScoringRule | Mapping[str, Number],
    *,
    scale: tuple[Number, Number, Number] | None = None,
    flag_range: Number | None = None,
) -> pd.DataFrame:
    """Per (system[, task], dimension): the reviewers' range (max - min) and a ``flag`` when it
    reaches the definition's disagreement range (3 on the 0-5 scale: "differ by 3 or more").

    ``flag_range`` defaults to the rule's ``disagreement_range``.
    """
    rule = _rule(weights, scale)
    limit = exact(flag_range) if flag_range is not None else rule.disagreement_range
    if limit <= 0:
        raise ValueError("pass flag_range, or a ScoringRule from the definition")
    frame = _validated(scores, rule)
    keys = ["system"] + (["task"] if "task" in frame.columns else []) + ["dimension"]
    out = []
    for key, rows in frame.groupby(keys, sort=True):
        values = list(rows["score"])
        spread = max(values) - min(values)
        key_t = key if isinstance(key, tuple) else (key,)
        out.append((*key_t, len(values), min(values), max(values), spread, spread >= limit))
    return pd.DataFrame(out, columns=keys + ["reviewers", "min", "max", "range", "flag"])


@dataclass(frozen=True)
class ScorecardResult:
    """Publishable Tovaki result: exact totals, the close-result finding, the scope language."""

    totals: pd.Series
    close: CloseResult
    statement: str
    scope_language: str
    close_result_rule: str | None
    flags: pd.DataFrame

    def as_dict(self) -> dict[str, Any]:
        return {
            "totals": {str(k): str(v) for k, v in self.totals.items()},
            "totals_float": {str(k): float(v) for k, v in self.totals.items()},
            "distinguishable": self.close.distinguishable,
            "difference": str(self.close.difference),
            "threshold": str(self.close.threshold),
            "statement": self.statement,
            "scope_language": self.scope_language,
            "close_result_rule": self.close_result_rule,
            "disagreements": int(self.flags["flag"].sum()),
        }


def _points(value: Fraction) -> str:
    """Exact value for prose: integers and halves as decimals, other fractions to 2 places."""
    if (value * 100).denominator == 1:
        text = f"{Decimal(value.numerator) / Decimal(value.denominator):f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{float(value):.2f}"


def publish_totals(scores: pd.DataFrame, rule: ScoringRule) -> ScorecardResult:
    """Totals, the close-result rule and disagreement flags, with the required scope language.

    The statement never makes a universal claim: it always carries the definition's scope
    language, and a close result is reported as "not distinguishable in this sample".
    """
    if not rule.scope_language:
        raise ValueError("the definition gives no required scope language")
    totals = weighted_totals(scores, rule)
    close = close_result(totals, rule.close_result_threshold)
    scale = rule.weighted_total
    if close.distinguishable:
        statement = (
            f"{close.first} scored highest {rule.scope_language}: "
            f"{_points(totals[close.first])} of {scale} points, "
            f"{_points(close.difference)} ahead of {close.second}."
        )
    else:
        statement = (
            f"{close.first} and {close.second} differ by {_points(close.difference)} of {scale} "
            f"points, less than {_points(close.threshold)}: they are not distinguishable "
            f"{rule.scope_language}."
        )
    return ScorecardResult(
        totals=totals,
        close=close,
        statement=statement,
        scope_language=rule.scope_language,
        close_result_rule=rule.close_result_rule,
        flags=disagreement_flags(scores, rule),
    )
