"""Celery tasks of the media pipeline: thin; receive ids, call one service, record the job.

Issue 4, "Workers and storage": tasks are idempotent and safe to redeliver. ``acks_late``
with ``reject_on_worker_lost`` puts a task back on the queue when its worker dies; the
redelivery finds its ``MediaJob`` by task id and calls the same service, which returns the
row a previous delivery finished or does the work again (a killed encode left only scratch
files in the work directory, never anything in storage). Progress from ffmpeg's
``-progress`` is written to the job row at most once a second for the admin.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

# A 2-hour film: the analysis decodes at several times real time, the proxy encodes at about
# real time on a small worker; both limits leave room and stay under the broker's
# visibility timeout (settings.CELERY_BROKER_TRANSPORT_OPTIONS).
ANALYSIS_TIME_LIMIT_S = 3 * 3600
PROXY_TIME_LIMIT_S = 4 * 3600 - 120
SEGMENTS_TIME_LIMIT_S = 2 * 3600

_COMMON: dict[str, Any] = {
    "bind": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": False,
}


def _job(task, kind: str, media_file):
    from media_pipeline.services import media_job_begin

    task_id = task.request.id or f"local-{kind}-{media_file.pk if media_file else 'none'}"
    return media_job_begin(task_id=task_id, kind=kind, media_file=media_file)


def _run(job, work):
    from media_pipeline.services import media_job_fail, media_job_succeed, progress_reporter

    try:
        result = work(progress_reporter(job))
    except Exception as exc:
        media_job_fail(job=job, error=f"{type(exc).__name__}: {exc}")
        raise
    media_job_succeed(job=job, result=result)
    return result


@shared_task(
    name="media_pipeline.analysis_run",
    time_limit=ANALYSIS_TIME_LIMIT_S,
    soft_time_limit=ANALYSIS_TIME_LIMIT_S - 60,
    **_COMMON,
)
def analysis_run_task(
    self,
    media_file_id: str,
    protocol_key: str,
    duration_class: str,
    aspect_ratio: str | None,
    thresholds: dict[str, Any] | None,
) -> dict[str, Any]:
    """Analyse a stored file; returns ``{"analysis_id": ..., "conforming": ...}``."""
    from media_pipeline.models import MediaFile
    from media_pipeline.services import analysis_run

    media_file = MediaFile.objects.get(pk=media_file_id)
    job = _job(self, "analysis", media_file)

    def work(progress):
        analysis = analysis_run(
            media_file=media_file,
            protocol_key=protocol_key,
            duration_class=duration_class,
            aspect_ratio=aspect_ratio,
            thresholds=thresholds,
            on_progress=progress,
        )
        return {"analysis_id": analysis.pk, "conforming": analysis.conforming}

    return _run(job, work)


@shared_task(
    name="media_pipeline.proxy_build",
    time_limit=PROXY_TIME_LIMIT_S,
    soft_time_limit=PROXY_TIME_LIMIT_S - 60,
    **_COMMON,
)
def proxy_build_task(
    self, media_file_id: str, protocol_key: str, canvas: list[int] | None = None
) -> dict[str, Any]:
    """Build the review proxy of a stored original; returns ``{"proxy_id", "proxy_file_id"}``."""
    from media_pipeline.models import MediaFile
    from media_pipeline.services import proxy_build

    media_file = MediaFile.objects.get(pk=media_file_id)
    job = _job(self, "proxy", media_file)

    def work(progress):
        proxy = proxy_build(
            media_file=media_file,
            protocol_key=protocol_key,
            canvas=tuple(canvas) if canvas else None,
            on_progress=progress,
        )
        return {"proxy_id": proxy.pk, "proxy_file_id": str(proxy.proxy_file_id)}

    return _run(job, work)


@shared_task(
    name="media_pipeline.segments_cut",
    time_limit=SEGMENTS_TIME_LIMIT_S,
    soft_time_limit=SEGMENTS_TIME_LIMIT_S - 60,
    **_COMMON,
)
def segments_cut_task(self, proxy_id: int, windows: list[list[float]]) -> dict[str, Any]:
    """Cut segment clips from a proxy; returns ``{"segment_clip_ids": [...]}``."""
    from media_pipeline.models import Proxy
    from media_pipeline.services import segments_cut

    proxy = Proxy.objects.select_related("proxy_file").get(pk=proxy_id)
    job = _job(self, "segments", proxy.proxy_file)

    def work(progress):
        clips = segments_cut(
            proxy=proxy, windows=[(float(a), float(b)) for a, b in windows], on_progress=progress
        )
        return {"segment_clip_ids": [clip.pk for clip in clips]}

    return _run(job, work)


@shared_task(name="media_pipeline.sweep_scratch", ignore_result=False)
def sweep_scratch(max_age_s: float | None = None) -> list[str]:
    """Remove what killed workers left in the scratch directory (celery beat, hourly).

    The default age is ``DUEL_SCRATCH_MAX_AGE_S``: the task time limit and an hour more,
    so no running task's scratch can be that old.
    """
    from django.conf import settings

    from media_pipeline.storage import scratch_sweep

    age = settings.DUEL_SCRATCH_MAX_AGE_S if max_age_s is None else float(max_age_s)
    return scratch_sweep(max_age_s=age)
