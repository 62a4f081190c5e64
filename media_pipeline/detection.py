"""Detectors for effective duration, run inside the single decode pass.

Protocol: Duration classes ("Do not count excessive credits, black frames, frozen frames, or
repeated filler. Freeze the detection thresholds before the round."). The thresholds are one
flat dict, :data:`DEFAULT_DETECTION_THRESHOLDS`; a round freezes a copy (with its SHA-256 and
``ffmpeg -version``, see :func:`detection_controls`) and every analysis of that round uses it.

One decode pass (see :func:`decode_pass_command`) feeds every detector:

``[video] scale (down to analysis width) -> blackdetect -> freezedetect -> split``
    one branch goes to the null output (so ``-progress`` counts decoded frames), the other
    through ``fps`` and ``scale=64x48, gray`` to a raw pipe: one tiny grey picture per frame.
``[audio] silencedetect`` -> null output.

Methods and known limits
------------------------
black (ffmpeg ``blackdetect``)
    A frame is black when at least ``black_picture_ratio`` of its pixels have luma below
    ``black_pixel_threshold`` (fraction of the legal range); runs of at least ``black_min_s``
    are reported. Limits: measured after scaling to ``analysis_max_width`` (area average), so
    very thin bright detail (a 1-pixel line at 4K) is averaged away; a very dark but
    meaningful scene can count as black.
frozen (ffmpeg ``freezedetect``)
    Frames whose mean absolute difference from the first frame of the run stays below
    ``frozen_noise_db`` for at least ``frozen_min_s`` (-50 dB rather than ffmpeg's -60 dB:
    a lossy encoder refines a still picture over its first frames, and at -60 dB the freeze
    is found a few frames late). The duration is measured between frame timestamps, so a
    still must show for ``frozen_min_s`` plus one frame to count. Limits: a very slow fade or tiny
    motion in a still shot may stay under the noise floor and count as frozen; film grain
    or noise added to a still frame hides it.
silence (ffmpeg ``silencedetect``)
    All channels below ``silence_noise_db`` for at least ``silence_min_s``. Reported always;
    subtracted only if the protocol lists ``silence``.
filler (ours: repeated footage)
    Each frame becomes an 8x6 grid of mean grey levels (from the 64x48 picture). Every
    ``filler_probe_interval_s`` a lit, moving probe frame looks up its nearest earlier
    frames (at least ``filler_min_lag_s`` before it) in a k-d tree over a coarser 4x3 grid;
    the best match under ``filler_max_rms_diff`` (RMS on the 8x6 grid) seeds a run that is
    extended frame by frame in both directions along the same time offset while frames keep
    matching. Runs of at least ``filler_min_s`` whose footage moves (mean frame-to-frame
    change at least ``filler_min_motion``) and that match sharply (the match a
    ``filler_contrast_shift_s`` offset away is worse by at least ``filler_min_contrast`` grey
    levels, which rules out slowly changing footage such as a slow zoom matching itself a
    second later) are the later copy of a repeat and are reported. Static or dark footage is
    left to the black and frozen detectors. Limits: only forward repeats at the same speed
    (not reversed, re-timed, mirrored, re-cropped or colour-graded copies); the grid is
    coarse, so two different shots with the same layout and the same motion could match
    (the run length and the sharpness test make that unlikely); the neighbour search is
    bounded per probe, and memory grows with length by about 250 bytes a frame (grids, the
    k-d tree): about 9 MB for 20 minutes and 50 MB for 2 hours at 30 fps; everything else
    is bounded.
credits (ours: trailing text on dark)
    A frame looks like credits when at least ``credits_min_dark_fraction`` of its 64x48
    cells are dark (<= ``credits_dark_level``) and a sparse part is bright (between
    ``credits_min_text_fraction`` and ``credits_max_text_fraction`` of cells at or above
    ``credits_text_level``): light text on a dark ground. Near-black frames are neutral.
    The credits are the trailing stretch of such frames that reaches within
    ``credits_end_slack_s`` of the end, tolerating gaps up to ``credits_gap_s``, at least
    ``credits_min_s`` long and mostly text frames. Row profiles of the stretch tell whether
    the text scrolls (``scroll``) or changes in cards (``cards``). Only the part beyond the
    allowance (``credits_allowance_fraction`` of the duration, capped at
    ``credits_allowance_max_s``) is "excessive" and not counted. Limits: dark text on a light
    ground, credits over moving pictures and opening credits are not detected; a final dark
    scene with small bright details (a starry sky, city lights) can be mistaken for credits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from duel.canonical import canonical_sha256
from duel.intervals import Interval, clip_intervals, interval_union, total_length
from media_pipeline.ffcommand import (
    FfmpegInput,
    FfmpegOutput,
    Filter,
    FilterChain,
    ResourceLimits,
    ToolCommand,
    ffmpeg_command,
    filter_graph,
    path_arg,
    tool_version,
)

# The one place the default thresholds live. A round freezes a copy of this dict (hashed);
# after that only the frozen copy is used.
DEFAULT_DETECTION_THRESHOLDS: dict[str, Any] = {
    # Analysis picture: decoded video is scaled down to at most this width first.
    "analysis_max_width": 480,
    # Black frames (blackdetect).
    "black_min_s": 1.0,
    "black_pixel_threshold": 0.10,
    "black_picture_ratio": 0.98,
    # Frozen frames (freezedetect).
    "frozen_min_s": 2.0,
    "frozen_noise_db": -50.0,
    # Silence (silencedetect).
    "silence_min_s": 2.0,
    "silence_noise_db": -50.0,
    # Signature pictures for filler and credits.
    "signature_max_fps": 30.0,
    "signature_fallback_fps": 25.0,
    # Repeated filler.
    "filler_min_s": 2.0,
    "filler_min_lag_s": 1.0,
    "filler_probe_interval_s": 0.25,
    "filler_max_rms_diff": 6.0,
    "filler_min_motion": 0.5,
    "filler_dark_level": 24.0,
    "filler_contrast_shift_s": 0.25,
    "filler_min_contrast": 3.0,
    # Credits.
    "credits_min_s": 4.0,
    "credits_dark_level": 40,
    "credits_text_level": 64,
    "credits_min_dark_fraction": 0.75,
    "credits_min_text_fraction": 0.004,
    "credits_max_text_fraction": 0.25,
    "credits_gap_s": 1.0,
    "credits_end_slack_s": 3.0,
    "credits_scan_s": 900.0,
    "credits_allowance_fraction": 0.05,
    "credits_allowance_max_s": 60.0,
    # Validation.
    "aspect_ratio_tolerance": 0.01,
    "truncation_tolerance_s": 0.5,
    # Hostile-input bounds.
    "max_pixels": 4096 * 2304,
    "max_streams": 16,
    "max_duration_s": 4 * 3600.0,
}

# Signature picture size (cells) and the grid the filler detector compares.
SIGNATURE_WIDTH, SIGNATURE_HEIGHT = 64, 48
GRID_COLUMNS, GRID_ROWS = 8, 6

# Protocol names in ``not_counted_in_effective_duration`` -> detection keys.
DETECTION_FOR_PROTOCOL_TERM: dict[str, str] = {
    "black_frames": "black",
    "frozen_frames": "frozen",
    "repeated_filler": "filler",
    "excessive_credits": "credits",
    "silence": "silence",
}
DETECTION_KINDS: tuple[str, ...] = ("black", "frozen", "silence", "filler", "credits")

# Long arrays are processed in blocks of this many frames, so temporary copies stay small.
CHUNK_FRAMES = 4096


class ThresholdsInvalid(ValueError):
    """A thresholds dict lacks a key or has a value of the wrong kind."""


def validated_thresholds(thresholds: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return a plain dict with every default key present and numeric; reject unknown keys.

    Unknown keys are refused rather than ignored: a frozen control that no code reads would
    look like a rule while changing nothing.
    """
    if thresholds is None:
        return dict(DEFAULT_DETECTION_THRESHOLDS)
    unknown = sorted(set(thresholds) - set(DEFAULT_DETECTION_THRESHOLDS))
    missing = sorted(set(DEFAULT_DETECTION_THRESHOLDS) - set(thresholds))
    if unknown or missing:
        raise ThresholdsInvalid(f"thresholds: unknown keys {unknown}, missing keys {missing}")
    for key, value in thresholds.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ThresholdsInvalid(f"threshold {key} must be a finite number, got {value!r}")
    return dict(thresholds)


