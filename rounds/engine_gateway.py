"""The common-engine gateway (protocol: Common-engine controls).

Entrants' orchestration systems call the one video engine only through this gateway, with a
per-entry token. The gateway refuses what the round froze out, holds each entry to its rate
limit, concurrency and credit limit (credit is reserved before the engine is called and
charged or released after), interleaves entrants' requests in random order through a fair
queue, records every engine measure, archives every raw output with its SHA-256, and keeps an
append-only, hash-chained gateway log per entry whose head goes into the run manifest.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from duel.canonical import canonical_json, canonical_sha256
from rounds.models import EngineRequest, Entry, GatewayLogRecord, Round, Run, Season
from rounds.services import salted_hash

GENESIS = "0" * 64
CREDIT_QUANTUM = Decimal("0.0001")


class GatewayRefusal(Exception):
    """A request the round's frozen controls refuse; ``status`` is the HTTP answer."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def authenticate(token: str) -> Entry:
    """The entry a gateway token belongs to; a refusal for an unknown token."""
    if not token:
        raise GatewayRefusal("unauthenticated", "send Authorization: Bearer <entry token>", 401)
    entry = (
        Entry.objects.select_related("round__protocol_version", "round__season")
        .filter(gateway_token_hash=token_hash(token))
        .first()
    )
    if entry is None:
        raise GatewayRefusal("unauthenticated", "unknown gateway token", 401)
    return entry


@dataclass(frozen=True)
class EngineSurface:
    """The frozen engine controls of a round, read once."""

    model_id: str
    api_version: str
    resolution: str
    permitted_parameters: dict[str, dict[str, Any]]
    permitted_inputs: list[str]
    credits_per_second: Decimal
    requests_per_minute: int
    concurrency: int
    engine_slots: int

    @classmethod
    def of(cls, round_: Round) -> EngineSurface:
        controls = round_.engine_controls
        limits = controls.get("rate_limit_and_concurrency") or {}
        return cls(
            model_id=str(controls["engine_model_id"]),
            api_version=str(controls["api_version"]),
            resolution=str(controls["resolution"]),
            permitted_parameters=dict(controls.get("permitted_parameters") or {}),
            permitted_inputs=list(controls.get("permitted_engine_inputs") or ["text"]),
            credits_per_second=Decimal(str(controls.get("credits_per_second", "1"))),
            requests_per_minute=int(limits.get("requests_per_minute", 60)),
            concurrency=int(limits.get("concurrency", 1)),
            engine_slots=int(limits.get("engine_slots", 1)),
        )


def _check_surface(surface: EngineSurface, body: dict[str, Any]) -> dict[str, Any]:
    """Refuse anything outside the frozen surface; return the parameters sent to the engine."""
    if body.get("model") != surface.model_id:
        raise GatewayRefusal(
            "model_refused",
            f"this round's engine is {surface.model_id!r}; {body.get('model')!r} is refused",
        )
    if str(body.get("api_version")) != surface.api_version:
        raise GatewayRefusal(
            "api_version_refused",
            f"this round's API version is {surface.api_version!r}; "
            f"{body.get('api_version')!r} is refused",
        )
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > 4000:
        raise GatewayRefusal("bad_prompt", "prompt must be a non-empty string of ≤ 4000 chars")
    inputs = body.get("inputs") or [{"type": "text"}]
    if not isinstance(inputs, list):
        raise GatewayRefusal("bad_inputs", "inputs must be a list of {type}")
    for item in inputs:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in ("video", "video_to_video"):
            raise GatewayRefusal(
                "input_refused", "video-to-video replacement is banned in this class"
            )
        if kind not in surface.permitted_inputs:
            raise GatewayRefusal(
                "input_refused",
                f"engine input {kind!r} is not permitted (permitted: {surface.permitted_inputs})",
            )
    params = body.get("params") or {}
    if not isinstance(params, dict):
        raise GatewayRefusal("bad_params", "params must be an object")
    resolution = params.get("resolution", surface.resolution)
    if resolution != surface.resolution:
        raise GatewayRefusal(
            "resolution_refused",
            f"this round's resolution is {surface.resolution}; {resolution!r} is refused",
        )
    outside = sorted(set(params) - set(surface.permitted_parameters) - {"resolution"})
    if outside:
        raise GatewayRefusal(
            "parameter_refused", f"parameters outside the permitted surface: {outside}"
        )
    for name, rule in surface.permitted_parameters.items():
        if name not in params:
            continue
        value = params[name]
        if "choices" in rule and value not in rule["choices"]:
            raise GatewayRefusal("parameter_refused", f"{name} must be one of {rule['choices']}")
        if "min" in rule or "max" in rule:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise GatewayRefusal("parameter_refused", f"{name} must be a number")
            if "min" in rule and value < rule["min"]:
                raise GatewayRefusal("parameter_refused", f"{name} must be ≥ {rule['min']}")
            if "max" in rule and value > rule["max"]:
                raise GatewayRefusal("parameter_refused", f"{name} must be ≤ {rule['max']}")
    if "seconds" not in params:
        raise GatewayRefusal("parameter_refused", "params.seconds is required")
    return {**params, "resolution": surface.resolution}


