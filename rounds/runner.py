"""Operating a run: the run rules (protocol: Run rules) driven through a provider adapter.

:func:`operate` is idempotent and resumable. It looks at where the run is and continues from
there, so a Celery worker killed at any step leaves a run that the redelivered task (or the
reaper) takes up again: an attempt already submitted is polled, not submitted again; an asset
already stored is not fetched again; nothing is charged twice. Network and ffmpeg work happen
between the services' transactions, never inside one.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from duel.canonical import canonical_sha256
from rounds import rules, services
from rounds.gateways.base import JobState, ProviderFailure, SystemProvider
from rounds.gateways.registry import get_system_provider
from rounds.models import Attempt, Run

log = logging.getLogger(__name__)


class DeadlineReached(Exception):
    """The round deadline passed while the provider was still working."""


def provider_config(run: Run) -> dict[str, Any]:
    """The entry's adapter configuration, completed with what the platform supplies."""
    round_ = run.entry.round
    config = dict(run.entry.provider_config or {"adapter": "reference"})
    adapter = config.get("adapter", "reference")
    if adapter in ("reference", "reference_orchestrator"):
        config.setdefault("protocol", round_.protocol_version.key)
    if adapter == "reference_orchestrator":
        controls = round_.engine_controls
        config.setdefault("gateway_url", settings.DUEL_PUBLIC_BASE_URL)
        config.setdefault("model", controls.get("engine_model_id"))
        config.setdefault("api_version", controls.get("api_version"))
        config.setdefault("plan", {"params": {"resolution": controls.get("resolution")}})
    return config


def _seed(run: Run) -> int:
    """One seed per run: every attempt submits the same brief with the same settings."""
    return int(hashlib.sha256(str(run.public_id).encode()).hexdigest()[:8], 16)


def _submitted_settings(run: Run) -> dict[str, Any]:
    submitted = dict(run.recorded_settings.get("system_settings") or {})
    if run.entry.round.benchmark_class == "common_visual_engine":
        # The entrant's system needs the run it works for, to name it at the gateway.
        submitted["duel_run"] = str(run.public_id)
    return submitted


