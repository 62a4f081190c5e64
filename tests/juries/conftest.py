"""Jury test fixtures: real short films (ffmpeg lavfi, with audio), rounds with finished runs
taken through the real services, and a planned jury."""

from __future__ import annotations

from datetime import time, timedelta
from functools import partial
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from juries import services
from juries.models import AttentionQuestion
from rounds import services as round_services
from tests import factories
from tests.films import make_film


@pytest.fixture
def film_factory():
    """``make(path, seconds)``: a small 160x90 film."""
    return partial(make_film, size="160x90")


@pytest.fixture(scope="session")
def one_second_film(tmp_path_factory) -> Path:
    return make_film(tmp_path_factory.mktemp("films") / "one-second.mp4", 1.0, size="160x90")


def anchors_for(round_) -> dict:
    plan_scale = services.plan_scale(round_) or services.SUGGESTED_SCALE
    return {
        d: {
            str(plan_scale.minimum): "fails the dimension",
            str(plan_scale.maximum): "publishable as it stands",
        }
        for d in round_.protocol.quality_dimensions
    }


@pytest.fixture
def jury_round(one_second_film):
    """``make(protocol=..., duration_class=..., entries=..., packages=..., film=...)``: an open
    round whose every entry has a finished, conforming run on every package."""

    def make(
        *,
        protocol: str = "ai-duel-0.1",
        duration_class: str = "minute_5",
        entries: int | None = None,
        packages: int | None = None,
        film: Path | None = None,
        films: list[Path] | None = None,
        systems: list[tuple[str, str]] | None = None,
    ):
        # None: the protocol's fixed scope when it has one (Tovaki), else 2 entries, 1 package.
        fixed = factories.protocol_version(protocol).protocol.fixed_scope
        round_ = factories.round_(
            protocol=protocol,
            duration_class=duration_class,
            packages=packages if packages is not None or fixed else 1,
            entries=0 if systems else (entries if entries is not None or fixed else 2),
        )
        for name, vendor in systems or []:
            tier = fixed["resolution_tier"] if fixed else "pro"
            version = factories.system_version(name=name, customer_tier=tier)
            version.system.vendor = vendor
            version.system.save(update_fields=["vendor"])
            round_services.entry_add(
                round_=round_,
                system_version=version,
                provider_config={"adapter": "reference", "profile": "good"},
            )
        round_ = round_services.round_commit(round_=round_, actor="test")
        round_ = round_services.round_open(round_=round_, actor="test")
        if round_.protocol.budget_gate:
            owner = get_user_model().objects.create_user(
                f"owner-{round_.pk}", password="x", is_staff=True
            )
            round_services.budget_approve(round_=round_, owner=owner, limit_credits=100)
        for e, entry in enumerate(round_.entries.order_by("pk")):
            for package in round_.packages.all():
                path = films[e % len(films)] if films else (film or one_second_film)
                factories.finished_run(entry, package, original_path=path)
        return round_

    return make


