"""Validation and effective duration on synthetic media with known sections and defects.

Requirements are built directly (target and tolerance passed in) so the files stay a few
seconds long; the protocol-driven path is covered by the command and service tests.
"""

from __future__ import annotations

import pytest
from media_samples import FRAME_S, SECTIONS

from media_pipeline.analysis import analyse_media
from media_pipeline.detection import (
    DEFAULT_DETECTION_THRESHOLDS,
    ThresholdsInvalid,
    credits_not_counted,
    detection_controls,
    effective_duration,
    interval_union,
    not_counted_intervals,
    validated_thresholds,
)
from media_pipeline.validation import MediaRequirements
from rounds.protocols import Protocol

AI_DUEL = Protocol.load("ai-duel-0.1")
NOT_COUNTED = tuple(AI_DUEL.section("not_counted_in_effective_duration"))


def requirements(target_s=3.0, tolerance_s=0.15, aspect="16:9", not_counted=NOT_COUNTED):
    return MediaRequirements(
        target_s=target_s, tolerance_s=tolerance_s, aspect_ratio=aspect, not_counted=not_counted
    )


def assert_spans(found, expected, tolerance=FRAME_S + 1e-3):
    assert len(found) == len(expected), (found, expected)
    for (a, b), (x, y) in zip(found, expected, strict=True):
        assert a == pytest.approx(x, abs=tolerance) and b == pytest.approx(y, abs=tolerance)


@pytest.fixture(scope="module")
def sections_report(media):
    return analyse_media(
        media.get("sections.mp4"), requirements=requirements(target_s=SECTIONS["duration"])
    )


def test_each_detector_finds_its_section_within_a_frame(sections_report):
    d = sections_report.detections
    assert_spans(d["black"], [SECTIONS["black"]])
    # The black stretch is also a frozen picture; the still is the other freeze.
    assert_spans(d["frozen"], [SECTIONS["black"], SECTIONS["frozen_still"]])
    assert_spans(d["silence"], [SECTIONS["silence"]])
    assert_spans(d["filler"], [SECTIONS["filler"]])
    assert_spans(d["credits"], [SECTIONS["credits"]])
    assert sections_report.credits_style == "scroll"


def test_effective_duration_subtracts_what_the_protocol_does_not_count(sections_report):
    duration = SECTIONS["duration"]
    allowance = min(
        DEFAULT_DETECTION_THRESHOLDS["credits_allowance_fraction"] * duration,
        DEFAULT_DETECTION_THRESHOLDS["credits_allowance_max_s"],
    )
    credits_start, credits_end = SECTIONS["credits"]
    removed = interval_union(
        [
            SECTIONS["black"],
            SECTIONS["frozen_still"],
            SECTIONS["filler"],
            (credits_start + allowance, credits_end),
        ]
    )
    expected = duration - sum(b - a for a, b in removed)
    assert sections_report.duration_s == pytest.approx(duration, abs=FRAME_S)
    assert sections_report.effective_duration_s == pytest.approx(expected, abs=2 * FRAME_S)
    # Silence is reported but not subtracted: the definition does not list it.
    assert "silence" not in NOT_COUNTED
    assert sections_report.problem_codes == ["duration_nonconforming"]
    assert sections_report.analysed and sections_report.playable
    assert not sections_report.conforming


def test_tovaki_counts_filler_and_credits_but_not_black_or_frozen(sections_report):
    tovaki = tuple(Protocol.load("tovaki-2026-r1").section("not_counted_in_effective_duration"))
    spans = not_counted_intervals(
        sections_report.detections, tovaki, SECTIONS["duration"], DEFAULT_DETECTION_THRESHOLDS
    )
    assert_spans(spans, [SECTIONS["black"], SECTIONS["frozen_still"]])


def test_a_clean_clip_conforms(media):
    report = analyse_media(media.get("landscape.mp4"), requirements=requirements())
    assert report.conforming, report.problems
    assert report.inspect_json()["problems"] == []
    assert all(not spans for spans in report.detections.values())
    assert (report.width, report.height, report.fps) == (320, 180, 24.0)
    assert report.effective_duration_s == pytest.approx(3.0, abs=FRAME_S)


@pytest.mark.parametrize(
    ("name", "aspect", "codes", "analysed"),
    [
        ("no_audio.mp4", "16:9", ["no_audio_stream"], True),
        ("four_three.mp4", "16:9", ["aspect_ratio_mismatch"], True),
        ("anamorphic.mp4", "16:9", [], True),
        ("rotated.mp4", "16:9", ["aspect_ratio_mismatch"], True),
        ("rotated.mp4", "9:16", [], True),
        ("portrait.mp4", "9:16", [], True),
        ("square.mp4", "1:1", [], True),
        ("two_audio.mkv", "16:9", ["multiple_audio_streams"], True),
        ("two_video.mkv", "16:9", ["multiple_video_streams"], True),
        ("cover_art.mp4", "16:9", [], True),
        ("truncated.mp4", "16:9", ["not_playable"], False),
        ("truncated.mkv", "16:9", ["not_playable"], False),
        ("empty.mp4", "16:9", ["file_empty"], False),
        ("garbage.bin", "16:9", ["unreadable"], False),
        ("huge_header.y4m", "16:9", ["resolution_too_large"], False),
        ("many_streams.mkv", "16:9", ["too_many_streams"], False),
    ],
)
def test_defects_get_their_exact_problem_codes(media, name, aspect, codes, analysed):
    report = analyse_media(media.get(name), requirements=requirements(aspect=aspect))
    assert report.problem_codes == codes, report.problems
    assert report.analysed is analysed
    assert report.conforming is (not codes)
    assert all(p.message for p in report.problems)