def detection_controls(
    thresholds: Mapping[str, Any] | None = None, *, ffmpeg_binary: str = "ffmpeg"
) -> dict[str, Any]:
    """The record a round freezes: thresholds, their SHA-256 and the ffmpeg that applies them.

    ``{"thresholds": {...}, "thresholds_sha256": "...", "ffmpeg_version": "ffmpeg version 5.1..."}``
    The SHA-256 is over the canonical JSON of the thresholds alone, so the same thresholds
    hash the same on any machine; the version is recorded because detector behaviour can
    change between ffmpeg releases.
    """
    frozen = validated_thresholds(thresholds)
    return {
        "thresholds": frozen,
        "thresholds_sha256": canonical_sha256(frozen),
        "ffmpeg_version": tool_version(ffmpeg_binary),
    }


# ---------------------------------------------------------------------------------------------
# The decode pass command


def signature_rate(nominal_fps: float | None, thresholds: Mapping[str, Any]) -> float:
    """Frames per second of the signature pictures: the film's own rate, capped."""
    cap = float(thresholds["signature_max_fps"])
    if nominal_fps is None or not 1.0 <= nominal_fps <= 1000.0:
        return float(thresholds["signature_fallback_fps"])
    return min(nominal_fps, cap)


def decode_pass_command(
    *,
    ffmpeg: str,
    path: str,
    video_index: int | None,
    audio_index: int | None,
    thresholds: Mapping[str, Any],
    signature_fps: float,
    timeout_s: float,
    limits: ResourceLimits,
) -> ToolCommand:
    """The one full decode: ``-xerror`` (stop at the first error) plus every detector.

    The input is capped at ``max_duration_s`` (+1 s) so a file that lies about its length
    cannot keep a worker decoding; reaching the cap is reported as ``duration_too_long``.
    Output 0 (null) carries the full-rate video and the audio; output 1 is the signature
    pipe on stdout.
    """
    chains: list[FilterChain] = []
    null_maps: list[str] = []
    outputs: list[FfmpegOutput] = []
    if video_index is not None:
        width = int(thresholds["analysis_max_width"])
        chains.append(
            FilterChain(
                (f"0:{video_index}",),
                (
                    Filter.of("scale", w=f"min(iw,{width})", h="-2", flags="area"),
                    Filter.of(
                        "blackdetect",
                        d=float(thresholds["black_min_s"]),
                        pic_th=float(thresholds["black_picture_ratio"]),
                        pix_th=float(thresholds["black_pixel_threshold"]),
                    ),
                    Filter.of(
                        "freezedetect",
                        n=f"{float(thresholds['frozen_noise_db'])}dB",
                        d=float(thresholds["frozen_min_s"]),
                    ),
                    Filter.of("split", outputs=2),
                ),
                ("vnull", "vsig"),
            )
        )
        chains.append(
            FilterChain(
                ("vsig",),
                (
                    Filter.of("fps", fps=f"{signature_fps:.6f}", start_time=0),
                    Filter.of("scale", w=SIGNATURE_WIDTH, h=SIGNATURE_HEIGHT, flags="area"),
                    Filter.of("format", pix_fmts="gray"),
                ),
                ("sig",),
            )
        )
        null_maps.append("[vnull]")
    if audio_index is not None:
        chains.append(
            FilterChain(
                (f"0:{audio_index}",),
                (
                    Filter.of(
                        "silencedetect",
                        n=f"{float(thresholds['silence_noise_db'])}dB",
                        d=float(thresholds["silence_min_s"]),
                    ),
                ),
                ("aud",),
            )
        )
        null_maps.append("[aud]")
    outputs.append(
        FfmpegOutput(
            "-",
            maps=tuple(null_maps),
            # Input time base: timestamps reach the null muxer unrounded, so a 1 ms Matroska
            # clock never collides into equal timestamps (an error of ours, not the file's).
            options=(("-fps_mode", "passthrough"), ("-enc_time_base:v", "-1"), ("-f", "null")),
        )
    )
    if video_index is not None:
        outputs.append(
            FfmpegOutput(
                "pipe:1",
                maps=("[sig]",),
                options=(("-fps_mode", "passthrough"), ("-f", "rawvideo"), ("-pix_fmt", "gray")),
            )
        )
    cap = f"{float(thresholds['max_duration_s']) + 1.0:.3f}"
    return ffmpeg_command(
        binary=ffmpeg,
        inputs=[FfmpegInput(path_arg(path), options=(("-t", cap),))],
        outputs=outputs,
        graph=filter_graph(chains),
        exit_on_error=True,
        progress=True,
        timeout_s=timeout_s,
        limits=limits,
    )


