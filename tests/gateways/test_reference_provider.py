"""The reference provider renders real films and misbehaves on purpose, profile by profile.

Films are checked with ffprobe/ffmpeg directly (streams, duration against the protocol's
tolerance, aspect, frozen and black stretches, audio level), and the defect a profile plants
is classified the way the run workflow classifies delivered files (protocol: Run rules).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import threading
from decimal import Decimal
from pathlib import Path

import pytest

from rounds.gateways.base import (
    AdapterConfigurationError,
    EmptyFile,
    FailureReason,
    InfrastructureFailure,
    JobNotFinished,
    JobState,
    ProviderError,
    ProviderTimeout,
    SafetyBlock,
    await_job,
    protocol_retry_reason,
)
from rounds.gateways.reference import (
    REFERENCE_PROFILES,
    ReferenceProvider,
    frame_size,
    plan_film,
    scene_texts,
)
from rounds.protocols import Protocol

AI_DUEL = Protocol.load("ai-duel-0.1")
TOVAKI = Protocol.load("tovaki-2026-r1")


# -- independent media checks -------------------------------------------------------------


def ffprobe(path: Path) -> dict:
    out = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-print_format",
            "json",
            "-show_format",
            "-show_streams",
            str(path),
        ],
        capture_output=True,
        check=True,
    )
    return json.loads(out.stdout)


def stream_types(info: dict) -> list[str]:
    return sorted(s["codec_type"] for s in info["streams"])


def detect(path: Path, video_filter: str) -> str:
    proc = subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-v",
            "info",
            "-i",
            str(path),
            "-map",
            "0:v",
            "-vf",
            video_filter,
            "-f",
            "null",
            "-",
        ],
        capture_output=True,
        check=True,
    )
    return proc.stderr.decode()


def freezes(path: Path) -> list[tuple[float, float]]:
    log = detect(path, "freezedetect=n=-60dB:d=2")
    starts = [float(x) for x in re.findall(r"freeze_start: ([\d.]+)", log)]
    ends = [float(x) for x in re.findall(r"freeze_end: ([\d.]+)", log)]
    return list(zip(starts, ends, strict=False))


def mean_colour(path: Path, at_s: float) -> tuple[int, int, int]:
    proc = subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-v",
            "error",
            "-ss",
            f"{at_s}",
            "-i",
            str(path),
            "-frames:v",
            "1",
            "-vf",
            "scale=1:1:flags=area",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-",
        ],
        capture_output=True,
        check=True,
    )
    return tuple(proc.stdout[:3])


def mean_volume_db(path: Path) -> float:
    proc = subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-v",
            "info",
            "-i",
            str(path),
            "-map",
            "0:a",
            "-af",
            "volumedetect",
            "-f",
            "null",
            "-",
        ],
        capture_output=True,
        check=True,
    )
    return float(re.search(r"mean_volume: (-?[\d.]+) dB", proc.stderr.decode()).group(1))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def delivered_defect(
    path: Path, protocol: Protocol, duration_class: str, aspect_ratio: str
) -> FailureReason | None:
    """Classify a delivered file the way the run workflow does (empty, unplayable, missing
    stream, wrong duration or resolution), from ffprobe's view of it."""
    if path.stat().st_size == 0:
        return FailureReason.EMPTY_FILE
    try:
        info = ffprobe(path)
    except subprocess.CalledProcessError:
        return FailureReason.UNPLAYABLE_FILE
    kinds = stream_types(info)
    if "video" not in kinds:
        return FailureReason.UNPLAYABLE_FILE
    if "audio" not in kinds:
        return FailureReason.MISSING_STREAM
    video = next(s for s in info["streams"] if s["codec_type"] == "video")
    a, b = (int(x) for x in aspect_ratio.split(":"))
    if abs(video["width"] * b - video["height"] * a) > 2 * max(a, b):
        return FailureReason.WRONG_DURATION_OR_RESOLUTION
    if not protocol.duration_conforms(duration_class, float(info["format"]["duration"])):
        return FailureReason.WRONG_DURATION_OR_RESOLUTION
    return None


