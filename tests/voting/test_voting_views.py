"""Voting pages and endpoints over HTTP: blindness, media ranges, JSON errors, limits, export."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from rounds.models import Round
from tests.voting.voting_support import Viewer, sign, voting_round
from voting import services
from voting.models import Assignment, Ballot, Heartbeat, Voter
from voting.views import VOTER_COOKIE

pytestmark = pytest.mark.django_db


def start_voting(client: Client, **post) -> Assignment:
    client.get("/vote/")
    post.setdefault("csrfmiddlewaretoken", client.cookies["csrftoken"].value)
    response = client.post("/vote/", post)
    assert response.status_code == 302, response.content
    token = response["Location"].rstrip("/").split("/")[-1]
    return Assignment.objects.select_related("voter", "battle").get(token=token)


def identities(round_: Round) -> list[str]:
    """Everything that would unblind a voter: system names, vendors, run ids, labels, files."""
    words = []
    for entry in round_.entries.select_related("system_version__system"):
        words += [entry.system_version.system.name, entry.system_version.system.vendor]
        for run in entry.runs.select_related("proxy_file"):
            words += [str(run.public_id), run.proxy_file.storage_name, run.proxy_file.sha256]
    return words


@pytest.fixture
def csrf_client() -> Client:
    return Client(enforce_csrf_checks=True)


def signed_post(client: Client, url: str, assignment: Assignment, body: bytes, *, csrf=True):
    headers = {"X-Duel-Signature": sign(assignment, body)}
    if csrf:
        client.get(f"/vote/a/{assignment.token}/")
        headers["X-CSRFToken"] = client.cookies["csrftoken"].value
    return client.post(url, body, content_type="application/json", headers=headers)


def test_start_page_explains_the_rules_in_plain_words(films):
    voting_round(films, entries=2)
    page = Client().get("/vote/").content.decode()
    for phrase in ("Film 1", "95%", "sound", "skip", "speed", "another tab"):
        assert phrase in page
    assert Voter.objects.count() == 0  # a GET creates nothing


def test_starting_creates_a_pseudonymous_voter_and_assigns_a_pair(films):
    voting_round(films, entries=2)
    client = Client(HTTP_USER_AGENT="Mozilla/5.0 (Linux; Android 14; Pixel 8) Mobile Safari")
    assignment = start_voting(client, expertise="professional")
    voter = assignment.voter
    assert voter.device == "phone" and voter.expertise == "professional"
    assert voter.network_hash == services.network_hash_of("127.0.0.1")
    assert VOTER_COOKIE in client.cookies
    stored = json.dumps(list(Voter.objects.values()), default=str)
    assert "127.0.0.1" not in stored and "Pixel" not in stored
    # The same browser resumes the same pair.
    assert start_voting(client).pk == assignment.pk


def test_a_forged_voter_cookie_is_ignored(films):
    voting_round(films, entries=2)
    client = Client()
    assignment = start_voting(client)
    other = Client()
    other.cookies[VOTER_COOKIE] = str(assignment.voter.public_id)  # unsigned
    assert other.get(f"/vote/a/{assignment.token}/").status_code == 404


def test_the_player_page_is_blind_and_accessible(films):
    round_ = voting_round(films, entries=2)
    client = Client()
    assignment = start_voting(client)
    response = client.get(f"/vote/a/{assignment.token}/")
    page = response.content.decode()
    for word in identities(round_):
        assert word not in page
    for label in round_.entries.values_list("label", flat=True):
        assert f'"{label}"' not in page and f">{label}<" not in page
    videos = re.findall(r"<video[^>]*>", page)
    assert len(videos) == 2
    for tag in videos:  # no native controls (no seek bar, no speed menu), plays inline on phones
        assert "playsinline" in tag and not re.search(r"\scontrols[\s>=]", tag)
    assert f"/vote/m/{assignment.token}/1" in page and f"/vote/m/{assignment.token}/2" in page
    assert 'id="ballot-choices" disabled' in page
    assert 'aria-live="polite"' in page and "Play Film 1" in page
    assert response["Cache-Control"] == "no-store"
    # Only the voter it was given to can open it.
    assert Client().get(f"/vote/a/{assignment.token}/").status_code == 404


def test_media_is_served_the_same_way_for_both_films_with_ranges(films):
    round_ = voting_round(films, entries=2)
    client = Client()
    assignment = start_voting(client)
    names = identities(round_)
    answers = {}
    for film in (1, 2):
        full = client.get(f"/vote/m/{assignment.token}/{film}")
        body = b"".join(full.streaming_content)
        assert full.status_code == 200 and int(full["Content-Length"]) == len(body)
        side = assignment.side_of_film(film)
        proxy = assignment.battle.run_for(side).proxy_file
        assert len(body) == proxy.size_bytes
        partial = client.get(f"/vote/m/{assignment.token}/{film}", HTTP_RANGE="bytes=100-199")
        assert partial.status_code == 206
        assert partial["Content-Range"] == f"bytes 100-199/{proxy.size_bytes}"
        assert b"".join(partial.streaming_content) == body[100:200]
        tail = client.get(f"/vote/m/{assignment.token}/{film}", HTTP_RANGE="bytes=-10")
        assert b"".join(tail.streaming_content) == body[-10:]
        bad = client.get(f"/vote/m/{assignment.token}/{film}", HTTP_RANGE=f"bytes={10**9}-")
        assert bad.status_code == 416 and bad["Content-Range"] == f"bytes */{proxy.size_bytes}"
        headers = dict(partial.items())
        for word in names:
            assert word not in json.dumps(headers)
        answers[film] = {k: v for k, v in headers.items() if k not in ("Content-Length",)}
        answers[film].pop("Content-Range")
    assert answers[1] == answers[2]  # identical headers apart from the byte counts
    assert "ETag" not in answers[1] and "Last-Modified" not in answers[1]
    assert Client().get(f"/vote/m/{assignment.token}/1").status_code == 404


def test_heartbeat_endpoint_answers_clear_errors(films, csrf_client):
    voting_round(films, entries=2)
    assignment = start_voting(csrf_client)
    url = f"/vote/a/{assignment.token}/heartbeat"
    viewer = Viewer(assignment)
    body = viewer.body(1, [])
    ok = signed_post(csrf_client, url, assignment, body)
    assert ok.status_code == 200 and ok.json()["accepted"] is True
    assert ok.json()["ready_to_vote"] is False
    replay = signed_post(csrf_client, url, assignment, body)
    assert replay.status_code == 409 and replay.json()["error"] == "replayed"
    tampered = viewer.body(1, [])
    response = csrf_client.post(
        url,
        tampered.replace(b'"muted": false', b'"muted": true'),
        content_type="application/json",
        headers={
            "X-Duel-Signature": sign(assignment, tampered),
            "X-CSRFToken": csrf_token(csrf_client),
        },
    )
    assert response.status_code == 403 and response.json()["error"] == "bad_signature"
    no_csrf = signed_post(csrf_client, url, assignment, viewer.body(1, []), csrf=False)
    assert no_csrf.status_code == 403 and no_csrf.json()["error"] == "csrf"
    garbage = b'{"token": "%s", "film": 9}' % assignment.token.encode()
    malformed = signed_post(csrf_client, url, assignment, garbage)
    assert malformed.status_code == 400 and malformed.json()["error"] == "malformed"
    assert Heartbeat.objects.count() == 1


def csrf_token(client: Client) -> str:
    return client.cookies["csrftoken"].value


def test_ballot_endpoint_refuses_an_early_vote_then_locks_a_full_one(films, csrf_client):
    voting_round(films, entries=2)
    assignment = start_voting(csrf_client)
    url = f"/vote/a/{assignment.token}/ballot"
    body = json.dumps({"token": assignment.token, "choice": "first"}).encode()
    early = signed_post(csrf_client, url, assignment, body)
    assert early.status_code == 422 and early.json()["error"] == "not_watched"
    assert early.json()["status"]["ready_to_vote"] is False
    Viewer(assignment, start=timezone.now() - timedelta(seconds=60)).watch_both()
    locked = signed_post(csrf_client, url, assignment, body)
    assert locked.status_code == 201, locked.content
    answer = locked.json()
    ballot = Ballot.objects.get(assignment=assignment)
    assert answer["receipt"] == ballot.sha256 and answer["log_index"] == ballot.log_index
    replayed = signed_post(csrf_client, url, assignment, body)
    assert replayed.status_code == 409 and replayed.json()["error"] == "already_voted"
    # The page now redirects to the thank-you page, which names nobody.
    assert csrf_client.get(f"/vote/a/{assignment.token}/").status_code == 302
    thanks = csrf_client.get(f"/vote/a/{assignment.token}/thanks").content.decode()
    assert ballot.sha256 in thanks
    for word in identities(assignment.round):
        assert word not in thanks


def test_identities_after_the_vote_only_where_the_round_allows(films):
    round_ = voting_round(films, entries=2, voting_settings={"show_identities_after_vote": True})
    client = Client()
    assignment = start_voting(client)
    before = client.get(f"/vote/a/{assignment.token}/").content.decode()
    names = [e.system_version.system.name for e in round_.entries.all()]
    assert not any(name in before for name in names)
    Viewer(assignment, start=timezone.now() - timedelta(seconds=60)).watch_both()
    services.ballot_cast(assignment=assignment, choice="first")
    # Never before the round's reveal, whatever the round setting says.
    thanks = client.get(f"/vote/a/{assignment.token}/thanks").content.decode()
    assert not any(name in thanks for name in names)
    Round.objects.filter(pk=round_.pk).update(state=Round.State.REVEALED)
    thanks = client.get(f"/vote/a/{assignment.token}/thanks").content.decode()
    assert all(name in thanks for name in names)


def test_rate_limits_per_voter_and_per_network(films, settings, csrf_client):
    voting_round(films, entries=2)
    settings.DUEL_VOTING_RATE_LIMITS = {"heartbeat_voter": (2, 60), "voter_network": (2, 3600)}
    assignment = start_voting(csrf_client)
    viewer = Viewer(assignment)
    url = f"/vote/a/{assignment.token}/heartbeat"
    codes = [
        signed_post(csrf_client, url, assignment, viewer.body(1, [])).status_code for _ in range(3)
    ]
    assert codes == [200, 200, 429]
    # New voters from one network: the third is refused.
    statuses = [Client().post("/vote/", {}).status_code for _ in range(2)]
    assert statuses == [302, 429]  # the csrf_client's voter was the first from this network


def test_the_deidentified_export_in_json_and_csv(films):
    round_ = voting_round(films, entries=2)
    client = Client()
    assignment = start_voting(client, expertise="viewer")
    Viewer(assignment, start=timezone.now() - timedelta(seconds=60)).watch_both()
    ballot = services.ballot_cast(assignment=assignment, choice="second")
    document = client.get(f"/api/v1/rounds/{round_.slug}/ballots.json").json()
    assert document["identities_revealed"] is False and "systems" not in document
    assert set(document["ballot_record_fields"]) == {
        "battle_assignment",
        "side_randomization",
        "vote_result",
        "exclusion_reason",
        "cohort_flags",
    }
    (row,) = document["ballots"]
    assert row["ballot_id"] == str(ballot.public_id) and row["first"] == assignment.first
    assert row["choice"] == "second" and row["expertise"] == "viewer"
    assert row["exclusion_reason"] == "" and row["excluded"] is False
    text = json.dumps(document)
    for private in [str(assignment.voter.public_id), assignment.token, "127.0.0.1"]:
        assert private not in text
    for entry in round_.entries.select_related("system_version__system"):
        assert entry.system_version.system.name not in text
    csv_response = client.get(f"/api/v1/rounds/{round_.slug}/ballots.csv")
    rows = list(csv.DictReader(io.StringIO(csv_response.content.decode())))
    assert csv_response["Content-Type"].startswith("text/csv")
    assert rows[0]["ballot_id"] == row["ballot_id"] and rows[0]["excluded"] == "false"
    # After the reveal the export names the systems behind the labels.
    Round.objects.filter(pk=round_.pk).update(state="revealed")
    revealed = client.get(f"/api/v1/rounds/{round_.slug}/ballots.json").json()
    assert set(revealed["systems"]) == set(round_.entries.values_list("label", flat=True))
    assert client.get(f"/api/v1/rounds/{round_.slug}/ballots.xml").status_code == 404


def test_nothing_to_vote_on_says_so(films):
    client = Client()
    page = client.post("/vote/").content.decode()
    assert "No round is open" in page


def test_hot_endpoints_have_a_bounded_number_of_queries(
    films, django_assert_max_num_queries, csrf_client
):
    voting_round(films, entries=3)
    assignment = start_voting(csrf_client)
    viewer = Viewer(assignment, start=timezone.now() - timedelta(seconds=60))
    heartbeat_url = f"/vote/a/{assignment.token}/heartbeat"
    signed_post(csrf_client, heartbeat_url, assignment, viewer.body(1, []))  # warms the page
    # Voter, assignment, both sessions locked, heartbeat stored, session updated (+ savepoint).
    with django_assert_max_num_queries(6):
        response = signed_post(
            csrf_client, heartbeat_url, assignment, viewer.body(1, [(0, 0.5, 1)]), csrf=False
        )
    assert response.status_code == 403  # no CSRF header: refused before any write
    headers = {"X-CSRFToken": csrf_token(csrf_client)}
    body = viewer.body(1, [(0, 0.5, 1)])
    with django_assert_max_num_queries(6):
        response = csrf_client.post(
            heartbeat_url,
            body,
            content_type="application/json",
            headers={**headers, "X-Duel-Signature": sign(assignment, body)},
        )
    assert response.status_code == 200
    second = services.assignment_next(voter=assignment.voter, resume=False)
    Viewer(second, start=timezone.now() - timedelta(seconds=60)).watch_both()
    body = json.dumps({"token": second.token, "choice": "first"}).encode()
    # The ballot includes the abuse checks and the log append (head, entry, nodes).
    with django_assert_max_num_queries(20):
        response = csrf_client.post(
            f"/vote/a/{second.token}/ballot",
            body,
            content_type="application/json",
            headers={**headers, "X-Duel-Signature": sign(second, body)},
        )
    assert response.status_code == 201


def test_staff_see_votes_counted_in_the_admin(films, admin_client):
    round_ = voting_round(films, entries=2)
    assignment = services.assignment_next(voter=services.voter_create(), round_=round_)
    Viewer(assignment, start=timezone.now() - timedelta(seconds=60)).watch_both(audible=False)
    network = services.network_hash_of("192.0.2.10")
    ballot = services.ballot_cast(assignment=assignment, choice="first", network_hash=network)
    page = admin_client.get("/admin/voting/ballot/").content.decode()
    assert "Ballots per round" in page and round_.slug in page
    assert str(ballot.public_id) in page and "audio_off" in page
    detail = admin_client.get(f"/admin/voting/ballot/{ballot.pk}/change/").content.decode()
    assert ballot.sha256 in detail and network not in detail
    for url in ("/admin/voting/battle/", "/admin/voting/assignment/", "/admin/voting/voter/"):
        response = admin_client.get(url)
        assert response.status_code == 200
        assert f"{url}add/" not in response.content.decode()  # read-only: nothing to add
    assert (
        assignment.hmac_key
        not in admin_client.get(
            f"/admin/voting/assignment/{assignment.pk}/change/"
        ).content.decode()
    )
