"""Operated runs end to end on the reference provider: every profile to its final state.

Real films are rendered with ffmpeg, validated by the media pipeline, proxied, and the
manifest is written and validated against the published schema.
"""

import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone

from ledger.models import LogEntry
from rounds.manifest import validate_manifest
from rounds.models import Attempt, Run
from rounds.runner import operate
from rounds.services import run_create
from tests import factories

pytestmark = pytest.mark.django_db

# Low frame rate keeps renders and 1080p-canvas proxies quick; the rules do not depend on it.
FAST = {"adapter": "reference", "fps": 4}


@pytest.fixture(autouse=True)
def _fast_polling(settings):
    settings.DUEL_RUN_POLL_INTERVAL_S = 0.05


def _run(profile: str, *, protocol="ai-duel-0.1", **round_kwargs) -> Run:
    config = {**FAST, "profile": profile, **round_kwargs.pop("provider", {})}
    if protocol == "tovaki-2026-r1":
        # Tovaki's fixed scope: 4 integrations x 6 task lanes; one of its cells is operated.
        round_kwargs.setdefault("retry_limit", 1)
    else:
        round_kwargs.setdefault("entries", 1)
    round_ = factories.open_round(protocol=protocol, provider_config=config, **round_kwargs)
    if protocol == "tovaki-2026-r1":
        from django.contrib.auth import get_user_model

        from rounds.services import budget_approve

        owner = get_user_model().objects.create_user(f"owner-{round_.pk}", is_staff=True)
        budget_approve(round_=round_, owner=owner, limit_credits=Decimal("1620"))
    entry = round_.entries.order_by("pk").first()
    run = run_create(entry=entry, package=round_.packages.order_by("prompt_key").first())
    return operate(run.pk)


# profile -> (final state, failed attempts, failure codes)
AI_DUEL_PROFILES = [
    ("good", "completed_conforming", []),
    ("error_first_attempt", "completed_conforming", ["provider_error"]),
    ("infrastructure_failure_first", "completed_conforming", ["infrastructure_failure"]),
    ("empty_file", "system_failed", ["empty_file"] * 3),
    ("unplayable", "system_failed", ["unplayable_file"] * 3),
    ("no_audio", "system_failed", ["missing_stream"] * 3),
    ("too_short", "completed_nonconforming", []),
    ("safety_block", "policy_blocked", ["safety_block"]),
]


@pytest.mark.parametrize("profile,final_state,failures", AI_DUEL_PROFILES)
def test_ai_duel_profiles_end_in_the_right_final_state(profile, final_state, failures):
    run = _run(profile)
    assert run.final_state == final_state, run.final_reason
    failed = list(run.attempts.filter(state=Attempt.State.FAILED).order_by("number"))
    assert [a.failure_code for a in failed] == failures
    # Retries only for the protocol's technical reasons, within the round's limit (2).
    assert all(a.retry_reason in ("", a.failure_code) for a in failed)
    assert run.attempts.count() == len(failures) + (1 if run.accepted_attempt_id else 0)
    manifest = run.manifests.get()
    validate_manifest(manifest.document)
    assert manifest.document["final_state"] == final_state
    assert manifest.document["retries"]["count"] == sum(1 for a in failed if a.retry_reason)
    assert LogEntry.objects.filter(kind="manifest", subject=f"run:{run.public_id}").count() == 1
    if final_state.startswith("completed"):
        assert run.proxy_file_id and run.output_sha256
        assert manifest.document["output_checksum"]["value"] == run.output_sha256
        # The wall clock runs from the start to the arrival of the accepted asset.
        accepted = run.accepted_attempt
        assert run.clock_started_at <= accepted.arrived_at == run.clock_stopped_at
        assert run.wall_time_s == (accepted.arrived_at - run.clock_started_at).total_seconds()
    else:
        assert run.proxy_file_id is None
    if profile == "empty_file":
        # An empty file is still billed by the provider: every failed attempt keeps its cost.
        costs = [Decimal(a.cost["billed_cost"]) for a in run.attempts.all()]
        assert len(costs) == 3 and all(c > 0 for c in costs)
        assert Decimal(manifest.document["cost"]["billed_cost"]) == sum(costs)
    if profile == "too_short":
        # Kept and marked, in the reliability result only.
        assert "duration_nonconforming" in run.problems
        assert manifest.document["duration"]["conforming"] is False


