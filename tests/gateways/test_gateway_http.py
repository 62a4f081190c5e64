"""The generic HTTP adapter against a local fake provider: jobs, failures and their codes."""

from __future__ import annotations

import hashlib
import time
import tracemalloc
from decimal import Decimal

import pytest

from rounds.gateways.base import (
    AdapterConfigurationError,
    EmptyFile,
    FailureReason,
    InfrastructureFailure,
    JobState,
    ProviderError,
    ProviderTimeout,
    SafetyBlock,
    await_job,
)
from rounds.gateways.http import (
    HttpProviderConfig,
    HttpSystemProvider,
    HttpVideoEngine,
    field_at,
)
from rounds.gateways.reference import ReferenceEngine

BRIEF = {"story_outcome": "A lighthouse keeper meets a whale.", "duration_class": "minute_1"}


def run_job(provider: HttpSystemProvider, dest, *, seed: int = 3):
    submission = provider.submit(BRIEF, {"quality": "high"}, seed=seed)
    await_job(provider, submission.request_id, timeout_s=5, poll_interval_s=0.01)
    return submission, provider.fetch(submission.request_id, dest)


def test_async_job_goes_queued_running_succeeded_and_streams_the_asset(fake_provider, tmp_path):
    fake_provider.polls_until_done = 3
    provider = HttpSystemProvider(fake_provider.config())
    submission = provider.submit(BRIEF, {"quality": "high"}, seed=3)
    states = [provider.poll(submission.request_id).state for _ in range(3)]
    assert states == [JobState.QUEUED, JobState.RUNNING, JobState.SUCCEEDED]
    asset = provider.fetch(submission.request_id, tmp_path / "film.mp4")
    assert asset.path.read_bytes() == fake_provider.asset
    assert asset.size_bytes == len(fake_provider.asset)
    assert asset.details["sha256"] == hashlib.sha256(fake_provider.asset).hexdigest()
    assert asset.provider_request_id == submission.request_id
    assert asset.cost.currency == "USD"
    assert asset.cost.amounts == {
        "billed_cost": Decimal("1.25"),
        "public_list_cost": Decimal("1.50"),
    }
    # The exact brief, settings and seed went to the provider, with the static fields.
    job = fake_provider.jobs[submission.request_id]
    assert job.body == {
        "brief": BRIEF,
        "settings": {"quality": "high"},
        "seed": 3,
        "model": "fake-1",
    }
    # No partial files left beside the asset.
    assert [p.name for p in tmp_path.iterdir()] == ["film.mp4"]


def test_token_comes_from_the_environment_and_is_sent_only_to_the_provider(fake_provider, tmp_path):
    fake_provider.mode = "asset_elsewhere"  # the asset lives on another origin (a CDN)
    run_job(HttpSystemProvider(fake_provider.config()), tmp_path / "film.mp4")
    api = [r for r in fake_provider.requests if r.path.startswith("/v1/jobs")]
    assets = [r for r in fake_provider.requests if r.path.startswith("/v1/assets")]
    assert api and all(r.headers["Authorization"] == "Bearer fake-token" for r in api)
    assert assets and all("Authorization" not in r.headers for r in assets)


def test_a_wrong_token_is_an_explicit_provider_error(fake_provider, monkeypatch):
    monkeypatch.setenv("FAKE_PROVIDER_TOKEN", "stolen")
    with pytest.raises(ProviderError, match="HTTP 401.*invalid token") as info:
        HttpSystemProvider(fake_provider.config()).submit(BRIEF, {}, seed=1)
    assert info.value.detail["http_status"] == 401


def test_a_missing_token_variable_is_a_configuration_error(fake_provider, monkeypatch):
    monkeypatch.delenv("FAKE_PROVIDER_TOKEN")
    with pytest.raises(AdapterConfigurationError, match="FAKE_PROVIDER_TOKEN"):
        HttpSystemProvider(fake_provider.config())
    assert fake_provider.requests == []


@pytest.mark.parametrize(
    ("mode", "exception", "reason", "message"),
    [
        ("submit_5xx", InfrastructureFailure, "infrastructure_failure", "HTTP 503.*unavailable"),
        ("rate_limited", InfrastructureFailure, "infrastructure_failure", "HTTP 429"),
        ("safety_submit", SafetyBlock, "safety_block", "violates policy"),
        ("bad_request", ProviderError, "provider_error", "HTTP 400.*unknown field"),
        ("malformed_json", ProviderError, "provider_error", "malformed JSON"),
        ("missing_id", ProviderError, "provider_error", "lacks request_id"),
    ],
)
def test_submit_failures_are_classified(fake_provider, mode, exception, reason, message):
    fake_provider.mode = mode
    with pytest.raises(exception, match=message) as info:
        HttpSystemProvider(fake_provider.config()).submit(BRIEF, {}, seed=1)
    assert info.value.reason == FailureReason(reason)


