"""Models of the media pipeline: stored files, analyses, proxies, segment clips, jobs.

Protocol: Run rules (``store_original_and_checksum``, ``validate_without_modifying``,
``create_review_proxy``), Output requirements, Public segment result. Rows are written only
by ``media_pipeline/services.py``. ``MediaFile.sha256`` and ``storage_name`` can never change
(a database trigger refuses it, migration 0003): a file is stored once under an opaque name
and its checksum is the one taken on arrival.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import models
from django.db.models import Q


class MediaFile(models.Model):
    """A file in storage under an opaque name. Its SHA-256 is taken on arrival, never changes."""

    class Kind(models.TextChoices):
        ORIGINAL = "original"
        PROXY = "proxy"
        SEGMENT = "segment"
        RAW_ENGINE_OUTPUT = "raw_engine_output"
        THUMBNAIL = "thumbnail"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    storage_name = models.CharField(
        max_length=255, unique=True, help_text="Opaque random name; says nothing about the system."
    )
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    content_type = models.CharField(max_length=100, default="video/mp4")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["sha256"], name="media_file_sha256_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(size_bytes__gte=0), name="media_file_size_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.sha256[:12]}"


class MediaAnalysis(models.Model):
    """One validation of a file against a protocol, duration class, aspect and thresholds.

    Unique per (file, protocol, class, aspect, thresholds hash): rerunning the same analysis
    returns the stored row (idempotent tasks).
    """

    media_file = models.ForeignKey(MediaFile, on_delete=models.PROTECT, related_name="analyses")
    protocol_key = models.CharField(max_length=64)
    duration_class = models.CharField(max_length=32)
    aspect_ratio = models.CharField(max_length=16, help_text="Required display aspect ratio.")
    thresholds = models.JSONField(help_text="The frozen detection thresholds applied.")
    thresholds_sha256 = models.CharField(max_length=64)
    ffmpeg_version = models.CharField(max_length=255)
    report = models.JSONField(help_text="The full analysis report (media_pipeline.analysis).")
    analysed = models.BooleanField(help_text="False when the file could not be analysed.")
    conforming = models.BooleanField()
    problems = models.JSONField(default=list, help_text="Problem codes, in order found.")
    duration_s = models.FloatField(null=True, blank=True)
    effective_duration_s = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "media_file",
                    "protocol_key",
                    "duration_class",
                    "aspect_ratio",
                    "thresholds_sha256",
                ],
                name="media_analysis_once_per_inputs",
            ),
            models.CheckConstraint(
                condition=Q(conforming=False) | Q(analysed=True),
                name="media_analysis_conforming_needs_analysed",
            ),
        ]

    def __str__(self) -> str:
        verdict = "conforming" if self.conforming else ",".join(self.problems) or "not conforming"
        return f"analysis of {self.media_file_id} ({verdict})"

    @property
    def output_facts(self) -> dict[str, Any]:
        """Width, height, display aspect ratio and fps of the output (manifest fields)."""
        return {
            key: self.report.get(key) for key in ("width", "height", "display_aspect_ratio", "fps")
        }


class Proxy(models.Model):
    """The neutral review proxy of an original, built by one locked recipe."""

    original = models.ForeignKey(MediaFile, on_delete=models.PROTECT, related_name="proxies")
    proxy_file = models.OneToOneField(
        MediaFile, on_delete=models.PROTECT, related_name="proxy_record"
    )
    protocol_key = models.CharField(max_length=64)
    recipe = models.JSONField()
    recipe_sha256 = models.CharField(max_length=64)
    ffmpeg_version = models.CharField(max_length=255)
    verification = models.JSONField(help_text="Proxy against original: each check and figure.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        verbose_name_plural = "proxies"
        constraints = [
            models.UniqueConstraint(
                fields=["original", "recipe_sha256"], name="proxy_once_per_original_recipe"
            ),
        ]

    def __str__(self) -> str:
        return f"proxy {self.proxy_file_id} of {self.original_id}"


class SegmentClip(models.Model):
    """A window of a proxy, cut, hashed and stored (Public segment result)."""

    proxy = models.ForeignKey(Proxy, on_delete=models.PROTECT, related_name="segment_clips")
    start_s = models.FloatField()
    end_s = models.FloatField()
    clip_file = models.OneToOneField(
        MediaFile, on_delete=models.PROTECT, related_name="segment_record"
    )
    verification = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["proxy", "start_s"]
        constraints = [
            models.UniqueConstraint(
                fields=["proxy", "start_s", "end_s"], name="segment_clip_once_per_window"
            ),
            models.CheckConstraint(
                condition=Q(start_s__gte=0) & Q(end_s__gt=models.F("start_s")),
                name="segment_clip_window_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"segment {self.start_s:.3f}-{self.end_s:.3f} of {self.proxy_id}"


class MediaJob(models.Model):
    """One Celery task's work on media, with progress the admin shows.

    ``task_id`` is unique, so a redelivered task finds its row again; ``state`` says where the
    job is and ``error`` why a failed one ended.
    """

    class Kind(models.TextChoices):
        ANALYSIS = "analysis"
        PROXY = "proxy"
        SEGMENTS = "segments"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    task_id = models.CharField(max_length=255, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    media_file = models.ForeignKey(
        MediaFile, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )
    progress = models.FloatField(default=0.0, help_text="0..1, from ffmpeg -progress.")
    attempts = models.PositiveIntegerField(default=0, help_text="Deliveries of the task.")
    result = models.JSONField(default=dict, blank=True, help_text="Ids of the rows produced.")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0.0) & Q(progress__lte=1.0),
                name="media_job_progress_0_1",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["queued", "running", "succeeded", "failed"]),
                name="media_job_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=["analysis", "proxy", "segments"]),
                name="media_job_kind_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} job {self.task_id} ({self.state}, {self.progress:.0%})"
