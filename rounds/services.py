"""Writes for rounds and runs: every state transition, each one transaction.

Each service locks the row it starts from (``select_for_update(no_key=True)``), checks the
state, writes, and appends the transparency-log entry in the same transaction, so a rolled-back
change leaves no entry and a committed change always has one.

The run rules (protocol: Run rules) are the sequence ``run_start`` -> ``attempt_begin`` ->
``attempt_submitted`` -> ``attempt_arrived`` -> ``attempt_accept`` / ``attempt_fail`` ->
``run_validated`` -> ``run_finish``. ``rounds.runner`` drives them with the provider gateways;
no network or ffmpeg work happens inside these transactions.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from duel.canonical import canonical_sha256
from ledger.services import entry_append
from rounds import rules
from rounds.models import (
    Attempt,
    BudgetApproval,
    Disclosure,
    Entry,
    FinalState,
    HumanAction,
    InputPackage,
    ProtocolVersion,
    Round,
    Run,
    Season,
    SystemVersion,
    identity_commitment,
)
from rounds.protocols import load_definition


class TransitionError(ValidationError):
    """A state transition that the current state does not allow."""


class FrozenError(ValidationError):
    """An edit of something that is committed, frozen or started."""


def salted_hash(value: str, *, purpose: str) -> str:
    """A salted hash for private identifiers published in public data (request ids, tokens)."""
    key = f"{settings.DUEL_PUBLIC_SALT}:{purpose}".encode()
    return hmac.new(key, value.encode(), hashlib.sha256).hexdigest()


def _locked(model, pk):
    return model.objects.select_for_update(no_key=True).get(pk=pk)


# ---------------------------------------------------------------------------
# Protocol versions (protocol: Version changes)


@transaction.atomic
def protocol_version_install(*, key: str) -> ProtocolVersion:
    """Install (or refresh, while unfrozen) the definition shipped for ``key``."""
    definition = load_definition(key)
    digest = canonical_sha256(definition)
    version, created = ProtocolVersion.objects.get_or_create(
        key=key,
        defaults={
            "name": definition["name"],
            "version": definition["version"],
            "definition": definition,
            "sha256": digest,
        },
    )
    if created or version.sha256 == digest:
        return version
    version = _locked(ProtocolVersion, version.pk)
    if version.is_frozen:
        raise FrozenError(
            f"protocol {key} is frozen with SHA-256 {version.sha256}, but the shipped definition "
            f"now hashes to {digest}: publish it as a new protocol version with a change log"
        )
    version.definition, version.sha256 = definition, digest
    version.name, version.version = definition["name"], definition["version"]
    version.save(update_fields=["definition", "sha256", "name", "version"])
    return version


@transaction.atomic
def protocol_version_freeze(*, version: ProtocolVersion) -> ProtocolVersion:
    """Freeze a protocol version before generation and commit it to the log."""
    version = _locked(ProtocolVersion, version.pk)
    if version.is_frozen:
        return version
    if canonical_sha256(version.definition) != version.sha256:
        raise FrozenError(f"protocol {version.key}: stored SHA-256 does not match its definition")
    version.frozen_at = timezone.now()
    version.save(update_fields=["frozen_at"])
    entry_append(
        kind="protocol_version",
        subject=f"protocol:{version.key}",
        payload={"key": version.key, "version": version.version, "sha256": version.sha256},
    )
    return version


@transaction.atomic
def protocol_version_successor(
    *, predecessor: ProtocolVersion, key: str, definition: dict[str, Any], change_log: str
) -> ProtocolVersion:
    """A new protocol version; completed results under the old one stay as they were."""
    if not change_log.strip():
        raise ValidationError("a new protocol version needs a change-log entry")
    definition = {**definition, "key": key}
    digest = canonical_sha256(definition)
    version = ProtocolVersion.objects.create(
        key=key,
        name=definition.get("name", predecessor.name),
        version=definition.get("version", key),
        definition=definition,
        sha256=digest,
        predecessor=predecessor,
        change_log=change_log,
    )
    entry_append(
        kind="protocol_change",
        subject=f"protocol:{key}",
        payload={
            "key": key,
            "sha256": digest,
            "predecessor": predecessor.key,
            "predecessor_sha256": predecessor.sha256,
            "change_log": change_log,
        },
    )
    return version


# ---------------------------------------------------------------------------
# Rounds


ROUND_TRANSITIONS: dict[str, set[str]] = {
    Round.State.DRAFT: {Round.State.COMMITTED, Round.State.CANCELLED},
    Round.State.COMMITTED: {Round.State.OPEN, Round.State.CANCELLED},
    Round.State.OPEN: {Round.State.JUDGING, Round.State.CANCELLED},
    Round.State.JUDGING: {Round.State.LOCKED},
    Round.State.LOCKED: {Round.State.REVEALED},
    Round.State.REVEALED: set(),
    Round.State.CANCELLED: set(),
}


def _check_transition(round_: Round, to: str) -> None:
    if to not in ROUND_TRANSITIONS[round_.state]:
        allowed = ", ".join(sorted(ROUND_TRANSITIONS[round_.state])) or "none"
        raise TransitionError(
            f"round {round_.slug} is {round_.state}: it cannot move to {to} (allowed: {allowed})"
        )


def round_controls(round_: Round) -> dict[str, Any]:
    """The frozen controls of a round as one canonical record (hashed and logged at commit)."""

    def dec(value: Decimal | None) -> str | None:
        return None if value is None else str(value)

    return {
        "round": round_.slug,
        "protocol": round_.protocol_version.key,
        "protocol_sha256": round_.protocol_version.sha256,
        "result_type": round_.result_type,
        "benchmark_class": round_.benchmark_class,
        "interaction_class": round_.interaction_class,
        "prompt_track": round_.prompt_track,
        "duration_class": round_.duration_class,
        "aspect_ratio": round_.aspect_ratio,
        "source_asset_policy": round_.source_asset_policy,
        "currency": round_.currency,
        "budget_per_system": dec(round_.budget_per_system),
        "cost_ceiling": dec(round_.cost_ceiling),
        "credit_limit_per_system": dec(round_.credit_limit_per_system),
        "deadline": round_.deadline.isoformat() if round_.deadline else None,
        "retry_limit": round_.retry_limit,
        "human_action_cap": round_.human_action_cap,
        "engine_controls": round_.engine_controls,
        "detection_thresholds": round_.detection_thresholds,
        "voting_settings": round_.voting_settings,
        "season": round_.season.name if round_.season_id else None,
        "is_demo": round_.is_demo,
    }


def detection_threshold_problems(record: dict[str, Any]) -> list[str]:
    """The round freezes the detection thresholds with the ffmpeg version that applies them."""
    from media_pipeline.detection import ThresholdsInvalid, validated_thresholds

    if not record or "thresholds" not in record or not record.get("ffmpeg_version"):
        return ["detection thresholds must be frozen with the ffmpeg version before the round"]
    try:
        validated_thresholds(record["thresholds"])
    except ThresholdsInvalid as exc:
        return [f"detection thresholds: {exc}"]
    return []


def _commit_problems(round_: Round) -> list[str]:
    protocol = round_.protocol
    problems = []
    try:
        round_.clean()
    except ValidationError as exc:
        problems.extend(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
    if round_.deadline is None:
        problems.append("the deadline must be set")
    elif round_.deadline <= timezone.now():
        problems.append("the deadline must be in the future")
    if round_.retry_limit is None:
        problems.append("the technical retry limit must be set")
    if round_.human_action_cap is None:
        problems.append("the human-action cap must be set")
    if round_.budget_per_system is None:
        problems.append("the production budget per system must be set")
    if round_.result_type == "open_record" and round_.cost_ceiling is None:
        problems.append("an open record needs a frozen cost ceiling")
    if round_.benchmark_class == "common_visual_engine":
        problems.extend(rules.engine_controls_problems(protocol, round_.engine_controls))
        if round_.credit_limit_per_system is None:
            problems.append("a common-engine round needs the credit limit per system")
    problems.extend(detection_threshold_problems(round_.detection_thresholds))
    if round_.season_id and round_.season.state == Season.State.CLOSED:
        problems.append(f"season {round_.season.name} is closed")
    packages = list(round_.packages.all())
    if not packages:
        problems.append("the round has no input package")
    for package in packages:
        for p in rules.package_problems(
            protocol,
            prompt_track=round_.prompt_track,
            duration_class=round_.duration_class,
            content=package.content,
        ):
            problems.append(f"package {package.prompt_key}: {p}")
        for p in rules.checklist_problems(package.checklist):
            problems.append(f"package {package.prompt_key}: {p}")
        if package.variant_of_id:
            for p in rules.variant_problems(protocol, package.variant_of.content, package.content):
                problems.append(f"package {package.prompt_key}: {p}")
    entries = list(round_.entries.select_related("system_version"))
    if not entries:
        problems.append("the round has no entry")
    problems.extend(
        rules.fixed_scope_problems(
            protocol,
            duration_class=round_.duration_class,
            aspect_ratio=round_.aspect_ratio,
            package_lanes=[package.task_lane for package in packages],
            entry_tiers=[entry.system_version.customer_tier for entry in entries],
        )
    )
    return problems


@transaction.atomic
def round_update(*, round_: Round, changes: dict[str, Any]) -> Round:
    """Edit a draft round's fields; a committed round refuses with a clear error."""
    round_ = _locked(Round, round_.pk)
    if round_.is_committed:
        frozen = sorted(set(changes) & {f.removesuffix("_id") for f in Round.FROZEN_FIELDS})
        if frozen:
            raise FrozenError(
                f"round {round_.slug} is committed: {', '.join(frozen)} cannot change "
                "(a correction is a new round)"
            )
    for name, value in changes.items():
        setattr(round_, name, value)
    round_.full_clean(exclude=["protocol_version", "season"])
    round_.save(update_fields=list(changes))
    return round_


