"""The reference video engine and the reference orchestrator that assembles films from it."""

from __future__ import annotations

import hashlib
import json
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from rounds.gateways.base import (
    FailureReason,
    InfrastructureFailure,
    JobState,
    ProviderError,
    SafetyBlock,
)
from rounds.gateways.reference import (
    OrchestrationFailed,
    ReferenceEngine,
    reference_orchestrate,
)
from rounds.protocols import Protocol

AI_DUEL = Protocol.load("ai-duel-0.1")
TOVAKI = Protocol.load("tovaki-2026-r1")


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


def video_size(info: dict) -> tuple[int, int]:
    video = next(s for s in info["streams"] if s["codec_type"] == "video")
    return video["width"], video["height"]


def kinds(info: dict) -> list[str]:
    return sorted(s["codec_type"] for s in info["streams"])


# -- engine -------------------------------------------------------------------------------


def test_engine_renders_a_clip_at_the_requested_resolution_and_length(tmp_path):
    engine = ReferenceEngine(price_per_second="0.10")
    clip = engine.generate(
        "A keeper climbs the lighthouse stairs",
        {"seconds": 3, "resolution": "180x320"},
        seed=4,
        dest_path=tmp_path / "clip.mp4",
    )
    info = ffprobe(clip.path)
    assert video_size(info) == (180, 320)
    assert float(info["format"]["duration"]) == pytest.approx(3.0, abs=0.05)
    assert kinds(info) == ["audio", "video"]
    assert clip.seconds == pytest.approx(3.0)
    assert clip.cost.amount("billed_cost") == Decimal("0.30")
    assert clip.cost.units["generated_seconds"] == pytest.approx(3.0)
    assert clip.provider_request_id.startswith("refeng-")

    silent = engine.generate("x", {"seconds": 1, "audio": False}, seed=4, dest_path=tmp_path / "s")
    assert kinds(ffprobe(silent.path)) == ["video"]


def test_engine_is_deterministic_by_prompt_params_and_seed(tmp_path):
    engine = ReferenceEngine()

    def digest(name: str, seed: int) -> str:
        clip = engine.generate("a gull", {"seconds": 1}, seed=seed, dest_path=tmp_path / name)
        return hashlib.sha256(clip.path.read_bytes()).hexdigest()

    assert digest("a", 1) == digest("b", 1) != digest("c", 2)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"seconds": 2, "guidance": 9}, "does not accept parameters"),
        ({"resolution": "320x180"}, "invalid engine parameters"),
        ({"seconds": 60}, "seconds must be in"),
        ({"seconds": 2, "resolution": "321x180"}, "must be even"),
    ],
)
def test_engine_refuses_parameters_it_does_not_support(tmp_path, params, message):
    with pytest.raises(ProviderError, match=message) as info:
        ReferenceEngine().generate("x", params, seed=1, dest_path=tmp_path / "c.mp4")
    assert info.value.reason == FailureReason.PROVIDER_ERROR
    assert not (tmp_path / "c.mp4").exists()


def test_engine_safety_filter_and_error_rate(tmp_path):
    engine = ReferenceEngine(blocked_terms=("Storm",), error_rate=0.0)
    with pytest.raises(SafetyBlock) as info:
        engine.generate("A STORM breaks", {"seconds": 1}, seed=1, dest_path=tmp_path / "c")
    assert info.value.detail["terms"] == ["storm"]
    assert info.value.cost.amount("billed_cost") == 0
    failing = ReferenceEngine(error_rate=1.0)
    with pytest.raises(ProviderError, match="failed to generate"):
        failing.generate("calm sea", {"seconds": 1}, seed=1, dest_path=tmp_path / "d")


# -- orchestrator -------------------------------------------------------------------------


def test_orchestrator_assembles_a_conforming_film_from_engine_clips(story_package, tmp_path):
    engine = ReferenceEngine(price_per_second="0.10")
    package = story_package("minute_1", "16:9")
    result = reference_orchestrate(
        package,
        engine.generate,
        {"shot_seconds": 20},
        protocol=AI_DUEL,
        seed=11,
        dest_path=tmp_path / "film.mp4",
        work_dir=tmp_path / "work",
    )
    info = ffprobe(result.path)
    assert kinds(info) == ["audio", "video"]
    assert video_size(info) == (320, 180)
    assert AI_DUEL.duration_conforms("minute_1", float(info["format"]["duration"]))
    # 18 s + 24 s + 18 s, each cut into shots of at most 20 s.
    assert [(c.scene, c.shot) for c in result.used] == [
        ("beginning", 0),
        ("development", 0),
        ("development", 1),
        ("ending", 0),
    ]
    assert result.discarded == () and result.discarded_seconds == 0
    assert result.generated_seconds == pytest.approx(60.0, abs=0.1)
    assert result.engine_cost.amount("billed_cost") == Decimal("0.10") * Decimal(
        str(round(result.generated_seconds, 3))
    )
    for clip in result.used:
        assert clip.path.parent == tmp_path / "work"
        assert hashlib.sha256(clip.path.read_bytes()).hexdigest() == clip.sha256
        assert clip.params["resolution"] == "320x180"
    assert "map in the attic" in result.used[0].prompt


