"""Blind pairwise voting: voters, battles, assignments, playback proof and ballots.

Protocol "One-minute and two-minute voting" and "Transparency log". Fields, constraints and
small derived properties only; every write lives in ``voting/services.py``. Assignments,
heartbeats, ballots and ballot exclusions are append-only and battles are frozen from creation,
enforced by database triggers (registered in ``voting/apps.py``), not only by the ORM. A
trigger also refuses a synthetic ballot in a round that is not a demo.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from voting.cohorts import DEVICE_CLASSES, EXPERTISE_CHOICES


class Voter(models.Model):
    """A pseudonymous voter: a random id carried in a signed cookie, optionally a user.

    No IP address and no user agent is stored: only a salted hash of the voter's network (see
    ``voting.cohorts``) and a coarse device class.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="voter",
    )
    expertise = models.CharField(
        max_length=16, choices=EXPERTISE_CHOICES, blank=True, help_text="Self-declared."
    )
    device = models.CharField(
        max_length=16, choices=[(d, d) for d in DEVICE_CLASSES], default="unknown"
    )
    network_hash = models.CharField(
        max_length=64, blank=True, help_text="Salted hash of the /24 or /48 network at sign-up."
    )
    synthetic = models.BooleanField(
        default=False, help_text="A simulated voter (simulate_votes); votes only in demo rounds."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(expertise__in=[v for v, _ in EXPERTISE_CHOICES]),
                name="voter_expertise_valid",
            ),
            models.CheckConstraint(
                condition=Q(device__in=list(DEVICE_CLASSES)), name="voter_device_valid"
            ),
        ]
        indexes = [models.Index(fields=["network_hash"])]

    def __str__(self) -> str:
        return f"voter {str(self.public_id)[:8]}"


class Battle(models.Model):
    """A pair of outputs for the same prompt in the same round, shown to voters.

    ``run_a`` / ``run_b`` are ordered by public id (``str(run_a.public_id) <
    str(run_b.public_id)``), so a pair has one row whatever order it is shown in. The proxy
    durations are measured with ffprobe once, when the battle is created.
    """

    round = models.ForeignKey("rounds.Round", on_delete=models.PROTECT, related_name="battles")
    package = models.ForeignKey(
        "rounds.InputPackage", on_delete=models.PROTECT, related_name="battles"
    )
    duration_class = models.CharField(max_length=32)
    prompt_track = models.CharField(max_length=32)
    run_a = models.ForeignKey("rounds.Run", on_delete=models.PROTECT, related_name="+")
    run_b = models.ForeignKey("rounds.Run", on_delete=models.PROTECT, related_name="+")
    duration_a_s = models.FloatField()
    duration_b_s = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["round", "package", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run_a", "run_b"], name="uniq_battle_pair"),
            models.CheckConstraint(condition=~Q(run_a=F("run_b")), name="battle_two_runs"),
            models.CheckConstraint(
                condition=Q(duration_a_s__gt=0) & Q(duration_b_s__gt=0),
                name="battle_durations_positive",
            ),
        ]

    FROZEN_FIELDS = (
        "round_id",
        "package_id",
        "duration_class",
        "prompt_track",
        "run_a_id",
        "run_b_id",
        "duration_a_s",
        "duration_b_s",
    )

    def __str__(self) -> str:
        return f"battle {self.pk} ({self.round_id}/{self.package_id})"

    def run_for(self, side: str):
        return self.run_a if side == "a" else self.run_b

    def duration_for(self, side: str) -> float:
        return self.duration_a_s if side == "a" else self.duration_b_s


class Side(models.TextChoices):
    A = "a", "run_a"
    B = "b", "run_b"


class Assignment(models.Model):
    """One voter shown one battle, with the side randomization. Append-only.

    ``first`` says which side of the battle plays as Film 1 (protocol: "Randomize the playback
    order for each voter"). ``token`` is the only handle the voter's page and media addresses
    carry; ``hmac_key`` signs the page's heartbeats and ballot.
    """

    token = models.CharField(max_length=64, unique=True)
    voter = models.ForeignKey(Voter, on_delete=models.PROTECT, related_name="assignments")
    battle = models.ForeignKey(Battle, on_delete=models.PROTECT, related_name="assignments")
    round = models.ForeignKey("rounds.Round", on_delete=models.PROTECT, related_name="+")
    first = models.CharField(max_length=1, choices=Side.choices)
    hmac_key = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # Never the same pair twice for one voter (issue 6).
            models.UniqueConstraint(fields=["voter", "battle"], name="uniq_voter_battle"),
            models.CheckConstraint(condition=Q(first__in=["a", "b"]), name="assignment_first"),
        ]

    def __str__(self) -> str:
        return f"assignment {self.token[:8]}"

    @property
    def second(self) -> str:
        return "b" if self.first == "a" else "a"

    def side_of_film(self, film: int) -> str:
        """Film 1 is the ``first`` side, Film 2 the other."""
        return self.first if film == 1 else self.second


