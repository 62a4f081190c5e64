"""Governance: entry paths, watermarks, seasons, the Tovaki disclosure schedule, diagnostics."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pandas as pd
import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from ledger.models import LogEntry
from rounds import governance, services
from rounds.diagnostics import checklist_diagnostics, critic_frame
from rounds.models import Entry, Round, Season, SystemVersion
from rounds.selectors import rankable_runs
from stats import bradley_terry, scorecards
from stats.diagnostic_guard import DiagnosticNotRankable
from stats.services import round_lock
from tests import factories
from tests.films import make_film

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def film(tmp_path_factory):
    return make_film(tmp_path_factory.mktemp("films") / "film.mp4", size="160x90", rate=10)


def _round_with_paths(**kwargs) -> Round:
    round_ = factories.round_(entries=0, **kwargs)
    operated = factories.system_version()
    private = factories.system_version(public_configuration=False)
    audited = factories.system_version()
    exhibition = factories.system_version()
    services.entry_add(round_=round_, system_version=operated)
    services.entry_add(round_=round_, system_version=private)
    services.entry_add(
        round_=round_, system_version=audited, path=Entry.Path.AUDITED, auditor_name="Ada Audit"
    )
    services.entry_add(round_=round_, system_version=exhibition, path=Entry.Path.EXHIBITION)
    round_ = services.round_commit(round_=round_, actor="t")
    return services.round_open(round_=round_, actor="t")


def _entry(round_: Round, version: SystemVersion) -> Entry:
    return round_.entries.get(system_version=version)


def test_only_operated_or_attested_entries_reach_the_ranking_pool(film):
    round_ = _round_with_paths()
    package = round_.packages.get()
    for entry in round_.entries.all():
        factories.finished_run(entry, package, original_path=film)
    ranked = {run.entry.path for run in rankable_runs(round_)}
    assert ranked == {"operated"}  # private config, unattested audit and exhibition excluded
    audited = round_.entries.get(path="audited")
    with pytest.raises(ValidationError, match="named auditor"):
        governance.entry_attest(
            entry=audited, auditor_name="Somebody Else", statement="I watched", actor="staff"
        )
    governance.entry_attest(
        entry=audited, auditor_name="Ada Audit", statement="Witnessed end to end.", actor="staff"
    )
    assert LogEntry.objects.filter(kind="auditor_attestation").count() == 1
    assert {run.entry.path for run in rankable_runs(round_)} == {"operated", "audited"}


def test_blind_ranked_round_cannot_open_with_an_unpermitted_watermark():
    round_ = factories.round_(entries=2)
    marked = round_.entries.first()
    Entry.objects.filter(pk=marked.pk).update(provider_watermark=True)
    round_ = services.round_commit(round_=round_, actor="t")
    with pytest.raises(services.TransitionError, match="watermark"):
        services.round_open(round_=round_, actor="t")
    with pytest.raises(ValidationError):
        governance.watermark_permission_record(
            entry=marked, kind="written_permission", document=" ", actor="staff"
        )
    governance.watermark_permission_record(
        entry=marked, kind="written_permission", document="Letter of 2026-11-02", actor="staff"
    )
    assert LogEntry.objects.filter(kind="watermark_permission").count() == 1
    assert services.round_open(round_=round_, actor="t").state == Round.State.OPEN


def test_closed_season_accepts_no_new_runs_and_keeps_results(film, client):
    season = Season.objects.create(
        name="CVE 2026",
        engine_provider="duel-reference",
        engine_model_id="ref-video-1",
        engine_api_version="2026-01",
    )
    round_ = factories.open_round(entries=2, packages=2, season=season)
    entries = list(round_.entries.all())
    p1, p2 = round_.packages.order_by("prompt_key")
    done = factories.finished_run(entries[0], p1, original_path=film)
    governance.season_close(season=season, reason="engine retired", actor="staff")
    assert LogEntry.objects.filter(kind="season_close").count() == 1
    with pytest.raises(services.TransitionError, match="closed"):
        services.run_start(run=services.run_create(entry=entries[1], package=p2))
    with pytest.raises(services.TransitionError):
        governance.season_close(season=season, reason="again", actor="staff")
    done.refresh_from_db()
    assert done.final_state == "completed_conforming"
    assert client.get(f"/api/v1/runs/{done.public_id}/manifest.json").status_code == 200


def test_tovaki_disclosure_schedule_at_every_stage(client, django_user_model):
    round_ = factories.round_(
        protocol="tovaki-2026-r1",
        retry_limit=1,
    )
    names = [e.identity for e in round_.entries.all()]

    def visible():
        response = client.get(f"/api/v1/rounds/{round_.slug}/disclosures/")
        assert response.status_code == 200
        return {k: v["visible"] for k, v in response.json()["items"].items()}, response.content

    def package_text():
        return client.get(f"/api/v1/rounds/{round_.slug}/packages/").json()[0]["content"]

    round_ = services.round_commit(round_=round_, actor="t")
    round_ = services.round_open(round_=round_, actor="t")
    for stage in ("open", "judging"):
        if stage == "judging":
            round_ = services.round_transition(round_=round_, to="judging", actor="t")
        shown, body = visible()
        assert shown["scope_and_fixed_settings"] and shown["score_dimensions_and_weights"]
        assert shown["protocol_commitment"] and shown["task_lane_coverage"]
        assert not shown["exact_prompts"] and not shown["model_roster"]
        assert not shown["task_local_anonymous_mapping"]
        assert not shown["anonymous_raw_reviewer_scores"]
        assert package_text() is None  # exact prompts withheld until scores lock
        assert not any(name.encode() in body for name in names)
    round_ = round_lock(round_=round_, actor="t")
    shown, body = visible()
    assert shown["exact_prompts"] and shown["model_roster"] and shown["accepted_sample_hashes"]
    assert shown["technical_failures_and_retries_redacted"]
    assert not shown["task_local_anonymous_mapping"]  # identity needs the explicit unlock
    assert not shown["reviewer_personal_identities"]
    assert not shown["provider_credentials_and_request_tokens"]
    assert package_text() is not None
    roster = client.get(f"/api/v1/rounds/{round_.slug}/disclosures/").json()["items"]
    assert sorted(roster["model_roster"]["value"]) == sorted(names)
    labels = client.get(f"/api/v1/rounds/{round_.slug}/entries/").json()
    assert all(e["system"] is None for e in labels)
    Round.objects.filter(pk=round_.pk).update(state="revealed")
    shown, _ = visible()
    assert shown["task_local_anonymous_mapping"]
    assert not shown["reviewer_personal_identities"]


def test_ai_duel_package_text_public_only_once_open(client):
    round_ = factories.committed_round()
    first = client.get(f"/api/v1/rounds/{round_.slug}/packages/").json()[0]
    assert len(first["sha256"]) == 64 and first["content"] is None
    services.round_open(round_=round_, actor="t")
    first = client.get(f"/api/v1/rounds/{round_.slug}/packages/").json()[0]
    assert first["content"]["story_outcome"]


def test_checklist_ticks_are_diagnostics_beside_the_ranking(film):
    round_ = factories.open_round(entries=2)
    package = round_.packages.get()
    run = factories.finished_run(round_.entries.first(), package, original_path=film)
    governance.checklist_tick_record(run=run, item_id="R1", met=True, reviewer="j1")
    governance.checklist_tick_record(run=run, item_id="R1", met=False, reviewer="j2")
    with pytest.raises(ValidationError, match="not an item"):
        governance.checklist_tick_record(run=run, item_id="R99", met=True, reviewer="j1")
    rows = checklist_diagnostics(round_)
    assert rows == [
        {
            "entry": run.entry.label,
            "prompt": "P1",
            "item": "R1",
            "met": 1,
            "reviewers": 2,
            "share_met": 0.5,
        }
    ]


def test_automated_critic_output_cannot_enter_a_ranking(film):
    round_ = factories.open_round(entries=2)
    package = round_.packages.get()
    runs = [factories.finished_run(e, package, original_path=film) for e in round_.entries.all()]
    for run, score in zip(runs, (0.9, 0.2), strict=True):
        governance.critic_report_record(
            run=run, critic="aesthetic-critic", critic_version="1", report={"score": score}
        )
    frame = critic_frame(round_)
    assert len(frame) == 2
    # However a critic's table is reshaped into comparisons, the ranking refuses it.
    a, b = frame["entry"].tolist()
    comparisons = frame.assign(a=a, b=b, outcome="a")[["a", "b", "outcome"]].rename(
        columns={"a": "a"}
    )
    with pytest.raises(DiagnosticNotRankable):
        bradley_terry.fit(comparisons)
    scores = frame.assign(
        system=frame["entry"], reviewer="critic", dimension="prompt_adherence", score=5.0
    )[["system", "reviewer", "dimension", "score"]]
    with pytest.raises(DiagnosticNotRankable):
        scorecards.weighted_totals(scores, {"prompt_adherence": 100})
    # The same shape from human ballots is accepted.
    human = pd.DataFrame({"a": [a, a], "b": [b, b], "outcome": ["a", "b"]})
    assert len(bradley_terry.fit(human)) == 2


def test_protocol_change_creates_a_new_version_and_leaves_completed_results(film, client):
    round_ = factories.open_round(entries=2)
    run = factories.finished_run(round_.entries.first(), round_.packages.get(), original_path=film)
    before = client.get(f"/api/v1/runs/{run.public_id}/manifest.json").json()
    old = round_.protocol_version
    definition = dict(old.definition, version="0.2")
    with pytest.raises(ValidationError, match="change-log"):
        services.protocol_version_successor(
            predecessor=old, key="ai-duel-0.2", definition=definition, change_log=""
        )
    new = services.protocol_version_successor(
        predecessor=old,
        key="ai-duel-0.2",
        definition=definition,
        change_log="Version bump for review feedback.",
    )
    assert new.predecessor == old and LogEntry.objects.filter(kind="protocol_change").exists()
    rerun_round = factories.open_round(entries=1, protocol="ai-duel-0.1")
    assert rerun_round.protocol_version == old  # the shipped key is unchanged
    after = client.get(f"/api/v1/runs/{run.public_id}/manifest.json").json()
    assert after == before and after["protocol_version"]["key"] == "ai-duel-0.1"
    old.refresh_from_db()
    assert old.frozen_at is not None and old.sha256 == before["protocol_version"]["sha256"]


def test_disclosures_are_logged_and_in_every_manifest(film):
    round_ = factories.open_round(entries=1)
    services.disclosure_add(
        kind="credit_grant",
        party="Engine Co",
        text="Granted 500 credits.",
        round_=round_,
        amount=Decimal("500"),
        currency="credits",
    )
    run = factories.finished_run(round_.entries.get(), round_.packages.get(), original_path=film)
    document = run.manifests.get().document
    kinds = [d["kind"] for d in document["disclosures"]]
    assert kinds[0] == "operator_relationship" and "credit_grant" in kinds
    assert "UNCEN" in document["disclosures"][0]["text"]
    assert LogEntry.objects.filter(kind="disclosure").count() == 1
    assert json.dumps(document)


def test_open_refused_after_season_closed_for_new_rounds():
    season = Season.objects.create(name="Old engine")
    governance.season_close(season=season, reason="retired", actor="staff")
    round_ = factories.round_(season=season, deadline=timezone.now() + timedelta(days=1))
    with pytest.raises(ValidationError, match="closed"):
        services.round_commit(round_=round_, actor="t")
