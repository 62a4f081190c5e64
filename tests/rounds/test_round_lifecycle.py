"""Round state machine, commitments, and refusals to edit what is committed."""

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from ledger.models import LogEntry
from rounds import services
from rounds.models import InputPackage, Round
from rounds.samples import sample_checklist, sample_package
from stats.services import round_lock
from tests import factories

pytestmark = pytest.mark.django_db


def test_commit_freezes_protocol_and_logs_every_commitment():
    round_ = factories.round_(packages=2, entries=3)
    round_ = services.round_commit(round_=round_, actor="staff")
    assert round_.state == Round.State.COMMITTED
    assert round_.protocol_version.frozen_at is not None
    kinds = list(LogEntry.objects.values_list("kind", flat=True))
    for kind in (
        "protocol_version",
        "round_controls",
        "budget_and_deadline",
        "detection_thresholds",
        "round_transition",
    ):
        assert kind in kinds
    assert kinds.count("prompt_hash") == 2
    assert kinds.count("requirement_checklist_hash") == 2
    assert kinds.count("entry_commit") == 3
    package = round_.packages.get(prompt_key="P1")
    assert len(package.sha256) == 64 and len(package.checklist_sha256) == 64


def test_hashes_are_deterministic_over_canonical_json():
    a = factories.committed_round()
    b = factories.committed_round()
    pa, pb = a.packages.get(), b.packages.get()
    # Same sample content, same hash, whatever the key order it was written in.
    assert pa.sha256 == pb.sha256
    assert pa.checklist_sha256 == pb.checklist_sha256
    reordered = dict(reversed(list(pa.content.items())))
    from duel.canonical import canonical_sha256

    assert canonical_sha256(reordered) == pa.sha256


@pytest.mark.parametrize(
    "change,message",
    [
        ({"deadline": None}, "deadline"),
        ({"retry_limit": None}, "retry limit"),
        ({"human_action_cap": None}, "human-action cap"),
        ({"budget_per_system": None}, "budget"),
        ({"detection_thresholds": {}}, "detection thresholds"),
        ({"detection_thresholds": {"thresholds": {"x": 1}, "ffmpeg_version": "5"}}, "unknown keys"),
        ({"duration_class": "minute_3"}, "duration class"),
    ],
)
def test_commit_refuses_incomplete_controls(change, message):
    round_ = factories.round_()
    Round.objects.filter(pk=round_.pk).update(**change)
    round_.refresh_from_db()
    with pytest.raises(ValidationError) as exc:
        services.round_commit(round_=round_, actor="staff")
    assert message in " ".join(exc.value.messages)
    round_.refresh_from_db()
    assert round_.state == Round.State.DRAFT
    assert not LogEntry.objects.filter(subject=f"round:{round_.slug}").exists()


def test_common_engine_round_needs_every_engine_control():
    round_ = factories.round_(benchmark_class="common_visual_engine")
    controls = dict(round_.engine_controls)
    del controls["api_version"]
    Round.objects.filter(pk=round_.pk).update(engine_controls=controls)
    round_.refresh_from_db()
    with pytest.raises(ValidationError, match="api_version"):
        services.round_commit(round_=round_, actor="staff")


def test_open_record_needs_a_cost_ceiling():
    round_ = factories.round_(result_type="open_record", entries=1, cost_ceiling=None)
    with pytest.raises(ValidationError, match="cost ceiling"):
        services.round_commit(round_=round_, actor="staff")


ALL_STATES = [s for s, _ in Round.State.choices]


def _round_in(state: str) -> Round:
    round_ = factories.round_()
    path = {
        "draft": [],
        "committed": ["committed"],
        "open": ["committed", "open"],
        "judging": ["committed", "open", "judging"],
        "locked": ["committed", "open", "judging", "locked"],
        "cancelled": ["cancelled"],
    }
    for step in path[state]:
        if step == "committed":
            round_ = services.round_commit(round_=round_, actor="t")
        elif step == "open":
            round_ = services.round_open(round_=round_, actor="t")
        elif step == "locked":
            round_ = round_lock(round_=round_, actor="t")
        else:
            round_ = services.round_transition(round_=round_, to=step, actor="t")
    return round_


@pytest.mark.parametrize("start", ["draft", "committed", "open", "judging", "locked", "cancelled"])
@pytest.mark.parametrize("target", ["committed", "open", "judging", "locked", "cancelled"])
def test_every_round_transition_is_checked(start, target):
    round_ = _round_in(start)
    allowed = target in services.ROUND_TRANSITIONS[start]
    try:
        if target == "committed":
            services.round_commit(round_=round_, actor="t")
        elif target == "open":
            services.round_open(round_=round_, actor="t")
        elif target == "locked":
            round_lock(round_=round_, actor="t")
        else:
            services.round_transition(round_=round_, to=target, actor="t")
        moved = True
    except (services.TransitionError, ValidationError):
        moved = False
    assert moved is allowed
    round_.refresh_from_db()
    assert round_.state == (target if allowed else start)


def test_reveal_and_lock_are_not_plain_transitions():
    round_ = _round_in("locked")
    with pytest.raises(services.TransitionError, match="reveal"):
        services.round_transition(round_=round_, to="revealed", actor="t")
    judging = _round_in("judging")
    with pytest.raises(services.TransitionError, match="round_lock"):
        services.round_transition(round_=judging, to="locked", actor="t")