# -- fixtures -------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def make_provider(tmp_path):
    def make(profile: str = "good", protocol: str = "ai-duel-0.1", **options):
        return ReferenceProvider(
            state_dir=tmp_path / "state", profile=profile, protocol=protocol, **options
        )

    return make


def deliver(provider: ReferenceProvider, package: dict, dest: Path, *, seed: int = 7):
    submission = provider.submit(package, {}, seed=seed)
    status = provider.poll(submission.request_id)
    assert status.state == JobState.SUCCEEDED, status
    return provider.fetch(submission.request_id, dest)


# -- conforming films -----------------------------------------------------------------------


def test_good_minute_film_is_a_real_conforming_film(make_provider, story_package, tmp_path):
    package = story_package("minute_1", "16:9")
    asset = deliver(make_provider("good"), package, tmp_path / "film.mp4")
    info = ffprobe(asset.path)
    assert stream_types(info) == ["audio", "video"]
    video = next(s for s in info["streams"] if s["codec_type"] == "video")
    assert (video["width"], video["height"]) == (320, 180)
    assert AI_DUEL.duration_conforms("minute_1", float(info["format"]["duration"]))
    assert delivered_defect(asset.path, AI_DUEL, "minute_1", "16:9") is None
    assert asset.size_bytes == asset.path.stat().st_size > 0
    # Moving pictures throughout: no frozen or black stretch that would not count.
    assert freezes(asset.path) == []
    assert "black_start" not in detect(asset.path, "blackdetect=d=1")
    # Beginning, development and ending look different (palettes a third of a hue apart).
    colours = [mean_colour(asset.path, t) for t in (9, 30, 51)]
    for i in range(3):
        for j in range(i + 1, 3):
            assert sum(abs(x - y) for x, y in zip(colours[i], colours[j], strict=True)) > 40
    # A soundtrack, not silence.
    assert mean_volume_db(asset.path) > -40
    # Cost at the configured price per delivered second.
    assert asset.cost.amount("billed_cost") == Decimal("0.05") * 60
    asset.cost.check_fields(AI_DUEL.cost_fields)
    assert asset.details["profile"] == "good" and asset.details["attempt"] == 1


def test_vertical_tovaki_clip_has_the_packages_aspect_and_duration(
    make_provider, story_package, tmp_path
):
    package = story_package("clip_6s", "9:16")
    asset = deliver(make_provider("good", protocol="tovaki-2026-r1"), package, tmp_path / "c.mp4")
    info = ffprobe(asset.path)
    video = next(s for s in info["streams"] if s["codec_type"] == "video")
    assert (video["width"], video["height"]) == (180, 320)
    assert float(info["format"]["duration"]) == pytest.approx(6.0, abs=0.05)
    assert delivered_defect(asset.path, TOVAKI, "clip_6s", "9:16") is None


def test_same_seed_and_package_give_identical_bytes_another_seed_does_not(
    make_provider, story_package, tmp_path
):
    package = story_package("clip_6s", "9:16")
    first = deliver(make_provider(protocol="tovaki-2026-r1"), package, tmp_path / "a.mp4")
    # A fresh provider object (as in another worker) and a second attempt number.
    again = deliver(make_provider(protocol="tovaki-2026-r1"), package, tmp_path / "b.mp4")
    other_seed = deliver(
        make_provider(protocol="tovaki-2026-r1"), package, tmp_path / "c.mp4", seed=8
    )
    other_story = deliver(
        make_provider(protocol="tovaki-2026-r1"),
        {**package, "story_outcome": "A different story. It ends elsewhere."},
        tmp_path / "d.mp4",
    )
    assert again.details["attempt"] == 2
    assert sha256(first.path) == sha256(again.path)
    assert len({sha256(first.path), sha256(other_seed.path), sha256(other_story.path)}) == 3


