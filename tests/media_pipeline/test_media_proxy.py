"""The review proxy: canvas, padding, no upscaling, frames, timing, stripped metadata,
reproducibility (Output requirements; issue 4 "Review proxy")."""

from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import pytest

from media_pipeline import proxy as proxy_module
from media_pipeline.probe import probe_file
from media_pipeline.proxy import (
    ProxyRecipe,
    RecipeInvalid,
    WatermarkFontMissing,
    encode_proxy,
    verify_proxy,
)
from rounds.protocols import Protocol

CANVAS = (640, 360)
AI_DUEL_RECIPE = ProxyRecipe.from_definition(
    Protocol.load("ai-duel-0.1").proxy_recipe, canvas=CANVAS
)
# Geometry and timing do not depend on the x264 preset; a fast one keeps the tests quick.
PLAIN_RECIPE = dataclasses.replace(AI_DUEL_RECIPE, watermark=None, preset="veryfast")


def frame_rgb(path, at_s: float = 1.0) -> np.ndarray:
    raw = subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-ss",
            str(at_s),
            "-i",
            str(path),
            "-frames:v",
            "1",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    ).stdout
    probe = probe_file(str(path))
    return np.frombuffer(raw, np.uint8).reshape(probe.video.height, probe.video.width, 3)


def content_box(frame: np.ndarray, pad=(128, 128, 128), tolerance=24) -> tuple[int, int, int, int]:
    """(x, y, width, height) of everything that is not the neutral padding."""
    differs = (np.abs(frame.astype(int) - np.array(pad)) > tolerance).any(axis=2)
    rows, cols = np.nonzero(differs.any(axis=1))[0], np.nonzero(differs.any(axis=0))[0]
    return int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1)


def build(media, name, tmp_path, recipe=PLAIN_RECIPE, suffix=""):
    target = tmp_path / f"{name}{suffix}.proxy.mp4"
    original = encode_proxy(media.get(name), target, recipe=recipe)
    return target, verify_proxy(original, target, recipe=recipe)


@pytest.fixture(scope="module")
def built(media, tmp_path_factory):
    """Proxies shared by several tests: (name, watermarked) -> (path, verification)."""
    cache: dict = {}
    directory = tmp_path_factory.mktemp("proxies")

    def get(name: str, watermarked: bool = False):
        key = (name, watermarked)
        if key not in cache:
            recipe = AI_DUEL_RECIPE if watermarked else PLAIN_RECIPE
            cache[key] = build(media, name, directory, recipe=recipe, suffix=f"-{watermarked}")
        return cache[key]

    return get


@pytest.mark.parametrize(
    ("name", "box"),
    [
        ("landscape.mp4", (160, 90, 320, 180)),  # smaller than the canvas: never upscaled
        ("portrait.mp4", (230, 20, 180, 320)),
        ("square.mp4", (200, 60, 240, 240)),
        ("large.mp4", (0, 0, 640, 360)),  # larger: scaled down to fit, whole image kept
        ("rotated.mp4", (230, 20, 180, 320)),  # shown as a player shows it
        ("anamorphic.mp4", (200, 113, 240, 134)),  # SAR applied by shrinking, not stretching
    ],
)
def test_whole_picture_fits_the_canvas_centred_with_neutral_padding(built, name, box):
    target, verification = built(name)
    assert verification.ok, verification.checks
    assert verification.checks["canvas"]["proxy"] == list(CANVAS)
    found = content_box(frame_rgb(target, 0.5))
    assert all(abs(a - b) <= 2 for a, b in zip(found, box, strict=True)), (found, box)


def test_frame_count_duration_and_audio_timing_are_kept(media, tmp_path):
    target, verification = build(media, "offset_audio.mp4", tmp_path)
    checks = verification.checks
    assert verification.ok, checks
    assert checks["frame_count"]["original"] == checks["frame_count"]["proxy"] == 72
    offset = checks["audio_start_offset"]
    assert offset["expected"] == pytest.approx(0.5, abs=1 / 24)  # AAC priming shifts ~21 ms
    assert offset["actual"] == pytest.approx(offset["expected"], abs=1 / 24)
    proxy = probe_file(str(target), count_packets=True)
    assert proxy.duration_s == pytest.approx(3.0, abs=1 / 24)
    assert (proxy.audio.sample_rate, proxy.audio.channels) == (48000, 2)


def test_variable_frame_rate_keeps_every_frame(media, tmp_path):
    _target, verification = build(media, "vfr.mkv", tmp_path)
    assert verification.ok, verification.checks
    assert verification.checks["frame_count"]["proxy"] == 48 + 16 + 36


def test_fixed_rate_recipe_converts_without_losing_duration(media, tmp_path):
    tovaki = ProxyRecipe.from_definition(Protocol.load("tovaki-2026-r1").proxy_recipe)
    target, verification = build(media, "vfr.mkv", tmp_path, recipe=tovaki)
    assert verification.ok, verification.checks
    proxy = probe_file(str(target), count_packets=True)
    assert (proxy.video.width, proxy.video.height) == (720, 1280)
    assert proxy.video.packet_count == pytest.approx(5.5 * 24, abs=1)
    assert float(proxy.video.average_frame_rate) == pytest.approx(24)


def test_metadata_that_could_identify_a_system_is_stripped(media, tmp_path):
    source = media.get("tagged.mov")
    assert b"SecretSystem" in source.read_bytes()
    target, verification = build(media, "tagged.mov", tmp_path, recipe=AI_DUEL_RECIPE)
    assert verification.checks["metadata_stripped"] == {"ok": True, "unexpected_tags": []}
    data = target.read_bytes()
    for marker in (b"SecretSystem", b"Lavf", b"x264 - core", b"2026-01-02"):
        assert marker not in data
    probe = probe_file(str(target))
    assert "title" not in probe.format_tags and "creation_time" not in probe.format_tags


def test_same_original_and_recipe_give_a_byte_identical_proxy(built, media, tmp_path):
    first, one = built("landscape.mp4", watermarked=True)
    second, two = build(media, "landscape.mp4", tmp_path, recipe=AI_DUEL_RECIPE, suffix="-2")
    assert one.sha256 == two.sha256
    assert first.read_bytes() == second.read_bytes()


def test_watermark_is_drawn_bottom_right_on_every_proxy(built):
    marked, _ = built("landscape.mp4", watermarked=True)
    plain, _ = built("landscape.mp4")
    difference = np.abs(frame_rgb(marked).astype(int) - frame_rgb(plain).astype(int)).sum(axis=2)
    changed_rows, changed_cols = np.nonzero(difference > 40)
    assert changed_rows.size > 100
    assert changed_rows.min() > CANVAS[1] * 0.8 and changed_cols.min() > CANVAS[0] * 0.5


def test_missing_watermark_font_fails_clearly(monkeypatch, media, tmp_path):
    monkeypatch.setattr(proxy_module, "FONT_DIRECTORIES", (str(tmp_path / "nofonts"),))
    with pytest.raises(WatermarkFontMissing, match="DejaVuSans.ttf"):
        build(media, "landscape.mp4", tmp_path, recipe=AI_DUEL_RECIPE)


def test_recipes_that_would_upscale_or_crop_are_refused():
    definition = Protocol.load("ai-duel-0.1").proxy_recipe
    with pytest.raises(RecipeInvalid):
        ProxyRecipe.from_definition(dict(definition, scale="fit"))
    with pytest.raises(RecipeInvalid):
        ProxyRecipe.from_definition(definition, canvas=(641, 360))
    assert AI_DUEL_RECIPE.keeps_frame_rate