@pytest.fixture
def plan_jury():
    """``plan(round_, jurors={"audience": 2}, ...)``: panels with signed-up jurors, two story
    questions per package, a filled plan; frozen and scheduled unless told otherwise.
    Returns (plan, {panel kind: [juror, ...]})."""

    def plan(
        round_,
        *,
        jurors: dict[str, int] | None = None,
        break_length: timedelta = timedelta(seconds=2),
        session_cap: timedelta = timedelta(hours=1),
        daily_max: timedelta = timedelta(hours=4),
        attention_min_correct: int = 1,
        freeze: bool = True,
        schedule: bool = True,
        first_day=None,
    ):
        seated: dict[str, list] = {}
        for kind, count in (jurors or {"audience": 2}).items():
            panel = services.panel_create(round_=round_, kind=kind)
            seated[kind] = []
            for i in range(count):
                user = get_user_model().objects.create_user(
                    f"juror-{round_.pk}-{kind}-{i}", password="juror-pass"
                )
                juror = services.juror_create(
                    name=f"Juror {kind} {i}",
                    contact=f"juror{i}@example.org",
                    expertise="film editing",
                    target_audience_fit="adult drama viewers",
                    compensation="USD 100 per session",
                    user=user,
                )
                services.panel_member_add(panel=panel, juror=juror, actor="test")
                seated[kind].append(juror)
        for package in round_.packages.all():
            AttentionQuestion.objects.create(
                package=package,
                text="What happens at the end?",
                choices=["The story reaches its outcome", "Nothing happens"],
                correct_choice=0,
            )
            AttentionQuestion.objects.create(
                package=package,
                text="Is there sound?",
                choices=["Yes", "No"],
                correct_choice=0,
            )
        jury_plan = services.jury_plan_create(
            round_=round_,
            session_cap=session_cap,
            break_length=break_length,
            between_sessions=timedelta(minutes=5),
            daily_max=daily_max,
            first_day=first_day or timezone.now().date(),
            day_start=time(0, 0),
            attention_min_correct=attention_min_correct,
            anchors=anchors_for(round_),
        )
        if freeze:
            jury_plan = services.jury_plan_freeze(plan=jury_plan, actor="test")
        if freeze and schedule:
            services.sessions_plan(round_=round_, actor="test")
        return jury_plan, seated

    return plan


@pytest.fixture
def judging():
    def move(round_):
        return round_services.round_transition(round_=round_, to="judging", actor="test")

    return move


@pytest.fixture
def drop_triggers_before_flush(transactional_db):
    """SQLite empties tables with DELETE after a transactional test, which the append-only
    triggers refuse; drop them first (the flush's post_migrate signal reinstalls them).
    PostgreSQL truncates, which row triggers do not see."""
    yield
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            for (name,) in cursor.fetchall():
                cursor.execute(f'DROP TRIGGER IF EXISTS "{name}"')


class Screening:
    """Drives a juror through viewings with the services, on a simulated server clock."""

    def watch(self, viewing, juror, *, at, step: float = 0.5):
        from juries.models import Viewing
        from juries.playback import Heartbeat

        viewing = services.viewing_start(viewing=viewing, juror=juror, now=at)
        duration = viewing.film.duration_s
        positions = [0.0]
        while positions[-1] < duration:
            positions.append(min(duration, positions[-1] + step))
        start_seq = int((viewing.proof or {}).get("last_seq", -1)) + 1
        for k, position in enumerate(positions):
            services.viewing_heartbeat(
                viewing=viewing,
                juror=juror,
                beat=Heartbeat(seq=start_seq + k, position_s=position),
                now=at + timedelta(seconds=position),
            )
        return Viewing.objects.get(pk=viewing.pk)

    def answer(self, viewing, juror, *, correct: bool = True) -> int:
        questions = services.attention_questions_for(viewing)
        answers = {q.pk: q.correct_choice if correct else 1 - q.correct_choice for q in questions}
        return services.attention_answers_submit(viewing=viewing, juror=juror, answers=answers)

    def score(self, viewing, juror, *, scores=None, value=None, lock=True, choice="earlier"):
        plan = viewing.round.jury_plan
        value = value if value is not None else str(plan.score_max.normalize())
        scores = scores or {d: value for d in viewing.round.protocol.quality_dimensions}
        partners = services.holistic_partners(viewing)
        return services.scorecard_save(
            viewing=viewing,
            juror=juror,
            scores=scores,
            choices={str(p.public_id): choice for p in partners},
            lock=lock,
        )

    def complete_all(self, juror, *, at=None, correct=True, value=None, lock=True):
        """Watch, answer and score every assigned film in order; returns the final time."""
        from juries.models import Viewing

        at = at or timezone.now()
        for viewing in Viewing.objects.filter(juror=juror).order_by("order_index"):
            available = services.viewing_available_at(viewing)
            at = max(at, available) if available else at
            viewing = self.watch(viewing, juror, at=at)
            self.answer(viewing, juror, correct=correct)
            self.score(viewing, juror, value=value, lock=lock)
            at = viewing.completed_at + viewing.session.break_length
        return at


@pytest.fixture
def screening() -> Screening:
    return Screening()
