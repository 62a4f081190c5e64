"""Scorecard rules: scales, anchors, Tovaki labels and disagreement, attention. Pure Python.

Protocol, "Quality dimensions": the eight full-film dimensions, "Require one holistic paired
choice. Publish each dimension separately. Define scoring anchors before screening. Do not
create a weighted composite after viewing results. ... Publish the attention-failure
exclusion rule." Tovaki ``scoring``: 0 to 5 in 0.5 steps on eight weighted dimensions, and
``disagreement_flag_range_on_0_to_5_scale``; ``controls``: task-local anonymous labels A-D
randomized inside each task.

Scores are kept as :class:`decimal.Decimal` from the form to the hash, so 3.5 is exactly 3.5
and a step check never suffers a binary rounding error.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from duel.canonical import canonical_sha256


class InvalidScorecard(ValueError):
    """A score off the scale or its step, a missing or unknown dimension, a bad choice."""


# ---------------------------------------------------------------------------
# Scales


@dataclass(frozen=True)
class ScoreScale:
    minimum: Decimal
    maximum: Decimal
    step: Decimal

    def __post_init__(self) -> None:
        if self.step <= 0 or self.maximum <= self.minimum:
            raise InvalidScorecard("a scale needs a positive step and max > min")
        if (self.maximum - self.minimum) % self.step != 0:
            raise InvalidScorecard("the scale's range must be a whole number of steps")

    @classmethod
    def from_definition(cls, scale: Mapping[str, Any]) -> ScoreScale:
        """From a definition's ``scoring.scale`` (``min``, ``max``, ``step``)."""
        return cls(as_decimal(scale["min"]), as_decimal(scale["max"]), as_decimal(scale["step"]))

    def points(self) -> list[Decimal]:
        count = int((self.maximum - self.minimum) / self.step)
        return [self.minimum + i * self.step for i in range(count + 1)]

    def validate(self, value: Any) -> Decimal:
        """The score as an exact decimal; raise :class:`InvalidScorecard` if it is off the
        scale or not a whole number of steps from its minimum."""
        score = as_decimal(value)
        if score < self.minimum or score > self.maximum:
            raise InvalidScorecard(f"{score} is outside {self.minimum} to {self.maximum}")
        if (score - self.minimum) % self.step != 0:
            raise InvalidScorecard(f"{score} is not a multiple of the {self.step} step")
        return score

    def to_json(self) -> dict[str, str]:
        return {"min": text(self.minimum), "max": text(self.maximum), "step": text(self.step)}


def as_decimal(value: Any) -> Decimal:
    if isinstance(value, bool):
        raise InvalidScorecard("a boolean is not a score")
    if isinstance(value, float):
        value = repr(value)
    try:
        number = Decimal(str(value).strip())
    except (InvalidOperation, ValueError) as exc:
        raise InvalidScorecard(f"not a number: {value!r}") from exc
    if not number.is_finite():
        raise InvalidScorecard(f"not a finite number: {value!r}")
    return number


def text(value: Decimal) -> str:
    """Canonical text of a score: no exponent, no trailing zeros (``3.5``, ``4``)."""
    normal = value.normalize()
    out = format(normal, "f")
    return "0" if out in {"-0", ""} else out


def validate_scores(
    scores: Mapping[str, Any], *, dimensions: Sequence[str], scale: ScoreScale
) -> dict[str, Decimal]:
    """Exactly one valid score per dimension of the protocol, nothing else."""
    missing = [d for d in dimensions if d not in scores or scores[d] in (None, "")]
    unknown = sorted(set(scores) - set(dimensions))
    if missing:
        raise InvalidScorecard(f"missing score for: {', '.join(missing)}")
    if unknown:
        raise InvalidScorecard(f"unknown dimension(s): {', '.join(unknown)}")
    out = {}
    for dimension in dimensions:
        try:
            out[dimension] = scale.validate(scores[dimension])
        except InvalidScorecard as exc:
            raise InvalidScorecard(f"{dimension}: {exc}") from None
    return out


# ---------------------------------------------------------------------------
# Anchors (frozen before screening)


