"""The within-segment judging page (protocol: Public segment result), with the Django test
client: real 6 s films (1.5 s windows, longer than the proof's jitter, so a seek shows), clips
cut from their proxies, the playback proof on a simulated server clock."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from duel.canonical import canonical_sha256
from juries import segment_judging, segment_views, services
from juries.models import JuryFilm, SegmentVote, SegmentWindow
from media_pipeline.models import Proxy, SegmentClip
from media_pipeline.proxy import ProxyRecipe
from rounds.models import Run
from rounds.protocols import Protocol

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r"/jury/segments/pair/([A-Za-z0-9_-]+)/vote")


@pytest.fixture
def six_second_film(tmp_path, film_factory):
    return film_factory(tmp_path / "six-seconds.mp4", 6.0)


@pytest.fixture
def segment_round(jury_round, plan_jury, judging, six_second_film):
    round_ = jury_round(entries=2, film=six_second_film)
    for run in Run.objects.filter(entry__round=round_).select_related("accepted_attempt"):
        _record_proxy(run)
    _, seated = plan_jury(round_, jurors={"audience": 1})
    judging(round_)
    services.segment_windows_publish(round_=round_, actor="t")
    return round_, seated["audience"][0]


def _record_proxy(run) -> Proxy:
    """The factories attach a proxy file without its ``Proxy`` record (the runner builds
    one with ``proxy_build``); record one for the file with the protocol's recipe at the test
    film's own size, so ``segments_cut`` re-encodes with it."""
    recipe = ProxyRecipe.from_definition(
        Protocol.load("ai-duel-0.1").proxy_recipe, canvas=(160, 90)
    )
    record = {"recipe": recipe.as_dict()}
    return Proxy.objects.create(
        original=run.accepted_attempt.output,
        proxy_file=run.proxy_file,
        protocol_key="ai-duel-0.1",
        recipe=record,
        recipe_sha256=canonical_sha256(record),
        ffmpeg_version="test",
        verification={"ok": True},
    )


class Clock:
    """Drives ``timezone.now`` as seen by the segment views."""

    def __init__(self, monkeypatch):
        self.now = timezone.now()
        monkeypatch.setattr(segment_views.timezone, "now", lambda: self.now)


def _play(client, token: str, slot: int, duration: float, clock: Clock, *, seq: int = 0):
    url = reverse("juries:segment-beat", args=[token, slot])
    positions = [0.0]
    while positions[-1] < duration:
        positions.append(min(duration, positions[-1] + 0.25))
    data = {}
    for k, position in enumerate(positions):
        if k:
            clock.now += timedelta(seconds=0.25)
        response = client.post(
            url, {"seq": seq + k, "position": position}, content_type="application/json"
        )
        assert response.status_code == 200, response.content
        data = response.json()
    return data


def _token(html: str) -> str:
    match = TOKEN.search(html)
    assert match, "no pair on the page"
    return match.group(1)


