"""A juror judges one within-segment pair in Debian's Chromium (protocol: Public segment
result): both clips play through the page with the server's playback proof, then the forced
choice is recorded. Real 4 s films (1 s windows) go through the real run services."""

from __future__ import annotations

import pytest
from django.urls import reverse

from juries import services
from juries.models import SegmentVote, SegmentWindow
from media_pipeline.models import SegmentClip
from rounds.models import Run
from tests.juries.test_jury_browser import browser  # noqa: F401 - the Chromium fixture
from tests.juries.test_segment_pages import _record_proxy

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_juror_judges_a_segment_pair_in_chromium(
    drop_triggers_before_flush,
    live_server,
    browser,  # noqa: F811
    tmp_path,
    film_factory,
    jury_round,
    plan_jury,
    judging,
):
    films = [film_factory(tmp_path / "a.mp4", 4.0), film_factory(tmp_path / "b.mp4", 4.0, tone=660)]
    round_ = jury_round(duration_class="minute_5", entries=2, films=films)
    for run in Run.objects.filter(entry__round=round_).select_related("accepted_attempt"):
        _record_proxy(run)
    _, seated = plan_jury(round_, jurors={"audience": 1})
    judging(round_)
    services.segment_windows_publish(round_=round_, actor="t")
    juror = seated["audience"][0]

    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_server.url}{reverse('juries:segments', args=[round_.slug])}")
    page.fill("#id_username", juror.user.username)
    page.fill("#id_password", "juror-pass")
    page.click("button[type=submit]")
    page.wait_for_selector("#pair", timeout=60_000)
    assert "does not measure full story quality" in page.inner_text("#segment-scope")
    assert page.is_disabled("#clip-1 button.play")
    assert page.is_disabled("#segment-choice button[value=first]")

    page.click("#clip-0 button.play")
    page.wait_for_selector("#clip-1 button.play:enabled", timeout=30_000)
    page.click("#clip-1 button.play")
    page.wait_for_selector("#segment-choice button[value=second]:enabled", timeout=30_000)
    page.click("#segment-choice button[value=second]")
    page.wait_for_selector("#pair", timeout=60_000)  # the next pair
    assert errors == []

    vote = SegmentVote.objects.select_related("window_a", "window_b").get()
    assert vote.juror == juror and vote.outcome == "b"
    assert vote.window_a.index == vote.window_b.index
    assert vote.window_a.film_id != vote.window_b.film_id
    assert SegmentClip.objects.count() >= 2
    body = page.content()
    for entry in round_.entries.select_related("system_version__system"):
        assert entry.label not in body
        assert entry.system_version.system.name not in body
    remaining = SegmentWindow.objects.filter(round=round_).count() // 2 - 1
    assert f"{remaining} pairs left" in body
