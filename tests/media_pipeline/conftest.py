"""Fixtures of the media pipeline tests: one session directory of synthetic media."""

from __future__ import annotations

import pytest
from media_samples import SyntheticMedia


@pytest.fixture(scope="session")
def media(tmp_path_factory) -> SyntheticMedia:
    """Synthetic files by name, each built once per session on first use."""
    return SyntheticMedia(tmp_path_factory.mktemp("synthetic-media"))
