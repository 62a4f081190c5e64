"""The voting page in Debian's Chromium: real films really played to the end, real heartbeats.

Covers a full vote, a refused early vote, a muted vote (kept, flagged), a tampered heartbeat and
a replayed ballot. The films are 3-second proxies, so each vote takes a few seconds of playback.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from ledger.models import LogEntry
from tests.voting.voting_support import voting_round
from voting.models import Assignment, Ballot, Heartbeat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
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
FILM_TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        message = f"Chromium is not installed at {CHROMIUM}"
        if settings.DUEL_REQUIRE_SERVICES:
            pytest.fail(f"{message} (DUEL_REQUIRE_SERVICES=1)")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread, so Django's guard
    # against ORM calls from async code must be told these tests are synchronous (until the
    # last test's database flush, hence module scope).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


# With the embedded default (an in-memory SQLite test database) the live server's threads and
# this test share one connection object, whose transaction state is not thread-safe: requests
# are serialized, and the test reads the database under the same lock.
_SHARED_CONNECTION = threading.RLock()


class _Serialized:
    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        with _SHARED_CONNECTION:
            return self.app(environ, start_response)


def quiet():
    """Hold the server still while the test reads the database (SQLite only)."""
    return _SHARED_CONNECTION if connection.vendor == "sqlite" else contextlib.nullcontext()


@pytest.fixture
def live(live_server, browser):
    """The live server, and a database the test flush can empty on SQLite.

    On SQLite the flush after the test runs DELETE statements, which the append-only triggers
    refuse: drop them, flush, and let the post_migrate signal of the flush install them again.
    """
    if connection.vendor == "sqlite":
        httpd = live_server.thread.httpd
        if not isinstance(httpd.get_app(), _Serialized):
            httpd.set_app(_Serialized(httpd.get_app()))
    yield live_server
    if connection.vendor == "sqlite":
        with quiet(), connection.cursor() as cursor:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            for (name,) in cursor.fetchall():
                cursor.execute(f'DROP TRIGGER IF EXISTS "{name}"')
        with quiet():
            call_command("flush", interactive=False, verbosity=0)


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 412, "height": 915}, is_mobile=True)
    tab = context.new_page()
    tab.set_default_timeout(FILM_TIMEOUT_MS)
    yield tab
    context.close()


def open_pair(page, live) -> Assignment:
    page.goto(f"{live.url}/vote/")
    page.get_by_role("button", name="Start: show me two films").click()
    page.wait_for_url("**/vote/a/**")
    token = page.url.rstrip("/").split("/")[-1]
    with quiet():
        return Assignment.objects.get(token=token)


def watch(page, film: int) -> None:
    page.locator(f"#film-{film} [data-action=play]").click()
    page.wait_for_function(
        f"document.querySelector('#video-{film}').ended", timeout=FILM_TIMEOUT_MS
    )


def watch_both(page) -> None:
    watch(page, 1)
    watch(page, 2)
    page.wait_for_selector("#ballot-choices:not([disabled])")


SIGNED_FETCH = """
async ([url, payload, tamper]) => {
  const c = JSON.parse(document.getElementById('duel-config').textContent);
  const body = JSON.stringify(Object.assign({token: c.token}, payload));
  const key = DuelHmac.fromHex(c.key);
  const signature = DuelHmac.toHex(DuelHmac.hmacSha256(key, new TextEncoder().encode(body)));
  const sent = tamper ? body.replace(tamper[0], tamper[1]) : body;
  const response = await fetch(c[url], {
    method: 'POST', credentials: 'same-origin', body: sent,
    headers: {'Content-Type': 'application/json', 'X-CSRFToken': c.csrf,
              'X-Duel-Signature': signature}});
  return [response.status, await response.json()];
}
"""


def vote_buttons_disabled(page) -> bool:
    return page.get_by_role("button", name="Film 1 was better").is_disabled()


def test_a_full_vote_is_counted_and_a_replayed_ballot_refused(live, page, films):
    round_ = voting_round(films, entries=2)
    assignment = open_pair(page, live)
    assert vote_buttons_disabled(page)
    watch_both(page)
    assert "you can vote now" in page.locator("#vote-status").inner_text()
    with page.expect_request("**/ballot") as sent:
        page.get_by_role("button", name="Film 1 was better").click()
    page.wait_for_url("**/thanks")
    content = page.content()
    assert "counts in the result" in content

    with quiet():
        ballot = Ballot.objects.get(assignment=assignment)
        assert ballot.exclusion_reason == "" and ballot.audio_on
        assert ballot.choice == "first" and ballot.outcome == assignment.first
        assert ballot.coverage_first >= 0.95 and ballot.coverage_second >= 0.95
        assert LogEntry.objects.get(index=ballot.log_index).payload["sha256"] == ballot.sha256
        beats = Heartbeat.objects.filter(assignment=assignment)
        assert beats.filter(film=1).exists() and beats.filter(film=2).exists()
        assert not beats.filter(accepted=False).exists()
        names = list(round_.entries.values_list("system_version__system__name", flat=True))
    for name in names:
        assert name not in content

    # Replay the exact request the page sent (same body, same signature): refused.
    request = sent.value
    replay = page.evaluate(
        """async ([url, body, headers]) => {
            const r = await fetch(url, {method: 'POST', body, credentials: 'same-origin',
              headers: {'Content-Type': 'application/json', 'X-CSRFToken': headers['x-csrftoken'],
                        'X-Duel-Signature': headers['x-duel-signature']}});
            return [r.status, await r.json()];
        }""",
        [request.url, request.post_data, request.headers],
    )
    assert replay[0] == 409 and replay[1]["error"] == "already_voted"
    with quiet():
        assert Ballot.objects.count() == 1


def test_an_early_vote_and_a_tampered_heartbeat_are_refused(live, page, films):
    voting_round(films, entries=2)
    assignment = open_pair(page, live)
    # The page's HMAC is the server's HMAC.
    digest = page.evaluate(
        "([k, m]) => DuelHmac.toHex(DuelHmac.hmacSha256(DuelHmac.fromHex(k),"
        " new TextEncoder().encode(m)))",
        [assignment.hmac_key, "Film 1 then Film 2 ✓"],
    )
    expected = hmac.new(
        bytes.fromhex(assignment.hmac_key), "Film 1 then Film 2 ✓".encode(), hashlib.sha256
    ).hexdigest()
    assert digest == expected

    assert vote_buttons_disabled(page)
    status, answer = page.evaluate(SIGNED_FETCH, ["ballot", {"choice": "first"}, None])
    assert status == 422 and answer["error"] == "not_watched"

    watch(page, 1)  # a real, accepted viewing of Film 1 only
    heartbeat = {
        "film": 2,
        "seq": 10_000,
        "t": 1,
        "ranges": [[0, 3, 1]],
        "muted": False,
        "volume": 1,
        "rate": 1,
        "paused": True,
        "ended": True,
        "visible": True,
    }
    status, answer = page.evaluate(
        SIGNED_FETCH, ["heartbeat", heartbeat, ['"volume":1', '"volume":0.5']]
    )
    assert status == 403 and answer["error"] == "bad_signature"
    status, answer = page.evaluate(SIGNED_FETCH, ["ballot", {"choice": "second"}, None])
    assert status == 422 and answer["status"]["films"]["1"]["complete"] is True
    assert answer["status"]["films"]["2"]["coverage"] == 0
    with quiet():
        assert not Ballot.objects.exists()
        assert not Heartbeat.objects.filter(seq=10_000).exists()


def test_a_muted_vote_is_kept_but_flagged(live, page, films):
    voting_round(films, entries=2)
    assignment = open_pair(page, live)
    page.locator("#film-1 [data-action=mute]").click()
    assert page.locator("#film-1 [data-action=mute]").get_attribute("aria-pressed") == "true"
    watch_both(page)
    assert "not counted in the main result" in page.locator("#ballot-help").inner_text()
    page.get_by_role("button", name="Film 2 was better").click()
    page.wait_for_url("**/thanks")
    assert "does not count in the main result" in page.content()
    with quiet():
        ballot = Ballot.objects.get(assignment=assignment)
    assert not ballot.audio_on and ballot.exclusion_reason == "audio_off"
    assert ballot.log_index is not None
