"""A worker killed in the middle of a proxy encode leaves nothing half-written in storage,
its ffmpeg dies with it, and the retried job finishes (issue 4, "Workers and storage").

The worker is a forked copy of this test process running ``proxy_build``: a real separate
process with the same settings and database, killed with SIGKILL as a crashed host would.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from pathlib import Path

import pytest
from django.conf import settings
from media_samples import ffmpeg

from media_pipeline.models import Proxy
from media_pipeline.services import original_store, proxy_build
from media_pipeline.storage import work_dir
from media_pipeline.tasks import sweep_scratch

pytestmark = pytest.mark.django_db
CANVAS = (640, 360)


def stored_files() -> list[Path]:
    return sorted(p for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file())


def processes_using(path: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(path).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_killed_proxy_encode_leaves_nothing_and_the_rerun_completes(tmp_path, settings):
    source = tmp_path / "film.mp4"
    ffmpeg("-f", "lavfi", "-i", "testsrc2=s=640x360:r=24:d=10", "-f", "lavfi", "-i",
           "sine=d=10:sample_rate=48000", "-c:v", "libx264", "-preset", "ultrafast",
           "-pix_fmt", "yuv420p", "-c:a", "aac", str(source))  # fmt: skip
    original = original_store(path=source)
    before = stored_files()

    pid = os.fork()
    if pid == 0:  # the worker
        try:
            proxy_build(media_file=original, protocol_key="ai-duel-0.1", canvas=CANVAS)
        finally:
            os._exit(0)
    scratch = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and scratch is None:
        written = [p for p in work_dir().glob("proxy-*/proxy.mp4")
                   if p.stat().st_size > 0]  # fmt: skip
        scratch = written[0] if written else None
        time.sleep(0.01)
    assert scratch is not None, "the encode never started writing"
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL

    assert stored_files() == before  # nothing half-written became visible
    assert not Proxy.objects.exists()
    deadline = time.monotonic() + 0.5  # at once: the encode alone would run on for seconds
    while processes_using(scratch) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_using(scratch) == []  # its ffmpeg died with it

    proxy = proxy_build(media_file=original, protocol_key="ai-duel-0.1", canvas=CANVAS)
    published = [p for p in stored_files() if p not in before]
    assert [p.relative_to(settings.MEDIA_ROOT).as_posix() for p in published] == [
        proxy.proxy_file.storage_name
    ]
    assert hashlib.sha256(published[0].read_bytes()).hexdigest() == proxy.proxy_file.sha256
    assert proxy.verification["ok"] is True

    # The killed worker's scratch is still there; the sweep leaves it while it is younger
    # than any task can run, and removes it once it is older.
    left = scratch.parent
    assert left.exists() and left.name in [p.name for p in work_dir().iterdir()]
    assert sweep_scratch() == []
    assert left.exists()
    settings.DUEL_SCRATCH_MAX_AGE_S = 3600
    hours_ago = time.time() - 2 * 3600
    for path in [left, *left.rglob("*")]:
        os.utime(path, (hours_ago, hours_ago))
    assert sweep_scratch() == [left.name]
    assert not left.exists()