def test_committed_round_refuses_edits_through_the_service():
    round_ = factories.committed_round()
    with pytest.raises(services.FrozenError, match="retry_limit"):
        services.round_update(round_=round_, changes={"retry_limit": 9})
    with pytest.raises(services.FrozenError):
        services.package_add(
            round_=round_,
            prompt_key="P9",
            content=sample_package(1, duration_class="minute_1"),
            checklist=sample_checklist(1),
        )
    with pytest.raises(services.FrozenError):
        services.package_update(package=round_.packages.get(), content={"x": 1})
    # A draft round can still be edited.
    draft = factories.round_()
    services.round_update(round_=draft, changes={"retry_limit": 1})
    draft.refresh_from_db()
    assert draft.retry_limit == 1


def _raw(sql: str, params: list) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_database_refuses_changing_committed_controls_and_packages():
    round_ = factories.committed_round()
    package = round_.packages.get()
    with pytest.raises(DatabaseError):
        _raw("UPDATE rounds_round SET retry_limit = 7 WHERE id = %s", [round_.pk])
    with pytest.raises(DatabaseError):
        _raw("UPDATE rounds_round SET committed_at = NULL WHERE id = %s", [round_.pk])
    with pytest.raises(DatabaseError):
        _raw("UPDATE rounds_inputpackage SET sha256 = 'x' WHERE id = %s", [package.pk])
    with pytest.raises(DatabaseError):
        _raw("DELETE FROM rounds_inputpackage WHERE id = %s", [package.pk])
    with pytest.raises(DatabaseError):
        _raw(
            "UPDATE rounds_protocolversion SET sha256 = 'x' WHERE id = %s",
            [round_.protocol_version_id],
        )
    # State moves are still allowed on a committed round.
    _raw("UPDATE rounds_round SET title = 'renamed' WHERE id = %s", [round_.pk])
    round_.refresh_from_db()
    assert round_.retry_limit == 2 and round_.title == "renamed"


def test_brief_to_film_refuses_shot_list_at_add():
    round_ = factories.round_(packages=0)
    content = sample_package(0, duration_class="minute_1")
    content["shot_list"] = ["wide"]
    with pytest.raises(ValidationError, match="shot list"):
        services.package_add(
            round_=round_, prompt_key="P1", content=content, checklist=sample_checklist(0)
        )
    assert not InputPackage.objects.filter(round=round_).exists()


def test_duration_variant_must_only_change_duration():
    one = factories.round_(duration_class="minute_1")
    base = one.packages.get()
    two = factories.round_(duration_class="minute_2", packages=0)
    variant = {**base.content, "duration_class": "minute_2"}
    services.package_add(
        round_=two, prompt_key="P1", content=variant, checklist=base.checklist, variant_of=base
    )
    with pytest.raises(ValidationError, match="only"):
        services.package_add(
            round_=two,
            prompt_key="P2",
            content={**variant, "language": "fr"},
            checklist=base.checklist,
            variant_of=base,
        )


def test_tovaki_generation_blocked_until_named_owner_approves(django_user_model):
    round_ = factories.open_round(
        protocol="tovaki-2026-r1",
        retry_limit=1,
    )
    assert any("budget gate" in p for p in services.generation_blockers(round_))
    staff = django_user_model.objects.create_user("owner", is_staff=True, first_name="Ada")
    with pytest.raises(ValidationError, match="hard maximum"):
        services.budget_approve(round_=round_, owner=staff, limit_credits=Decimal("5000"))
    outsider = django_user_model.objects.create_user("visitor")
    with pytest.raises(ValidationError, match="staff"):
        services.budget_approve(round_=round_, owner=outsider, limit_credits=Decimal("1620"))
    approval = services.budget_approve(round_=round_, owner=staff, limit_credits=Decimal("1620"))
    assert approval.owner_name == "Ada"
    assert services.generation_blockers(round_) == []
    assert LogEntry.objects.filter(kind="budget_approval").count() == 1


def test_open_refused_after_deadline():
    round_ = factories.committed_round(deadline=timezone.now() + timedelta(seconds=0.5))
    time.sleep(0.6)
    with pytest.raises(services.TransitionError, match="deadline"):
        services.round_open(round_=round_, actor="t")


def test_tovaki_commit_holds_the_round_to_the_fixed_scope():
    """4 integrations x 6 task lanes = 24 first-take cells, or the round does not commit."""
    short = factories.round_(protocol="tovaki-2026-r1", packages=5, entries=3)
    with pytest.raises(ValidationError) as refused:
        services.round_commit(round_=short, actor="t")
    text = " ".join(refused.value.messages)
    assert "exactly 4 model integrations; the round has 3 entries" in text
    assert "task lanes without a package: bright_surreal_causality" in text
    assert not Round.objects.get(pk=short.pk).is_committed
    assert not LogEntry.objects.filter(kind="prompt_hash").exists()

    full = services.round_commit(round_=factories.round_(protocol="tovaki-2026-r1"), actor="t")
    lanes = sorted(full.packages.values_list("task_lane", flat=True))
    assert lanes == sorted(full.protocol.task_lanes)
    cells = full.entries.count() * len(lanes)
    assert cells == full.protocol.fixed_scope["first_take_cells"] == 24


def test_a_package_names_one_of_the_protocols_task_lanes():
    round_ = factories.round_(protocol="tovaki-2026-r1", packages=0)
    with pytest.raises(ValidationError, match="task lane 'car_chase' is not one of tovaki"):
        services.package_add(
            round_=round_,
            prompt_key="T9",
            task_lane="car_chase",
            content=sample_package(0, duration_class="clip_6s", aspect_ratio="9:16"),
            checklist=sample_checklist(0),
        )
    assert not round_.packages.exists()