@transaction.atomic
def round_commit(*, round_: Round, actor: str) -> Round:
    """Freeze the protocol version, the controls and every package; log their hashes.

    Hashes become public now; package text only when the round opens.
    """
    round_ = _locked(Round, round_.pk)
    _check_transition(round_, Round.State.COMMITTED)
    problems = _commit_problems(round_)
    if problems:
        raise ValidationError(problems)
    round_.protocol_version = protocol_version_freeze(version=round_.protocol_version)
    now = timezone.now()
    controls = round_controls(round_)
    round_.controls_sha256 = canonical_sha256(controls)
    round_.committed_at = now
    round_.state = Round.State.COMMITTED
    round_.save(update_fields=["controls_sha256", "committed_at", "state"])
    subject = f"round:{round_.slug}"
    entry_append(
        kind="round_controls",
        subject=subject,
        payload={"controls": controls, "sha256": round_.controls_sha256, "actor": actor},
    )
    entry_append(
        kind="budget_and_deadline",
        subject=subject,
        payload={
            "currency": round_.currency,
            "budget_per_system": controls["budget_per_system"],
            "cost_ceiling": controls["cost_ceiling"],
            "credit_limit_per_system": controls["credit_limit_per_system"],
            "deadline": controls["deadline"],
        },
    )
    entry_append(
        kind="detection_thresholds",
        subject=subject,
        payload={
            "thresholds": round_.detection_thresholds["thresholds"],
            "sha256": canonical_sha256(round_.detection_thresholds["thresholds"]),
            "ffmpeg_version": round_.detection_thresholds["ffmpeg_version"],
        },
    )
    for package in round_.packages.select_for_update(no_key=True).order_by("prompt_key"):
        package.sha256 = canonical_sha256(package.content)
        package.checklist_sha256 = canonical_sha256(package.checklist)
        package.committed_at = now
        package.save(update_fields=["sha256", "checklist_sha256", "committed_at"])
        package_subject = f"{subject}/package:{package.prompt_key}"
        entry_append(
            kind="prompt_hash",
            subject=package_subject,
            payload={"sha256": package.sha256, "duration_class": round_.duration_class},
        )
        entry_append(
            kind="requirement_checklist_hash",
            subject=package_subject,
            payload={"sha256": package.checklist_sha256},
        )
    for entry in round_.entries.select_for_update(no_key=True):
        entry.committed_at = now
        entry.save(update_fields=["committed_at"])
        entry_append(
            kind="entry_commit",
            subject=f"{subject}/entry:{entry.label}",
            payload={
                "label": entry.label,
                "path": entry.path,
                # The identity is committed as a hash with a private nonce, published at the
                # reveal, so anyone can check it was fixed before any judgment.
                "identity_commitment": identity_commitment(
                    entry.label, entry.identity, entry.identity_nonce
                ),
            },
        )
    _log_round_transition(round_, "draft", actor)
    return round_


