"""Governance writes: challenger paths, provider watermarks, seasons, diagnostics.

Protocol sections: Challenger path, Output requirements (watermarks), Version changes (seasons
close when the required engine version becomes unavailable), Prompt tracks and Quality
dimensions (checklist diagnostics; automated critics are diagnostic only).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ledger.services import entry_append
from rounds.models import (
    AuditorAttestation,
    ChecklistTick,
    CriticReport,
    Entry,
    ResultType,
    Round,
    Run,
    Season,
    WatermarkPermission,
)
from rounds.services import FrozenError, TransitionError

# Result types that rank systems blind: a watermark there would reveal the provider.
BLIND_RANKED_RESULT_TYPES = (ResultType.HEAD_TO_HEAD, ResultType.LEADERBOARD)


@transaction.atomic
def watermark_permission_record(
    *, entry: Entry, kind: str, document: str, actor: str
) -> WatermarkPermission:
    """Store a clean-output agreement or written permission for a watermarked provider."""
    if kind not in WatermarkPermission.Kind.values:
        raise ValidationError(f"unknown permission kind {kind!r}")
    if not document.strip():
        raise ValidationError("store the agreement or permission text (or where it is kept)")
    record = entry_append(
        kind="watermark_permission",
        subject=f"round:{entry.round.slug}/entry:{entry.label}",
        payload={"kind": kind, "document_sha256": _sha(document), "recorded_by": actor},
    )
    return WatermarkPermission.objects.create(
        entry=entry, kind=kind, document=document, recorded_by=actor, log_index=record.index
    )


def watermark_blockers(round_: Round) -> list[str]:
    """Why a blind ranked round cannot open: watermarked entries without a permission."""
    if round_.result_type not in BLIND_RANKED_RESULT_TYPES:
        return []
    missing = [
        entry.label
        for entry in round_.entries.filter(provider_watermark=True)
        if not entry.watermark_permissions.exists()
    ]
    if not missing:
        return []
    return [
        f"entries {', '.join(missing)} carry a provider watermark without a stored clean-output "
        "agreement or written permission: a blind ranked round cannot open (the watermark is "
        "never removed)"
    ]


@transaction.atomic
def entry_attest(
    *, entry: Entry, auditor_name: str, statement: str, actor: str
) -> AuditorAttestation:
    """Record the named independent auditor's attestation for an audited entry; logged."""
    if entry.path != Entry.Path.AUDITED:
        raise ValidationError("only an audited entry takes an auditor's attestation")
    if not auditor_name.strip() or auditor_name.strip() != entry.auditor_name.strip():
        raise ValidationError(
            f"the attestation must come from the named auditor {entry.auditor_name!r}"
        )
    if not statement.strip():
        raise ValidationError("the attestation needs its statement")
    record = entry_append(
        kind="auditor_attestation",
        subject=f"round:{entry.round.slug}/entry:{entry.label}",
        payload={
            "auditor": auditor_name,
            "statement_sha256": _sha(statement),
            "recorded_by": actor,
        },
    )
    return AuditorAttestation.objects.create(
        entry=entry,
        auditor_name=auditor_name,
        statement=statement,
        recorded_by=actor,
        log_index=record.index,
    )


@transaction.atomic
def season_close(*, season: Season, reason: str, actor: str) -> Season:
    """Close a season (its engine version became unavailable): no new runs, results stay."""
    season = Season.objects.select_for_update(no_key=True).get(pk=season.pk)
    if season.state == Season.State.CLOSED:
        raise TransitionError(f"season {season.name} is closed already")
    if not reason.strip():
        raise ValidationError("say why the season closes")
    season.state = Season.State.CLOSED
    season.closed_at = timezone.now()
    season.close_reason = reason
    season.save(update_fields=["state", "closed_at", "close_reason"])
    entry_append(
        kind="season_close",
        subject=f"season:{season.name}",
        payload={
            "engine": [season.engine_provider, season.engine_model_id, season.engine_api_version],
            "reason": reason,
            "actor": actor,
        },
    )
    return season


@transaction.atomic
def checklist_tick_record(*, run: Run, item_id: str, met: bool, reviewer: str) -> ChecklistTick:
    """A reviewer's verdict on one atomic requirement of one film (a diagnostic)."""
    items = {item["id"] for item in run.package.checklist}
    if item_id not in items:
        raise ValidationError(f"{item_id!r} is not an item of this prompt's checklist")
    if run.final_state not in ("completed_conforming", "completed_nonconforming"):
        raise FrozenError("only a completed film can be checked against its checklist")
    return ChecklistTick.objects.create(run=run, item_id=item_id, met=met, reviewer=reviewer)


@transaction.atomic
def critic_report_record(
    *, run: Run, critic: str, critic_version: str, report: dict[str, Any]
) -> CriticReport:
    """Store an automated critic's report: a diagnostic, which no ranking reads."""
    if not critic or not critic_version:
        raise ValidationError("name the critic and its version")
    return CriticReport.objects.create(
        run=run, critic=critic, critic_version=critic_version, report=report
    )


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()