def test_submit_timeout_is_classified_timeout_without_waiting_for_the_server(fake_provider):
    fake_provider.mode = "submit_timeout"
    fake_provider.delay_s = 5
    provider = HttpSystemProvider(fake_provider.config(timeouts={"request_s": 0.3}))
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as info:
        provider.submit(BRIEF, {}, seed=1)
    assert time.monotonic() - started < 2
    assert info.value.reason == FailureReason.TIMEOUT


@pytest.mark.parametrize(
    ("mode", "exception", "reason"),
    [
        ("status_5xx", InfrastructureFailure, "infrastructure_failure"),
        ("status_timeout", ProviderTimeout, "timeout"),
        ("malformed_status", ProviderError, "provider_error"),
    ],
)
def test_poll_transport_failures_raise(fake_provider, mode, exception, reason):
    fake_provider.delay_s = 3
    provider = HttpSystemProvider(fake_provider.config(timeouts={"request_s": 0.3}))
    submission = provider.submit(BRIEF, {}, seed=1)
    fake_provider.mode = mode
    with pytest.raises(exception) as info:
        provider.poll(submission.request_id)
    assert info.value.reason == FailureReason(reason)
    assert info.value.provider_request_id == submission.request_id


def test_a_failed_job_is_a_status_with_its_provider_error_and_cost(fake_provider):
    fake_provider.mode = "job_fails"
    provider = HttpSystemProvider(fake_provider.config())
    submission = provider.submit(BRIEF, {}, seed=1)
    provider.poll(submission.request_id)  # queued
    status = provider.poll(submission.request_id)
    assert status.state == JobState.FAILED
    assert isinstance(status.error, ProviderError)
    assert "render node crashed" in str(status.error)
    assert status.error.cost.amount("billed_cost") == 0
    with pytest.raises(ProviderError):
        await_job(provider, submission.request_id, timeout_s=2, poll_interval_s=0.01)


def test_a_job_failed_by_moderation_is_a_safety_block(fake_provider):
    fake_provider.mode = "job_safety"
    provider = HttpSystemProvider(fake_provider.config())
    submission = provider.submit(BRIEF, {}, seed=1)
    with pytest.raises(SafetyBlock, match="moderation") as info:
        await_job(provider, submission.request_id, timeout_s=2, poll_interval_s=0.01)
    assert info.value.reason == FailureReason.SAFETY_BLOCK


def test_a_job_that_never_finishes_times_out_at_the_job_deadline(fake_provider):
    fake_provider.polls_until_done = 10_000
    provider = HttpSystemProvider(fake_provider.config())
    submission = provider.submit(BRIEF, {}, seed=1)
    with pytest.raises(ProviderTimeout, match="still running"):
        await_job(provider, submission.request_id, timeout_s=0.2, poll_interval_s=0.02)


def test_an_empty_asset_is_empty_file_with_the_jobs_cost(fake_provider, tmp_path):
    fake_provider.mode = "empty_asset"
    with pytest.raises(EmptyFile) as info:
        run_job(HttpSystemProvider(fake_provider.config()), tmp_path / "film.mp4")
    assert info.value.reason == FailureReason.EMPTY_FILE
    assert info.value.cost.amount("billed_cost") == Decimal("1.25")
    assert list(tmp_path.iterdir()) == []


def test_a_stalled_download_times_out_and_leaves_no_partial_file(fake_provider, tmp_path):
    fake_provider.mode = "download_timeout"
    fake_provider.delay_s = 3
    provider = HttpSystemProvider(fake_provider.config(timeouts={"download_s": 0.3}))
    with pytest.raises(ProviderTimeout):
        run_job(provider, tmp_path / "film.mp4")
    assert list(tmp_path.iterdir()) == []


