"""Output requirements, problem codes and the checks that need only the probe.

Protocol: Output requirements and Duration classes. A conforming output has one playable
video stream, one playable audio stream, the required aspect ratio and an effective duration
inside the tolerance (the smaller of 5 % or 60 s of the target). Each failure is a problem
with a stable ``code`` (stored, compared, mapped to retry reasons by the runs code) and a
human ``message`` (shown to operators). Problems that stop the analysis (``blocking``) make
the file "not analysed": ``inspect_media`` exits 1 for them.

Hostile-input bounds (``max_pixels``, ``max_streams``, ``max_duration_s``) come from the
frozen detection thresholds: a file beyond them is rejected before it is decoded, so an
absurd header cannot make a worker allocate or decode without end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from media_pipeline.probe import ProbeReport, aspect_ratio_text, parse_ratio

# code -> (blocking, message template). Templates are filled with keyword details.
PROBLEM_CODES: dict[str, tuple[bool, str]] = {
    "file_empty": (True, "The file is empty (0 bytes)."),
    "unreadable": (True, "ffprobe could not read the file as media: {detail}"),
    "not_playable": (True, "The file does not decode to the end: {detail}"),
    "analysis_timeout": (True, "The analysis did not finish within {limit_s:.0f} s."),
    "too_many_streams": (True, "The file has {count} streams; at most {limit} are accepted."),
    "resolution_too_large": (
        True,
        "The video is {width}x{height} ({pixels} pixels); at most {limit} pixels are accepted.",
    ),
    "duration_too_long": (
        True,
        "The file declares {duration_s:.1f} s; at most {limit_s:.0f} s are accepted.",
    ),
    "original_changed": (True, "The original's SHA-256 changed during processing."),
    "no_video_stream": (False, "There is no video stream (cover art does not count)."),
    "no_audio_stream": (False, "There is no audio stream."),
    "multiple_video_streams": (False, "There are {count} video streams; exactly one is required."),
    "multiple_audio_streams": (False, "There are {count} audio streams; exactly one is required."),
    "aspect_ratio_mismatch": (
        False,
        "The display aspect ratio is {actual} ({actual_value:.4f}); {required} is required.",
    ),
    "duration_nonconforming": (
        False,
        "The effective duration is {effective_s:.2f} s; the target is {target_s:.0f} s "
        "with a tolerance of {tolerance_s:.2f} s.",
    ),
}

# Facts worth telling an operator that do not make a file nonconforming.
NOTE_CODES: dict[str, str] = {
    "variable_frame_rate": "The video has a variable frame rate; times come from timestamps.",
    "duration_not_stored": "The container stores no duration; the decoded duration is used.",
    "cover_art_ignored": "An attached picture (cover art) was present and not counted as video.",
}


@dataclass(frozen=True)
class Problem:
    code: str
    message: str
    blocking: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def problem(code: str, **details: Any) -> Problem:
    """A :class:`Problem` for a known ``code`` with its message filled in."""
    blocking, template = PROBLEM_CODES[code]
    return Problem(code=code, message=template.format(**details), blocking=blocking)


@dataclass(frozen=True)
class MediaRequirements:
    """What a conforming output must be, filled from a protocol definition (or a test).

    ``not_counted`` holds the protocol's names (``black_frames``, ``excessive_credits``...)
    from ``not_counted_in_effective_duration``.
    """

    target_s: float
    tolerance_s: float
    aspect_ratio: str | None
    video_streams: int = 1
    audio_streams: int = 1
    not_counted: tuple[str, ...] = ()

    @classmethod
    def from_protocol(
        cls, protocol: Any, duration_class: str, aspect_ratio: str | None = None
    ) -> MediaRequirements:
        """Requirements for ``duration_class`` under ``protocol`` (a ``rounds.protocols.Protocol``).

        The aspect ratio comes from the round's input package when the definition says
        ``"required"`` (AI Duel); a definition that fixes one (Tovaki ``9:16``) wins, and a
        caller asking for another is an error rather than a silent override.
        """
        output = protocol.section("output_requirements") or {}
        fixed = output.get("aspect_ratio")
        if fixed not in (None, "required"):
            if aspect_ratio is not None and parse_ratio(aspect_ratio) != parse_ratio(fixed):
                raise ValueError(f"{protocol.key} fixes the aspect ratio at {fixed}")
            aspect_ratio = fixed
        elif fixed == "required" and aspect_ratio is None:
            raise ValueError(f"{protocol.key} requires an aspect ratio from the input package")
        return cls(
            target_s=protocol.target_s(duration_class),
            tolerance_s=protocol.tolerance_s(duration_class),
            aspect_ratio=aspect_ratio,
            video_streams=int(output.get("video_streams", 1)),
            audio_streams=int(output.get("audio_streams", 1)),
            not_counted=tuple(protocol.section("not_counted_in_effective_duration") or ()),
        )

    def duration_conforms(self, seconds: float) -> bool:
        return abs(seconds - self.target_s) <= self.tolerance_s


def hostile_bound_problems(
    probe: ProbeReport, thresholds: Mapping[str, Any], *, file_duration_s: float | None
) -> list[Problem]:
    """Problems that stop the analysis before any decoding (issue 4, resource bounds)."""
    problems: list[Problem] = []
    limit_streams = int(thresholds["max_streams"])
    if probe.stream_count > limit_streams:
        problems.append(problem("too_many_streams", count=probe.stream_count, limit=limit_streams))
    limit_pixels = int(thresholds["max_pixels"])
    for video in probe.video_streams:
        pixels = video.width * video.height
        if pixels > limit_pixels:
            problems.append(
                problem(
                    "resolution_too_large",
                    width=video.width,
                    height=video.height,
                    pixels=pixels,
                    limit=limit_pixels,
                )
            )
            break
    limit_s = float(thresholds["max_duration_s"])
    if file_duration_s is not None and file_duration_s > limit_s:
        problems.append(problem("duration_too_long", duration_s=file_duration_s, limit_s=limit_s))
    return problems


def stream_problems(
    probe: ProbeReport, requirements: MediaRequirements, thresholds: Mapping[str, Any]
) -> list[Problem]:
    """Stream counts and display aspect ratio (Output requirements)."""
    problems: list[Problem] = []
    videos, audios = len(probe.video_streams), len(probe.audio_streams)
    if videos == 0:
        problems.append(problem("no_video_stream"))
    elif videos > requirements.video_streams:
        problems.append(problem("multiple_video_streams", count=videos))
    if audios == 0 and requirements.audio_streams > 0:
        problems.append(problem("no_audio_stream"))
    elif audios > requirements.audio_streams:
        problems.append(problem("multiple_audio_streams", count=audios))
    video = probe.video
    if video is not None and requirements.aspect_ratio is not None:
        required = parse_ratio(requirements.aspect_ratio)
        if required is None:
            raise ValueError(f"malformed aspect ratio {requirements.aspect_ratio!r}")
        actual = video.display_aspect_ratio
        if not aspect_ratio_matches(actual, required, float(thresholds["aspect_ratio_tolerance"])):
            problems.append(
                problem(
                    "aspect_ratio_mismatch",
                    actual=aspect_ratio_text(actual),
                    actual_value=float(actual),
                    required=requirements.aspect_ratio,
                )
            )
    return problems


def aspect_ratio_matches(actual: Fraction, required: Fraction, tolerance: float) -> bool:
    """Relative difference within ``tolerance`` (1920x1080 and 1280x720 are both 16:9;
    854x480 is 16:9 within rounding)."""
    return abs(float(actual) - float(required)) <= tolerance * float(required)


def duration_problem(effective_s: float, requirements: MediaRequirements) -> Problem | None:
    """``duration_nonconforming`` when the effective duration is outside the tolerance."""
    if requirements.duration_conforms(effective_s):
        return None
    return problem(
        "duration_nonconforming",
        effective_s=effective_s,
        target_s=requirements.target_s,
        tolerance_s=requirements.tolerance_s,
    )
