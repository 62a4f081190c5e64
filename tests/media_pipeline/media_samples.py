"""Synthetic media for the media pipeline tests, built on demand with lavfi sources.

Every file is small (at most 320x180, a few seconds; the one 60 s clip is 160x90 at 12 fps)
and built on first use, so a test run only pays for the files its tests need. Section
boundaries are on whole frames at 24 fps so detections can be checked to one frame.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
FPS = 24
FRAME_S = 1 / FPS
SIZE = "320x180"

# The sections clip: what is where, in seconds (see ``_sections``).
SECTIONS = {
    "black": (3.0, 5.0),
    "frozen_still": (8.0, 11.0),
    "silence": (6.0, 9.0),
    "filler": (11.0, 14.0),
    "credits": (14.0, 19.0),
    "duration": 19.0,
}

CREDITS_TEXT = "Directed by Nobody\nMusic by A Machine\nStory by A Prompt\nThe End"


def ffmpeg(*args: str) -> None:
    subprocess.run(
        ["ffmpeg", "-hide_banner", "-nostdin", "-loglevel", "error", "-y", *args],
        check=True,
        capture_output=True,
        timeout=120,
    )


X264 = ("-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p")
AAC = ("-c:a", "aac", "-b:a", "64k")


def _tone(seconds: float, silent: tuple[float, float] | None = None) -> str:
    gate = f"*(1-between(t\\,{silent[0]}\\,{silent[1]}))" if silent else ""
    return f"aevalsrc=0.3*sin(2*PI*440*t){gate}:s=48000:d={seconds}"


def _sections(out: Path) -> None:
    """19 s: moving 0-3, black 3-5, moving 5-8, still 8-11, repeat of 0-3 at 11-14,
    scrolling credits 14-19; audio silent 6-9."""
    graph = ";".join(
        [
            f"testsrc2=s={SIZE}:r={FPS}:d=3[a]",
            f"color=black:s={SIZE}:r={FPS}:d=2[b]",
            f"mandelbrot=s={SIZE}:r={FPS},trim=duration=3,setpts=PTS-STARTPTS[c]",
            f"testsrc=s={SIZE}:r={FPS}:d=1,trim=start_frame=5:end_frame=6,setpts=PTS-STARTPTS,"
            f"tpad=stop=71:stop_mode=clone[d]",
            f"testsrc2=s={SIZE}:r={FPS}:d=3[e]",
            f"color=black:s={SIZE}:r={FPS}:d=5,drawtext=fontfile={FONT}:fontsize=16:"
            f"fontcolor=white:x=(w-tw)/2:y=40-t*12:line_spacing=8:text='{CREDITS_TEXT}'[f]",
            "[a][b][c][d][e][f]concat=n=6:v=1:a=0,format=yuv420p[v]",
            _tone(SECTIONS["duration"], SECTIONS["silence"]) + "[aud]",
        ]
    )
    ffmpeg("-filter_complex", graph, "-map", "[v]", "-map", "[aud]", *X264, *AAC, str(out))


def _clip(
    out: Path,
    *,
    seconds: float = 3,
    size: str = SIZE,
    fps: int = FPS,
    audio: bool = True,
    extra: tuple[str, ...] = (),
    video_filter: str | None = None,
    container_args: tuple[str, ...] = (),
) -> None:
    args = ["-f", "lavfi", "-i", f"testsrc2=s={size}:r={fps}:d={seconds}"]
    if audio:
        args += ["-f", "lavfi", "-i", _tone(seconds)]
    if video_filter:
        args += ["-vf", video_filter]
    args += [*X264]
    if audio:
        args += [*AAC]
    ffmpeg(*args, *extra, *container_args, str(out))


def _truncate(source: Path, out: Path, fraction: float = 0.6) -> None:
    data = source.read_bytes()
    out.write_bytes(data[: int(len(data) * fraction)])


class SyntheticMedia:
    """Named synthetic files, built on first request into a session directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.builders: dict[str, Callable[[Path], None]] = {
            "sections.mp4": _sections,
            "landscape.mp4": lambda p: _clip(p),
            "portrait.mp4": lambda p: _clip(p, size="180x320"),
            "square.mp4": lambda p: _clip(p, size="240x240"),
            "large.mp4": lambda p: _clip(p, seconds=1, size="1280x720"),
            "four_seconds.mp4": lambda p: _clip(p, seconds=4),
            "no_audio.mp4": lambda p: _clip(p, audio=False),
            "four_three.mp4": lambda p: _clip(p, size="240x180"),
            "anamorphic.mp4": lambda p: _clip(p, size="240x180", video_filter="setsar=4/3"),
            "rotated.mp4": lambda p: ffmpeg(
                "-i",
                str(self.get("landscape.mp4")),
                "-c",
                "copy",
                "-metadata:s:v:0",
                "rotate=90",
                str(p),
            ),
            "faststart.mp4": lambda p: _clip(
                p, seconds=4, container_args=("-movflags", "+faststart")
            ),
            "truncated.mp4": lambda p: _truncate(self.get("faststart.mp4"), p),
            "full.mkv": lambda p: _clip(p, seconds=4),
            "truncated.mkv": lambda p: _truncate(self.get("full.mkv"), p),
            "empty.mp4": lambda p: p.write_bytes(b""),
            "garbage.bin": lambda p: p.write_bytes(
                bytes((i * 7919 + 13) % 251 for i in range(65536))
            ),
            "huge_header.y4m": lambda p: p.write_bytes(
                b"YUV4MPEG2 W16000 H16000 F25:1 Ip A1:1 C420jpeg\nFRAME\n" + bytes(100_000)
            ),
            "many_streams.mkv": _many_streams,
            "two_audio.mkv": lambda p: ffmpeg(
                "-i",
                str(self.get("landscape.mp4")),
                "-map",
                "0:v",
                "-map",
                "0:a",
                "-map",
                "0:a",
                "-c",
                "copy",
                str(p),
            ),
            "two_video.mkv": lambda p: ffmpeg(
                "-i",
                str(self.get("landscape.mp4")),
                "-map",
                "0:v",
                "-map",
                "0:v",
                "-map",
                "0:a",
                "-c",
                "copy",
                str(p),
            ),
            "cover.png": lambda p: ffmpeg(
                "-f", "lavfi", "-i", "testsrc=s=64x64:d=1", "-frames:v", "1", str(p)
            ),
            "cover_art.mp4": lambda p: ffmpeg(
                "-i",
                str(self.get("landscape.mp4")),
                "-i",
                str(self.get("cover.png")),
                "-map",
                "0",
                "-map",
                "1",
                "-c",
                "copy",
                "-c:v:1",
                "png",
                "-disposition:v:1",
                "attached_pic",
                str(p),
            ),
            "no_duration.mkv": _no_duration,
            "vfr.mkv": _variable_rate,
            "tagged.mov": lambda p: _clip(
                p,
                extra=(
                    "-metadata",
                    "title=SecretSystem v9 render",
                    "-metadata",
                    "encoder=SecretSystem",
                    "-metadata",
                    "creation_time=2026-01-02T03:04:05Z",
                    "-metadata:s:v:0",
                    "handler_name=SecretSystemVideo",
                    "-metadata:s:a:0",
                    "handler_name=SecretSystemAudio",
                ),
            ),
            "offset_audio.mp4": _offset_audio,
            "minute.mp4": _minute,
        }
        self.built: dict[str, Path] = {}

    def get(self, name: str) -> Path:
        if name not in self.built:
            path = self.root / name
            self.builders[name](path)
            self.built[name] = path
        return self.built[name]


