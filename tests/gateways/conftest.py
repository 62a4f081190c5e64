"""Fixtures for the provider adapter tests: the fake provider server and sample packages."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_provider import FakeProvider


@pytest.fixture
def fake_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    """A running fake provider whose token the adapter finds in FAKE_PROVIDER_TOKEN."""
    with FakeProvider() as provider:
        monkeypatch.setenv("FAKE_PROVIDER_TOKEN", provider.token)
        yield provider


def _story_package(duration_class: str, aspect_ratio: str, **overrides: Any) -> dict[str, Any]:
    package = {
        "story_outcome": (
            "Mara finds her grandfather's map in the attic. She follows it to the harbour at "
            "dawn. A storm breaks over the breakwater. She returns home with a shell and a "
            "secret she keeps."
        ),
        "characters_and_canon": ["Mara, twelve, curious", "Grandfather, a retired sailor"],
        "duration_class": duration_class,
        "aspect_ratio": aspect_ratio,
        "language": "en",
        "audio_requirement": "music and ambience",
        "prohibited_asset_classes": ["uploaded_media", "stock_media"],
    }
    package.update(overrides)
    return package


@pytest.fixture
def story_package() -> Callable[..., dict[str, Any]]:
    """Build a complete input package (the protocol's required items) for a duration class."""
    return _story_package
