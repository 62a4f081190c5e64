"""Jury planning and playback-proof benchmarks (pure code, no database).

Prints:

1. Williams square construction and property checks for n = 2..40;
2. a full viewing plan (``plan_viewing_orders``) and its sessions for a large jury: 200 jurors,
   10 prompts, 12 systems (120 films of 5 minutes each per juror);
3. the playback proof of a 2-hour film at one heartbeat per second (7,200 heartbeats), the
   server-side work each heartbeat costs, with and without a seek every 10 minutes.

Usage: ``.venv/bin/python benchmarks/bench_juries.py``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from juries.playback import Heartbeat, ProofRules, ProofState, proof_apply, proof_verdict  # noqa: E402
from juries.schedules import (  # noqa: E402
    ScheduleRules,
    is_carryover_balanced,
    is_latin,
    plan_sessions,
    plan_viewing_orders,
    williams_square,
)


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def bench_squares() -> None:
    def run():
        for n in range(2, 41):
            square = williams_square(n)
            assert is_latin(square, n) and is_carryover_balanced(square, n)

    _, elapsed = timed(run)
    print(f"williams squares n=2..40 built and checked: {elapsed * 1000:.1f} ms")


def bench_plan() -> None:
    jurors = [f"J-{i:04d}" for i in range(200)]
    blocks = {f"P{p}": [f"P{p}-S{s}" for s in range(12)] for p in range(10)}
    plan, elapsed = timed(lambda: plan_viewing_orders(jurors, blocks, seed="bench"))
    print(f"viewing plan, 200 jurors x 10 prompts x 12 systems: {elapsed * 1000:.1f} ms")
    rules = ScheduleRules(
        session_cap_s=7200, break_s=900, between_sessions_s=1800, daily_max_s=21600
    )

    def sessions():
        return [plan_sessions([(item, 300.0) for _, item in plan.orders[j]], rules) for j in jurors]

    planned, elapsed = timed(sessions)
    days = max(s.day for s in planned[0]) + 1
    print(
        f"sessions for 200 jurors (120 five-minute films each): {elapsed * 1000:.1f} ms; "
        f"{len(planned[0])} sessions over {days} days per juror"
    )


def bench_proof(seek_every_s: int | None) -> None:
    rules = ProofRules(min_playback=0.98, require_ending=True)
    duration = 7200.0
    state = ProofState()
    beats = []
    t, position = 0.0, 0.0
    beats.append((t, position))
    while position < duration:
        t += 1.0
        position = min(duration, position + 1.0)
        if seek_every_s and int(position) % seek_every_s == 0:
            position = min(duration, position + 30.0)
        beats.append((t, position))

    def run():
        for seq, (server_s, pos) in enumerate(beats):
            proof_apply(
                state,
                Heartbeat(seq=seq, position_s=pos),
                server_s=server_s,
                duration_s=duration,
                rules=rules,
            )
        return proof_verdict(state, duration_s=duration, rules=rules)

    verdict, elapsed = timed(run)
    label = f"seek +30 s every {seek_every_s} s" if seek_every_s else "straight through"
    print(
        f"proof of a 2-hour film, {len(beats)} heartbeats ({label}): "
        f"{elapsed * 1000:.1f} ms total, {elapsed / len(beats) * 1e6:.1f} us per heartbeat; "
        f"coverage {verdict.coverage:.4f}, complete={verdict.complete}"
    )


if __name__ == "__main__":
    bench_squares()
    bench_plan()
    bench_proof(None)
    bench_proof(600)