def _log_round_transition(round_: Round, from_state: str, actor: str) -> None:
    entry_append(
        kind="round_transition",
        subject=f"round:{round_.slug}",
        payload={"from": from_state, "to": round_.state, "actor": actor},
    )


def _open_problems(round_: Round) -> list[str]:
    from rounds.governance import watermark_blockers

    problems = watermark_blockers(round_)
    if round_.deadline and round_.deadline <= timezone.now():
        problems.append("the deadline has passed")
    if round_.season_id and round_.season.state == Season.State.CLOSED:
        problems.append(f"season {round_.season.name} is closed")
    return problems


@transaction.atomic
def round_open(*, round_: Round, actor: str) -> Round:
    """Open a committed round: runs may operate and the package text becomes public."""
    round_ = _locked(Round, round_.pk)
    _check_transition(round_, Round.State.OPEN)
    problems = _open_problems(round_)
    if problems:
        raise TransitionError(problems)
    round_.state = Round.State.OPEN
    round_.opened_at = timezone.now()
    round_.save(update_fields=["state", "opened_at"])
    _log_round_transition(round_, "committed", actor)
    return round_


@transaction.atomic
def round_transition(*, round_: Round, to: str, actor: str) -> Round:
    """Generic checked transition for the judging phases and cancellation."""
    round_ = _locked(Round, round_.pk)
    from_state = round_.state
    _check_transition(round_, to)
    if to == Round.State.REVEALED:
        raise TransitionError("the reveal goes through stats.services.round_reveal")
    if to == Round.State.LOCKED:
        raise TransitionError(
            "locking judgments goes through stats.services.round_lock (it checks every ballot "
            "and scorecard is locked)"
        )
    round_.state = to
    round_.save(update_fields=["state"])
    _log_round_transition(round_, from_state, actor)
    return round_


