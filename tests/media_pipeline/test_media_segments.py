"""Segment windows (Public segment result): deterministic, stratified, per the schedule."""

from __future__ import annotations

import hashlib

import pytest

from media_pipeline.segments import (
    NoSegmentSchedule,
    select_segments,
    transition_excerpt_length_s,
    transition_excerpts,
    unit_draw,
)
from rounds.protocols import Protocol

PROTOCOL = Protocol.load("ai-duel-0.1")
PROMPT = hashlib.sha256(b"prompt one").hexdigest()
SCHEDULED = sorted(PROTOCOL.section("segment_schedule"))


@pytest.mark.parametrize("duration_class", SCHEDULED)
def test_schedule_count_lengths_strata_and_order(duration_class):
    schedule = PROTOCOL.segment_schedule(duration_class)
    target = PROTOCOL.target_s(duration_class)
    for duration in (target, target - PROTOCOL.tolerance_s(duration_class), target + 30):
        windows = select_segments(duration, duration_class, PROMPT, PROTOCOL.key)
        assert len(windows) == schedule["count"]
        stratum = duration / schedule["count"]
        for k, (start, end) in enumerate(windows):
            assert (
                schedule["min_length_s"] - 0.002 <= end - start <= schedule["max_length_s"] + 0.002
            )
            assert k * stratum - 0.001 <= start and end <= (k + 1) * stratum + 0.001
        assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:], strict=False))


def test_deterministic_and_seeded_by_prompt_and_protocol_version():
    first = select_segments(300, "minute_5", PROMPT, "ai-duel-0.1")
    assert first == select_segments(300, "minute_5", PROMPT, "ai-duel-0.1")
    other_prompt = select_segments(
        300, "minute_5", hashlib.sha256(b"two").hexdigest(), "ai-duel-0.1"
    )
    assert other_prompt != first
    schedule = PROTOCOL.segment_schedule("minute_5")
    other_version = select_segments(
        300, "minute_5", PROMPT, "ai-duel-0.2", schedule=schedule, target_s=300
    )
    assert other_version != first


def test_same_relative_windows_for_every_system_on_a_prompt():
    """Two systems' films of different lengths get the same start fractions and lengths."""
    short = select_segments(295, "minute_5", PROMPT, PROTOCOL.key)
    long = select_segments(305, "minute_5", PROMPT, PROTOCOL.key)
    for (s1, e1), (s2, e2) in zip(short, long, strict=True):
        assert s1 / 295 == pytest.approx(s2 / 305, abs=2e-5)
        assert e1 - s1 == pytest.approx(e2 - s2, abs=2e-3)


def test_lengths_vary_within_the_range_for_five_minute_films():
    lengths = {round(e - s, 3) for s, e in select_segments(300, "minute_5", PROMPT, PROTOCOL.key)}
    assert len(lengths) > 1


def test_unit_draw_is_the_documented_formula():
    seed = hashlib.sha256(f"{PROMPT}|ai-duel-0.1".encode()).digest()
    digest = hashlib.sha256(seed + b"|2|position").digest()
    assert unit_draw(seed, 2, "position") == int.from_bytes(digest[:8], "big") / 2**64


def test_short_classes_have_no_segments():
    with pytest.raises(NoSegmentSchedule):
        select_segments(60, "minute_1", PROMPT, PROTOCOL.key)


def test_transition_excerpts_centre_on_declared_boundaries_inside_the_film():
    length = transition_excerpt_length_s("ai-duel-0.1")
    windows = transition_excerpts(300, [100.0, 5.0, 299.0, 400.0, -1.0], length_s=length)
    assert windows == [(0.0, length), (100 - length / 2, 100 + length / 2), (300 - length, 300.0)]
    for (start, end), boundary in zip(windows, [5.0, 100.0, 299.0], strict=True):
        assert start <= boundary <= end and end - start == pytest.approx(length)