def anchors_problems(
    anchors: Mapping[str, Any], *, dimensions: Sequence[str], scale: ScoreScale
) -> list[str]:
    """Why ``anchors`` cannot be frozen: every dimension needs written anchors at least at the
    scale's minimum and maximum; every anchored point must be a point of the scale."""
    problems = []
    if not isinstance(anchors, Mapping):
        return ["anchors must be an object {dimension: {score: text}}"]
    unknown = sorted(set(anchors) - set(dimensions))
    if unknown:
        problems.append(f"anchors for unknown dimension(s): {', '.join(unknown)}")
    points = set(scale.points())
    for dimension in dimensions:
        points_text = anchors.get(dimension)
        if not isinstance(points_text, Mapping) or not points_text:
            problems.append(f"{dimension}: no anchors")
            continue
        seen = set()
        for point, description in points_text.items():
            try:
                value = as_decimal(point)
            except InvalidScorecard:
                problems.append(f"{dimension}: {point!r} is not a score")
                continue
            if value not in points:
                problems.append(f"{dimension}: {point} is not a point of the scale")
            if not isinstance(description, str) or not description.strip():
                problems.append(f"{dimension}: the anchor for {point} is empty")
            seen.add(value)
        for end in (scale.minimum, scale.maximum):
            if end not in seen:
                problems.append(f"{dimension}: needs an anchor at {text(end)}")
    return problems


def canonical_anchors(anchors: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """Anchors with score keys in canonical text (``"3.0"`` and ``"3"`` are one point)."""
    return {
        dimension: {
            text(as_decimal(point)): description.strip() for point, description in points.items()
        }
        for dimension, points in anchors.items()
    }


def anchors_template(dimensions: Sequence[str], scale: ScoreScale) -> dict[str, dict[str, str]]:
    """An empty anchor sheet for staff to fill: the two ends and the middle of the scale."""
    middle = scale.points()[len(scale.points()) // 2]
    return {d: {text(p): "" for p in (scale.minimum, middle, scale.maximum)} for d in dimensions}


def anchors_sha256(anchors: Mapping[str, Mapping[str, str]]) -> str:
    return canonical_sha256(canonical_anchors(anchors))


# ---------------------------------------------------------------------------
# Tovaki: task-local labels, disagreement


def task_local_labels(items: Sequence[str], labels: Sequence[str], *, rng: random.Random) -> dict:
    """A random bijection from one task's items (films) to its anonymous labels (A-D).

    Drawn afresh inside each task, so a label says nothing about the system across tasks.
    """
    if len(items) > len(labels):
        raise InvalidScorecard(
            f"{len(items)} films in one task but only {len(labels)} anonymous labels"
        )
    drawn = list(labels)
    rng.shuffle(drawn)
    return dict(zip(sorted(items), drawn, strict=False))


def disagreement(scores: Sequence[Any], *, flag_range: Any) -> bool:
    """Reviewers disagree when the highest and lowest score differ by ``flag_range`` or more
    (Tovaki ``disagreement_flag_range_on_0_to_5_scale``: "differ by 3 or more")."""
    values = [as_decimal(s) for s in scores]
    if len(values) < 2:
        return False
    return max(values) - min(values) >= as_decimal(flag_range)


# ---------------------------------------------------------------------------
# Attention (never part of the quality score)


@dataclass(frozen=True)
class AttentionRule:
    """A juror's scorecard for a film is excluded when fewer than ``min_correct`` of the
    film's story questions are answered correctly."""

    min_correct: int

    def passed(self, correct: int) -> bool:
        return correct >= self.min_correct

    def statement(self, questions_per_film: int | None = None) -> str:
        """The published rule, stated before screening."""
        of = f" of the {questions_per_film}" if questions_per_film else ""
        return (
            f"Each film is followed by simple story questions. A juror's scorecard and paired "
            f"choices for a film are excluded from the results when the juror answers fewer "
            f"than {self.min_correct}{of} questions about that film correctly. The answers "
            f"check attention only and never enter any quality score."
        )


# ---------------------------------------------------------------------------
# The locked record


def scorecard_record(
    *,
    scorecard: str,
    round_slug: str,
    juror: str,
    panel: str,
    prompt: str,
    run: str,
    scores: Mapping[str, Decimal],
    choices: Sequence[Mapping[str, str]],
    anchors_sha256: str,
) -> dict[str, Any]:
    """The canonical record a scorecard's SHA-256 is taken over (and published with results).

    It names the juror by pseudonym only and the film by its run's public id, and binds the
    scorecard to the anchors it was scored against.
    """
    return {
        "scorecard": scorecard,
        "round": round_slug,
        "juror": juror,
        "panel": panel,
        "prompt": prompt,
        "run": run,
        "scores": {d: text(v) for d, v in sorted(scores.items())},
        "holistic_choices": sorted(
            ({"run_a": c["run_a"], "run_b": c["run_b"], "outcome": c["outcome"]} for c in choices),
            key=lambda c: (c["run_a"], c["run_b"]),
        ),
        "anchors_sha256": anchors_sha256,
    }
