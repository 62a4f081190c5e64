"""The playback proof's rules as pure functions: coverage, clock, seeking, speed, sound, ending."""

from __future__ import annotations

import pytest

from rounds.protocols import Protocol
from voting import playback
from voting.playback import FilmState, HeartbeatInvalid, WatchRules, apply_heartbeat

RULES = WatchRules.from_protocol(Protocol.load("ai-duel-0.1").voting)


def report(ranges=(), **fields) -> playback.HeartbeatReport:
    document = {
        "token": "tok",
        "film": 1,
        "seq": 1,
        "t": 1000,
        "ranges": [list(r) for r in ranges],
        "muted": False,
        "volume": 1.0,
        "rate": 1.0,
        "paused": False,
        "ended": False,
        "visible": True,
    }
    document.update(fields)
    return playback.parse_heartbeat(document)


def play(state: FilmState, steps, *, start: float = 0.0, **fields) -> FilmState:
    """Feed (at, [ranges]) steps; every one must be accepted."""
    for at, ranges in steps:
        verdict = apply_heartbeat(state, report(ranges, **fields), now=start + at, rules=RULES)
        assert verdict.accepted, verdict.detail
        state = verdict.state
    return state


def test_rules_come_from_the_protocol_definition():
    voting = Protocol.load("ai-duel-0.1").voting
    assert RULES.min_coverage == voting["min_watch_coverage"] == 0.95
    assert RULES.require_ending and RULES.require_audio
    with pytest.raises(ValueError):
        WatchRules.from_protocol(Protocol.load("tovaki-2026-r1").voting)


def test_watching_in_real_time_covers_the_film_and_its_ending():
    state = FilmState(duration_s=10.0)
    state = play(state, [(0, [])] + [(t, [(t - 1, t, 1)]) for t in range(1, 11)])
    state = play(state, [(10.2, [])], ended=True, paused=True)
    assert state.coverage == pytest.approx(1.0)
    assert state.ending_played(RULES) and state.complete(RULES) and state.heard(RULES)


@pytest.mark.parametrize(
    "watched_to,complete",
    [(9.5, True), (9.49, False)],  # the 95% edge of a 10 s film (ending window separate)
)
def test_coverage_threshold_at_its_edge(watched_to, complete):
    # Skip the start (0.5 s or a bit more) but play the end: only coverage decides.
    state = FilmState(duration_s=10.0)
    start = 10.0 - watched_to
    state = play(state, [(0, []), (watched_to, [(start, 10.0, 1)])])
    state = play(state, [(watched_to + 0.1, [])], ended=True, paused=True)
    assert state.ending_played(RULES)
    assert state.complete(RULES) is complete


def test_a_seek_forward_does_not_count_the_skipped_range():
    state = FilmState(duration_s=10.0)
    # Played 0-3, jumped to 8 (the page starts a new range), played 8-10.
    state = play(state, [(0, []), (3, [(0, 3, 1)]), (5.5, [(8, 10, 1)])])
    state = play(state, [(5.6, [])], ended=True, paused=True)
    assert state.watched_s == pytest.approx(5.0)
    assert not state.complete(RULES)


def test_watching_a_part_twice_adds_no_coverage():
    state = FilmState(duration_s=10.0)
    state = play(state, [(0, []), (4, [(0, 4, 1)]), (8, [(0, 4, 1)])])
    assert state.watched_s == pytest.approx(4.0)


def test_the_ending_must_be_reported_and_covered():
    state = FilmState(duration_s=10.0)
    state = play(state, [(0, []), (10, [(0, 10, 1)])])
    assert state.coverage == pytest.approx(1.0)
    assert not state.ending_played(RULES)  # "ended" never reported
    early = play(FilmState(duration_s=10.0), [(0, []), (9.6, [(0, 9.6, 1)])])
    early = play(early, [(9.7, [])], ended=True)
    assert early.coverage >= RULES.min_coverage
    assert not early.ending_played(RULES)  # the last 0.4 s did not play


def test_more_film_than_time_passed_is_impossible_and_not_counted():
    # A client claiming 1.2 s of film per second: each step is within the per-heartbeat
    # allowance, but the total outruns the clock (5% plus a fixed slack) after 10 s.
    state = play(FilmState(duration_s=60.0), [(0, [])])
    state = play(state, [(t, [(1.2 * (t - 1), 1.2 * t, 1)]) for t in range(1, 11)])
    verdict = apply_heartbeat(state, report([(12, 13.2, 1)]), now=11.0, rules=RULES)
    assert verdict.refusal == playback.IMPOSSIBLE_SPEED
    assert verdict.flags
    assert verdict.state.watched_s == pytest.approx(state.watched_s) == pytest.approx(12.0)


