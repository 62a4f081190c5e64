"""The transparency log's tables: entries, stored subtree hashes, the head and checkpoints.

Protocol "Transparency log": an append-only public log, every record timestamped and signed, a
correction is a superseding record. ``LogEntry``, ``LogNode`` and ``Checkpoint`` are refused
every UPDATE and DELETE by database triggers (migration 0002); ``LogHead`` is the one mutable
row, a lock and a cache of the tree size and root that anyone can recompute from the entries.
Writes happen only in ``ledger/services.py``.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q


class EntryKind(models.TextChoices):
    """What a log entry commits (protocol "Transparency log"; Tovaki ``controls``)."""

    PROTOCOL_VERSION = "protocol_version", "Protocol version"
    PROTOCOL_CHANGE = "protocol_change", "Protocol change"
    PROMPT_HASH = "prompt_hash", "Prompt hash"
    REQUIREMENT_CHECKLIST_HASH = "requirement_checklist_hash", "Requirement checklist hash"
    BUDGET_AND_DEADLINE = "budget_and_deadline", "Budget and deadline"
    BUDGET_APPROVAL = "budget_approval", "Budget approval"
    ROUND_CONTROLS = "round_controls", "Round controls"
    DETECTION_THRESHOLDS = "detection_thresholds", "Detection thresholds"
    ROUND_TRANSITION = "round_transition", "Round transition"
    ENTRY_COMMIT = "entry_commit", "Entry commit"
    RUN_START = "run_start", "Run start"
    RUN_TRANSITION = "run_transition", "Run transition"
    ATTEMPT = "attempt", "Attempt"
    OUTPUT_HASH = "output_hash", "Output hash"
    MANIFEST = "manifest", "Manifest"
    SEGMENT_WINDOWS = "segment_windows", "Segment windows"
    JURY_ASSIGNMENT = "jury_assignment", "Jury assignment"
    ORDER_SCHEDULE = "order_schedule", "Order schedule"
    BALLOT = "ballot", "Deidentified ballot"
    BALLOT_LOCK = "ballot_lock", "Ballot lock"
    SCORECARD_LOCK = "scorecard_lock", "Scorecard lock"
    CALCULATION_INPUTS = "calculation_inputs", "Calculation inputs"
    REVEAL_UNLOCK = "reveal_unlock", "Reveal unlock"
    DISCLOSURE = "disclosure", "Disclosure"
    WATERMARK_PERMISSION = "watermark_permission", "Watermark permission"
    AUDITOR_ATTESTATION = "auditor_attestation", "Auditor attestation"
    SEASON_CLOSE = "season_close", "Season close"
    HUMAN_ACTION = "human_action", "Human action"
    CORRECTION = "correction", "Correction"


class LogEntry(models.Model):
    """One signed log entry; its leaf in the Merkle tree is ``leaf_hash(entry_bytes)``.

    ``entry_bytes`` are stored exactly as hashed and signed: the canonical JSON of
    ``{"index", "kind", "subject", "timestamp", "payload", "supersedes"}``. The other columns
    repeat those fields for queries; verification checks that they agree with the bytes.
    """

    index = models.BigIntegerField(primary_key=True, db_column="entry_index")
    kind = models.CharField(max_length=40, choices=EntryKind.choices)
    subject = models.CharField(max_length=200)
    timestamp = models.DateTimeField()
    payload = models.JSONField()
    supersedes = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="superseded_by",
        db_column="supersedes_index",
        help_text="An earlier entry this one corrects or replaces; nothing is overwritten.",
    )
    entry_bytes = models.BinaryField()
    leaf_hash = models.BinaryField(max_length=32)
    key_id = models.BinaryField(max_length=4)
    signature = models.BinaryField(max_length=64)

    class Meta:
        ordering = ["index"]
        indexes = [models.Index(fields=["kind", "index"]), models.Index(fields=["subject"])]
        constraints = [
            models.CheckConstraint(condition=Q(index__gte=0), name="ledger_entry_index_gte_0"),
            models.CheckConstraint(
                condition=Q(supersedes__isnull=True) | Q(supersedes__lt=F("index")),
                name="ledger_entry_supersedes_earlier",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=EntryKind.values), name="ledger_entry_kind_known"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.index} {self.kind} {self.subject}"

    def clean(self) -> None:
        if self.supersedes_id is not None and self.supersedes_id >= self.index:
            raise ValidationError({"supersedes": "An entry can only supersede an earlier entry."})


class LogNode(models.Model):
    """Hash of the complete aligned subtree ``(level, index)`` of the log's Merkle tree.

    It covers leaves ``[index * 2**level, (index + 1) * 2**level)``; level 0 holds leaf hashes.
    Stored when the leaf completing it is appended, so roots and proofs need O(log n) reads
    (``ledger/merkle.py``).
    """

    pk = models.CompositePrimaryKey("level", "index")
    level = models.PositiveSmallIntegerField()
    index = models.BigIntegerField(db_column="node_index")
    hash = models.BinaryField(max_length=32)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(level__lte=63) & Q(index__gte=0), name="ledger_node_coordinates"
            )
        ]

    def __str__(self) -> str:
        return f"node({self.level}, {self.index})"


class LogHead(models.Model):
    """The single row appenders lock: the current tree size, root hash and frontier.

    Locking it (``select_for_update``) serializes appenders so indexes are gap-free; it is a
    cache of what the entries and nodes already determine, checked by ``verify_log``.
    """

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    tree_size = models.BigIntegerField(default=0)
    root_hash = models.BinaryField(max_length=32)
    frontier = models.BinaryField(
        default=b"",
        help_text="Hashes of the complete subtrees that make the current tree, largest first "
        "(32 bytes each): all an append needs, so it reads no nodes.",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="ledger_head_single_row"),
            models.CheckConstraint(condition=Q(tree_size__gte=0), name="ledger_head_size_gte_0"),
        ]

    def __str__(self) -> str:
        return f"log head at {self.tree_size}"


class Checkpoint(models.Model):
    """A published signed tree head: the C2SP tlog-checkpoint note the log signed.

    One per tree size; the log must never sign two different roots for one size (a fork).
    """

    tree_size = models.BigIntegerField(primary_key=True)
    root_hash = models.BinaryField(max_length=32)
    note = models.TextField(help_text="The signed note exactly as published.")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["tree_size"]
        get_latest_by = "tree_size"
        constraints = [
            models.CheckConstraint(
                condition=Q(tree_size__gte=0), name="ledger_checkpoint_size_gte_0"
            )
        ]

    def __str__(self) -> str:
        return f"checkpoint at {self.tree_size}"
