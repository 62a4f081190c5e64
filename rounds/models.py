"""Rounds and runs as the protocols define them.

Fields, constraints and small derived properties only; every rule that changes a row lives in
``rounds/services.py``. Committed rows are frozen by database triggers (see the migrations and
``duel/db.py``), not only by the ORM.
"""

from __future__ import annotations

import copy
import functools
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from rounds.protocols import Protocol

# ---------------------------------------------------------------------------
# Vocabulary shared by both protocols (names are the protocols' own words)


class ResultType(models.TextChoices):
    OPEN_RECORD = "open_record", "Open record"
    HEAD_TO_HEAD = "head_to_head", "Head-to-head"
    LEADERBOARD = "leaderboard", "Leaderboard"


class BenchmarkClass(models.TextChoices):
    BEST_COMPLETE_SYSTEM = "best_complete_system", "Best Complete System"
    COMMON_VISUAL_ENGINE = "common_visual_engine", "Common Visual Engine"


class InteractionClass(models.TextChoices):
    AUTONOMOUS = "autonomous", "Autonomous"
    INTERACTIVE = "interactive", "Interactive"


class PromptTrack(models.TextChoices):
    BRIEF_TO_FILM = "brief_to_film", "Brief-to-Film"
    SCRIPT_TO_FILM = "script_to_film", "Script-to-Film"


class FinalState(models.TextChoices):
    """Reliability result: every started run ends in exactly one of these."""

    COMPLETED_CONFORMING = "completed_conforming"
    COMPLETED_NONCONFORMING = "completed_nonconforming"
    PROVIDER_FAILED = "provider_failed"
    SYSTEM_FAILED = "system_failed"
    BUDGET_EXHAUSTED = "budget_exhausted"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    POLICY_BLOCKED = "policy_blocked"
    OPERATOR_INVALIDATED = "operator_invalidated"


class HumanActionClass(models.TextChoices):
    OBSERVATION_ONLY = "observation_only", "Observation only"
    INFRASTRUCTURE_RECOVERY = "infrastructure_recovery", "Infrastructure recovery"
    CREATIVE_DIRECTION = "creative_direction", "Creative direction"
    MANUAL_EDIT = "manual_edit", "Manual edit"
    MANUAL_ASSEMBLY = "manual_assembly", "Manual assembly"


# ---------------------------------------------------------------------------
# Protocol versions


class ProtocolVersion(models.Model):
    """One protocol version's definition, stored with its SHA-256 over canonical JSON."""

    key = models.CharField(max_length=64, unique=True, help_text="e.g. ai-duel-0.1")
    name = models.CharField(max_length=200)
    version = models.CharField(max_length=64)
    definition = models.JSONField()
    sha256 = models.CharField(max_length=64)
    frozen_at = models.DateTimeField(null=True, blank=True)
    predecessor = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="successors"
    )
    change_log = models.TextField(blank=True, help_text="What changed from the predecessor.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key

    @property
    def protocol(self) -> Protocol:
        return Protocol(self.definition)

    @property
    def is_frozen(self) -> bool:
        return self.frozen_at is not None


# ---------------------------------------------------------------------------
# Systems and seasons


class System(models.Model):
    """A complete AI film-making system (an entrant's product)."""

    name = models.CharField(max_length=200, unique=True)
    vendor = models.CharField(max_length=200)
    homepage = models.URLField(blank=True)
    operator_relationship = models.TextField(
        blank=True,
        help_text="The operator's relationship with this system, if any (published on every "
        "results page).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SystemVersion(models.Model):
    system = models.ForeignKey(System, on_delete=models.PROTECT, related_name="versions")
    version = models.CharField(max_length=100)
    customer_tier = models.CharField(max_length=100)
    public_configuration = models.BooleanField(
        default=True,
        help_text="A private or non-public configuration makes every entry an exhibition.",
    )
    settings = models.JSONField(default=dict, blank=True, help_text="Every selected setting.")
    audio_providers = models.JSONField(default=list, blank=True)
    engines = models.JSONField(
        default=list, blank=True, help_text='Engine names and versions: [{"name","version"}]'
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["system__name", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["system", "version", "customer_tier"], name="uniq_system_version_tier"
            )
        ]

    def __str__(self) -> str:
        return f"{self.system.name} {self.version} ({self.customer_tier})"


class Disclosure(models.Model):
    """A sponsor, affiliate relationship, credit grant or operator relationship.

    Disclosures appear on every results page and export of the rounds they concern.
    """

    class Kind(models.TextChoices):
        OPERATOR_RELATIONSHIP = "operator_relationship"
        SPONSOR = "sponsor"
        AFFILIATE = "affiliate"
        CREDIT_GRANT = "credit_grant"

    kind = models.CharField(max_length=32, choices=Kind.choices)
    system = models.ForeignKey(
        System, null=True, blank=True, on_delete=models.PROTECT, related_name="disclosures"
    )
    round = models.ForeignKey(
        "Round", null=True, blank=True, on_delete=models.PROTECT, related_name="disclosures"
    )
    party = models.CharField(max_length=200, help_text="Who: sponsor, affiliate, grantor.")
    text = models.TextField()
    amount = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    currency = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    log_index = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    kind__in=["operator_relationship", "sponsor", "affiliate", "credit_grant"]
                ),
                name="disclosure_kind_valid",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.party}"