def test_a_burst_larger_than_the_time_since_the_last_heartbeat_is_too_fast():
    # Waiting a minute, then claiming the whole minute at once, is not watching.
    state = play(FilmState(duration_s=60.0), [(0, []), (1, [(0, 1, 1)])])
    verdict = apply_heartbeat(state, report([(1, 6, 1)]), now=2.0, rules=RULES)
    assert verdict.refusal == playback.TOO_FAST and not verdict.flags
    assert verdict.state.watched_s == pytest.approx(1.0)


def test_two_films_cannot_be_played_side_by_side():
    # Film 1 fully watched from 0 to 10; film 2 starts at 5 and claims 10 s by 15: together
    # 20 s of film in 15 s.
    film2 = play(FilmState(duration_s=10.0), [(5, [])])
    verdict = None
    for t in range(6, 16):
        verdict = apply_heartbeat(
            film2,
            report([(t - 6, t - 5, 1)], film=2),
            now=float(t),
            rules=RULES,
            other_film_watched_s=10.0,
            pair_started_at=0.0,
        )
        if not verdict.accepted:
            break
        film2 = verdict.state
    assert verdict.refusal == playback.IMPOSSIBLE_SPEED


@pytest.mark.parametrize("rate", [2.0, 0.5, 1.25])
def test_any_playback_rate_but_one_is_refused(rate):
    state = play(FilmState(duration_s=10.0), [(0, [])])
    verdict = apply_heartbeat(state, report([(0, 1, 1)], rate=rate), now=1.0, rules=RULES)
    assert verdict.refusal == playback.PLAYBACK_RATE
    assert verdict.state.watched_s == 0


def test_playing_in_a_background_tab_is_refused_but_pausing_on_hide_is_fine():
    state = play(FilmState(duration_s=10.0), [(0, [])])
    hidden = apply_heartbeat(state, report([(0, 1, 1)], visible=False), now=1.0, rules=RULES)
    assert hidden.refusal == playback.BACKGROUND
    paused = apply_heartbeat(
        state, report([(0, 1, 1)], visible=False, paused=True), now=1.0, rules=RULES
    )
    assert paused.accepted and paused.state.watched_s == pytest.approx(1.0)


@pytest.mark.parametrize(
    "fields,range_audible,heard",
    [
        ({}, 1, True),
        ({"muted": True}, 1, False),
        ({"volume": 0.05}, 1, False),
        ({}, 0, False),
    ],
)
def test_sound_must_be_on_for_the_coverage(fields, range_audible, heard):
    state = play(FilmState(duration_s=10.0), [(0, [])])
    state = play(state, [(t, [(t - 1, t, range_audible)]) for t in range(1, 11)], **fields)
    assert state.coverage == pytest.approx(1.0)
    assert state.heard(RULES) is heard


def test_muting_part_of_a_film_leaves_the_rest_heard():
    state = play(FilmState(duration_s=20.0), [(0, [])])
    state = play(state, [(t, [(t - 1, t, 1)]) for t in range(1, 20)])
    state = play(state, [(20, [(19, 20, 0)])])
    assert state.audible_coverage == pytest.approx(0.95)
    assert state.heard(RULES)


@pytest.mark.parametrize(
    "change",
    [
        {"film": 3},
        {"seq": 0},
        {"seq": "1"},
        {"volume": 1.5},
        {"muted": "no"},
        {"ranges": [[2, 1, 1]]},
        {"ranges": [[0, 1]]},
        {"ranges": [[0, 1, 2]]},
        {"ranges": [[-1, 1, 1]]},
        {"ranges": [[0, float("inf"), 1]]},
        {"ranges": [[0, 0.1, 1]] * 65},
        {"token": ""},
    ],
)
def test_malformed_heartbeats_are_refused(change):
    document = {
        "token": "tok",
        "film": 1,
        "seq": 1,
        "t": 1,
        "ranges": [],
        "muted": False,
        "volume": 1.0,
        "rate": 1.0,
        "paused": False,
        "ended": False,
        "visible": True,
    }
    document.update(change)
    with pytest.raises(HeartbeatInvalid):
        playback.parse_heartbeat(document)


def test_a_range_past_the_end_of_the_film_is_invalid():
    state = FilmState(duration_s=10.0)
    with pytest.raises(HeartbeatInvalid):
        apply_heartbeat(state, report([(0, 12, 1)]), now=20.0, rules=RULES)


def test_timing_fingerprint_depends_on_intervals_and_positions():
    a = playback.timing_step("", report([(0, 1, 1)], t=2000), 1000)
    b = playback.timing_step("", report([(0, 1, 1)], t=2000), 1000)
    c = playback.timing_step("", report([(0, 1, 1)], t=2001), 1000)
    d = playback.timing_step("", report([(0, 1.002, 1)], t=2000), 1000)
    assert a == b
    assert len({a, c, d}) == 3