def test_quality_knob_changes_the_film_and_is_reported(make_provider, story_package, tmp_path):
    package = story_package("clip_6s", "9:16")
    low = deliver(make_provider(protocol="tovaki-2026-r1", quality=0.1), package, tmp_path / "l")
    high = deliver(make_provider(protocol="tovaki-2026-r1", quality=0.9), package, tmp_path / "h")
    assert (low.details["quality"], high.details["quality"]) == (0.1, 0.9)
    assert sha256(low.path) != sha256(high.path)


# -- misbehaving profiles --------------------------------------------------------------------


def test_error_first_attempt_fails_explicitly_then_delivers(make_provider, story_package, tmp_path):
    provider = make_provider("error_first_attempt", protocol="tovaki-2026-r1")
    package = story_package("clip_6s", "9:16")
    first = provider.submit(package, {}, seed=1)
    status = provider.poll(first.request_id)
    assert status.state == JobState.FAILED
    assert isinstance(status.error, ProviderError)
    assert status.error.reason == FailureReason.PROVIDER_ERROR
    assert status.error.provider_request_id == first.request_id
    assert status.error.cost.amount("billed_cost") == 0
    assert protocol_retry_reason(TOVAKI, status.error) == "provider_error"
    with pytest.raises(ProviderError):
        provider.fetch(first.request_id, tmp_path / "never.mp4")
    assert not (tmp_path / "never.mp4").exists()
    assert provider.cost(first.request_id).amount("billed_cost") == 0

    second = deliver(provider, package, tmp_path / "film.mp4", seed=1)
    assert second.details["attempt"] == 2
    assert delivered_defect(second.path, TOVAKI, "clip_6s", "9:16") is None


def test_infrastructure_failure_first_refuses_the_first_submit(
    make_provider, story_package, tmp_path
):
    provider = make_provider("infrastructure_failure_first", protocol="tovaki-2026-r1")
    package = story_package("clip_6s", "9:16")
    with pytest.raises(InfrastructureFailure) as info:
        provider.submit(package, {}, seed=1)
    assert info.value.reason == FailureReason.INFRASTRUCTURE_FAILURE
    assert protocol_retry_reason(AI_DUEL, info.value) == "infrastructure_failure"
    # The refused attempt still has an id the run can record; it reports failed.
    assert provider.poll(info.value.provider_request_id).state == JobState.FAILED
    asset = deliver(provider, package, tmp_path / "film.mp4", seed=1)
    assert asset.details["attempt"] == 2


def test_empty_file_is_billed_but_nothing_is_written(make_provider, story_package, tmp_path):
    provider = make_provider("empty_file", protocol="tovaki-2026-r1")
    submission = provider.submit(story_package("clip_6s", "9:16"), {}, seed=1)
    assert provider.poll(submission.request_id).state == JobState.SUCCEEDED
    with pytest.raises(EmptyFile) as info:
        provider.fetch(submission.request_id, tmp_path / "film.mp4")
    assert info.value.reason == FailureReason.EMPTY_FILE
    assert info.value.cost.amount("billed_cost") == Decimal("0.30")
    assert protocol_retry_reason(TOVAKI, info.value) == "corrupt_or_unplayable_file"
    assert list(tmp_path.glob("*film.mp4*")) == []


def test_no_audio_film_lacks_its_audio_stream(make_provider, story_package, tmp_path):
    provider = make_provider("no_audio", protocol="tovaki-2026-r1")
    asset = deliver(provider, story_package("clip_6s", "9:16"), tmp_path / "film.mp4")
    assert stream_types(ffprobe(asset.path)) == ["video"]
    reason = delivered_defect(asset.path, TOVAKI, "clip_6s", "9:16")
    assert reason == FailureReason.MISSING_STREAM
    assert protocol_retry_reason(TOVAKI, reason) == "missing_required_audio_track"


