"""Adapters are built from stored configs; the reference provider is the embedded default."""

from __future__ import annotations

from pathlib import Path

import pytest

from rounds.gateways.base import AdapterConfigurationError, JobState
from rounds.gateways.http import HttpSystemProvider, HttpVideoEngine
from rounds.gateways.reference import ReferenceEngine, ReferenceProvider
from rounds.gateways.registry import get_system_provider, get_video_engine


def test_reference_provider_defaults_its_state_under_the_work_dir(settings, story_package):
    provider = get_system_provider(
        {"adapter": "reference", "profile": "no_audio", "protocol": "tovaki-2026-r1"}
    )
    assert isinstance(provider, ReferenceProvider)
    assert provider.profile == "no_audio"
    assert provider.state_dir == Path(settings.DUEL_WORK_DIR) / "reference-provider"
    submission = provider.submit(story_package("clip_6s", "9:16"), {}, seed=1)
    assert provider.poll(submission.request_id).state == JobState.SUCCEEDED
    assert (provider.state_dir / "jobs" / f"{submission.request_id}.json").exists()


def test_an_adapter_is_the_embedded_reference_when_unspecified(tmp_path):
    provider = get_system_provider({"state_dir": str(tmp_path), "protocol": "ai-duel-0.1"})
    assert isinstance(provider, ReferenceProvider) and provider.profile == "good"


def test_http_configs_build_http_adapters(fake_provider):
    assert isinstance(get_system_provider(fake_provider.config()), HttpSystemProvider)
    assert isinstance(get_video_engine(fake_provider.config()), HttpVideoEngine)


def test_reference_engine_options_pass_through():
    engine = get_video_engine(
        {"adapter": "reference", "price_per_second": "0.2", "blocked_terms": ["Gore"]}
    )
    assert isinstance(engine, ReferenceEngine)
    assert str(engine.price_per_second) == "0.2"
    assert engine.blocked_terms == ("gore",)


@pytest.mark.parametrize(
    ("getter", "config", "message"),
    [
        (get_system_provider, {"adapter": "carrier-pigeon"}, "unknown adapter"),
        (get_video_engine, {"adapter": "carrier-pigeon"}, "unknown adapter"),
        (get_system_provider, {"state_dir": "/tmp/x", "profile": "good", "colour": 1}, "colour"),
        (get_video_engine, {"adapter": "reference", "fps": 12, "turbo": True}, "turbo"),
        (get_system_provider, {"adapter": "http", "base_url": "ftp://x"}, "endpoints"),
    ],
)
def test_bad_configs_are_configuration_errors(getter, config, message):
    with pytest.raises(AdapterConfigurationError, match=message):
        getter(config)
