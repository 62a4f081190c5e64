"""Jurors, panels, jury plans, screening sessions, viewings, scorecards and segment votes.

Fields, constraints and small derived properties only; every write that follows a rule lives
in ``juries/services.py``. What the protocol says to commit is frozen by database triggers
registered in ``juries/apps.py``: locked scorecards, frozen jury plans and attention
questions, and the append-only records (films, sessions, heartbeats, answers, segment windows
and votes).

Blindness (DESIGN.md): a juror is known publicly only by ``public_id``; name and contact are
staff-only. Jurors see films by anonymous labels, never by system.
"""

from __future__ import annotations

import secrets
import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q


def new_juror_id() -> str:
    """A pseudonymous public id: random, no order, nothing about the person."""
    return f"J-{secrets.token_hex(4).upper()}"


class Relationship(models.TextChoices):
    EMPLOYEE = "employee", "Employee"
    INVESTOR = "investor", "Investor"
    CONTRACTOR = "contractor", "Contractor"
    AFFILIATE = "affiliate", "Affiliate"
    OTHER = "other", "Other"


class PanelKind(models.TextChoices):
    AUDIENCE = "audience", "Audience panel"
    CRAFT = "craft", "Craft panel"


class Juror(models.Model):
    """A person who judges films. Public only by ``public_id``."""

    class Attrition(models.TextChoices):
        ACTIVE = "active", "Active"
        WITHDRAWN = "withdrawn", "Withdrew (completed work stays valid)"
        DISMISSED = "dismissed", "Dismissed (all work excluded)"

    public_id = models.CharField(max_length=16, unique=True, default=new_juror_id, editable=False)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="juror",
        help_text="The account the juror signs in with at /jury/.",
    )
    name = models.CharField(max_length=200, help_text="Private: staff only.")
    contact = models.CharField(max_length=300, blank=True, help_text="Private: staff only.")
    expertise = models.CharField(max_length=300, blank=True)
    target_audience_fit = models.CharField(max_length=300, blank=True)
    compensation = models.CharField(
        max_length=200, blank=True, help_text="e.g. 'USD 120 per session' (published in sum)."
    )
    attrition_status = models.CharField(
        max_length=16, choices=Attrition.choices, default=Attrition.ACTIVE
    )
    attrition_reason = models.TextField(blank=True)
    attrition_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["public_id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(attrition_status__in=["active", "withdrawn", "dismissed"]),
                name="juror_attrition_valid",
            ),
            models.CheckConstraint(
                condition=Q(attrition_status="active", attrition_at__isnull=True)
                | (~Q(attrition_status="active") & Q(attrition_at__isnull=False)),
                name="juror_attrition_has_time",
            ),
        ]

    def __str__(self) -> str:
        return self.public_id


class JurorAffiliation(models.Model):
    """A declared relationship with a party (a company, a product). Conflicts are computed from
    these against each round's entrants."""

    juror = models.ForeignKey(Juror, on_delete=models.CASCADE, related_name="affiliations")
    party = models.CharField(max_length=200, help_text="Company or product name.")
    relationship = models.CharField(max_length=16, choices=Relationship.choices)
    note = models.TextField(blank=True)
    declared_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["juror", "party"]
        constraints = [
            models.CheckConstraint(
                condition=Q(relationship__in=Relationship.values),
                name="juror_affiliation_relationship_valid",
            )
        ]

    def __str__(self) -> str:
        return f"{self.relationship} of {self.party}"


