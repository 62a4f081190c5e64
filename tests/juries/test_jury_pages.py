"""Juror pages and the staff admin through Django's test client."""

from __future__ import annotations

import time
from datetime import date, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from juries import selectors
from juries.models import Juror, JuryPlan, Panel, PanelMember, Scorecard, ScreeningSession, Viewing
from ledger.models import LogEntry

pytestmark = pytest.mark.django_db


def _system_names(round_) -> list[str]:
    names = []
    for entry in round_.entries.select_related("system_version__system"):
        names += [entry.system_version.system.name, entry.system_version.system.vendor]
    return names


def test_jury_pages_need_a_juror_account(client, jury_round, plan_jury):
    response = client.get("/jury/")
    assert response.status_code == 302 and response["Location"].startswith("/jury/login/")
    user = get_user_model().objects.create_user("visitor", password="pw")
    client.force_login(user)
    assert client.get("/jury/").status_code == 403


def test_a_juror_completes_a_session_through_the_pages(client, jury_round, plan_jury, judging):
    round_ = jury_round(entries=2)
    _, seated = plan_jury(round_, jurors={"audience": 2}, break_length=timedelta(0))
    judging(round_)
    juror, other = seated["audience"]
    assert client.login(username=juror.user.username, password="juror-pass")
    home = client.get("/jury/")
    assert home.status_code == 200
    body = home.content.decode()
    assert juror.public_id in body and "never enter any quality score" in body
    for name in _system_names(round_):
        assert name not in body
    session = ScreeningSession.objects.get(juror=juror)
    page_url = reverse("juries:session", args=[session.public_id])
    stranger = ScreeningSession.objects.get(juror=other)
    assert client.get(reverse("juries:session", args=[stranger.public_id])).status_code == 404

    for position, viewing in enumerate(Viewing.objects.filter(juror=juror).order_by("order_index")):
        page = client.get(page_url).content.decode()
        assert f'data-film="{viewing.film.display_label}" data-state="start"' in page
        for name in _system_names(round_):
            assert name not in page
        # The media is only served once the film has started, and only to its juror.
        media_url = reverse("juries:viewing-media", args=[viewing.public_id])
        assert client.get(media_url).status_code == 404
        started = client.post(reverse("juries:viewing-start", args=[viewing.public_id]))
        assert started.status_code == 200 and started.json()["media"] == media_url
        ranged = client.get(media_url, HTTP_RANGE="bytes=0-99")
        assert ranged.status_code == 206 and ranged["Content-Range"].endswith(
            f"/{viewing.film.run.proxy_file.size_bytes}"
        )
        assert len(b"".join(ranged.streaming_content)) == 100
        whole = client.get(media_url)
        assert whole.status_code == 200 and whole["Accept-Ranges"] == "bytes"
        beat_url = reverse("juries:viewing-beat", args=[viewing.public_id])
        duration = viewing.film.duration_s
        first = client.post(beat_url, {"seq": 0, "position": 0}, content_type="application/json")
        assert first.json()["outcome"] == "anchored"
        cheat = client.post(
            beat_url, {"seq": 1, "position": duration}, content_type="application/json"
        )
        assert cheat.json()["outcome"] == "impossible_progress"
        assert not cheat.json()["complete"]
        client.post(beat_url, {"seq": 2, "position": 0}, content_type="application/json")
        time.sleep(duration + 0.05)
        done = client.post(
            beat_url,
            {"seq": 3, "position": duration, "played": [[0, duration]]},
            content_type="application/json",
        )
        assert done.json()["complete"], done.json()
        malformed = client.post(beat_url, {"seq": "x"}, content_type="application/json")
        assert malformed.status_code == 400

        page = client.get(page_url).content.decode()
        assert 'id="questions"' in page
        questions = list(viewing.film.package.attention_questions.order_by("id"))
        answers = {f"q_{q.pk}": str(q.correct_choice) for q in questions}
        response = client.post(reverse("juries:viewing-answers", args=[viewing.public_id]), answers)
        assert response.status_code == 302

        page = client.get(page_url).content.decode()
        assert 'id="scorecard"' in page and "publishable as it stands" in page  # anchors
        form = {f"score_{d}": "4" for d in round_.protocol.quality_dimensions}
        if position == 1:
            earlier = Viewing.objects.get(juror=juror, order_index=0)
            assert f"choice_{earlier.public_id}" in page
            form[f"choice_{earlier.public_id}"] = "this"
        form["action"] = "lock"
        response = client.post(reverse("juries:viewing-scorecard", args=[viewing.public_id]), form)
        assert response.status_code == 302, response.content.decode()[:2000]
        assert Scorecard.objects.get(viewing=viewing).is_locked

    page = client.get(page_url).content.decode()
    assert 'id="session-finished"' in page
    choices = selectors.holistic_choices_frame(round_)
    assert choices["outcome"].tolist() == ["b"]
    scores = selectors.scorecards_frame(round_)
    assert set(scores["score"]) == {4.0} and scores["locked"].all()