class Season(models.Model):
    """A challenge season, tied to the required engine version for common-engine rounds."""

    class State(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    name = models.CharField(max_length=200, unique=True)
    engine_provider = models.CharField(max_length=200, blank=True)
    engine_model_id = models.CharField(max_length=200, blank=True)
    engine_api_version = models.CharField(max_length=100, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    closed_at = models.DateTimeField(null=True, blank=True)
    close_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(state__in=["open", "closed"]), name="season_state"),
            models.CheckConstraint(
                condition=Q(state="open", closed_at__isnull=True)
                | Q(state="closed", closed_at__isnull=False),
                name="season_closed_has_time",
            ),
        ]

    def __str__(self) -> str:
        return self.name


# ---------------------------------------------------------------------------
# Rounds


@functools.cache
def _detection_controls(ffmpeg_binary: str) -> dict:
    from media_pipeline.detection import detection_controls

    return detection_controls(ffmpeg_binary=ffmpeg_binary)


def default_detection_controls() -> dict:
    """The platform's default detection thresholds with the ffmpeg that applies them."""
    return copy.deepcopy(_detection_controls(settings.DUEL_FFMPEG))


class Round(models.Model):
    """A benchmark round: one protocol version, one pool, frozen controls.

    State ("where it is") moves only through ``rounds.services`` transitions. The controls
    below are frozen by a trigger once ``committed_at`` is set.
    """

    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        COMMITTED = "committed", "Committed (hashes public)"
        OPEN = "open", "Open (runs operate, packages public)"
        JUDGING = "judging", "Judging"
        LOCKED = "locked", "Judgments locked"
        REVEALED = "revealed", "Identities revealed"
        CANCELLED = "cancelled", "Cancelled"

    slug = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=200)
    protocol_version = models.ForeignKey(ProtocolVersion, on_delete=models.PROTECT)
    season = models.ForeignKey(
        Season, null=True, blank=True, on_delete=models.PROTECT, related_name="rounds"
    )
    is_demo = models.BooleanField(
        default=False, help_text="Demo rounds may hold synthetic ballots; real rounds never."
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.DRAFT)

    # Pool keys (never combined across rounds with different values)
    result_type = models.CharField(max_length=32, choices=ResultType.choices)
    benchmark_class = models.CharField(max_length=32, choices=BenchmarkClass.choices)
    interaction_class = models.CharField(
        max_length=32, choices=InteractionClass.choices, default=InteractionClass.AUTONOMOUS
    )
    prompt_track = models.CharField(max_length=32, choices=PromptTrack.choices)
    duration_class = models.CharField(max_length=32)
    aspect_ratio = models.CharField(max_length=16, default="16:9")
    source_asset_policy = models.CharField(max_length=64, default="no_uploaded_media")

    # Frozen controls (protocol: Run rules, Common-engine controls, Publication levels)
    currency = models.CharField(max_length=32, default="USD")
    budget_per_system = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    cost_ceiling = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    credit_limit_per_system = models.DecimalField(
        max_digits=14, decimal_places=2, null=True, blank=True
    )
    deadline = models.DateTimeField(null=True, blank=True)
    retry_limit = models.PositiveSmallIntegerField(null=True, blank=True)
    human_action_cap = models.PositiveSmallIntegerField(null=True, blank=True)
    engine_controls = models.JSONField(default=dict, blank=True)
    detection_thresholds = models.JSONField(
        default=default_detection_controls,
        blank=True,
        help_text="Frozen at commit with the ffmpeg version that applies them.",
    )
    voting_settings = models.JSONField(
        default=dict,
        blank=True,
        help_text='e.g. {"allow_ties": false, "show_identities_after_vote": false, '
        '"ballots_per_voter": 50}',
    )
    controls_sha256 = models.CharField(max_length=64, blank=True)
    committed_at = models.DateTimeField(null=True, blank=True)

    opened_at = models.DateTimeField(null=True, blank=True)
    revealed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("reveal_round", "Can unlock the identity reveal of a round")]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    state__in=[
                        "draft",
                        "committed",
                        "open",
                        "judging",
                        "locked",
                        "revealed",
                        "cancelled",
                    ]
                ),
                name="round_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(result_type__in=ResultType.values), name="round_result_type_valid"
            ),
            models.CheckConstraint(
                condition=Q(benchmark_class__in=BenchmarkClass.values),
                name="round_benchmark_class_valid",
            ),
            models.CheckConstraint(
                condition=Q(prompt_track__in=PromptTrack.values), name="round_prompt_track_valid"
            ),
            models.CheckConstraint(
                condition=Q(state__in=["draft", "cancelled"]) | Q(committed_at__isnull=False),
                name="round_committed_has_time",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    FROZEN_FIELDS = (
        "protocol_version_id",
        "result_type",
        "benchmark_class",
        "interaction_class",
        "prompt_track",
        "duration_class",
        "aspect_ratio",
        "source_asset_policy",
        "currency",
        "budget_per_system",
        "cost_ceiling",
        "credit_limit_per_system",
        "deadline",
        "retry_limit",
        "human_action_cap",
        "engine_controls",
        "detection_thresholds",
        "voting_settings",
        "controls_sha256",
        "is_demo",
        "season_id",
    )

    @property
    def protocol(self) -> Protocol:
        return self.protocol_version.protocol

    @property
    def is_committed(self) -> bool:
        return self.committed_at is not None

    @property
    def packages_public(self) -> bool:
        """Package text is public once the round opens; hashes as soon as committed."""
        return self.state in {"open", "judging", "locked", "revealed"}

    @property
    def identities_revealed(self) -> bool:
        return self.state == self.State.REVEALED

    def clean(self) -> None:
        errors = {}
        if self.protocol_version_id:
            protocol = self.protocol_version.protocol
            if self.duration_class and self.duration_class not in protocol.duration_classes:
                errors["duration_class"] = (
                    f"{self.duration_class!r} is not a duration class of {protocol.key}"
                )
            for field in ("result_type", "benchmark_class", "interaction_class", "prompt_track"):
                allowed = protocol.definition.get(f"{field}s")
                if allowed is not None and getattr(self, field) not in allowed:
                    errors[field] = f"{protocol.key} allows only: {', '.join(allowed)}"
        if errors:
            raise ValidationError(errors)


class BudgetApproval(models.Model):
    """The budget gate: a named staff owner approves the credit limit before generation."""

    round = models.ForeignKey(Round, on_delete=models.PROTECT, related_name="budget_approvals")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    owner_name = models.CharField(max_length=200)
    approved_limit_credits = models.DecimalField(max_digits=14, decimal_places=2)
    approved_at = models.DateTimeField(auto_now_add=True)
    log_index = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["approved_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(approved_limit_credits__gt=0), name="budget_approval_positive"
            )
        ]

    def __str__(self) -> str:
        return f"{self.round} budget {self.approved_limit_credits} by {self.owner_name}"