def test_orchestrator_discards_extra_takes_and_records_safety_blocks(story_package, tmp_path):
    # "storm" is only in the development text: that shot is blocked once, then re-prompted.
    engine = ReferenceEngine(blocked_terms=("storm",))
    package = story_package("clip_6s", "9:16")
    result = reference_orchestrate(
        package,
        engine.generate,
        {"takes_per_shot": 2, "params": {"resolution": "180x320"}},
        protocol=TOVAKI,
        seed=2,
        dest_path=tmp_path / "film.mp4",
        work_dir=tmp_path / "work",
    )
    assert len(result.used) == 3 and len(result.discarded) == 3
    assert result.discarded_seconds == pytest.approx(result.generated_seconds / 2, abs=0.01)
    assert result.generated_seconds == pytest.approx(12.0, abs=0.05)
    blocked = [f for f in result.failures if f["reason"] == "safety_block"]
    assert [f["scene"] for f in blocked] == ["development", "development"]  # one per take
    development = [c for c in result.used if c.scene == "development"][0]
    assert "storm" not in development.prompt.lower()
    info = ffprobe(result.path)
    assert video_size(info) == (180, 320)
    assert float(info["format"]["duration"]) == pytest.approx(6.0, abs=0.1)
    report = result.to_json()
    assert report["discarded_seconds"] == result.discarded_seconds
    assert {c["provider_request_id"] for c in report["used"]}.isdisjoint(
        {c["provider_request_id"] for c in report["discarded"]}
    )


def test_orchestrator_is_deterministic_and_can_keep_native_audio(story_package, tmp_path):
    package = story_package("clip_6s", "9:16")
    films = []
    for name in ("a", "b"):
        result = reference_orchestrate(
            package,
            ReferenceEngine().generate,
            {"use_native_audio": True},
            protocol=TOVAKI,
            seed=5,
            dest_path=tmp_path / f"{name}.mp4",
            work_dir=tmp_path / name,
        )
        films.append(hashlib.sha256(result.path.read_bytes()).hexdigest())
    assert films[0] == films[1]
    assert kinds(ffprobe(tmp_path / "a.mp4")) == ["audio", "video"]


def test_orchestrator_gives_up_when_every_attempt_fails(story_package, tmp_path):
    with pytest.raises(OrchestrationFailed) as info:
        reference_orchestrate(
            story_package("clip_6s", "9:16"),
            ReferenceEngine(error_rate=1.0).generate,
            {"max_attempts_per_shot": 2},
            protocol=TOVAKI,
            seed=1,
            dest_path=tmp_path / "film.mp4",
        )
    assert [f["reason"] for f in info.value.failures] == ["provider_error", "provider_error"]
    assert not (tmp_path / "film.mp4").exists()


def test_a_failed_render_is_reported_with_ffmpegs_reason_and_leaves_nothing(tmp_path, monkeypatch):
    # An encoder that dies at once, before reading the piped soundtrack.
    broken = tmp_path / "ffmpeg"
    broken.write_text("#!/bin/sh\necho 'simulated encoder crash' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setattr("rounds.gateways.reference.FFMPEG", str(broken))
    out = tmp_path / "out"
    with pytest.raises(InfrastructureFailure, match="simulated encoder crash"):
        ReferenceEngine().generate("x", {"seconds": 2}, seed=1, dest_path=out / "clip.mp4")
    assert list(out.iterdir()) == []


def test_orchestrator_resubmission_with_its_key_starts_no_second_job(story_package, tmp_path):
    from rounds.gateways import orchestrator

    provider = orchestrator.ReferenceOrchestratorProvider(
        state_dir=tmp_path,
        protocol="ai-duel-0.1",
        gateway_url="http://127.0.0.1:9",  # nothing listens: the job fails, quickly
        token="entry-token",
        model="ref-video-1",
        api_version="2026-01",
    )
    brief = story_package("minute_1", "16:9")
    settings = {"duel_run": "run-1"}
    first = provider.submit(brief, settings, seed=1, idempotency_key="attempt-1")
    thread = orchestrator._THREADS[first.request_id]
    again = provider.submit(brief, settings, seed=1, idempotency_key="attempt-1")
    assert again.request_id == first.request_id
    assert orchestrator._THREADS[first.request_id] is thread  # no second job was started
    other = provider.submit(brief, settings, seed=1, idempotency_key="attempt-2")
    assert other.request_id != first.request_id
    for request_id in (first.request_id, other.request_id):
        orchestrator._THREADS[request_id].join(timeout=30)
    jobs = sorted(p.name for p in (tmp_path / "orchestrator" / "jobs").iterdir())
    assert jobs == sorted([f"{first.request_id}.json", f"{other.request_id}.json"])
    assert provider.poll(first.request_id).state == JobState.FAILED
