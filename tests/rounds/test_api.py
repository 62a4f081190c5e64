"""The /api/v1/ endpoints of rounds: staff writes, public reads, clear refusals, blindness."""

from __future__ import annotations

import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from rounds import services
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(user)
    return client


def _round_body(**overrides):
    version = factories.protocol_version()
    body = {
        "slug": "api-round",
        "title": "API round",
        "protocol": version.key,
        "result_type": "leaderboard",
        "benchmark_class": "best_complete_system",
        "interaction_class": "autonomous",
        "prompt_track": "brief_to_film",
        "duration_class": "minute_1",
        "aspect_ratio": "16:9",
        "budget_per_system": "100.00",
        "cost_ceiling": "120.00",
        "deadline": (timezone.now() + timedelta(days=3)).isoformat(),
        "retry_limit": 2,
        "human_action_cap": 1,
    }
    body.update(overrides)
    return body


def test_public_cannot_write(client):
    response = client.post("/api/v1/rounds/", _round_body(), content_type="application/json")
    assert response.status_code == 403


def test_staff_creates_a_round_and_a_bad_one_gets_a_clear_error(staff_client):
    created = staff_client.post("/api/v1/rounds/", _round_body(), content_type="application/json")
    assert created.status_code == 201, created.content
    assert created.json()["state"] == "draft"
    bad = staff_client.post(
        "/api/v1/rounds/",
        _round_body(slug="bad", duration_class="minute_3"),
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert "duration_class" in bad.json()


def test_committed_round_refuses_edits_with_a_clear_error(staff_client):
    round_ = factories.committed_round()
    response = staff_client.patch(
        f"/api/v1/rounds/{round_.slug}/", {"retry_limit": 9}, content_type="application/json"
    )
    assert response.status_code == 400
    assert "committed" in str(response.json())
    round_.refresh_from_db()
    assert round_.retry_limit == 2


def test_commit_and_open_through_the_api(staff_client):
    round_ = factories.round_()
    assert staff_client.post(f"/api/v1/rounds/{round_.slug}/commit/").json()["state"] == "committed"
    again = staff_client.post(f"/api/v1/rounds/{round_.slug}/commit/")
    assert again.status_code == 400 and "cannot move" in str(again.json())
    assert staff_client.post(f"/api/v1/rounds/{round_.slug}/open/").json()["state"] == "open"


def test_package_refusals_through_the_api(staff_client):
    round_ = factories.round_(packages=0)
    content = factories.sample_package(0, duration_class="minute_1")
    content["shot_list"] = ["wide"]
    response = staff_client.post(
        f"/api/v1/rounds/{round_.slug}/packages/",
        {"prompt_key": "P1", "content": content, "checklist": factories.sample_checklist(0)},
        content_type="application/json",
    )
    assert response.status_code == 400 and "shot list" in str(response.json())


def test_entries_are_anonymous_before_the_reveal(client):
    round_ = factories.open_round(entries=2)
    entries = client.get(f"/api/v1/rounds/{round_.slug}/entries/").json()
    assert len(entries) == 2 and all(e["system"] is None for e in entries)
    assert all(e["label"].startswith("S-") for e in entries)
    assert client.get("/api/v1/systems/").json()["results"] == []


def test_manifest_is_blinded_until_the_reveal(client, tmp_path):
    film = tmp_path / "f.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=s=160x90:r=10:d=1",
            "-f",
            "lavfi",
            "-i",
            "sine=d=1",
            "-shortest",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-c:a",
            "aac",
            str(film),
        ],
        check=True,
    )
    round_ = factories.open_round(entries=1)
    entry = round_.entries.get()
    run = factories.finished_run(entry, round_.packages.get(), original_path=film)
    response = client.get(f"/api/v1/runs/{run.public_id}/manifest.json")
    assert response.status_code == 200
    document = response.json()
    assert document["blinded"] is True
    assert document["system"] == "withheld until the round's reveal"
    assert document["public_proxy_url"] == "withheld until the round's reveal"
    assert entry.system_version.system.name not in response.content.decode()
    assert response["X-Manifest-SHA256"] == run.manifests.get().sha256
    from rounds.models import Round

    Round.objects.filter(pk=round_.pk).update(state="revealed")
    full = client.get(f"/api/v1/runs/{run.public_id}/manifest.json").json()
    assert full["system"]["name"] == entry.system_version.system.name
    proxy = client.get(full["public_proxy_url"])
    assert proxy.status_code == 200
    assert b"".join(proxy.streaming_content) == film.read_bytes()


def test_openapi_schema_is_served(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/v1/rounds/" in response.content


def test_manifest_of_unknown_or_unfinished_run_is_404(client):
    round_ = factories.open_round(entries=1)
    run = services.run_create(entry=round_.entries.get(), package=round_.packages.get())
    assert client.get(f"/api/v1/runs/{run.public_id}/manifest.json").status_code == 404