@transaction.atomic
def round_mark_locked(*, round_: Round, actor: str) -> Round:
    """judging -> locked. Only ``stats.services.round_lock`` calls this, after it has checked
    that every ballot and scorecard is locked and committed (the reveal gate's precondition)."""
    round_ = _locked(Round, round_.pk)
    _check_transition(round_, Round.State.LOCKED)
    round_.state = Round.State.LOCKED
    round_.save(update_fields=["state"])
    _log_round_transition(round_, Round.State.JUDGING, actor)
    return round_


@transaction.atomic
def budget_approve(*, round_: Round, owner, limit_credits: Decimal) -> BudgetApproval:
    """The budget gate: a named staff owner approves the credit limit (Tovaki budget_gate)."""
    round_ = _locked(Round, round_.pk)
    gate = round_.protocol.budget_gate
    if not gate:
        raise ValidationError(f"{round_.protocol.key} has no budget gate")
    if not owner.is_staff:
        raise ValidationError("only a staff member can approve the budget")
    owner_name = owner.get_full_name() or owner.get_username()
    limit_credits = Decimal(str(limit_credits))
    hard_max = Decimal(str(gate["hard_maximum_with_one_technical_retry_per_cell"]))
    if limit_credits <= 0 or limit_credits > hard_max:
        raise ValidationError(
            f"the approved limit must be above 0 and at most the hard maximum {hard_max} "
            f"{gate['currency']}"
        )
    entry = entry_append(
        kind="budget_approval",
        subject=f"round:{round_.slug}",
        payload={
            "owner": owner_name,
            "approved_limit_credits": str(limit_credits),
            "currency": gate["currency"],
            "planned_credits": gate["first_pass_planned_credits"],
            "hard_maximum": gate["hard_maximum_with_one_technical_retry_per_cell"],
        },
    )
    return BudgetApproval.objects.create(
        round=round_,
        owner=owner,
        owner_name=owner_name,
        approved_limit_credits=limit_credits,
        log_index=entry.index,
    )


def generation_blockers(round_: Round) -> list[str]:
    """Why runs of this round cannot start now (empty when they can)."""
    problems = []
    if round_.state != Round.State.OPEN:
        problems.append(f"round {round_.slug} is {round_.state}, not open")
    if round_.protocol.budget_gate and not round_.budget_approvals.exists():
        problems.append(
            "generation is blocked until a named staff owner approves the credit limit "
            "(budget gate)"
        )
    if round_.season_id and round_.season.state == Season.State.CLOSED:
        problems.append(f"season {round_.season.name} is closed: it accepts no new runs")
    if round_.deadline and round_.deadline <= timezone.now():
        problems.append("the round deadline has passed")
    return problems


# ---------------------------------------------------------------------------
# Packages and entries


@transaction.atomic
def package_add(
    *,
    round_: Round,
    prompt_key: str,
    content: dict[str, Any],
    checklist: list[dict[str, Any]],
    task_lane: str = "",
    variant_of: InputPackage | None = None,
) -> InputPackage:
    """Add an input package to a draft round, refusing an incomplete or invalid one."""
    round_ = _locked(Round, round_.pk)
    if round_.is_committed:
        raise FrozenError(f"round {round_.slug} is committed: no package can be added")
    protocol = round_.protocol
    problems = rules.package_problems(
        protocol,
        prompt_track=round_.prompt_track,
        duration_class=round_.duration_class,
        content=content,
    )
    problems += rules.checklist_problems(checklist)
    lanes = protocol.task_lanes
    if task_lane and lanes and task_lane not in lanes:
        problems.append(
            f"task lane {task_lane!r} is not one of {protocol.key}'s: {', '.join(lanes)}"
        )
    if variant_of is not None:
        problems += rules.variant_problems(protocol, variant_of.content, content)
    if problems:
        raise ValidationError(problems)
    return InputPackage.objects.create(
        round=round_,
        prompt_key=prompt_key,
        content=content,
        checklist=checklist,
        task_lane=task_lane,
        variant_of=variant_of,
    )