# ---------------------------------------------------------------------------------------------
# Detector log lines

_BLACK = re.compile(r"black_start:\s*(?P<start>[-\d.e+]+)\s+black_end:\s*(?P<end>[-\d.e+]+)")
_FREEZE = re.compile(r"freezedetect\.freeze_(?P<what>start|end):\s*(?P<t>[-\d.e+]+)")
_SILENCE = re.compile(r"silence_(?P<what>start|end):\s*(?P<t>[-\d.e+]+)")


def is_detector_line(line: str) -> bool:
    """Lines worth keeping from a decode pass: detector reports and input-side errors.

    Errors of our own outputs (the null muxer, the raw pipe) are not the file's fault and
    are not kept.
    """
    if line.startswith(("[null @", "[rawvideo @")):
        return False
    return (
        "black_start" in line
        or "freezedetect.freeze_" in line
        or "silence_" in line
        or "[error]" in line
        or "[fatal]" in line
        or "[panic]" in line
    )


def parse_detector_lines(
    lines: Sequence[str],
    *,
    video_end_s: float | None,
    audio_end_s: float | None,
    frame_s: float | None = None,
) -> dict[str, list[Interval]]:
    """Black, frozen and silence intervals from the ffmpeg log.

    A run still open at the end of the stream (freezedetect and silencedetect print no end
    then) ends at the stream's end; blackdetect's end at the last frame's timestamp is moved
    to the end of that frame (the stream end) so a black tail is counted in full.
    """
    black: list[Interval] = []
    frozen: list[Interval] = []
    silence: list[Interval] = []
    freeze_open: float | None = None
    silence_open: float | None = None
    for line in lines:
        if "[blackdetect" in line and (m := _BLACK.search(line)):
            black.append((float(m["start"]), float(m["end"])))
        elif "[freezedetect" in line and (m := _FREEZE.search(line)):
            if m["what"] == "start":
                freeze_open = float(m["t"])
            elif freeze_open is not None:
                frozen.append((freeze_open, float(m["t"])))
                freeze_open = None
        elif "[silencedetect" in line and (m := _SILENCE.search(line)):
            if m["what"] == "start":
                silence_open = max(0.0, float(m["t"]))
            elif silence_open is not None:
                silence.append((silence_open, float(m["t"])))
                silence_open = None
    if freeze_open is not None and video_end_s is not None:
        frozen.append((freeze_open, video_end_s))
    if silence_open is not None and audio_end_s is not None:
        silence.append((silence_open, audio_end_s))
    if video_end_s is not None:
        # blackdetect ends a trailing run at the last frame's pts; extend it to the stream end.
        near = 1.5 * (frame_s or 0.0)
        black = [(a, video_end_s if 0 < video_end_s - b <= near else b) for a, b in black]
        black = clip_intervals(black, 0.0, video_end_s)
        frozen = clip_intervals(frozen, 0.0, video_end_s)
    if audio_end_s is not None:
        silence = clip_intervals(silence, 0.0, audio_end_s)
    return {"black": black, "frozen": frozen, "silence": silence}


