"""Real short films for tests: a lavfi test picture and a sine tone, H.264/AAC in MP4."""

from __future__ import annotations

import subprocess
from pathlib import Path

from django.conf import settings


def make_film(
    path: Path,
    seconds: float = 2.0,
    *,
    size: str = "320x180",
    rate: int = 12,
    tone: int = 440,
) -> Path:
    """A film of ``seconds`` with a ``size`` test picture at ``rate`` fps and a ``tone`` Hz
    tone (48 kHz): fast-start, without metadata, byte-identical for the same arguments."""
    subprocess.run(
        [
            settings.DUEL_FFMPEG,
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            f"testsrc=size={size}:rate={rate}:duration={seconds}",
            "-f",
            "lavfi",
            "-i",
            f"sine=frequency={tone}:sample_rate=48000:duration={seconds}",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-pix_fmt",
            "yuv420p",
            "-c:a",
            "aac",
            "-b:a",
            "64k",
            "-shortest",
            "-movflags",
            "+faststart",
            "-map_metadata",
            "-1",
            "-fflags",
            "+bitexact",
            str(path),
        ],
        check=True,
        timeout=60,
    )
    return Path(path)
