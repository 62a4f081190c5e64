"""Closed intervals of seconds on a film's timeline: union, clipping and length. Pure Python.

One implementation for every part that measures time on a film: the media pipeline's
detectors (what is not counted in effective duration), the voting page's watch coverage
and the jury screenings' playback proof.
"""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[float, float]


def interval_union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, merged intervals (touching intervals merge; empty ones vanish)."""
    merged: list[list[float]] = []
    for start, end in sorted((float(a), float(b)) for a, b in intervals if b > a):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def clip_intervals(intervals: Iterable[Interval], start: float, end: float) -> list[Interval]:
    """The parts of ``intervals`` inside ``[start, end]`` (not merged)."""
    clipped = ((max(a, start), min(b, end)) for a, b in intervals)
    return [(a, b) for a, b in clipped if b > a]


def total_length(intervals: Iterable[Interval]) -> float:
    """Length of the union of ``intervals``."""
    return sum(end - start for start, end in interval_union(intervals))


def clipped_length(intervals: Iterable[Interval], low: float, high: float) -> float:
    """Length of the union of ``intervals`` inside ``[low, high]``."""
    return total_length(clip_intervals(intervals, low, high))
