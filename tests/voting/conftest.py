"""Fixtures of the voting tests: short real films made once per session."""

from __future__ import annotations

import uuid

import pytest

from tests.films import make_film
from tests.voting.voting_support import FILM_SECONDS


@pytest.fixture(scope="session")
def films(tmp_path_factory) -> list:
    """Three real 3-second films (different tones), generated with ffmpeg."""
    base = tmp_path_factory.mktemp("voting-films")
    return [make_film(base / f"film-{i}.mp4", FILM_SECONDS, tone=330 + 110 * i) for i in range(3)]


@pytest.fixture(autouse=True)
def _fresh_rate_limits(settings):
    """Rate-limit counters live in the cache (Redis when configured): each test counts under
    its own key prefix, so tests never see each other's counts and nothing else in a shared
    Redis is cleared."""
    caches = {name: dict(conf) for name, conf in settings.CACHES.items()}
    caches["default"]["KEY_PREFIX"] = f"duel-test-{uuid.uuid4().hex}"
    settings.CACHES = caches
