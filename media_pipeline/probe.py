"""Parse ``ffprobe -print_format json -show_format -show_streams`` into typed facts.

Protocol: Output requirements ("one playable video stream, one playable audio stream, the
required aspect ratio"). What counts, and why:

- Cover art is not a video stream. Containers carry album art or thumbnails as a video stream
  with ``disposition.attached_pic = 1`` (a single still); it is listed separately and never
  counted as the film's picture.
- The display aspect ratio is what a viewer sees: stored width x sample aspect ratio (SAR)
  against stored height, with width and height swapped when the display matrix (side data
  ``rotation``, or the older ``rotate`` tag) turns the picture by 90 or 270 degrees.
- Variable frame rate is a note, not a defect: ``r_frame_rate`` (the base rate that represents
  every timestamp) differing from ``avg_frame_rate`` is the signal ffprobe gives without
  decoding; the decode pass confirms it from the decoded frame count.
- Some containers store no duration (raw elementary streams, live-recorded WebM/Matroska).
  ``duration_s`` is then ``None`` and the analysis takes the decoded duration instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from media_pipeline.ffcommand import GiB, ResourceLimits, ffprobe_command, path_arg, run_tool

# ffprobe refuses files with more streams than this; a file beyond it is reported as having
# too many streams from ffprobe's own message.
PROBE_MAX_STREAMS = 5000
PROBE_TIME_LIMIT_S = 60.0
COUNT_PACKETS_TIME_LIMIT_S = 1800.0


class ProbeOutputInvalid(ValueError):
    """ffprobe's output was not the JSON document we asked for."""


class ProbeFailed(RuntimeError):
    """ffprobe could not read the file (``reason``: unreadable, too_many_streams, timeout)."""

    def __init__(self, message: str, *, reason: str = "unreadable") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class VideoStream:
    index: int
    codec_name: str
    width: int
    height: int
    sample_aspect_ratio: Fraction
    rotation: int
    frame_rate: Fraction | None
    average_frame_rate: Fraction | None
    start_time_s: float | None
    duration_s: float | None
    frame_count: int | None
    packet_count: int | None = None

    @property
    def rotated_quarter_turn(self) -> bool:
        return self.rotation % 180 == 90

    @property
    def display_size(self) -> tuple[float, float]:
        """Width and height as displayed: SAR applied to the width, then rotation."""
        width = self.width * float(self.sample_aspect_ratio)
        height = float(self.height)
        return (height, width) if self.rotated_quarter_turn else (width, height)

    @property
    def display_aspect_ratio(self) -> Fraction:
        """Exact display aspect ratio (width / height)."""
        width = Fraction(self.width) * self.sample_aspect_ratio
        height = Fraction(self.height)
        if self.rotated_quarter_turn:
            width, height = height, width
        return width / height

    @property
    def nominal_fps(self) -> float | None:
        """The rate frames are meant to be shown at: average rate, else the base rate."""
        for rate in (self.average_frame_rate, self.frame_rate):
            if rate is not None and 0 < rate <= 1000:
                return float(rate)
        return None

    @property
    def variable_frame_rate(self) -> bool:
        if self.frame_rate is None or self.average_frame_rate is None:
            return False
        return abs(float(self.frame_rate) - float(self.average_frame_rate)) > 0.01 * float(
            self.frame_rate
        )


@dataclass(frozen=True)
class AudioStream:
    index: int
    codec_name: str
    sample_rate: int | None
    channels: int | None
    start_time_s: float | None
    duration_s: float | None
    packet_count: int | None = None


@dataclass(frozen=True)
class ProbeReport:
    """The facts of one file that validation and the proxy recipe need."""

    format_name: str
    duration_s: float | None
    start_time_s: float | None
    stream_count: int
    video_streams: tuple[VideoStream, ...]
    audio_streams: tuple[AudioStream, ...]
    attached_pictures: int
    other_streams: int
    format_tags: dict[str, str] = field(default_factory=dict)
    stream_tags: tuple[dict[str, str], ...] = ()

    @property
    def video(self) -> VideoStream | None:
        return self.video_streams[0] if self.video_streams else None

    @property
    def audio(self) -> AudioStream | None:
        return self.audio_streams[0] if self.audio_streams else None

    @property
    def duration_stored(self) -> bool:
        return self.duration_s is not None


def parse_ratio(text: Any) -> Fraction | None:
    """``"16:9"`` or ``"30000/1001"`` -> Fraction; ``None`` for absent, zero or malformed."""
    if not isinstance(text, str):
        return None
    for sep in (":", "/"):
        if sep in text:
            num, _, den = text.partition(sep)
            try:
                n, d = int(num), int(den)
            except ValueError:
                return None
            if n <= 0 or d <= 0:
                return None
            return Fraction(n, d)
    return None


def _float(value: Any) -> float | None:
    if value in (None, "", "N/A"):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def _int(value: Any) -> int | None:
    number = _float(value)
    return int(number) if number is not None else None


