"""Writes for juries: rosters and conflicts, the frozen jury plan, schedules, screening with
playback proof, attention answers, scorecards and their lock, segment windows and votes.

Protocol, "Five-minute and longer evaluation" and "Quality dimensions"; Tovaki ``scoring``
and ``controls``. Each service is one transaction that locks the row it starts from, checks
its state, writes, and appends the transparency-log entry in the same transaction, so a
rolled-back change leaves no entry. Probing proxies (ffprobe) happens before any transaction
is opened.

Log entries name jurors by pseudonym and films by anonymous labels (the entry's label, or the
task-local label for Tovaki): nothing logged before the reveal identifies a system.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from duel.canonical import canonical_sha256
from juries import conflicts as conflict_rules
from juries import playback, schedules, scoring
from juries.models import (
    AttentionAnswer,
    AttentionQuestion,
    Juror,
    JurorAffiliation,
    JuryFilm,
    JuryPlan,
    Panel,
    PanelMember,
    PlaybackBeat,
    Relationship,
    Scorecard,
    ScreeningSession,
    SegmentVote,
    SegmentWindow,
    Viewing,
)
from ledger.services import entry_append
from rounds.models import Entry, InputPackage, Round
from rounds.selectors import rankable_runs

logger = logging.getLogger(__name__)


class JuryError(ValidationError):
    """A jury action the current state or the protocol does not allow."""


def _locked(model, pk):
    return model.objects.select_for_update(no_key=True).get(pk=pk)


def _subject(round_: Round) -> str:
    return f"round:{round_.slug}"


def jury_rules(round_: Round) -> dict[str, Any]:
    """The definition's ``jury`` section; a protocol without one has no jury."""
    jury = round_.protocol.jury
    if not jury:
        raise JuryError(f"{round_.protocol.key} defines no jury")
    return jury


def _uses_task_labels(round_: Round) -> bool:
    controls = round_.protocol.definition.get("controls") or {}
    return bool(controls.get("task_local_anonymous_labels"))


# ---------------------------------------------------------------------------
# Jurors


@transaction.atomic
def juror_create(
    *,
    name: str,
    contact: str = "",
    expertise: str = "",
    target_audience_fit: str = "",
    compensation: str = "",
    user=None,
) -> Juror:
    """Record a juror (protocol: "Record expertise, target-audience fit, compensation,
    conflicts, and attrition")."""
    if not name.strip():
        raise JuryError("a juror needs a (private) name")
    return Juror.objects.create(
        name=name.strip(),
        contact=contact,
        expertise=expertise,
        target_audience_fit=target_audience_fit,
        compensation=compensation,
        user=user,
    )


@transaction.atomic
def juror_affiliation_add(
    *, juror: Juror, party: str, relationship: str, note: str = "", actor: str
) -> JurorAffiliation:
    """Declare a relationship; the juror's active memberships are re-checked for conflicts."""
    if relationship not in Relationship.values:
        raise JuryError(f"unknown relationship {relationship!r}")
    if not party.strip():
        raise JuryError("an affiliation names its party")
    affiliation = JurorAffiliation.objects.create(
        juror=juror, party=party.strip(), relationship=relationship, note=note
    )
    juror_conflicts_recheck(juror=juror, actor=actor)
    return affiliation


@transaction.atomic
def juror_conflicts_recheck(*, juror: Juror, actor: str) -> list[PanelMember]:
    """Apply conflict exclusion to every active membership of ``juror``; return the newly
    excluded memberships (used after affiliations change)."""
    excluded = []
    for member in PanelMember.objects.filter(juror=juror, status=PanelMember.Status.ACTIVE):
        member = _locked(PanelMember, member.pk)
        if _apply_conflicts(member, actor=actor):
            excluded.append(member)
    return excluded


@transaction.atomic
def juror_attrition_record(*, juror: Juror, status: str, reason: str, actor: str) -> Juror:
    """Record that a juror withdrew (completed, locked work stays valid) or was dismissed
    (all of the juror's work is excluded, with that reason). Logged for every round the
    juror sits in; the private reason stays in the database."""
    juror = _locked(Juror, juror.pk)
    if status not in {Juror.Attrition.WITHDRAWN, Juror.Attrition.DISMISSED}:
        raise JuryError("attrition is 'withdrawn' or 'dismissed'")
    if not reason.strip():
        raise JuryError("attrition needs a reason")
    if juror.attrition_status != Juror.Attrition.ACTIVE:
        raise JuryError(f"{juror} is already {juror.attrition_status}")
    juror.attrition_status = status
    juror.attrition_reason = reason.strip()
    juror.attrition_at = timezone.now()
    juror.save(update_fields=["attrition_status", "attrition_reason", "attrition_at"])
    for member in juror.memberships.select_related("panel__round"):
        entry_append(
            kind="jury_assignment",
            subject=_subject(member.panel.round),
            payload={
                "record": "juror_attrition",
                "panel": member.panel.kind,
                "juror": juror.public_id,
                "status": status,
                "actor": actor,
            },
        )
    return juror


# ---------------------------------------------------------------------------
# Panels and conflicts


def panel_problems(round_: Round, kind: str) -> list[str]:
    """Why the round cannot have a ``kind`` panel: the definition's ``jury.panels`` and the
    duration class's evaluation (1- and 2-minute films are judged by public votes)."""
    jury = round_.protocol.jury
    if not jury:
        return [f"{round_.protocol.key} defines no jury"]
    problems = []
    if kind not in jury["panels"]:
        problems.append(f"{round_.protocol.key} has only these panels: {', '.join(jury['panels'])}")
    evaluation = round_.protocol.evaluation(round_.duration_class)
    if evaluation not in {"jury", "scorecard"}:
        problems.append(f"{round_.duration_class} films are judged by {evaluation}, not by a jury")
    return problems


@transaction.atomic
def panel_create(*, round_: Round, kind: str) -> Panel:
    """An audience or craft panel, as the definition allows (idempotent)."""
    round_ = _locked(Round, round_.pk)
    problems = panel_problems(round_, kind)
    if problems:
        raise JuryError(problems)
    panel, _ = Panel.objects.get_or_create(round=round_, kind=kind)
    return panel


