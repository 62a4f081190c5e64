"""Playback proof: what a heartbeat may claim, and what counts as watched and heard.

Protocol "One-minute and two-minute voting": "Require at least 95 percent watch coverage for
both outputs. Require the ending of each output to play. Require audio playback for the main
result." The numbers come from the protocol definition (``voting.min_watch_coverage``,
``require_ending``, ``require_audio``) through :class:`WatchRules`; the constants below are the
platform's own measurement tolerances, not protocol rules.

The page reports, in signed heartbeats, the media ranges it played since its last
acknowledged heartbeat (from ``timeupdate``: a forward jump is a seek and starts a new range,
so a skipped stretch is never counted), whether sound was on for each range, the playback
rate, ``ended`` and the tab's visibility. The server is the judge, on its own clock:

- media time watched cannot grow faster than wall time: per heartbeat (against the time since
  the last accepted heartbeat), per film (since the film started) and for the pair (both films
  together since the first one started, so they cannot be played side by side);
- any playback rate other than 1 is refused;
- ranges reported while the tab is hidden and the film still playing are refused (the page
  pauses a film when its tab goes to the background);
- coverage is the union of accepted ranges over the proxy's duration (measured by ffprobe when
  the battle was created), so watching a part twice never adds coverage.

A refused heartbeat's ranges do not count: the voter has to watch that part again. Pure module:
plain floats (server time in seconds), no Django.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from duel.intervals import Interval, clipped_length, interval_union

# Platform tolerances (not protocol numbers). Wall-clock allowance: watched media time may
# exceed elapsed server time by 5% (clock granularity, media clocks running slightly fast)
# plus a fixed slack for request latency.
CLOCK_TOLERANCE = 1.05
CLOCK_SLACK_S = 1.5
# Per-heartbeat allowance: generous, so network jitter between two heartbeats never refuses an
# honest viewer; the cumulative checks above are the strict ones.
HEARTBEAT_SLACK_S = 3.0
# Below this volume a range counts as silent (the element's volume, 0..1).
MIN_AUDIBLE_VOLUME = 0.1
# "The ending played": the union must cover the last ENDING_WINDOW_S seconds of the proxy,
# except ENDING_TOLERANCE_S (the browser's and ffprobe's durations differ by a few frames).
ENDING_WINDOW_S = 1.0
ENDING_TOLERANCE_S = 0.3
# Reported ranges may overrun the proxy duration by this much (container vs stream ends).
RANGE_OVERRUN_S = 1.0
MAX_RANGES_PER_HEARTBEAT = 64
MAX_SEQ = 2**31 - 1

# Refusal codes a heartbeat can get (answered as HTTP 409 with the code).
PLAYBACK_RATE = "playback_rate"
BACKGROUND = "background_playback"
TOO_FAST = "too_fast"
IMPOSSIBLE_SPEED = "impossible_speed"

# Refusals that also mark the voter's ballot for this pair with an exclusion reason: more film
# than time passed cannot happen with the page as served, only with a manipulated client. A
# speed change is refused (that stretch does not count) but not flagged: a browser extension
# can cause it, and the page undoes it at once.
FLAGGING_REFUSALS = frozenset({IMPOSSIBLE_SPEED})


class HeartbeatInvalid(ValueError):
    """The heartbeat document is malformed (answered as HTTP 400)."""


@dataclass(frozen=True)
class WatchRules:
    """The protocol's watching requirements plus the platform's measuring tolerances."""

    min_coverage: float
    require_ending: bool
    require_audio: bool
    clock_tolerance: float = CLOCK_TOLERANCE
    clock_slack_s: float = CLOCK_SLACK_S
    heartbeat_slack_s: float = HEARTBEAT_SLACK_S
    min_audible_volume: float = MIN_AUDIBLE_VOLUME
    ending_window_s: float = ENDING_WINDOW_S
    ending_tolerance_s: float = ENDING_TOLERANCE_S

    @classmethod
    def from_protocol(cls, voting: Mapping[str, Any] | None) -> WatchRules:
        """Rules from a protocol definition's ``voting`` section (``Protocol.voting``)."""
        if not voting:
            raise ValueError("the protocol defines no pairwise voting")
        return cls(
            min_coverage=float(voting["min_watch_coverage"]),
            require_ending=bool(voting["require_ending"]),
            require_audio=bool(voting["require_audio"]),
        )


