"""Playback proof for jury screenings: what the server credits as watched. Pure Python.

Protocol, "Five-minute and longer evaluation": "Require at least 98 percent playback and the
ending." The juror's browser cannot be trusted to say so; it reports heartbeats (sequence
number, media position, playback rate, paused, muted) and the server credits only playback it
could have happened in real time, measured against its own clock:

- A heartbeat older than the last one (sequence number) is ignored.
- A step forward of ``Δp`` media seconds is credited as the interval ``[p0, p0 + Δp]`` only if
  the playback allowance covers it. The allowance is a token bucket: it starts at
  ``jitter_s`` when playback is anchored, fills with server time at rate 1 up to ``burst_s``
  (so a late heartbeat followed by a prompt one is still credited), and each credited step
  spends ``Δp``; while playback is paused or stalled it drains back to ``jitter_s``, so time
  spent paused cannot be spent on a seek. Over any stretch of playback the credited progress
  is therefore at most the server time elapsed plus ``jitter_s``. Progress faster than that
  (a seek forward, a script) is "impossible progress": nothing is credited and the position
  re-anchors.
- A step at a rate other than 1, or muted when the protocol requires audio monitoring, is not
  credited; a step backwards (re-watching) credits nothing but is allowed.
- Coverage is the union of credited intervals over the proxy's real duration (probed by the
  server, never taken from the client). "The ending" is reached when a credited interval ends
  within ``ending_tolerance_s`` of the end, which absorbs the few hundredths of a second by
  which a browser's media duration and ffprobe's container duration differ.

``jitter_s``, ``burst_s`` and ``ending_tolerance_s`` are measurement tolerances of this proof,
not protocol rules; ``min_playback``, ``require_ending`` and audio monitoring come from the
definition's ``jury`` section.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from duel.intervals import interval_union

DEFAULT_JITTER_S = 0.5
DEFAULT_BURST_S = 2.0
DEFAULT_ENDING_TOLERANCE_S = 0.5


@dataclass(frozen=True)
class ProofRules:
    min_playback: float
    require_ending: bool
    require_audio: bool = False
    jitter_s: float = DEFAULT_JITTER_S
    burst_s: float = DEFAULT_BURST_S
    ending_tolerance_s: float = DEFAULT_ENDING_TOLERANCE_S

    @classmethod
    def from_jury(cls, jury: dict[str, Any]) -> ProofRules:
        """Rules from a definition's ``jury`` section."""
        return cls(
            min_playback=float(jury["min_playback"]),
            require_ending=bool(jury["require_ending"]),
            require_audio=bool(jury.get("direct_audio_monitoring_required", False)),
        )


@dataclass(frozen=True)
class Heartbeat:
    seq: int
    position_s: float
    rate: float = 1.0
    paused: bool = False
    muted: bool = False


@dataclass
class ProofState:
    """The server's running record of one viewing (stored as JSON on the viewing row)."""

    last_seq: int = -1
    position_s: float | None = None
    server_s: float | None = None
    allowance_s: float = 0.0
    credited: list[list[float]] = field(default_factory=list)
    violations: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ProofState:
        if not data:
            return cls()
        return cls(
            last_seq=int(data["last_seq"]),
            position_s=data["position_s"],
            server_s=data["server_s"],
            allowance_s=float(data["allowance_s"]),
            credited=[list(map(float, pair)) for pair in data["credited"]],
            violations=dict(data["violations"]),
        )


@dataclass(frozen=True)
class Verdict:
    watched_s: float
    coverage: float
    reached_ending: bool
    complete: bool


# Outcomes of one heartbeat
STALE = "stale"
ANCHORED = "anchored"
CREDITED = "credited"
IDLE = "idle"
INVALID = "invalid_position"
IMPOSSIBLE = "impossible_progress"
RATE = "rate_not_1"
MUTED = "muted"
BACKWARD = "backward"


def merge_intervals(intervals: Sequence[Sequence[float]]) -> list[list[float]]:
    """Union of closed intervals, sorted and merged, as JSON-ready lists."""
    return [[a, b] for a, b in interval_union((x[0], x[1]) for x in intervals)]


def proof_apply(
    state: ProofState, beat: Heartbeat, *, server_s: float, duration_s: float, rules: ProofRules
) -> str:
    """Apply one heartbeat received at server time ``server_s``; mutate ``state``; return the
    outcome (one of the module's outcome names)."""
    if beat.seq <= state.last_seq:
        return STALE
    state.last_seq = beat.seq
    position = float(beat.position_s)
    if not math.isfinite(position) or position < 0 or position > duration_s + rules.burst_s:
        state.violations[INVALID] = state.violations.get(INVALID, 0) + 1
        return INVALID
    position = min(position, duration_s)
    if state.position_s is None or state.server_s is None:
        state.position_s, state.server_s, state.allowance_s = position, server_s, rules.jitter_s
        return ANCHORED
    elapsed = max(0.0, server_s - state.server_s)
    state.allowance_s = min(state.allowance_s + elapsed, rules.burst_s)
    start = float(state.position_s)
    step = position - start
    state.position_s, state.server_s = position, server_s
    outcome = CREDITED
    if not math.isfinite(beat.rate) or abs(beat.rate - 1.0) > 1e-9:
        outcome = RATE
    elif rules.require_audio and beat.muted:
        outcome = MUTED
    elif step < 0:
        outcome = BACKWARD
    elif step == 0:
        outcome = IDLE
    elif step > state.allowance_s:
        outcome = IMPOSSIBLE
    if outcome == CREDITED:
        state.allowance_s -= step
        state.credited = merge_intervals([*state.credited, [start, position]])
    elif outcome not in {BACKWARD, IDLE}:
        state.violations[outcome] = state.violations.get(outcome, 0) + 1
    if beat.paused or outcome == IDLE:
        # Time spent paused or stalled is not playback: it cannot pay for a later seek.
        state.allowance_s = min(state.allowance_s, rules.jitter_s)
    return outcome


def proof_verdict(state: ProofState, *, duration_s: float, rules: ProofRules) -> Verdict:
    """Coverage of the credited intervals over ``duration_s`` and whether the ending played."""
    clipped = merge_intervals([[max(0.0, a), min(duration_s, b)] for a, b in state.credited])
    watched = sum(b - a for a, b in clipped)
    coverage = watched / duration_s if duration_s > 0 else 0.0
    ending = any(b >= duration_s - rules.ending_tolerance_s for _, b in clipped)
    complete = coverage >= rules.min_playback and (ending or not rules.require_ending)
    return Verdict(
        watched_s=round(watched, 3),
        coverage=round(coverage, 6),
        reached_ending=ending,
        complete=complete,
    )
