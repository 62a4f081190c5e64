"""A Common Visual Engine round operated end to end: reference orchestrators, operated by the
platform, make their films by calling the gateway over real HTTP with their entry tokens."""

from __future__ import annotations

from decimal import Decimal

import pytest

from duel.celery import app as celery_app
from rounds import services
from rounds.engine_gateway import verify_gateway_log
from rounds.manifest import validate_manifest
from rounds.models import EngineRequest, Entry, GatewayLogRecord
from rounds.runner import operate
from tests import factories

pytestmark = pytest.mark.services


@pytest.fixture
def eager_tasks():
    """The gateway dispatches in the web process here (no worker in this test)."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


def test_orchestrators_call_the_gateway_and_the_engine_measures_reach_the_manifest(
    require_postgres, live_server, settings, eager_tasks
):
    settings.DUEL_PUBLIC_BASE_URL = live_server.url
    settings.DUEL_RUN_POLL_INTERVAL_S = 0.1
    controls = factories.engine_controls()
    controls["rate_limit_and_concurrency"] = {
        "requests_per_minute": 600,
        "concurrency": 2,
        "engine_slots": 1,
    }
    controls["credits_per_second"] = "1"
    round_ = factories.round_(
        benchmark_class="common_visual_engine",
        entries=0,
        engine_controls=controls,
        credit_limit_per_system=Decimal("100"),
    )
    entries = []
    for takes in (1, 2):
        entry = services.entry_add(round_=round_, system_version=factories.system_version())
        token = services.entry_issue_gateway_token(entry=entry)
        Entry.objects.filter(pk=entry.pk).update(
            provider_config={
                "adapter": "reference_orchestrator",
                "token": token,
                "plan": {
                    "params": {"resolution": "320x180"},
                    "shot_seconds": 10,
                    "takes_per_shot": takes,
                    "fps": 4,
                },
            }
        )
        entries.append(entry)
    round_ = services.round_open(round_=services.round_commit(round_=round_, actor="t"), actor="t")
    package = round_.packages.get()

    # One take per shot: 60 credits of 100, every clip used.
    frugal = operate(services.run_create(entry=entries[0], package=package).pk)
    assert frugal.final_state == "completed_conforming", frugal.final_reason
    requests = EngineRequest.objects.filter(run=frugal)
    assert requests.count() >= 6 and all(r.used_in_film for r in requests)
    assert sum(r.generated_seconds for r in requests) == pytest.approx(60.0)
    assert sum(r.charged_credits for r in requests) == Decimal("60")
    document = frugal.manifests.get().document
    validate_manifest(document)
    assert document["generated_seconds"] == 60.0 and document["discarded_seconds"] == 0.0
    assert sorted(document["raw_engine_output_hashes"]) == sorted(r.output_sha256 for r in requests)
    head = GatewayLogRecord.objects.filter(entry=entries[0]).order_by("-seq").first()
    assert document["gateway_log_hash"] == head.record_hash
    assert verify_gateway_log(entries[0]) is None

    # Two takes per shot need 120 credits: the entrant's system runs out of engine credit,
    # and the run ends budget_exhausted, with the clips it did make recorded as discarded.
    lavish = operate(services.run_create(entry=entries[1], package=package).pk)
    assert lavish.final_state == "budget_exhausted", lavish.final_reason
    spent = EngineRequest.objects.filter(run=lavish)
    assert sum(r.charged_credits for r in spent) <= Decimal("100")
    assert lavish.manifests.get().document["final_state"] == "budget_exhausted"
