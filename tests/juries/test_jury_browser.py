"""A staff-planned jury for a 5-minute round, completed by a juror in Debian's Chromium.

Real short films (3 s and 3.5 s, picture and sound, made with ffmpeg lavfi) go through the
real run services; the playback proof uses their probed proxy durations; the browser plays
them through the juror pages against ``live_server``.
"""

from __future__ import annotations

import re
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import F
from django.urls import reverse

from juries import selectors
from juries.models import JuryPlan, PlaybackBeat, Scorecard, ScreeningSession, Viewing

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
BREAK = timedelta(seconds=30)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]


def _require_browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - depends on the machine
        sync_playwright = None
    if sync_playwright is None or not Path(CHROMIUM).exists() or not shutil.which("ffmpeg"):
        message = "Playwright with Debian's Chromium and ffmpeg"
        if settings.DUEL_REQUIRE_SERVICES:
            pytest.fail(f"{message} is required (DUEL_REQUIRE_SERVICES=1) but not available")
        pytest.skip(f"{message} not available")
    return sync_playwright


@pytest.fixture
def browser(monkeypatch):
    sync_playwright = _require_browser()
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # still synchronous and safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
            # ORM calls made while Playwright's loop runs get connections of their own
            # context; close them, or PostgreSQL cannot drop the test database.
            connections.close_all()


def test_staff_plan_and_a_juror_completes_a_session_in_chromium(
    drop_triggers_before_flush,
    live_server,
    browser,
    tmp_path,
    film_factory,
    jury_round,
    plan_jury,
    judging,
):
    films = [film_factory(tmp_path / "a.mp4", 3.0), film_factory(tmp_path / "b.mp4", 3.5, tone=660)]
    round_ = jury_round(duration_class="minute_5", entries=2, films=films)
    plan, seated = plan_jury(round_, jurors={"audience": 1}, break_length=BREAK, freeze=False)
    for dimension in round_.protocol.quality_dimensions:
        plan.anchors[dimension]["3"] = "competent"
    plan.save(update_fields=["anchors"])
    juror = seated["audience"][0]
    get_user_model().objects.create_superuser("staff", password="staff-pass")

    # Staff freeze the plan and schedule the sessions from the admin.
    staff = browser.new_page()
    staff.goto(f"{live_server.url}/admin/login/?next=/admin/juries/juryplan/")
    staff.fill("#id_username", "staff")
    staff.fill("#id_password", "staff-pass")
    staff.click("input[type=submit], button[type=submit]")
    for action, done in (("freeze_plan", "1 plan(s) frozen"), ("plan_sessions", "scheduled")):
        staff.check(f"input[name=_selected_action][value='{plan.pk}']")
        staff.select_option("select[name=action]", action)
        staff.click("button[name=index]")
        staff.wait_for_selector(f"text={done}")
    staff.close()
    plan = JuryPlan.objects.get(pk=plan.pk)
    assert plan.is_frozen
    session = ScreeningSession.objects.get(juror=juror)
    viewings = list(Viewing.objects.filter(juror=juror).order_by("order_index"))
    assert len(viewings) == 2
    judging(round_)

    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_server.url}/jury/")
    assert "/jury/login/" in page.url
    page.fill("#id_username", juror.user.username)
    page.fill("#id_password", "juror-pass")
    page.click("button[type=submit]")
    page.wait_for_selector(f"text={juror.public_id}")
    page.click("text=Open session")
    assert page.url.endswith(f"/jury/session/{session.public_id}/")

    for position, viewing in enumerate(viewings):
        label = viewing.film.display_label
        page.wait_for_selector(f"li[data-film='{label}'][data-state='start']")
        if position == 1:
            # The fixed break: the page counts down and the server refuses an early start.
            assert page.is_disabled("#start")
            assert "Break" in page.inner_text("#countdown")
            refused = page.evaluate(
                """async (url) => {
                    const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
                    const r = await fetch(url, {method: "POST", headers: {"X-CSRFToken": token}});
                    return [r.status, await r.json()];
                }""",
                reverse("juries:viewing-start", args=[viewing.public_id]),
            )
            assert refused[0] == 409 and "the fixed break is not over" in refused[1]["errors"]
            # Let all but the last second of the break pass, then wait for the countdown.
            Viewing.objects.filter(pk=viewings[0].pk).update(
                completed_at=F("completed_at") - (BREAK - timedelta(seconds=1))
            )
            page.reload()
        page.wait_for_selector("#start:enabled", timeout=60_000)
        page.click("#start")
        page.wait_for_selector("#questions", timeout=60_000)
        checked = Viewing.objects.get(pk=viewing.pk)
        assert checked.is_complete and checked.coverage >= 0.98 and checked.reached_ending
        for question in viewing.film.package.attention_questions.order_by("id"):
            page.check(f"input[name='q_{question.pk}'][value='{question.correct_choice}']")
        page.click("#questions button[type=submit]")
        page.wait_for_selector("#scorecard")
        for dimension in round_.protocol.quality_dimensions:
            page.select_option(f"select[name='score_{dimension}']", "3")
        if position == 1:
            page.check(f"input[name='choice_{viewings[0].public_id}'][value='earlier']")
        page.click("#scorecard button[value=lock]")
        page.wait_for_load_state()
        assert Scorecard.objects.get(viewing=viewing).is_locked

    page.wait_for_selector("#session-finished")
    assert errors == []
    body = page.content()
    for entry in round_.entries.select_related("system_version__system"):
        assert entry.system_version.system.name not in body
        assert not re.search(re.escape(entry.system_version.system.vendor), body)

    # The server saw real-time playback at rate 1 and credited it, against the proxies' real
    # (probed) durations.
    for viewing in viewings:
        outcomes = set(
            PlaybackBeat.objects.filter(viewing=viewing).values_list("outcome", flat=True)
        )
        assert "credited" in outcomes and "impossible_progress" not in outcomes
    durations = sorted(v.film.duration_s for v in viewings)
    assert durations == [pytest.approx(3.0, abs=0.1), pytest.approx(3.5, abs=0.1)]
    assert selectors.unlocked_scorecard_count(round_) == 0
    frame = selectors.scorecards_frame(round_)
    assert len(frame) == 2 * 8 and not frame["excluded"].any()
    choices = selectors.holistic_choices_frame(round_)
    assert choices["outcome"].tolist() == ["a"]
    assert selectors.jury_is_descriptive(round_)  # one juror, far below 25