class InputPackage(models.Model):
    """A committed input package (the brief) with its atomic requirement checklist.

    Both are hashed SHA-256 over canonical JSON. Hashes are public once committed; the text
    once the round opens.
    """

    round = models.ForeignKey(Round, on_delete=models.PROTECT, related_name="packages")
    prompt_key = models.CharField(max_length=64, help_text="Public prompt label, e.g. P1")
    task_lane = models.CharField(max_length=64, blank=True)
    variant_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="duration_variants",
        help_text="The core brief this is a duration variant of (may differ only in duration).",
    )
    content = models.JSONField()
    checklist = models.JSONField(default=list)
    sha256 = models.CharField(max_length=64, blank=True)
    checklist_sha256 = models.CharField(max_length=64, blank=True)
    committed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["round", "prompt_key"]
        constraints = [
            models.UniqueConstraint(fields=["round", "prompt_key"], name="uniq_round_prompt_key")
        ]

    FROZEN_FIELDS = (
        "round_id",
        "prompt_key",
        "task_lane",
        "variant_of_id",
        "content",
        "checklist",
        "sha256",
        "checklist_sha256",
    )

    def __str__(self) -> str:
        return f"{self.round.slug}/{self.prompt_key}"


def _new_nonce() -> str:
    import secrets

    return secrets.token_hex(32)