def credits_for(surface: EngineSurface, seconds: float) -> Decimal:
    return (surface.credits_per_second * Decimal(str(seconds))).quantize(
        CREDIT_QUANTUM, rounding=ROUND_HALF_UP
    )


def credit_committed(entry: Entry) -> Decimal:
    """Credit held by this entry: reserved for requests in flight plus charged for the rest."""
    requests = EngineRequest.objects.filter(entry=entry)
    in_flight = requests.filter(state__in=["queued", "running"]).aggregate(
        s=Sum("reserved_credits")
    )["s"] or Decimal(0)
    charged = requests.exclude(state__in=["queued", "running"]).aggregate(s=Sum("charged_credits"))[
        "s"
    ] or Decimal(0)
    return in_flight + charged


def gateway_log_append(entry: Entry, event: dict[str, Any]) -> GatewayLogRecord:
    """Append to the entry's hash chain (the caller holds the entry's row lock)."""
    head = GatewayLogRecord.objects.filter(entry=entry).order_by("-seq").first()
    prev = head.record_hash if head else GENESIS
    seq = (head.seq + 1) if head else 1
    record_hash = hashlib.sha256(prev.encode() + canonical_json(event)).hexdigest()
    return GatewayLogRecord.objects.create(
        entry=entry, seq=seq, event=event, prev_hash=prev, record_hash=record_hash
    )


def verify_gateway_log(entry: Entry) -> int | None:
    """The first broken sequence number of the entry's chain, or None when it verifies."""
    prev = GENESIS
    for record in GatewayLogRecord.objects.filter(entry=entry).order_by("seq"):
        expected = hashlib.sha256(prev.encode() + canonical_json(record.event)).hexdigest()
        if record.prev_hash != prev or record.record_hash != expected:
            return record.seq
        prev = record.record_hash
    return None


@transaction.atomic
def engine_request_create(*, entry: Entry, body: dict[str, Any]) -> EngineRequest:
    """Admit one engine request: check the frozen controls, reserve credit, queue it."""
    entry = Entry.objects.select_for_update(no_key=True).get(pk=entry.pk)
    round_ = entry.round
    if round_.benchmark_class != "common_visual_engine":
        raise GatewayRefusal("not_common_engine", "this round has no common engine", 403)
    if round_.state != Round.State.OPEN:
        raise GatewayRefusal("round_not_open", f"round {round_.slug} is {round_.state}", 403)
    now = timezone.now()
    if round_.deadline and now >= round_.deadline:
        raise GatewayRefusal("deadline_passed", "the round deadline has passed", 403)
    if round_.season_id and round_.season.state == Season.State.CLOSED:
        raise GatewayRefusal("season_closed", f"season {round_.season.name} is closed", 403)
    run_id = body.get("run")
    run = Run.objects.filter(public_id=run_id, entry=entry).first() if run_id else None
    if run is None:
        raise GatewayRefusal("unknown_run", "body.run must name one of this entry's runs", 400)
    if run.state != Run.State.STARTED:
        raise GatewayRefusal("run_not_started", f"run {run.public_id} is {run.state}", 409)
    surface = EngineSurface.of(round_)
    params = _check_surface(surface, body)
    recent = EngineRequest.objects.filter(
        entry=entry, created_at__gte=now - timedelta(seconds=60)
    ).count()
    if recent >= surface.requests_per_minute:
        raise GatewayRefusal(
            "rate_limited",
            f"rate limit: {surface.requests_per_minute} requests per minute per entry",
            429,
        )
    in_flight = EngineRequest.objects.filter(entry=entry, state__in=["queued", "running"]).count()
    if in_flight >= surface.concurrency:
        raise GatewayRefusal(
            "concurrency_limited",
            f"concurrency limit: {surface.concurrency} requests in flight per entry",
            429,
        )
    reserve = credits_for(surface, float(params["seconds"]))
    limit = round_.credit_limit_per_system
    committed = credit_committed(entry)
    if limit is not None and committed + reserve > limit:
        raise GatewayRefusal(
            "credit_limit",
            f"credit limit {limit}: {committed} held, this request needs {reserve}",
            402,
        )
    request = EngineRequest.objects.create(
        entry=entry,
        run=run,
        prompt=body["prompt"],
        params=params,
        reserved_credits=reserve,
    )
    gateway_log_append(
        entry,
        {
            "event": "admitted",
            "request": str(request.public_id),
            "run": str(run.public_id),
            "prompt_sha256": hashlib.sha256(request.prompt.encode()).hexdigest(),
            "params": params,
            "reserved_credits": str(reserve),
            "at": now.isoformat(),
        },
    )
    return request


