"""Factories for the domain models: valid defaults, override what a test is about."""

from __future__ import annotations

import itertools
from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from rounds import services
from rounds.models import Round, System, SystemVersion
from rounds.samples import sample_checklist, sample_package

_counter = itertools.count(1)


def protocol_version(key: str = "ai-duel-0.1"):
    return services.protocol_version_install(key=key)


def system_version(name: str | None = None, **overrides) -> SystemVersion:
    n = next(_counter)
    system = System.objects.create(name=name or f"System {n}", vendor=f"Vendor {n}")
    fields = {"version": "1.0", "customer_tier": "pro", "settings": {"quality": "high"}}
    fields.update(overrides)
    return SystemVersion.objects.create(system=system, **fields)


def round_(
    *,
    protocol: str = "ai-duel-0.1",
    duration_class: str = "minute_1",
    benchmark_class: str = "best_complete_system",
    prompt_track: str = "brief_to_film",
    result_type: str = "leaderboard",
    aspect_ratio: str | None = None,
    packages: int | None = None,
    entries: int | None = None,
    provider_config: dict | None = None,
    **overrides,
) -> Round:
    """A draft round with packages and entries, ready to commit.

    By default a round of the protocol's fixed scope when it has one (Tovaki: one package per
    task lane, one entry per model integration at its resolution tier, its aspect ratio and
    clip length); otherwise one package and two entries at 16:9.
    """
    n = next(_counter)
    version = protocol_version(protocol)
    scope = version.protocol.fixed_scope
    lanes = version.protocol.task_lanes
    if scope:
        duration_class = next(
            name
            for name, spec in version.protocol.duration_classes.items()
            if spec["target_s"] == scope["duration_seconds"]
        )
    aspect_ratio = aspect_ratio or (scope["aspect_ratio"] if scope else "16:9")
    packages = (len(lanes) if scope else 1) if packages is None else packages
    entries = (scope["model_integrations"] if scope else 2) if entries is None else entries
    tier = scope["resolution_tier"] if scope else "pro"
    fields = dict(
        slug=f"round-{n}",
        title=f"Round {n}",
        protocol_version=version,
        result_type=result_type,
        benchmark_class=benchmark_class,
        prompt_track=prompt_track,
        duration_class=duration_class,
        aspect_ratio=aspect_ratio,
        budget_per_system=Decimal("100.00"),
        cost_ceiling=Decimal("150.00"),
        deadline=timezone.now() + timedelta(days=7),
        retry_limit=2,
        human_action_cap=3,
        detection_thresholds=detection_thresholds(),
    )
    if benchmark_class == "common_visual_engine":
        fields["credit_limit_per_system"] = Decimal("50.00")
        fields["engine_controls"] = engine_controls()
    fields.update(overrides)
    round_obj = Round.objects.create(**fields)
    for i in range(packages):
        services.package_add(
            round_=round_obj,
            prompt_key=f"T{i + 1}" if scope else f"P{i + 1}",
            task_lane=lanes[i % len(lanes)] if scope else "",
            content=sample_package(
                i,
                duration_class=duration_class,
                aspect_ratio=aspect_ratio,
                prompt_track=prompt_track,
            ),
            checklist=sample_checklist(i),
        )
    for _ in range(entries):
        services.entry_add(
            round_=round_obj,
            system_version=system_version(customer_tier=tier),
            provider_config=provider_config or {"adapter": "reference", "profile": "good"},
        )
    return round_obj


def detection_thresholds() -> dict:
    from rounds.models import default_detection_controls

    return default_detection_controls()


def engine_controls() -> dict:
    return {
        "engine_provider": "duel-reference",
        "engine_model_id": "ref-video-1",
        "api_version": "2026-01",
        "provider_region": "local",
        "account_tier": "standard",
        "permitted_parameters": {"seconds": {"min": 1, "max": 10}, "seed": {}, "style": {}},
        "resolution": "320x180",
        "permitted_engine_inputs": ["text"],
        "credit_limit_per_system": "50.00",
        "production_budget_per_system": "100.00",
        "deadline": (timezone.now() + timedelta(days=7)).isoformat(),
        "technical_retry_limit": 2,
        "human_action_limit": 0,
        "rate_limit_and_concurrency": {"requests_per_minute": 60, "concurrency": 2},
    }


def committed_round(**kwargs) -> Round:
    round_obj = round_(**kwargs)
    return services.round_commit(round_=round_obj, actor="test")


def open_round(**kwargs) -> Round:
    round_obj = committed_round(**kwargs)
    return services.round_open(round_=round_obj, actor="test")


def media_file(path, *, kind: str = "proxy"):
    """Store a local file in the default storage under an opaque name; return its MediaFile."""
    import hashlib
    import secrets
    from pathlib import Path

    from django.core.files import File
    from django.core.files.storage import default_storage

    from media_pipeline.models import MediaFile

    path = Path(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    name = f"{kind}/{secrets.token_hex(16)}.mp4"
    with path.open("rb") as fh:
        stored = default_storage.save(name, File(fh))
    return MediaFile.objects.create(
        kind=kind, storage_name=stored, sha256=digest, size_bytes=path.stat().st_size
    )


def finished_run(entry, package, *, original_path, proxy_path=None, problems=(), cost=None):
    """A run taken through the run-rule services to its end, with real media files."""
    from rounds.models import Run

    run = services.run_create(entry=entry, package=package)
    run = services.run_start(run=run)
    attempt = services.attempt_begin(run=run)
    attempt = services.attempt_submitted(attempt=attempt, provider_request_id=f"req-{run.pk}")
    original = media_file(original_path, kind="original")
    services.attempt_arrived(
        attempt=attempt,
        output=original,
        cost=cost or {"billed_cost": "1.00", "public_list_cost": "1.20"},
    )
    services.attempt_accept(attempt=attempt)
    run = services.run_validated(
        run=Run.objects.get(pk=run.pk),
        problems=list(problems),
        duration_s=60.0,
        effective_duration_s=60.0,
        output_facts={"width": 320, "height": 180, "display_aspect_ratio": "16:9", "fps": 12},
    )
    proxy = media_file(proxy_path or original_path, kind="proxy")
    run = services.run_proxy_attached(run=run, proxy_file=proxy)
    from rounds.manifest import manifest_write

    manifest_write(run=run)
    return run
