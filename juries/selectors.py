"""Reads of jury data: the frames the results app computes from, the descriptive-result rule,
and what juror pages show.

The frames are the exact inputs of ``stats`` (issue 8): one row per judgment, with the
anonymous entry label as ``system``, the run's public id as ``run`` and the juror's pseudonym,
plus whether the row is excluded and why. Exclusions are derived at read time and never
written into a locked scorecard:

- ``conflict_of_interest`` / ``staff_exclusion``: the juror's seat in the round was excluded
  (protocol: "Exclude entrant employees, investors, contractors, and affiliates");
- ``juror_dismissed``: the juror was dismissed (attrition);
- ``incomplete_playback``: the film's playback proof is not complete (defensive: the
  services accept no scorecard before it is);
- ``attention_failure``: fewer correct story answers than the published rule requires
  (protocol: "Publish the attention-failure exclusion rule").

Audience and craft rows carry their ``panel``; nothing here combines them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pandas as pd
from django.db.models import Count, Q, QuerySet

from juries.models import (
    AttentionAnswer,
    Juror,
    JuryFilm,
    JuryPlan,
    PanelMember,
    Scorecard,
    ScreeningSession,
    SegmentVote,
    SegmentWindow,
    Viewing,
)
from juries.scoring import disagreement
from rounds.models import Round

SCORECARD_COLUMNS = [
    "scorecard_id",
    "juror",
    "panel",
    "prompt",
    "task_lane",
    "run",
    "system",
    "dimension",
    "score",
    "locked",
    "excluded",
    "exclusion_reason",
]
HOLISTIC_COLUMNS = [
    "juror",
    "panel",
    "prompt",
    "run_a",
    "run_b",
    "a",
    "b",
    "outcome",
    "excluded",
    "exclusion_reason",
    "locked",
]
SEGMENT_VOTE_COLUMNS = [
    "juror_or_voter",
    "panel",
    "prompt",
    "run_a",
    "run_b",
    "a",
    "b",
    "segment",
    "outcome",
    "excluded",
    "exclusion_reason",
]


# ---------------------------------------------------------------------------
# Exclusions


@dataclass(frozen=True)
class Exclusions:
    """Why a juror's work in one round, or one viewing, does not count."""

    by_juror: dict[int, str]
    by_viewing: dict[int, str]

    def reason(self, juror_id: int, viewing_id: int | None = None) -> str:
        return self.by_juror.get(juror_id) or (
            self.by_viewing.get(viewing_id, "") if viewing_id is not None else ""
        )


def exclusions(round_: Round) -> Exclusions:
    """Exclusion reasons for the round's jurors and viewings (see the module docstring)."""
    by_juror: dict[int, str] = {}
    for juror_id, status, code, attrition in PanelMember.objects.filter(round=round_).values_list(
        "juror_id", "status", "exclusion_code", "juror__attrition_status"
    ):
        if status == PanelMember.Status.EXCLUDED:
            by_juror[juror_id] = code
        elif attrition == Juror.Attrition.DISMISSED:
            by_juror[juror_id] = "juror_dismissed"
    plan = JuryPlan.objects.filter(round=round_).only("attention_min_correct").first()
    need = plan.attention_min_correct if plan else 0
    by_viewing: dict[int, str] = {}
    viewings = Viewing.objects.filter(round=round_).annotate(
        answered=Count("answers"), correct=Count("answers", filter=Q(answers__correct=True))
    )
    for viewing_id, completed_at, answered, correct in viewings.values_list(
        "id", "completed_at", "answered", "correct"
    ):
        if completed_at is None:
            by_viewing[viewing_id] = "incomplete_playback"
        elif answered and correct < need:
            by_viewing[viewing_id] = "attention_failure"
    return Exclusions(by_juror=by_juror, by_viewing=by_viewing)


def _scorecards(round_: Round) -> QuerySet[Scorecard]:
    return (
        Scorecard.objects.filter(round=round_)
        .select_related("juror", "panel", "film__package", "film__entry", "film__run", "viewing")
        .order_by("pk")
    )


# ---------------------------------------------------------------------------
# The frames stats reads


def scorecards_frame(round_: Round) -> pd.DataFrame:
    """One row per (scorecard, dimension): ``scorecard_id, juror, panel, prompt, task_lane,
    run, system, dimension, score, locked, excluded, exclusion_reason``. ``score`` is a float
    (scores are exact multiples of the step, so the float is exact for halves)."""
    why = exclusions(round_)
    rows = []
    for card in _scorecards(round_):
        reason = why.reason(card.juror_id, card.viewing_id)
        for dimension, score in sorted(card.scores.items()):
            rows.append(
                (
                    str(card.public_id),
                    card.juror.public_id,
                    card.panel.kind,
                    card.film.package.prompt_key,
                    card.film.package.task_lane,
                    str(card.film.run.public_id),
                    card.film.entry.label,
                    dimension,
                    float(score),
                    card.is_locked,
                    bool(reason),
                    reason,
                )
            )
    frame = pd.DataFrame(rows, columns=SCORECARD_COLUMNS)
    return frame.astype({"score": float, "locked": bool, "excluded": bool})


