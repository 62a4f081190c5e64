"""Result snapshots: what was computed, from exactly which inputs, under which method.

Issue 8: results are computed on demand "from a snapshot of the valid ballots and scorecards;
the snapshot's inputs are exported and their hash logged, so anyone can recompute the published
numbers". A :class:`ResultSnapshot` is append-only (database triggers, ``stats/apps.py``): a
new calculation is a new row, never an edit. Writes happen only in ``stats/services.py``.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from stats.results import RESULT_KINDS


class ResultKind(models.TextChoices):
    FULL_FILM_VOTES = "full_film_votes", "Full-film votes"
    SEGMENT = "segment", "Within-segment quality"
    JURY_DIMENSIONS = "jury_dimensions", "Jury quality dimensions"
    HOLISTIC_CHOICE = "holistic_choice", "Jury holistic paired choice"
    TOVAKI_SCORECARDS = "tovaki_scorecards", "Weighted scorecards"
    RELIABILITY = "reliability", "Reliability"


assert tuple(ResultKind.values) == RESULT_KINDS, "stats.results and stats.models disagree"


class ResultSnapshot(models.Model):
    """One computed result of one round, with the exact inputs it was computed from.

    ``inputs`` holds the canonical JSON text of the inputs document, byte for byte what
    ``inputs_sha256`` hashes and what the inputs download serves. ``result`` is the result
    document (labels only, never identities: identities are joined at display time, after the
    round's reveal). ``log_index`` is the ``calculation_inputs`` entry that committed both
    hashes. Same round, kind and inputs (which include the method and the seed) means the same
    result, so that triple is unique.
    """

    round = models.ForeignKey(
        "rounds.Round", on_delete=models.PROTECT, related_name="result_snapshots"
    )
    result_kind = models.CharField(max_length=32, choices=ResultKind.choices)
    protocol_key = models.CharField(max_length=64)
    protocol_sha256 = models.CharField(max_length=64)
    round_state = models.CharField(
        max_length=16, help_text="The round's state when the snapshot was taken."
    )
    method = models.CharField(max_length=64)
    seed = models.BigIntegerField(null=True, blank=True)
    inputs = models.TextField(help_text="Canonical JSON of the inputs document.")
    inputs_sha256 = models.CharField(max_length=64)
    result = models.JSONField()
    result_sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=32, help_text="ok, no_data, not_estimable...")
    log_index = models.BigIntegerField()
    computed_by = models.CharField(max_length=200, blank=True)
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["round", "result_kind", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["round", "result_kind", "inputs_sha256"], name="uniq_snapshot_inputs"
            ),
            models.CheckConstraint(
                condition=Q(result_kind__in=list(RESULT_KINDS)),
                name="snapshot_result_kind_valid",
            ),
        ]
        indexes = [models.Index(fields=["round", "result_kind", "-id"])]

    def __str__(self) -> str:
        return f"{self.result_kind} of round {self.round_id} ({self.inputs_sha256[:12]})"
