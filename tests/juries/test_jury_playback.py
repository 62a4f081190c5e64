"""The jury playback proof against the server clock (juries/playback.py). Pure."""

from __future__ import annotations

import pytest

from juries.playback import (
    ANCHORED,
    BACKWARD,
    CREDITED,
    IMPOSSIBLE,
    MUTED,
    RATE,
    STALE,
    Heartbeat,
    ProofRules,
    ProofState,
    proof_apply,
    proof_verdict,
)
from rounds.protocols import Protocol

RULES = ProofRules.from_jury(Protocol.load("ai-duel-0.1").jury)


def play(beats, duration, rules=RULES, state=None):
    """beats: (server_s, position_s, extra kwargs) in order; returns state and outcomes."""
    state = state or ProofState()
    outcomes = []
    for seq, (server_s, position, extra) in enumerate(beats, start=state.last_seq + 1):
        beat = Heartbeat(seq=seq, position_s=position, **extra)
        outcomes.append(
            proof_apply(state, beat, server_s=server_s, duration_s=duration, rules=rules)
        )
    return state, outcomes


def steady(duration, start=0.0, every=1.0, t0=1000.0):
    beats, position, t = [], start, t0
    beats.append((t, position, {}))
    while position < duration:
        step = min(every, duration - position)
        t += step
        position += step
        beats.append((t, position, {}))
    return beats


def test_rules_come_from_the_definition():
    assert RULES.min_playback == 0.98 and RULES.require_ending is True
    tovaki = ProofRules.from_jury(Protocol.load("tovaki-2026-r1").jury)
    assert tovaki.require_audio is True and RULES.require_audio is False


def test_real_time_playback_to_the_end_is_complete():
    state, outcomes = play(steady(300.0), 300.0)
    assert outcomes[0] == ANCHORED and set(outcomes[1:]) == {CREDITED}
    verdict = proof_verdict(state, duration_s=300.0, rules=RULES)
    assert verdict.coverage == 1.0 and verdict.reached_ending and verdict.complete


def test_skipping_forward_is_not_credited():
    beats = steady(100.0)[:11]  # 0..10 s at real time
    t = beats[-1][0]
    beats += [(t + 1, 60.0, {})]  # a seek from 10 s to 60 s in one second
    beats += [(t + 1 + k, 60.0 + k, {}) for k in range(1, 41)]  # then plays 60..100
    state, outcomes = play(beats, 100.0)
    assert IMPOSSIBLE in outcomes
    verdict = proof_verdict(state, duration_s=100.0, rules=RULES)
    assert verdict.watched_s == pytest.approx(50.0)
    assert verdict.reached_ending and not verdict.complete


def test_heartbeats_faster_than_the_server_clock_are_impossible_progress():
    # A script claiming 5 s of progress every server second.
    beats = [(1000.0 + k, 5.0 * k, {}) for k in range(0, 21)]
    state, outcomes = play(beats, 100.0)
    verdict = proof_verdict(state, duration_s=100.0, rules=RULES)
    assert outcomes.count(IMPOSSIBLE) >= 19
    assert verdict.coverage < 0.1 and not verdict.complete


def test_network_jitter_within_the_burst_allowance_is_credited():
    # Heartbeats sent every second arrive 0.8 s late, then on time.
    beats = [(1000.0, 0.0, {}), (1001.0, 1.0, {}), (1002.8, 2.0, {}), (1003.0, 3.0, {})]
    beats += [(1003.0 + k, 3.0 + k, {}) for k in range(1, 8)]
    state, outcomes = play(beats, 10.0)
    assert set(outcomes[1:]) == {CREDITED}
    assert proof_verdict(state, duration_s=10.0, rules=RULES).complete


def test_playback_at_another_rate_is_not_credited():
    beats = [(1000.0, 0.0, {})] + [(1000.0 + k, 2.0 * k, {"rate": 2.0}) for k in range(1, 6)]
    state, outcomes = play(beats, 10.0)
    assert set(outcomes[1:]) == {RATE}
    assert proof_verdict(state, duration_s=10.0, rules=RULES).watched_s == 0


