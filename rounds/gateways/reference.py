"""The built-in reference provider: real films rendered with ffmpeg, so a round runs offline.

DESIGN "Real components, and the embedded default": with no provider configured, every
system of a demo round is a :class:`ReferenceProvider` (Best Complete System) and every
Common Visual Engine call goes to a :class:`ReferenceEngine`; :func:`reference_orchestrate`
is an entrant's orchestration system for the engine class.

A reference film follows the protocol's Output requirements: one video stream, one audio
stream, the package's aspect ratio, the target duration of its duration class, and three scenes
(beginning, development, ending) that draw the story text over moving colour fields with a
different palette, gradient and melody each. Renders are small (short side 180 px, 12 fps,
x264 ultrafast) so tests can render many, and bit-exact: the same package, settings, seed and
configuration give a byte-identical file.

Profiles misbehave the way real providers do (protocol: Run rules, the retry reasons):

========================== ===============================================================
``good``                   a conforming film
``error_first_attempt``    attempt 1 fails with an explicit provider error, later ones good
``infrastructure_failure_first`` attempt 1 is refused at submit (infrastructure), then good
``empty_file``             the job succeeds but delivers no bytes (fetch raises EmptyFile)
``no_audio``               a film without an audio stream
``too_short``              a film of ``too_short_fraction`` of the target duration
``frozen_stretch``         a film whose development holds one frame for ``frozen_fraction``
``safety_block``           every attempt is refused on safety grounds
``slow``                   the job stays running for ``slow_delay_s`` (poll never blocks)
``unplayable``             a truncated file that cannot be probed or played
========================== ===============================================================

Job state lives in JSON files under ``state_dir``, so a worker that dies after submit can poll
and fetch the same request from another process; attempt numbers come from exclusive file
creation, so two submits never share an attempt.
"""

from __future__ import annotations

import colorsys
import contextlib
import hashlib
import json
import math
import os
import random
import re
import shutil
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from duel.canonical import canonical_json, canonical_sha256
from rounds.gateways._files import FFMPEG, ToolFailed, probe, probed_seconds, publishing, run_tool
from rounds.gateways.base import (
    AdapterConfigurationError,
    CostReport,
    EmptyFile,
    EngineCall,
    EngineClip,
    FetchedAsset,
    InfrastructureFailure,
    JobNotFinished,
    JobState,
    JobStatus,
    ProviderError,
    ProviderFailure,
    SafetyBlock,
    Submission,
    SystemProvider,
    VideoEngine,
)
from rounds.protocols import Protocol

FONT_PATH = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")

REFERENCE_PROFILES: tuple[str, ...] = (
    "good",
    "error_first_attempt",
    "infrastructure_failure_first",
    "empty_file",
    "no_audio",
    "too_short",
    "frozen_stretch",
    "safety_block",
    "slow",
    "unplayable",
)

SCENE_NAMES: tuple[str, ...] = ("beginning", "development", "ending")
# Share of the film each scene gets: a creative choice of this reference system, not a rule.
SCENE_WEIGHTS: tuple[float, ...] = (0.3, 0.4, 0.3)

# Paths we put into ffmpeg filter arguments: no characters the filtergraph parser treats
# specially, so no escaping layer is needed (and none can be got wrong).
_SAFE_FILTER_PATH = re.compile(r"^[A-Za-z0-9_./-]+$")


# ---------------------------------------------------------------------------
# Film plans (pure)


@dataclass(frozen=True)
class SceneSpec:
    """One scene of a reference film: its frames, text, look and melody."""

    name: str
    frames: int
    text: str
    colours: tuple[str, str]
    gradient_type: int
    speed: float
    gradient_seed: int
    notes_hz: tuple[float, ...]
    drone_hz: float
    beats_per_second: float
    frozen_frames: int = 0


@dataclass(frozen=True)
class FilmSpec:
    """Everything :func:`render_film` needs; a pure function of package, seed and config."""

    width: int
    height: int
    fps: int
    scenes: tuple[SceneSpec, ...]
    audio: bool = True
    sample_rate: int = 48000
    font_path: Path = FONT_PATH

    @property
    def frames(self) -> int:
        return sum(s.frames for s in self.scenes)

    @property
    def seconds(self) -> float:
        return self.frames / self.fps

    @property
    def frozen_seconds(self) -> float:
        return sum(s.frozen_frames for s in self.scenes) / self.fps


