"""The common-engine gateway over HTTP: frozen controls, limits, credit, fairness, records."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal

import pytest

from rounds import services
from rounds.engine_gateway import engine_request_execute, verify_gateway_log
from rounds.engine_queue import drain, queue_for
from rounds.models import EngineRequest, Round
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def held_dispatch(monkeypatch):
    """Admitted requests stay queued (no dispatcher runs) until the test drains them."""
    from rounds import tasks

    monkeypatch.setattr(tasks.engine_dispatch, "delay", lambda *args, **kwargs: None)


def _cve_round(entries=2, **controls) -> Round:
    engine = factories.engine_controls()
    engine["rate_limit_and_concurrency"] = {
        "requests_per_minute": controls.pop("rpm", 60),
        "concurrency": controls.pop("concurrency", 2),
        "engine_slots": 1,
    }
    engine["credits_per_second"] = "1"
    return factories.open_round(
        benchmark_class="common_visual_engine",
        entries=entries,
        engine_controls=engine,
        credit_limit_per_system=controls.pop("credit", Decimal("50.00")),
        provider_config={"adapter": "reference_orchestrator", "token": "unused"},
        **controls,
    )


def _started_runs(round_: Round):
    """Per entry: (token, started run)."""
    out = []
    package = round_.packages.get()
    for entry in round_.entries.order_by("pk"):
        token = services.entry_issue_gateway_token(entry=entry)
        run = services.run_start(run=services.run_create(entry=entry, package=package))
        out.append((token, run))
    return out


def _body(run_, **overrides):
    body = {
        "model": "ref-video-1",
        "api_version": "2026-01",
        "prompt": "a lighthouse at dusk",
        "params": {"seconds": 1},
        "inputs": [{"type": "text"}],
        "run": str(run_.public_id),
    }
    body.update(overrides)
    return body


def _post(client, token, body):
    return client.post(
        "/api/v1/engine/requests",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


@pytest.mark.parametrize(
    "override,code",
    [
        ({"model": "another-engine"}, "model_refused"),
        ({"api_version": "2025-01"}, "api_version_refused"),
        ({"params": {"seconds": 1, "cfg_scale": 9}}, "parameter_refused"),
        ({"params": {"seconds": 30}}, "parameter_refused"),
        ({"params": {"seconds": 1, "resolution": "1920x1080"}}, "resolution_refused"),
        ({"inputs": [{"type": "video"}]}, "input_refused"),
        ({"inputs": [{"type": "uploaded_media"}]}, "input_refused"),
        ({"prompt": ""}, "bad_prompt"),
        ({"run": "00000000-0000-0000-0000-000000000000"}, "unknown_run"),
    ],
)
def test_gateway_refuses_what_the_round_froze_out(client, held_dispatch, override, code):
    round_ = _cve_round(entries=1)
    ((token, run),) = _started_runs(round_)
    response = _post(client, token, _body(run, **override))
    assert response.status_code in (400, 403, 409)
    assert response.json()["code"] == code
    assert response.json()["error"]
    assert not EngineRequest.objects.exists()


def test_gateway_needs_the_entry_token(client, held_dispatch):
    round_ = _cve_round(entries=1)
    ((_token, run),) = _started_runs(round_)
    assert _post(client, "", _body(run)).status_code == 401
    assert _post(client, "forged", _body(run)).status_code == 401
    bad_json = client.post(
        "/api/v1/engine/requests",
        data="{not json",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {_token}",
    )
    assert bad_json.status_code == 400 and bad_json.json()["code"] == "bad_json"


def test_one_entry_cannot_use_another_entrys_run(client, held_dispatch):
    round_ = _cve_round(entries=2)
    (token_a, _run_a), (_token_b, run_b) = _started_runs(round_)
    response = _post(client, token_a, _body(run_b))
    assert response.json()["code"] == "unknown_run"


def test_rate_limit_per_entry(client, held_dispatch):
    round_ = _cve_round(entries=2, rpm=3, concurrency=10)
    (token_a, run_a), (token_b, run_b) = _started_runs(round_)
    codes = [_post(client, token_a, _body(run_a)).status_code for _ in range(4)]
    assert codes == [202, 202, 202, 429]
    # The other entrant is held to its own limit, not to A's.
    assert _post(client, token_b, _body(run_b)).status_code == 202


def test_concurrency_limit_per_entry(client, held_dispatch):
    round_ = _cve_round(entries=1, concurrency=2)
    ((token, run),) = _started_runs(round_)
    assert _post(client, token, _body(run)).status_code == 202
    assert _post(client, token, _body(run)).status_code == 202
    third = _post(client, token, _body(run))
    assert third.status_code == 429 and third.json()["code"] == "concurrency_limited"
    # Finishing one frees a slot.
    first = EngineRequest.objects.order_by("pk").first()
    engine_request_execute(first.pk)
    assert _post(client, token, _body(run)).status_code == 202


def test_credit_is_reserved_before_the_engine_and_charged_after(client, held_dispatch):
    round_ = _cve_round(entries=1, credit=Decimal("3.00"), concurrency=5)
    ((token, run),) = _started_runs(round_)
    assert _post(client, token, _body(run, params={"seconds": 2})).status_code == 202
    refused = _post(client, token, _body(run, params={"seconds": 2}))
    assert refused.status_code == 402 and refused.json()["code"] == "credit_limit"
    usage = client.get("/api/v1/engine/usage", HTTP_AUTHORIZATION=f"Bearer {token}").json()
    assert Decimal(usage["credits_held"]) == Decimal("2")
    request = EngineRequest.objects.get()
    done = engine_request_execute(request.pk)
    assert done.state == "succeeded"
    assert done.charged_credits == Decimal("2.0000") and done.generated_seconds == 2.0
    assert done.output.kind == "raw_engine_output" and len(done.output_sha256) == 64
    assert _post(client, token, _body(run, params={"seconds": 1})).status_code == 202
    assert verify_gateway_log(run.entry) is None


def test_safety_block_and_engine_error_release_the_credit(client, held_dispatch, settings):
    settings.DUEL_ENGINE_ADAPTERS = {
        "duel-reference": {"adapter": "reference", "blocked_terms": ["forbidden"]}
    }
    round_ = _cve_round(entries=1, concurrency=5)
    ((token, run),) = _started_runs(round_)
    _post(client, token, _body(run, prompt="a forbidden scene"))
    blocked = engine_request_execute(EngineRequest.objects.get().pk)
    assert blocked.state == "safety_blocked"
    assert blocked.charged_credits == 0 and blocked.generated_seconds == 0
    usage = client.get("/api/v1/engine/usage", HTTP_AUTHORIZATION=f"Bearer {token}").json()
    assert Decimal(usage["credits_held"]) == 0


def test_requests_after_the_deadline_are_refused(client, held_dispatch):
    import time
    from datetime import timedelta

    from django.utils import timezone

    round_ = _cve_round(entries=1, deadline=timezone.now() + timedelta(seconds=1.5))
    ((token, run),) = _started_runs(round_)
    time.sleep(1.6)
    response = _post(client, token, _body(run))
    assert response.status_code == 403 and response.json()["code"] == "deadline_passed"


def test_flooded_requests_over_http_are_interleaved(
    client, held_dispatch, django_capture_on_commit_callbacks
):
    """Entrants submit in flood order (all of A's, then B's, then C's) over HTTP; the engine
    does not serve them first come, first served."""
    per_entrant = 12
    round_ = _cve_round(entries=3, rpm=1000, concurrency=per_entrant, credit=Decimal("1000"))
    started = _started_runs(round_)
    with django_capture_on_commit_callbacks(execute=True):
        for token, run in started:
            for _ in range(per_entrant):
                assert _post(client, token, _body(run)).status_code == 202
    submitted = list(EngineRequest.objects.order_by("pk").values_list("entry_id", flat=True))
    order: list[int] = []

    def record(request_id: int) -> None:
        order.append(EngineRequest.objects.get(pk=request_id).entry_id)

    queue = queue_for(round_.pk)
    assert queue.pending() == 3 * per_entrant
    assert drain(queue, 1, record) == 3 * per_entrant
    assert sorted(order) == sorted(submitted)
    assert order != submitted
    assert len(set(order[:per_entrant])) >= 2  # FIFO would serve only the flooder first


def test_fair_queue_shares_are_equal_over_many_requests(settings):
    """Over 900 queued requests the engine's time is split evenly among entrants.

    With a uniform choice of entrant, each entrant's count in the first and second thirds of
    the dispatch order is about 100 with a standard deviation of about 8; the bounds are four
    deviations wide. Each entrant's mean dispatch position is about 450 with a standard
    deviation of about 23 (measured over 3,000 simulated drains); its bounds are five
    deviations wide, far from the 150 and 750 a first-come queue gives the first and last
    entrant.
    A first-come queue fills the first third with the flooder's requests alone.
    """
    per_entrant = 300
    queue = queue_for(987654)
    if hasattr(queue, "clear"):
        queue.clear()
    request = 0
    for entrant in (1, 2, 3):  # flood order
        for _ in range(per_entrant):
            request += 1
            queue.push(entrant, entrant * 100000 + request)
    order = []
    drain(queue, 1, lambda r: order.append(r // 100000))
    assert len(order) == 3 * per_entrant
    # The last third is what the first two left over, so only the first two are free draws.
    for start in (0, per_entrant):
        counts = Counter(order[start : start + per_entrant])
        assert all(67 <= counts[e] <= 133 for e in (1, 2, 3)), counts
    mean_position = {
        e: sum(i for i, x in enumerate(order) if x == e) / per_entrant for e in (1, 2, 3)
    }
    # FIFO would give means 150, 450, 750; fair interleaving keeps them near 450.
    assert all(335 <= m <= 565 for m in mean_position.values()), mean_position


# ---------------------------------------------------------------------------------------------
# A worker killed mid-request: its slot lease lapses, the reaper releases its credit


def test_a_dead_workers_engine_slot_comes_back_after_its_lease():
    from rounds.engine_queue import LocalFairQueue

    now = [0.0]
    queue = LocalFairQueue(424242, lease_s=60, clock=lambda: now[0])
    dead = queue.acquire_slot(1)  # its worker dies holding it
    assert dead is not None and queue.acquire_slot(1) is None
    now[0] = 59.0
    assert queue.acquire_slot(1) is None  # still within the lease
    now[0] = 61.0
    alive = queue.acquire_slot(1)
    assert alive is not None and alive != dead
    queue.release_slot(alive)
    assert queue.acquire_slot(1) is not None


def test_redis_slot_leases_lapse_even_while_the_round_stays_busy(require_redis):
    import time
    import uuid

    from rounds.engine_queue import RedisFairQueue

    queue = RedisFairQueue(require_redis, f"lease-test-{uuid.uuid4().hex}", lease_s=1.5)
    queue.clear()
    dead = queue.acquire_slot(2)  # never released
    assert dead is not None
    start = time.monotonic()
    while time.monotonic() - start < 0.5:  # a second worker keeps using the other slot
        lease = queue.acquire_slot(2)
        assert lease is not None
        assert queue.acquire_slot(2) is None  # both slots are held: the dead lease counts
        queue.release_slot(lease)
        time.sleep(0.05)
    while time.monotonic() - start < 1.8:  # still busy while the dead lease runs out
        lease = queue.acquire_slot(2)
        assert lease is not None
        queue.release_slot(lease)
        time.sleep(0.05)
    both = [queue.acquire_slot(2), queue.acquire_slot(2)]  # the dead lease lapsed
    assert None not in both
    queue.push(7, 70)
    assert queue.holds(7, 70) and not queue.holds(7, 71) and not queue.holds(8, 70)
    queue.clear()


def test_the_reaper_fails_a_request_its_worker_left_running_and_releases_the_credit(
    client, held_dispatch, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from rounds.engine_gateway import engine_request_start, engine_requests_reap

    round_ = _cve_round(entries=1, credit=Decimal("3.00"), concurrency=1)
    ((token, run),) = _started_runs(round_)
    with django_capture_on_commit_callbacks(execute=True):
        assert _post(client, token, _body(run, params={"seconds": 2})).status_code == 202
    queue = queue_for(round_.pk)
    request = EngineRequest.objects.get()
    assert queue.pop() == request.pk
    engine_request_start(request=request)  # the worker took it, then was killed
    refused = _post(client, token, _body(run, params={"seconds": 1}))
    assert refused.status_code == 429  # the dead request holds the entry's concurrency

    assert engine_requests_reap(older_than_s=600).failed == []  # not stale yet
    EngineRequest.objects.filter(pk=request.pk).update(
        started_at=timezone.now() - timedelta(seconds=601)
    )
    reaped = engine_requests_reap(older_than_s=600)
    assert reaped.failed == [request.pk] and reaped.requeued == []
    request.refresh_from_db()
    assert request.state == "failed" and request.charged_credits == 0
    assert "worker running this request stopped" in request.error
    usage = client.get("/api/v1/engine/usage", HTTP_AUTHORIZATION=f"Bearer {token}").json()
    assert Decimal(usage["credits_held"]) == 0
    assert verify_gateway_log(run.entry) is None
    assert _post(client, token, _body(run, params={"seconds": 2})).status_code == 202
    assert engine_requests_reap(older_than_s=600).failed == []  # nothing twice


def test_the_reaper_queues_again_a_request_its_dispatcher_dropped(
    client, held_dispatch, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from rounds.engine_gateway import engine_requests_reap

    round_ = _cve_round(entries=1, concurrency=5)
    ((token, run),) = _started_runs(round_)
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(2):
            assert _post(client, token, _body(run)).status_code == 202
    dropped, waiting = EngineRequest.objects.order_by("pk")
    queue = queue_for(round_.pk)
    assert queue.pop() == dropped.pk  # the dispatcher died right after taking it
    EngineRequest.objects.update(created_at=timezone.now() - timedelta(seconds=601))
    with django_capture_on_commit_callbacks(execute=False) as dispatches:
        reaped = engine_requests_reap(older_than_s=600)
    assert reaped.requeued == [dropped.pk] and reaped.failed == []
    assert len(dispatches) == 1  # the round's dispatcher is woken
    assert engine_requests_reap(older_than_s=600).requeued == []  # the queue holds it now
    assert queue.pending() == 2
    ran = []
    drain(queue, 1, lambda pk: ran.append(engine_request_execute(pk).pk))
    assert sorted(ran) == [dropped.pk, waiting.pk]
    assert set(EngineRequest.objects.values_list("state", flat=True)) == {"succeeded"}