def identity_commitment(label: str, identity: str, nonce: str) -> str:
    """SHA-256 over canonical JSON of the label, the identity and the nonce.

    Logged at commit; at the reveal the identity and nonce are published, so anyone can check
    that the identity behind each anonymous label was fixed before any judgment.
    """
    from duel.canonical import canonical_sha256

    return canonical_sha256({"label": label, "identity": identity, "nonce": nonce})


class Entry(models.Model):
    """A system version entered in a round, under an anonymous label."""

    class Path(models.TextChoices):
        OPERATED = "operated", "Operated and reproduced by the platform"
        AUDITED = "audited", "Witnessed by an independent auditor"
        EXHIBITION = "exhibition", "Exhibition (unverifiable submission)"

    round = models.ForeignKey(Round, on_delete=models.PROTECT, related_name="entries")
    system_version = models.ForeignKey(SystemVersion, on_delete=models.PROTECT)
    label = models.CharField(max_length=32, help_text="Anonymous label shown before the reveal")
    path = models.CharField(max_length=16, choices=Path.choices, default=Path.OPERATED)
    auditor_name = models.CharField(max_length=200, blank=True)
    auditor_attestation = models.TextField(blank=True)
    provider_config = models.JSONField(
        default=dict,
        blank=True,
        help_text='Adapter configuration, e.g. {"adapter": "reference", "profile": "good"}',
    )
    gateway_token_hash = models.CharField(max_length=64, blank=True)
    identity_nonce = models.CharField(
        max_length=64,
        default=_new_nonce,
        editable=False,
        help_text="Private until the reveal: binds the committed identity hash to the identity.",
    )
    provider_watermark = models.BooleanField(
        default=False, help_text="The provider requires a visible watermark on its output."
    )
    committed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["round", "label"]
        verbose_name_plural = "entries"
        constraints = [
            models.UniqueConstraint(fields=["round", "system_version"], name="uniq_round_system"),
            models.UniqueConstraint(fields=["round", "label"], name="uniq_round_label"),
            models.CheckConstraint(
                condition=Q(path__in=["operated", "audited", "exhibition"]), name="entry_path_valid"
            ),
            models.CheckConstraint(
                condition=~Q(path="audited") | ~Q(auditor_name=""),
                name="entry_audited_names_auditor",
            ),
        ]

    FROZEN_FIELDS = (
        "round_id",
        "system_version_id",
        "label",
        "path",
        "provider_config",
        "identity_nonce",
    )

    def __str__(self) -> str:
        return f"{self.round.slug}/{self.label}"

    @property
    def identity(self) -> str:
        """The public identity string revealed after the unlock."""
        version = self.system_version
        return f"{version.system.name} {version.version} ({version.customer_tier})"

    @property
    def is_exhibition(self) -> bool:
        """Exhibitions never enter a ranking pool (protocol: Challenger path).

        Ranked entries are operated by the platform, or audited with a stored attestation of
        the named auditor; anything else, and any private or non-public configuration, is an
        exhibition.
        """
        if self.path == self.Path.EXHIBITION or not self.system_version.public_configuration:
            return True
        if self.path == self.Path.AUDITED:
            return not self.attestations.exists()
        return False