def _minute(out: Path) -> None:
    """60 s of never-repeating picture (a continuous Mandelbrot zoom) with sound: a conforming
    ``minute_1`` film at 160x90, 12 fps."""
    ffmpeg(
        "-f",
        "lavfi",
        "-i",
        "mandelbrot=s=160x90:r=12,trim=duration=60",
        "-f",
        "lavfi",
        "-i",
        _tone(60),
        *X264,
        *AAC,
        str(out),
    )


def _many_streams(out: Path) -> None:
    maps: list[str] = []
    for _ in range(1000):
        maps += ["-map", "0:a"]
    ffmpeg(
        "-f",
        "lavfi",
        "-i",
        "anullsrc=r=8000:cl=mono",
        "-t",
        "0.05",
        *maps,
        "-c:a",
        "pcm_s16le",
        str(out),
    )


def _no_duration(out: Path) -> None:
    """Matroska written to a pipe cannot go back to store its duration."""
    result = subprocess.run(
        [
            "ffmpeg",
            "-hide_banner",
            "-loglevel",
            "error",
            "-f",
            "lavfi",
            "-i",
            f"testsrc2=s={SIZE}:r={FPS}:d=3",
            "-f",
            "lavfi",
            "-i",
            _tone(3),
            *X264,
            *AAC,
            "-f",
            "matroska",
            "pipe:1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    out.write_bytes(result.stdout)


def _variable_rate(out: Path) -> None:
    """2 s at 24 fps, then 2 s at 8 fps, then 1 s black at 24 fps: a variable frame rate."""
    graph = ";".join(
        [
            f"testsrc2=s={SIZE}:r={FPS}:d=2[a]",
            f"testsrc2=s={SIZE}:r=8:d=2,settb=1/{FPS}[b]",
            f"color=black:s={SIZE}:r={FPS}:d=1.5[c]",
            "[a][b][c]concat=n=3:v=1:a=0,format=yuv420p[v]",
            _tone(5.5) + "[aud]",
        ]
    )
    ffmpeg(
        "-filter_complex",
        graph,
        "-map",
        "[v]",
        "-map",
        "[aud]",
        *X264,
        *AAC,
        "-fps_mode",
        "vfr",
        str(out),
    )


def _offset_audio(out: Path) -> None:
    """Audio whose first sample is timestamped 0.5 s after the first picture."""
    ffmpeg(
        "-f", "lavfi", "-i", f"testsrc2=s={SIZE}:r={FPS}:d=3",
        "-itsoffset", "0.5", "-f", "lavfi", "-i", _tone(2.5),
        "-map", "0:v", "-map", "1:a", *X264, *AAC, str(out),
    )  # fmt: skip
