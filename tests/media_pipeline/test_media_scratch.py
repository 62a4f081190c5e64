"""The scratch sweep removes only what nothing has touched for longer than any task runs."""

from __future__ import annotations

import os
import time

from media_pipeline.storage import scratch_sweep, work_dir


def _age(path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_the_sweep_removes_stale_entries_and_keeps_live_ones():
    scratch = work_dir()
    stale_dir = scratch / "proxy-stale"
    (stale_dir / "nested").mkdir(parents=True)
    (stale_dir / "nested" / "proxy.mp4").write_bytes(b"half an encode")
    stale_file = scratch / "in-stale.bin"
    stale_file.write_bytes(b"a spooled input")
    live_dir = scratch / "proxy-live"  # an old directory whose encode is still writing
    live_dir.mkdir()
    growing = live_dir / "proxy.mp4"
    growing.write_bytes(b"growing")
    fresh = scratch / "in-fresh.bin"
    fresh.write_bytes(b"just arrived")
    for path in (stale_dir / "nested" / "proxy.mp4", stale_dir / "nested", stale_dir):
        _age(path, 7200)
    _age(stale_file, 7200)
    _age(live_dir, 7200)

    removed = scratch_sweep(max_age_s=3600)

    assert sorted(removed) == ["in-stale.bin", "proxy-stale"]
    assert not stale_dir.exists() and not stale_file.exists()
    assert growing.exists() and fresh.exists()
    assert scratch_sweep(max_age_s=3600) == []


def test_the_sweep_never_touches_state_beside_the_scratch(settings):
    from pathlib import Path

    state = Path(settings.DUEL_WORK_DIR) / "reference-provider" / "jobs"
    state.mkdir(parents=True, exist_ok=True)
    record = state / "ref-0123456789abcdef0123-1.json"
    record.write_text("{}")
    _age(record, 10 * 24 * 3600)
    assert scratch_sweep(max_age_s=60) == []
    assert record.exists()