@transaction.atomic
def package_update(*, package: InputPackage, content=None, checklist=None) -> InputPackage:
    package = _locked(InputPackage, package.pk)
    if package.committed_at:
        raise FrozenError(f"package {package} is committed and cannot be edited")
    if content is not None:
        package.content = content
    if checklist is not None:
        package.checklist = checklist
    package.save(update_fields=["content", "checklist"])
    return package


def new_entry_label() -> str:
    """An opaque anonymous label: no order, no hint of the system."""
    return f"S-{secrets.token_hex(3).upper()}"


@transaction.atomic
def entry_add(
    *,
    round_: Round,
    system_version: SystemVersion,
    provider_config: dict[str, Any] | None = None,
    path: str = Entry.Path.OPERATED,
    auditor_name: str = "",
    provider_watermark: bool = False,
) -> Entry:
    round_ = _locked(Round, round_.pk)
    if round_.is_committed:
        raise FrozenError(f"round {round_.slug} is committed: the entrant list is frozen")
    if path == Entry.Path.AUDITED and not auditor_name:
        raise ValidationError("an audited entry must name its independent auditor")
    return Entry.objects.create(
        round=round_,
        system_version=system_version,
        label=new_entry_label(),
        provider_config=provider_config or {},
        path=path,
        auditor_name=auditor_name,
        provider_watermark=provider_watermark,
    )


def entry_issue_gateway_token(*, entry: Entry) -> str:
    """Issue (or rotate, before commit) the entry's common-engine gateway token.

    Only its hash is stored; the token is shown once to the entrant.
    """
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        locked = _locked(Entry, entry.pk)
        locked.gateway_token_hash = hashlib.sha256(token.encode()).hexdigest()
        locked.save(update_fields=["gateway_token_hash"])
    return token


# ---------------------------------------------------------------------------
# Runs (protocol: Run rules)


@transaction.atomic
def run_create(*, entry: Entry, package: InputPackage) -> Run:
    if package.round_id != entry.round_id:
        raise ValidationError("the package and the entry belong to different rounds")
    if not package.committed_at:
        raise ValidationError("a run needs a committed package")
    return Run.objects.create(
        entry=entry, package=package, protocol_key=entry.round.protocol_version.key
    )


def _spent(run: Run) -> Decimal:
    total = Decimal(0)
    for attempt in run.attempts.all():
        total += rules.cost_total(attempt.cost)
    return total


@transaction.atomic
def run_start(*, run: Run) -> Run:
    """Steps 1-4: record system version, tier and settings; reserve the budget; start the clock."""
    run = _locked(Run, run.pk)
    if run.state != Run.State.CREATED:
        raise TransitionError(f"{run} is {run.state}: it has started already")
    round_ = run.entry.round
    blockers = generation_blockers(round_)
    if blockers:
        raise TransitionError(blockers)
    version = run.entry.system_version
    run.recorded_system = {
        "system": version.system.name,
        "vendor": version.system.vendor,
        "version": version.version,
        "customer_tier": version.customer_tier,
        "public_configuration": version.public_configuration,
        "engines": version.engines,
        "audio_providers": version.audio_providers,
    }
    run.recorded_settings = {
        "system_settings": version.settings,
        "provider_config": {k: v for k, v in run.entry.provider_config.items() if k != "token"},
    }
    approval = round_.budget_approvals.order_by("-approved_at").first()
    run.reserved_budget = (
        approval.approved_limit_credits / max(round_.entries.count(), 1)
        if approval
        else round_.budget_per_system
    )
    now = timezone.now()
    run.clock_started_at = now
    run.started_at = now
    run.state = Run.State.STARTED
    run.save(
        update_fields=[
            "recorded_system",
            "recorded_settings",
            "reserved_budget",
            "clock_started_at",
            "started_at",
            "state",
        ]
    )
    entry_append(
        kind="run_start",
        subject=f"run:{run.public_id}",
        payload={
            "round": round_.slug,
            "entry": run.entry.label,
            "package_sha256": run.package.sha256,
            "reserved_budget": str(run.reserved_budget)
            if run.reserved_budget is not None
            else None,
            "clock_started_at": now.isoformat(),
            "settings_sha256": canonical_sha256(run.recorded_settings),
            "system_sha256": canonical_sha256(run.recorded_system),
        },
    )
    return run


