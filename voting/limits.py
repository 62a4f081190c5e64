"""Rate limits for the voting endpoints, per voter and per network, in Django's cache.

Issue 6: "Rate limits per voter and per network". Fixed-window counters: ``cache.incr`` counts in
the window and ``cache.add`` opens it, both atomic on Redis (the cache when ``REDIS_URL`` is
set) and within one process on the local-memory cache of the embedded default. The limits are
the platform's (not protocol rules); ``settings.DUEL_VOTING_RATE_LIMITS`` may override any of
them, as ``{"name": [count, seconds]}``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

# name -> (requests, window in seconds). A heartbeat comes about once a second per playing
# film; a ballot takes at least two full films; assignments are one per pair.
DEFAULT_LIMITS: dict[str, tuple[int, int]] = {
    "heartbeat_voter": (20, 10),
    "heartbeat_network": (2000, 10),
    "ballot_voter": (6, 60),
    "ballot_network": (300, 60),
    "assign_voter": (30, 60),
    "assign_network": (600, 60),
    "voter_network": (120, 3600),
    "media_voter": (600, 60),
}


@dataclass(frozen=True)
class Limited(Exception):
    """A rate limit was hit; ``retry_after`` seconds until the window ends."""

    name: str
    retry_after: int

    def __str__(self) -> str:
        return f"Too many requests ({self.name}); try again in {self.retry_after} s."


def limit_for(name: str) -> tuple[int, int]:
    overrides = getattr(settings, "DUEL_VOTING_RATE_LIMITS", None) or {}
    count, window = overrides.get(name, DEFAULT_LIMITS[name])
    return int(count), int(window)


def hit(name: str, subject: str) -> None:
    """Count one request of ``subject`` (a voter id or network hash) against limit ``name``.

    Raises :class:`Limited` when the window's count is exceeded. An empty subject (a synthetic
    voter, an unknown network) is not limited here.
    """
    if not subject:
        return
    count, window = limit_for(name)
    window_start = int(time.time()) // window * window
    key = f"duel:rl:{name}:{subject}:{window_start}"
    try:
        used = cache.incr(key)
    except ValueError:  # the first request of the window opens it
        if cache.add(key, 1, timeout=window + 1):
            used = 1
        else:  # another request opened it meanwhile
            used = cache.incr(key)
    if used > count:
        raise Limited(name, max(1, window_start + window - int(time.time())))