def _entrants(round_: Round) -> list[conflict_rules.Entrant]:
    entries = Entry.objects.filter(round=round_).select_related("system_version__system")
    return [
        conflict_rules.Entrant(
            label=e.label,
            system=e.system_version.system.name,
            vendor=e.system_version.system.vendor,
        )
        for e in entries
    ]


def member_conflicts(member: PanelMember) -> list[conflict_rules.Conflict]:
    """The conflicts that exclude ``member`` from its round (protocol ``excluded_relationships``
    against each entrant's system name and vendor)."""
    round_ = member.panel.round
    affiliations = [
        conflict_rules.Affiliation(party=a.party, relationship=a.relationship)
        for a in member.juror.affiliations.all()
    ]
    return conflict_rules.find_conflicts(
        affiliations,
        _entrants(round_),
        excluded_relationships=jury_rules(round_)["excluded_relationships"],
    )


def _exclude(
    member: PanelMember, *, code: str, detail: str, public: dict[str, Any], actor: str
) -> None:
    entry = entry_append(
        kind="jury_assignment",
        subject=_subject(member.panel.round),
        payload={
            "record": "juror_excluded",
            "panel": member.panel.kind,
            "juror": member.juror.public_id,
            "reason": code,
            **public,
            "actor": actor,
        },
    )
    member.status = PanelMember.Status.EXCLUDED
    member.exclusion_code = code
    member.exclusion_detail = detail
    member.excluded_at = timezone.now()
    member.log_index = entry.index
    member.save(
        update_fields=["status", "exclusion_code", "exclusion_detail", "excluded_at", "log_index"]
    )


def _apply_conflicts(member: PanelMember, *, actor: str) -> bool:
    if member.status != PanelMember.Status.ACTIVE:
        return False
    found = member_conflicts(member)
    if not found:
        return False
    detail = "; ".join(
        f"{c.relationship} of {c.party} (the {c.matched} of entrant {c.entrant_label})"
        for c in found
    )
    # The public record names the relationship only: which entrant it concerns would tell
    # readers something about identities before the reveal.
    public = {"relationships": sorted({c.relationship for c in found})}
    _exclude(member, code=PanelMember.Exclusion.CONFLICT, detail=detail, public=public, actor=actor)
    return True


@transaction.atomic
def panel_member_add(*, panel: Panel, juror: Juror, actor: str) -> PanelMember:
    """Seat a juror on a panel; a conflicted juror is excluded at once, with the reason logged.

    The roster closes when the jury plan is frozen: the counterbalanced design is drawn over
    the roster as it stands then.
    """
    panel = _locked(Panel, panel.pk)
    plan = JuryPlan.objects.filter(round_id=panel.round_id).first()
    if plan is not None and plan.is_frozen:
        raise JuryError("the jury plan is frozen: the roster is closed")
    if juror.attrition_status != Juror.Attrition.ACTIVE:
        raise JuryError(f"{juror} is {juror.attrition_status}")
    member = PanelMember.objects.create(panel=panel, round_id=panel.round_id, juror=juror)
    _apply_conflicts(member, actor=actor)
    return member


@transaction.atomic
def panel_member_exclude(*, member: PanelMember, reason: str, actor: str) -> PanelMember:
    """Staff exclude a juror from a round by hand, with a private reason (logged by code)."""
    member = _locked(PanelMember, member.pk)
    if member.status != PanelMember.Status.ACTIVE:
        raise JuryError(f"{member} is already excluded")
    if not reason.strip():
        raise JuryError("an exclusion needs a reason")
    _exclude(
        member, code=PanelMember.Exclusion.STAFF, detail=reason.strip(), public={}, actor=actor
    )
    return member


@transaction.atomic
def round_conflicts_apply(*, round_: Round, actor: str) -> list[PanelMember]:
    """Re-check every active juror of the round against its entrants; return the newly
    excluded memberships."""
    excluded = []
    for member in PanelMember.objects.filter(round=round_, status=PanelMember.Status.ACTIVE):
        member = _locked(PanelMember, member.pk)
        if _apply_conflicts(member, actor=actor):
            excluded.append(member)
    return excluded


# ---------------------------------------------------------------------------
# The jury plan


def plan_scale(round_: Round) -> scoring.ScoreScale | None:
    """The definition's score scale, when the protocol fixes one (Tovaki)."""
    rules = round_.protocol.scoring
    if rules and rules.get("scale"):
        return scoring.ScoreScale.from_definition(rules["scale"])
    return None


# AI Duel's protocol fixes no score scale; staff choose one before screening (it is frozen and
# logged with the anchors). This is only the form's starting value.
SUGGESTED_SCALE = scoring.ScoreScale(Decimal(1), Decimal(5), Decimal(1))


@transaction.atomic
def jury_plan_create(
    *,
    round_: Round,
    session_cap: timedelta,
    break_length: timedelta,
    between_sessions: timedelta,
    daily_max: timedelta,
    first_day: date,
    day_start: time,
    timezone_name: str = "UTC",
    attention_min_correct: int = 1,
    anchors: Mapping[str, Mapping[str, str]] | None = None,
    scale: scoring.ScoreScale | None = None,
) -> JuryPlan:
    """Create a round's (draft) jury plan. For a protocol with a fixed scale (Tovaki) the scale
    comes from the definition and a different one is refused."""
    round_ = _locked(Round, round_.pk)
    jury_rules(round_)
    fixed = plan_scale(round_)
    if fixed is not None and scale is not None and scale != fixed:
        raise JuryError(f"{round_.protocol.key} fixes the scale at {fixed.to_json()}")
    chosen = fixed or scale or SUGGESTED_SCALE
    return JuryPlan.objects.create(
        round=round_,
        session_cap=session_cap,
        break_length=break_length,
        between_sessions=between_sessions,
        daily_max=daily_max,
        first_day=first_day,
        day_start=day_start,
        timezone=timezone_name,
        attention_min_correct=attention_min_correct,
        score_min=chosen.minimum,
        score_max=chosen.maximum,
        score_step=chosen.step,
        anchors=dict(anchors)
        if anchors is not None
        else scoring.anchors_template(round_.protocol.quality_dimensions, chosen),
    )