def test_frozen_stretch_reduces_effective_duration():
    run = _run("frozen_stretch")
    assert run.effective_duration_s < run.duration_s - 10
    assert run.final_state == "completed_nonconforming"


def test_slow_job_past_the_deadline_is_deadline_exceeded():
    run = _run(
        "slow",
        provider={"slow_delay_s": 3600},
        deadline=timezone.now() + timedelta(seconds=2),
    )
    assert run.final_state == "deadline_exceeded"
    assert run.attempts.get().failure_code == "timeout"


def test_budget_exhausted_when_spend_reaches_the_reserve():
    run = _run("empty_file", budget_per_system=Decimal("1.00"))
    assert run.final_state == "budget_exhausted"
    assert run.attempts.count() == 1


TOVAKI_PROFILES = [
    ("good", "completed_conforming", []),
    ("too_short", "completed_nonconforming", ["wrong_duration_or_resolution"]),
    ("no_audio", "system_failed", ["missing_stream", "missing_stream"]),
    ("error_first_attempt", "completed_conforming", ["provider_error"]),
]


@pytest.mark.parametrize("profile,final_state,failures", TOVAKI_PROFILES)
def test_tovaki_profiles_follow_its_retry_policy(profile, final_state, failures):
    run = _run(profile, protocol="tovaki-2026-r1")
    assert run.final_state == final_state, run.final_reason
    failed = [a.failure_code for a in run.attempts.filter(state="failed").order_by("number")]
    if profile == "too_short":
        # Tovaki retries a wrong duration once; the second too-short take is kept,
        # nonconforming.
        assert failed == ["wrong_duration_or_resolution"]
        assert run.attempts.count() == 2
    else:
        assert failed == failures
    validate_manifest(run.manifests.get().document)


def test_tovaki_run_cannot_start_before_budget_approval():
    from rounds.services import TransitionError

    round_ = factories.open_round(
        protocol="tovaki-2026-r1",
        retry_limit=1,
        provider_config={**FAST, "profile": "good"},
    )
    run = run_create(entry=round_.entries.first(), package=round_.packages.first())
    with pytest.raises(TransitionError, match="budget gate"):
        operate(run.pk)
    run.refresh_from_db()
    assert run.state == Run.State.CREATED


class _DiedAfterSubmit(BaseException):
    """Stands for the worker's death: not an Exception, so nothing in the workflow catches it."""


def test_a_worker_dying_between_submit_and_record_resubmits_the_same_job(monkeypatch):
    """The provider accepted the job; the worker died before the platform stored its id.

    The resumed run submits again with the attempt's idempotency key, and the provider
    answers with the job it already has: one job, one attempt, one charge.
    """
    from django.conf import settings

    from rounds import services

    real = services.attempt_submitted
    calls = []

    def dies_once(**kwargs):
        calls.append(kwargs["provider_request_id"])
        if len(calls) == 1:
            raise _DiedAfterSubmit
        return real(**kwargs)

    monkeypatch.setattr(services, "attempt_submitted", dies_once)
    state_dir = Path(settings.DUEL_WORK_DIR) / f"died-after-submit-{uuid.uuid4().hex}"
    round_ = factories.open_round(
        entries=1, provider_config={**FAST, "profile": "good", "state_dir": str(state_dir)}
    )
    run = run_create(entry=round_.entries.get(), package=round_.packages.get())
    with pytest.raises(_DiedAfterSubmit):
        operate(run.pk)
    assert Attempt.objects.get(run=run).state == Attempt.State.SUBMITTING
    run = operate(run.pk)  # what the redelivered task or the reaper does
    assert run.final_state == "completed_conforming", run.final_reason
    assert len(calls) == 2 and calls[0] == calls[1]  # the same job both times
    assert sorted(p.name for p in (state_dir / "jobs").glob("ref-*.json")) == [f"{calls[0]}.json"]
    attempt = run.attempts.get()
    assert attempt.provider_request_id == calls[0]
    assert Decimal(run.manifests.get().document["cost"]["billed_cost"]) == Decimal(
        attempt.cost["billed_cost"]
    )
