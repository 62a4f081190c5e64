"""Detector arithmetic on hand-made inputs: log parsing, repeated filler, credits."""

from __future__ import annotations

import numpy as np
import pytest

from media_pipeline.detection import (
    DEFAULT_DETECTION_THRESHOLDS,
    find_credits,
    find_repeated_filler,
    parse_detector_lines,
)

FPS = 25.0
TH = DEFAULT_DETECTION_THRESHOLDS


def test_runs_open_at_the_end_close_at_the_stream_end():
    lines = [
        "[blackdetect @ 0x1] [info] black_start:8 black_end:9.96 black_duration:1.96",
        "[freezedetect @ 0x2] [info] lavfi.freezedetect.freeze_start: 7.5",
        "[silencedetect @ 0x3] [info] silence_start: 2.5",
        "[silencedetect @ 0x3] [info] silence_end: 4 | silence_duration: 1.5",
        "[silencedetect @ 0x3] [info] silence_start: 9.1",
    ]
    found = parse_detector_lines(lines, video_end_s=10.0, audio_end_s=10.0, frame_s=0.04)
    assert found == {
        "black": [(8.0, 10.0)],
        "frozen": [(7.5, 10.0)],
        "silence": [(2.5, 4.0), (9.1, 10.0)],
    }


def moving_grids(frames: int, seed: int) -> np.ndarray:
    """Footage that changes every frame: a random walk of 8x6 grids."""
    rng = np.random.default_rng(seed)
    steps = rng.normal(0, 6, size=(frames, 48))
    return np.clip(128 + np.cumsum(steps, axis=0) % 100, 30, 230).astype(np.uint8)


def test_a_repeated_stretch_is_found_to_the_frame():
    footage = moving_grids(250, seed=1)
    repeat = footage[50:150].copy()  # 4 s of earlier footage shown again at 10-14 s
    grids = np.concatenate([footage, repeat, moving_grids(100, seed=2)])
    noisy = np.clip(
        grids.astype(int) + np.random.default_rng(3).integers(-1, 2, grids.shape), 0, 255
    )
    spans = find_repeated_filler(noisy.astype(np.uint8), noisy.mean(axis=1), FPS, TH)
    assert spans == [(pytest.approx(10.0), pytest.approx(14.0))]


def test_slowly_changing_footage_is_not_filler():
    t = np.arange(600)[:, None]
    drift = 100 + 40 * np.sin(t / 200.0 + np.arange(48)[None, :])  # a slow, smooth change
    grids = drift.astype(np.uint8)
    assert find_repeated_filler(grids, grids.mean(axis=1), FPS, TH) == []


def test_static_footage_is_left_to_the_frozen_detector():
    grids = np.full((500, 48), 120, np.uint8)
    assert find_repeated_filler(grids, grids.mean(axis=1), FPS, TH) == []


def credit_arrays(pattern: list[tuple[str, float]]) -> tuple[np.ndarray, np.ndarray]:
    kinds = {"picture": (0.2, 0.5), "text": (0.9, 0.05), "black": (1.0, 0.0)}
    dark, text = [], []
    for kind, seconds in pattern:
        d, t = kinds[kind]
        dark += [d] * int(seconds * FPS)
        text += [t] * int(seconds * FPS)
    return np.array(dark, np.float32), np.array(text, np.float32)


def test_trailing_text_on_dark_is_credits_even_with_black_between_cards():
    dark, text = credit_arrays([("picture", 50), ("text", 3), ("black", 0.4), ("text", 4),
                                ("black", 1)])  # fmt: skip
    found = find_credits(dark, text, FPS, TH)
    assert found is not None
    assert found.interval == (pytest.approx(50.0), pytest.approx(57.4))
    assert found.style == "cards"


def test_credits_stop_at_a_long_return_to_pictures():
    dark, text = credit_arrays([("text", 10), ("picture", 5), ("text", 6)])
    found = find_credits(dark, text, FPS, TH)
    assert found.interval == (pytest.approx(15.0), pytest.approx(21.0))


@pytest.mark.parametrize(
    "pattern",
    [
        [("picture", 30), ("black", 10)],  # a black ending is not credits
        [("text", 10), ("picture", 20)],  # opening titles are not trailing credits
        [("picture", 30), ("text", 2)],  # too short
    ],
)
def test_not_credits(pattern):
    dark, text = credit_arrays(pattern)
    assert find_credits(dark, text, FPS, TH) is None