# ---------------------------------------------------------------------------
# Runs


class Run(models.Model):
    """One operated production run of an entry on one committed package."""

    class State(models.TextChoices):
        CREATED = "created", "Created"
        STARTED = "started", "Started (wall clock running)"
        COLLECTED = "collected", "Final asset collected (clock stopped)"
        VALIDATED = "validated", "Validated"
        FINISHED = "finished", "Finished"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    entry = models.ForeignKey(Entry, on_delete=models.PROTECT, related_name="runs")
    package = models.ForeignKey(InputPackage, on_delete=models.PROTECT, related_name="runs")
    state = models.CharField(max_length=16, choices=State.choices, default=State.CREATED)
    final_state = models.CharField(max_length=32, choices=FinalState.choices, blank=True)
    final_reason = models.TextField(blank=True)

    # Step 1 and 2: recorded when the run starts, frozen after.
    recorded_system = models.JSONField(default=dict, blank=True)
    recorded_settings = models.JSONField(default=dict, blank=True)
    # Step 3: reserved budget.
    reserved_budget = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    # Step 4 and 7: the wall clock.
    clock_started_at = models.DateTimeField(null=True, blank=True)
    clock_stopped_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    accepted_attempt = models.OneToOneField(
        "Attempt", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    output_sha256 = models.CharField(max_length=64, blank=True)
    effective_duration_s = models.FloatField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    problems = models.JSONField(default=list, blank=True)
    output_facts = models.JSONField(
        default=dict, blank=True, help_text="width, height, display_aspect_ratio, fps of the output"
    )
    proxy_file = models.ForeignKey(
        "media_pipeline.MediaFile",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="proxy_of_runs",
        help_text="The neutral review proxy shown to voters and jurors.",
    )
    exhibition_reason = models.TextField(blank=True)
    task_id = models.CharField(max_length=255, blank=True)
    operated_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life from the worker operating the run."
    )
    protocol_key = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["created", "started", "collected", "validated", "finished"]),
                name="run_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(final_state="") | Q(final_state__in=FinalState.values),
                name="run_final_state_valid",
            ),
            # "Where it is" and "why it ended" stay apart, but agree: only finished runs have
            # a final state, and every finished run has exactly one.
            models.CheckConstraint(
                condition=(Q(state="finished") & ~Q(final_state=""))
                | (~Q(state="finished") & Q(final_state="")),
                name="run_finished_iff_final_state",
            ),
            models.CheckConstraint(
                condition=Q(state="created") | Q(started_at__isnull=False),
                name="run_started_has_time",
            ),
        ]

    FROZEN_FIELDS = (
        "entry_id",
        "package_id",
        "recorded_system",
        "recorded_settings",
        "reserved_budget",
        "clock_started_at",
        "protocol_key",
    )

    def __str__(self) -> str:
        return f"run {self.public_id}"

    @property
    def wall_time_s(self) -> float | None:
        if self.clock_started_at and self.clock_stopped_at:
            return (self.clock_stopped_at - self.clock_started_at).total_seconds()
        return None

    @property
    def is_exhibition(self) -> bool:
        return bool(self.exhibition_reason) or self.entry.is_exhibition