@transaction.atomic
def attempt_begin(*, run: Run) -> Attempt:
    """Open the next attempt; the caller then submits the exact committed brief (step 5).

    An attempt left in ``submitting`` or ``submitted`` by a killed worker is returned as is,
    so the caller resumes it (with the same idempotency key) instead of paying twice.
    """
    run = _locked(Run, run.pk)
    if run.state != Run.State.STARTED:
        raise TransitionError(f"{run} is {run.state}: no attempt can begin")
    open_attempt = run.attempts.filter(state__in=["submitting", "submitted", "arrived"]).first()
    if open_attempt:
        return open_attempt
    number = run.attempts.count() + 1
    return Attempt.objects.create(run=run, number=number)


@transaction.atomic
def attempt_submitted(*, attempt: Attempt, provider_request_id: str) -> Attempt:
    attempt = _locked(Attempt, attempt.pk)
    if (
        attempt.state == Attempt.State.SUBMITTED
        and attempt.provider_request_id == provider_request_id
    ):
        return attempt
    if attempt.state != Attempt.State.SUBMITTING:
        raise TransitionError(f"{attempt} is {attempt.state}: it cannot be submitted again")
    attempt.provider_request_id = provider_request_id
    attempt.provider_request_id_hash = salted_hash(provider_request_id, purpose="provider-request")
    attempt.submitted_at = timezone.now()
    attempt.state = Attempt.State.SUBMITTED
    attempt.save(
        update_fields=["provider_request_id", "provider_request_id_hash", "submitted_at", "state"]
    )
    return attempt


def _attempt_log(attempt: Attempt) -> None:
    entry_append(
        kind="attempt",
        subject=f"run:{attempt.run.public_id}/attempt:{attempt.number}",
        payload={
            "number": attempt.number,
            "state": attempt.state,
            "failure_code": attempt.failure_code or None,
            "retry_reason": attempt.retry_reason or None,
            "provider_request_id_hash": attempt.provider_request_id_hash or None,
            "cost": attempt.cost,
            "output_sha256": attempt.output_sha256 or None,
        },
    )


@transaction.atomic
def attempt_arrived(
    *,
    attempt: Attempt,
    output,
    cost: dict[str, Any],
    local_compute: dict[str, Any] | None = None,
    arrived_at: datetime | None = None,
) -> Attempt:
    """Steps 7-8: the asset arrived and is stored with its checksum; log the output hash."""
    attempt = _locked(Attempt, attempt.pk)
    if attempt.state == Attempt.State.ARRIVED and attempt.output_id == output.pk:
        return attempt
    if attempt.state not in (Attempt.State.SUBMITTED, Attempt.State.SUBMITTING):
        raise TransitionError(f"{attempt} is {attempt.state}: no asset can arrive")
    run = attempt.run
    problems = rules.cost_problems(run.entry.round.protocol, cost, local_compute or {})
    if problems:
        raise ValidationError(problems)
    attempt.output = output
    attempt.output_sha256 = output.sha256
    attempt.cost = {k: str(v) for k, v in cost.items()}
    attempt.local_compute = local_compute or {}
    attempt.arrived_at = arrived_at or timezone.now()
    attempt.state = Attempt.State.ARRIVED
    attempt.save(
        update_fields=["output", "output_sha256", "cost", "local_compute", "arrived_at", "state"]
    )
    entry_append(
        kind="output_hash",
        subject=f"run:{run.public_id}/attempt:{attempt.number}",
        payload={"sha256": output.sha256, "size_bytes": output.size_bytes},
    )
    return attempt


@transaction.atomic
def attempt_fail(
    *,
    attempt: Attempt,
    failure_code: str,
    message: str = "",
    cost: dict[str, Any] | None = None,
    local_compute: dict[str, Any] | None = None,
    credit_exhausted: bool = False,
) -> rules.RetryDecision:
    """Record a failed attempt with its cost; retry or end the run as the protocol says."""
    attempt = _locked(Attempt, attempt.pk)
    run = _locked(Run, attempt.run_id)
    if attempt.state in (Attempt.State.FAILED, Attempt.State.ACCEPTED):
        raise TransitionError(f"{attempt} has ended already ({attempt.state})")
    round_ = run.entry.round
    protocol = round_.protocol
    if cost is not None:
        problems = rules.cost_problems(protocol, cost, local_compute or {})
        if problems:
            raise ValidationError(problems)
        attempt.cost = {k: str(v) for k, v in cost.items()}
        attempt.local_compute = local_compute or {}
    retries_used = run.attempts.filter(state=Attempt.State.FAILED).count()
    spent = _spent(run) + (rules.cost_total(attempt.cost) if cost is not None else 0)
    decision = rules.retry_decision(
        protocol,
        failure_code=failure_code,
        retries_used=retries_used,
        round_retry_limit=round_.retry_limit,
        deadline_passed=bool(round_.deadline and round_.deadline <= timezone.now()),
        budget_exhausted=credit_exhausted
        or bool(run.reserved_budget is not None and spent >= run.reserved_budget),
    )
    if (
        not decision.retry
        and decision.final_state == FinalState.COMPLETED_NONCONFORMING
        and attempt.output_id
    ):
        # A usable output outside the rules is preserved, validated and proxied, and kept in
        # the reliability result as completed_nonconforming (never in the main ranking).
        attempt.state = Attempt.State.ACCEPTED
        attempt.ended_at = timezone.now()
        attempt.save(update_fields=["state", "ended_at", "cost", "local_compute"])
        _attempt_log(attempt)
        _accept(run, attempt)
        return decision
    attempt.failure_code = failure_code
    attempt.failure_message = message[:2000]
    attempt.retry_reason = decision.protocol_reason if decision.retry else ""
    attempt.state = Attempt.State.FAILED
    attempt.ended_at = timezone.now()
    attempt.save(
        update_fields=[
            "failure_code",
            "failure_message",
            "retry_reason",
            "state",
            "ended_at",
            "cost",
            "local_compute",
        ]
    )
    _attempt_log(attempt)
    if not decision.retry:
        _finish(run, decision.final_state, f"{failure_code}: {decision.explanation}. {message}")
    return decision


