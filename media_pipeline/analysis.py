"""Validate a file without modifying it and measure its effective duration.

Protocol: Output requirements, Duration classes; issue 4 "Validate (never modify)" and
"Effective duration". Steps, in order, on a local path:

1. SHA-256 of the file as it is (and its size: an empty file stops here).
2. ``ffprobe`` (JSON): streams, display aspect ratio, stored duration. Unreadable files and
   files beyond the hostile-input bounds stop here, before any decoding.
3. One full decode with ``-xerror`` that also runs every detector (see ``detection``): a file
   cut short still probes at its full length; only decoding it to the end shows the truth.
4. Effective duration, the duration verdict, and the SHA-256 again: a change is a failure.

Nothing here writes anywhere but to pipes; ffmpeg reads the file and never writes it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from duel.canonical import canonical_sha256
from media_pipeline.checksums import sha256_file
from media_pipeline.detection import (
    DETECTION_KINDS,
    Interval,
    SignatureStream,
    decode_pass_command,
    effective_duration,
    find_credits,
    find_repeated_filler,
    is_detector_line,
    not_counted_intervals,
    parse_detector_lines,
    signature_rate,
    validated_thresholds,
)
from media_pipeline.ffcommand import GiB, ResourceLimits, error_lines, run_tool
from media_pipeline.probe import (
    PROBE_MAX_STREAMS,
    PROBE_TIME_LIMIT_S,
    ProbeFailed,
    ProbeOutputInvalid,
    ProbeReport,
    aspect_ratio_text,
    probe_file,
)
from media_pipeline.validation import (
    MediaRequirements,
    Problem,
    duration_problem,
    hostile_bound_problems,
    problem,
    stream_problems,
)

# The decode must run at least at a third of real time on a worker, plus start-up slack.
DECODE_BASE_TIME_S = 300.0
DECODE_TIME_PER_MEDIA_S = 3.0

# Log contexts of the decode pass's own outputs: their complaints are not the file's.
OWN_OUTPUT_LOG_PREFIXES = ("[null @", "[rawvideo @")

ProgressFn = Callable[[float], None]


def decode_time_limit_s(duration_s: float) -> float:
    """Wall-clock limit of the decode pass for a file of ``duration_s``."""
    return DECODE_BASE_TIME_S + DECODE_TIME_PER_MEDIA_S * max(0.0, duration_s)


def decode_limits(time_limit_s: float) -> ResourceLimits:
    cpus = os.cpu_count() or 1
    return ResourceLimits(
        cpu_s=int(time_limit_s * cpus) + 60, address_space_bytes=6 * GiB, file_size_bytes=0
    )


@dataclass
class AnalysisReport:
    """Everything one analysis found. ``inspect_json`` is the operators' view (issue 4)."""

    analysed: bool = False
    playable: bool = False
    sha256: str | None = None
    size_bytes: int = 0
    format_name: str = ""
    video_streams: int = 0
    audio_streams: int = 0
    attached_pictures: int = 0
    duration_s: float | None = None
    decoded_duration_s: float | None = None
    effective_duration_s: float | None = None
    display_aspect_ratio: str | None = None
    width: int | None = None
    height: int | None = None
    fps: float | None = None
    conforming: bool = False
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    detections: dict[str, list[Interval]] = field(
        default_factory=lambda: {kind: [] for kind in DETECTION_KINDS}
    )
    not_counted: list[Interval] = field(default_factory=list)
    credits_style: str | None = None
    target_s: float | None = None
    tolerance_s: float | None = None
    required_aspect_ratio: str | None = None
    thresholds_sha256: str = ""
    elapsed_s: float = 0.0

    @property
    def problem_codes(self) -> list[str]:
        return [p.code for p in self.problems]

    def inspect_json(self) -> dict[str, Any]:
        """Exactly the keys ``inspect_media --json`` prints (issue 4)."""
        return {
            "playable": self.playable,
            "video_streams": self.video_streams,
            "audio_streams": self.audio_streams,
            "duration_s": _round(self.duration_s),
            "effective_duration_s": _round(self.effective_duration_s),
            "display_aspect_ratio": self.display_aspect_ratio,
            "width": self.width,
            "height": self.height,
            "fps": _round(self.fps),
            "conforming": self.conforming,
            "problems": self.problem_codes,
            "detections": {
                kind: [{"start_s": _round(a), "end_s": _round(b)} for a, b in spans]
                for kind, spans in self.detections.items()
            },
            "sha256": self.sha256,
        }

    def as_dict(self) -> dict[str, Any]:
        """The full report, JSON-safe (stored on ``MediaAnalysis.report``)."""
        full = self.inspect_json()
        full.update(
            analysed=self.analysed,
            size_bytes=self.size_bytes,
            format_name=self.format_name,
            attached_pictures=self.attached_pictures,
            decoded_duration_s=_round(self.decoded_duration_s),
            problems=[p.as_dict() for p in self.problems],
            notes=list(self.notes),
            not_counted=[{"start_s": _round(a), "end_s": _round(b)} for a, b in self.not_counted],
            credits_style=self.credits_style,
            target_s=self.target_s,
            tolerance_s=self.tolerance_s,
            required_aspect_ratio=self.required_aspect_ratio,
            thresholds_sha256=self.thresholds_sha256,
        )
        return full


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)