class PlaybackSession(models.Model):
    """What the server accepted so far for one film of one assignment (mutable summary).

    The proof itself is the append-only heartbeats; this row is the running state the
    heartbeat service locks and updates, and anyone can recompute it from the heartbeats.
    """

    assignment = models.ForeignKey(Assignment, on_delete=models.PROTECT, related_name="sessions")
    film = models.PositiveSmallIntegerField()
    duration_s = models.FloatField()
    started_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    last_seq = models.PositiveIntegerField(default=0)
    last_client_ms = models.BigIntegerField(null=True, blank=True)
    played = models.JSONField(default=list, blank=True)
    audible = models.JSONField(default=list, blank=True)
    watched_s = models.FloatField(default=0)
    audible_s = models.FloatField(default=0)
    ended = models.BooleanField(default=False)
    heartbeats = models.PositiveIntegerField(default=0)
    refusals = models.JSONField(default=dict, blank=True, help_text="Refusal code -> count.")
    flags = models.JSONField(default=list, blank=True)
    timing_hash = models.CharField(max_length=64, blank=True)
    closed = models.BooleanField(default=False, help_text="The ballot was cast.")

    class Meta:
        ordering = ["assignment", "film"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "film"], name="uniq_session_film"),
            models.CheckConstraint(condition=Q(film__in=[1, 2]), name="session_film_1_or_2"),
        ]

    def __str__(self) -> str:
        return f"{self.assignment} film {self.film}"


class Heartbeat(models.Model):
    """One signed heartbeat as received, with the server's verdict. Append-only.

    ``body`` is the exact request body the HMAC covered, so the signature can be re-checked.
    """

    assignment = models.ForeignKey(
        Assignment, on_delete=models.PROTECT, related_name="heartbeat_records"
    )
    film = models.PositiveSmallIntegerField()
    seq = models.PositiveIntegerField()
    received_at = models.DateTimeField()
    body = models.TextField()
    signature = models.CharField(max_length=64)
    accepted = models.BooleanField()
    refusal = models.CharField(max_length=32, blank=True)

    class Meta:
        ordering = ["assignment", "seq"]
        constraints = [
            # Replay protection: a sequence number is used once per assignment.
            models.UniqueConstraint(fields=["assignment", "seq"], name="uniq_heartbeat_seq"),
            models.CheckConstraint(condition=Q(film__in=[1, 2]), name="heartbeat_film_1_or_2"),
        ]

    def __str__(self) -> str:
        return f"heartbeat {self.assignment_id}#{self.seq}"


class Choice(models.TextChoices):
    FIRST = "first", "Film 1"
    SECOND = "second", "Film 2"
    TIE = "tie", "About the same"


class Ballot(models.Model):
    """A locked vote. Append-only; committed to the transparency log in its own transaction.

    ``record`` is the deidentified ballot record (protocol "Transparency log": battle
    assignment, side randomization, vote result, exclusion reason, cohort flags) exactly as
    hashed (``sha256``, over its canonical JSON) and appended to the log at ``log_index``.
    ``exclusion_reason`` is empty for a ballot that counts in the main result; an exclusion
    found later is a :class:`BallotExclusion`, never an edit.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    assignment = models.OneToOneField(Assignment, on_delete=models.PROTECT, related_name="ballot")
    round = models.ForeignKey("rounds.Round", on_delete=models.PROTECT, related_name="ballots")
    battle = models.ForeignKey(Battle, on_delete=models.PROTECT, related_name="ballots")
    voter = models.ForeignKey(Voter, on_delete=models.PROTECT, related_name="ballots")
    choice = models.CharField(max_length=8, choices=Choice.choices)
    chosen_run = models.ForeignKey(
        "rounds.Run", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    outcome = models.CharField(max_length=4, help_text="a, b or tie, on the battle's sides")
    first = models.CharField(max_length=1, choices=Side.choices)
    audio_on = models.BooleanField()
    synthetic = models.BooleanField(default=False)
    exclusion_reason = models.CharField(max_length=200, blank=True)
    flags = models.JSONField(default=list, blank=True)
    coverage_first = models.FloatField(null=True, blank=True)
    coverage_second = models.FloatField(null=True, blank=True)
    device = models.CharField(max_length=16, blank=True)
    expertise = models.CharField(max_length=16, blank=True)
    network_hash = models.CharField(max_length=64, blank=True)
    timing_fingerprint = models.CharField(max_length=64, blank=True)
    record = models.JSONField()
    sha256 = models.CharField(max_length=64)
    log_index = models.BigIntegerField(null=True, blank=True)
    locked_at = models.DateTimeField()

    class Meta:
        ordering = ["locked_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(choice__in=["first", "second", "tie"]), name="ballot_choice_valid"
            ),
            models.CheckConstraint(
                condition=Q(outcome__in=["a", "b", "tie"]), name="ballot_outcome_valid"
            ),
            models.CheckConstraint(condition=Q(first__in=["a", "b"]), name="ballot_first"),
            models.CheckConstraint(
                condition=Q(choice="tie", chosen_run__isnull=True)
                | (~Q(choice="tie") & Q(chosen_run__isnull=False)),
                name="ballot_tie_has_no_winner",
            ),
            # A kept ballot without sound is never in the main result (protocol: "Require
            # audio playback for the main result").
            models.CheckConstraint(
                condition=Q(audio_on=True) | ~Q(exclusion_reason=""),
                name="ballot_audio_off_is_excluded",
            ),
        ]
        indexes = [
            models.Index(fields=["round", "locked_at"]),
            models.Index(fields=["round", "network_hash"]),
            models.Index(fields=["round", "timing_fingerprint"]),
        ]

    def __str__(self) -> str:
        return f"ballot {str(self.public_id)[:8]}"


class BallotExclusion(models.Model):
    """An exclusion found after a ballot was locked (e.g. a later voter's identical timing).

    Append-only and logged as a correction superseding the ballot's log entry: the ballot
    record stays as it was committed.
    """

    ballot = models.ForeignKey(Ballot, on_delete=models.PROTECT, related_name="exclusions")
    reason = models.CharField(max_length=64)
    detail = models.TextField(blank=True)
    log_index = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["ballot", "reason"], name="uniq_ballot_exclusion"),
        ]

    def __str__(self) -> str:
        return f"{self.ballot} excluded: {self.reason}"