def holistic_choices_frame(round_: Round) -> pd.DataFrame:
    """One row per holistic paired choice: ``juror, panel, prompt, run_a, run_b, a, b,
    outcome, excluded, exclusion_reason, locked``. ``a`` is the film the juror saw first,
    ``b`` the later one (order was counterbalanced, so sides are balanced across jurors);
    ``outcome`` is ``"a"`` or ``"b"``. A choice is excluded when either film's viewing is."""
    why = exclusions(round_)
    films = {
        str(f.run.public_id): f
        for f in JuryFilm.objects.filter(round=round_).select_related("run", "entry")
    }
    viewing_of = {
        (juror_id, film_id): viewing_id
        for viewing_id, juror_id, film_id in Viewing.objects.filter(round=round_).values_list(
            "id", "juror_id", "film_id"
        )
    }
    rows = []
    for card in _scorecards(round_):
        for choice in card.choices:
            film_a, film_b = films[choice["run_a"]], films[choice["run_b"]]
            reason = why.reason(card.juror_id) or (
                why.by_viewing.get(viewing_of.get((card.juror_id, film_a.pk)), "")
                or why.by_viewing.get(card.viewing_id, "")
            )
            rows.append(
                (
                    card.juror.public_id,
                    card.panel.kind,
                    card.film.package.prompt_key,
                    choice["run_a"],
                    choice["run_b"],
                    film_a.entry.label,
                    film_b.entry.label,
                    choice["outcome"],
                    bool(reason),
                    reason,
                    card.is_locked,
                )
            )
    frame = pd.DataFrame(rows, columns=HOLISTIC_COLUMNS)
    return frame.astype({"excluded": bool, "locked": bool})


def segment_votes_frame(round_: Round, *, kind: str = "within_segment") -> pd.DataFrame:
    """One row per segment vote of ``kind`` (``within_segment`` by default; ``transition`` and
    ``nonadjacent`` give the continuity diagnostics, published separately): ``juror_or_voter,
    panel, prompt, run_a, run_b, a, b, segment, outcome, excluded, exclusion_reason``."""
    why = exclusions(round_)
    votes = (
        SegmentVote.objects.filter(round=round_, window_a__kind=kind)
        .select_related(
            "juror",
            "panel",
            "window_a__film__package",
            "window_a__film__run",
            "window_a__film__entry",
            "window_b__film__run",
            "window_b__film__entry",
        )
        .order_by("pk")
    )
    rows = []
    for vote in votes:
        reason = why.reason(vote.juror_id)
        film_a, film_b = vote.window_a.film, vote.window_b.film
        rows.append(
            (
                vote.juror.public_id,
                vote.panel.kind,
                film_a.package.prompt_key,
                str(film_a.run.public_id),
                str(film_b.run.public_id),
                film_a.entry.label,
                film_b.entry.label,
                vote.window_a.index,
                vote.outcome,
                bool(reason),
                reason,
            )
        )
    frame = pd.DataFrame(rows, columns=SEGMENT_VOTE_COLUMNS)
    return frame.astype({"segment": int, "excluded": bool})


def segment_windows(round_: Round, *, kind: str = "within_segment") -> list[dict[str, Any]]:
    """The published windows of ``kind``, by prompt and anonymous film label."""
    return [
        {
            "prompt": w.film.package.prompt_key,
            "film": w.film.display_label,
            "index": w.index,
            "start_s": w.start_s,
            "end_s": w.end_s,
            "second_start_s": w.second_start_s,
            "second_end_s": w.second_end_s,
            "log_index": w.log_index,
        }
        for w in SegmentWindow.objects.filter(round=round_, kind=kind).select_related(
            "film__package", "film__entry"
        )
    ]


def unlocked_scorecard_count(round_: Round) -> int:
    """Scorecards of the round not yet hash-locked (the reveal needs zero)."""
    return Scorecard.objects.filter(round=round_, locked_at__isnull=True).count()


# ---------------------------------------------------------------------------
# Complete views and the descriptive label


def complete_view_counts(round_: Round, *, panel: str | None = None) -> dict[str, int]:
    """Per entry label: the number of jurors (of ``panel``, or of all panels) whose every
    assigned viewing of that entry's films is complete and not excluded.

    Every entry with a jury film appears, with 0 when no juror qualifies.
    """
    why = exclusions(round_)
    labels = {
        label
        for label in JuryFilm.objects.filter(round=round_).values_list("entry__label", flat=True)
    }
    viewings = Viewing.objects.filter(round=round_)
    if panel is not None:
        viewings = viewings.filter(panel__kind=panel)
    ok: dict[tuple[str, int], bool] = {}
    for viewing_id, juror_id, label in viewings.values_list("id", "juror_id", "film__entry__label"):
        valid = not why.reason(juror_id, viewing_id)
        ok[(label, juror_id)] = ok.get((label, juror_id), True) and valid
    counts: dict[str, int] = {label: 0 for label in labels}
    for (label, _), valid in ok.items():
        counts[label] += int(valid)
    return dict(sorted(counts.items()))