@transaction.atomic
def engine_request_start(*, request: EngineRequest) -> EngineRequest | None:
    """Move a queued request to running; None when it is no longer queued (redelivery)."""
    request = EngineRequest.objects.select_for_update(no_key=True).get(pk=request.pk)
    if request.state != EngineRequest.State.QUEUED:
        return None
    request.state = EngineRequest.State.RUNNING
    request.started_at = timezone.now()
    request.save(update_fields=["state", "started_at"])
    return request


@transaction.atomic
def engine_request_finish(
    *,
    request: EngineRequest,
    seconds: float = 0.0,
    output=None,
    provider_request_id: str = "",
    cost: dict[str, Any] | None = None,
    failure_reason: str = "",
    error: str = "",
) -> EngineRequest:
    """Charge (or release) the reserved credit and record the engine measures."""
    entry = Entry.objects.select_for_update(no_key=True).get(pk=request.entry_id)
    request = EngineRequest.objects.select_for_update(no_key=True).get(pk=request.pk)
    if request.state not in (EngineRequest.State.RUNNING, EngineRequest.State.QUEUED):
        return request
    surface = EngineSurface.of(entry.round)
    if failure_reason == "safety_block":
        request.state = EngineRequest.State.SAFETY_BLOCKED
    elif failure_reason:
        request.state = EngineRequest.State.FAILED
    else:
        request.state = EngineRequest.State.SUCCEEDED
    charged = credits_for(surface, seconds) if request.state == "succeeded" else Decimal(0)
    # The reservation is the ceiling: an engine that overran the requested length is charged
    # what was reserved, never more than the entry was allowed to hold.
    request.charged_credits = min(charged, request.reserved_credits)
    request.generated_seconds = round(float(seconds), 3) if request.state == "succeeded" else 0.0
    request.provider_request_id = provider_request_id
    request.provider_request_id_hash = (
        salted_hash(provider_request_id, purpose="engine-request") if provider_request_id else ""
    )
    request.error = f"{failure_reason}: {error}"[:2000] if failure_reason else ""
    if output is not None:
        request.output = output
        request.output_sha256 = output.sha256
    request.finished_at = timezone.now()
    request.save(
        update_fields=[
            "state",
            "charged_credits",
            "generated_seconds",
            "provider_request_id",
            "provider_request_id_hash",
            "error",
            "output",
            "output_sha256",
            "finished_at",
        ]
    )
    gateway_log_append(
        entry,
        {
            "event": "finished",
            "request": str(request.public_id),
            "state": request.state,
            "generated_seconds": request.generated_seconds,
            "charged_credits": str(request.charged_credits),
            "released_credits": str(request.reserved_credits - request.charged_credits),
            "provider_request_id_hash": request.provider_request_id_hash or None,
            "output_sha256": request.output_sha256 or None,
            "engine_cost": cost or {},
            "error": request.error or None,
            "at": request.finished_at.isoformat(),
        },
    )
    return request


@transaction.atomic
def engine_usage_record(*, run: Run, used_request_ids: list[str]) -> None:
    """Mark which clips the entrant used in the assembled film; the rest are discarded."""
    entry = Entry.objects.select_for_update(no_key=True).get(pk=run.entry_id)
    used = {str(x) for x in used_request_ids}
    for request in EngineRequest.objects.filter(run=run, state=EngineRequest.State.SUCCEEDED):
        request.used_in_film = str(request.public_id) in used
        request.save(update_fields=["used_in_film"])
    gateway_log_append(
        entry,
        {
            "event": "usage",
            "run": str(run.public_id),
            "used": sorted(used),
            "used_sha256": canonical_sha256(sorted(used)),
        },
    )


