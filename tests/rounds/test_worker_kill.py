"""A real Celery worker killed mid-run: the run resumes, nothing is lost or charged twice."""

from __future__ import annotations

import time

import pytest

from ledger.models import LogEntry
from rounds.models import Attempt, Run
from rounds.services import run_create
from rounds.tasks import reap_stale_runs, run_operate
from tests import factories

pytestmark = [pytest.mark.worker, pytest.mark.services]


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_killed_worker_mid_run_resumes_without_double_charge(celery_worker_factory):
    round_ = factories.open_round(
        entries=1,
        provider_config={"adapter": "reference", "profile": "slow", "slow_delay_s": 5, "fps": 4},
    )
    run = run_create(entry=round_.entries.get(), package=round_.packages.get())
    first = celery_worker_factory()
    run_operate.delay(run.pk)

    # Kill the worker while the provider is working on the submitted attempt.
    _wait_for(
        lambda: Attempt.objects.filter(run=run, state=Attempt.State.SUBMITTED).exists(),
        60,
        "the attempt to be submitted",
    )
    first.kill()
    run.refresh_from_db()
    assert run.state == Run.State.STARTED

    # A new worker and the reaper take the run up again.
    celery_worker_factory()
    time.sleep(1.5)
    reap_stale_runs.delay(1.0)
    _wait_for(
        lambda: Run.objects.filter(pk=run.pk, manifests__isnull=False).exists(),
        180,
        "the run to finish with its manifest",
    )
    run.refresh_from_db()
    assert run.final_state == "completed_conforming", run.final_reason
    attempts = list(run.attempts.all())
    assert len(attempts) == 1, "the resumed run polled its attempt instead of submitting again"
    assert attempts[0].state == Attempt.State.ACCEPTED
    assert run.manifests.count() == 1
    subject = f"run:{run.public_id}/attempt:1"
    assert LogEntry.objects.filter(kind="output_hash", subject=subject).count() == 1
    assert LogEntry.objects.filter(kind="run_start", subject=f"run:{run.public_id}").count() == 1
    document = run.manifests.get().document
    assert document["cost"]["billed_cost"] == attempts[0].cost["billed_cost"]
