"""Session planning: fixed breaks, the session cap, the daily maximum, separate sessions for
120-minute entries (juries/schedules.plan_sessions). Pure: no database."""

from __future__ import annotations

import pytest

from juries.schedules import ScheduleError, ScheduleRules, plan_sessions
from rounds.protocols import Protocol

MIN = 60.0


def rules(**overrides) -> ScheduleRules:
    values = dict(
        session_cap_s=120 * MIN,
        break_s=15 * MIN,
        between_sessions_s=45 * MIN,
        daily_max_s=300 * MIN,
        separate_sessions=False,
    )
    values.update(overrides)
    return ScheduleRules(**values)


def check_invariants(films, sessions, r: ScheduleRules) -> None:
    flat = [f for s in sessions for f in s.films]
    assert [f.key for f in flat] == [k for k, _ in films]  # the order is kept
    for (_key, duration), planned in zip(films, flat, strict=True):
        assert planned.end_s - planned.start_s == pytest.approx(duration)
    days: dict[int, float] = {}
    for session in sessions:
        if len(session.films) > 1:
            assert session.screening_s <= r.session_cap_s
        for a, b in zip(session.films, session.films[1:], strict=False):
            assert b.start_s - a.end_s == pytest.approx(r.break_s)  # the fixed break
        days[session.day] = days.get(session.day, 0.0) + session.screening_s
    assert all(total <= r.daily_max_s for total in days.values())
    for a, b in zip(sessions, sessions[1:], strict=False):
        if a.day == b.day:
            assert b.start_s - a.end_s == pytest.approx(r.between_sessions_s)
        else:
            assert b.day > a.day and b.start_s == 0


def test_five_minute_films_fill_sessions_with_fixed_breaks():
    films = [(f"f{i}", 5 * MIN) for i in range(30)]
    r = rules(session_cap_s=60 * MIN, daily_max_s=120 * MIN)
    sessions = plan_sessions(films, r)
    check_invariants(films, sessions, r)
    assert [len(s.films) for s in sessions] == [12, 12, 6]
    assert [s.day for s in sessions] == [0, 0, 1]
    first = sessions[0]
    assert first.films[1].start_s == 5 * MIN + 15 * MIN


def test_the_daily_maximum_moves_the_next_film_to_the_next_day():
    films = [(f"f{i}", 50 * MIN) for i in range(7)]
    r = rules(session_cap_s=100 * MIN, daily_max_s=150 * MIN)
    sessions = plan_sessions(films, r)
    check_invariants(films, sessions, r)
    per_day: dict[int, float] = {}
    for s in sessions:
        per_day[s.day] = per_day.get(s.day, 0) + s.screening_s
    assert per_day == {0: 150 * MIN, 1: 150 * MIN, 2: 50 * MIN}


def test_a_film_longer_than_the_session_cap_gets_a_session_of_its_own():
    films = [("a", 30 * MIN), ("long", 150 * MIN), ("b", 30 * MIN)]
    r = rules(session_cap_s=120 * MIN, daily_max_s=300 * MIN)
    sessions = plan_sessions(films, r)
    check_invariants(films, sessions, r)
    assert [[f.key for f in s.films] for s in sessions] == [["a"], ["long"], ["b"]]


def test_120_minute_entries_get_separate_sessions_from_the_definition():
    klass = Protocol.load("ai-duel-0.1").duration_class("minute_120")
    assert klass["separate_sessions"] is True
    films = [(f"f{i}", 7200.0) for i in range(4)]
    r = rules(session_cap_s=480 * MIN, daily_max_s=480 * MIN, separate_sessions=True)
    sessions = plan_sessions(films, r)
    check_invariants(films, sessions, r)
    assert all(len(s.films) == 1 for s in sessions)
    assert [s.day for s in sessions] == [0, 0, 0, 0]
    assert sessions[1].start_s == 7200 + 45 * MIN


def test_a_film_longer_than_the_daily_maximum_cannot_be_scheduled():
    with pytest.raises(ScheduleError, match="daily maximum"):
        plan_sessions([("feature", 7200.0)], rules(session_cap_s=60 * MIN, daily_max_s=90 * MIN))


@pytest.mark.parametrize(
    "bad",
    [
        {"session_cap_s": 0},
        {"break_s": -1},
        {"session_cap_s": 400 * MIN, "daily_max_s": 300 * MIN},
    ],
)
def test_impossible_rules_are_refused(bad):
    with pytest.raises(ScheduleError):
        rules(**bad)