def test_large_assets_are_streamed_in_chunks_not_held_in_memory(fake_provider, tmp_path):
    fake_provider.asset = bytes(range(256)) * (32 * 1024)  # 8 MiB
    provider = HttpSystemProvider(fake_provider.config(chunk_bytes=64 * 1024))
    submission = provider.submit(BRIEF, {}, seed=1)
    await_job(provider, submission.request_id, timeout_s=5, poll_interval_s=0.01)
    tracemalloc.start()
    try:
        asset = provider.fetch(submission.request_id, tmp_path / "big.mp4")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert asset.size_bytes == len(fake_provider.asset)
    assert asset.details["sha256"] == hashlib.sha256(fake_provider.asset).hexdigest()
    assert peak < len(fake_provider.asset) / 8


def test_cost_can_be_read_for_any_job(fake_provider):
    provider = HttpSystemProvider(fake_provider.config())
    submission = provider.submit(BRIEF, {}, seed=1)
    await_job(provider, submission.request_id, timeout_s=5, poll_interval_s=0.01)
    assert provider.cost(submission.request_id).amount("public_list_cost") == Decimal("1.50")


def test_an_unreachable_provider_is_an_infrastructure_failure(fake_provider):
    config = fake_provider.config(base_url="http://127.0.0.1:9/v1")  # discard port: refused
    with pytest.raises(InfrastructureFailure, match="cannot reach"):
        HttpSystemProvider(config).submit(BRIEF, {}, seed=1)


def test_the_http_engine_generates_a_clip_and_reports_its_seconds(fake_provider, tmp_path):
    clip = ReferenceEngine().generate(
        "a whale surfaces", {"seconds": 2, "resolution": "160x90"}, seed=1, dest_path=tmp_path / "r"
    )
    fake_provider.asset = clip.path.read_bytes()
    engine = HttpVideoEngine(
        fake_provider.config(request={"prompt": "input.prompt", "static": {"model": "fake-1"}})
    )
    result = engine.generate(
        "a whale surfaces", {"seconds": 2}, seed=9, dest_path=tmp_path / "clip.mp4"
    )
    assert result.path.read_bytes() == clip.path.read_bytes()
    assert result.seconds == 6.0  # the provider's own figure (fields.seconds) is recorded
    body = next(iter(fake_provider.jobs.values())).body
    assert body == {
        "input": {"prompt": "a whale surfaces"},
        "params": {"seconds": 2},
        "seed": 9,
        "model": "fake-1",
    }
    # Without a seconds field, the adapter measures the clip itself.
    fake_provider.asset_duration = None
    measured = HttpVideoEngine(fake_provider.config()).generate(
        "again", {"seconds": 2}, seed=1, dest_path=tmp_path / "clip2.mp4"
    )
    assert measured.seconds == pytest.approx(2.0, abs=0.1)


def test_config_validation_and_field_paths():
    with pytest.raises(AdapterConfigurationError, match="base_url"):
        HttpProviderConfig.from_config({"endpoints": {"submit": "POST /j", "status": "/j/{id}"}})
    with pytest.raises(AdapterConfigurationError, match="endpoints.status"):
        HttpProviderConfig.from_config(
            {"base_url": "https://x.example", "endpoints": {"submit": "POST /jobs"}}
        )
    with pytest.raises(AdapterConfigurationError, match="'header' and 'env'"):
        HttpProviderConfig.from_config(
            {
                "base_url": "https://x.example",
                "endpoints": {"submit": "POST /j", "status": "/j/{request_id}"},
                "auth": {"header": "X-Key"},
            }
        )
    document = {"output": {"files": [{"url": "a"}, {"url": "b"}]}}
    assert field_at(document, "output.files.1.url") == "b"
    assert field_at(document, "output.files.5.url", None) is None


def test_a_resubmitted_idempotency_key_answers_with_the_same_job(fake_provider):
    """A worker that died after submitting submits again with the attempt's key: one job."""
    provider = HttpSystemProvider(fake_provider.config())
    first = provider.submit(BRIEF, {"quality": "high"}, seed=3, idempotency_key="attempt-1")
    again = provider.submit(BRIEF, {"quality": "high"}, seed=3, idempotency_key="attempt-1")
    retry = provider.submit(BRIEF, {"quality": "high"}, seed=3, idempotency_key="attempt-2")
    assert first.request_id == again.request_id != retry.request_id
    assert len(fake_provider.jobs) == 2
    posts = [r for r in fake_provider.requests if r.method == "POST"]
    assert [r.headers.get("Idempotency-Key") for r in posts] == [
        "attempt-1",
        "attempt-1",
        "attempt-2",
    ]