def engine_adapter_config(round_: Round) -> dict[str, Any]:
    """The adapter for the round's engine provider (settings.DUEL_ENGINE_ADAPTERS)."""
    provider = round_.engine_controls["engine_provider"]
    adapters = getattr(settings, "DUEL_ENGINE_ADAPTERS", {})
    if provider not in adapters:
        raise GatewayRefusal(
            "engine_unavailable", f"no adapter is configured for engine {provider!r}", 503
        )
    return dict(adapters[provider])


def engine_request_execute(request_id: int) -> EngineRequest:
    """Run one admitted request on the engine (outside any transaction) and record it."""
    from media_pipeline.services import original_store
    from rounds.gateways.base import ProviderFailure
    from rounds.gateways.registry import get_video_engine

    request = EngineRequest.objects.select_related("entry__round").get(pk=request_id)
    started = engine_request_start(request=request)
    if started is None:
        return EngineRequest.objects.get(pk=request_id)
    round_ = request.entry.round
    engine = get_video_engine(engine_adapter_config(round_))
    seed = int(hashlib.sha256(str(request.public_id).encode()).hexdigest()[:8], 16)
    engine_params = {k: v for k, v in request.params.items() if k != "seed"}
    from media_pipeline.storage import work_dir

    with tempfile.TemporaryDirectory(dir=work_dir(), prefix="engine-") as tmp:
        dest = Path(tmp) / "clip.mp4"
        try:
            clip = engine.generate(
                request.prompt, engine_params, seed=request.params.get("seed", seed), dest_path=dest
            )
        except ProviderFailure as failure:
            return engine_request_finish(
                request=started,
                failure_reason=str(failure.reason),
                error=str(failure),
                provider_request_id=failure.provider_request_id or "",
            )
        output = original_store(path=clip.path, kind="raw_engine_output")
        return engine_request_finish(
            request=started,
            seconds=clip.seconds,
            output=output,
            provider_request_id=clip.provider_request_id,
            cost=clip.cost.to_json(),
        )


@dataclass(frozen=True)
class EngineReap:
    failed: list[int]
    requeued: list[int]


def engine_requests_reap(*, older_than_s: float | None = None) -> EngineReap:
    """Take care of engine requests that a dead worker left behind.

    A request "running" for longer than ``older_than_s`` (default: the engine request timeout)
    lost its worker mid-call: it is finished as an infrastructure failure, so its reserved
    credit is released, nothing is charged, the entry's concurrency is freed and the
    entrant's client sees the failure. A request still "queued" that long whose dispatcher
    died after taking it off the queue is queued again (only when the queue no longer holds
    it); ``engine_request_start`` runs a request once whichever delivery reaches it first.
    """
    from rounds.engine_queue import queue_for

    age = settings.DUEL_ENGINE_REQUEST_TIMEOUT_S if older_than_s is None else older_than_s
    cutoff = timezone.now() - timedelta(seconds=float(age))
    failed = []
    for request in EngineRequest.objects.filter(
        state=EngineRequest.State.RUNNING, started_at__lt=cutoff
    ):
        done = engine_request_finish(
            request=request,
            failure_reason="infrastructure_failure",
            error=f"the worker running this request stopped; no answer after {age:g} s",
        )
        if done.state == EngineRequest.State.FAILED:
            failed.append(done.pk)
    requeued: list[int] = []
    rounds: set[int] = set()
    stranded = EngineRequest.objects.filter(
        state=EngineRequest.State.QUEUED, created_at__lt=cutoff
    ).select_related("entry")
    for request in stranded:
        queue = queue_for(request.entry.round_id)
        if not queue.holds(request.entry_id, request.pk):
            queue.push(request.entry_id, request.pk)
            requeued.append(request.pk)
            rounds.add(request.entry.round_id)
    if rounds:
        from rounds.tasks import engine_dispatch

        for round_id in sorted(rounds):
            transaction.on_commit(lambda r=round_id: engine_dispatch.delay(r))
    return EngineReap(failed=failed, requeued=requeued)