# ---------------------------------------------------------------------------------------------
# Signature pictures


@dataclass
class SignatureStream:
    """Consumes the raw 64x48 grey pipe and keeps only what the detectors need per frame.

    Per frame: the 8x6 grid (48 bytes), the dark and text cell fractions and the mean level.
    The last ``credits_scan_s`` seconds of row profiles are kept in a fixed ring for the
    scroll test. Frames are processed in batches with numpy, so cost per frame is tiny.
    """

    fps: float
    thresholds: Mapping[str, Any]
    batch_frames: int = 256
    _pending: bytearray = field(default_factory=bytearray)
    _grids: list[np.ndarray] = field(default_factory=list)
    _dark: list[np.ndarray] = field(default_factory=list)
    _text: list[np.ndarray] = field(default_factory=list)
    _mean: list[np.ndarray] = field(default_factory=list)
    _rows: np.ndarray = field(default_factory=lambda: np.zeros((0, SIGNATURE_HEIGHT), np.uint8))
    frames: int = 0

    @property
    def frame_bytes(self) -> int:
        return SIGNATURE_WIDTH * SIGNATURE_HEIGHT

    def __post_init__(self) -> None:
        # A fixed ring of row profiles (48 bytes a frame) for the last ``credits_scan_s``.
        capacity = max(1, int(float(self.thresholds["credits_scan_s"]) * self.fps))
        self._rows = np.zeros((capacity, SIGNATURE_HEIGHT), dtype=np.uint8)

    def feed(self, chunk: bytes) -> None:
        self._pending += chunk
        whole = len(self._pending) // self.frame_bytes
        if whole >= self.batch_frames:
            self._consume(whole)

    def finish(self) -> None:
        whole = len(self._pending) // self.frame_bytes
        if whole:
            self._consume(whole)
        self._pending.clear()

    def _consume(self, count: int) -> None:
        size = count * self.frame_bytes
        pictures = np.frombuffer(bytes(self._pending[:size]), dtype=np.uint8).reshape(
            count, SIGNATURE_HEIGHT, SIGNATURE_WIDTH
        )
        del self._pending[:size]
        cells = pictures.astype(np.float32)
        grid = cells.reshape(
            count,
            GRID_ROWS,
            SIGNATURE_HEIGHT // GRID_ROWS,
            GRID_COLUMNS,
            SIGNATURE_WIDTH // GRID_COLUMNS,
        ).mean(axis=(2, 4))
        self._grids.append(np.round(grid.reshape(count, -1)).astype(np.uint8))
        area = SIGNATURE_WIDTH * SIGNATURE_HEIGHT
        dark_level = float(self.thresholds["credits_dark_level"])
        text_level = float(self.thresholds["credits_text_level"])
        self._dark.append(((cells <= dark_level).sum(axis=(1, 2)) / area).astype(np.float32))
        self._text.append(((cells >= text_level).sum(axis=(1, 2)) / area).astype(np.float32))
        self._mean.append(cells.mean(axis=(1, 2)).astype(np.float32))
        profiles = np.round(cells.mean(axis=2)).astype(np.uint8)
        capacity = len(self._rows)
        for offset in range(max(0, count - capacity), count):
            self._rows[(self.frames + offset) % capacity] = profiles[offset]
        self.frames += count

    # Arrays over all frames (built once, after the pass).
    def grids(self) -> np.ndarray:
        if not self._grids:
            return np.zeros((0, GRID_ROWS * GRID_COLUMNS), dtype=np.uint8)
        return np.concatenate(self._grids)

    def dark_fraction(self) -> np.ndarray:
        return np.concatenate(self._dark) if self._dark else np.zeros(0, np.float32)

    def text_fraction(self) -> np.ndarray:
        return np.concatenate(self._text) if self._text else np.zeros(0, np.float32)

    def mean_level(self) -> np.ndarray:
        return np.concatenate(self._mean) if self._mean else np.zeros(0, np.float32)

    def recent_row_profiles(self) -> tuple[int, np.ndarray]:
        """(index of the first kept frame, profiles) for the last ``credits_scan_s``."""
        capacity = len(self._rows)
        kept = min(self.frames, capacity)
        first = self.frames - kept
        order = [(first + i) % capacity for i in range(kept)]
        return first, self._rows[order].astype(np.float32)

    @property
    def end_s(self) -> float:
        """The decoded video end implied by the frame count (frames start at time 0)."""
        return self.frames / self.fps


