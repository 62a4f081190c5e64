"""Operators' command line: inspect_media and make_proxy.

Most checks call the commands in-process; two run ``manage.py`` as a real process to prove
the exit status and that bad input never produces a traceback.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

REPO = Path(__file__).resolve().parents[2]
INSPECT_KEYS = [
    "playable",
    "video_streams",
    "audio_streams",
    "duration_s",
    "effective_duration_s",
    "display_aspect_ratio",
    "width",
    "height",
    "fps",
    "conforming",
    "problems",
    "detections",
    "sha256",
]


def run(*args: str) -> tuple[int, dict]:
    out = io.StringIO()
    try:
        call_command(*args, stdout=out)
        status = 0
    except SystemExit as exit_:
        status = int(exit_.code)
    return status, json.loads(out.getvalue())


def manage(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DUEL_VAR_DIR=str(tmp_path / "var"))
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip


def test_inspect_media_conforming_minute(media):
    path = media.get("minute.mp4")
    status, report = run("inspect_media", str(path), "--duration-class", "minute_1",
                         "--aspect", "16:9", "--protocol", "ai-duel-0.1", "--json")  # fmt: skip
    assert status == 0
    assert list(report) == INSPECT_KEYS
    assert report["conforming"] is True and report["problems"] == []
    assert report["playable"] is True
    assert (report["video_streams"], report["audio_streams"]) == (1, 1)
    assert (report["width"], report["height"], report["fps"]) == (160, 90, 12.0)
    assert report["display_aspect_ratio"] == "16:9"
    assert report["duration_s"] == pytest.approx(60.0, abs=0.1)
    assert report["effective_duration_s"] == pytest.approx(60.0, abs=0.1)
    assert list(report["detections"]) == ["black", "frozen", "silence", "filler", "credits"]
    assert all(spans == [] for spans in report["detections"].values())
    assert report["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_inspect_media_nonconforming_file_exits_zero_with_detections(media):
    status, report = run("inspect_media", str(media.get("sections.mp4")), "--duration-class",
                         "minute_1", "--aspect", "16:9", "--json")  # fmt: skip
    assert status == 0
    assert report["problems"] == ["duration_nonconforming"] and report["conforming"] is False
    assert report["detections"]["black"] == [{"start_s": 3.0, "end_s": 5.0}]


@pytest.mark.parametrize(
    ("name", "code"),
    [("truncated.mp4", "not_playable"), ("empty.mp4", "file_empty"),
     ("huge_header.y4m", "resolution_too_large")],
)  # fmt: skip
def test_inspect_media_bad_input_exits_one_with_its_code(media, name, code):
    status, report = run("inspect_media", str(media.get(name)), "--duration-class", "minute_1",
                         "--aspect", "16:9", "--json")  # fmt: skip
    assert status == 1
    assert list(report) == INSPECT_KEYS
    assert report["problems"] == [code] and report["playable"] is False


def test_inspect_media_process_exit_status_and_no_traceback(media, tmp_path):
    done = manage(tmp_path, "inspect_media", str(media.get("garbage.bin")), "--duration-class",
                  "minute_1", "--aspect", "16:9", "--json")  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    assert list(report) == INSPECT_KEYS and report["problems"] == ["unreadable"]
    usage = manage(tmp_path, "inspect_media", str(media.get("garbage.bin")), "--duration-class",
                   "minute_7", "--aspect", "16:9", "--json")  # fmt: skip
    assert usage.returncode == 1
    assert "minute_7" in usage.stderr and "Traceback" not in usage.stderr


def test_inspect_media_unknown_class_is_a_command_error(media):
    with pytest.raises(CommandError, match="minute_7"):
        call_command("inspect_media", str(media.get("landscape.mp4")), "--duration-class",
                     "minute_7", "--aspect", "16:9", "--json", stdout=io.StringIO())  # fmt: skip


def test_make_proxy_writes_a_verified_proxy(media, tmp_path):
    out = tmp_path / "proxy.mp4"
    status, verification = run("make_proxy", str(media.get("portrait.mp4")), str(out),
                               "--protocol", "ai-duel-0.1", "--canvas", "640x360")  # fmt: skip
    assert status == 0
    assert verification["ok"] is True
    checks = verification["checks"]
    assert checks["canvas"]["proxy"] == [640, 360]
    assert checks["frame_count"]["original"] == checks["frame_count"]["proxy"]
    assert verification["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_make_proxy_of_garbage_fails_without_leaving_a_file(media, tmp_path):
    out = tmp_path / "proxy.mp4"
    status, result = run("make_proxy", str(media.get("garbage.bin")), str(out))
    assert status == 1 and result["ok"] is False
    assert not out.exists() and list(tmp_path.iterdir()) == []
