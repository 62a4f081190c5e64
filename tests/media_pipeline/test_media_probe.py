"""Parsing ffprobe JSON: cover art, display aspect with SAR and rotation, VFR, no duration."""

from __future__ import annotations

from fractions import Fraction

import pytest

from media_pipeline.probe import ProbeOutputInvalid, aspect_ratio_text, parse_probe


def _video(**over):
    stream = {
        "index": 0,
        "codec_type": "video",
        "codec_name": "h264",
        "width": 1920,
        "height": 1080,
        "sample_aspect_ratio": "1:1",
        "r_frame_rate": "24/1",
        "avg_frame_rate": "24/1",
        "start_time": "0.000000",
        "duration": "60.000000",
        "disposition": {"attached_pic": 0},
    }
    stream.update(over)
    return stream


def _audio(index=1):
    return {
        "index": index,
        "codec_type": "audio",
        "codec_name": "aac",
        "sample_rate": "48000",
        "channels": 2,
        "start_time": "0.0",
        "duration": "60.0",
    }


def test_cover_art_is_not_a_video_stream():
    doc = {
        "format": {"duration": "60.0", "format_name": "mov"},
        "streams": [
            _video(),
            _audio(),
            _video(index=2, codec_name="png", disposition={"attached_pic": 1}),
        ],
    }
    probe = parse_probe(doc)
    assert len(probe.video_streams) == 1
    assert probe.attached_pictures == 1
    assert probe.stream_count == 3


@pytest.mark.parametrize(
    ("width", "height", "sar", "rotation", "expected"),
    [
        (1920, 1080, "1:1", None, "16:9"),
        (1440, 1080, "4:3", None, "16:9"),
        (720, 576, "64:45", None, "16:9"),
        (1920, 1080, "1:1", -90, "9:16"),
        (1920, 1080, "1:1", 180, "16:9"),
        (1080, 1080, "0:1", None, "1:1"),
    ],
)
def test_display_aspect_honours_sar_and_rotation(width, height, sar, rotation, expected):
    extra = {"side_data_list": [{"side_data_type": "Display Matrix", "rotation": rotation}]}
    stream = _video(
        width=width,
        height=height,
        sample_aspect_ratio=sar,
        **(extra if rotation is not None else {}),
    )
    probe = parse_probe({"format": {}, "streams": [stream]})
    assert aspect_ratio_text(probe.video.display_aspect_ratio) == expected


def test_rotate_tag_of_older_files_counts():
    stream = _video(tags={"rotate": "270"})
    probe = parse_probe({"format": {}, "streams": [stream]})
    assert probe.video.display_aspect_ratio == Fraction(9, 16)


def test_variable_frame_rate_and_missing_duration():
    stream = _video(r_frame_rate="30/1", avg_frame_rate="2400/101", duration="N/A")
    probe = parse_probe({"format": {"format_name": "matroska,webm"}, "streams": [stream]})
    assert probe.video.variable_frame_rate
    assert probe.duration_s is None and not probe.duration_stored
    assert probe.video.nominal_fps == pytest.approx(2400 / 101)


def test_non_json_output_is_rejected():
    with pytest.raises(ProbeOutputInvalid):
        parse_probe(b"\x00not json")