def test_a_scorecard_off_the_scale_is_refused_on_the_page(client, jury_round, plan_jury, judging):
    round_ = jury_round(entries=1)
    _, seated = plan_jury(round_, jurors={"audience": 1})
    judging(round_)
    juror = seated["audience"][0]
    client.force_login(juror.user)
    viewing = Viewing.objects.get(juror=juror)
    client.post(reverse("juries:viewing-start", args=[viewing.public_id]))
    beat_url = reverse("juries:viewing-beat", args=[viewing.public_id])
    client.post(beat_url, {"seq": 0, "position": 0}, content_type="application/json")
    time.sleep(viewing.film.duration_s + 0.05)
    client.post(
        beat_url, {"seq": 1, "position": viewing.film.duration_s}, content_type="application/json"
    )
    questions = viewing.film.package.attention_questions.all()
    client.post(
        reverse("juries:viewing-answers", args=[viewing.public_id]),
        {f"q_{q.pk}": "0" for q in questions},
    )
    form = {f"score_{d}": "9" for d in round_.protocol.quality_dimensions}
    response = client.post(
        reverse("juries:viewing-scorecard", args=[viewing.public_id]), {**form, "action": "lock"}
    )
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not Scorecard.objects.filter(viewing=viewing).exists()


def test_staff_plan_a_jury_in_the_admin(client, jury_round):
    round_ = jury_round(entries=2, systems=None)
    staff = get_user_model().objects.create_superuser("staff", password="pw")
    client.force_login(staff)
    # Jurors with declared affiliations; one works for an entrant's vendor.
    vendor = round_.entries.first().system_version.system.vendor
    for name, party in (("Ana", "Unrelated Studio"), ("Ben", vendor)):
        response = client.post(
            "/admin/juries/juror/add/",
            {
                "name": name,
                "contact": f"{name}@example.org",
                "expertise": "editor",
                "target_audience_fit": "general",
                "compensation": "USD 100",
                "attrition_status": "active",
                "attrition_reason": "",
                "affiliations-TOTAL_FORMS": "1",
                "affiliations-INITIAL_FORMS": "0",
                "affiliations-0-party": party,
                "affiliations-0-relationship": "employee",
                "affiliations-0-note": "",
            },
        )
        assert response.status_code == 302, response.content.decode()[:3000]
    ana, ben = Juror.objects.get(name="Ana"), Juror.objects.get(name="Ben")
    response = client.post(
        "/admin/juries/panel/add/",
        {
            "round": round_.pk,
            "kind": "audience",
            "members-TOTAL_FORMS": "2",
            "members-INITIAL_FORMS": "0",
            "members-0-juror": ana.pk,
            "members-1-juror": ben.pk,
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    panel = Panel.objects.get(round=round_, kind="audience")
    assert PanelMember.objects.get(panel=panel, juror=ana).status == "active"
    assert PanelMember.objects.get(panel=panel, juror=ben).exclusion_code == "conflict_of_interest"
    package = round_.packages.get()
    response = client.post(
        "/admin/juries/attentionquestion/add/",
        {
            "package": package.pk,
            "text": "Who repairs the lamp?",
            "choices": '["The keeper", "The captain"]',
            "correct_choice": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    initial = client.get(f"/admin/juries/juryplan/add/?round={round_.pk}")
    assert initial.status_code == 200
    response = client.post(
        "/admin/juries/juryplan/add/",
        {
            "round": round_.pk,
            "first_day": date.today().isoformat(),
            "day_start": "00:00",
            "timezone": "UTC",
            "session_cap": "01:00:00",
            "break_length": "00:00:02",
            "between_sessions": "00:10:00",
            "daily_max": "04:00:00",
            "attention_min_correct": "1",
            "score_min": "1",
            "score_max": "5",
            "score_step": "1",
            "anchors": "{}",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    plan = JuryPlan.objects.get(round=round_)
    # An empty anchor sheet becomes the template; freezing refuses it until it is written.
    assert set(plan.anchors) == set(round_.protocol.quality_dimensions)
    changelist = "/admin/juries/juryplan/"
    response = client.post(
        changelist, {"action": "freeze_plan", "_selected_action": [plan.pk]}, follow=True
    )
    assert "the anchor for 1 is empty" in response.content.decode()
    plan.refresh_from_db()
    assert not plan.is_frozen
    plan.anchors = {
        d: {"1": "weak", "3": "competent", "5": "outstanding"}
        for d in round_.protocol.quality_dimensions
    }
    plan.save(update_fields=["anchors"])
    response = client.post(
        changelist, {"action": "freeze_plan", "_selected_action": [plan.pk]}, follow=True
    )
    assert "1 plan(s) frozen" in response.content.decode()
    response = client.post(
        changelist, {"action": "plan_sessions", "_selected_action": [plan.pk]}, follow=True
    )
    assert "1 round(s) scheduled" in response.content.decode()
    assert ScreeningSession.objects.filter(round=round_, juror=ana).exists()
    assert not ScreeningSession.objects.filter(juror=ben).exists()
    kinds = set(LogEntry.objects.values_list("kind", flat=True))
    assert {"jury_assignment", "order_schedule"} <= kinds
    # A frozen plan is read-only in the admin.
    page = client.get(f"/admin/juries/juryplan/{plan.pk}/change/").content.decode()
    assert 'name="anchors"' not in page


def test_the_admin_refuses_a_panel_the_protocol_does_not_have_and_logs_attrition(
    client, jury_round
):
    round_ = jury_round(protocol="tovaki-2026-r1", duration_class="clip_6s")
    staff = get_user_model().objects.create_superuser("staff2", password="pw")
    client.force_login(staff)
    response = client.post(
        "/admin/juries/panel/add/",
        {
            "round": round_.pk,
            "kind": "audience",
            "members-TOTAL_FORMS": "0",
            "members-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    assert "has only these panels: craft" in response.content.decode()
    assert not Panel.objects.filter(round=round_).exists()

    from juries import services

    juror = services.juror_create(name="Cora")
    panel = services.panel_create(round_=round_, kind="craft")
    services.panel_member_add(panel=panel, juror=juror, actor="t")
    form = {
        "name": "Cora",
        "contact": "",
        "expertise": "",
        "target_audience_fit": "",
        "compensation": "",
        "attrition_status": "withdrawn",
        "attrition_reason": "",
        "affiliations-TOTAL_FORMS": "0",
        "affiliations-INITIAL_FORMS": "0",
    }
    url = f"/admin/juries/juror/{juror.pk}/change/"
    assert "attrition needs a reason" in client.post(url, form).content.decode()
    response = client.post(url, {**form, "attrition_reason": "moved abroad"})
    assert response.status_code == 302
    juror.refresh_from_db()
    assert juror.attrition_status == "withdrawn" and juror.attrition_at is not None
    logged = LogEntry.objects.filter(kind="jury_assignment").order_by("-index").first()
    assert logged.payload["record"] == "juror_attrition"
    assert logged.payload["status"] == "withdrawn"
    undo = client.post(url, {**form, "attrition_status": "active", "attrition_reason": "back"})
    assert "cannot be undone" in undo.content.decode()