def jury_plan_initial() -> dict[str, Any]:
    """Starting values of the admin's plan form (staff edit them; nothing here is a protocol
    rule: the protocol asks for fixed breaks and a daily maximum without fixing them)."""
    return {
        "session_cap": timedelta(hours=2),
        "break_length": timedelta(minutes=15),
        "between_sessions": timedelta(minutes=30),
        "daily_max": timedelta(hours=6),
        "first_day": timezone.localdate() + timedelta(days=1),
        "day_start": time(10, 0),
        "timezone": "UTC",
        "attention_min_correct": 1,
        "score_min": SUGGESTED_SCALE.minimum,
        "score_max": SUGGESTED_SCALE.maximum,
        "score_step": SUGGESTED_SCALE.step,
    }


def jury_plan_draft_defaults(*, plan: JuryPlan) -> None:
    """Fill a draft plan before it is saved: a protocol's fixed scale (Tovaki) replaces any
    other, and an empty anchor sheet becomes the template of the protocol's dimensions."""
    if plan.is_frozen:
        return
    fixed = plan_scale(plan.round)
    if fixed is not None:
        plan.score_min, plan.score_max, plan.score_step = fixed.minimum, fixed.maximum, fixed.step
    if not plan.anchors:
        plan.anchors = scoring.anchors_template(
            plan.round.protocol.quality_dimensions, scale_of(plan)
        )


def scale_of(plan: JuryPlan) -> scoring.ScoreScale:
    return scoring.ScoreScale(
        Decimal(plan.score_min), Decimal(plan.score_max), Decimal(plan.score_step)
    )


def schedule_rules(plan: JuryPlan) -> schedules.ScheduleRules:
    """The plan's schedule rules, with ``separate_sessions`` from the definition's duration
    class (120-minute entries)."""
    round_ = plan.round
    klass = round_.protocol.duration_class(round_.duration_class)
    return schedules.ScheduleRules(
        session_cap_s=plan.session_cap.total_seconds(),
        break_s=plan.break_length.total_seconds(),
        between_sessions_s=plan.between_sessions.total_seconds(),
        daily_max_s=plan.daily_max.total_seconds(),
        separate_sessions=bool(klass.get("separate_sessions", False)),
    )


def _question_problems(question: AttentionQuestion) -> list[str]:
    choices = question.choices
    if (
        not isinstance(choices, list)
        or len(choices) < 2
        or not all(isinstance(c, str) and c.strip() for c in choices)
    ):
        return [f"question {question.pk}: needs at least two non-empty answer choices"]
    if not 0 <= question.correct_choice < len(choices):
        return [f"question {question.pk}: the correct choice is not one of its choices"]
    return []