def analyse_media(
    path: str | os.PathLike[str],
    *,
    requirements: MediaRequirements,
    thresholds: Mapping[str, Any] | None = None,
    ffmpeg: str = "ffmpeg",
    ffprobe: str = "ffprobe",
    on_progress: ProgressFn | None = None,
    decode_time_limit: float | None = None,
) -> AnalysisReport:
    """Analyse the file at ``path`` against ``requirements`` with frozen ``thresholds``.

    Never raises for a bad file: every outcome is a report with problem codes. Raises only
    for our own misuse (bad thresholds) or a missing ffmpeg.
    """
    started = time.monotonic()
    frozen = validated_thresholds(thresholds)
    report = AnalysisReport(
        target_s=requirements.target_s,
        tolerance_s=requirements.tolerance_s,
        required_aspect_ratio=requirements.aspect_ratio,
        thresholds_sha256=canonical_sha256(frozen),
    )
    try:
        _analyse(
            Path(path),
            report,
            requirements,
            frozen,
            ffmpeg,
            ffprobe,
            on_progress,
            decode_time_limit,
        )
    finally:
        report.elapsed_s = time.monotonic() - started
    report.analysed = not any(p.blocking for p in report.problems)
    report.conforming = report.analysed and not report.problems
    return report


def _analyse(
    path: Path,
    report: AnalysisReport,
    requirements: MediaRequirements,
    thresholds: dict[str, Any],
    ffmpeg: str,
    ffprobe: str,
    on_progress: ProgressFn | None,
    decode_time_limit: float | None,
) -> None:
    try:
        report.size_bytes = path.stat().st_size
    except OSError as exc:
        report.problems.append(problem("unreadable", detail=f"cannot open the file ({exc})"))
        return
    report.sha256 = sha256_file(path)
    if report.size_bytes == 0:
        report.problems.append(problem("file_empty"))
        return

    probe = _probe(path, report, thresholds, ffprobe)
    if probe is None:
        return
    report.format_name = probe.format_name
    report.video_streams = len(probe.video_streams)
    report.audio_streams = len(probe.audio_streams)
    report.attached_pictures = probe.attached_pictures
    if probe.attached_pictures:
        report.notes.append("cover_art_ignored")
    video, audio = probe.video, probe.audio
    if video is not None:
        report.width, report.height = video.width, video.height
        report.display_aspect_ratio = aspect_ratio_text(video.display_aspect_ratio)
        report.fps = video.nominal_fps
    blocking = hostile_bound_problems(probe, thresholds, file_duration_s=probe.duration_s)
    if blocking:
        report.problems.extend(blocking)
        return
    report.problems.extend(stream_problems(probe, requirements, thresholds))
    if video is None and audio is None:
        report.problems.append(problem("unreadable", detail="no video or audio stream"))
        return

    expected = probe.duration_s or float(thresholds["max_duration_s"])
    time_limit = decode_time_limit or decode_time_limit_s(expected)
    fps = signature_rate(video.nominal_fps if video else None, thresholds)
    signatures = SignatureStream(fps=fps, thresholds=thresholds)
    last_progress: dict[str, str] = {}

    def _progress(block: dict[str, str]) -> None:
        last_progress.update(block)
        if on_progress is not None and probe.duration_s:
            seconds = _progress_seconds(block)
            if seconds is not None:
                on_progress(min(1.0, max(0.0, seconds / probe.duration_s)))

    command = decode_pass_command(
        ffmpeg=ffmpeg,
        path=str(path),
        video_index=video.index if video else None,
        audio_index=audio.index if audio else None,
        thresholds=thresholds,
        signature_fps=fps,
        timeout_s=time_limit,
        limits=decode_limits(time_limit),
    )
    result = run_tool(
        command,
        stdout_sink=signatures.feed if video else None,
        keep_stderr=is_detector_line,
        on_progress=_progress,
    )
    signatures.finish()
    if result.timed_out:
        report.problems.append(problem("analysis_timeout", limit_s=time_limit))
        return
    errors = error_lines(result, ignore_prefixes=OWN_OUTPUT_LOG_PREFIXES)
    if result.returncode != 0 or errors:
        detail = _first_error(errors) or f"ffmpeg exited with status {result.returncode}"
        report.problems.append(problem("not_playable", detail=detail))
        return

    video_end = signatures.end_s if video else None
    progress_end = _progress_seconds(last_progress)
    decoded_end = max(x for x in (video_end, progress_end, 0.0) if x is not None)
    report.decoded_duration_s = decoded_end
    if decoded_end >= float(thresholds["max_duration_s"]):
        report.problems.append(
            problem(
                "duration_too_long",
                duration_s=decoded_end,
                limit_s=float(thresholds["max_duration_s"]),
            )
        )
        return
    truncated = _truncation(probe, video_end, thresholds)
    if truncated:
        report.problems.append(problem("not_playable", detail=truncated))
        return
    report.playable = True
    duration = probe.duration_s if probe.duration_stored else decoded_end
    if not probe.duration_stored:
        report.notes.append("duration_not_stored")
    report.duration_s = duration
    if video is not None and _variable_rate(video, video_end, last_progress):
        report.notes.append("variable_frame_rate")

    audio_end = _audio_end(probe, duration)
    frame_s = 1.0 / video.nominal_fps if video and video.nominal_fps else None
    detections = parse_detector_lines(
        result.stderr_kept, video_end_s=video_end, audio_end_s=audio_end, frame_s=frame_s
    )
    detections["filler"] = find_repeated_filler(
        signatures.grids(), signatures.mean_level(), fps, thresholds
    )
    credits = find_credits(
        signatures.dark_fraction(),
        signatures.text_fraction(),
        fps,
        thresholds,
        row_profiles=signatures.recent_row_profiles(),
    )
    detections["credits"] = [credits.interval] if credits else []
    report.credits_style = credits.style if credits else None
    report.detections = {kind: detections.get(kind, []) for kind in report.detections}
    report.not_counted = not_counted_intervals(
        report.detections, requirements.not_counted, duration, thresholds
    )
    report.effective_duration_s = effective_duration(duration, report.not_counted)
    nonconforming = duration_problem(report.effective_duration_s, requirements)
    if nonconforming:
        report.problems.append(nonconforming)

    if sha256_file(path) != report.sha256:
        report.problems.append(problem("original_changed"))