# ---------------------------------------------------------------------------------------------
# Repeated filler


def _rms_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    diff = a.astype(np.float32) - b.astype(np.float32)
    return np.sqrt((diff * diff).mean(axis=1))


def find_repeated_filler(
    grids: np.ndarray, mean_level: np.ndarray, fps: float, thresholds: Mapping[str, Any]
) -> list[Interval]:
    """Intervals of footage that repeats earlier footage (the later copies). See module doc.

    Candidate earlier frames for each probe come from a k-d tree over a coarser 4x3 grid,
    searched within a radius that cannot miss a frame within ``filler_max_rms_diff`` on the
    8x6 grid (averaging never increases an RMS difference) and for a bounded number of
    nearest neighbours, so time and memory stay far from quadratic.
    """
    n = len(grids)
    threshold = float(thresholds["filler_max_rms_diff"])
    min_len = max(2, int(round(float(thresholds["filler_min_s"]) * fps)))
    min_lag = max(1, int(round(float(thresholds["filler_min_lag_s"]) * fps)))
    hop = max(1, int(round(float(thresholds["filler_probe_interval_s"]) * fps)))
    min_motion = float(thresholds["filler_min_motion"])
    dark = float(thresholds["filler_dark_level"])
    shift = max(1, int(round(float(thresholds["filler_contrast_shift_s"]) * fps)))
    min_contrast = float(thresholds["filler_min_contrast"])
    if n < min_len + min_lag:
        return []
    values = grids  # uint8; converted chunk by chunk, never as a whole
    motion = np.zeros(n, dtype=np.float32)
    for lo in range(1, n, CHUNK_FRAMES):
        hi = min(n, lo + CHUNK_FRAMES)
        motion[lo:hi] = _rms_rows(values[lo:hi], values[lo - 1 : hi - 1])
    # Probe frames: sampled, lit and moving (static or dark footage belongs to other detectors).
    local_motion = np.convolve(motion, np.ones(hop) / hop, mode="same")
    probes = np.arange(min_lag, n, hop)
    probes = probes[(mean_level[probes] > dark) & (local_motion[probes] >= min_motion)]
    lit_mask = mean_level > dark
    lit = np.nonzero(lit_mask)[0]
    if probes.size == 0 or lit.size == 0:
        return []
    coarse = np.empty((n, (GRID_ROWS // 2) * (GRID_COLUMNS // 2)), dtype=np.float32)
    for lo in range(0, n, CHUNK_FRAMES):
        hi = min(n, lo + CHUNK_FRAMES)
        block = (
            values[lo:hi]
            .astype(np.float32)
            .reshape(hi - lo, GRID_ROWS // 2, 2, GRID_COLUMNS // 2, 2)
        )
        coarse[lo:hi] = block.mean(axis=(2, 4)).reshape(hi - lo, -1)
    tree = cKDTree(coarse[lit])
    radius = threshold * math.sqrt(coarse.shape[1]) + 1e-6
    # Nearest neighbours, bounded: the frames within ``min_lag`` of a probe can take at most
    # 2 * min_lag places, so this many always leaves room for earlier footage; memory stays
    # (batch x neighbours) whatever the film (a long loop matches everywhere).
    neighbours_wanted = min(lit.size, 2 * min_lag + 16)
    runs: list[tuple[int, int, int]] = []  # (start, end, lag) of the later copy, end exclusive
    for offset in range(0, probes.size, 512):
        batch = probes[offset : offset + 512]
        distances, found = tree.query(
            coarse[batch], k=neighbours_wanted, distance_upper_bound=radius
        )
        found = np.asarray(found).reshape(batch.size, -1)
        distances = np.asarray(distances).reshape(batch.size, -1)
        for row, probe in enumerate(batch):
            probe = int(probe)
            if any(r_start <= probe < r_end for r_start, r_end, _ in runs):
                continue
            hits = found[row][np.isfinite(distances[row])]
            earlier = lit[hits]
            earlier = earlier[earlier <= probe - min_lag]
            if earlier.size == 0:
                continue
            distance = _rms_rows(
                values[earlier], np.broadcast_to(values[probe], (earlier.size, values.shape[1]))
            )
            for index in np.argsort(distance)[:3]:
                if distance[index] > threshold:
                    break
                lag = probe - int(earlier[index])
                start, end = _extend_run(values, lit_mask, probe, lag, threshold)
                if (
                    end - start >= min_len
                    and float(motion[start:end].mean()) >= min_motion
                    and _contrast(values, start, end, lag, shift) >= min_contrast
                ):
                    runs.append((start, end, lag))
                    break
    return interval_union((start / fps, end / fps) for start, end, _ in runs)


def _contrast(values: np.ndarray, start: int, end: int, lag: int, shift: int) -> float:
    """How much better the run matches at its lag than at a lag ``shift`` frames off.

    A real repeat matches sharply at one offset (compression noise only) and badly a quarter
    second off; slowly changing footage (a slow zoom, a pan over a plain sky) matches almost
    as well at every nearby offset and so is not taken for a repeat.
    """
    at_lag = _mean_rms_at_lag(values, start, end, lag)
    off_lag = [
        _mean_rms_at_lag(values, max(start, other), end, other)
        for other in (lag - shift, lag + shift)
        if other >= 1 and max(start, other) < end
    ]
    return (min(off_lag) - at_lag) if off_lag else 0.0


def _mean_rms_at_lag(values: np.ndarray, start: int, end: int, lag: int) -> float:
    """Mean RMS difference of frames [start, end) against the frames ``lag`` earlier."""
    total = 0.0
    for lo in range(start, end, CHUNK_FRAMES):
        hi = min(end, lo + CHUNK_FRAMES)
        total += float(_rms_rows(values[lo:hi], values[lo - lag : hi - lag]).sum())
    return total / max(1, end - start)


def _extend_run(
    values: np.ndarray, lit: np.ndarray, later: int, lag: int, threshold: float
) -> tuple[int, int]:
    """Frames [start, end) around ``later`` that match the frames ``lag`` earlier.

    Dark frames never match: black on black is the black detector's business, and letting
    it match would stretch a repeat over the black that follows it.
    """
    n = len(values)
    step = 256

    def _mismatch(lo: int, hi: int) -> np.ndarray:
        differ = _rms_rows(values[lo:hi], values[lo - lag : hi - lag]) > threshold
        return np.nonzero(differ | ~lit[lo:hi])[0]

    end = later
    while end < n:
        hi = min(n, end + step)
        bad = _mismatch(end, hi)
        if bad.size:
            end += int(bad[0])
            break
        end = hi
    start = later
    while start > lag:
        lo = max(lag, start - step)
        bad = _mismatch(lo, start)
        if bad.size:
            start = lo + int(bad[-1]) + 1
            break
        start = lo
    return start, end


# ---------------------------------------------------------------------------------------------
# Credits


@dataclass(frozen=True)
class CreditsFinding:
    interval: Interval
    style: str  # "scroll" or "cards"


def find_credits(
    dark_fraction: np.ndarray,
    text_fraction: np.ndarray,
    fps: float,
    thresholds: Mapping[str, Any],
    *,
    row_profiles: tuple[int, np.ndarray] | None = None,
) -> CreditsFinding | None:
    """The trailing credits stretch, if any. See the module docstring for the method."""
    n = len(dark_fraction)
    if n == 0:
        return None
    min_dark = float(thresholds["credits_min_dark_fraction"])
    lo_text = float(thresholds["credits_min_text_fraction"])
    hi_text = float(thresholds["credits_max_text_fraction"])
    textlike = (dark_fraction >= min_dark) & (text_fraction >= lo_text) & (text_fraction <= hi_text)
    neutral = (text_fraction < lo_text) & (dark_fraction >= min_dark)
    slack = int(round(float(thresholds["credits_end_slack_s"]) * fps))
    gap_limit = int(round(float(thresholds["credits_gap_s"]) * fps))
    # The last credit-like frame must be near the end, with only neutral frames or a short
    # slack after it.
    last = n - 1
    while last >= 0 and not textlike[last] and (neutral[last] or n - 1 - last <= slack):
        last -= 1
    if last < 0 or not textlike[last]:
        return None
    start = last
    gap = 0
    i = last - 1
    while i >= 0:
        if textlike[i]:
            start = i
            gap = 0
        elif neutral[i]:
            pass
        else:
            gap += 1
            if gap > gap_limit:
                break
        i -= 1
    end = last + 1
    if (end - start) < float(thresholds["credits_min_s"]) * fps:
        return None
    if textlike[start:end].mean() < 0.5:
        return None
    return CreditsFinding(
        interval=(start / fps, end / fps), style=_credits_style(start, end, fps, row_profiles)
    )


def _credits_style(
    start: int, end: int, fps: float, row_profiles: tuple[int, np.ndarray] | None
) -> str:
    """``scroll`` when row profiles one second apart line up best with a vertical shift."""
    if row_profiles is None:
        return "cards"
    first, rows = row_profiles
    lo, hi = max(start, first), end
    step = max(1, int(round(fps)))
    shifted = 0
    compared = 0
    for i in range(lo + step, hi, step):
        a, b = rows[i - step - first], rows[i - first]
        if a.std() < 1.0 or b.std() < 1.0:
            continue
        compared += 1
        scores = {}
        for s in range(-8, 9):
            x, y = (a[s:], b[:-s]) if s > 0 else ((a[:s], b[-s:]) if s < 0 else (a, b))
            scores[s] = float(np.abs(x - y).mean())
        if min(scores, key=scores.__getitem__) != 0 and min(scores.values()) < scores[0] * 0.8:
            shifted += 1
    return "scroll" if compared and shifted / compared >= 0.5 else "cards"


# ---------------------------------------------------------------------------------------------
# Effective duration


def credits_not_counted(
    credits: Sequence[Interval], duration_s: float, thresholds: Mapping[str, Any]
) -> list[Interval]:
    """The excessive part of the credits: what lies beyond the allowance."""
    allowance = min(
        float(thresholds["credits_allowance_fraction"]) * duration_s,
        float(thresholds["credits_allowance_max_s"]),
    )
    return [(start + allowance, end) for start, end in credits if end - start > allowance]


def not_counted_intervals(
    detections: Mapping[str, Sequence[Interval]],
    not_counted_terms: Sequence[str],
    duration_s: float,
    thresholds: Mapping[str, Any],
) -> list[Interval]:
    """The union of the intervals the protocol says not to count (Duration classes).

    ``not_counted_terms`` is the definition's ``not_counted_in_effective_duration``; an
    unknown term is an error, so a new protocol rule cannot be silently ignored.
    """
    chosen: list[Interval] = []
    for term in not_counted_terms:
        try:
            kind = DETECTION_FOR_PROTOCOL_TERM[term]
        except KeyError:
            raise ValueError(f"no detector for protocol term {term!r}") from None
        found = list(detections.get(kind, ()))
        if kind == "credits":
            found = credits_not_counted(found, duration_s, thresholds)
        chosen.extend(found)
    return interval_union(clip_intervals(chosen, 0.0, duration_s))


def effective_duration(duration_s: float, not_counted: Sequence[Interval]) -> float:
    """Duration minus the union of the not-counted intervals."""
    return max(0.0, duration_s - total_length(not_counted))