def _accept(run: Run, attempt: Attempt) -> None:
    run.accepted_attempt = attempt
    run.output_sha256 = attempt.output_sha256
    run.clock_stopped_at = attempt.arrived_at
    run.state = Run.State.COLLECTED
    run.save(update_fields=["accepted_attempt", "output_sha256", "clock_stopped_at", "state"])


@transaction.atomic
def attempt_accept(*, attempt: Attempt) -> Run:
    """Step 6-7: accept the first technically valid result; the clock stops at its arrival."""
    attempt = _locked(Attempt, attempt.pk)
    run = _locked(Run, attempt.run_id)
    if run.accepted_attempt_id == attempt.pk:
        return run
    if attempt.state != Attempt.State.ARRIVED:
        raise TransitionError(f"{attempt} is {attempt.state}: only an arrived asset is accepted")
    if run.state != Run.State.STARTED:
        raise TransitionError(f"{run} is {run.state}: it accepted a result already")
    attempt.state = Attempt.State.ACCEPTED
    attempt.ended_at = timezone.now()
    attempt.save(update_fields=["state", "ended_at"])
    _attempt_log(attempt)
    _accept(run, attempt)
    return run


@transaction.atomic
def run_validated(
    *,
    run: Run,
    problems: list[str],
    duration_s: float | None,
    effective_duration_s: float | None,
    output_facts: dict[str, Any] | None = None,
) -> Run:
    """Step 9: record the validation verdict (the original was not modified)."""
    run = _locked(Run, run.pk)
    if run.state == Run.State.VALIDATED:
        return run
    if run.state != Run.State.COLLECTED:
        raise TransitionError(f"{run} is {run.state}: nothing to validate")
    run.problems = list(problems)
    run.duration_s = duration_s
    run.effective_duration_s = effective_duration_s
    run.output_facts = output_facts or {}
    run.state = Run.State.VALIDATED
    run.save(
        update_fields=["problems", "duration_s", "effective_duration_s", "output_facts", "state"]
    )
    return run


@transaction.atomic
def run_proxy_attached(*, run: Run, proxy_file) -> Run:
    """Step 10: the neutral review proxy exists; the run ends conforming or nonconforming."""
    run = _locked(Run, run.pk)
    if run.state == Run.State.FINISHED and run.proxy_file_id == proxy_file.pk:
        return run
    if run.state != Run.State.VALIDATED:
        raise TransitionError(f"{run} is {run.state}: validate it before attaching a proxy")
    run.proxy_file = proxy_file
    run.save(update_fields=["proxy_file"])
    final_state = (
        FinalState.COMPLETED_NONCONFORMING if run.problems else FinalState.COMPLETED_CONFORMING
    )
    reason = "; ".join(run.problems) if run.problems else "conforming"
    return _finish(run, final_state, reason)


@transaction.atomic
def run_finish(*, run: Run, final_state: str, reason: str = "") -> Run:
    """End a run in exactly one of the protocol's final states."""
    run = _locked(Run, run.pk)
    return _finish(run, final_state, reason)


