"""Services: store originals (streamed, hashed, opaque), analyse, build proxies, cut segments,
jobs and tasks; the original's SHA-256 is enforced before and after each step."""

from __future__ import annotations

import hashlib
import io
import re

import pytest
from django.core.files.storage import default_storage
from django.db import DatabaseError, IntegrityError, transaction

from media_pipeline.detection import DEFAULT_DETECTION_THRESHOLDS, ThresholdsInvalid
from media_pipeline.models import MediaAnalysis, MediaFile, MediaJob, Proxy, SegmentClip
from media_pipeline.services import (
    analysis_run,
    original_store,
    proxy_build,
    segments_cut,
)
from media_pipeline.storage import StoredFileChanged
from media_pipeline.tasks import analysis_run_task, proxy_build_task

pytestmark = pytest.mark.django_db
OPAQUE = re.compile(r"^media/[0-9a-f]{32}(\.mp4)?$")
CANVAS = (640, 360)


class ChunkRecorder(io.RawIOBase):
    """A source stream that records how much any single read asked for."""

    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)
        self.largest_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        self.largest_read = max(self.largest_read, len(buffer))
        data = self._inner.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def test_original_is_streamed_hashed_and_stored_under_an_opaque_name():
    data = bytes(range(256)) * 12_289  # a little over 3 MiB
    source = ChunkRecorder(data)
    stored = original_store(fileobj=source)
    assert source.largest_read <= 1024 * 1024
    assert stored.kind == MediaFile.Kind.ORIGINAL
    assert OPAQUE.match(stored.storage_name)
    assert stored.sha256 == hashlib.sha256(data).hexdigest()
    assert stored.size_bytes == len(data)
    with default_storage.open(stored.storage_name, "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == stored.sha256


def test_original_from_a_path_keeps_no_trace_of_its_name(media):
    path = media.get("tagged.mov")
    stored = original_store(path=path)
    assert "tagged" not in stored.storage_name and stored.content_type == "video/quicktime"
    assert stored.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert path.exists()  # the caller's file is left alone


def test_checksum_and_name_of_a_stored_file_never_change(media):
    stored = original_store(path=media.get("landscape.mp4"))
    with pytest.raises((IntegrityError, DatabaseError)), transaction.atomic():
        MediaFile.objects.filter(pk=stored.pk).update(sha256="0" * 64)
    with pytest.raises((IntegrityError, DatabaseError)), transaction.atomic():
        MediaFile.objects.filter(pk=stored.pk).update(storage_name="media/other")
    stored.refresh_from_db()
    assert stored.sha256 == hashlib.sha256(media.get("landscape.mp4").read_bytes()).hexdigest()


def test_analysis_records_the_verdict_once(media):
    stored = original_store(path=media.get("minute.mp4"))
    analysis = analysis_run(
        media_file=stored,
        protocol_key="ai-duel-0.1",
        duration_class="minute_1",
        aspect_ratio="16:9",
        thresholds=DEFAULT_DETECTION_THRESHOLDS,
    )
    assert analysis.conforming and analysis.problems == []
    assert analysis.duration_s == pytest.approx(60.0, abs=0.1)
    assert analysis.output_facts == {"width": 160, "height": 90, "display_aspect_ratio": "16:9",
                                     "fps": 12.0}  # fmt: skip
    assert analysis.ffmpeg_version.startswith("ffmpeg version")
    assert analysis.report["sha256"] == stored.sha256
    again = analysis_run(
        media_file=stored,
        protocol_key="ai-duel-0.1",
        duration_class="minute_1",
        aspect_ratio="16:9",
        thresholds={"thresholds": DEFAULT_DETECTION_THRESHOLDS, "ffmpeg_version": "other"},
    )
    assert again.pk == analysis.pk and MediaAnalysis.objects.count() == 1


def test_nonconforming_output_is_recorded_with_problem_codes(media):
    stored = original_store(path=media.get("no_audio.mp4"))
    analysis = analysis_run(media_file=stored, protocol_key="ai-duel-0.1",
                            duration_class="minute_1", aspect_ratio="16:9",
                            thresholds=DEFAULT_DETECTION_THRESHOLDS)  # fmt: skip
    assert analysis.problems == ["no_audio_stream", "duration_nonconforming"]
    assert analysis.analysed and not analysis.conforming


def test_a_changed_original_fails_the_step_and_records_nothing(media):
    stored = original_store(path=media.get("landscape.mp4"))
    with default_storage.open(stored.storage_name, "r+b") as handle:
        handle.seek(-10, 2)
        handle.write(b"tampered!!")
    with pytest.raises(StoredFileChanged):
        analysis_run(media_file=stored, protocol_key="ai-duel-0.1", duration_class="minute_1",
                     aspect_ratio="16:9", thresholds=DEFAULT_DETECTION_THRESHOLDS)  # fmt: skip
    with pytest.raises(StoredFileChanged):
        proxy_build(media_file=stored, protocol_key="ai-duel-0.1", canvas=CANVAS)
    assert not MediaAnalysis.objects.exists() and not Proxy.objects.exists()


def test_proxy_is_built_verified_stored_and_reused(media):
    stored = original_store(path=media.get("landscape.mp4"))
    proxy = proxy_build(media_file=stored, protocol_key="ai-duel-0.1", canvas=CANVAS)
    assert proxy.verification["ok"] is True
    assert proxy.recipe["recipe"]["watermark"] == "AI DUEL | DEMO ONLY"
    assert proxy.proxy_file.kind == MediaFile.Kind.PROXY
    assert OPAQUE.match(proxy.proxy_file.storage_name)
    with default_storage.open(proxy.proxy_file.storage_name, "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == proxy.proxy_file.sha256
    again = proxy_build(media_file=stored, protocol_key="ai-duel-0.1", canvas=CANVAS)
    assert again.pk == proxy.pk and Proxy.objects.count() == 1


def test_segments_are_cut_from_the_proxy_hashed_and_stored(media):
    stored = original_store(path=media.get("landscape.mp4"))
    proxy = proxy_build(media_file=stored, protocol_key="ai-duel-0.1", canvas=CANVAS)
    windows = [(0.5, 1.5), (2.0, 2.875)]
    clips = segments_cut(proxy=proxy, windows=windows)
    assert [(c.start_s, c.end_s) for c in clips] == windows
    for clip in clips:
        assert clip.verification["ok"] is True, clip.verification
        assert clip.clip_file.kind == MediaFile.Kind.SEGMENT
        assert clip.verification["checks"]["duration"]["actual"] == pytest.approx(
            clip.end_s - clip.start_s, abs=1 / 24 + 1e-3
        )
    assert [c.pk for c in segments_cut(proxy=proxy, windows=windows)] == [c.pk for c in clips]
    assert SegmentClip.objects.count() == 2


def test_tasks_record_jobs_with_progress(media):
    stored = original_store(path=media.get("landscape.mp4"))
    # apply() runs the task body here, as a worker would, whatever the broker configuration.
    result = proxy_build_task.apply(args=[str(stored.pk), "ai-duel-0.1", list(CANVAS)]).get()
    job = MediaJob.objects.get(kind=MediaJob.Kind.PROXY)
    assert job.state == MediaJob.State.SUCCEEDED and job.progress == 1.0
    assert job.result == result and Proxy.objects.filter(pk=result["proxy_id"]).exists()
    with pytest.raises(ThresholdsInvalid):
        analysis_run_task.apply(
            args=[str(stored.pk), "ai-duel-0.1", "minute_1", "16:9", {"black": 1}]
        ).get()
    failed = MediaJob.objects.get(kind=MediaJob.Kind.ANALYSIS)
    assert failed.state == MediaJob.State.FAILED and "ThresholdsInvalid" in failed.error


def test_a_delivery_that_loses_the_race_keeps_the_winners_clip_and_deletes_its_file(media):
    """Two deliveries of one task cut the same window; the second to record keeps nothing."""
    from types import SimpleNamespace

    from media_pipeline.services import _record_published
    from media_pipeline.storage import publish

    stored = original_store(path=media.get("landscape.mp4"))
    proxy = proxy_build(media_file=stored, protocol_key="ai-duel-0.1", canvas=CANVAS)
    (winner,) = segments_cut(proxy=proxy, windows=[(0.5, 1.5)])
    files = MediaFile.objects.count()
    ours = media.get("landscape.mp4").read_bytes()
    local = media.get("landscape.mp4").parent / "ours.mp4"
    local.write_bytes(ours)
    name = publish(local, suffix=".mp4")
    assert default_storage.exists(name)
    verification = SimpleNamespace(sha256=hashlib.sha256(ours).hexdigest(), size_bytes=len(ours))

    kept = _record_published(
        name,
        verification,
        kind=MediaFile.Kind.SEGMENT,
        record=lambda clip_file: SegmentClip.objects.create(
            proxy=proxy, start_s=0.5, end_s=1.5, clip_file=clip_file, verification={}
        ),
        existing=lambda: SegmentClip.objects.get(proxy=proxy, start_s=0.5, end_s=1.5),
    )
    assert kept.pk == winner.pk
    assert not default_storage.exists(name)  # our copy is gone from storage
    assert MediaFile.objects.count() == files  # and no row points at it
    assert default_storage.exists(winner.clip_file.storage_name)