@dataclass(frozen=True)
class ReportedRange:
    start: float
    end: float
    audible: bool


@dataclass(frozen=True)
class HeartbeatReport:
    """One heartbeat as the page sent it (already authenticated by its HMAC)."""

    token: str
    film: int
    seq: int
    client_ms: int
    ranges: tuple[ReportedRange, ...]
    muted: bool
    volume: float
    rate: float
    paused: bool
    ended: bool
    visible: bool

    def audible_ranges(self, min_volume: float) -> list[Interval]:
        """Ranges with sound: flagged audible by the page and sound on when it was sent."""
        if self.muted or self.volume < min_volume:
            return []
        return [(r.start, r.end) for r in self.ranges if r.audible]

    @property
    def played_ranges(self) -> list[Interval]:
        return [(r.start, r.end) for r in self.ranges]


def _number(document: Mapping[str, Any], key: str) -> float:
    value = document.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise HeartbeatInvalid(f"{key!r} must be a finite number")
    return float(value)


def _flag(document: Mapping[str, Any], key: str) -> bool:
    value = document.get(key)
    if not isinstance(value, bool):
        raise HeartbeatInvalid(f"{key!r} must be true or false")
    return value


def _integer(document: Mapping[str, Any], key: str, low: int, high: int) -> int:
    value = document.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise HeartbeatInvalid(f"{key!r} must be an integer from {low} to {high}")
    return value


def parse_heartbeat(document: Any) -> HeartbeatReport:
    """Validate the JSON document of a heartbeat; raise :class:`HeartbeatInvalid`."""
    if not isinstance(document, Mapping):
        raise HeartbeatInvalid("the heartbeat must be a JSON object")
    token = document.get("token")
    if not isinstance(token, str) or not token:
        raise HeartbeatInvalid("'token' must be the assignment token")
    raw_ranges = document.get("ranges")
    if not isinstance(raw_ranges, list) or len(raw_ranges) > MAX_RANGES_PER_HEARTBEAT:
        raise HeartbeatInvalid(f"'ranges' must be a list of at most {MAX_RANGES_PER_HEARTBEAT}")
    ranges = []
    for item in raw_ranges:
        if not isinstance(item, list) or len(item) != 3:
            raise HeartbeatInvalid("each range must be [start, end, audible]")
        start, end, audible = item
        pair = {"start": start, "end": end}
        start_s, end_s = _number(pair, "start"), _number(pair, "end")
        if start_s < 0 or end_s < start_s:
            raise HeartbeatInvalid("a range must satisfy 0 <= start <= end")
        if not isinstance(audible, bool | int) or audible not in (0, 1):
            raise HeartbeatInvalid("a range's audible flag must be 0 or 1")
        ranges.append(ReportedRange(start_s, end_s, bool(audible)))
    volume = _number(document, "volume")
    if not 0.0 <= volume <= 1.0:
        raise HeartbeatInvalid("'volume' must be between 0 and 1")
    return HeartbeatReport(
        token=token,
        film=_integer(document, "film", 1, 2),
        seq=_integer(document, "seq", 1, MAX_SEQ),
        client_ms=_integer(document, "t", 0, 2**53),
        ranges=tuple(ranges),
        muted=_flag(document, "muted"),
        volume=volume,
        rate=_number(document, "rate"),
        paused=_flag(document, "paused"),
        ended=_flag(document, "ended"),
        visible=_flag(document, "visible"),
    )


# ---------------------------------------------------------------------------------------------
# One film's watching state


@dataclass(frozen=True)
class FilmState:
    """What the server has accepted for one film of one assignment."""

    duration_s: float
    started_at: float | None = None
    last_at: float | None = None
    played: tuple[Interval, ...] = ()
    audible: tuple[Interval, ...] = ()
    ended: bool = False

    @property
    def watched_s(self) -> float:
        return clipped_length(self.played, 0.0, self.duration_s)

    @property
    def audible_s(self) -> float:
        return clipped_length(self.audible, 0.0, self.duration_s)

    @property
    def coverage(self) -> float:
        return min(1.0, self.watched_s / self.duration_s) if self.duration_s > 0 else 0.0

    @property
    def audible_coverage(self) -> float:
        return min(1.0, self.audible_s / self.duration_s) if self.duration_s > 0 else 0.0

    def ending_played(self, rules: WatchRules) -> bool:
        """The page reported ``ended`` and the accepted ranges cover the film's last moments."""
        window = min(rules.ending_window_s, self.duration_s)
        covered = clipped_length(self.played, self.duration_s - window, self.duration_s)
        return self.ended and covered >= window - rules.ending_tolerance_s

    def complete(self, rules: WatchRules) -> bool:
        """Watched enough to vote: coverage, and the ending where the protocol requires it."""
        if self.coverage < rules.min_coverage:
            return False
        return self.ending_played(rules) or not rules.require_ending

    def heard(self, rules: WatchRules) -> bool:
        """Sound was on for the required coverage (always true if audio is not required)."""
        return self.audible_coverage >= rules.min_coverage or not rules.require_audio


