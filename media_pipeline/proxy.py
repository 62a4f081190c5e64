"""The neutral review proxy: recipe -> ffmpeg arguments, and verification against the original.

Protocol: Output requirements ("Do not improve an output during normalization. The review
proxy must preserve the complete duration, the frame order, the original frame rate, the
original audio timing, the complete image area. Do not crop, interpolate, upscale, or remix
the output. Fit each result inside the same review canvas. Use neutral padding when
necessary. Apply the same watermark to every proxy."). The recipe is the definition's
``proxy_recipe`` (one per round); Tovaki's fixes 720x1280 at 24 fps.

How each rule is kept:

- Whole image, never upscaled: the picture is scaled to square pixels (SAR applied by
  shrinking the longer stored axis, so no stored dimension grows) and, only if it is larger
  than the canvas, down to fit inside it; then padded with ``pad_color`` to the canvas,
  centred. Rotation is applied (ffmpeg's autorotate) so the proxy shows what a player shows.
  Sizes are rounded down to even numbers (4:2:0 needs them): at most one pixel row/column.
- Frame rate: ``original`` passes every frame through with its own timestamp
  (``-fps_mode passthrough``, encoder time base from the input), so frame count and order
  are kept, also for variable frame rate. A number (Tovaki: 24) uses the ``fps`` filter,
  which drops or repeats whole frames and never interpolates.
- Audio: first audio stream, resampled to the recipe's rate and channel count, timestamps
  kept (an offset start stays offset).
- Nothing that could identify a system survives: ``-map_metadata -1``, ``-map_chapters -1``,
  no subtitle/data streams, bit-exact muxing (no library version, no creation time), SEI NAL
  units removed from the H.264 stream (x264's version banner, any caption or user data
  passed through from the source). What remains is identical on every proxy (the mp4
  brand, ``VideoHandler``/``SoundHandler``, ``Lavc libx264``); :func:`verify_proxy` checks
  that exactly that remains.
- Reproducible: fixed encoder settings and thread count (``encoder_threads``) and bit-exact
  flags, so the same original, recipe, ffmpeg build and font give a byte-identical proxy.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from duel.canonical import canonical_sha256
from media_pipeline.checksums import sha256_file
from media_pipeline.ffcommand import (
    FfmpegInput,
    FfmpegOutput,
    Filter,
    FilterChain,
    GiB,
    MiB,
    ResourceLimits,
    ToolCommand,
    error_lines,
    ffmpeg_command,
    filter_graph,
    path_arg,
    run_tool,
)
from media_pipeline.probe import ProbeReport, VideoStream, probe_file

FONT_DIRECTORIES: tuple[str, ...] = (
    "/usr/share/fonts/truetype/dejavu",
    "/usr/share/fonts/TTF",
    "/usr/share/fonts/dejavu",
)
# What may remain in a proxy's container after stripping: constant on every proxy.
ALLOWED_FORMAT_TAGS = {"major_brand", "minor_version", "compatible_brands"}
ALLOWED_STREAM_TAGS = {
    "language": {"und"},
    "handler_name": {"VideoHandler", "SoundHandler"},
    "vendor_id": {"[0][0][0][0]"},
    "encoder": {"Lavc libx264"},
}
ENCODE_BASE_TIME_S = 600.0
ENCODE_TIME_PER_MEDIA_S = 10.0


class RecipeInvalid(ValueError):
    """The proxy recipe asks for something this pipeline does not do."""


class WatermarkFontMissing(FileNotFoundError):
    """The watermark font named by the recipe is not installed."""


class ProxyEncodeFailed(RuntimeError):
    """ffmpeg failed or timed out while encoding the proxy."""


@dataclass(frozen=True)
class ProxyRecipe:
    """One round's locked proxy recipe (the definition's ``proxy_recipe``)."""

    canvas: tuple[int, int]
    video_codec: str
    pix_fmt: str
    crf: int
    preset: str
    audio_codec: str
    audio_sample_rate: int
    audio_channels: int
    audio_bitrate: str
    frame_rate: str | int | float
    scale: str
    pad_color: str
    watermark: str | None
    encoder_threads: int
    scale_flags: str
    watermark_style: dict[str, Any] | None = None

    @classmethod
    def from_definition(
        cls, recipe: Mapping[str, Any], *, canvas: tuple[int, int] | None = None
    ) -> ProxyRecipe:
        """Build from ``Protocol.proxy_recipe``; ``canvas`` overrides the canvas (operators)."""
        values = dict(recipe)
        if canvas is not None:
            values["canvas"] = list(canvas)
        try:
            width, height = (int(v) for v in values.pop("canvas"))
            made = cls(canvas=(width, height), **values)
        except (KeyError, TypeError, ValueError) as exc:
            raise RecipeInvalid(f"proxy recipe is incomplete or malformed: {exc}") from exc
        made.check()
        return made

    def check(self) -> None:
        width, height = self.canvas
        if width <= 0 or height <= 0 or width % 2 or height % 2:
            raise RecipeInvalid(f"canvas {width}x{height} must be positive and even")
        if self.scale != "down_only":
            raise RecipeInvalid(f"scale policy {self.scale!r} is not supported (down_only)")
        if self.frame_rate != "original" and not (
            isinstance(self.frame_rate, int | float) and 0 < float(self.frame_rate) <= 240
        ):
            raise RecipeInvalid(f"frame_rate {self.frame_rate!r} must be 'original' or a number")
        if self.watermark and not self.watermark_style:
            raise RecipeInvalid("a watermark needs a watermark_style (font, size, position)")
        if int(self.encoder_threads) < 1:
            raise RecipeInvalid("encoder_threads must be a fixed positive number")

    @property
    def keeps_frame_rate(self) -> bool:
        return self.frame_rate == "original"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["canvas"] = list(self.canvas)
        return data

    @property
    def sha256(self) -> str:
        return canonical_sha256(self.as_dict())


def watermark_font_path(recipe: ProxyRecipe) -> Path:
    """The installed font file the watermark uses; fails clearly when it is missing."""
    style = recipe.watermark_style or {}
    name = str(style.get("font", ""))
    if not name or "/" in name:
        raise RecipeInvalid(f"watermark font must be a file name, got {name!r}")
    for directory in FONT_DIRECTORIES:
        candidate = Path(directory) / name
        if candidate.is_file():
            return candidate
    raise WatermarkFontMissing(
        f"watermark font {name} not found in {', '.join(FONT_DIRECTORIES)}; install fonts-dejavu"
    )


def _even_floor(value: float) -> int:
    return max(2, int(value) // 2 * 2)


def fitted_size(video: VideoStream, canvas: tuple[int, int]) -> tuple[int, int]:
    """Square-pixel picture size inside ``canvas``, never larger than the stored pixels.

    SAR > 1 (wide pixels) shrinks the height instead of stretching the width, SAR < 1 shrinks
    the width: no stored dimension ever grows. Rotation by a quarter turn swaps the axes.
    """
    sar = video.sample_aspect_ratio or Fraction(1)
    width, height = Fraction(video.width), Fraction(video.height)
    if sar > 1:
        height = height / sar
    elif sar < 1:
        width = width * sar
    if video.rotated_quarter_turn:
        width, height = height, width
    scale = min(Fraction(1), Fraction(canvas[0]) / width, Fraction(canvas[1]) / height)
    return _even_floor(float(width * scale)), _even_floor(float(height * scale))


def encode_time_limit_s(duration_s: float) -> float:
    return ENCODE_BASE_TIME_S + ENCODE_TIME_PER_MEDIA_S * max(0.0, duration_s)


def encode_limits(duration_s: float, time_limit_s: float) -> ResourceLimits:
    # The proxy can never need more than 50 Mbit/s at these settings; a runaway is cut off.
    file_bound = int(100 * MiB + duration_s * 50_000_000 / 8)
    cpus = os.cpu_count() or 1
    return ResourceLimits(
        cpu_s=int(time_limit_s * cpus) + 60,
        address_space_bytes=8 * GiB,
        file_size_bytes=file_bound,
    )


def proxy_command(
    *,
    source: str,
    target: str,
    probe: ProbeReport,
    recipe: ProxyRecipe,
    ffmpeg: str = "ffmpeg",
    time_limit_s: float | None = None,
    start_s: float | None = None,
    length_s: float | None = None,
) -> ToolCommand:
    """ffmpeg arguments turning ``source`` into a proxy at ``target`` by ``recipe``.

    ``start_s``/``length_s`` cut an excerpt (segment clips) with an accurate seek: the same
    recipe applies, so a clip of a proxy is a proxy of the same window.
    """
    video = probe.video
    if video is None:
        raise RecipeInvalid("a proxy needs a video stream")
    width, height = fitted_size(video, recipe.canvas)
    canvas_w, canvas_h = recipe.canvas
    filters = [
        Filter.of("scale", w=width, h=height, flags=recipe.scale_flags),
        Filter.of("setsar", sar="1"),
    ]
    if not recipe.keeps_frame_rate:
        filters.append(Filter.of("fps", fps=recipe.frame_rate))
    filters += [
        Filter.of(
            "pad",
            w=canvas_w,
            h=canvas_h,
            x=(canvas_w - width) // 4 * 2,
            y=(canvas_h - height) // 4 * 2,
            color=recipe.pad_color,
        ),
        Filter.of("format", pix_fmts=recipe.pix_fmt),
    ]
    if recipe.watermark:
        filters.append(_watermark_filter(recipe))
    chains = [FilterChain((f"0:{video.index}",), tuple(filters), ("v",))]
    maps = ["[v]"]
    audio_options: list[tuple[str, ...]] = []
    if probe.audio is not None:
        maps.append(f"0:{probe.audio.index}")
        audio_options = [
            ("-c:a", recipe.audio_codec),
            ("-ar", str(recipe.audio_sample_rate)),
            ("-ac", str(recipe.audio_channels)),
            ("-b:a", recipe.audio_bitrate),
        ]
    video_options: list[tuple[str, ...]] = [
        ("-c:v", recipe.video_codec),
        ("-preset", recipe.preset),
        ("-crf", str(recipe.crf)),
        ("-pix_fmt", recipe.pix_fmt),
        ("-threads:v", str(int(recipe.encoder_threads))),
        ("-bsf:v", "filter_units=remove_types=6"),
    ]
    if recipe.keeps_frame_rate:
        video_options += [("-fps_mode:v", "passthrough"), ("-enc_time_base:v", "-1")]
    else:
        video_options += [("-fps_mode:v", "cfr")]
    stripping = [
        ("-map_metadata", "-1"),
        ("-map_chapters", "-1"),
        ("-sn",),
        ("-dn",),
        ("-fflags", "+bitexact"),
        ("-flags:v", "+bitexact"),
        ("-flags:a", "+bitexact"),
        ("-movflags", "+faststart"),
        ("-f", "mp4"),
    ]
    input_options: list[tuple[str, ...]] = []
    if start_s is not None:
        input_options.append(("-ss", f"{start_s:.6f}"))
    if length_s is not None:
        input_options.append(("-t", f"{length_s:.6f}"))
    duration = length_s or probe.duration_s or 0.0
    limit = time_limit_s or encode_time_limit_s(duration)
    return ffmpeg_command(
        binary=ffmpeg,
        inputs=[FfmpegInput(path_arg(source), options=tuple(input_options))],
        outputs=[
            FfmpegOutput(
                path_arg(target),
                maps=tuple(maps),
                options=tuple(video_options + audio_options + stripping),
            )
        ],
        graph=filter_graph(chains),
        exit_on_error=True,
        progress=True,
        overwrite=True,
        timeout_s=limit,
        limits=encode_limits(duration, limit),
    )


def _watermark_filter(recipe: ProxyRecipe) -> Filter:
    style = recipe.watermark_style or {}
    canvas_h = recipe.canvas[1]
    size = max(8, round(canvas_h * float(style["size_fraction"])))
    margin = round(canvas_h * float(style["margin_fraction"]))
    positions = {
        "bottom_right": (f"w-tw-{margin}", f"h-th-{margin}"),
        "bottom_left": (str(margin), f"h-th-{margin}"),
        "top_right": (f"w-tw-{margin}", str(margin)),
        "top_left": (str(margin), str(margin)),
    }
    try:
        x, y = positions[str(style["position"])]
    except KeyError:
        raise RecipeInvalid(f"watermark position {style.get('position')!r} unknown") from None
    return Filter.of(
        "drawtext",
        fontfile=str(watermark_font_path(recipe)),
        text=str(recipe.watermark),
        expansion="none",
        fontsize=size,
        fontcolor=str(style["color"]),
        box=1,
        boxcolor=str(style["box_color"]),
        boxborderw=max(2, size // 4),
        x=x,
        y=y,
    )


# ---------------------------------------------------------------------------------------------
# Encoding and verification


@dataclass
class ProxyVerification:
    """Proxy against original (issue 4 "Review proxy"): every check with its figures."""

    ok: bool
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    sha256: str = ""
    size_bytes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": self.checks,
            "sha256": self.sha256,
            "size_bytes": self.size_bytes,
        }


def encode_proxy(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    recipe: ProxyRecipe,
    probe: ProbeReport | None = None,
    ffmpeg: str = "ffmpeg",
    ffprobe: str = "ffprobe",
    on_progress: Callable[[float], None] | None = None,
    start_s: float | None = None,
    length_s: float | None = None,
) -> ProbeReport:
    """Encode ``source`` to ``target`` (a local path the caller later publishes).

    Returns the source probe (counted packets), which :func:`verify_proxy` needs.
    Raises :class:`ProxyEncodeFailed` when ffmpeg fails or runs out of time.
    """
    if probe is None:
        probe = probe_file(str(source), ffprobe=ffprobe, count_packets=True)
    total = length_s or probe.duration_s or 0.0

    def _progress(block: dict[str, str]) -> None:
        value = block.get("out_time_us", "")
        if on_progress is not None and total > 0 and value.isdigit():
            on_progress(min(1.0, int(value) / 1e6 / total))

    command = proxy_command(
        source=str(source),
        target=str(target),
        probe=probe,
        recipe=recipe,
        ffmpeg=ffmpeg,
        start_s=start_s,
        length_s=length_s,
    )
    result = run_tool(command, keep_stderr=lambda line: "[error]" in line or "[fatal]" in line)
    if not result.ok or error_lines(result):
        reason = "timed out" if result.timed_out else (error_lines(result) or ["ffmpeg failed"])[0]
        raise ProxyEncodeFailed(f"proxy encode failed: {reason}")
    return probe


def verify_proxy(
    original: ProbeReport,
    proxy_path: str | os.PathLike[str],
    *,
    recipe: ProxyRecipe,
    ffprobe: str = "ffprobe",
    window: tuple[float, float] | None = None,
) -> ProxyVerification:
    """Check a proxy against its original.

    - duration within one frame (of the original rate, or the recipe's fixed rate);
    - the same number of video frames when the frame rate is kept (packets counted in both
      files), else the number the fixed rate implies over the span, within a frame at each
      end;
    - audio duration and audio start offset (relative to the video start) within one frame;
    - canvas, codecs, and only the constant container tags left.
    ``window`` (start, end) checks a segment clip against that window of the original.
    """
    proxy = probe_file(str(proxy_path), ffprobe=ffprobe, count_packets=True)
    checks: dict[str, dict[str, Any]] = {}
    ov, pv = original.video, proxy.video
    fps = float(recipe.frame_rate) if not recipe.keeps_frame_rate else None
    if fps is None and ov is not None:
        fps = ov.nominal_fps
    frame_s = 1.0 / fps if fps else 0.05
    tolerance = frame_s + 1e-3

    expected_duration = (window[1] - window[0]) if window else original.duration_s
    checks["duration"] = _within(expected_duration, proxy.duration_s, tolerance)
    if pv is None or ov is None:
        checks["video_stream"] = {"ok": False, "proxy_has_video": pv is not None}
    else:
        if recipe.keeps_frame_rate and window is None:
            checks["frame_count"] = {
                "original": ov.packet_count,
                "proxy": pv.packet_count,
                "ok": ov.packet_count is not None and ov.packet_count == pv.packet_count,
            }
        else:
            # A fixed rate (or a window): as many frames as the rate gives over the span,
            # give or take one at each end.
            span = expected_duration if window else (ov.duration_s or expected_duration)
            expected = None if span is None else span / frame_s
            checks["frame_count"] = _within(expected, pv.packet_count, 2.0)
        checks["canvas"] = {
            "expected": list(recipe.canvas),
            "proxy": [pv.width, pv.height],
            "sample_aspect_ratio": str(pv.sample_aspect_ratio),
            "rotation": pv.rotation,
            "ok": (pv.width, pv.height) == tuple(recipe.canvas)
            and pv.sample_aspect_ratio == 1
            and pv.rotation == 0,
        }
        checks["video_codec"] = {"proxy": pv.codec_name, "ok": pv.codec_name == "h264"}
    oa, pa = original.audio, proxy.audio
    if oa is None:
        checks["audio"] = {"ok": pa is None, "original_has_audio": False}
    elif pa is None:
        checks["audio"] = {"ok": False, "original_has_audio": True, "proxy_has_audio": False}
    else:
        original_audio = _audio_span(original, window)
        proxy_audio = _audio_span(proxy, None)
        checks["audio_duration"] = _within(original_audio[1], proxy_audio[1], tolerance)
        checks["audio_start_offset"] = _within(original_audio[0], proxy_audio[0], tolerance)
        checks["audio_format"] = {
            "sample_rate": pa.sample_rate,
            "channels": pa.channels,
            "codec": pa.codec_name,
            "ok": pa.sample_rate == recipe.audio_sample_rate
            and pa.channels == recipe.audio_channels
            and pa.codec_name == "aac",
        }
    checks["metadata_stripped"] = _metadata_check(proxy)
    ok = all(check.get("ok") for check in checks.values())
    return ProxyVerification(
        ok=ok,
        checks=checks,
        sha256=sha256_file(proxy_path),
        size_bytes=Path(proxy_path).stat().st_size,
    )


def _within(expected: float | None, actual: float | int | None, tolerance: float) -> dict:
    ok = expected is not None and actual is not None and abs(actual - expected) <= tolerance
    return {
        "expected": None if expected is None else round(float(expected), 6),
        "actual": None if actual is None else round(float(actual), 6),
        "tolerance": round(tolerance, 6),
        "ok": bool(ok),
    }


def _audio_span(probe: ProbeReport, window: tuple[float, float] | None) -> tuple[float, float]:
    """(audio start relative to the video start, audio duration) in seconds."""
    audio, video = probe.audio, probe.video
    assert audio is not None
    video_start = (video.start_time_s or 0.0) if video else 0.0
    start = (audio.start_time_s or 0.0) - video_start
    duration = audio.duration_s if audio.duration_s is not None else (probe.duration_s or 0.0)
    if window is not None:
        # A clip of a window: audio covers the part of the window the original audio covers.
        begin = max(window[0], start)
        end = min(window[1], start + duration)
        return max(0.0, begin - window[0]), max(0.0, end - begin)
    return start, duration


def _metadata_check(proxy: ProbeReport) -> dict[str, Any]:
    leftovers: list[str] = [
        f"format:{key}" for key in proxy.format_tags if key not in ALLOWED_FORMAT_TAGS
    ]
    for index, tags in enumerate(proxy.stream_tags):
        for key, value in tags.items():
            if value not in ALLOWED_STREAM_TAGS.get(key, set()):
                leftovers.append(f"stream{index}:{key}={value}")
    return {"ok": not leftovers, "unexpected_tags": leftovers}


def font_sha256(recipe: ProxyRecipe) -> str | None:
    """SHA-256 of the watermark font (part of what makes a proxy reproducible)."""
    if not recipe.watermark:
        return None
    digest = hashlib.sha256(watermark_font_path(recipe).read_bytes())
    return digest.hexdigest()
