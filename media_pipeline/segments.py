"""Deterministic segment windows and transition-centred excerpts.

Protocol: Public segment result ("Freeze a deterministic selection algorithm before viewing
outputs. Do not let a person select flattering scenes. Derive its random seed from the prompt
hash and protocol version. Use fixed relative-time strata across all systems."), with the
schedule in the definition's ``segment_schedule`` (count, min and max length per class).

The algorithm, so anyone can re-derive the windows in any language:

1. ``seed = SHA-256(utf8(prompt_hash + "|" + protocol_version))`` (raw 32 bytes).
2. ``u(k, label) = big-endian integer of the first 8 bytes of
   SHA-256(seed + utf8("|" + str(k) + "|" + label)) / 2**64`` in [0, 1).
3. Segment ``k`` has length ``L_k = min + u(k, "length") * (max - min)`` (exactly ``min``
   when min == max).
4. Its relative start is placed on the class target ``T`` cut into ``count`` equal strata
   of ``S = T / count``: ``f_k = (k*S + u(k, "position") * (S - L_k)) / T``.
5. For a film of duration ``D`` the window is ``[f_k * D, f_k * D + L_k]``; lengths are
   capped at the film's own stratum ``D / count``, and a window that would cross the end
   of its stratum (a film shorter than the target) is moved back inside it.
6. Start and end are rounded to milliseconds.

Nothing depends on the system or its film except the duration, so every system on a prompt
gets the same relative windows (the same start fraction of its own duration, the same
length in seconds). Each window stays inside its own stratum, so windows never overlap.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from rounds.protocols import Protocol

Window = tuple[float, float]


class NoSegmentSchedule(LookupError):
    """The protocol defines no segment schedule for the duration class."""


def segment_seed(prompt_hash: str, protocol_version: str) -> bytes:
    """Step 1 of the module docstring."""
    return hashlib.sha256(f"{prompt_hash}|{protocol_version}".encode()).digest()


def unit_draw(seed: bytes, index: int, label: str) -> float:
    """Step 2: a uniform number in [0, 1) for segment ``index`` and purpose ``label``."""
    digest = hashlib.sha256(seed + f"|{index}|{label}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def select_segments(
    duration_s: float,
    duration_class: str,
    prompt_hash: str,
    protocol_version: str,
    *,
    schedule: Mapping[str, Any] | None = None,
    target_s: float | None = None,
) -> list[Window]:
    """Segment windows ``[(start_s, end_s), ...]`` for one film, in time order.

    ``protocol_version`` is the protocol key (``ai-duel-0.1``), which names the version and
    selects the definition whose ``segment_schedule`` and class target apply. ``schedule``
    and ``target_s`` may be passed instead (a frozen copy held by a round). Raises
    :class:`NoSegmentSchedule` for a class without segments (1- and 2-minute films are
    judged whole).
    """
    duration = float(duration_s)
    if duration <= 0:
        raise ValueError("duration must be positive")
    if schedule is None or target_s is None:
        protocol = Protocol.load(protocol_version)
        if schedule is None:
            schedule = protocol.segment_schedule(duration_class)
            if not schedule:
                raise NoSegmentSchedule(
                    f"{protocol_version} has no segment schedule for {duration_class}"
                )
        if target_s is None:
            target_s = protocol.target_s(duration_class)
    count = int(schedule["count"])
    shortest = float(schedule["min_length_s"])
    longest = float(schedule["max_length_s"])
    if count < 1 or shortest <= 0 or longest < shortest or target_s <= 0:
        raise ValueError(f"malformed segment schedule {dict(schedule)!r}")
    seed = segment_seed(prompt_hash, protocol_version)
    nominal = float(target_s) / count
    stratum = duration / count
    windows: list[Window] = []
    for k in range(count):
        length = shortest + unit_draw(seed, k, "length") * (longest - shortest)
        fraction = k * nominal + unit_draw(seed, k, "position") * max(0.0, nominal - length)
        fraction /= float(target_s)
        length = min(length, stratum)
        start = max(k * stratum, min(fraction * duration, (k + 1) * stratum - length))
        windows.append((round(start, 3), round(start + length, 3)))
    return windows


def transition_excerpts(
    duration_s: float,
    boundaries_s: Sequence[float],
    *,
    length_s: float,
) -> list[Window]:
    """Windows of ``length_s`` centred on each declared scene boundary (Public segment result:
    "Add declared transition-centered excerpts").

    ``boundaries_s`` are the times the system declared for its scene changes; ``length_s``
    comes from the definition's ``transition_excerpts.length_s``. A window near the start or
    end is shifted to stay inside the film (still containing the boundary); boundaries
    outside the film are ignored; overlapping windows are kept separate, one per boundary,
    so each declared transition is judged on its own.
    """
    if length_s <= 0:
        raise ValueError("excerpt length must be positive")
    duration_s = float(duration_s)
    length = min(float(length_s), duration_s)
    windows: list[Window] = []
    for boundary in sorted(set(float(b) for b in boundaries_s)):
        if not 0.0 < boundary < duration_s:
            continue
        start = min(max(0.0, boundary - length / 2), duration_s - length)
        windows.append((round(start, 3), round(start + length, 3)))
    return windows


def transition_excerpt_length_s(protocol_version: str) -> float:
    """``transition_excerpts.length_s`` from the definition (AI Duel only)."""
    section = Protocol.load(protocol_version).section("transition_excerpts")
    if not section:
        raise NoSegmentSchedule(f"{protocol_version} defines no transition excerpts")
    return float(section["length_s"])
