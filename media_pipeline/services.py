"""Writes of the media pipeline: store, analyse, build proxies, cut segments, track jobs.

Protocol: Run rules steps ``store_original_and_checksum``, ``validate_without_modifying`` and
``create_review_proxy``; Output requirements; Public segment result. Every function is
keyword-only. ffmpeg work happens outside any transaction; each function ends with one
short transaction that records what was made. All of them are idempotent: a unique key
(analysis inputs, original + recipe, proxy + window) finds the row a previous delivery made.

The original's SHA-256 is taken as it arrives (:func:`original_store`) and checked again
before and after every step that reads it; any difference raises
:class:`~media_pipeline.storage.StoredFileChanged` and nothing is recorded.
"""

from __future__ import annotations

import mimetypes
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from duel.canonical import canonical_sha256
from media_pipeline.analysis import analyse_media
from media_pipeline.checksums import sha256_file
from media_pipeline.detection import validated_thresholds
from media_pipeline.ffcommand import tool_version
from media_pipeline.models import MediaAnalysis, MediaFile, MediaJob, Proxy, SegmentClip
from media_pipeline.probe import probe_file
from media_pipeline.proxy import (
    ProxyRecipe,
    ProxyVerification,
    encode_proxy,
    font_sha256,
    verify_proxy,
)
from media_pipeline.storage import (
    StoredFileChanged,
    delete_quietly,
    local_copy,
    publish,
    spool_to_work_dir,
    work_dir,
)
from media_pipeline.validation import MediaRequirements
from rounds.protocols import Protocol

ProgressFn = Callable[[float], None]


class ProxyVerificationFailed(RuntimeError):
    """The encoded proxy does not match its original; it was not published."""

    def __init__(self, verification: ProxyVerification) -> None:
        failed = [name for name, check in verification.checks.items() if not check.get("ok")]
        super().__init__(f"proxy verification failed: {', '.join(failed)}")
        self.verification = verification


@cache
def ffmpeg_version() -> str:
    """``ffmpeg -version``'s first line for the binary the settings name (once per process)."""
    return tool_version(settings.DUEL_FFMPEG)


def _check_unchanged(path: Path, media_file: MediaFile, step: str) -> None:
    digest = sha256_file(path)
    if digest != media_file.sha256:
        raise StoredFileChanged(
            f"{media_file.kind} {media_file.pk} changed {step}: {digest} != {media_file.sha256}"
        )


# ---------------------------------------------------------------------------------------------
# Storing


def original_store(
    *,
    path: str | Path | None = None,
    fileobj: BinaryIO | None = None,
    kind: str = MediaFile.Kind.ORIGINAL,
    content_type: str = "",
) -> MediaFile:
    """Store a file as it arrived, hashing it on the way, under an opaque random name.

    Give exactly one of ``path`` (a local file, e.g. a provider's download) or ``fileobj``
    (any readable binary stream, e.g. an upload). The bytes are streamed in 1 MiB chunks into
    the work directory while SHA-256 and size are taken, then published atomically (see
    ``media_pipeline.storage``). The original's file name is not kept: names can reveal the
    system. ``content_type`` defaults to a guess from the extension of ``path``.
    """
    if (path is None) == (fileobj is None):
        raise ValueError("give exactly one of path or fileobj")
    if kind not in MediaFile.Kind.values:
        raise ValueError(f"unknown media kind {kind!r}")
    if path is not None:
        guessed = mimetypes.guess_type(str(path))[0]
        with open(path, "rb") as source:
            local, digest, size = spool_to_work_dir(source)
    else:
        guessed = None
        local, digest, size = spool_to_work_dir(fileobj)  # type: ignore[arg-type]
    name = publish(local)
    try:
        with transaction.atomic():
            return MediaFile.objects.create(
                kind=kind,
                storage_name=name,
                sha256=digest,
                size_bytes=size,
                content_type=content_type or guessed or "application/octet-stream",
            )
    except BaseException:
        delete_quietly(name)
        raise


