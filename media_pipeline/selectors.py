"""Reads of the media pipeline that more than one caller needs."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import QuerySet
from django.utils import timezone

from media_pipeline.models import MediaAnalysis, MediaFile, MediaJob, Proxy


def stale_media_jobs(*, older_than_s: float) -> QuerySet[MediaJob]:
    """Running jobs without a heartbeat for ``older_than_s`` (their worker probably died)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    return MediaJob.objects.filter(state=MediaJob.State.RUNNING, heartbeat_at__lt=cutoff)


def latest_analysis(*, media_file: MediaFile) -> MediaAnalysis | None:
    return MediaAnalysis.objects.filter(media_file=media_file).order_by("-created_at").first()


def proxy_of(*, media_file: MediaFile) -> Proxy | None:
    """The newest proxy of an original, with its file."""
    return (
        Proxy.objects.select_related("proxy_file")
        .filter(original=media_file)
        .order_by("-created_at")
        .first()
    )
