"""Helpers of the voting tests: short real films, rounds with finished runs, a scripted viewer."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
from datetime import datetime, timedelta
from pathlib import Path

from django.utils import timezone

from rounds.models import Round
from tests import factories
from voting import services
from voting.models import Assignment, PlaybackSession

FILM_SECONDS = 3


def voting_round(
    films: list[Path],
    *,
    entries: int = 3,
    packages: int = 1,
    voting_settings: dict | None = None,
    is_demo: bool = False,
    sync: bool = True,
) -> Round:
    """An open round whose every entry has a finished conforming run with a real proxy."""
    round_ = factories.open_round(
        entries=entries,
        packages=packages,
        voting_settings=voting_settings or {},
        is_demo=is_demo,
    )
    for i, entry in enumerate(round_.entries.order_by("label")):
        film = films[i % len(films)]
        for package in round_.packages.order_by("prompt_key"):
            factories.finished_run(entry, package, original_path=film, proxy_path=film)
    if sync:
        services.battle_sync(round_=round_, measure=measured_once)
    return round_


_DURATIONS: dict[str, float] = {}


def measured_once(media_file) -> float:
    """ffprobe each distinct film once per test session (the same few films back every round)."""
    if media_file.sha256 not in _DURATIONS:
        _DURATIONS[media_file.sha256] = services.proxy_duration_s(media_file)
    return _DURATIONS[media_file.sha256]


def sign(assignment: Assignment, body: bytes) -> str:
    return hmac.new(bytes.fromhex(assignment.hmac_key), body, hashlib.sha256).hexdigest()


class Viewer:
    """A scripted page: builds signed heartbeats and feeds them to the service on a fake clock.

    ``at`` is seconds since the viewer's start; the server clock is ``start + at``.
    """

    def __init__(
        self, assignment: Assignment, start: datetime | None = None, *, jitter: bool = True
    ) -> None:
        self.assignment = assignment
        self.start = start or timezone.now()
        self.seq = 0
        self.client_ms = 1_700_000_000_000
        # A real browser's timers drift by a few milliseconds; a replayed script does not.
        self.jitter = random.Random() if jitter else None

    def duration(self, film: int) -> float:
        return PlaybackSession.objects.get(assignment=self.assignment, film=film).duration_s

    def body(self, film: int, ranges, **fields) -> bytes:
        self.seq += 1
        document = {
            "token": self.assignment.token,
            "film": film,
            "seq": fields.pop("seq", self.seq),
            "t": fields.pop("t", self.client_ms),
            "ranges": [[a, b, int(audible)] for a, b, audible in ranges],
            "muted": False,
            "volume": 1.0,
            "rate": 1.0,
            "paused": False,
            "ended": False,
            "visible": True,
        }
        document.update(fields)
        return json.dumps(document).encode()

    def send(self, film: int, ranges, *, at: float, client_step_ms: int = 1000, **fields):
        self.client_ms += client_step_ms + (self.jitter.randint(-15, 15) if self.jitter else 0)
        body = self.body(film, ranges, **fields)
        return services.heartbeat_record(
            token=self.assignment.token,
            voter_id=str(self.assignment.voter.public_id),
            body=body,
            signature=sign(self.assignment, body),
            now=self.start + timedelta(seconds=at),
        )

    def watch(self, film: int, *, at: float, step: float = 1.0, audible: bool = True, **fields):
        """Play the whole film in real time from ``at``; return the time it ended."""
        duration = self.duration(film)
        self.send(film, [], at=at, **fields)
        position = 0.0
        now = at
        while position < duration:
            end = min(duration, position + step)
            now += end - position
            last = end >= duration
            self.send(
                film,
                [(round(position, 3), round(end, 3), audible)],
                at=now,
                ended=last,
                paused=last,
                **fields,
            )
            position = end
        return now

    def watch_both(self, *, at: float = 0.0, audible: bool = True) -> float:
        end = self.watch(1, at=at, audible=audible)
        return self.watch(2, at=end + 0.5, audible=audible)