# ---------------------------------------------------------------------------------------------
# Analysis


def _frozen_thresholds(thresholds: Mapping[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    """Accept the thresholds dict, or the record ``detection_controls()`` returns."""
    if thresholds is not None and "thresholds" in thresholds:
        return validated_thresholds(thresholds["thresholds"]), thresholds.get("ffmpeg_version")
    return validated_thresholds(thresholds), None


def analysis_run(
    *,
    media_file: MediaFile,
    protocol_key: str,
    duration_class: str,
    aspect_ratio: str | None,
    thresholds: Mapping[str, Any] | None,
    on_progress: ProgressFn | None = None,
) -> MediaAnalysis:
    """Validate ``media_file`` without modifying it and record the verdict (one row).

    ``thresholds`` are the round's frozen detection thresholds: the plain dict, or the record
    from :func:`media_pipeline.detection.detection_controls` (``None`` means the defaults;
    only for operators' ad-hoc checks). The same inputs return the stored analysis.
    A changed original raises :class:`StoredFileChanged` and records nothing.
    """
    frozen, frozen_ffmpeg = _frozen_thresholds(thresholds)
    protocol = Protocol.load(protocol_key)
    requirements = MediaRequirements.from_protocol(protocol, duration_class, aspect_ratio)
    key = {
        "media_file": media_file,
        "protocol_key": protocol_key,
        "duration_class": duration_class,
        "aspect_ratio": requirements.aspect_ratio or "",
        "thresholds_sha256": canonical_sha256(frozen),
    }
    existing = MediaAnalysis.objects.filter(**key).first()
    if existing is not None:
        return existing
    with local_copy(media_file.storage_name, expected_sha256=media_file.sha256) as path:
        report = analyse_media(
            path,
            requirements=requirements,
            thresholds=frozen,
            ffmpeg=settings.DUEL_FFMPEG,
            ffprobe=settings.DUEL_FFPROBE,
            on_progress=on_progress,
        )
        if report.sha256 != media_file.sha256 or "original_changed" in report.problem_codes:
            raise StoredFileChanged(f"original {media_file.pk} changed during analysis")
    version = ffmpeg_version()
    payload = report.as_dict()
    if frozen_ffmpeg and frozen_ffmpeg != version:
        payload["notes"] = [*payload["notes"], "ffmpeg_version_differs_from_frozen"]
        payload["frozen_ffmpeg_version"] = frozen_ffmpeg
    try:
        with transaction.atomic():
            return MediaAnalysis.objects.create(
                **key,
                thresholds=frozen,
                ffmpeg_version=version,
                report=payload,
                analysed=report.analysed,
                conforming=report.conforming,
                problems=report.problem_codes,
                duration_s=report.duration_s,
                effective_duration_s=report.effective_duration_s,
            )
    except IntegrityError:
        return MediaAnalysis.objects.get(**key)


# ---------------------------------------------------------------------------------------------
# Proxies


def _recipe_record(recipe: ProxyRecipe) -> dict[str, Any]:
    """What makes a proxy reproducible besides the original: recipe and watermark font."""
    return {"recipe": recipe.as_dict(), "watermark_font_sha256": font_sha256(recipe)}


def proxy_build(
    *,
    media_file: MediaFile,
    protocol_key: str,
    canvas: tuple[int, int] | None = None,
    on_progress: ProgressFn | None = None,
) -> Proxy:
    """Build, verify and store the neutral review proxy of ``media_file`` (idempotent).

    The recipe is the protocol's ``proxy_recipe`` (``canvas`` overrides its canvas, for
    operators). An existing proxy of the same original and recipe is returned as is.
    Otherwise the proxy is encoded into the work directory, verified against the original
    (raises :class:`ProxyVerificationFailed` without publishing if it does not match), and
    only then published under an opaque name and recorded.
    """
    recipe = ProxyRecipe.from_definition(Protocol.load(protocol_key).proxy_recipe, canvas=canvas)
    record = _recipe_record(recipe)
    recipe_sha256 = canonical_sha256(record)
    existing = (
        Proxy.objects.select_related("proxy_file")
        .filter(original=media_file, recipe_sha256=recipe_sha256)
        .first()
    )
    if existing is not None:
        return existing
    with (
        local_copy(media_file.storage_name, expected_sha256=media_file.sha256) as source,
        tempfile.TemporaryDirectory(dir=work_dir(), prefix="proxy-") as scratch,
    ):
        _check_unchanged(source, media_file, "before the proxy encode")
        target = Path(scratch) / "proxy.mp4"
        probe = encode_proxy(
            source,
            target,
            recipe=recipe,
            ffmpeg=settings.DUEL_FFMPEG,
            ffprobe=settings.DUEL_FFPROBE,
            on_progress=on_progress,
        )
        verification = verify_proxy(probe, target, recipe=recipe, ffprobe=settings.DUEL_FFPROBE)
        _check_unchanged(source, media_file, "during the proxy encode")
        if not verification.ok:
            raise ProxyVerificationFailed(verification)
        name = publish(target, suffix=".mp4")
    return _record_published(
        name,
        verification,
        kind=MediaFile.Kind.PROXY,
        record=lambda proxy_file: Proxy.objects.create(
            original=media_file,
            proxy_file=proxy_file,
            protocol_key=protocol_key,
            recipe=record,
            recipe_sha256=recipe_sha256,
            ffmpeg_version=ffmpeg_version(),
            verification=verification.as_dict(),
        ),
        existing=lambda: Proxy.objects.select_related("proxy_file").get(
            original=media_file, recipe_sha256=recipe_sha256
        ),
    )


def _record_published(
    name: str,
    verification: ProxyVerification,
    *,
    kind: str,
    record: Callable[[MediaFile], Any],
    existing: Callable[[], Any],
):
    """Record a verified file just published under ``name`` and the row built on it.

    ``record(media_file)`` creates that row. When another delivery of the same task has
    recorded it first (a unique constraint), its row is kept, ours is dropped and
    ``existing()`` returns theirs; on any other failure our file is deleted again, so storage
    never holds a file without its row.
    """
    try:
        with transaction.atomic():
            media_file = MediaFile.objects.create(
                kind=kind,
                storage_name=name,
                sha256=verification.sha256,
                size_bytes=verification.size_bytes,
                content_type="video/mp4",
            )
            return record(media_file)
    except IntegrityError:
        delete_quietly(name)
        return existing()
    except BaseException:
        delete_quietly(name)
        raise


# ---------------------------------------------------------------------------------------------
# Segments


def segments_cut(
    *, proxy: Proxy, windows: Sequence[tuple[float, float]], on_progress: ProgressFn | None = None
) -> list[SegmentClip]:
    """Cut each window ``(start_s, end_s)`` from the proxy, verify, hash and store it.

    Windows come from ``media_pipeline.segments.select_segments`` or
    ``transition_excerpts``. The cut re-encodes with the proxy's own recipe (canvas and
    watermark are already in the proxy, so only the accurate cut and the same encoder
    settings apply). Existing clips of the same window are returned as they are.
    """
    recipe = replace(
        ProxyRecipe.from_definition(proxy.recipe["recipe"]), watermark=None, watermark_style=None
    )
    clips: list[SegmentClip] = []
    source_file = proxy.proxy_file
    with local_copy(source_file.storage_name, expected_sha256=source_file.sha256) as source:
        probe = probe_file(str(source), ffprobe=settings.DUEL_FFPROBE, count_packets=True)
        for index, (start_s, end_s) in enumerate(windows):
            start_s, end_s = round(float(start_s), 3), round(float(end_s), 3)
            existing = SegmentClip.objects.filter(proxy=proxy, start_s=start_s, end_s=end_s).first()
            if existing is not None:
                clips.append(existing)
                continue
            clips.append(_segment_clip(proxy, source, probe, recipe, start_s, end_s))
            if on_progress is not None:
                on_progress((index + 1) / len(windows))
        _check_unchanged(source, source_file, "while cutting segments")
    return clips


def _segment_clip(
    proxy: Proxy, source: Path, probe: Any, recipe: ProxyRecipe, start_s: float, end_s: float
) -> SegmentClip:
    if not 0 <= start_s < end_s:
        raise ValueError(f"invalid window {start_s}-{end_s}")
    with tempfile.TemporaryDirectory(dir=work_dir(), prefix="segment-") as scratch:
        target = Path(scratch) / "segment.mp4"
        encode_proxy(
            source,
            target,
            recipe=recipe,
            probe=probe,
            ffmpeg=settings.DUEL_FFMPEG,
            ffprobe=settings.DUEL_FFPROBE,
            start_s=start_s,
            length_s=end_s - start_s,
        )
        verification = verify_proxy(
            probe, target, recipe=recipe, ffprobe=settings.DUEL_FFPROBE, window=(start_s, end_s)
        )
        if not verification.ok:
            raise ProxyVerificationFailed(verification)
        name = publish(target, suffix=".mp4")
    return _record_published(
        name,
        verification,
        kind=MediaFile.Kind.SEGMENT,
        record=lambda clip_file: SegmentClip.objects.create(
            proxy=proxy,
            start_s=start_s,
            end_s=end_s,
            clip_file=clip_file,
            verification=verification.as_dict(),
        ),
        existing=lambda: SegmentClip.objects.get(proxy=proxy, start_s=start_s, end_s=end_s),
    )


# ---------------------------------------------------------------------------------------------
# Jobs


def media_job_begin(*, task_id: str, kind: str, media_file: MediaFile | None = None) -> MediaJob:
    """Find or create the job row of a task delivery and mark it running.

    A redelivered task (worker lost, ``acks_late``) has the same task id: it finds its row,
    counts the delivery, and starts again from the beginning (services are idempotent).
    """
    with transaction.atomic():
        job, _created = MediaJob.objects.select_for_update(no_key=True).get_or_create(
            task_id=task_id, defaults={"kind": kind, "media_file": media_file}
        )
        if job.state == MediaJob.State.SUCCEEDED:
            return job
        job.state = MediaJob.State.RUNNING
        job.attempts += 1
        job.progress = 0.0
        job.error = ""
        job.started_at = job.heartbeat_at = timezone.now()
        job.save(
            update_fields=["state", "attempts", "progress", "error", "started_at", "heartbeat_at"]
        )
    return job


def media_job_progress(*, job: MediaJob, progress: float) -> None:
    """Record progress (0..1) and a heartbeat; one UPDATE, no lock."""
    value = min(1.0, max(0.0, float(progress)))
    MediaJob.objects.filter(pk=job.pk, state=MediaJob.State.RUNNING).update(
        progress=value, heartbeat_at=timezone.now()
    )
    job.progress = value


def media_job_succeed(*, job: MediaJob, result: Mapping[str, Any]) -> MediaJob:
    with transaction.atomic():
        job = MediaJob.objects.select_for_update(no_key=True).get(pk=job.pk)
        job.state = MediaJob.State.SUCCEEDED
        job.progress = 1.0
        job.result = dict(result)
        job.finished_at = timezone.now()
        job.save(update_fields=["state", "progress", "result", "finished_at"])
    return job


def media_job_fail(*, job: MediaJob, error: str) -> MediaJob:
    with transaction.atomic():
        job = MediaJob.objects.select_for_update(no_key=True).get(pk=job.pk)
        job.state = MediaJob.State.FAILED
        job.error = error[:10_000]
        job.finished_at = timezone.now()
        job.save(update_fields=["state", "error", "finished_at"])
    return job


def progress_reporter(job: MediaJob, *, every_s: float = 1.0) -> ProgressFn:
    """A progress callback for ffmpeg work that writes at most once per ``every_s``."""
    last = [0.0]

    def report(fraction: float) -> None:
        now = time.monotonic()
        if now - last[0] >= every_s or fraction >= 1.0:
            last[0] = now
            media_job_progress(job=job, progress=fraction)

    return report