def test_too_short_film_is_outside_the_duration_tolerance(make_provider, story_package, tmp_path):
    provider = make_provider("too_short")
    asset = deliver(provider, story_package("minute_1", "16:9"), tmp_path / "film.mp4")
    seconds = float(ffprobe(asset.path)["format"]["duration"])
    assert seconds == pytest.approx(30.0, abs=0.1)
    assert not AI_DUEL.duration_conforms("minute_1", seconds)
    reason = delivered_defect(asset.path, AI_DUEL, "minute_1", "16:9")
    assert reason == FailureReason.WRONG_DURATION_OR_RESOLUTION
    # AI Duel does not retry it (a nonconforming output is evidence); Tovaki does.
    assert protocol_retry_reason(AI_DUEL, reason) is None
    assert protocol_retry_reason(TOVAKI, reason) == "wrong_duration_or_resolution_from_provider"
    assert asset.cost.amount("billed_cost") == Decimal("0.05") * 30


def test_frozen_stretch_holds_one_frame_inside_the_development(
    make_provider, story_package, tmp_path
):
    provider = make_provider("frozen_stretch", frozen_fraction=0.25)
    asset = deliver(provider, story_package("minute_1", "16:9"), tmp_path / "film.mp4")
    # Technically valid (so no retry), but 15 s of it would not count as effective duration.
    assert delivered_defect(asset.path, AI_DUEL, "minute_1", "16:9") is None
    assert asset.details["frozen_seconds"] == pytest.approx(15.0)
    found = freezes(asset.path)
    assert len(found) == 1
    start, end = found[0]
    # The development scene runs from 18 s to 42 s; the hold ends it.
    assert 18 <= start and end <= 42.05
    assert end - start >= 0.9 * 15


def test_safety_block_refuses_every_attempt_and_is_never_a_retry_reason(
    make_provider, story_package
):
    provider = make_provider("safety_block")
    package = story_package("minute_1", "16:9")
    for _ in range(2):
        status = provider.poll(provider.submit(package, {}, seed=3).request_id)
        assert status.state == JobState.FAILED
        assert isinstance(status.error, SafetyBlock)
        assert status.error.reason == FailureReason.SAFETY_BLOCK
        for protocol in (AI_DUEL, TOVAKI):
            assert protocol_retry_reason(protocol, status.error) is None


def test_slow_job_stays_running_past_the_deadline_without_blocking(
    make_provider, story_package, tmp_path
):
    clock = Clock()
    provider = make_provider(
        "slow", protocol="tovaki-2026-r1", slow_delay_s=600, queue_s=5, clock=clock
    )
    submission = provider.submit(story_package("clip_6s", "9:16"), {}, seed=1)
    assert provider.poll(submission.request_id).state == JobState.QUEUED
    clock.now += 305
    status = provider.poll(submission.request_id)
    assert status.state == JobState.RUNNING and status.progress == pytest.approx(0.5)
    with pytest.raises(JobNotFinished):
        provider.fetch(submission.request_id, tmp_path / "early.mp4")
    # A run waiting with a 120 s deadline times out (on the fake clock: no real waiting).
    with pytest.raises(ProviderTimeout) as info:
        await_job(
            provider,
            submission.request_id,
            timeout_s=120,
            poll_interval_s=10,
            clock=clock,
            sleep=clock.sleep,
        )
    assert info.value.reason == FailureReason.TIMEOUT
    clock.now += 600
    assert provider.poll(submission.request_id).state == JobState.SUCCEEDED
    assert provider.fetch(submission.request_id, tmp_path / "late.mp4").size_bytes > 0


def test_unplayable_profile_delivers_a_truncated_file(make_provider, story_package, tmp_path):
    provider = make_provider("unplayable", protocol="tovaki-2026-r1")
    asset = deliver(provider, story_package("clip_6s", "9:16"), tmp_path / "film.mp4")
    assert asset.size_bytes > 0
    with pytest.raises(subprocess.CalledProcessError):
        ffprobe(asset.path)
    reason = delivered_defect(asset.path, TOVAKI, "clip_6s", "9:16")
    assert reason == FailureReason.UNPLAYABLE_FILE
    assert protocol_retry_reason(AI_DUEL, reason) == "unplayable_file"


def test_every_profile_is_exercised_here():
    tested = {
        "good",
        "error_first_attempt",
        "infrastructure_failure_first",
        "empty_file",
        "no_audio",
        "too_short",
        "frozen_stretch",
        "safety_block",
        "slow",
        "unplayable",
    }
    assert tested == set(REFERENCE_PROFILES)