@dataclass(frozen=True)
class Verdict:
    """The result of one heartbeat: the new state, and a refusal code if it did not count."""

    state: FilmState
    refusal: str | None = None
    detail: str = ""

    @property
    def accepted(self) -> bool:
        return self.refusal is None

    @property
    def flags(self) -> bool:
        return self.refusal in FLAGGING_REFUSALS


def apply_heartbeat(
    state: FilmState,
    report: HeartbeatReport,
    *,
    now: float,
    rules: WatchRules,
    other_film_watched_s: float = 0.0,
    pair_started_at: float | None = None,
) -> Verdict:
    """Judge one heartbeat against the server clock ``now`` (seconds); return the verdict.

    ``other_film_watched_s`` and ``pair_started_at`` describe the other film of the pair, so
    the two films' watched time together stays within the time since the first one started.
    Raises :class:`HeartbeatInvalid` for ranges outside the film.
    """
    limit = state.duration_s + RANGE_OVERRUN_S
    for r in report.ranges:
        if r.end > limit:
            raise HeartbeatInvalid(
                f"a range ends at {r.end:.2f} s, after the end of the film "
                f"({state.duration_s:.2f} s)"
            )
    started_at = state.started_at if state.started_at is not None else now
    pair_start = min(x for x in (pair_started_at, started_at) if x is not None)
    clock_started = replace(state, started_at=started_at)

    if report.rate != 1.0:
        return Verdict(
            clock_started, PLAYBACK_RATE, f"playback rate {report.rate:g}: only 1x counts"
        )
    if report.ranges and not report.visible and not report.paused:
        return Verdict(clock_started, BACKGROUND, "the film kept playing in a background tab")

    played = tuple(interval_union([*state.played, *report.played_ranges]))
    audible = tuple(
        interval_union([*state.audible, *report.audible_ranges(rules.min_audible_volume)])
    )
    candidate = replace(
        clock_started,
        played=played,
        audible=audible,
        ended=state.ended or report.ended,
        last_at=now,
    )
    watched = candidate.watched_s
    increment = watched - state.watched_s
    since_last = now - (state.last_at if state.last_at is not None else started_at)
    if increment > since_last * rules.clock_tolerance + rules.heartbeat_slack_s:
        return Verdict(
            clock_started,
            TOO_FAST,
            f"{increment:.1f} s of film reported in {since_last:.1f} s",
        )
    film_allowance = (now - started_at) * rules.clock_tolerance + rules.clock_slack_s
    pair_allowance = (now - pair_start) * rules.clock_tolerance + rules.clock_slack_s
    if watched > film_allowance or watched + other_film_watched_s > pair_allowance:
        return Verdict(
            clock_started,
            IMPOSSIBLE_SPEED,
            f"{watched + other_film_watched_s:.1f} s of film watched in "
            f"{now - pair_start:.1f} s since the first film started",
        )
    return Verdict(candidate)


def timing_step(previous: str, report: HeartbeatReport, previous_client_ms: int | None) -> str:
    """Fold one heartbeat's timing into a running fingerprint of the viewing.

    Two genuine viewings never produce the same sequence of client-clock intervals and played
    positions to the millisecond; a script replayed for many voters does. The fingerprint is a
    hash chain over (interval since the previous heartbeat in ms, film, ranges in ms).
    """
    delta = report.client_ms - previous_client_ms if previous_client_ms is not None else -1
    ranges = ",".join(f"{round(r.start * 1000)}-{round(r.end * 1000)}" for r in report.ranges)
    step = f"{previous}|{delta}|{report.film}|{ranges}|{int(report.ended)}"
    return hashlib.sha256(step.encode()).hexdigest()