def test_muted_playback_counts_only_where_audio_monitoring_is_required():
    tovaki = ProofRules.from_jury(Protocol.load("tovaki-2026-r1").jury)
    beats = [(1000.0, 0.0, {})] + [(1000.0 + k, float(k), {"muted": True}) for k in range(1, 7)]
    state, outcomes = play(beats, 6.0, rules=tovaki)
    assert set(outcomes[1:]) == {MUTED}
    assert not proof_verdict(state, duration_s=6.0, rules=tovaki).complete
    state, _ = play(beats, 6.0, rules=RULES)
    assert proof_verdict(state, duration_s=6.0, rules=RULES).complete


def test_stale_and_replayed_heartbeats_are_ignored():
    state = ProofState()
    rules = RULES
    assert proof_apply(state, Heartbeat(0, 0.0), server_s=0, duration_s=10, rules=rules) == ANCHORED
    assert proof_apply(state, Heartbeat(1, 1.0), server_s=1, duration_s=10, rules=rules) == CREDITED
    assert proof_apply(state, Heartbeat(1, 9.0), server_s=2, duration_s=10, rules=rules) == STALE
    assert state.credited == [[0.0, 1.0]]


def test_rewatching_is_allowed_and_fills_gaps():
    beats = steady(10.0)[:4]  # 0..3 s
    t = beats[-1][0]
    beats += [(t + 1, 6.0, {})]  # skipped 3..6 (not credited)
    beats += [(t + 1 + k, 6.0 + k, {}) for k in range(1, 5)]  # 6..10
    state, outcomes = play(beats, 10.0)
    assert not proof_verdict(state, duration_s=10.0, rules=RULES).complete
    t = beats[-1][0]
    back = [(t + 1, 3.0, {})] + [(t + 1 + k, 3.0 + k, {}) for k in range(1, 4)]
    state, outcomes = play(back, 10.0, state=state)
    assert outcomes[0] == BACKWARD
    verdict = proof_verdict(state, duration_s=10.0, rules=RULES)
    assert verdict.coverage == 1.0 and verdict.complete


def test_98_percent_without_the_ending_is_not_complete():
    beats = steady(99.0)
    state, _ = play(beats, 100.0)
    verdict = proof_verdict(state, duration_s=100.0, rules=RULES)
    assert verdict.coverage == pytest.approx(0.99)
    assert not verdict.reached_ending and not verdict.complete


def test_the_state_survives_a_json_round_trip():
    state, _ = play(steady(5.0), 10.0)
    again = ProofState.from_json(state.to_json())
    assert again == state


def test_time_spent_paused_cannot_pay_for_a_seek():
    beats = steady(100.0)[:11]  # 0..10 s
    t = beats[-1][0]
    beats += [(t + 0.1, 10.0, {"paused": True}), (t + 60.0, 10.0, {"paused": True})]
    beats += [(t + 61.0, 12.5, {})]  # resumes and jumps 2.5 s in one second
    state, outcomes = play(beats, 100.0)
    assert outcomes[-1] == IMPOSSIBLE
    assert proof_verdict(state, duration_s=100.0, rules=RULES).watched_s == pytest.approx(10.0)


def test_credited_progress_never_runs_ahead_of_the_server_clock_by_more_than_the_jitter():
    # A forger sending, every 0.9 s of server time, one second of progress.
    beats = [(1000.0 + 0.9 * k, float(k), {}) for k in range(0, 40)]
    state, outcomes = play(beats, 100.0)
    verdict = proof_verdict(state, duration_s=100.0, rules=RULES)
    elapsed = beats[-1][0] - beats[0][0]
    assert verdict.watched_s <= elapsed + RULES.jitter_s
    assert IMPOSSIBLE in outcomes