# -- job records, attempts, configuration ---------------------------------------------------


def test_a_job_submitted_by_one_worker_is_fetched_by_another(
    make_provider, story_package, tmp_path
):
    package = story_package("clip_6s", "9:16")
    submission = make_provider(protocol="tovaki-2026-r1").submit(package, {}, seed=5)
    other_worker = make_provider(protocol="tovaki-2026-r1")
    assert other_worker.poll(submission.request_id).state == JobState.SUCCEEDED
    asset = other_worker.fetch(submission.request_id, tmp_path / "film.mp4")
    assert asset.provider_request_id == submission.request_id


def test_concurrent_submits_get_distinct_attempt_numbers(make_provider, story_package):
    provider = make_provider(protocol="tovaki-2026-r1")
    package = story_package("clip_6s", "9:16")
    ids: list[str] = []
    lock = threading.Lock()

    def submit() -> None:
        request_id = provider.submit(package, {}, seed=1).request_id
        with lock:
            ids.append(request_id)

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(int(i.rsplit("-", 1)[1]) for i in ids) == list(range(1, 9))


def test_unknown_request_id_is_a_provider_error(make_provider):
    with pytest.raises(ProviderError, match="unknown request id"):
        make_provider().poll("ref-00000000000000000000-1")
    with pytest.raises(ProviderError):
        make_provider().poll("../../etc/passwd")


def test_configuration_errors_are_not_provider_failures(make_provider, story_package):
    with pytest.raises(AdapterConfigurationError, match="unknown reference profile"):
        make_provider("flaky")
    with pytest.raises(AdapterConfigurationError, match="protocol key"):
        make_provider(protocol=None).submit(story_package("minute_1", "16:9"), {}, seed=1)
    with pytest.raises(ProviderError, match="duration_class"):
        make_provider().submit({"aspect_ratio": "16:9"}, {}, seed=1)
    with pytest.raises(ProviderError, match="minute_7"):
        make_provider().submit(story_package("minute_7", "16:9"), {}, seed=1)


# -- pure planning -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("aspect", "size"),
    [("16:9", (320, 180)), ("9:16", (180, 320)), ("1:1", (180, 180)), ("4:3", (240, 180))],
)
def test_frame_size_follows_the_aspect_ratio(aspect, size):
    assert frame_size(aspect) == size


def test_scene_texts_tell_the_story_in_three_parts(story_package):
    beginning, development, ending = scene_texts(story_package("minute_1", "16:9"))
    assert "Mara, twelve" in beginning and "map in the attic" in beginning
    assert "harbour" in development or "storm" in development
    assert "shell" in ending


def test_plan_splits_frames_exactly_and_places_the_hold_in_the_development(story_package):
    spec = plan_film(story_package("minute_2", "16:9"), target_s=120, seed=1, frozen_s=10)
    assert spec.frames == 120 * 12
    assert [s.name for s in spec.scenes] == ["beginning", "development", "ending"]
    assert [s.frozen_frames for s in spec.scenes] == [0, 120, 0]
    assert spec.frozen_seconds == 10


def test_a_resubmitted_idempotency_key_answers_with_the_same_job(
    make_provider, story_package, tmp_path
):
    provider = make_provider("error_first_attempt")
    package = story_package("minute_1", "16:9")
    first = provider.submit(package, {}, seed=1, idempotency_key="attempt-1")
    again = provider.submit(package, {}, seed=1, idempotency_key="attempt-1")
    retry = provider.submit(package, {}, seed=1, idempotency_key="attempt-2")
    assert first.request_id == again.request_id != retry.request_id
    assert sorted(p.name for p in (tmp_path / "state" / "jobs").glob("ref-*.json")) == sorted(
        [f"{first.request_id}.json", f"{retry.request_id}.json"]
    )
    # The resubmission did not use up an attempt: the retry is attempt 2, as the profile needs.
    assert first.request_id.endswith("-1") and retry.request_id.endswith("-2")