def _finish(run: Run, final_state: str, reason: str) -> Run:
    if run.state == Run.State.FINISHED:
        if run.final_state == final_state:
            return run
        raise TransitionError(f"{run} already ended as {run.final_state}")
    if final_state not in run.entry.round.protocol.final_states:
        raise ValidationError(f"{final_state!r} is not a final state of the protocol")
    if run.state == Run.State.CREATED:
        raise TransitionError(f"{run} never started: a run that did not start has no final state")
    # A run that ends without accepting an asset still stops its clock now.
    if run.clock_stopped_at is None:
        run.clock_stopped_at = timezone.now()
    run.final_state = final_state
    run.final_reason = reason[:4000]
    run.state = Run.State.FINISHED
    run.finished_at = timezone.now()
    run.save(
        update_fields=["final_state", "final_reason", "state", "finished_at", "clock_stopped_at"]
    )
    entry_append(
        kind="run_transition",
        subject=f"run:{run.public_id}",
        # The final state and failure code only: a provider's message can name the system.
        payload={
            "to": "finished",
            "final_state": final_state,
            "reason_code": run.final_reason.split(":", 1)[0] if ":" in run.final_reason else "",
        },
    )
    return run


@transaction.atomic
def run_invalidate(*, run: Run, reason: str, actor: str) -> Run:
    """An operator invalidates a run; it stays in the reliability data as operator_invalidated."""
    run = _locked(Run, run.pk)
    if not reason.strip():
        raise ValidationError("say why the run is invalidated")
    if run.state == Run.State.FINISHED:
        raise TransitionError(
            f"{run} already ended as {run.final_state}: add a correction instead of editing it"
        )
    return _finish(run, FinalState.OPERATOR_INVALIDATED, f"{reason} (by {actor})")


@transaction.atomic
def human_action_record(
    *,
    run: Run,
    action_class: str,
    description: str,
    actor: str,
    occurred_at: datetime | None = None,
) -> HumanAction:
    """Record a human action; creative direction or manual work turns the run into an exhibition."""
    run = _locked(Run, run.pk)
    protocol = run.entry.round.protocol
    if action_class not in protocol.human_action_classes:
        raise ValidationError(f"unknown human action class {action_class!r}")
    if not description.strip():
        raise ValidationError("describe the human action")
    entry = entry_append(
        kind="human_action",
        subject=f"run:{run.public_id}",
        payload={"class": action_class, "description": description, "actor": actor},
    )
    action = HumanAction.objects.create(
        run=run,
        action_class=action_class,
        description=description,
        actor=actor,
        occurred_at=occurred_at or timezone.now(),
        log_index=entry.index,
    )
    if protocol.human_action_invalidates(action_class) and not run.exhibition_reason:
        run.exhibition_reason = (
            f"{action_class.replace('_', ' ')} after submission invalidates an autonomous ranking "
            "result; preserved as an exhibition"
        )
        run.save(update_fields=["exhibition_reason"])
    cap = run.entry.round.human_action_cap
    if cap is not None and run.human_actions.count() > cap and not run.exhibition_reason:
        run.exhibition_reason = f"human actions exceed the round's cap of {cap}"
        run.save(update_fields=["exhibition_reason"])
    return action


def run_cost_summary(run: Run) -> dict[str, str]:
    """The five cost values summed over every attempt, failed ones included."""
    totals: dict[str, Decimal] = {name: Decimal(0) for name in run.entry.round.protocol.cost_fields}
    for attempt in run.attempts.all():
        for name, value in attempt.cost.items():
            totals[name] = totals.get(name, Decimal(0)) + Decimal(str(value))
    return {k: str(v) for k, v in totals.items()}


@transaction.atomic
def disclosure_add(
    *,
    kind: str,
    party: str,
    text: str,
    system=None,
    round_: Round | None = None,
    amount: Decimal | None = None,
    currency: str = "",
) -> Disclosure:
    """Add a disclosure (sponsor, affiliate, credit grant, operator relationship); logged."""
    if not text.strip() or not party.strip():
        raise ValidationError("a disclosure needs the party and the text")
    if system is None:
        payload = {
            "kind": kind,
            "party": party,
            "text": text,
            "amount": str(amount) if amount is not None else None,
            "currency": currency,
        }
    else:
        # A disclosure tied to a system would tie an identity to a round before the reveal:
        # the log commits to it by hash; the text is published on results pages after the
        # reveal, where anyone can check it against this entry.
        payload = {
            "kind": kind,
            "tied_to_entrant": True,
            "commitment": canonical_sha256(
                {
                    "system": system.name,
                    "party": party,
                    "text": text,
                    "amount": str(amount) if amount is not None else None,
                    "currency": currency,
                }
            ),
        }
    entry = entry_append(
        kind="disclosure",
        subject=f"round:{round_.slug}" if round_ else "platform",
        payload=payload,
    )
    return Disclosure.objects.create(
        kind=kind,
        party=party,
        text=text,
        system=system,
        round=round_,
        amount=amount,
        currency=currency,
        log_index=entry.index,
    )