class Attempt(models.Model):
    """One submission of the committed brief to the provider; failed ones are kept with cost."""

    class State(models.TextChoices):
        SUBMITTING = "submitting", "Submitting"
        SUBMITTED = "submitted", "Submitted (waiting for the provider)"
        ARRIVED = "arrived", "Asset arrived"
        ACCEPTED = "accepted", "Accepted (first technically valid result)"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="attempts")
    number = models.PositiveSmallIntegerField()
    idempotency_key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    state = models.CharField(max_length=16, choices=State.choices, default=State.SUBMITTING)
    provider_request_id = models.CharField(max_length=255, blank=True)
    provider_request_id_hash = models.CharField(max_length=64, blank=True)
    failure_code = models.CharField(max_length=64, blank=True)
    retry_reason = models.CharField(
        max_length=64, blank=True, help_text="The protocol's retry reason when a retry followed."
    )
    failure_message = models.TextField(blank=True)
    cost = models.JSONField(default=dict, blank=True, help_text="The five separate cost values.")
    local_compute = models.JSONField(default=dict, blank=True)
    output = models.ForeignKey(
        "media_pipeline.MediaFile",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="attempts",
    )
    output_sha256 = models.CharField(max_length=64, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    arrived_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="uniq_attempt_number"),
            models.CheckConstraint(
                condition=Q(state__in=["submitting", "submitted", "arrived", "accepted", "failed"]),
                name="attempt_state_valid",
            ),
            models.CheckConstraint(
                condition=~Q(state="failed") | ~Q(failure_code=""),
                name="attempt_failed_has_code",
            ),
        ]

    FROZEN_FIELDS = (
        "run_id",
        "number",
        "state",
        "provider_request_id",
        "failure_code",
        "retry_reason",
        "cost",
        "local_compute",
        "output_id",
        "output_sha256",
        "arrived_at",
    )

    def __str__(self) -> str:
        return f"{self.run} attempt {self.number}"


class HumanAction(models.Model):
    """A human action after submission, in one of the protocol's five classes. Append-only."""

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="human_actions")
    action_class = models.CharField(max_length=32, choices=HumanActionClass.choices)
    description = models.TextField()
    actor = models.CharField(max_length=200)
    occurred_at = models.DateTimeField()
    recorded_at = models.DateTimeField(auto_now_add=True)
    log_index = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["occurred_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(action_class__in=HumanActionClass.values),
                name="human_action_class_valid",
            )
        ]

    def __str__(self) -> str:
        return f"{self.action_class} on {self.run}"


class RunManifest(models.Model):
    """The machine-readable run manifest. Append-only: a correction supersedes."""

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="manifests")
    document = models.JSONField()
    sha256 = models.CharField(max_length=64)
    supersedes = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="superseded_by"
    )
    log_index = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "created_at", "id"]

    def __str__(self) -> str:
        return f"manifest {self.sha256[:12]} of {self.run}"


# ---------------------------------------------------------------------------
# The common-engine gateway (protocol: Common-engine controls)