def _touch(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(operated_at=timezone.now())


def _wait(provider: SystemProvider, run: Run, request_id: str) -> None:
    """Poll until the job finishes; raise its failure, or DeadlineReached at the deadline."""
    deadline = run.entry.round.deadline
    interval = float(getattr(settings, "DUEL_RUN_POLL_INTERVAL_S", 2.0))
    while True:
        status = provider.poll(request_id)
        if status.state == JobState.SUCCEEDED:
            return
        if status.state == JobState.FAILED:
            raise status.error
        if deadline and timezone.now() >= deadline:
            raise DeadlineReached(f"job {request_id} was still {status.state} at the deadline")
        _touch(run)
        time.sleep(interval)


def _safe_cost(provider: SystemProvider, request_id: str) -> dict[str, str] | None:
    if not request_id:
        return None
    try:
        return provider.cost(request_id).to_json()["amounts"]
    except ProviderFailure:
        return None


def _cost_amounts(report) -> dict[str, str]:
    return {k: str(v) for k, v in report.to_json()["amounts"].items()}


def _analyse(run: Run, attempt: Attempt):
    from media_pipeline.services import analysis_run

    round_ = run.entry.round
    return analysis_run(
        media_file=attempt.output,
        protocol_key=round_.protocol_version.key,
        duration_class=round_.duration_class,
        aspect_ratio=round_.aspect_ratio,
        thresholds=round_.detection_thresholds,
    )


def _failure_from_analysis(run: Run, problems: list[str]) -> str | None:
    """The failure code a validation report amounts to, if the protocol may retry it."""
    technical = rules.technical_failure(problems)
    if technical:
        return technical
    policy = run.entry.round.protocol.definition["retry_policy"]
    if policy["failure_reason_map"].get("wrong_duration_or_resolution") and any(
        p in ("duration_nonconforming", "aspect_ratio_mismatch") for p in problems
    ):
        return "wrong_duration_or_resolution"
    return None


def _engine_credit_exhausted(run: Run) -> bool:
    """In a common-engine round, has the entry no engine credit left for even a minimal clip?

    Then its system's failure is the budget's, not the provider's (final state
    budget_exhausted); so is a failure the gateway explained by the credit limit."""
    round_ = run.entry.round
    if round_.benchmark_class != "common_visual_engine" or round_.credit_limit_per_system is None:
        return False
    from rounds.engine_gateway import EngineSurface, credit_committed, credits_for

    surface = EngineSurface.of(round_)
    shortest = (surface.permitted_parameters.get("seconds") or {}).get("min", 1)
    needed = credits_for(surface, float(shortest))
    return credit_committed(run.entry) + needed > round_.credit_limit_per_system


def _operate_attempt(run: Run, attempt: Attempt, provider: SystemProvider) -> None:
    from media_pipeline.services import original_store
    from media_pipeline.storage import work_dir

    request_id = attempt.provider_request_id
    try:
        if attempt.state == Attempt.State.SUBMITTING:
            brief = run.package.content
            if canonical_sha256(brief) != run.package.sha256:
                raise RuntimeError("the package no longer matches its committed hash")
            submission = provider.submit(
                brief,
                _submitted_settings(run),
                seed=_seed(run),
                idempotency_key=str(attempt.idempotency_key),
            )
            request_id = submission.request_id
            attempt = services.attempt_submitted(attempt=attempt, provider_request_id=request_id)
        if attempt.state == Attempt.State.SUBMITTED:
            _wait(provider, run, request_id)
            with tempfile.TemporaryDirectory(dir=work_dir(), prefix="fetch-") as tmp:
                asset = provider.fetch(request_id, Path(tmp) / "original.bin")
                arrived_at = timezone.now()
                output = original_store(path=asset.path, kind="original")
            attempt = services.attempt_arrived(
                attempt=attempt,
                output=output,
                cost=_cost_amounts(asset.cost),
                local_compute=dict(asset.details.get("local_compute") or {}),
                arrived_at=arrived_at,
            )
            used = asset.details.get("engine_requests_used")
            if used is not None:
                from rounds.engine_gateway import engine_usage_record

                engine_usage_record(run=run, used_request_ids=list(used))
    except ProviderFailure as failure:
        services.attempt_fail(
            attempt=attempt,
            failure_code=str(failure.reason),
            message=str(failure),
            cost=_safe_cost(provider, request_id)
            or (_cost_amounts(failure.cost) if getattr(failure, "cost", None) else None),
            credit_exhausted="credit_limit" in failure.detail.get("gateway_codes", [])
            or _engine_credit_exhausted(run),
        )
        return
    except DeadlineReached as late:
        services.attempt_fail(
            attempt=attempt,
            failure_code="timeout",
            message=str(late),
            cost=_safe_cost(provider, request_id),
        )
        return
    if attempt.state == Attempt.State.ARRIVED:
        analysis = _analyse(run, attempt)
        failure_code = _failure_from_analysis(run, list(analysis.problems))
        if failure_code:
            decision = services.attempt_fail(
                attempt=attempt,
                failure_code=failure_code,
                message="; ".join(analysis.problems),
            )
            if decision.retry or decision.final_state != "completed_nonconforming":
                return
        else:
            services.attempt_accept(attempt=attempt)
        _record_validation(Run.objects.get(pk=run.pk), analysis)


def _record_validation(run: Run, analysis) -> Run:
    return services.run_validated(
        run=run,
        problems=list(analysis.problems),
        duration_s=analysis.duration_s,
        effective_duration_s=analysis.effective_duration_s,
        output_facts={
            key: analysis.report.get(key)
            for key in ("width", "height", "display_aspect_ratio", "fps")
        },
    )


def operate(run_id: int) -> Run:
    """Take the run from wherever it is to its end and write its manifest."""
    from media_pipeline.services import proxy_build
    from rounds.manifest import manifest_write

    run = Run.objects.select_related("entry__round__protocol_version", "package").get(pk=run_id)
    if run.state == Run.State.CREATED:
        run = services.run_start(run=run)
    if run.state == Run.State.STARTED:
        provider = get_system_provider(provider_config(run))
        while run.state == Run.State.STARTED:
            _touch(run)
            attempt = services.attempt_begin(run=run)
            _operate_attempt(run, attempt, provider)
            run = Run.objects.select_related("entry__round", "package").get(pk=run.pk)
    if run.state == Run.State.COLLECTED:
        run = _record_validation(run, _analyse(run, run.accepted_attempt))
    if run.state == Run.State.VALIDATED:
        _touch(run)
        proxy = proxy_build(
            media_file=run.accepted_attempt.output,
            protocol_key=run.entry.round.protocol_version.key,
        )
        run = services.run_proxy_attached(run=run, proxy_file=proxy.proxy_file)
    if run.state == Run.State.FINISHED and not run.manifests.exists():
        manifest_write(run=run)
    return Run.objects.get(pk=run.pk)


def stale_runs(older_than_s: float) -> list[int]:
    """Runs whose worker has not touched them for ``older_than_s`` seconds and that are not
    done: in progress, or finished without their manifest."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    in_progress = Q(state__in=[Run.State.STARTED, Run.State.COLLECTED, Run.State.VALIDATED])
    unmanifested = Q(state=Run.State.FINISHED, manifests__isnull=True)
    quiet = Q(operated_at__lt=cutoff) | Q(operated_at__isnull=True)
    return list(
        Run.objects.filter((in_progress | unmanifested) & quiet)
        .values_list("pk", flat=True)
        .distinct()
    )