def _rotation(stream: dict[str, Any]) -> int:
    """Rotation in degrees, normalised to 0, 90, 180 or 270 (display matrix, then tag)."""
    for side in stream.get("side_data_list") or []:
        if "rotation" in side:
            value = _float(side.get("rotation"))
            if value is not None:
                return int(round(value)) % 360
    tag = _float((stream.get("tags") or {}).get("rotate"))
    return int(round(tag)) % 360 if tag is not None else 0


def parse_probe(document: str | bytes | dict[str, Any]) -> ProbeReport:
    """Build a :class:`ProbeReport` from ffprobe's JSON (text or already decoded)."""
    if isinstance(document, str | bytes):
        try:
            document = json.loads(document)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProbeOutputInvalid(f"ffprobe output is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ProbeOutputInvalid("ffprobe output is not a JSON object")
    fmt = document.get("format") or {}
    streams = document.get("streams") or []
    videos: list[VideoStream] = []
    audios: list[AudioStream] = []
    pictures = 0
    others = 0
    for stream in streams:
        kind = stream.get("codec_type")
        disposition = stream.get("disposition") or {}
        if kind == "video" and disposition.get("attached_pic") == 1:
            pictures += 1
        elif kind == "video":
            videos.append(
                VideoStream(
                    index=int(stream.get("index", len(videos))),
                    codec_name=str(stream.get("codec_name", "")),
                    width=_int(stream.get("width")) or 0,
                    height=_int(stream.get("height")) or 0,
                    sample_aspect_ratio=parse_ratio(stream.get("sample_aspect_ratio"))
                    or Fraction(1),
                    rotation=_rotation(stream),
                    frame_rate=parse_ratio(stream.get("r_frame_rate")),
                    average_frame_rate=parse_ratio(stream.get("avg_frame_rate")),
                    start_time_s=_float(stream.get("start_time")),
                    duration_s=_float(stream.get("duration")),
                    frame_count=_int(stream.get("nb_frames")),
                    packet_count=_int(stream.get("nb_read_packets")),
                )
            )
        elif kind == "audio":
            audios.append(
                AudioStream(
                    index=int(stream.get("index", len(audios))),
                    codec_name=str(stream.get("codec_name", "")),
                    sample_rate=_int(stream.get("sample_rate")),
                    channels=_int(stream.get("channels")),
                    start_time_s=_float(stream.get("start_time")),
                    duration_s=_float(stream.get("duration")),
                    packet_count=_int(stream.get("nb_read_packets")),
                )
            )
        else:
            others += 1
    return ProbeReport(
        format_name=str(fmt.get("format_name", "")),
        duration_s=_float(fmt.get("duration")),
        start_time_s=_float(fmt.get("start_time")),
        stream_count=len(streams),
        video_streams=tuple(videos),
        audio_streams=tuple(audios),
        attached_pictures=pictures,
        other_streams=others,
        format_tags={str(k): str(v) for k, v in (fmt.get("tags") or {}).items()},
        stream_tags=tuple(
            {str(k): str(v) for k, v in (stream.get("tags") or {}).items()} for stream in streams
        ),
    )


def aspect_ratio_text(ratio: Fraction, *, max_denominator: int = 100) -> str:
    """``Fraction(16, 9)`` -> ``"16:9"``; near ratios are reduced to small terms."""
    approx = ratio.limit_denominator(max_denominator)
    return f"{approx.numerator}:{approx.denominator}"


def probe_file(
    path: str,
    *,
    ffprobe: str = "ffprobe",
    count_packets: bool = False,
    timeout_s: float | None = None,
) -> ProbeReport:
    """Run ffprobe on a local file with our bounds and parse the result.

    ``count_packets`` demuxes the whole file to count packets per stream (the frame count of
    the video for the codecs we accept); it reads but never decodes.
    """
    if timeout_s is None:
        # Counting packets reads the whole file: allow for a 2-hour film on slow storage.
        timeout_s = COUNT_PACKETS_TIME_LIMIT_S if count_packets else PROBE_TIME_LIMIT_S
    extra = ["-max_streams", str(PROBE_MAX_STREAMS)]
    if count_packets:
        extra.append("-count_packets")
    command = ffprobe_command(
        binary=ffprobe,
        path=path_arg(path),
        timeout_s=timeout_s,
        limits=ResourceLimits(
            cpu_s=int(timeout_s) + 60, address_space_bytes=2 * GiB, file_size_bytes=0
        ),
        extra=extra,
    )
    result = run_tool(command, max_captured_stdout=32 * 1024 * 1024)
    if result.timed_out:
        raise ProbeFailed(f"ffprobe did not finish within {timeout_s:.0f} s", reason="timeout")
    message = " ".join(line.strip() for line in result.stderr_tail[-5:])
    if not result.ok:
        reason = "too_many_streams" if "max_streams" in message else "unreadable"
        raise ProbeFailed(message or f"ffprobe exited with {result.returncode}", reason=reason)
    return parse_probe(result.stdout)
