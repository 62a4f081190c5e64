"""The run manifest (protocol: Run manifest): built from the run, validated against the schema.

The manifest carries the system's identity, so before the round's reveal the public endpoint
serves :func:`blinded` instead: identity fields withheld, the committed SHA-256 shown, so the
full document can be checked against the log once it is published.
"""

from __future__ import annotations

import json
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from django.conf import settings
from django.db import transaction
from django.urls import reverse

from duel.canonical import canonical_sha256
from ledger.selectors import log_root
from ledger.services import entry_append
from rounds.models import Attempt, Disclosure, Run, RunManifest

SCHEMA_PATH = Path(settings.BASE_DIR) / "schemas" / "run-manifest.schema.json"
# Withheld before the reveal: the identity itself, and the proxy address, which would let a
# voter link a film seen on a vote page to this run.
IDENTITY_FIELDS = (
    "system",
    "engines",
    "customer_tier",
    "audio_providers",
    "disclosures",
    "public_proxy_url",
)


@cache
def manifest_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validate_manifest(document: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` when the document breaks the published schema."""
    jsonschema.Draft202012Validator(
        manifest_schema(), format_checker=jsonschema.FormatChecker()
    ).validate(document)


def _engine_measures(run: Run) -> dict[str, Any]:
    requests = list(run.engine_requests.all())
    generated = sum(r.generated_seconds for r in requests)
    discarded = sum(r.generated_seconds for r in requests if r.used_in_film is False)
    head = run.entry.gateway_log.order_by("-seq").first()
    return {
        "generated_seconds": round(generated, 3),
        "discarded_seconds": round(discarded, 3),
        "raw_engine_output_hashes": [r.output_sha256 for r in requests if r.output_sha256],
        "gateway_log_hash": head.record_hash if head else None,
        "safety_events": [
            {
                "engine_request": str(r.public_id),
                "at": r.finished_at.isoformat() if r.finished_at else None,
            }
            for r in requests
            if r.state == r.State.SAFETY_BLOCKED
        ],
        "engine_cost": str(sum((r.charged_credits for r in requests), Decimal(0))),
    }


def build_manifest(run: Run) -> dict[str, Any]:
    """The manifest document for a finished run, with every field the protocol lists."""
    from rounds.services import run_cost_summary

    round_ = run.entry.round
    protocol = round_.protocol
    attempts = list(run.attempts.order_by("number"))
    failed = [a for a in attempts if a.state == Attempt.State.FAILED]
    costs = run_cost_summary(run)
    engine = _engine_measures(run)
    facts = run.output_facts or {}
    recorded = run.recorded_system or {}
    disclosures = Disclosure.objects.filter(round=round_) | Disclosure.objects.filter(
        system=run.entry.system_version.system
    )
    actual = (
        Decimal(costs.get("billed_cost", "0"))
        + Decimal(costs.get("internal_compute_estimate", "0"))
        + Decimal(costs.get("storage_delivery_cost", "0"))
    )
    safety = [
        {"attempt": a.number, "at": a.ended_at.isoformat() if a.ended_at else None}
        for a in attempts
        if a.failure_code == "safety_block"
    ] + engine["safety_events"]
    document = {
        "manifest_version": 1,
        "run_id": str(run.public_id),
        "round": round_.slug,
        "entry_label": run.entry.label,
        "final_state": run.final_state,
        "exhibition": {"is_exhibition": run.is_exhibition, "reason": run.exhibition_reason},
        "protocol_version": {
            "key": round_.protocol_version.key,
            "version": round_.protocol_version.version,
            "sha256": round_.protocol_version.sha256,
        },
        "result_type": round_.result_type,
        "benchmark_class": round_.benchmark_class,
        "interaction_class": round_.interaction_class,
        "prompt_track": round_.prompt_track,
        "duration_class": round_.duration_class,
        "system": {
            "name": recorded.get("system", run.entry.system_version.system.name),
            "version": recorded.get("version", run.entry.system_version.version),
            "vendor": recorded.get("vendor", run.entry.system_version.system.vendor),
        },
        "engines": recorded.get("engines", []),
        "test_datetime": {
            "started_at": (run.clock_started_at or run.created_at).isoformat(),
            "time_zone": "UTC",
        },
        "prompt_hash": run.package.sha256,
        "requirement_checklist_hash": run.package.checklist_sha256,
        "output_checksum": {"algorithm": "SHA-256", "value": run.output_sha256 or None},
        "duration": {
            "target_s": protocol.target_s(round_.duration_class),
            "tolerance_s": protocol.tolerance_s(round_.duration_class),
            "actual_s": run.duration_s,
            "effective_s": run.effective_duration_s,
            "conforming": (
                None
                if run.duration_s is None
                else "duration_nonconforming" not in (run.problems or [])
            ),
        },
        "aspect_ratio": {
            "required": round_.aspect_ratio,
            "actual": facts.get("display_aspect_ratio"),
        },
        "resolution": (
            {"width": int(facts["width"]), "height": int(facts["height"])}
            if facts.get("width") and facts.get("height")
            else None
        ),
        "customer_tier": recorded.get("customer_tier", run.entry.system_version.customer_tier),
        "credit_limit": (
            str(round_.credit_limit_per_system)
            if round_.credit_limit_per_system is not None
            else None
        ),
        "cost": {
            "currency": round_.currency,
            "actual": str(actual),
            "equivalent": costs.get("public_list_cost", "0"),
            **{name: costs.get(name, "0") for name in protocol.cost_fields},
            "local_compute": [a.local_compute for a in attempts if a.local_compute],
        },
        "wall_time_s": run.wall_time_s,
        "generated_seconds": engine["generated_seconds"],
        "discarded_seconds": engine["discarded_seconds"],
        "retries": {
            "count": sum(1 for a in failed if a.retry_reason),
            "reasons": [a.retry_reason for a in failed if a.retry_reason],
        },
        "failure_events": [
            {
                "attempt": a.number,
                "failure_code": a.failure_code,
                "retry_reason": a.retry_reason or None,
                "message": a.failure_message,
                "provider_request_id_hash": a.provider_request_id_hash or None,
                "at": a.ended_at.isoformat() if a.ended_at else None,
            }
            for a in failed
        ],
        "human_actions": [
            {
                "class": h.action_class,
                "description": h.description,
                "occurred_at": h.occurred_at.isoformat(),
            }
            for h in run.human_actions.all()
        ],
        "raw_engine_output_hashes": engine["raw_engine_output_hashes"],
        "gateway_log_hash": engine["gateway_log_hash"],
        "public_proxy_url": (
            reverse("media-proxy", kwargs={"storage_name": run.proxy_file.storage_name})
            if run.proxy_file_id
            else None
        ),
        "transparency_log_root": log_root(),
        "source_asset_policy": round_.source_asset_policy,
        "audio_providers": recorded.get("audio_providers", []),
        "safety_events": safety,
        "disclosures": [
            {"kind": d.kind, "party": d.party, "text": d.text} for d in disclosures.distinct()
        ],
    }
    operator = (protocol.definition.get("governance") or {}).get("operator_disclosure")
    if operator:
        document["disclosures"].insert(
            0, {"kind": "operator_relationship", "party": "operator", "text": operator}
        )
    return document


@transaction.atomic
def manifest_write(*, run: Run) -> RunManifest:
    """Write the manifest of a finished run (append-only; a rewrite supersedes the last one)."""
    run = Run.objects.select_for_update(no_key=True).get(pk=run.pk)
    if run.state != Run.State.FINISHED:
        raise ValueError(f"{run} has not finished: its manifest comes at the end")
    document = build_manifest(run)
    validate_manifest(document)
    digest = canonical_sha256(document)
    previous = run.manifests.filter(superseded_by__isnull=True).order_by("-id").first()
    entry = entry_append(
        kind="manifest",
        subject=f"run:{run.public_id}",
        payload={"sha256": digest, "supersedes_manifest": previous.sha256 if previous else None},
    )
    return RunManifest.objects.create(
        run=run, document=document, sha256=digest, supersedes=previous, log_index=entry.index
    )


def blinded(manifest: RunManifest) -> dict[str, Any]:
    """The manifest as shown before the reveal: identity withheld, commitment visible."""
    document = dict(manifest.document)
    for field in IDENTITY_FIELDS:
        if field in document:
            document[field] = "withheld until the round's reveal"
    # Provider messages can name the system: codes only until the reveal.
    document["failure_events"] = [
        {**event, "message": "withheld until the round's reveal"}
        for event in document.get("failure_events", [])
    ]
    document["committed_sha256"] = manifest.sha256
    document["blinded"] = True
    return document