def _probe(
    path: Path, report: AnalysisReport, thresholds: Mapping[str, Any], ffprobe: str
) -> ProbeReport | None:
    try:
        probe = probe_file(str(path), ffprobe=ffprobe)
    except ProbeFailed as exc:
        if exc.reason == "timeout":
            report.problems.append(problem("analysis_timeout", limit_s=PROBE_TIME_LIMIT_S))
        elif exc.reason == "too_many_streams":
            report.problems.append(
                problem(
                    "too_many_streams",
                    count=f"more than {PROBE_MAX_STREAMS}",
                    limit=int(thresholds["max_streams"]),
                )
            )
        else:
            report.problems.append(problem("unreadable", detail=str(exc)))
        return None
    except ProbeOutputInvalid as exc:
        report.problems.append(problem("unreadable", detail=str(exc)))
        return None
    if probe.stream_count == 0:
        report.problems.append(problem("unreadable", detail="the file has no streams"))
        return None
    return probe


def _progress_seconds(block: Mapping[str, str]) -> float | None:
    for key, scale in (("out_time_us", 1e-6), ("out_time_ms", 1e-6)):
        value = block.get(key, "")
        if value.lstrip("-").isdigit():
            return max(0.0, int(value) * scale)
    return None


def _first_error(lines: list[str]) -> str:
    if not lines:
        return ""
    text = lines[0]
    for tag in ("[error]", "[fatal]", "[panic]"):
        text = text.split(tag, 1)[-1] if tag in text else text
    return text.strip()[:300]


def _truncation(probe: ProbeReport, video_end: float | None, thresholds: Mapping[str, Any]) -> str:
    """A message when the decoded video stops well before where the file says it ends."""
    video = probe.video
    if video is None or video_end is None:
        return ""
    if video.duration_s is not None:
        declared = video.duration_s + max(0.0, video.start_time_s or 0.0)
    elif probe.duration_s is not None:
        declared = probe.duration_s
    else:
        return ""
    frame = 1.0 / video.nominal_fps if video.nominal_fps else 0.0
    allowed = max(float(thresholds["truncation_tolerance_s"]), 2 * frame)
    if video_end < declared - allowed:
        return f"the video decodes to {video_end:.2f} s of the {declared:.2f} s it declares"
    return ""


def _audio_end(probe: ProbeReport, duration: float) -> float:
    audio = probe.audio
    if audio is not None and audio.duration_s is not None:
        return min(duration, audio.duration_s + max(0.0, audio.start_time_s or 0.0))
    return duration


def _variable_rate(video: Any, video_end: float | None, progress: Mapping[str, str]) -> bool:
    """Variable frame rate: ffprobe's base and average rates differ, or the decoded frame
    count does not match the nominal rate over the decoded length."""
    if video.variable_frame_rate:
        return True
    frames = progress.get("frame", "")
    if not frames.isdigit() or not video_end or not video.nominal_fps:
        return False
    expected = video_end * video.nominal_fps
    return abs(int(frames) - expected) > max(2.0, 0.01 * expected) and math.isfinite(expected)
