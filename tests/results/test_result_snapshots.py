"""Result snapshots: inputs exported and logged, results recomputable from the inputs alone,
labels exactly as stats.publication gives them, pools kept apart, every run in reliability."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, transaction

from duel.canonical import canonical_sha256, sha256_hex
from ledger.models import LogEntry
from stats import bootstrap as bs
from stats import publication, results, selectors, services
from stats.models import ResultSnapshot

pytestmark = pytest.mark.django_db


def test_snapshot_logs_its_inputs_hash_and_recomputes_from_them(results_round, cast_votes):
    made = results_round()
    cast_votes(made.round, voters=3)
    snapshot = services.result_compute(round_=made.round, result_kind=results.FULL_FILM_VOTES)

    # The stored inputs are canonical JSON, hashed as stored, and the log commits both hashes.
    assert sha256_hex(snapshot.inputs.encode()) == snapshot.inputs_sha256
    entry = LogEntry.objects.get(index=snapshot.log_index)
    assert entry.kind == "calculation_inputs"
    assert entry.subject == f"round:{made.round.slug}/result:full_film_votes"
    assert entry.payload["inputs_sha256"] == snapshot.inputs_sha256
    assert (
        entry.payload["result_sha256"]
        == snapshot.result_sha256
        == canonical_sha256(snapshot.result)
    )
    inputs = json.loads(snapshot.inputs)
    assert entry.payload["seed"] == inputs["parameters"]["seed"] == snapshot.seed
    assert inputs["parameters"]["n_replicates"] >= 1000
    assert snapshot.result["bootstrap"]["seed"] == snapshot.seed

    # The inputs alone give the published result.
    assert results.compute_result(inputs) == snapshot.result
    check = selectors.snapshot_recheck(snapshot)
    assert check.ok, check


def test_recompute_command_matches_and_refuses_altered_inputs(
    results_round, cast_votes, tmp_path, capsys
):
    made = results_round()
    cast_votes(made.round, voters=2)
    snapshot = services.result_compute(round_=made.round, result_kind=results.FULL_FILM_VOTES)
    call_command("recompute_result", str(snapshot.pk))
    assert "matches the published result" in capsys.readouterr().out

    # A downloaded copy recomputes too.
    copy = tmp_path / "inputs.json"
    copy.write_text(snapshot.inputs, encoding="utf-8")
    call_command("recompute_result", str(snapshot.pk), "--inputs", str(copy))

    # One flipped ballot: the hash no longer matches what was published.
    inputs = json.loads(snapshot.inputs)
    row = inputs["tables"]["ballots"]["rows"][0]
    outcome = inputs["tables"]["ballots"]["columns"].index("outcome")
    row[outcome] = "b" if row[outcome] == "a" else "a"
    copy.write_text(json.dumps(inputs), encoding="utf-8")
    with pytest.raises(CommandError, match="not the ones published"):
        call_command("recompute_result", str(snapshot.pk), "--inputs", str(copy))


def test_same_inputs_give_the_same_snapshot_and_new_ballots_a_new_one(results_round, cast_votes):
    made = results_round()
    cast_votes(made.round, voters=3, seed=2)
    first = services.result_compute(round_=made.round, result_kind=results.FULL_FILM_VOTES)
    logged = LogEntry.objects.filter(kind="calculation_inputs").count()
    again = services.result_compute(round_=made.round, result_kind=results.FULL_FILM_VOTES)
    assert again.pk == first.pk
    assert LogEntry.objects.filter(kind="calculation_inputs").count() == logged

    cast_votes(made.round, voters=2, seed=3)
    newer = services.result_compute(round_=made.round, result_kind=results.FULL_FILM_VOTES)
    assert newer.pk != first.pk
    assert newer.result["counts"]["valid_ballots"] > first.result["counts"]["valid_ballots"]
    assert selectors.latest_snapshots(made.round)[results.FULL_FILM_VOTES].pk == newer.pk


def test_snapshots_are_append_only_in_the_database(results_round, cast_votes):
    made = results_round(entries=2, packages=1)
    snapshot = services.result_compute(round_=made.round, result_kind=results.RELIABILITY)
    with pytest.raises(DatabaseError), transaction.atomic():
        ResultSnapshot.objects.filter(pk=snapshot.pk).update(status="edited")
    with pytest.raises(DatabaseError), transaction.atomic():
        ResultSnapshot.objects.filter(pk=snapshot.pk).delete()
    assert ResultSnapshot.objects.get(pk=snapshot.pk).status == snapshot.status


def test_label_shown_equals_publication_label_from_the_inputs(results_round, cast_votes):
    made = results_round(entries=3, packages=2)
    cast_votes(made.round, voters=5, seed=5)
    snapshot = services.result_compute(round_=made.round, result_kind=results.FULL_FILM_VOTES)
    inputs = json.loads(snapshot.inputs)

    # Independently: the same ballots through stats.publication, the same bootstrap.
    ballots = results.table_frame(inputs, "ballots").astype(str)
    systems = sorted(e.label for e in made.entries)
    protocol = made.round.protocol
    boot = bs.bootstrap_bradley_terry(
        ballots,
        bs.bootstrap_clusters(protocol, "full_film"),
        seed=snapshot.seed,
        n_replicates=inputs["parameters"]["n_replicates"],
    )
    expected = publication.publication_label(
        protocol,
        duration_class=made.round.duration_class,
        counts=publication.pool_counts(ballots, systems=systems),
        intervals=boot.intervals(),
        loo_top=bs.prompt_sensitivity(ballots).top,
    )
    published = snapshot.result["publication"]
    assert (published["key"], published["text"]) == (expected.key, expected.text)
    assert published["leader"] == expected.leader
    for row in snapshot.result["systems"]:
        label = expected.label_of(row["label"])
        assert row["publication"]["text"] == label.text
        assert row["counts"] == label.counts
    # Every qualified system is rated here (enough votes), best first, with its interval.
    ratings = [row["rating"] for row in snapshot.result["systems"]]
    assert ratings == sorted(ratings, reverse=True)
    assert all(r["lower"] <= r["rating"] <= r["upper"] for r in snapshot.result["systems"])


def test_nonconforming_and_exhibition_outputs_stay_out_of_the_ranking(results_round, cast_votes):
    made = results_round(entries=3, packages=2, nonconforming=[(0, 1)], exhibition=2)
    cast_votes(made.round, voters=3, seed=4)
    votes = services.result_compute(round_=made.round, result_kind=results.FULL_FILM_VOTES)
    ranked = {row["label"] for row in votes.result["systems"]}
    assert ranked == {made.entries[0].label, made.entries[1].label}
    excluded_run = str(made.runs[(0, 1)].public_id)
    ballots = results.table_frame(json.loads(votes.inputs), "ballots")
    assert excluded_run not in set(ballots["run_a"]) | set(ballots["run_b"])

    reliability = services.result_compute(round_=made.round, result_kind=results.RELIABILITY)
    runs = {r["run"]: r for r in reliability.result["runs"]}
    assert runs[excluded_run]["final_state"] == "completed_nonconforming"
    assert not runs[excluded_run]["in_main_ranking"]
    exhibition = made.entries[2]
    for r in runs.values():
        if r["label"] == exhibition.label:
            assert r["exhibition"] and not r["in_main_ranking"]
            assert "exhibition" in r["excluded_from_main"]


def test_reliability_lists_every_started_run_by_final_state(results_round):
    made = results_round(entries=3, packages=2, nonconforming=[(1, 0)], failed=[(2, 1)])
    snapshot = services.result_compute(round_=made.round, result_kind=results.RELIABILITY)
    result = snapshot.result
    started = {str(r.public_id) for r in made.runs.values()}
    assert {r["run"] for r in result["runs"]} == started
    assert result["counts"]["started_runs"] == 6
    by_label = {e["label"]: e for e in result["entries"]}
    assert by_label[made.entries[0].label]["by_final_state"]["completed_conforming"] == 2
    assert by_label[made.entries[1].label]["by_final_state"]["completed_nonconforming"] == 1
    failed = by_label[made.entries[2].label]
    assert failed["by_final_state"]["policy_blocked"] == 1
    assert failed["started_runs"] == 2
    # Cost over every attempt, failed ones included; wall time measured.
    assert failed["cost"]["billed_cost"] == "1.50"
    assert by_label[made.entries[0].label]["wall_time_s"]["total"] >= 0
    # Every final state of the protocol is a column, so a reader sees the zeros too.
    assert set(made.round.protocol.final_states) <= set(failed["by_final_state"])
    # Provider messages are free text; only codes are published.
    assert made.identities[2].vendor not in json.dumps(result)
    assert "safety_block" in json.dumps(result)


def test_synthetic_ballots_count_only_in_demo_rounds(results_round, monkeypatch):
    made = results_round(entries=2, packages=1, is_demo=False)
    a, b = sorted(e.label for e in made.entries)
    run_a, run_b = (str(made.runs[(k, 0)].public_id) for k in range(2))
    rows = []
    for k in range(6):
        rows.append(
            {
                "ballot_id": f"00000000-0000-0000-0000-00000000000{k}",
                "voter": f"v{k}",
                "prompt": "P1",
                "battle": 1,
                "run_a": min(run_a, run_b),
                "run_b": max(run_a, run_b),
                "a": a if run_a < run_b else b,
                "b": b if run_a < run_b else a,
                "first": "a",
                "choice": "first",
                "outcome": "a" if k % 2 else "b",
                "excluded": k == 5,
                "exclusion_reason": "audio_off" if k == 5 else "",
                "audio_on": k != 5,
                "synthetic": k < 2,
                "device": "desktop",
                "expertise": "",
                "locked_at": None,
                "sha256": "0" * 64,
                "log_index": k,
            }
        )
    frame = pd.DataFrame(rows)
    monkeypatch.setattr("voting.selectors.ballots_frame", lambda round_, **kw: frame)
    inputs = selectors.result_inputs(made.round, results.FULL_FILM_VOTES)
    assert len(inputs["tables"]["ballots"]["rows"]) == 3  # 6 - 2 synthetic - 1 excluded
    assert inputs["notes"] == {"excluded_ballots": {"audio_off": 1}, "synthetic_ballots_dropped": 2}


def test_result_kinds_follow_the_protocol(results_round):
    short = results_round(entries=2, packages=1).round
    assert selectors.result_kinds_for(short) == ["full_film_votes", "reliability"]
    long = results_round(entries=2, packages=1, duration_class="minute_5").round
    assert selectors.result_kinds_for(long) == [
        "jury_dimensions",
        "holistic_choice",
        "segment",
        "reliability",
    ]


def test_snapshot_admin_lists_and_rechecks_snapshots(results_round, cast_votes, client):
    from django.contrib.auth import get_user_model

    made = results_round(entries=2, packages=1)
    cast_votes(made.round, voters=2)
    snapshot = services.result_compute(round_=made.round, result_kind=results.FULL_FILM_VOTES)
    admin_user = get_user_model().objects.create_superuser("root", password="x")
    client.force_login(admin_user)
    page = client.get("/admin/stats/resultsnapshot/")
    assert page.status_code == 200
    assert f"/results/{made.round.slug}/inputs/{snapshot.pk}.json" in page.content.decode()
    response = client.post(
        "/admin/stats/resultsnapshot/",
        {"action": "recheck", "_selected_action": [snapshot.pk]},
        follow=True,
    )
    assert "the recomputed result equals the published one" in response.content.decode()
    assert client.get(f"/admin/stats/resultsnapshot/{snapshot.pk}/delete/").status_code == 403


def test_a_critic_column_cannot_enter_the_ranking_inputs(results_round, cast_votes, monkeypatch):
    """Issue 9: automated critics produce diagnostics only; the exported tables carry their
    declared columns and nothing else, so a critic's number never reaches a fit."""
    import voting.selectors

    made = results_round(entries=2, packages=1)
    cast_votes(made.round, voters=2)
    plain = selectors.result_inputs(made.round, results.FULL_FILM_VOTES)
    real = voting.selectors.ballots_frame

    def with_critic(round_, **kw):
        frame = real(round_, **kw)
        frame["critic_score"] = 99.0
        frame["outcome_by_critic"] = "a"
        return frame

    monkeypatch.setattr("voting.selectors.ballots_frame", with_critic)
    inputs = selectors.result_inputs(made.round, results.FULL_FILM_VOTES)
    assert inputs == plain
    assert "critic" not in json.dumps(inputs["tables"])