class Panel(models.Model):
    """An audience or craft panel of one round. Their scores never combine."""

    round = models.ForeignKey("rounds.Round", on_delete=models.PROTECT, related_name="panels")
    kind = models.CharField(max_length=16, choices=PanelKind.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["round", "kind"]
        constraints = [
            models.UniqueConstraint(fields=["round", "kind"], name="uniq_panel_round_kind"),
            models.CheckConstraint(condition=Q(kind__in=PanelKind.values), name="panel_kind_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.round.slug} {self.kind}"


class PanelMember(models.Model):
    """A juror on one panel of a round (a juror sits on one panel per round)."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        EXCLUDED = "excluded", "Excluded"

    class Exclusion(models.TextChoices):
        CONFLICT = "conflict_of_interest", "Conflict of interest"
        STAFF = "staff_exclusion", "Excluded by staff"

    panel = models.ForeignKey(Panel, on_delete=models.PROTECT, related_name="members")
    round = models.ForeignKey("rounds.Round", on_delete=models.PROTECT, related_name="+")
    juror = models.ForeignKey(Juror, on_delete=models.PROTECT, related_name="memberships")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    exclusion_code = models.CharField(max_length=32, choices=Exclusion.choices, blank=True)
    exclusion_detail = models.TextField(
        blank=True, help_text="Private: names the party and relationship (staff only)."
    )
    added_at = models.DateTimeField(auto_now_add=True)
    excluded_at = models.DateTimeField(null=True, blank=True)
    log_index = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["panel", "juror"]
        constraints = [
            models.UniqueConstraint(fields=["round", "juror"], name="uniq_member_round_juror"),
            models.CheckConstraint(
                condition=Q(status="active", exclusion_code="", excluded_at__isnull=True)
                | Q(
                    status="excluded",
                    exclusion_code__in=["conflict_of_interest", "staff_exclusion"],
                )
                & Q(excluded_at__isnull=False),
                name="panel_member_exclusion_consistent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.juror} on {self.panel}"


class JuryPlan(models.Model):
    """The staff's plan for a round's jury, frozen (hashed, logged) before screening.

    Schedule rules (protocol: fixed breaks and a maximum daily screening time), the score
    scale and the scoring anchors (protocol: "Define scoring anchors before screening"), and
    the attention-failure exclusion rule (published before screening).
    """

    round = models.OneToOneField("rounds.Round", on_delete=models.PROTECT, related_name="jury_plan")
    session_cap = models.DurationField(help_text="Maximum screening time in one session.")
    break_length = models.DurationField(help_text="Fixed break after each film in a session.")
    between_sessions = models.DurationField(help_text="Gap between two sessions of one day.")
    daily_max = models.DurationField(help_text="Maximum screening time in one day.")
    first_day = models.DateField()
    day_start = models.TimeField(help_text="When each screening day starts (plan time zone).")
    timezone = models.CharField(max_length=64, default="UTC")
    attention_min_correct = models.PositiveSmallIntegerField(
        default=1, help_text="Correct story answers a film needs for its scorecard to count."
    )
    score_min = models.DecimalField(max_digits=6, decimal_places=2)
    score_max = models.DecimalField(max_digits=6, decimal_places=2)
    score_step = models.DecimalField(max_digits=6, decimal_places=2)
    anchors = models.JSONField(
        default=dict, blank=True, help_text='{"dimension": {"score": "what it means"}}'
    )
    anchors_sha256 = models.CharField(max_length=64, blank=True)
    attention_statement = models.TextField(blank=True)
    plan_sha256 = models.CharField(max_length=64, blank=True)
    order_seed = models.CharField(
        max_length=64, blank=True, help_text="Drawn at the freeze; published with the orders."
    )
    task_label_seed = models.CharField(
        max_length=64,
        blank=True,
        help_text="Draws task-local labels (Tovaki). Private until scores are locked; only its "
        "commitment is logged before.",
    )
    frozen_at = models.DateTimeField(null=True, blank=True)
    log_index = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    FROZEN_FIELDS = (
        "round_id",
        "session_cap",
        "break_length",
        "between_sessions",
        "daily_max",
        "first_day",
        "day_start",
        "timezone",
        "attention_min_correct",
        "score_min",
        "score_max",
        "score_step",
        "anchors",
        "anchors_sha256",
        "attention_statement",
        "plan_sha256",
        "order_seed",
        "task_label_seed",
        "log_index",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(score_step__gt=0) & Q(score_max__gt=F("score_min")),
                name="jury_plan_scale_valid",
            ),
            models.CheckConstraint(
                condition=Q(frozen_at__isnull=True)
                | (~Q(plan_sha256="") & ~Q(anchors_sha256="") & ~Q(order_seed="")),
                name="jury_plan_frozen_has_hashes",
            ),
        ]

    def __str__(self) -> str:
        return f"jury plan of {self.round.slug}"

    @property
    def is_frozen(self) -> bool:
        return self.frozen_at is not None


class AttentionQuestion(models.Model):
    """A simple story question about one package's film. Answers never enter a score."""

    package = models.ForeignKey(
        "rounds.InputPackage", on_delete=models.PROTECT, related_name="attention_questions"
    )
    text = models.CharField(max_length=500)
    choices = models.JSONField(help_text='["first answer", "second answer", ...]')
    correct_choice = models.PositiveSmallIntegerField(help_text="0-based index into choices.")
    frozen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    FROZEN_FIELDS = ("package_id", "text", "choices", "correct_choice")

    class Meta:
        ordering = ["package", "id"]

    def __str__(self) -> str:
        return self.text[:60]


class JuryFilm(models.Model):
    """A rankable run's proxy as the jury sees it, with the proxy's real (probed) duration and,
    for Tovaki, its task-local anonymous label. Append-only."""

    round = models.ForeignKey("rounds.Round", on_delete=models.PROTECT, related_name="jury_films")
    run = models.OneToOneField("rounds.Run", on_delete=models.PROTECT, related_name="jury_film")
    package = models.ForeignKey("rounds.InputPackage", on_delete=models.PROTECT, related_name="+")
    entry = models.ForeignKey("rounds.Entry", on_delete=models.PROTECT, related_name="+")
    task_label = models.CharField(max_length=8, blank=True)
    duration_s = models.FloatField()
    proxy_sha256 = models.CharField(max_length=64)
    registered_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["round", "package", "task_label", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["package", "task_label"],
                condition=~Q(task_label=""),
                name="uniq_jury_film_task_label",
            ),
            models.CheckConstraint(condition=Q(duration_s__gt=0), name="jury_film_duration_gt_0"),
        ]

    def __str__(self) -> str:
        return f"film {self.display_label} of {self.package.prompt_key}"

    @property
    def display_label(self) -> str:
        """What jurors see: the task-local label (Tovaki) or the entry's anonymous label."""
        return self.task_label or self.entry.label


class ScreeningSession(models.Model):
    """One scheduled session of one juror. Append-only: the schedule is logged."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    round = models.ForeignKey("rounds.Round", on_delete=models.PROTECT, related_name="+")
    panel = models.ForeignKey(Panel, on_delete=models.PROTECT, related_name="sessions")
    juror = models.ForeignKey(Juror, on_delete=models.PROTECT, related_name="sessions")
    index = models.PositiveSmallIntegerField()
    day = models.PositiveSmallIntegerField()
    scheduled_start = models.DateTimeField()
    scheduled_end = models.DateTimeField()
    break_length = models.DurationField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["juror", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["round", "juror", "index"], name="uniq_session_round_juror_index"
            ),
            models.CheckConstraint(
                condition=Q(scheduled_end__gt=F("scheduled_start")), name="session_end_after_start"
            ),
        ]

    def __str__(self) -> str:
        return f"session {self.index + 1} of {self.juror}"


class Viewing(models.Model):
    """One juror's assigned viewing of one film, with the server's playback proof."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    session = models.ForeignKey(ScreeningSession, on_delete=models.PROTECT, related_name="viewings")
    round = models.ForeignKey("rounds.Round", on_delete=models.PROTECT, related_name="+")
    panel = models.ForeignKey(Panel, on_delete=models.PROTECT, related_name="+")
    juror = models.ForeignKey(Juror, on_delete=models.PROTECT, related_name="viewings")
    film = models.ForeignKey(JuryFilm, on_delete=models.PROTECT, related_name="viewings")
    order_index = models.PositiveIntegerField(help_text="Position in the juror's whole order.")
    assigned_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    last_beat_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    proof = models.JSONField(default=dict, blank=True)
    watched_s = models.FloatField(default=0)
    coverage = models.FloatField(default=0)
    reached_ending = models.BooleanField(default=False)
    client_played = models.JSONField(
        default=list, blank=True, help_text="The browser's own played ranges (audit only)."
    )

    FROZEN_FIELDS = (
        "public_id",
        "session_id",
        "round_id",
        "panel_id",
        "juror_id",
        "film_id",
        "order_index",
    )

    class Meta:
        ordering = ["juror", "order_index"]
        constraints = [
            models.UniqueConstraint(fields=["juror", "film"], name="uniq_viewing_juror_film"),
            models.UniqueConstraint(
                fields=["round", "juror", "order_index"], name="uniq_viewing_order"
            ),
            models.CheckConstraint(
                condition=Q(completed_at__isnull=True) | Q(started_at__isnull=False),
                name="viewing_completed_was_started",
            ),
        ]

    def __str__(self) -> str:
        return f"viewing {self.order_index + 1} of {self.juror}"

    @property
    def is_complete(self) -> bool:
        return self.completed_at is not None


class PlaybackBeat(models.Model):
    """One heartbeat as received, with the outcome the server gave it. Append-only audit."""

    viewing = models.ForeignKey(Viewing, on_delete=models.PROTECT, related_name="beats")
    seq = models.PositiveIntegerField()
    position_s = models.FloatField()
    rate = models.FloatField()
    paused = models.BooleanField(default=False)
    muted = models.BooleanField(default=False)
    outcome = models.CharField(max_length=32)
    received_at = models.DateTimeField()

    class Meta:
        ordering = ["viewing", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["viewing", "seq"], name="uniq_beat_viewing_seq")
        ]

    def __str__(self) -> str:
        return f"beat {self.seq} of {self.viewing_id}: {self.outcome}"


class AttentionAnswer(models.Model):
    """A juror's answer to a story question after a film. Append-only."""

    viewing = models.ForeignKey(Viewing, on_delete=models.PROTECT, related_name="answers")
    question = models.ForeignKey(AttentionQuestion, on_delete=models.PROTECT, related_name="+")
    choice = models.PositiveSmallIntegerField()
    correct = models.BooleanField()
    answered_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["viewing", "question"]
        constraints = [
            models.UniqueConstraint(
                fields=["viewing", "question"], name="uniq_answer_viewing_question"
            )
        ]

    def __str__(self) -> str:
        return f"answer to {self.question_id} in viewing {self.viewing_id}"


class Scorecard(models.Model):
    """A juror's scores for one film (and holistic choices against earlier films of the same
    prompt). A draft until locked; once locked its SHA-256 is in the log and no column of it
    can change (database trigger)."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    viewing = models.OneToOneField(Viewing, on_delete=models.PROTECT, related_name="scorecard")
    round = models.ForeignKey("rounds.Round", on_delete=models.PROTECT, related_name="+")
    panel = models.ForeignKey(Panel, on_delete=models.PROTECT, related_name="+")
    juror = models.ForeignKey(Juror, on_delete=models.PROTECT, related_name="scorecards")
    film = models.ForeignKey(JuryFilm, on_delete=models.PROTECT, related_name="scorecards")
    scores = models.JSONField(help_text='{"dimension": "3.5"} as exact decimal text')
    choices = models.JSONField(
        default=list, blank=True, help_text='[{"run_a", "run_b", "outcome": "a"|"b"}]'
    )
    anchors_sha256 = models.CharField(max_length=64)
    sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    locked_at = models.DateTimeField(null=True, blank=True)
    log_index = models.BigIntegerField(null=True, blank=True)

    FROZEN_FIELDS = (
        "public_id",
        "viewing_id",
        "round_id",
        "panel_id",
        "juror_id",
        "film_id",
        "scores",
        "choices",
        "anchors_sha256",
        "sha256",
        "log_index",
        "updated_at",
    )

    class Meta:
        ordering = ["round", "juror", "created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(locked_at__isnull=True) | (~Q(sha256="") & Q(log_index__isnull=False)),
                name="scorecard_locked_is_committed",
            )
        ]

    def __str__(self) -> str:
        return f"scorecard {self.public_id}"

    @property
    def is_locked(self) -> bool:
        return self.locked_at is not None


class SegmentWindow(models.Model):
    """A published window of one film for segment and continuity judgments. Append-only.

    ``within_segment``: the deterministic segments (protocol: Public segment result).
    ``transition``: a declared transition-centred excerpt. ``nonadjacent``: two nonadjacent
    excerpts of one film (``start_s``-``end_s`` and ``second_start_s``-``second_end_s``) for
    character and world continuity.
    """

    class Kind(models.TextChoices):
        WITHIN_SEGMENT = "within_segment", "Within-segment quality"
        TRANSITION = "transition", "Transition-centred excerpt"
        NONADJACENT = "nonadjacent", "Nonadjacent character and world comparison"

    round = models.ForeignKey("rounds.Round", on_delete=models.PROTECT, related_name="+")
    film = models.ForeignKey(JuryFilm, on_delete=models.PROTECT, related_name="windows")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    index = models.PositiveSmallIntegerField()
    start_s = models.FloatField()
    end_s = models.FloatField()
    second_start_s = models.FloatField(null=True, blank=True)
    second_end_s = models.FloatField(null=True, blank=True)
    log_index = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["film", "kind", "index"]
        constraints = [
            models.UniqueConstraint(fields=["film", "kind", "index"], name="uniq_window"),
            models.CheckConstraint(
                condition=Q(kind__in=["within_segment", "transition", "nonadjacent"]),
                name="segment_window_kind_valid",
            ),
            models.CheckConstraint(
                condition=Q(start_s__gte=0) & Q(end_s__gt=F("start_s")),
                name="segment_window_ordered",
            ),
            models.CheckConstraint(
                condition=Q(kind="nonadjacent", second_start_s__isnull=False)
                | ~Q(kind="nonadjacent") & Q(second_start_s__isnull=True),
                name="segment_window_second_only_nonadjacent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.index} of {self.film}"


class SegmentVote(models.Model):
    """A juror's paired judgment of two films' windows of the same kind and index (same
    prompt). Stored apart from full-film scorecards and never combined with them.
    Append-only."""

    class Outcome(models.TextChoices):
        A = "a", "A"
        B = "b", "B"
        TIE = "tie", "No difference"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    round = models.ForeignKey("rounds.Round", on_delete=models.PROTECT, related_name="+")
    panel = models.ForeignKey(Panel, on_delete=models.PROTECT, related_name="+")
    juror = models.ForeignKey(Juror, on_delete=models.PROTECT, related_name="segment_votes")
    window_a = models.ForeignKey(SegmentWindow, on_delete=models.PROTECT, related_name="+")
    window_b = models.ForeignKey(SegmentWindow, on_delete=models.PROTECT, related_name="+")
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    playback = models.JSONField(
        default=list,
        blank=True,
        help_text="The server's playback proof of each clip when the vote was cast (clip a, "
        "then b): duration, heartbeats, seconds credited, coverage, ending, refusals.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["round", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["juror", "window_a", "window_b"], name="uniq_segment_vote"
            ),
            models.CheckConstraint(
                condition=Q(outcome__in=["a", "b", "tie"]), name="segment_vote_outcome_valid"
            ),
            models.CheckConstraint(
                condition=~Q(window_a=F("window_b")), name="segment_vote_two_windows"
            ),
        ]

    def __str__(self) -> str:
        return f"segment vote {self.public_id}"