def jury_plan_problems(plan: JuryPlan) -> list[str]:
    """Why the plan cannot be frozen yet (empty when it can)."""
    round_ = plan.round
    protocol = round_.protocol
    jury = jury_rules(round_)
    problems: list[str] = []
    if round_.state not in {Round.State.OPEN, Round.State.JUDGING}:
        problems.append(f"round {round_.slug} is {round_.state}: plan the jury while it is open")
    try:
        schedule_rules(plan)
    except schedules.ScheduleError as exc:
        problems.append(str(exc))
    try:
        ZoneInfo(plan.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(f"unknown time zone {plan.timezone!r}")
    try:
        scale = scale_of(plan)
    except scoring.InvalidScorecard as exc:
        return [*problems, f"score scale: {exc}"]
    fixed = plan_scale(round_)
    if fixed is not None and scale != fixed:
        problems.append(f"{protocol.key} fixes the scale at {fixed.to_json()}")
    problems += scoring.anchors_problems(
        plan.anchors, dimensions=protocol.quality_dimensions, scale=scale
    )
    runs = rankable_runs(round_)
    if not runs:
        problems.append("the round has no rankable film to judge yet")
    packages = {run.package_id for run in runs}
    for package in InputPackage.objects.filter(pk__in=packages):
        questions = list(package.attention_questions.all())
        if len(questions) < plan.attention_min_correct:
            problems.append(
                f"package {package.prompt_key}: {len(questions)} story question(s), the "
                f"attention rule needs {plan.attention_min_correct}"
            )
        for question in questions:
            problems += _question_problems(question)
    panels = list(round_.panels.all())
    if not panels:
        problems.append("the round has no panel")
    reviewers = jury.get("reviewers")
    for panel in panels:
        active = panel.members.filter(
            status=PanelMember.Status.ACTIVE, juror__attrition_status=Juror.Attrition.ACTIVE
        ).count()
        if active == 0:
            problems.append(f"the {panel.kind} panel has no active juror")
        if reviewers is not None and active != reviewers:
            problems.append(
                f"{protocol.key} needs exactly {reviewers} reviewers; the {panel.kind} panel "
                f"has {active}"
            )
    return problems


def _question_commitments(round_: Round) -> dict[str, str]:
    out = {}
    for package in round_.packages.prefetch_related("attention_questions"):
        questions = [
            {"text": q.text, "choices": q.choices, "correct_choice": q.correct_choice}
            for q in package.attention_questions.all()
        ]
        if questions:
            out[package.prompt_key] = canonical_sha256(questions)
    return out


def plan_record(plan: JuryPlan) -> dict[str, Any]:
    """The published record of a jury plan (what the plan's SHA-256 covers)."""
    round_ = plan.round
    rules = schedule_rules(plan)
    counts = {len(p.attention_questions.all()) for p in round_.packages.all()}
    rule = scoring.AttentionRule(plan.attention_min_correct)
    anchors = scoring.canonical_anchors(plan.anchors)
    return {
        "round": round_.slug,
        "protocol": round_.protocol_version.key,
        "protocol_sha256": round_.protocol_version.sha256,
        "schedule": {
            "session_cap_s": rules.session_cap_s,
            "break_s": rules.break_s,
            "between_sessions_s": rules.between_sessions_s,
            "daily_max_s": rules.daily_max_s,
            "separate_sessions": rules.separate_sessions,
            "first_day": plan.first_day.isoformat(),
            "day_start": plan.day_start.isoformat(),
            "timezone": plan.timezone,
        },
        "scale": scale_of(plan).to_json(),
        "anchors": anchors,
        "anchors_sha256": scoring.anchors_sha256(anchors),
        "attention": {
            "min_correct": plan.attention_min_correct,
            "statement": rule.statement(counts.pop() if len(counts) == 1 else None),
            "questions_sha256": _question_commitments(round_),
        },
        "panels": sorted(p.kind for p in round_.panels.all()),
    }


@transaction.atomic
def jury_plan_freeze(*, plan: JuryPlan, actor: str) -> JuryPlan:
    """Freeze the plan before screening: schedule rules, scale, anchors (hashed), the attention
    rule (stated and published) and the story questions (committed by hash); close the
    roster; draw the seed of the viewing orders. One ``jury_assignment`` log entry."""
    plan = _locked(JuryPlan, plan.pk)
    if plan.is_frozen:
        return plan
    problems = jury_plan_problems(plan)
    if problems:
        raise JuryError(problems)
    record = plan_record(plan)
    plan.anchors = record["anchors"]
    plan.anchors_sha256 = record["anchors_sha256"]
    plan.attention_statement = record["attention"]["statement"]
    plan.plan_sha256 = canonical_sha256(record)
    # Drawn now, published with the order schedule: unpredictable before the freeze, and
    # anyone can re-derive every juror's order from it afterwards.
    plan.order_seed = secrets.token_hex(32)
    # Kept private until scores are locked (Tovaki disclosure schedule: the task-local mapping
    # is withheld until then); the order schedule logs a commitment to it.
    plan.task_label_seed = secrets.token_hex(32)
    entry = entry_append(
        kind="jury_assignment",
        subject=_subject(plan.round),
        payload={"record": "jury_plan", "plan_sha256": plan.plan_sha256, **record, "actor": actor},
    )
    now = timezone.now()
    AttentionQuestion.objects.filter(package__round=plan.round, frozen_at__isnull=True).update(
        frozen_at=now
    )
    plan.frozen_at = now
    plan.log_index = entry.index
    plan.save(
        update_fields=[
            "anchors",
            "anchors_sha256",
            "attention_statement",
            "plan_sha256",
            "order_seed",
            "task_label_seed",
            "frozen_at",
            "log_index",
        ]
    )
    return plan


# ---------------------------------------------------------------------------
# Films and screening sessions


def proxy_duration_s(media_file) -> float:
    """The proxy's real duration, probed with ffprobe (never trusted from a client or copied
    from the original's record). Call outside transactions."""
    from media_pipeline.probe import probe_file
    from media_pipeline.storage import local_copy

    with local_copy(media_file.storage_name, expected_sha256=media_file.sha256) as path:
        report = probe_file(str(path), ffprobe=settings.DUEL_FFPROBE)
    durations = [report.duration_s] + [s.duration_s for s in report.video_streams]
    found = [d for d in durations if d]
    if not found:
        raise JuryError(f"the proxy {media_file.pk} has no duration")
    return float(found[0])


def jury_films_register(*, round_: Round) -> list[JuryFilm]:
    """Register the round's rankable films for the jury (once): probe each proxy's duration
    first, outside any transaction, then record them; Tovaki films get task-local labels
    A-D drawn inside each task from the frozen plan's seed."""
    existing = list(JuryFilm.objects.filter(round=round_).select_related("package", "entry", "run"))
    if existing:
        return existing
    runs = rankable_runs(round_)
    if not runs:
        raise JuryError("the round has no rankable film")
    durations = {run.pk: proxy_duration_s(run.proxy_file) for run in runs}
    with transaction.atomic():
        round_ = _locked(Round, round_.pk)
        if JuryFilm.objects.filter(round=round_).exists():
            return list(
                JuryFilm.objects.filter(round=round_).select_related("package", "entry", "run")
            )
        plan = JuryPlan.objects.filter(round=round_, frozen_at__isnull=False).first()
        if plan is None:
            raise JuryError("freeze the jury plan first")
        labels: dict[int, str] = {}
        if _uses_task_labels(round_):
            alphabet = round_.protocol.definition["controls"]["task_local_anonymous_labels"]
            by_package: dict[int, list[str]] = defaultdict(list)
            for run in runs:
                by_package[run.package_id].append(str(run.pk))
            for package_id, items in sorted(by_package.items()):
                rng = schedules.seeded_rng(f"{plan.task_label_seed}|{package_id}")
                drawn = scoring.task_local_labels(items, alphabet, rng=rng)
                labels.update({int(k): v for k, v in drawn.items()})
        films = [
            JuryFilm(
                round=round_,
                run=run,
                package=run.package,
                entry=run.entry,
                task_label=labels.get(run.pk, ""),
                duration_s=durations[run.pk],
                proxy_sha256=run.proxy_file.sha256,
            )
            for run in runs
        ]
        JuryFilm.objects.bulk_create(films)
    return list(JuryFilm.objects.filter(round=round_).select_related("package", "entry", "run"))


def _day_start(plan: JuryPlan, day: int) -> datetime:
    zone = ZoneInfo(plan.timezone)
    return datetime.combine(plan.first_day + timedelta(days=day), plan.day_start, tzinfo=zone)


def sessions_plan(*, round_: Round, actor: str) -> list[ScreeningSession]:
    """Plan every active juror's sessions from the frozen plan.

    Per panel (audience and craft are separate juries), jurors are dealt to the rows of
    Williams squares over the films of each prompt and over the prompts
    (:func:`juries.schedules.plan_viewing_orders`, seeded by the plan's ``order_seed``), and
    each juror's order is cut into sessions with fixed breaks, the session cap, the daily
    maximum and separate sessions for 120-minute entries. Logged: one ``order_schedule`` and
    one ``jury_assignment`` entry per panel.
    """
    films = jury_films_register(round_=round_)
    with transaction.atomic():
        round_ = _locked(Round, round_.pk)
        plan = JuryPlan.objects.select_for_update(no_key=True).get(round=round_)
        if not plan.is_frozen:
            raise JuryError("freeze the jury plan first")
        if ScreeningSession.objects.filter(round=round_).exists():
            raise JuryError(f"sessions of {round_.slug} are already planned")
        rules = schedule_rules(plan)
        # The design is drawn over the anonymous labels jurors see (unique inside a prompt),
        # so the published seed reproduces the published orders and tells nothing more.
        by_key = {(f.package.prompt_key, f.display_label): f for f in films}
        blocks: dict[str, list[str]] = defaultdict(list)
        for film in films:
            blocks[film.package.prompt_key].append(film.display_label)
        from juries.selectors import task_label_record

        label_commitment = (
            canonical_sha256(task_label_record(round_)) if _uses_task_labels(round_) else None
        )
        created: list[ScreeningSession] = []
        now = timezone.now()
        for panel in round_.panels.order_by("kind"):
            members = list(
                panel.members.filter(
                    status=PanelMember.Status.ACTIVE,
                    juror__attrition_status=Juror.Attrition.ACTIVE,
                ).select_related("juror")
            )
            jurors = {m.juror.public_id: m.juror for m in members}
            seed = f"{plan.order_seed}|{panel.kind}"
            design = schedules.plan_viewing_orders(list(jurors), blocks, seed=seed)
            published_orders = []
            assignments = []
            for pid in design.juror_order:
                juror = jurors[pid]
                order = [by_key[key] for key in design.orders[pid]]
                try:
                    planned = schedules.plan_sessions(
                        [(str(f.pk), f.duration_s) for f in order], rules
                    )
                except schedules.ScheduleError as exc:
                    raise JuryError(str(exc)) from None
                film_of = {str(f.pk): f for f in order}
                order_index = 0
                sessions_out = []
                for index, planned_session in enumerate(planned):
                    day_start = _day_start(plan, planned_session.day)
                    session = ScreeningSession.objects.create(
                        round=round_,
                        panel=panel,
                        juror=juror,
                        index=index,
                        day=planned_session.day,
                        scheduled_start=day_start + timedelta(seconds=planned_session.start_s),
                        scheduled_end=day_start + timedelta(seconds=planned_session.end_s),
                        break_length=plan.break_length,
                    )
                    created.append(session)
                    for planned_film in planned_session.films:
                        Viewing.objects.create(
                            session=session,
                            round=round_,
                            panel=panel,
                            juror=juror,
                            film=film_of[planned_film.key],
                            order_index=order_index,
                            assigned_at=now,
                        )
                        order_index += 1
                    sessions_out.append(
                        {
                            "index": index,
                            "day": planned_session.day,
                            "start": session.scheduled_start.isoformat(),
                            "end": session.scheduled_end.isoformat(),
                            "films": len(planned_session.films),
                        }
                    )
                published_orders.append(
                    {
                        "juror": pid,
                        "order": [
                            {"prompt": f.package.prompt_key, "film": f.display_label} for f in order
                        ],
                    }
                )
                assignments.append({"juror": pid, "sessions": sessions_out})
            bound = max(
                (
                    schedules.order_imbalance_bound(len(jurors), len(items))
                    for items in blocks.values()
                ),
                default=0,
            )
            entry_append(
                kind="order_schedule",
                subject=_subject(round_),
                payload={
                    "panel": panel.kind,
                    "design": "williams",
                    "seed": seed,
                    "balanced": design.balanced,
                    "order_imbalance_bound": bound,
                    "task_label_commitment_sha256": label_commitment,
                    "jurors": published_orders,
                    "actor": actor,
                },
            )
            excluded = panel.members.exclude(
                status=PanelMember.Status.ACTIVE, juror__attrition_status=Juror.Attrition.ACTIVE
            ).select_related("juror")
            entry_append(
                kind="jury_assignment",
                subject=_subject(round_),
                payload={
                    "record": "sessions",
                    "panel": panel.kind,
                    "plan_sha256": plan.plan_sha256,
                    "jurors": assignments,
                    "not_seated": [
                        {
                            "juror": m.juror.public_id,
                            "reason": m.exclusion_code or m.juror.attrition_status,
                        }
                        for m in excluded
                    ],
                    "actor": actor,
                },
            )
    return created


# ---------------------------------------------------------------------------
# Screening: start, heartbeats, attention, scorecards


def _own(viewing: Viewing, juror: Juror) -> None:
    if viewing.juror_id != juror.pk:
        raise PermissionDenied("this viewing is assigned to another juror")


def previous_viewing(viewing: Viewing) -> Viewing | None:
    return (
        Viewing.objects.filter(
            round_id=viewing.round_id,
            juror_id=viewing.juror_id,
            order_index__lt=viewing.order_index,
        )
        .order_by("-order_index")
        .select_related("session")
        .first()
    )


def _day_bounds(plan: JuryPlan, moment: datetime) -> tuple[datetime, datetime]:
    zone = ZoneInfo(plan.timezone)
    local = moment.astimezone(zone)
    start = datetime.combine(local.date(), time(0), tzinfo=zone)
    return start, start + timedelta(days=1)


def viewing_start_blockers(viewing: Viewing, *, now: datetime | None = None) -> list[str]:
    """Why the juror may not start this film now (empty when they may): screening happens
    while the round is judging, in the assigned order, not before the session's scheduled
    start, after the fixed break, and within the daily maximum."""
    now = now or timezone.now()
    round_ = viewing.round
    problems = []
    if round_.state != Round.State.JUDGING:
        problems.append("screening is closed: the round is not in judging")
    member = PanelMember.objects.filter(
        round_id=viewing.round_id, juror_id=viewing.juror_id
    ).first()
    if member is None or member.status != PanelMember.Status.ACTIVE:
        problems.append("you are not an active juror of this round")
    if viewing.juror.attrition_status != Juror.Attrition.ACTIVE:
        problems.append("you are no longer an active juror")
    session = viewing.session
    if now < session.scheduled_start:
        problems.append(f"the session starts at {session.scheduled_start.isoformat()}")
    previous = previous_viewing(viewing)
    if previous is not None:
        if not previous.is_complete:
            problems.append("watch the previous film to its end first")
        elif not Scorecard.objects.filter(viewing=previous).exists():
            problems.append("submit the previous film's scorecard first")
        elif previous.session_id == viewing.session_id and now < (
            previous.completed_at + session.break_length
        ):
            problems.append("the fixed break is not over")
    plan = JuryPlan.objects.get(round_id=viewing.round_id)
    start, end = _day_bounds(plan, now)
    screened = sum(
        Viewing.objects.filter(
            juror_id=viewing.juror_id, started_at__gte=start, started_at__lt=end
        ).values_list("film__duration_s", flat=True)
    )
    if screened + viewing.film.duration_s > plan.daily_max.total_seconds():
        problems.append("this film would pass today's maximum screening time")
    return problems


def viewing_available_at(viewing: Viewing) -> datetime | None:
    """When the fixed break (or the session start) lets this film start; ``None`` when it
    waits for something else (the previous film, its scorecard)."""
    times = [viewing.session.scheduled_start]
    previous = previous_viewing(viewing)
    if previous is not None:
        if not previous.is_complete:
            return None
        if previous.session_id == viewing.session_id:
            times.append(previous.completed_at + viewing.session.break_length)
    return max(times)


@transaction.atomic
def viewing_start(*, viewing: Viewing, juror: Juror, now: datetime | None = None) -> Viewing:
    """The juror starts an assigned film (idempotent once started)."""
    viewing = _locked(Viewing, viewing.pk)
    _own(viewing, juror)
    if viewing.started_at is not None:
        return viewing
    problems = viewing_start_blockers(viewing, now=now)
    if problems:
        raise JuryError(problems)
    viewing.started_at = now or timezone.now()
    viewing.save(update_fields=["started_at"])
    return viewing


def proof_rules(round_: Round) -> playback.ProofRules:
    return playback.ProofRules.from_jury(jury_rules(round_))


def _played_ranges(value: Any) -> list[list[float]]:
    out = []
    if isinstance(value, list):
        for pair in value[:200]:
            if isinstance(pair, list | tuple) and len(pair) == 2:
                try:
                    out.append([round(float(pair[0]), 3), round(float(pair[1]), 3)])
                except (TypeError, ValueError):
                    continue
    return out


@transaction.atomic
def viewing_heartbeat(
    *,
    viewing: Viewing,
    juror: Juror,
    beat: playback.Heartbeat,
    client_played: Any = None,
    now: datetime | None = None,
) -> tuple[str, playback.Verdict]:
    """Apply one playback heartbeat against the server clock; complete the viewing when the
    protocol's playback (``min_playback`` and the ending) is proven. Returns the heartbeat's
    outcome and the verdict so far."""
    now = now or timezone.now()
    viewing = _locked(Viewing, viewing.pk)
    _own(viewing, juror)
    if viewing.started_at is None:
        raise JuryError("start the film first")
    rules = proof_rules(viewing.round)
    duration = viewing.film.duration_s
    state = playback.ProofState.from_json(viewing.proof)
    if viewing.completed_at is not None:
        return "complete", playback.proof_verdict(state, duration_s=duration, rules=rules)
    if viewing.round.state != Round.State.JUDGING:
        raise JuryError("screening is closed: the round is not in judging")
    outcome = playback.proof_apply(
        state, beat, server_s=now.timestamp(), duration_s=duration, rules=rules
    )
    verdict = playback.proof_verdict(state, duration_s=duration, rules=rules)
    if outcome != playback.STALE:
        PlaybackBeat.objects.create(
            viewing=viewing,
            seq=beat.seq,
            position_s=beat.position_s if math.isfinite(beat.position_s) else -1.0,
            rate=beat.rate,
            paused=beat.paused,
            muted=beat.muted,
            outcome=outcome,
            received_at=now,
        )
    viewing.proof = state.to_json()
    viewing.watched_s = verdict.watched_s
    viewing.coverage = verdict.coverage
    viewing.reached_ending = verdict.reached_ending
    viewing.last_beat_at = now
    fields = ["proof", "watched_s", "coverage", "reached_ending", "last_beat_at"]
    if client_played is not None:
        viewing.client_played = _played_ranges(client_played)
        fields.append("client_played")
    if verdict.complete:
        viewing.completed_at = now
        fields.append("completed_at")
    viewing.save(update_fields=fields)
    return outcome, verdict


def attention_questions_for(viewing: Viewing) -> list[AttentionQuestion]:
    """The film's story questions frozen with the plan (a question added later is never
    asked: the rule and its questions were committed before screening)."""
    return list(
        AttentionQuestion.objects.filter(
            package_id=viewing.film.package_id, frozen_at__isnull=False
        ).order_by("id")
    )


@transaction.atomic
def attention_answers_submit(*, viewing: Viewing, juror: Juror, answers: Mapping[int, int]) -> int:
    """Record the juror's answers to the film's story questions, once; return how many are
    correct. The juror is not told (the rule is published; answers never enter a score)."""
    viewing = _locked(Viewing, viewing.pk)
    _own(viewing, juror)
    if not viewing.is_complete:
        raise JuryError("answer the questions after watching the film to its end")
    if AttentionAnswer.objects.filter(viewing=viewing).exists():
        raise JuryError("the answers for this film are already recorded")
    questions = attention_questions_for(viewing)
    missing = [q.pk for q in questions if q.pk not in answers]
    if missing:
        raise JuryError("answer every story question")
    correct = 0
    for question in questions:
        choice = int(answers[question.pk])
        if not 0 <= choice < len(question.choices):
            raise JuryError("an answer is not one of the choices")
        is_correct = choice == question.correct_choice
        correct += int(is_correct)
        AttentionAnswer.objects.create(
            viewing=viewing, question=question, choice=choice, correct=is_correct
        )
    return correct


def holistic_partners(viewing: Viewing) -> list[Viewing]:
    """Earlier films of the same prompt in this juror's order: the scorecard of this film
    carries one holistic paired choice against each (protocol: "Require one holistic paired
    choice"), so every pair of a prompt's films gets exactly one choice from every juror."""
    if not viewing.round.protocol.definition.get("holistic_paired_choice"):
        return []
    return list(
        Viewing.objects.filter(
            round_id=viewing.round_id,
            juror_id=viewing.juror_id,
            film__package_id=viewing.film.package_id,
            order_index__lt=viewing.order_index,
        )
        .select_related("film__run", "film__entry")
        .order_by("order_index")
    )


@transaction.atomic
def scorecard_save(
    *,
    viewing: Viewing,
    juror: Juror,
    scores: Mapping[str, Any],
    choices: Mapping[str, str] | None = None,
    lock: bool = False,
    actor: str = "juror",
) -> Scorecard:
    """Save (and optionally lock) the juror's scorecard for a watched film.

    ``scores``: one score per protocol dimension, on the frozen plan's scale (Tovaki: 0 to 5
    in 0.5 steps). ``choices``: for each earlier film of the same prompt (keyed by that
    viewing's public id), ``"earlier"`` or ``"this"``. A locked scorecard is refused any
    change, here and in the database.
    """
    viewing = _locked(Viewing, viewing.pk)
    _own(viewing, juror)
    round_ = viewing.round
    if round_.state != Round.State.JUDGING:
        raise JuryError("scorecards are accepted while the round is in judging")
    if not viewing.is_complete:
        raise JuryError("a scorecard needs the film watched to its end (playback proof)")
    if (
        attention_questions_for(viewing)
        and not AttentionAnswer.objects.filter(viewing=viewing).exists()
    ):
        raise JuryError("answer the story questions first")
    plan = JuryPlan.objects.get(round=round_)
    try:
        valid = scoring.validate_scores(
            scores, dimensions=round_.protocol.quality_dimensions, scale=scale_of(plan)
        )
    except scoring.InvalidScorecard as exc:
        raise JuryError(str(exc)) from None
    partners = holistic_partners(viewing)
    given = dict(choices or {})
    expected = {str(p.public_id): p for p in partners}
    if set(given) != set(expected):
        raise JuryError(
            "make one holistic choice against each earlier film of this prompt"
            if partners
            else "this protocol has no holistic paired choice"
        )
    paired = []
    for key, partner in expected.items():
        if given[key] not in {"earlier", "this"}:
            raise JuryError("a holistic choice is 'earlier' or 'this'")
        paired.append(
            {
                "run_a": str(partner.film.run.public_id),
                "run_b": str(viewing.film.run.public_id),
                "outcome": "a" if given[key] == "earlier" else "b",
            }
        )
    card = Scorecard.objects.select_for_update(no_key=True).filter(viewing=viewing).first()
    if card is not None and card.is_locked:
        raise JuryError("this scorecard is locked and cannot change")
    score_text = {d: scoring.text(v) for d, v in valid.items()}
    if card is None:
        card = Scorecard.objects.create(
            viewing=viewing,
            round=round_,
            panel_id=viewing.panel_id,
            juror=juror,
            film=viewing.film,
            scores=score_text,
            choices=paired,
            anchors_sha256=plan.anchors_sha256,
        )
    else:
        card.scores = score_text
        card.choices = paired
        card.save(update_fields=["scores", "choices", "updated_at"])
    if lock:
        _lock(card, actor=actor)
    return card


def scorecard_record_of(card: Scorecard) -> dict[str, Any]:
    """The canonical record a scorecard's SHA-256 covers."""
    return scoring.scorecard_record(
        scorecard=str(card.public_id),
        round_slug=card.round.slug,
        juror=card.juror.public_id,
        panel=card.panel.kind,
        prompt=card.film.package.prompt_key,
        run=str(card.film.run.public_id),
        scores={d: Decimal(v) for d, v in card.scores.items()},
        choices=card.choices,
        anchors_sha256=card.anchors_sha256,
    )


def _lock(card: Scorecard, *, actor: str) -> None:
    digest = canonical_sha256(scorecard_record_of(card))
    entry = entry_append(
        kind="scorecard_lock",
        subject=_subject(card.round),
        payload={
            "scorecard": str(card.public_id),
            "juror": card.juror.public_id,
            "panel": card.panel.kind,
            "prompt": card.film.package.prompt_key,
            "film": card.film.display_label,
            "sha256": digest,
            "actor": actor,
        },
    )
    card.sha256 = digest
    card.log_index = entry.index
    card.locked_at = timezone.now()
    card.save(update_fields=["sha256", "log_index", "locked_at", "updated_at"])


@transaction.atomic
def scorecard_lock(*, scorecard: Scorecard, actor: str) -> Scorecard:
    """Hash-lock one scorecard and commit its hash to the log (idempotent)."""
    card = _locked(Scorecard, scorecard.pk)
    if not card.is_locked:
        _lock(card, actor=actor)
    return card


@transaction.atomic
def round_scorecards_lock(*, round_: Round, actor: str) -> int:
    """Lock every draft scorecard of the round (staff, before the reveal); return how many."""
    count = 0
    for card in Scorecard.objects.filter(round=round_, locked_at__isnull=True).order_by("pk"):
        card = _locked(Scorecard, card.pk)
        if not card.is_locked:
            _lock(card, actor=actor)
            count += 1
    return count


# ---------------------------------------------------------------------------
# Segment results (published apart from full-film results)


def _windows_log(round_: Round, kind: str, films: list[dict[str, Any]], actor: str):
    return entry_append(
        kind="segment_windows",
        subject=_subject(round_),
        payload={
            "kind": kind,
            "protocol": round_.protocol_version.key,
            "duration_class": round_.duration_class,
            "films": films,
            "actor": actor,
        },
    )


@transaction.atomic
def segment_windows_publish(*, round_: Round, actor: str) -> list[SegmentWindow]:
    """Publish the deterministic within-segment windows of every jury film (protocol: Public
    segment result), computed by ``media_pipeline.segments.select_segments`` from the proxy's
    duration, the prompt hash and the protocol version; one ``segment_windows`` log entry.
    Idempotent."""
    from media_pipeline.segments import NoSegmentSchedule, select_segments

    round_ = _locked(Round, round_.pk)
    kind = SegmentWindow.Kind.WITHIN_SEGMENT
    existing = list(SegmentWindow.objects.filter(round=round_, kind=kind))
    if existing:
        return existing
    films = list(JuryFilm.objects.filter(round=round_).select_related("package", "entry", "run"))
    if not films:
        raise JuryError("plan the jury's films first")
    published, rows = [], []
    for film in films:
        try:
            windows = select_segments(
                film.duration_s,
                round_.duration_class,
                film.package.sha256,
                round_.protocol_version.key,
            )
        except NoSegmentSchedule as exc:
            raise JuryError(str(exc)) from None
        published.append(
            {
                "prompt": film.package.prompt_key,
                "prompt_sha256": film.package.sha256,
                "film": film.display_label,
                "duration_s": film.duration_s,
                "windows": [[s, e] for s, e in windows],
            }
        )
        rows += [(film, i, s, e) for i, (s, e) in enumerate(windows)]
    entry = _windows_log(round_, kind, published, actor)
    created = SegmentWindow.objects.bulk_create(
        [
            SegmentWindow(
                round=round_, film=f, kind=kind, index=i, start_s=s, end_s=e, log_index=entry.index
            )
            for f, i, s, e in rows
        ]
    )
    transaction.on_commit(partial(_precut_segment_clips, round_.pk))
    return created


def _precut_segment_clips(round_id: int) -> None:
    """After commit: queue the clips' cutting. A failure here loses nothing (the windows are
    committed and a missing clip is cut when a juror first needs it), so it is only logged."""
    from juries.segment_judging import segment_clips_precut

    try:
        segment_clips_precut(round_id=round_id)
    except Exception:
        logger.exception("pre-cutting the segment clips of round %s failed", round_id)


@transaction.atomic
def continuity_excerpts_declare(
    *,
    film: JuryFilm,
    transitions_s: Sequence[float] = (),
    nonadjacent: Sequence[tuple[tuple[float, float], tuple[float, float]]] = (),
    actor: str,
) -> list[SegmentWindow]:
    """Declare continuity excerpts of one film and publish them: transition-centred excerpts
    around the declared scene boundaries (length from the definition's
    ``transition_excerpts``), and pairs of nonadjacent excerpts for character and world
    comparisons (each pair separated by a gap, inside the film)."""
    from media_pipeline.segments import (
        NoSegmentSchedule,
        transition_excerpt_length_s,
        transition_excerpts,
    )

    film = JuryFilm.objects.select_related("round", "package", "entry").get(pk=film.pk)
    round_ = _locked(Round, film.round_id)
    created: list[SegmentWindow] = []
    if transitions_s:
        try:
            length = transition_excerpt_length_s(round_.protocol_version.key)
        except NoSegmentSchedule as exc:
            raise JuryError(str(exc)) from None
        windows = transition_excerpts(film.duration_s, transitions_s, length_s=length)
        created += _declare(
            film, SegmentWindow.Kind.TRANSITION, [(w, None) for w in windows], actor
        )
    if nonadjacent:
        for first, second in nonadjacent:
            (a0, a1), (b0, b1) = sorted([tuple(first), tuple(second)])
            if not (0 <= a0 < a1 < b0 < b1 <= film.duration_s):
                raise JuryError(
                    "a nonadjacent comparison needs two excerpts inside the film with a gap "
                    "between them"
                )
        pairs = [tuple(sorted([tuple(f), tuple(s)])) for f, s in nonadjacent]
        created += _declare(film, SegmentWindow.Kind.NONADJACENT, pairs, actor)
    return created


def _declare(film: JuryFilm, kind: str, windows, actor: str) -> list[SegmentWindow]:
    start_index = SegmentWindow.objects.filter(film=film, kind=kind).count()
    published = {
        "prompt": film.package.prompt_key,
        "film": film.display_label,
        "duration_s": film.duration_s,
        "windows": [[list(a), list(b)] if b else list(a) for a, b in windows],
    }
    entry = _windows_log(film.round, kind, [published], actor)
    return SegmentWindow.objects.bulk_create(
        [
            SegmentWindow(
                round_id=film.round_id,
                film=film,
                kind=kind,
                index=start_index + i,
                start_s=a[0],
                end_s=a[1],
                second_start_s=b[0] if b else None,
                second_end_s=b[1] if b else None,
                log_index=entry.index,
            )
            for i, (a, b) in enumerate(windows)
        ]
    )


@transaction.atomic
def segment_vote_record(
    *,
    juror: Juror,
    window_a: SegmentWindow,
    window_b: SegmentWindow,
    outcome: str,
    playback: list[dict[str, Any]] | None = None,
) -> SegmentVote:
    """A juror's paired judgment of two films' windows: same round, kind, index and prompt,
    different films. Stored apart from full-film scorecards, with the playback proof of
    each clip (``playback``, a then b) that allowed the vote."""
    window_a = SegmentWindow.objects.select_related("film").get(pk=window_a.pk)
    window_b = SegmentWindow.objects.select_related("film").get(pk=window_b.pk)
    round_ = _locked(Round, window_a.round_id)
    if round_.state != Round.State.JUDGING:
        raise JuryError("segment votes are accepted while the round is in judging")
    if (
        window_a.round_id != window_b.round_id
        or window_a.kind != window_b.kind
        or window_a.index != window_b.index
        or window_a.film.package_id != window_b.film.package_id
        or window_a.film_id == window_b.film_id
    ):
        raise JuryError(
            "a segment vote compares the same window of two different films of one prompt"
        )
    if outcome not in SegmentVote.Outcome.values:
        raise JuryError("the outcome is 'a', 'b' or 'tie'")
    member = PanelMember.objects.filter(
        round=round_, juror=juror, status=PanelMember.Status.ACTIVE
    ).first()
    if member is None or juror.attrition_status != Juror.Attrition.ACTIVE:
        raise JuryError("only an active juror of the round can vote")
    return SegmentVote.objects.create(
        round=round_,
        panel_id=member.panel_id,
        juror=juror,
        window_a=window_a,
        window_b=window_b,
        outcome=outcome,
        playback=list(playback or []),
    )
