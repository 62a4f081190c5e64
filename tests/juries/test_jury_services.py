"""Jury services on the database: conflicts, the frozen plan, schedules, screening gates,
attention exclusion, scorecard locks (refused by the database itself), Tovaki rules."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from duel.canonical import canonical_sha256
from juries import selectors, services
from juries.models import (
    JuryFilm,
    PanelMember,
    Scorecard,
    ScreeningSession,
    Viewing,
)
from juries.schedules import exposure
from ledger.models import LogEntry

pytestmark = pytest.mark.django_db


def entries(kind: str) -> list[LogEntry]:
    return list(LogEntry.objects.filter(kind=kind).order_by("index"))


# ---------------------------------------------------------------------------
# Conflicts


def test_a_conflicted_juror_is_excluded_automatically_with_a_logged_reason(jury_round):
    round_ = jury_round(systems=[("Cinemator", "Acme Films"), ("Reelix", "Reel Co")])
    panel = services.panel_create(round_=round_, kind="audience")
    clean = services.juror_create(name="Clean")
    services.juror_affiliation_add(juror=clean, party="Reel Co", relationship="other", actor="t")
    employee = services.juror_create(name="Employee")
    services.juror_affiliation_add(
        juror=employee, party="  acme FILMS ", relationship="employee", actor="t"
    )
    seated = services.panel_member_add(panel=panel, juror=clean, actor="t")
    refused = services.panel_member_add(panel=panel, juror=employee, actor="t")
    assert seated.status == PanelMember.Status.ACTIVE
    assert refused.status == PanelMember.Status.EXCLUDED
    assert refused.exclusion_code == "conflict_of_interest"
    assert "employee of acme FILMS" in refused.exclusion_detail
    logged = LogEntry.objects.get(index=refused.log_index)
    assert logged.kind == "jury_assignment"
    assert logged.payload["juror"] == employee.public_id
    assert logged.payload["reason"] == "conflict_of_interest"
    assert logged.payload["relationships"] == ["employee"]
    # The public record does not say which entrant the conflict concerns.
    assert b"Acme" not in bytes(logged.entry_bytes) and b"acme" not in bytes(logged.entry_bytes)
    assert employee.name.encode() not in bytes(logged.entry_bytes)

    # A relationship declared later excludes the juror at once.
    investor = services.juror_create(name="Investor")
    member = services.panel_member_add(panel=panel, juror=investor, actor="t")
    assert member.status == PanelMember.Status.ACTIVE
    services.juror_affiliation_add(
        juror=investor, party="Reelix", relationship="investor", actor="t"
    )
    member.refresh_from_db()
    assert member.status == PanelMember.Status.EXCLUDED


@pytest.mark.parametrize("relationship", ["employee", "investor", "contractor", "affiliate"])
def test_every_excluded_relationship_from_the_definition_excludes(jury_round, relationship):
    round_ = jury_round(systems=[("Cinemator", "Acme Films"), ("Reelix", "Reel Co")])
    assert relationship in round_.protocol.jury["excluded_relationships"]
    panel = services.panel_create(round_=round_, kind="craft")
    juror = services.juror_create(name="X")
    services.juror_affiliation_add(
        juror=juror, party="Cinemator", relationship=relationship, actor="t"
    )
    assert services.panel_member_add(panel=panel, juror=juror, actor="t").status == "excluded"


def test_excluded_jurors_get_no_session_and_are_listed_as_not_seated(jury_round, plan_jury):
    round_ = jury_round(systems=[("Cinemator", "Acme Films"), ("Reelix", "Reel Co")])
    plan, seated = plan_jury(round_, jurors={"audience": 2}, freeze=False)
    conflicted = services.juror_create(name="Contractor")
    services.juror_affiliation_add(
        juror=conflicted, party="Reel Co", relationship="contractor", actor="t"
    )
    panel = round_.panels.get(kind="audience")
    services.panel_member_add(panel=panel, juror=conflicted, actor="t")
    services.jury_plan_freeze(plan=plan, actor="t")
    services.sessions_plan(round_=round_, actor="t")
    assert not ScreeningSession.objects.filter(juror=conflicted).exists()
    for juror in seated["audience"]:
        assert Viewing.objects.filter(juror=juror).count() == 2
    sessions_entry = [e for e in entries("jury_assignment") if e.payload["record"] == "sessions"]
    assert sessions_entry[-1].payload["not_seated"] == [
        {"juror": conflicted.public_id, "reason": "conflict_of_interest"}
    ]


def test_a_conflict_found_after_scoring_excludes_the_jurors_scorecards(
    jury_round, plan_jury, judging, screening
):
    round_ = jury_round(systems=[("Cinemator", "Acme Films"), ("Reelix", "Reel Co")])
    _, seated = plan_jury(round_, jurors={"audience": 2})
    judging(round_)
    late, honest = seated["audience"]
    for juror in seated["audience"]:
        screening.complete_all(juror)
    services.juror_affiliation_add(juror=late, party="Reelix", relationship="affiliate", actor="t")
    frame = selectors.scorecards_frame(round_)
    mine = frame[frame["juror"] == late.public_id]
    assert len(mine) == 2 * 8 and mine["excluded"].all()
    assert set(mine["exclusion_reason"]) == {"conflict_of_interest"}
    assert not frame[frame["juror"] == honest.public_id]["excluded"].any()
    choices = selectors.holistic_choices_frame(round_)
    assert choices[choices["juror"] == late.public_id]["excluded"].all()
    # Attrition: a dismissed juror's work is excluded too, and the dismissal is logged.
    services.juror_attrition_record(
        juror=honest, status="dismissed", reason="shared the films", actor="t"
    )
    frame = selectors.scorecards_frame(round_)
    assert set(frame[frame["juror"] == honest.public_id]["exclusion_reason"]) == {"juror_dismissed"}
    logged = [e for e in entries("jury_assignment") if e.payload["record"] == "juror_attrition"]
    assert logged[-1].payload["juror"] == honest.public_id
    assert b"shared the films" not in bytes(logged[-1].entry_bytes)


# ---------------------------------------------------------------------------
# The plan: anchors frozen, attention rule published, before screening


def test_freezing_needs_anchors_questions_and_jurors(jury_round, plan_jury):
    round_ = jury_round()
    plan, _ = plan_jury(round_, freeze=False)
    plan.anchors = {}
    plan.attention_min_correct = 3
    plan.save(update_fields=["anchors", "attention_min_correct"])
    with pytest.raises(services.JuryError) as caught:
        services.jury_plan_freeze(plan=plan, actor="t")
    text = " ".join(caught.value.messages)
    assert "story_structure_and_ending: no anchors" in text
    assert "the attention rule needs 3" in text


def test_the_frozen_plan_is_hashed_logged_and_refused_any_change(jury_round, plan_jury):
    round_ = jury_round()
    plan, _ = plan_jury(round_, schedule=False)
    logged = LogEntry.objects.get(index=plan.log_index)
    assert logged.kind == "jury_assignment" and logged.payload["record"] == "jury_plan"
    assert logged.payload["plan_sha256"] == plan.plan_sha256
    assert logged.payload["anchors"] == plan.anchors
    assert logged.payload["anchors_sha256"] == plan.anchors_sha256
    statement = logged.payload["attention"]["statement"]
    assert "fewer than 1 of the 2 questions" in statement
    assert "never enter any quality score" in statement
    with pytest.raises(DatabaseError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE juries_juryplan SET anchors = %s WHERE id = %s", ['{"x": {}}', plan.pk]
            )
    question = round_.packages.get().attention_questions.first()
    with pytest.raises(DatabaseError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE juries_attentionquestion SET correct_choice = 1 WHERE id = %s",
                [question.pk],
            )
    # The roster is closed with the plan.
    with pytest.raises(services.JuryError, match="roster is closed"):
        services.panel_member_add(
            panel=round_.panels.get(), juror=services.juror_create(name="Late"), actor="t"
        )


# ---------------------------------------------------------------------------
# Schedules and screening gates


def test_orders_are_williams_balanced_and_published_without_identities(jury_round, plan_jury):
    round_ = jury_round(entries=4, packages=1)
    plan_jury(round_, jurors={"audience": 4})
    films = {f.pk: f for f in JuryFilm.objects.filter(round=round_)}
    assert len(films) == 4
    for prompt in ("P1",):
        orders = {}
        for juror_id in Viewing.objects.values_list("juror_id", flat=True).distinct():
            orders[juror_id] = [
                v.film.entry.label
                for v in Viewing.objects.filter(juror_id=juror_id, film__package__prompt_key=prompt)
                .select_related("film__entry")
                .order_by("order_index")
            ]
        report = exposure(orders)
        assert set(report.positions.values()) == {1}  # 4 jurors, 4 films: exactly balanced
        assert set(report.adjacent.values()) == {1} and len(report.adjacent) == 12
    schedule = entries("order_schedule")[-1].payload
    assert schedule["design"] == "williams" and schedule["balanced"] is True
    assert schedule["seed"] == f"{round_.jury_plan.order_seed}|audience"
    data = bytes(entries("order_schedule")[-1].entry_bytes)
    for entry in round_.entries.select_related("system_version__system"):
        assert entry.system_version.system.name.encode() not in data
        assert entry.system_version.system.vendor.encode() not in data
    for run in round_.entries.first().runs.all():
        assert str(run.public_id).encode() not in data


def test_120_minute_entries_get_separate_sessions(jury_round, plan_jury):
    round_ = jury_round(duration_class="minute_120", entries=3)
    plan_jury(round_, jurors={"audience": 1}, session_cap=timedelta(hours=3))
    sessions = list(ScreeningSession.objects.filter(round=round_).order_by("index"))
    assert len(sessions) == 3
    assert all(s.viewings.count() == 1 for s in sessions)


def test_sessions_respect_the_session_cap_and_the_daily_maximum(jury_round, plan_jury):
    round_ = jury_round(entries=3, packages=2)
    plan, seated = plan_jury(
        round_,
        jurors={"audience": 1},
        session_cap=timedelta(seconds=2.5),
        daily_max=timedelta(seconds=4.5),
        break_length=timedelta(seconds=30),
    )
    sessions = list(ScreeningSession.objects.filter(round=round_).order_by("index"))
    per_day: dict[int, float] = {}
    for session in sessions:
        films = list(session.viewings.order_by("order_index").select_related("film"))
        screening = sum(v.film.duration_s for v in films)
        assert screening <= 2.5
        per_day[session.day] = per_day.get(session.day, 0) + screening
        if len(films) == 2:
            assert session.scheduled_end - session.scheduled_start == timedelta(
                seconds=films[0].film.duration_s + 30 + films[1].film.duration_s
            )
    assert all(total <= 4.5 for total in per_day.values())
    assert sorted(per_day) == [0, 1]  # six one-second films: four on day 0, two on day 1
    day_1 = [s for s in sessions if s.day == 1][0]
    assert day_1.scheduled_start.date() == plan.first_day + timedelta(days=1)


def test_screening_follows_the_order_the_fixed_break_and_the_session_start(
    jury_round, plan_jury, judging, screening
):
    round_ = jury_round(entries=3)
    _, seated = plan_jury(round_, jurors={"audience": 1}, break_length=timedelta(seconds=30))
    juror = seated["audience"][0]
    first, second, third = Viewing.objects.filter(juror=juror).order_by("order_index")
    now = timezone.now()
    with pytest.raises(services.JuryError, match="not in judging"):
        services.viewing_start(viewing=first, juror=juror, now=now)
    judging(round_)
    with pytest.raises(services.JuryError, match="previous film"):
        services.viewing_start(viewing=second, juror=juror, now=now)
    first = screening.watch(first, juror, at=now)
    with pytest.raises(services.JuryError, match="scorecard"):
        services.viewing_start(viewing=second, juror=juror, now=first.completed_at)
    screening.answer(first, juror)
    screening.score(first, juror)
    with pytest.raises(services.JuryError, match="fixed break"):
        services.viewing_start(
            viewing=second, juror=juror, now=first.completed_at + timedelta(seconds=29)
        )
    assert services.viewing_available_at(second) == first.completed_at + timedelta(seconds=30)
    started = services.viewing_start(
        viewing=second, juror=juror, now=first.completed_at + timedelta(seconds=30)
    )
    assert started.started_at is not None
    other = plan_jury(jury_round(), jurors={"audience": 1}, first_day=now.date() + timedelta(2))
    stranger_view = Viewing.objects.filter(juror=other[1]["audience"][0]).first()
    judging(stranger_view.round)
    with pytest.raises(services.JuryError, match="session starts"):
        services.viewing_start(viewing=stranger_view, juror=stranger_view.juror, now=now)
    with pytest.raises(services.PermissionDenied):
        services.viewing_start(viewing=third, juror=stranger_view.juror, now=now)


def test_the_daily_maximum_is_enforced_when_a_film_starts(
    jury_round, plan_jury, judging, screening
):
    # Films planned for yesterday and today, none watched yesterday: today's screening may not
    # pass the daily maximum even though every session has started.
    round_ = jury_round(entries=3)
    yesterday = timezone.now().date() - timedelta(days=1)
    _, seated = plan_jury(
        round_,
        jurors={"audience": 1},
        session_cap=timedelta(seconds=2.5),
        daily_max=timedelta(seconds=2.5),
        first_day=yesterday,
    )
    judging(round_)
    juror = seated["audience"][0]
    first, second, third = Viewing.objects.filter(juror=juror).order_by("order_index")
    assert (first.session.day, third.session.day) == (0, 1)
    at = timezone.now()
    for viewing in (first, second):
        viewing = screening.watch(viewing, juror, at=at)
        screening.answer(viewing, juror)
        screening.score(viewing, juror)
        at = viewing.completed_at + timedelta(seconds=5)
    assert _same_day(at, timezone.now())
    with pytest.raises(services.JuryError, match="maximum screening time"):
        services.viewing_start(viewing=third, juror=juror, now=at)


def _same_day(a, b) -> bool:
    return a.date() == b.date()


# ---------------------------------------------------------------------------
# Playback proof, attention, scorecards


def test_a_viewing_completes_only_on_real_time_playback_to_the_end(jury_round, plan_jury, judging):
    from juries.playback import Heartbeat

    round_ = jury_round()
    _, seated = plan_jury(round_, jurors={"audience": 1})
    judging(round_)
    juror = seated["audience"][0]
    viewing = Viewing.objects.filter(juror=juror).order_by("order_index").first()
    at = timezone.now()
    viewing = services.viewing_start(viewing=viewing, juror=juror, now=at)
    duration = viewing.film.duration_s
    assert 0.9 < duration < 1.2  # the proxy's probed duration, not the run's recorded 60 s
    services.viewing_heartbeat(viewing=viewing, juror=juror, beat=Heartbeat(0, 0.0), now=at)
    outcome, verdict = services.viewing_heartbeat(
        viewing=viewing, juror=juror, beat=Heartbeat(1, duration), now=at
    )
    assert outcome == "impossible_progress" and not verdict.complete
    with pytest.raises(services.JuryError, match="watched to its end"):
        services.scorecard_save(viewing=viewing, juror=juror, scores={})
    services.viewing_heartbeat(viewing=viewing, juror=juror, beat=Heartbeat(2, 0.0), now=at)
    outcome, verdict = services.viewing_heartbeat(
        viewing=viewing,
        juror=juror,
        beat=Heartbeat(3, duration),
        now=at + timedelta(seconds=duration),
        client_played=[[0, duration]],
    )
    assert outcome == "credited" and verdict.complete
    viewing.refresh_from_db()
    assert viewing.completed_at is not None and viewing.coverage == 1.0
    assert viewing.client_played == [[0.0, round(duration, 3)]]
    assert viewing.beats.count() == 4


def test_attention_failure_excludes_the_scorecard_and_never_changes_the_score(
    jury_round, plan_jury, judging, screening
):
    round_ = jury_round(entries=2)
    plan, seated = plan_jury(round_, jurors={"audience": 2}, attention_min_correct=2)
    judging(round_)
    careless, careful = seated["audience"]
    screening.complete_all(careless, correct=False, value="4")
    screening.complete_all(careful, correct=True, value="4")
    frame = selectors.scorecards_frame(round_)
    bad = frame[frame["juror"] == careless.public_id]
    good = frame[frame["juror"] == careful.public_id]
    assert bad["excluded"].all() and set(bad["exclusion_reason"]) == {"attention_failure"}
    assert not good["excluded"].any()
    assert set(bad["score"]) == set(good["score"]) == {4.0}  # answers never enter a score
    # The rule was logged before any scorecard was.
    first_lock = entries("scorecard_lock")[0]
    assert plan.log_index < first_lock.index
    assert selectors.complete_view_counts(round_) == {
        label: 1 for label in round_.entries.values_list("label", flat=True)
    }


def test_locked_scorecards_cannot_change_not_even_by_raw_sql(
    jury_round, plan_jury, judging, screening
):
    round_ = jury_round(entries=2)
    _, seated = plan_jury(round_, jurors={"audience": 1})
    judging(round_)
    juror = seated["audience"][0]
    first = Viewing.objects.filter(juror=juror).order_by("order_index").first()
    first = screening.watch(first, juror, at=timezone.now())
    screening.answer(first, juror)
    draft = screening.score(first, juror, value="3", lock=False)
    assert not draft.is_locked and selectors.unlocked_scorecard_count(round_) == 1
    # A draft is the juror's to change.
    draft = screening.score(first, juror, value="2", lock=False)
    assert draft.scores["prompt_adherence"] == "2"
    locked = services.scorecard_lock(scorecard=draft, actor="t")
    assert selectors.unlocked_scorecard_count(round_) == 0
    logged = LogEntry.objects.get(index=locked.log_index)
    assert logged.kind == "scorecard_lock" and logged.payload["sha256"] == locked.sha256
    assert canonical_sha256(services.scorecard_record_of(locked)) == locked.sha256
    with pytest.raises(services.JuryError, match="locked"):
        screening.score(first, juror, value="5")
    for statement, params in [
        ("UPDATE juries_scorecard SET scores = %s WHERE id = %s", ['{"x": "5"}', locked.pk]),
        ("UPDATE juries_scorecard SET sha256 = %s WHERE id = %s", ["0" * 64, locked.pk]),
        ("UPDATE juries_scorecard SET locked_at = NULL WHERE id = %s", [locked.pk]),
        ("DELETE FROM juries_scorecard WHERE id = %s", [locked.pk]),
    ]:
        with pytest.raises((DatabaseError, IntegrityError)), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(statement, params)
    locked.refresh_from_db()
    assert locked.scores["prompt_adherence"] == "2" and locked.is_locked
    # Answers and heartbeats are append-only too.
    with pytest.raises(DatabaseError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE juries_attentionanswer SET correct = %s", [False])


def test_round_lock_locks_every_draft(jury_round, plan_jury, judging, screening):
    round_ = jury_round(entries=2)
    _, seated = plan_jury(round_, jurors={"audience": 1})
    judging(round_)
    juror = seated["audience"][0]
    for viewing in Viewing.objects.filter(juror=juror).order_by("order_index"):
        available = services.viewing_available_at(viewing)
        viewing = screening.watch(viewing, juror, at=max(available, timezone.now()))
        screening.answer(viewing, juror)
        screening.score(viewing, juror, lock=False)
    assert selectors.unlocked_scorecard_count(round_) == 2
    assert services.round_scorecards_lock(round_=round_, actor="staff") == 2
    assert selectors.unlocked_scorecard_count(round_) == 0
    assert len(entries("scorecard_lock")) == 2


# ---------------------------------------------------------------------------
# Frames, complete views, descriptive results


def test_frames_have_the_exact_interface_and_panels_stay_apart(
    jury_round, plan_jury, judging, screening
):
    round_ = jury_round(entries=2, packages=2)
    _, seated = plan_jury(round_, jurors={"audience": 1, "craft": 1})
    judging(round_)
    for kind in ("audience", "craft"):
        for juror in seated[kind]:
            screening.complete_all(juror, value="3")
    scores = selectors.scorecards_frame(round_)
    assert list(scores.columns) == [
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
    assert len(scores) == 2 * 4 * 8
    assert scores["score"].dtype == float and scores["locked"].all()
    assert set(scores["panel"]) == {"audience", "craft"}
    assert set(scores["system"]) == set(round_.entries.values_list("label", flat=True))
    assert set(scores["dimension"]) == set(round_.protocol.quality_dimensions)
    choices = selectors.holistic_choices_frame(round_)
    assert list(choices.columns)[:10] == [
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
    ]
    # One choice per juror per prompt (two films per prompt), 'a' being the earlier film.
    assert len(choices) == 2 * 2 and set(choices["outcome"]) == {"a"}
    for row in choices.itertuples():
        first = Viewing.objects.get(juror__public_id=row.juror, film__run__public_id=row.run_a)
        later = Viewing.objects.get(juror__public_id=row.juror, film__run__public_id=row.run_b)
        assert first.order_index < later.order_index
    counts = selectors.complete_view_counts(round_)
    assert set(counts.values()) == {2}
    assert set(selectors.complete_view_counts(round_, panel="audience").values()) == {1}
    assert selectors.jury_is_descriptive(round_)  # far below 25 complete-view voters
    assert selectors.unlocked_scorecard_count(round_) == 0
    votes = selectors.segment_votes_frame(round_)
    assert list(votes.columns) == [
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
    assert votes.empty


# ---------------------------------------------------------------------------
# Tovaki


def test_tovaki_task_labels_and_reviewer_specific_orders(jury_round, plan_jury, monkeypatch):
    round_ = jury_round(protocol="tovaki-2026-r1", duration_class="clip_6s")
    plan, seated = plan_jury(round_, jurors={"craft": 3}, freeze=False)
    with monkeypatch.context() as patched:
        # A fixed order seed makes the draw reproducible (the service draws a fresh one).
        seeds = iter(["5eed" * 16, "1abe" * 16])  # the order seed, the task-label seed
        patched.setattr(services.secrets, "token_hex", lambda n: next(seeds))
        plan = services.jury_plan_freeze(plan=plan, actor="t")
    services.sessions_plan(round_=round_, actor="t")
    assert (plan.score_min, plan.score_max, plan.score_step) == (0, 5, Decimal("0.5"))
    films = list(JuryFilm.objects.filter(round=round_).select_related("package", "entry"))
    mappings = set()
    for package in round_.packages.all():
        task = [f for f in films if f.package_id == package.pk]
        assert sorted(f.task_label for f in task) == ["A", "B", "C", "D"]
        mappings.add(tuple(f.task_label for f in sorted(task, key=lambda f: f.entry.label)))
    assert len(mappings) > 1  # labels are drawn afresh inside each task
    mapping = selectors.task_label_mapping(round_)
    assert set(mapping) == {p.prompt_key for p in round_.packages.all()}
    for package in round_.packages.all():
        orders = set()
        for reviewer in seated["craft"]:
            orders.add(
                tuple(
                    Viewing.objects.filter(juror=reviewer, film__package=package)
                    .order_by("order_index")
                    .values_list("film__task_label", flat=True)
                )
            )
        assert len(orders) == 3  # every reviewer has an order of their own in every task
    schedule = entries("order_schedule")[-1]
    # Orders are published by task label; the mapping is only committed by a hash salted
    # with a private seed (published with the mapping once scores are locked).
    record = selectors.task_label_record(round_)
    assert schedule.payload["task_label_commitment_sha256"] == canonical_sha256(record)
    assert record["seed"] and record["seed"].encode() not in bytes(schedule.entry_bytes)
    assert sum(len(labels) for labels in record["mapping"].values()) == 4 * 6
    assert {row["film"] for j in schedule.payload["jurors"] for row in j["order"]} == set("ABCD")
    for entry in round_.entries.all():
        assert entry.label.encode() not in bytes(schedule.entry_bytes)


def test_tovaki_needs_exactly_three_reviewers_and_its_own_scale(jury_round, plan_jury):
    round_ = jury_round(protocol="tovaki-2026-r1", duration_class="clip_6s")
    plan, _ = plan_jury(round_, jurors={"craft": 2}, freeze=False)
    with pytest.raises(services.JuryError, match="exactly 3 reviewers"):
        services.jury_plan_freeze(plan=plan, actor="t")
    with pytest.raises(services.JuryError, match="only these panels: craft"):
        services.panel_create(round_=round_, kind="audience")
    from juries.scoring import ScoreScale

    with pytest.raises(services.JuryError, match="fixes the scale"):
        services.jury_plan_create(
            round_=jury_round(protocol="tovaki-2026-r1", duration_class="clip_6s"),
            session_cap=timedelta(hours=1),
            break_length=timedelta(minutes=1),
            between_sessions=timedelta(minutes=1),
            daily_max=timedelta(hours=2),
            first_day=timezone.now().date(),
            day_start=timezone.now().time(),
            scale=ScoreScale(Decimal(1), Decimal(10), Decimal(1)),
        )


def test_tovaki_scores_half_steps_flags_disagreement_and_counts_complete_views(
    jury_round, plan_jury, judging, screening
):
    round_ = jury_round(protocol="tovaki-2026-r1", duration_class="clip_6s")
    _, seated = plan_jury(round_, jurors={"craft": 3})
    judging(round_)
    dims = round_.protocol.quality_dimensions
    first_reviewer = seated["craft"][0]
    viewing = Viewing.objects.filter(juror=first_reviewer).order_by("order_index").first()
    viewing = screening.watch(viewing, first_reviewer, at=timezone.now())
    screening.answer(viewing, first_reviewer)
    for bad in ("2.25", "5.5", "-0.5"):
        with pytest.raises(services.JuryError):
            screening.score(viewing, first_reviewer, scores={d: bad for d in dims})
    # No holistic paired choice in Tovaki.
    assert services.holistic_partners(viewing) == []
    values = {0: "1", 1: "4", 2: "3.5"}  # prompt_adherence: range 3 -> flagged
    for i, reviewer in enumerate(seated["craft"]):
        at = timezone.now()
        for v in Viewing.objects.filter(juror=reviewer).order_by("order_index"):
            if v.is_complete and Scorecard.objects.filter(viewing=v).exists():
                continue
            available = services.viewing_available_at(v)
            if not v.is_complete:
                v = screening.watch(v, reviewer, at=max(at, available))
                screening.answer(v, reviewer)
            scores = {d: "2.5" for d in dims}
            scores["prompt_adherence"] = values[i]
            scores["temporal_stability"] = ["2", "4.5", "3"][i]  # range 2.5 -> not flagged
            screening.score(v, reviewer, scores=scores)
            at = v.completed_at + v.session.break_length
        # Below the definition's minimum complete-view target (3), results are descriptive.
        assert selectors.minimum_complete_view(round_) == 3
        assert selectors.jury_is_descriptive(round_) is (i < 2)
    flags = selectors.disagreement_flags(round_)
    cells = 4 * 6  # the fixed scope's first-take cells
    assert len(flags) == cells * 8 and set(flags["reviewers"]) == {3}
    flagged = flags[flags["flagged"]]
    assert set(flagged["dimension"]) == {"prompt_adherence"}
    assert len(flagged) == cells
    frame = selectors.scorecards_frame(round_)
    assert set(frame["task_lane"]) == set(round_.protocol.task_lanes)
    assert 2.5 in set(frame["score"])


# ---------------------------------------------------------------------------
# Segment results


def test_segment_windows_votes_and_continuity_excerpts_stay_apart(
    jury_round, plan_jury, judging, screening
):
    from juries.models import SegmentWindow
    from media_pipeline.segments import select_segments

    round_ = jury_round(entries=2)
    _, seated = plan_jury(round_, jurors={"audience": 1})
    judging(round_)
    juror = seated["audience"][0]
    windows = services.segment_windows_publish(round_=round_, actor="t")
    schedule = round_.protocol.segment_schedule("minute_5")
    films = list(JuryFilm.objects.filter(round=round_).select_related("package"))
    assert len(windows) == schedule["count"] * len(films)
    for film in films:
        expected = select_segments(
            film.duration_s, "minute_5", film.package.sha256, round_.protocol_version.key
        )
        stored = SegmentWindow.objects.filter(film=film, kind="within_segment").order_by("index")
        assert [(w.start_s, w.end_s) for w in stored] == expected
    logged = entries("segment_windows")[-1]
    assert logged.payload["kind"] == "within_segment"
    assert {f["film"] for f in logged.payload["films"]} == {f.display_label for f in films}
    assert services.segment_windows_publish(round_=round_, actor="t") == windows  # idempotent

    a, b = films
    first_a = SegmentWindow.objects.get(film=a, kind="within_segment", index=0)
    first_b = SegmentWindow.objects.get(film=b, kind="within_segment", index=0)
    second_b = SegmentWindow.objects.get(film=b, kind="within_segment", index=1)
    services.segment_vote_record(juror=juror, window_a=first_a, window_b=first_b, outcome="a")
    with pytest.raises(services.JuryError, match="same window"):
        services.segment_vote_record(juror=juror, window_a=first_a, window_b=second_b, outcome="b")

    transition = services.continuity_excerpts_declare(film=a, transitions_s=[0.5], actor="t")
    pair = services.continuity_excerpts_declare(
        film=a, nonadjacent=[((0.0, 0.2), (0.6, 0.9))], actor="t"
    )
    assert transition[0].kind == "transition" and transition[0].start_s == 0.0
    assert (pair[0].second_start_s, pair[0].second_end_s) == (0.6, 0.9)
    with pytest.raises(services.JuryError, match="gap"):
        services.continuity_excerpts_declare(
            film=a, nonadjacent=[((0.0, 0.5), (0.4, 0.9))], actor="t"
        )
    services.continuity_excerpts_declare(film=b, transitions_s=[0.5], actor="t")
    transition_b = SegmentWindow.objects.get(film=b, kind="transition")
    services.segment_vote_record(
        juror=juror, window_a=transition[0], window_b=transition_b, outcome="tie"
    )

    within = selectors.segment_votes_frame(round_)
    assert len(within) == 1 and within.iloc[0]["segment"] == 0
    assert within.iloc[0]["a"] == a.entry.label and within.iloc[0]["outcome"] == "a"
    diagnostics = selectors.segment_votes_frame(round_, kind="transition")
    assert diagnostics["outcome"].tolist() == ["tie"]
    # Full-film results never see segment votes.
    assert selectors.scorecards_frame(round_).empty
    with pytest.raises(DatabaseError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE juries_segmentwindow SET start_s = 0.1 WHERE id = %s", [first_a.pk]
            )