def test_segment_pair_page_proof_vote_and_no_repeat(client, segment_round, monkeypatch):
    round_, juror = segment_round
    clock = Clock(monkeypatch)
    client.login(username=juror.user.username, password="juror-pass")
    page = reverse("juries:segments", args=[round_.slug])

    home = client.get(reverse("juries:home")).content.decode()
    assert f'href="{page}"' in home
    response = client.get(page)
    assert response.status_code == 200
    html = response.content.decode()
    assert "within-segment quality" in html
    assert "does not measure full story quality" in html
    films = list(JuryFilm.objects.filter(round=round_).select_related("entry", "run"))
    for film in films:  # no identity of any kind
        for secret in (
            film.entry.label,
            film.entry.system_version.system.name,
            str(film.run.public_id),
            film.run.proxy_file.storage_name,
        ):
            assert secret not in html
    token = _token(html)
    assignment = client.session[segment_views.SESSION_KEY][token]
    first, second = (SegmentWindow.objects.get(pk=pk) for pk in assignment["windows"])
    assert first.index == second.index
    assert first.film.package_id == second.film.package_id and first.film_id != second.film_id
    # The clips were cut from the proxies for exactly these windows.
    for window in (first, second):
        proxy = window.film.run.proxy_file.proxy_record
        assert SegmentClip.objects.filter(
            proxy=proxy, start_s=window.start_s, end_s=window.end_s
        ).exists()

    vote_url = reverse("juries:segment-vote", args=[token])
    refused = client.post(vote_url, {"choice": "first"})
    assert refused.status_code == 409
    assert not SegmentVote.objects.exists()
    second_media = reverse("juries:segment-media", args=[token, 1])
    assert client.get(second_media).status_code == 404  # the first clip plays first
    early = client.post(
        reverse("juries:segment-beat", args=[token, 1]),
        {"seq": 0, "position": 0.0},
        content_type="application/json",
    )
    assert early.status_code == 409

    # A seek to the end is not playback.
    seek = reverse("juries:segment-beat", args=[token, 0])
    client.post(seek, {"seq": 0, "position": 0.0}, content_type="application/json")
    jumped = client.post(
        seek, {"seq": 1, "position": assignment["durations"][0]}, content_type="application/json"
    ).json()
    assert jumped["outcome"] == "impossible_progress" and not jumped["complete"]
    assert client.post(vote_url, {"choice": "first"}).status_code == 409

    assert _play(client, token, 0, assignment["durations"][0], clock, seq=2)["complete"]
    assert client.post(vote_url, {"choice": "first"}).status_code == 409  # one clip only
    first_response = client.get(reverse("juries:segment-media", args=[token, 0]))
    second_response = client.get(second_media)
    assert second_response.status_code == first_response.status_code == 200
    assert first_response["Content-Type"] == second_response["Content-Type"] == "video/mp4"
    assert {k for k, _ in first_response.items()} == {k for k, _ in second_response.items()}
    assert b"".join(second_response.streaming_content)[4:8] == b"ftyp"
    assert _play(client, token, 1, assignment["durations"][1], clock)["complete"]

    assert client.post(vote_url, {"choice": "sideways"}).status_code == 409
    done = client.post(vote_url, {"choice": "first"})
    assert done.status_code == 302 and done["Location"] == page
    vote = SegmentVote.objects.get()
    assert (vote.juror, vote.window_a, vote.window_b, vote.outcome) == (juror, first, second, "a")
    # The vote keeps what the server's proof of each clip came to, the refused seek included.
    rules = services.proof_rules(round_)
    assert [p["duration_s"] for p in vote.playback] == assignment["durations"]
    for proof in vote.playback:
        assert proof["coverage"] >= rules.min_playback and proof["reached_ending"]
        assert proof["heartbeats"] > 2
    assert vote.playback[0]["refused"] == {"impossible_progress": 1}
    assert vote.playback[1]["refused"] == {}
    assert token not in client.session[segment_views.SESSION_KEY]
    assert client.post(vote_url, {"choice": "first"}).status_code == 404

    # The voted pair is not shown again: the next page offers another window.
    pending = segment_judging.segment_pairs_pending(juror, round_)
    assert len(pending) == SegmentWindow.objects.filter(round=round_).count() // 2 - 1
    assert all({a.pk, b.pk} != {first.pk, second.pk} for a, b in pending)
    following = client.get(page).content.decode()
    next_assignment = client.session[segment_views.SESSION_KEY][_token(following)]
    assert set(next_assignment["windows"]) != {first.pk, second.pk}
    assert next_assignment["windows"] == [pending[0][0].pk, pending[0][1].pk]


def test_segment_page_refuses_other_accounts_and_finishes(client, segment_round):
    round_, juror = segment_round
    page = reverse("juries:segments", args=[round_.slug])
    assert client.get(page).status_code == 302  # sign in first
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("outsider", password="x")
    client.login(username="outsider", password="x")
    assert client.get(page).status_code == 403  # not a juror
    client.logout()
    client.login(username=juror.user.username, password="juror-pass")
    # Every pair already judged: the page says so and offers nothing.
    for first, second in segment_judging.segment_pairs_pending(juror, round_):
        services.segment_vote_record(juror=juror, window_a=second, window_b=first, outcome="b")
    html = client.get(page).content.decode()
    assert 'id="segments-finished"' in html and "/vote" not in html


def test_publishing_the_windows_cuts_every_clip_before_any_juror_asks(
    jury_round, plan_jury, judging, six_second_film, django_capture_on_commit_callbacks, monkeypatch
):
    from duel.celery import app
    from media_pipeline.models import MediaJob

    monkeypatch.setitem(app.conf, "task_always_eager", True)  # the task runs in this process
    round_ = jury_round(entries=2, film=six_second_film)
    for run in Run.objects.filter(entry__round=round_).select_related("accepted_attempt"):
        _record_proxy(run)
    _, seated = plan_jury(round_, jurors={"audience": 1})
    judging(round_)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        windows = services.segment_windows_publish(round_=round_, actor="t")
    assert len(callbacks) == 1
    films = {w.film_id for w in windows}
    assert MediaJob.objects.filter(kind="segments", state="succeeded").count() == len(films)
    for window in windows:
        proxy = segment_judging.film_proxy(window.film)
        assert SegmentClip.objects.filter(
            proxy=proxy, start_s=round(window.start_s, 3), end_s=round(window.end_s, 3)
        ).exists(), window
    # The page finds them: nothing new is cut for the first assignment.
    clips = SegmentClip.objects.count()
    first, second = segment_judging.segment_pairs_pending(seated["audience"][0], round_)[0]
    assert segment_judging.segment_clip(first) and segment_judging.segment_clip(second)
    assert SegmentClip.objects.count() == clips