def frame_size(aspect_ratio: str, *, short_side: int = 180) -> tuple[int, int]:
    """Width and height (even, for yuv420p) for an ``"W:H"`` aspect ratio and a short side."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*[:x/]\s*(\d+(?:\.\d+)?)\s*", str(aspect_ratio))
    if not match:
        raise ValueError(f"aspect ratio {aspect_ratio!r} is not of the form 'W:H'")
    a, b = float(match.group(1)), float(match.group(2))
    if a <= 0 or b <= 0:
        raise ValueError(f"aspect ratio {aspect_ratio!r} must be positive")
    short = 2 * round(short_side / 2)
    if a >= b:
        return 2 * round(short * a / b / 2), short
    return short, 2 * round(short * b / a / 2)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_as_text(v)}" for k, v in value.items())
    if isinstance(value, Sequence):
        return "; ".join(_as_text(v) for v in value)
    return str(value)


def scene_texts(package: Mapping[str, Any]) -> tuple[str, str, str]:
    """The story text each scene draws: the outcome split into beginning, development, ending.

    The beginning also introduces the characters and canon, the ending closes with the last
    part of the outcome, so the three scenes carry the story the package commits to.
    """
    outcome = _as_text(package.get("story_outcome"))
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", outcome) if s]
    if not sentences:
        sentences = ["(no story outcome)"]
    n = len(sentences)
    cut1, cut2 = max(1, round(n / 3)), max(1, round(2 * n / 3))
    parts = [sentences[:cut1], sentences[cut1:cut2], sentences[cut2:]]
    # Short outcomes: every scene still has words to draw.
    parts = [p or sentences[-1:] for p in parts]
    characters = _as_text(package.get("characters_and_canon"))
    beginning = " ".join(parts[0])
    if characters:
        beginning = f"{characters}. {beginning}"
    return beginning, " ".join(parts[1]), " ".join(parts[2])


def _split_frames(total: int, weights: Sequence[float]) -> list[int]:
    """Split ``total`` frames by ``weights``; the parts sum to ``total`` exactly."""
    bounds = [0]
    acc = 0.0
    for w in weights:
        acc += w
        bounds.append(round(total * acc / sum(weights)))
    bounds[-1] = total
    return [b - a for a, b in zip(bounds, bounds[1:], strict=False)]


def _palette(rng: random.Random, hue: float, quality: float) -> tuple[str, str]:
    # Bright enough never to read as black frames; saturation follows the quality knob.
    sat = 0.35 + 0.5 * quality
    colours = []
    for shift in (0.0, 0.08 + 0.1 * rng.random()):
        r, g, b = colorsys.hsv_to_rgb((hue + shift) % 1.0, sat, 0.7 + 0.25 * rng.random())
        colours.append(f"0x{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}")
    return colours[0], colours[1]


def plan_film(
    package: Mapping[str, Any],
    *,
    target_s: float,
    seed: int,
    quality: float = 0.5,
    short_side: int = 180,
    fps: int = 12,
    audio: bool = True,
    frozen_s: float = 0.0,
    texts: Sequence[str] | None = None,
    scene_names: Sequence[str] = SCENE_NAMES,
    scene_weights: Sequence[float] = SCENE_WEIGHTS,
    font_path: Path = FONT_PATH,
) -> FilmSpec:
    """Plan a reference film for ``package``: pure and deterministic in its arguments.

    ``seed`` and the package pick palettes, gradients and melodies (the seed is mixed with the
    package hash, so two packages with one seed still differ). ``frozen_s`` holds the last frame
    of the development scene for that long (the ``frozen_stretch`` profile).
    """
    if target_s <= 0:
        raise ValueError("target duration must be positive")
    width, height = frame_size(str(package.get("aspect_ratio", "16:9")), short_side=short_side)
    rng = random.Random(canonical_sha256({"package": dict(package), "seed": seed}))
    texts = tuple(texts) if texts is not None else scene_texts(package)
    if len(texts) != len(scene_names):
        raise ValueError("one text per scene is needed")
    frames = _split_frames(max(len(scene_names), round(target_s * fps)), scene_weights)
    base_hue = rng.random()
    # A pentatonic scale over a seeded root; low quality repeats fewer notes.
    root = 196.0 * 2 ** (rng.randrange(0, 7) / 12)
    scale = [root * 2 ** (step / 12) for step in (0, 2, 4, 7, 9, 12, 14, 16)]
    distinct = 2 + round(quality * 4)
    scenes = []
    for index, (name, text, count) in enumerate(zip(scene_names, texts, frames, strict=True)):
        frozen = 0
        if frozen_s > 0 and name == "development":
            frozen = min(round(frozen_s * fps), count - 1)
        offset = index * 2 if index < 2 else 0  # the ending returns to the root: a resolution
        notes = tuple(scale[(offset + rng.randrange(0, 6)) % len(scale)] for _ in range(distinct))
        scenes.append(
            SceneSpec(
                name=name,
                frames=count,
                text=text,
                colours=_palette(rng, (base_hue + index / 3) % 1.0, quality),
                gradient_type=(0, 3, 2)[index % 3],
                speed=round(0.04 + 0.04 * rng.random(), 4),
                gradient_seed=rng.randrange(0, 2**31),
                notes_hz=notes,
                drone_hz=root / 2 * 2 ** ((0, 5, 0)[index % 3] / 12),
                beats_per_second=(2.0, 3.0, 1.5)[index % 3],
                frozen_frames=frozen,
            )
        )
    return FilmSpec(
        width=width, height=height, fps=fps, scenes=tuple(scenes), audio=audio, font_path=font_path
    )


# ---------------------------------------------------------------------------
# Rendering


def _wrap(text: str, width: int, height: int, fontsize: int) -> str:
    columns = max(8, int(width / (fontsize * 0.62)))
    max_lines = max(1, int(height * 0.55 / (fontsize * 1.35)))
    lines = textwrap.wrap(text, columns) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: max(1, columns - 1)].rstrip() + "…"
    return "\n".join(lines)


def _fontsize(spec: FilmSpec) -> int:
    return max(10, min(spec.width, spec.height) // 15)


def _filter_path(path: Path) -> str:
    text = str(path)
    if not _SAFE_FILTER_PATH.match(text):
        raise ValueError(f"path {text!r} is not safe to pass in an ffmpeg filter argument")
    return text


def soundtrack_chunks(spec: FilmSpec) -> Iterator[bytes]:
    """The film's soundtrack as raw 16-bit little-endian mono PCM, one note per chunk.

    Each scene plays its melody (plucked sine notes on the beat) over a soft drone whose phase
    runs on across notes; sample counts match the video frames exactly. Generated lazily and
    piped into ffmpeg, so neither memory nor scratch disk grows with the film's length.
    """
    rate = spec.sample_rate
    written = 0
    video_frames = 0
    for scene in spec.scenes:
        video_frames += scene.frames
        scene_end = round(video_frames * rate / spec.fps)
        beat = max(1, round(rate / scene.beats_per_second))
        note = 0
        while written < scene_end:
            n = min(beat, scene_end - written)
            index = np.arange(n, dtype=np.float64)
            t = index / rate
            freq = scene.notes_hz[note % len(scene.notes_hz)]
            envelope = np.exp(-3.5 * t) * np.minimum(1.0, (n - index) / 64.0)
            signal = 0.28 * np.sin(2 * math.pi * freq * t) * envelope
            signal += 0.08 * np.sin(2 * math.pi * scene.drone_hz * (written + index) / rate)
            yield (np.clip(signal, -1, 1) * 32767).astype("<i2").tobytes()
            written += n
            note += 1


# The reference films' encoder settings: fast, small and deterministic (with -bitexact).
_FAST_X264 = ("-c:v", "libx264", "-preset", "ultrafast", "-crf", "30", "-pix_fmt", "yuv420p")


def _pcm_input(sample_rate: int) -> list[str]:
    return ["-f", "s16le", "-ar", str(sample_rate), "-ac", "1", "-i", "pipe:0"]


def render_command(spec: FilmSpec, *, text_files: Sequence[Path], out_path: Path) -> list[str]:
    """The ffmpeg argument list that renders ``spec`` (pure, so it can be inspected in tests).

    With ``spec.audio`` the soundtrack is read as raw PCM from standard input. Bit-exact flags
    and a single encoder thread make the output byte-identical across runs.
    """
    fontsize = _fontsize(spec)
    font = _filter_path(spec.font_path)
    args = [FFMPEG, "-v", "error", "-y"]
    chains = []
    for index, (scene, text_file) in enumerate(zip(spec.scenes, text_files, strict=True)):
        moving = scene.frames - scene.frozen_frames
        small = f"{max(2, spec.width // 4)}x{max(2, spec.height // 4)}"
        args += [
            "-f",
            "lavfi",
            "-i",
            (
                f"gradients=s={small}:r={spec.fps}:d={moving / spec.fps:.6f}"
                f":c0={scene.colours[0]}:c1={scene.colours[1]}:seed={scene.gradient_seed}"
                f":speed={scene.speed}:type={scene.gradient_type}"
            ),
        ]
        label = scene.name.capitalize()
        chain = (
            f"[{index}:v]scale={spec.width}:{spec.height}:flags=bilinear,setsar=1,"
            f"drawtext=fontfile={font}:text={label}:fontsize={fontsize}:fontcolor=white"
            f":borderw=1:bordercolor=black:x='mod(t*{spec.width / 6:.1f},w+tw)-tw'"
            f":y={fontsize // 2},"
            f"drawtext=fontfile={font}:textfile={_filter_path(text_file)}:expansion=none"
            f":fontsize={fontsize}:fontcolor=white:line_spacing={fontsize // 3}"
            f":box=1:boxcolor=black@0.35:boxborderw={fontsize // 3}"
            # The story text drifts steadily down the scene, so every moving scene visibly
            # moves (a slow gradient alone can read as frozen frames at a low frame rate) and
            # never repeats itself (a periodic motion would read as repeated filler).
            f":x=(w-tw)/2:y='(h-th)*(0.15+0.7*t/{max(moving / spec.fps, 1.0):.3f})'"
        )
        if scene.frozen_frames:
            chain += f",tpad=stop_mode=clone:stop={scene.frozen_frames}"
        chains.append(chain + f",trim=end_frame={scene.frames},setpts=PTS-STARTPTS[v{index}]")
    joined = "".join(f"[v{i}]" for i in range(len(spec.scenes)))
    chains.append(f"{joined}concat=n={len(spec.scenes)}:v=1:a=0[v]")
    if spec.audio:
        args += _pcm_input(spec.sample_rate)
    args += ["-filter_complex", ";".join(chains), "-map", "[v]"]
    if spec.audio:
        args += ["-map", f"{len(spec.scenes)}:a", "-c:a", "aac", "-b:a", "64k", "-ac", "1"]
    args += [
        *_FAST_X264,
        "-r",
        str(spec.fps),
        "-threads",
        "1",
        "-fflags",
        "+bitexact",
        "-flags:v",
        "+bitexact",
        "-flags:a",
        "+bitexact",
        "-map_metadata",
        "-1",
        "-map_chapters",
        "-1",
        "-f",
        "mp4",
        str(out_path),
    ]
    return args


@contextlib.contextmanager
def _scratch(work_dir: Path | None) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="duel_ref_", dir=work_dir))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def render_film(
    spec: FilmSpec,
    dest_path: Path,
    *,
    truncate_fraction: float | None = None,
    work_dir: Path | None = None,
    timeout_s: float | None = 600,
) -> int:
    """Render ``spec`` to ``dest_path`` (published atomically); return the size in bytes.

    ``truncate_fraction`` keeps only that share of the encoded bytes (the ``unplayable``
    profile: the MP4 index is written last, so the cut file cannot be probed).
    """
    with _scratch(work_dir) as scratch, publishing(dest_path) as tmp:
        text_files = []
        fontsize = _fontsize(spec)
        for index, scene in enumerate(spec.scenes):
            text_file = scratch / f"scene{index}.txt"
            text_file.write_text(
                _wrap(scene.text, spec.width, spec.height, fontsize), encoding="utf-8"
            )
            text_files.append(text_file)
        run_tool(
            render_command(spec, text_files=text_files, out_path=tmp),
            timeout_s=timeout_s,
            stdin_chunks=soundtrack_chunks(spec) if spec.audio else None,
        )
        if truncate_fraction is not None:
            size = tmp.stat().st_size
            with open(tmp, "r+b") as handle:
                handle.truncate(max(1, int(size * truncate_fraction)))
        return tmp.stat().st_size


# ---------------------------------------------------------------------------
# The reference system provider


def _decimal(value: Any) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


@dataclass
class ReferenceProvider(SystemProvider):
    """A complete system that renders reference films (the embedded default provider).

    ``protocol`` (a key) resolves the package's duration class to its target seconds; a brief
    may carry its own ``"protocol"`` key instead. ``clock`` is wall-clock seconds (job records
    outlive processes), injectable so tests of ``slow`` need not wait.
    """

    state_dir: Path
    profile: str = "good"
    protocol: str | None = None
    system: str = "reference"
    quality: float = 0.5
    price_per_second: Decimal = Decimal("0.05")
    list_price_per_second: Decimal | None = None
    currency: str = "USD"
    queue_s: float = 0.0
    run_s: float = 0.0
    slow_delay_s: float = 3600.0
    too_short_fraction: float = 0.5
    frozen_fraction: float = 0.3
    unplayable_fraction: float = 0.4
    short_side: int = 180
    fps: int = 12
    font_path: Path = FONT_PATH
    clock: Callable[[], float] = field(default=time.time, repr=False)

    def __post_init__(self) -> None:
        if self.profile not in REFERENCE_PROFILES:
            known = ", ".join(REFERENCE_PROFILES)
            raise AdapterConfigurationError(
                f"unknown reference profile {self.profile!r}; known: {known}"
            )
        if not 0.0 <= float(self.quality) <= 1.0:
            raise AdapterConfigurationError("quality must be between 0 and 1")
        self.state_dir = Path(self.state_dir)
        self.price_per_second = _decimal(self.price_per_second)
        if self.list_price_per_second is not None:
            self.list_price_per_second = _decimal(self.list_price_per_second)

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], *, clock: Callable[[], float] | None = None
    ) -> ReferenceProvider:
        """Build from a registry config (``{"adapter": "reference", "profile": ..., ...}``)."""
        known = {f for f in cls.__dataclass_fields__ if f != "clock"}
        unknown = sorted(set(config) - known - {"adapter"})
        if unknown:
            raise AdapterConfigurationError(f"unknown reference provider options: {unknown}")
        if "state_dir" not in config:
            raise AdapterConfigurationError("the reference provider needs a state_dir")
        kwargs = {k: v for k, v in config.items() if k in known}
        if clock is not None:
            kwargs["clock"] = clock
        return cls(**kwargs)

    # -- identity and job records

    def _identity(self) -> dict[str, Any]:
        """What makes two providers the same system (it keys attempt numbering and renders)."""
        return {
            "system": self.system,
            "profile": self.profile,
            "quality": float(self.quality),
            "short_side": self.short_side,
            "fps": self.fps,
            "too_short_fraction": self.too_short_fraction,
            "frozen_fraction": self.frozen_fraction,
        }

    @property
    def _jobs(self) -> Path:
        return self.state_dir / "jobs"

    def _job_path(self, request_id: str) -> Path:
        if not re.fullmatch(r"ref-[0-9a-f]{20}-\d+", request_id):
            raise ProviderError(
                f"unknown request id {request_id!r}", provider_request_id=request_id
            )
        return self._jobs / f"{request_id}.json"

    def _load(self, request_id: str) -> dict[str, Any]:
        try:
            return json.loads(self._job_path(request_id).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ProviderError(
                f"unknown request id {request_id!r}", provider_request_id=request_id
            ) from None

    def _create_job(
        self, record: dict[str, Any], *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Write the job record under the next free attempt number, atomically and exclusively.

        With an ``idempotency_key``, the key is bound to the job by a hard link made only if
        the key has none yet (atomic on POSIX): a key already bound returns its job, and a
        job that lost a race for the key is removed again.
        """
        self._jobs.mkdir(parents=True, exist_ok=True)
        bound = None
        if idempotency_key:
            bound = self._jobs / f"key-{hashlib.sha256(idempotency_key.encode()).hexdigest()}"
            if bound.exists():
                return json.loads(bound.read_bytes())
        created = self._new_job(record)
        if bound is None:
            return created
        job_path = self._jobs / f"{created['request_id']}.json"
        try:
            os.link(job_path, bound)
        except FileExistsError:
            job_path.unlink()
            return json.loads(bound.read_bytes())
        return created

    def _new_job(self, record: dict[str, Any]) -> dict[str, Any]:
        self._jobs.mkdir(parents=True, exist_ok=True)
        key = canonical_sha256({k: record[k] for k in ("identity", "brief", "settings", "seed")})[
            :20
        ]
        attempt = 1
        while True:
            request_id = f"ref-{key}-{attempt}"
            path = self._jobs / f"{request_id}.json"
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                attempt += 1
                continue
            record = dict(record, request_id=request_id, attempt=attempt)
            with os.fdopen(fd, "wb") as handle:
                handle.write(canonical_json(record))
                handle.flush()
                os.fsync(handle.fileno())
            return record

    # -- target and plan

    def _target_s(self, brief: Mapping[str, Any]) -> float:
        key = brief.get("protocol") or self.protocol
        return Protocol.load(str(key)).target_s(str(brief["duration_class"]))

    def film_spec(self, record: Mapping[str, Any]) -> FilmSpec:
        """The film a job renders (before profile-specific truncation)."""
        target = float(record["target_s"])
        if self.profile == "too_short":
            target *= self.too_short_fraction
        frozen = target * self.frozen_fraction if self.profile == "frozen_stretch" else 0.0
        seed_material = canonical_sha256(
            {"seed": record["seed"], "settings": record["settings"], "identity": self._identity()}
        )
        return plan_film(
            record["brief"],
            target_s=target,
            seed=int(seed_material[:15], 16),
            quality=float(self.quality),
            short_side=self.short_side,
            fps=self.fps,
            audio=self.profile != "no_audio",
            frozen_s=frozen,
            font_path=self.font_path,
        )

    def _cost_for(self, record: Mapping[str, Any], *, billed: bool) -> CostReport:
        if not billed:
            return CostReport.zero(self.currency)
        seconds = self.film_spec(record).seconds
        if self.profile == "empty_file":
            seconds = float(record["target_s"])
        list_price = self.list_price_per_second or self.price_per_second
        return CostReport(
            currency=self.currency,
            amounts={
                "billed_cost": self.price_per_second * _decimal(round(seconds, 3)),
                "public_list_cost": list_price * _decimal(round(seconds, 3)),
            },
            units={"film_seconds": round(seconds, 3)},
        )

    def _failure(self, record: Mapping[str, Any]) -> ProviderFailure | None:
        request_id = record["request_id"]
        zero = CostReport.zero(self.currency)
        if self.profile == "safety_block":
            return SafetyBlock(
                "the reference provider's safety filter refused the brief",
                provider_request_id=request_id,
                cost=zero,
                detail={"attempt": record["attempt"]},
            )
        if self.profile == "error_first_attempt" and record["attempt"] == 1:
            return ProviderError(
                "reference provider: generation failed (explicit error on the first attempt)",
                provider_request_id=request_id,
                cost=zero,
                detail={"attempt": record["attempt"]},
            )
        return None

    # -- the interface

    def submit(
        self,
        brief: dict[str, Any],
        settings: dict[str, Any],
        *,
        seed: int,
        idempotency_key: str | None = None,
    ) -> Submission:
        """Record the job (an exclusive attempt number); refuse an unusable brief.

        A key seen before answers with the job it created, so nothing is generated twice.
        """
        for item in ("duration_class", "aspect_ratio"):
            if not brief.get(item):
                raise ProviderError(f"the brief lacks {item!r}")
        if not (brief.get("protocol") or self.protocol):
            raise AdapterConfigurationError(
                "the reference provider needs a protocol key (config 'protocol' or brief "
                "'protocol') to resolve the duration class"
            )
        try:
            target = self._target_s(brief)
            frame_size(str(brief["aspect_ratio"]), short_side=self.short_side)
        except (KeyError, ValueError) as exc:
            raise ProviderError(f"the reference provider cannot render this brief: {exc}") from exc
        record = self._create_job(
            {
                "identity": self._identity(),
                "brief": brief,
                "settings": settings,
                "seed": int(seed),
                "target_s": target,
                "submitted_at": self.clock(),
            },
            idempotency_key=idempotency_key,
        )
        if self.profile == "infrastructure_failure_first" and record["attempt"] == 1:
            raise InfrastructureFailure(
                "reference provider: service unavailable (infrastructure failure on the first "
                "attempt)",
                provider_request_id=record["request_id"],
                cost=CostReport.zero(self.currency),
                detail={"attempt": 1},
            )
        return Submission(request_id=record["request_id"], provider_request_id=record["request_id"])

    def poll(self, request_id: str) -> JobStatus:
        """Derived from the clock and the job record; never blocks."""
        record = self._load(request_id)
        if self.profile == "infrastructure_failure_first" and record["attempt"] == 1:
            return JobStatus(
                JobState.FAILED,
                error=InfrastructureFailure(
                    "the job was never accepted", provider_request_id=request_id
                ),
            )
        elapsed = self.clock() - float(record["submitted_at"])
        run_s = self.slow_delay_s if self.profile == "slow" else self.run_s
        if elapsed < self.queue_s:
            return JobStatus(JobState.QUEUED, progress=0.0)
        if elapsed < self.queue_s + run_s:
            return JobStatus(JobState.RUNNING, progress=round((elapsed - self.queue_s) / run_s, 4))
        failure = self._failure(record)
        if failure is not None:
            return JobStatus(JobState.FAILED, progress=1.0, error=failure)
        return JobStatus(JobState.SUCCEEDED, progress=1.0)

    def fetch(self, request_id: str, dest_path: Path) -> FetchedAsset:
        """Render the job's film into ``dest_path``; an ``empty_file`` job raises EmptyFile."""
        status = self.poll(request_id)
        if status.state == JobState.FAILED:
            assert status.error is not None
            raise status.error
        if status.state != JobState.SUCCEEDED:
            raise JobNotFinished(f"job {request_id} is {status.state}, not succeeded")
        record = self._load(request_id)
        cost = self._cost_for(record, billed=True)
        if self.profile == "empty_file":
            raise EmptyFile(
                "the reference provider delivered an empty file",
                provider_request_id=request_id,
                cost=cost,
            )
        spec = self.film_spec(record)
        truncate = self.unplayable_fraction if self.profile == "unplayable" else None
        try:
            size = render_film(spec, Path(dest_path), truncate_fraction=truncate)
        except ToolFailed as exc:
            raise InfrastructureFailure(
                f"reference render failed: {exc}", provider_request_id=request_id, cost=cost
            ) from exc
        return FetchedAsset(
            path=Path(dest_path),
            size_bytes=size,
            cost=cost,
            provider_request_id=request_id,
            details={
                "profile": self.profile,
                "quality": float(self.quality),
                "attempt": record["attempt"],
                "seconds": spec.seconds,
                "width": spec.width,
                "height": spec.height,
                "frozen_seconds": spec.frozen_seconds,
                "audio": spec.audio,
            },
        )

    def cost(self, request_id: str) -> CostReport:
        """Zero for refused or failed jobs; film seconds at the configured price otherwise."""
        record = self._load(request_id)
        status = self.poll(request_id)
        return self._cost_for(record, billed=status.state == JobState.SUCCEEDED)


