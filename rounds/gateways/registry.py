"""Build a provider or engine adapter from its stored config.

A system's or a round's config is a dict with ``"adapter"``: ``"reference"`` (the embedded
default, DESIGN "Real components, and the embedded default") or ``"http"`` (a real provider
configured per :mod:`rounds.gateways.http`). The only Django contact in ``rounds.gateways``:
when a reference config names no ``state_dir``, it defaults to ``DUEL_WORK_DIR/<name>``, read
from settings at call time, so importing this module needs no configured Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rounds.gateways.base import AdapterConfigurationError, SystemProvider, VideoEngine

ADAPTERS: tuple[str, ...] = ("reference", "http", "reference_orchestrator")


def _default_state_dir(name: str) -> Path:
    from django.conf import settings

    if not settings.configured:
        raise AdapterConfigurationError(
            "the reference provider needs a state_dir (Django settings are not configured)"
        )
    return Path(settings.DUEL_WORK_DIR) / name


def _adapter(config: Mapping[str, Any]) -> str:
    adapter = config.get("adapter", "reference")
    if adapter not in ADAPTERS:
        raise AdapterConfigurationError(
            f"unknown adapter {adapter!r}; known: {', '.join(ADAPTERS)}"
        )
    return adapter


def get_system_provider(config: Mapping[str, Any]) -> SystemProvider:
    """The :class:`SystemProvider` a complete system's config describes."""
    adapter = _adapter(config)
    if adapter == "http":
        from rounds.gateways.http import HttpSystemProvider

        return HttpSystemProvider(config)
    if adapter == "reference_orchestrator":
        from rounds.gateways.orchestrator import ReferenceOrchestratorProvider

        config = dict(config)
        config.setdefault("state_dir", _default_state_dir("reference-provider"))
        return ReferenceOrchestratorProvider.from_config(config)
    from rounds.gateways.reference import ReferenceProvider

    config = dict(config)
    config.setdefault("state_dir", _default_state_dir("reference-provider"))
    return ReferenceProvider.from_config(config)


def get_video_engine(config: Mapping[str, Any]) -> VideoEngine:
    """The :class:`VideoEngine` a Common Visual Engine round's config describes."""
    adapter = _adapter(config)
    if adapter == "http":
        from rounds.gateways.http import HttpVideoEngine

        return HttpVideoEngine(config)
    from rounds.gateways.reference import ReferenceEngine

    return ReferenceEngine.from_config(config)