def minimum_complete_view(round_: Round) -> int | None:
    """The definition's minimum complete-view target for the round's duration class."""
    jury = round_.protocol.jury or {}
    return (jury.get("minimum_complete_view") or {}).get(round_.duration_class)


def jury_is_descriptive(round_: Round, *, panel: str | None = None) -> bool:
    """True when a jury result must be labelled descriptive: some system has fewer
    complete-view jurors than the definition's minimum (25 for 5 minutes, 12 for 15, 7 for 30
    and longer), judged panel by panel (``panel=None``: descriptive if any panel is), or there
    is no jury film at all."""
    target = minimum_complete_view(round_)
    kinds = (
        [panel]
        if panel is not None
        else sorted(
            set(PanelMember.objects.filter(round=round_).values_list("panel__kind", flat=True))
        )
    )
    if target is None or not kinds:
        return True
    for kind in kinds:
        counts = complete_view_counts(round_, panel=kind)
        if not counts or min(counts.values()) < target:
            return True
    return False


# ---------------------------------------------------------------------------
# Tovaki: disagreement flags, the task-local mapping


def disagreement_flags(round_: Round) -> pd.DataFrame:
    """Per (prompt, run, dimension) of locked, non-excluded scores: the reviewers' lowest and
    highest score and the Tovaki disagreement flag (range >= the definition's
    ``disagreement_flag_range_on_0_to_5_scale``). Columns ``prompt, task_lane, run, system,
    dimension, reviewers, low, high, flagged``."""
    columns = [
        "prompt",
        "task_lane",
        "run",
        "system",
        "dimension",
        "reviewers",
        "low",
        "high",
        "flagged",
    ]
    rules = round_.protocol.scoring or {}
    flag_range = rules.get("disagreement_flag_range_on_0_to_5_scale")
    frame = scorecards_frame(round_)
    frame = frame[frame["locked"] & ~frame["excluded"]]
    rows = []
    keys = ["prompt", "task_lane", "run", "system", "dimension"]
    for key, part in frame.groupby(keys, sort=True):
        scores = part["score"].tolist()
        flagged = (
            disagreement([str(s) for s in scores], flag_range=flag_range)
            if flag_range is not None
            else False
        )
        rows.append((*key, part["juror"].nunique(), min(scores), max(scores), flagged))
    return pd.DataFrame(rows, columns=columns)


def task_label_record(round_: Round) -> dict[str, Any]:
    """The Tovaki task-local mapping with the seed it was drawn from: per prompt, label ->
    run public id. Its SHA-256 is committed in the order schedule; the record itself is
    published only once scores are locked (``disclosure_schedule``)."""
    plan = JuryPlan.objects.filter(round=round_).only("task_label_seed").first()
    mapping: dict[str, dict[str, str]] = defaultdict(dict)
    for film in (
        JuryFilm.objects.filter(round=round_)
        .exclude(task_label="")
        .select_related("package", "run")
    ):
        mapping[film.package.prompt_key][film.task_label] = str(film.run.public_id)
    return {
        "seed": plan.task_label_seed if plan else "",
        "mapping": {k: dict(sorted(v.items())) for k, v in sorted(mapping.items())},
    }


def task_label_mapping(round_: Round) -> dict[str, dict[str, str]]:
    """Per prompt, task-local label -> entry label (withheld until scores are locked: callers
    publish it only then; Tovaki ``disclosure_schedule``)."""
    mapping: dict[str, dict[str, str]] = defaultdict(dict)
    for film in (
        JuryFilm.objects.filter(round=round_)
        .exclude(task_label="")
        .select_related("package", "entry")
    ):
        mapping[film.package.prompt_key][film.task_label] = film.entry.label
    return {k: dict(sorted(v.items())) for k, v in sorted(mapping.items())}


# ---------------------------------------------------------------------------
# Juror pages


def juror_for_user(user) -> Juror | None:
    if not getattr(user, "is_authenticated", False):
        return None
    return Juror.objects.filter(user=user).first()


def juror_sessions(juror: Juror) -> list[ScreeningSession]:
    """The juror's sessions with their viewings, in schedule order."""
    return list(
        ScreeningSession.objects.filter(juror=juror)
        .select_related("round", "panel")
        .prefetch_related("viewings")
        .order_by("scheduled_start", "index")
    )


def session_viewings(session: ScreeningSession) -> list[Viewing]:
    """The session's viewings in order, with what the session page shows (no N+1)."""
    return list(
        session.viewings.select_related("film__package", "film__entry", "scorecard")
        .prefetch_related("answers", "film__package__attention_questions")
        .order_by("order_index")
    )


def viewing_has_answers(viewing: Viewing) -> bool:
    return AttentionAnswer.objects.filter(viewing=viewing).exists()