# ---------------------------------------------------------------------------
# The reference video engine


ENGINE_PARAMETERS: frozenset[str] = frozenset({"seconds", "resolution", "audio"})


def parse_resolution(value: Any) -> tuple[int, int]:
    """``"320x180"`` or ``[320, 180]`` to even (width, height)."""
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", value)
        if not match:
            raise ValueError(f"resolution {value!r} is not of the form 'WIDTHxHEIGHT'")
        width, height = int(match.group(1)), int(match.group(2))
    else:
        width, height = (int(v) for v in value)
    if width < 16 or height < 16 or width % 2 or height % 2:
        raise ValueError(f"resolution {width}x{height} must be even and at least 16x16")
    return width, height


@dataclass
class ReferenceEngine(VideoEngine):
    """A video engine that renders one clip per prompt, charged per generated second.

    Parameters it understands: ``seconds`` (required), ``resolution`` (``"WxH"``, default
    320x180), ``audio`` (native audio, default true). Anything else is refused as a provider
    error; the round's permitted surface is the gateway's to enforce, not the engine's.
    ``blocked_terms`` trigger a safety block; ``error_rate`` fails that share of calls with an
    explicit error, chosen deterministically from prompt, parameters and seed.
    """

    price_per_second: Decimal = Decimal("0.10")
    list_price_per_second: Decimal | None = None
    currency: str = "USD"
    fps: int = 12
    max_seconds: float = 20.0
    blocked_terms: tuple[str, ...] = ()
    error_rate: float = 0.0
    model_id: str = "duel-reference-engine"
    api_version: str = "1"
    font_path: Path = FONT_PATH

    def __post_init__(self) -> None:
        self.price_per_second = _decimal(self.price_per_second)
        if self.list_price_per_second is not None:
            self.list_price_per_second = _decimal(self.list_price_per_second)
        self.blocked_terms = tuple(t.lower() for t in self.blocked_terms)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ReferenceEngine:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(config) - known - {"adapter"})
        if unknown:
            raise AdapterConfigurationError(f"unknown reference engine options: {unknown}")
        kwargs = {k: v for k, v in config.items() if k in known}
        if "blocked_terms" in kwargs:
            kwargs["blocked_terms"] = tuple(kwargs["blocked_terms"])
        return cls(**kwargs)

    def _cost(self, seconds: float) -> CostReport:
        list_price = self.list_price_per_second or self.price_per_second
        return CostReport(
            currency=self.currency,
            amounts={
                "billed_cost": self.price_per_second * _decimal(round(seconds, 3)),
                "public_list_cost": list_price * _decimal(round(seconds, 3)),
            },
            units={"generated_seconds": round(seconds, 3)},
        )

    def generate(
        self, prompt: str, params: dict[str, Any], *, seed: int, dest_path: Path
    ) -> EngineClip:
        request_id = f"refeng-{uuid.uuid4().hex[:20]}"
        unknown = sorted(set(params) - ENGINE_PARAMETERS)
        if unknown:
            raise ProviderError(
                f"the engine does not accept parameters {unknown}", provider_request_id=request_id
            )
        try:
            seconds = float(params["seconds"])
            width, height = parse_resolution(params.get("resolution", "320x180"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderError(
                f"invalid engine parameters: {exc}", provider_request_id=request_id
            ) from exc
        if not 0 < seconds <= self.max_seconds:
            raise ProviderError(
                f"seconds must be in (0, {self.max_seconds:g}]", provider_request_id=request_id
            )
        lowered = prompt.lower()
        hits = [term for term in self.blocked_terms if term in lowered]
        if hits:
            raise SafetyBlock(
                "the engine's safety filter refused the prompt",
                provider_request_id=request_id,
                cost=CostReport.zero(self.currency),
                detail={"terms": hits},
            )
        digest = hashlib.sha256(canonical_json([prompt, params, int(seed)])).hexdigest()
        if self.error_rate > 0 and int(digest[:8], 16) / 2**32 < self.error_rate:
            raise ProviderError(
                "the engine failed to generate the clip",
                provider_request_id=request_id,
                cost=CostReport.zero(self.currency),
            )
        short_side = min(width, height)
        aspect = f"{width}:{height}"
        spec = plan_film(
            {"aspect_ratio": aspect},
            target_s=seconds,
            seed=int(digest[:15], 16),
            short_side=short_side,
            fps=self.fps,
            audio=bool(params.get("audio", True)),
            texts=[prompt],
            scene_names=["shot"],
            scene_weights=[1.0],
            font_path=self.font_path,
        )
        if (spec.width, spec.height) != (width, height):
            spec = replace(spec, width=width, height=height)
        try:
            render_film(spec, Path(dest_path))
        except ToolFailed as exc:
            raise InfrastructureFailure(
                f"engine render failed: {exc}", provider_request_id=request_id
            ) from exc
        return EngineClip(
            path=Path(dest_path),
            seconds=spec.seconds,
            cost=self._cost(spec.seconds),
            provider_request_id=request_id,
            details={"width": width, "height": height, "audio": spec.audio},
        )


# ---------------------------------------------------------------------------
# The reference orchestrator (an entrant's system in the Common Visual Engine class)


@dataclass(frozen=True)
class OrchestrationPlan:
    """How the reference orchestrator spends its engine credit.

    ``shot_seconds`` caps each engine call; ``takes_per_shot`` > 1 generates alternatives and
    keeps one (the rest are discarded seconds, an engine measure); ``params`` are passed to
    every engine call (the frozen resolution goes here); ``max_attempts_per_shot`` bounds how
    often a failed call is tried again with a plainer prompt; with ``use_native_audio`` the
    clips' own audio is kept, otherwise the orchestrator scores its own soundtrack. Shot
    lengths are whole frames at ``fps`` (the film's frame rate), so clips add up exactly.
    """

    shot_seconds: float = 10.0
    fps: int = 12
    takes_per_shot: int = 1
    params: Mapping[str, Any] = field(default_factory=dict)
    max_attempts_per_shot: int = 2
    use_native_audio: bool = False
    scene_weights: tuple[float, ...] = SCENE_WEIGHTS

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | OrchestrationPlan | None) -> OrchestrationPlan:
        if isinstance(value, OrchestrationPlan):
            return value
        value = dict(value or {})
        unknown = sorted(set(value) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown orchestration plan keys: {unknown}")
        if "scene_weights" in value:
            value["scene_weights"] = tuple(value["scene_weights"])
        return cls(**value)


@dataclass(frozen=True)
class ClipUse:
    """One engine clip and where it went."""

    scene: str
    shot: int
    take: int
    prompt: str
    params: Mapping[str, Any]
    seconds: float
    provider_request_id: str
    sha256: str
    path: Path

    def to_json(self) -> dict[str, Any]:
        return {
            "scene": self.scene,
            "shot": self.shot,
            "take": self.take,
            "prompt": self.prompt,
            "params": dict(self.params),
            "seconds": self.seconds,
            "provider_request_id": self.provider_request_id,
            "sha256": self.sha256,
        }


@dataclass(frozen=True)
class OrchestrationResult:
    """The assembled film and the record of every engine call that made it."""

    path: Path
    seconds: float
    used: tuple[ClipUse, ...]
    discarded: tuple[ClipUse, ...]
    failures: tuple[dict[str, Any], ...]
    engine_cost: CostReport | None

    @property
    def generated_seconds(self) -> float:
        return round(sum(c.seconds for c in self.used + self.discarded), 6)

    @property
    def discarded_seconds(self) -> float:
        return round(sum(c.seconds for c in self.discarded), 6)

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "generated_seconds": self.generated_seconds,
            "discarded_seconds": self.discarded_seconds,
            "used": [c.to_json() for c in self.used],
            "discarded": [c.to_json() for c in self.discarded],
            "failures": list(self.failures),
            "engine_cost": self.engine_cost.to_json() if self.engine_cost else None,
        }


class OrchestrationFailed(RuntimeError):
    """A shot could not be generated within the plan's attempts; ``failures`` says why."""

    def __init__(self, message: str, failures: Sequence[dict[str, Any]]) -> None:
        super().__init__(message)
        self.failures = list(failures)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _shots(frames: int, max_frames: int) -> list[int]:
    """Split a scene's frames into the fewest shots of at most ``max_frames``, near-equal."""
    count = max(1, math.ceil(frames / max(1, max_frames)))
    return _split_frames(frames, [1.0] * count)


def reference_orchestrate(
    package: Mapping[str, Any],
    engine_call: EngineCall,
    plan: Mapping[str, Any] | OrchestrationPlan | None,
    *,
    protocol: Protocol,
    seed: int,
    dest_path: Path,
    work_dir: Path | None = None,
) -> OrchestrationResult:
    """Plan scenes, call the engine for every shot, and assemble one film (protocol: Common
    Visual Engine: writing, planning, prompting, retries, audio and assembly above the engine).

    ``engine_call`` has ``VideoEngine.generate``'s signature: a :class:`ReferenceEngine`'s
    bound method offline, or the gateway's HTTP client in a round. Raw clips stay in
    ``work_dir`` (their paths are in the result, for archiving); the film is published
    atomically at ``dest_path``.
    """
    plan = OrchestrationPlan.from_json(plan)
    target_s = protocol.target_s(str(package["duration_class"]))
    params = dict(plan.params)
    if "resolution" in params:
        width, height = parse_resolution(params["resolution"])
    else:
        width, height = frame_size(str(package.get("aspect_ratio", "16:9")))
        params["resolution"] = f"{width}x{height}"

    work_dir = Path(work_dir or tempfile.mkdtemp(prefix="duel_orch_"))
    work_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(canonical_sha256({"package": dict(package), "seed": seed}))
    texts = scene_texts(package)
    scene_frames = _split_frames(round(target_s * plan.fps), plan.scene_weights)
    max_shot_frames = int(plan.shot_seconds * plan.fps)
    used: list[ClipUse] = []
    discarded: list[ClipUse] = []
    failures: list[dict[str, Any]] = []
    cost: CostReport | None = None
    for scene, text, frames in zip(SCENE_NAMES, texts, scene_frames, strict=True):
        for shot, shot_frames in enumerate(_shots(frames, max_shot_frames)):
            shot_s = round(shot_frames / plan.fps, 6)
            takes: list[ClipUse] = []
            for take in range(plan.takes_per_shot):
                prompt = f"{scene.capitalize()}: {text}"
                clip: EngineClip | None = None
                for attempt in range(plan.max_attempts_per_shot):
                    call_params = dict(params, seconds=shot_s)
                    path = work_dir / f"{scene}-{shot:03d}-{take}-{attempt}.mp4"
                    try:
                        clip = engine_call(
                            prompt, call_params, seed=rng.randrange(0, 2**31), dest_path=path
                        )
                        break
                    except ProviderFailure as exc:
                        failures.append(
                            {"scene": scene, "shot": shot, "take": take, **exc.to_json()}
                        )
                        if exc.cost is not None:
                            cost = exc.cost if cost is None else cost + exc.cost
                        # A plainer prompt the second time: the scene name and a mood only.
                        prompt = f"{scene.capitalize()}: a quiet, wordless moment"
                if clip is None:
                    raise OrchestrationFailed(
                        f"no clip for {scene} shot {shot} take {take} after "
                        f"{plan.max_attempts_per_shot} attempts",
                        failures,
                    )
                cost = clip.cost if cost is None else cost + clip.cost
                takes.append(
                    ClipUse(
                        scene=scene,
                        shot=shot,
                        take=take,
                        prompt=prompt,
                        params=call_params,
                        seconds=float(clip.seconds),
                        provider_request_id=clip.provider_request_id,
                        sha256=_sha256_file(clip.path),
                        path=Path(clip.path),
                    )
                )
            # Keep the take with the most picture detail (largest encoded size); a crude but
            # deterministic stand-in for an entrant's selection step.
            keep = max(takes, key=lambda c: (c.path.stat().st_size, -c.take))
            used.append(keep)
            discarded.extend(c for c in takes if c is not keep)
    seconds = assemble_film(
        [c.path for c in used],
        dest_path,
        width=width,
        height=height,
        soundtrack_seed=rng.randrange(0, 2**31) if not plan.use_native_audio else None,
        package=package,
        fps=plan.fps,
        work_dir=work_dir,
    )
    return OrchestrationResult(
        path=Path(dest_path),
        seconds=seconds,
        used=tuple(used),
        discarded=tuple(discarded),
        failures=tuple(failures),
        engine_cost=cost,
    )


def assemble_film(
    clips: Sequence[Path],
    dest_path: Path,
    *,
    width: int,
    height: int,
    soundtrack_seed: int | None,
    package: Mapping[str, Any] | None = None,
    fps: int = 12,
    work_dir: Path | None = None,
) -> float:
    """Concatenate ``clips`` (ffmpeg concat demuxer, re-encoded) into one film; return seconds.

    With ``soundtrack_seed`` the clips' audio is replaced by a soundtrack scored for the film's
    length; without it the clips' native audio is kept (every clip must have some).
    """
    with _scratch(work_dir) as scratch, publishing(Path(dest_path)) as tmp:
        listing = scratch / "clips.txt"
        listing.write_text(
            "".join(f"file '{Path(c).resolve().as_posix()}'\n" for c in clips), encoding="utf-8"
        )
        args = [FFMPEG, "-v", "error", "-y", "-f", "concat", "-safe", "0"]
        args += ["-i", str(listing)]
        chunks = None
        total_s = sum(probed_seconds(probe(Path(c))) for c in clips)
        if soundtrack_seed is not None:
            score = plan_film(
                dict(package or {}, aspect_ratio=f"{width}:{height}"),
                target_s=total_s,
                seed=soundtrack_seed,
                fps=fps,
                short_side=min(width, height),
            )
            chunks = soundtrack_chunks(score)
            args += _pcm_input(score.sample_rate) + ["-map", "0:v:0", "-map", "1:a:0"]
        else:
            args += ["-map", "0:v:0", "-map", "0:a:0"]
        args += [
            "-vf",
            f"scale={width}:{height}:flags=bilinear,setsar=1,fps={fps}",
            *_FAST_X264,
            "-threads",
            "1",
            "-c:a",
            "aac",
            "-b:a",
            "64k",
            "-ac",
            "1",
            "-shortest",
            "-fflags",
            "+bitexact",
            "-flags:v",
            "+bitexact",
            "-flags:a",
            "+bitexact",
            "-map_metadata",
            "-1",
            "-f",
            "mp4",
            str(tmp),
        ]
        run_tool(args, stdin_chunks=chunks)
        return probed_seconds(probe(tmp))