def test_cover_art_and_rotation_are_reported(media):
    cover = analyse_media(media.get("cover_art.mp4"), requirements=requirements())
    assert cover.video_streams == 1 and cover.attached_pictures == 1
    assert "cover_art_ignored" in cover.notes
    rotated = analyse_media(media.get("rotated.mp4"), requirements=requirements(aspect="9:16"))
    assert rotated.display_aspect_ratio == "9:16"
    anamorphic = analyse_media(media.get("anamorphic.mp4"), requirements=requirements())
    assert (anamorphic.width, anamorphic.height, anamorphic.display_aspect_ratio) == (
        240,
        180,
        "16:9",
    )


@pytest.mark.parametrize(
    ("name", "conforming"),
    [("landscape.mp4", False), ("four_seconds.mp4", True), ("full.mkv", True)],
)
def test_duration_tolerance_too_short_and_too_long(media, name, conforming):
    report = analyse_media(
        media.get(name), requirements=requirements(target_s=4.0, tolerance_s=0.2)
    )
    assert report.conforming is conforming
    assert ("duration_nonconforming" in report.problem_codes) is (not conforming)
    too_long = analyse_media(
        media.get(name), requirements=requirements(target_s=2.0, tolerance_s=0.2)
    )
    assert too_long.problem_codes == ["duration_nonconforming"]


def test_container_without_stored_duration_uses_the_decoded_one(media):
    report = analyse_media(media.get("no_duration.mkv"), requirements=requirements())
    assert "duration_not_stored" in report.notes
    assert report.duration_s == pytest.approx(3.0, abs=2 * FRAME_S)
    assert report.conforming


def test_variable_frame_rate_is_noted_and_timed_by_timestamps(media):
    report = analyse_media(media.get("vfr.mkv"), requirements=requirements(target_s=5.5))
    assert "variable_frame_rate" in report.notes
    assert_spans(report.detections["black"], [(4.0, 5.5)], tolerance=2 * FRAME_S)


def test_declared_duration_beyond_the_bound_is_rejected_before_decoding(media):
    thresholds = dict(DEFAULT_DETECTION_THRESHOLDS, max_duration_s=2.0)
    report = analyse_media(
        media.get("landscape.mp4"), requirements=requirements(), thresholds=thresholds
    )
    assert report.problem_codes == ["duration_too_long"] and not report.analysed
    # Without a stored duration the decode itself stops at the bound.
    report = analyse_media(
        media.get("no_duration.mkv"), requirements=requirements(), thresholds=thresholds
    )
    assert report.problem_codes == ["duration_too_long"]


def test_decode_time_limit_is_enforced(media):
    report = analyse_media(
        media.get("sections.mp4"), requirements=requirements(), decode_time_limit=0.01
    )
    assert report.problem_codes == ["analysis_timeout"] and not report.analysed


def test_the_file_is_never_modified(media):
    path = media.get("sections.mp4")
    before = path.read_bytes()
    report = analyse_media(path, requirements=requirements())
    assert path.read_bytes() == before
    import hashlib

    assert report.sha256 == hashlib.sha256(before).hexdigest()


def test_thresholds_are_complete_numeric_and_hashed_with_the_ffmpeg_version():
    controls = detection_controls()
    assert controls["thresholds"] == DEFAULT_DETECTION_THRESHOLDS
    assert len(controls["thresholds_sha256"]) == 64
    assert controls["ffmpeg_version"].startswith("ffmpeg version")
    with pytest.raises(ThresholdsInvalid):
        validated_thresholds({"black": {"min_duration_s": 0.5}})
    with pytest.raises(ThresholdsInvalid):
        validated_thresholds(dict(DEFAULT_DETECTION_THRESHOLDS, black_min_s="1"))


def test_excessive_credits_is_only_what_exceeds_the_allowance():
    thresholds = dict(
        DEFAULT_DETECTION_THRESHOLDS, credits_allowance_fraction=0.05, credits_allowance_max_s=60
    )
    assert credits_not_counted([(50.0, 60.0)], 60.0, thresholds) == [(53.0, 60.0)]
    assert credits_not_counted([(58.0, 60.0)], 60.0, thresholds) == []
    assert credits_not_counted([(6000.0, 7200.0)], 7200.0, thresholds) == [(6060.0, 7200.0)]


def test_unknown_protocol_terms_are_refused():
    with pytest.raises(ValueError):
        not_counted_intervals({}, ["dancing_frames"], 10.0, DEFAULT_DETECTION_THRESHOLDS)
    assert effective_duration(10.0, [(1.0, 3.0), (2.0, 4.0)]) == 7.0