class EngineRequest(models.Model):
    """One request an entrant's system made to the common engine through the gateway."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued (credit reserved)"
        RUNNING = "running", "Running on the engine"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        SAFETY_BLOCKED = "safety_blocked", "Safety block"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    entry = models.ForeignKey(Entry, on_delete=models.PROTECT, related_name="engine_requests")
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.PROTECT, related_name="engine_requests"
    )
    prompt = models.TextField()
    params = models.JSONField(default=dict)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    reserved_credits = models.DecimalField(max_digits=14, decimal_places=4)
    charged_credits = models.DecimalField(max_digits=14, decimal_places=4, default=0)
    generated_seconds = models.FloatField(default=0)
    used_in_film = models.BooleanField(null=True, blank=True)
    provider_request_id = models.CharField(max_length=255, blank=True)
    provider_request_id_hash = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    output = models.ForeignKey(
        "media_pipeline.MediaFile",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="engine_requests",
    )
    output_sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    state__in=["queued", "running", "succeeded", "failed", "safety_blocked"]
                ),
                name="engine_request_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(reserved_credits__gte=0) & Q(charged_credits__gte=0),
                name="engine_request_credits_nonnegative",
            ),
        ]

    def __str__(self) -> str:
        return f"engine request {self.public_id}"


class GatewayLogRecord(models.Model):
    """The append-only gateway log: a hash chain per entry; its head goes into the manifest."""

    entry = models.ForeignKey(Entry, on_delete=models.PROTECT, related_name="gateway_log")
    seq = models.PositiveIntegerField()
    event = models.JSONField()
    prev_hash = models.CharField(max_length=64)
    record_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["entry", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["entry", "seq"], name="uniq_gateway_log_seq")
        ]

    def __str__(self) -> str:
        return f"gateway log {self.entry_id}#{self.seq}"


# ---------------------------------------------------------------------------
# Governance (protocol: Output requirements, Challenger path, Quality dimensions)


class WatermarkPermission(models.Model):
    """A stored clean-output agreement or written permission for a watermarked provider.

    A blind ranked round cannot open while an entry's provider requires a watermark and no
    such record exists. Append-only and logged.
    """

    class Kind(models.TextChoices):
        CLEAN_OUTPUT_AGREEMENT = "clean_output_agreement", "Clean-output agreement"
        WRITTEN_PERMISSION = "written_permission", "Written permission"

    entry = models.ForeignKey(Entry, on_delete=models.PROTECT, related_name="watermark_permissions")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    document = models.TextField(help_text="The agreement or permission text, or where it is kept.")
    recorded_by = models.CharField(max_length=200)
    recorded_at = models.DateTimeField(auto_now_add=True)
    log_index = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["recorded_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["clean_output_agreement", "written_permission"]),
                name="watermark_permission_kind_valid",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} for {self.entry}"


class AuditorAttestation(models.Model):
    """An independent auditor's attestation that they witnessed a complete run. Append-only."""

    entry = models.ForeignKey(Entry, on_delete=models.PROTECT, related_name="attestations")
    auditor_name = models.CharField(max_length=200)
    statement = models.TextField()
    recorded_by = models.CharField(max_length=200)
    recorded_at = models.DateTimeField(auto_now_add=True)
    log_index = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["recorded_at"]

    def __str__(self) -> str:
        return f"attestation by {self.auditor_name} for {self.entry}"


class ChecklistTick(models.Model):
    """Prompt-adherence diagnostic: one reviewer's verdict on one atomic requirement of a film.

    Published beside the ranking, never inside it (protocol: Prompt tracks, Quality dimensions).
    """

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="checklist_ticks")
    item_id = models.CharField(max_length=64)
    met = models.BooleanField()
    reviewer = models.CharField(max_length=100, help_text="Pseudonymous reviewer id.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "item_id", "reviewer"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "item_id", "reviewer"], name="uniq_checklist_tick"
            )
        ]

    def __str__(self) -> str:
        return f"{self.run} {self.item_id}: {'met' if self.met else 'not met'}"


class CriticReport(models.Model):
    """An automated critic's report on a film: diagnostic only, never a ranking input."""

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="critic_reports")
    critic = models.CharField(max_length=100)
    critic_version = models.CharField(max_length=100)
    report = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "critic", "created_at"]

    def __str__(self) -> str:
        return f"{self.critic} on {self.run}"
