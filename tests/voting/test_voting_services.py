"""Voting services: battles, assignment, the playback proof, ballots, abuse flags, the log."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from duel.canonical import canonical_sha256
from ledger.models import LogEntry
from rounds.models import Entry, Round
from tests import factories
from tests.voting.voting_support import Viewer, sign, voting_round
from voting import selectors, services
from voting.models import Assignment, Ballot, BallotExclusion, Battle, Heartbeat, Voter

pytestmark = pytest.mark.django_db


def new_voter(**kwargs) -> Voter:
    return services.voter_create(**kwargs)


def cast_after_watching(assignment, choice="first", *, audible=True, network_hash=""):
    Viewer(assignment).watch_both(audible=audible)
    return services.ballot_cast(assignment=assignment, choice=choice, network_hash=network_hash)


# ---------------------------------------------------------------------------------------------
# Battles


def test_battles_pair_every_rankable_output_of_the_same_prompt(films):
    round_ = voting_round(films, entries=3, packages=2, sync=False)
    measured = []

    def measure(media_file):
        measured.append(media_file.pk)
        return services.proxy_duration_s(media_file)  # real ffprobe

    created = services.battle_sync(round_=round_, measure=measure)
    assert len(created) == 6  # 3 pairs per prompt, 2 prompts
    assert len(measured) == len(set(measured)) == 6  # each proxy probed once
    for battle in created:
        assert battle.run_a.package_id == battle.run_b.package_id == battle.package_id
        assert battle.run_a.entry_id != battle.run_b.entry_id
        assert str(battle.run_a.public_id) < str(battle.run_b.public_id)
        assert battle.duration_class == round_.duration_class
        assert battle.prompt_track == round_.prompt_track
        assert battle.duration_a_s == pytest.approx(3.0, abs=0.1)  # measured by ffprobe
    assert services.battle_sync(round_=round_, measure=measure) == []  # idempotent
    assert len(measured) == 6
    assert not services.battles_stale(round_)


def test_nonconforming_and_exhibition_outputs_never_enter_a_battle(films):
    round_ = factories.open_round(entries=3)
    package = round_.packages.get()
    good, bad, exhibition = round_.entries.order_by("label")
    Entry.objects.filter(pk=exhibition.pk)  # the path is frozen at commit: use the version flag
    exhibition.system_version.public_configuration = False
    exhibition.system_version.save(update_fields=["public_configuration"])
    factories.finished_run(good, package, original_path=films[0])
    factories.finished_run(bad, package, original_path=films[1], problems=["too_short"])
    factories.finished_run(exhibition, package, original_path=films[2])
    assert services.battle_sync(round_=round_) == []  # only one rankable output


def test_battle_pair_and_durations_are_frozen_in_the_database(films):
    round_ = voting_round(films, entries=2)
    battle = Battle.objects.get(round=round_)
    with pytest.raises(DatabaseError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE voting_battle SET duration_a_s = 1.0 WHERE id = %s", [battle.pk])


# ---------------------------------------------------------------------------------------------
# Assignment


def test_assignment_gives_the_least_voted_pairs_first(films):
    round_ = voting_round(films, entries=3)  # 3 battles
    rng = random.Random(7)
    battles = []
    for _ in range(9):
        assignment = services.assignment_next(voter=new_voter(), round_=round_, rng=rng)
        battles.append(assignment.battle_id)
    assert sorted(Counter(battles).values()) == [3, 3, 3]


def test_votes_count_as_exposure_after_the_open_window(films, monkeypatch):
    round_ = voting_round(films, entries=3)
    rng = random.Random(1)
    first = services.assignment_next(voter=new_voter(), round_=round_, rng=rng)
    cast_after_watching(first)
    # Open assignments no longer count once the window is over; the ballot still does.
    monkeypatch.setattr(services, "OPEN_ASSIGNMENT_WINDOW", services.timedelta(0))
    later = {
        services.assignment_next(voter=new_voter(), round_=round_, rng=rng).battle_id
        for _ in range(4)
    }
    assert first.battle_id not in later


def test_a_voter_never_gets_the_same_pair_twice(films):
    round_ = voting_round(films, entries=3)
    voter = new_voter()
    got = [
        services.assignment_next(voter=voter, round_=round_, resume=False).battle_id
        for _ in range(3)
    ]
    assert len(set(got)) == 3
    with pytest.raises(services.NothingToAssign):
        services.assignment_next(voter=voter, round_=round_, resume=False)
    # The database refuses it too.
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(
            token="dup",
            voter=voter,
            battle_id=got[0],
            round=round_,
            first="a",
            hmac_key="00" * 32,
        )


def test_an_open_assignment_is_resumed(films):
    round_ = voting_round(films, entries=3)
    voter = new_voter()
    first = services.assignment_next(voter=voter, round_=round_)
    assert services.assignment_next(voter=voter, round_=round_).pk == first.pk
    assert services.assignment_next(voter=voter, round_=round_, resume=False).pk != first.pk


def test_side_randomization_is_recorded_counterbalanced_and_mapped_to_runs(films):
    round_ = voting_round(films, entries=2)
    battle = Battle.objects.get(round=round_)
    rng = random.Random(3)
    assignments = [
        services.assignment_next(voter=new_voter(), round_=round_, rng=rng) for _ in range(6)
    ]
    assert Counter(a.first for a in assignments) == {"a": 3, "b": 3}
    for assignment in assignments:
        sessions = {s.film: s.duration_s for s in assignment.sessions.all()}
        assert sessions[1] == battle.duration_for(assignment.first)
    # Choosing Film 1 means choosing the run that played first.
    played_b_first = next(a for a in assignments if a.first == "b")
    ballot = cast_after_watching(played_b_first, "first")
    assert ballot.outcome == "b" and ballot.chosen_run_id == battle.run_b_id
    assert ballot.record["first"] == "b" and ballot.record["choice"] == "first"


def test_only_rounds_judged_by_pairwise_votes_are_offered(films):
    five_minute = factories.open_round(entries=2, duration_class="minute_5")
    assert not selectors.round_is_pairwise(five_minute)
    with pytest.raises(services.VotingError):
        services.battle_sync(round_=five_minute)
    assert five_minute not in selectors.voting_rounds()


# ---------------------------------------------------------------------------------------------
# Heartbeats


def test_a_tampered_heartbeat_is_refused_and_not_stored(films):
    round_ = voting_round(films, entries=2)
    assignment = services.assignment_next(voter=new_voter(), round_=round_)
    viewer = Viewer(assignment)
    body = viewer.body(1, [(0, 1, True)])
    signature = sign(assignment, body)
    tampered = body.replace(b'"volume": 1.0', b'"volume": 0.9')
    with pytest.raises(services.Forbidden) as exc:
        services.heartbeat_record(
            token=assignment.token,
            voter_id=str(assignment.voter.public_id),
            body=tampered,
            signature=signature,
        )
    assert exc.value.status == 403 and exc.value.code_name == "bad_signature"
    assert not Heartbeat.objects.exists()


def test_a_replayed_heartbeat_is_refused(films):
    round_ = voting_round(films, entries=2)
    assignment = services.assignment_next(voter=new_voter(), round_=round_)
    viewer = Viewer(assignment)
    body = viewer.body(1, [])
    kwargs = dict(token=assignment.token, voter_id=str(assignment.voter.public_id), body=body)
    assert services.heartbeat_record(signature=sign(assignment, body), **kwargs).accepted
    with pytest.raises(services.Conflict) as exc:
        services.heartbeat_record(signature=sign(assignment, body), **kwargs)
    assert exc.value.code_name == "replayed"
    older = viewer.body(2, [], seq=0 + 1)  # a lower sequence number than the last one
    with pytest.raises(services.Conflict):
        services.heartbeat_record(
            token=assignment.token,
            voter_id=str(assignment.voter.public_id),
            body=older,
            signature=sign(assignment, older),
        )
    assert Heartbeat.objects.count() == 1


def test_another_voter_cannot_report_for_an_assignment(films):
    round_ = voting_round(films, entries=2)
    assignment = services.assignment_next(voter=new_voter(), round_=round_)
    body = Viewer(assignment).body(1, [])
    with pytest.raises(services.Forbidden):
        services.heartbeat_record(
            token=assignment.token,
            voter_id=str(new_voter().public_id),
            body=body,
            signature=sign(assignment, body),
        )


def test_the_server_clock_caps_watched_time(films):
    round_ = voting_round(films, entries=2)
    assignment = services.assignment_next(voter=new_voter(), round_=round_)
    viewer = Viewer(assignment)
    viewer.send(1, [], at=0)
    result = viewer.send(1, [(0, 3.0, True)], at=0.2, ended=True)  # 3 s of film in 0.2 s
    assert not result.accepted and result.refusal == "impossible_speed"
    assert result.status["films"]["1"]["coverage"] == 0
    stored = Heartbeat.objects.order_by("seq").last()
    assert not stored.accepted and stored.refusal == "impossible_speed"
    session = assignment.sessions.get(film=1)
    assert session.flags == ["impossible_speed"] and session.refusals == {"impossible_speed": 1}


# ---------------------------------------------------------------------------------------------
# Ballots


def test_a_vote_before_both_films_were_watched_is_refused(films):
    round_ = voting_round(films, entries=2)
    assignment = services.assignment_next(voter=new_voter(), round_=round_)
    viewer = Viewer(assignment)
    end = viewer.watch(1, at=0)
    viewer.send(2, [], at=end + 1)
    viewer.send(2, [(0, 1.0, True)], at=end + 2)
    log_size = LogEntry.objects.count()
    with pytest.raises(services.NotWatched) as exc:
        services.ballot_cast(assignment=assignment, choice="first")
    assert exc.value.status == 422 and "Film 2" in exc.value.detail
    assert not Ballot.objects.exists()
    assert LogEntry.objects.count() == log_size


def test_a_full_vote_is_locked_hashed_and_committed_to_the_log(films):
    round_ = voting_round(films, entries=2)
    voter = new_voter(user_agent="Mozilla/5.0 (iPhone; CPU iPhone OS 17_0) Mobile/15E148")
    services.voter_update_cohort(voter=voter, expertise="enthusiast")
    assignment = services.assignment_next(voter=voter, round_=round_)
    ballot = cast_after_watching(assignment, "second")
    assert ballot.exclusion_reason == "" and ballot.audio_on and not ballot.synthetic
    assert ballot.sha256 == canonical_sha256(ballot.record)
    entry = LogEntry.objects.get(index=ballot.log_index)
    assert entry.kind == "ballot" and entry.subject == f"round:{round_.slug}"
    assert entry.payload["sha256"] == ballot.sha256
    assert canonical_sha256(entry.payload["record"]) == ballot.sha256
    record = ballot.record
    assert record["cohort"] == {"device": "phone", "expertise": "enthusiast"}
    for private in (str(voter.public_id), "iPhone", "Mozilla"):
        assert private not in json.dumps(entry.payload)
    assert selectors.unlocked_ballot_count(round_) == 0
    # Replaying the ballot is refused.
    with pytest.raises(services.Conflict) as exc:
        services.ballot_cast(assignment=assignment, choice="first")
    assert exc.value.code_name == "already_voted"
    # And no heartbeat is taken after the lock.
    with pytest.raises(services.Conflict):
        Viewer(assignment).send(1, [], at=100, seq=10_000)


def test_ballots_frame_has_canonical_sides_and_the_agreed_columns(films):
    round_ = voting_round(films, entries=2)
    battle = Battle.objects.get(round=round_)
    rng = random.Random(5)
    ballots = []
    for choice in ("first", "second", "first"):
        assignment = services.assignment_next(voter=new_voter(), round_=round_, rng=rng)
        ballots.append(cast_after_watching(assignment, choice))
    frame = selectors.ballots_frame(round_)
    for column in (
        "ballot_id",
        "voter",
        "prompt",
        "run_a",
        "run_b",
        "a",
        "b",
        "outcome",
        "first",
        "excluded",
        "exclusion_reason",
        "audio_on",
        "synthetic",
        "device",
        "expertise",
        "locked_at",
        "sha256",
    ):
        assert column in frame.columns
    assert len(frame) == 3
    assert set(frame["run_a"]) == {str(battle.run_a.public_id)}
    assert set(frame["a"]) == {battle.run_a.entry.label}
    assert set(frame["prompt"]) == {"P1"}
    for ballot in ballots:
        row = frame[frame["ballot_id"] == str(ballot.public_id)].iloc[0]
        winner = ballot.first if ballot.choice == "first" else ("b" if ballot.first == "a" else "a")
        assert row["outcome"] == winner and row["first"] == ballot.first
        assert row["voter"] == selectors.voter_pseudonym(round_, ballot.voter.public_id)
        assert str(ballot.voter.public_id) not in row["voter"]


def test_a_ballot_without_sound_is_kept_flagged_and_left_out_of_the_main_result(films):
    round_ = voting_round(films, entries=2)
    assignment = services.assignment_next(voter=new_voter(), round_=round_)
    ballot = cast_after_watching(assignment, audible=False)
    assert not ballot.audio_on and ballot.exclusion_reason == "audio_off"
    assert LogEntry.objects.get(index=ballot.log_index).payload["record"]["audio_on"] is False
    assert selectors.ballots_frame(round_).empty
    kept = selectors.ballots_frame(round_, include_excluded=True)
    assert list(kept["exclusion_reason"]) == ["audio_off"] and list(kept["excluded"]) == [True]


def test_the_database_refuses_an_audio_off_ballot_without_exclusion(films):
    round_ = voting_round(films, entries=2)
    ballot = cast_after_watching(services.assignment_next(voter=new_voter(), round_=round_))
    other = services.assignment_next(voter=new_voter(), round_=round_)
    fields = {
        f.attname: getattr(ballot, f.attname)
        for f in Ballot._meta.concrete_fields
        if f.attname not in ("id", "public_id", "assignment_id", "voter_id")
    }
    fields.update(assignment_id=other.pk, voter_id=other.voter_id, audio_on=False)
    with pytest.raises(IntegrityError), transaction.atomic():
        Ballot.objects.create(**fields)


@pytest.mark.parametrize("allow_ties", [False, True])
def test_a_tie_only_where_the_round_allows_it(films, allow_ties):
    round_ = voting_round(films, entries=2, voting_settings={"allow_ties": allow_ties})
    assignment = services.assignment_next(voter=new_voter(), round_=round_)
    Viewer(assignment).watch_both()
    if allow_ties:
        ballot = services.ballot_cast(assignment=assignment, choice="tie")
        assert ballot.outcome == "tie" and ballot.chosen_run is None
    else:
        with pytest.raises(services.VotingError) as exc:
            services.ballot_cast(assignment=assignment, choice="tie")
        assert exc.value.code_name == "tie"


def test_the_cap_of_ballots_per_voter_per_round(films):
    round_ = voting_round(films, entries=3, voting_settings={"ballots_per_voter": 1})
    voter = new_voter()
    first = services.assignment_next(voter=voter, round_=round_)
    second = services.assignment_next(voter=voter, round_=round_, resume=False)
    cast_after_watching(first)
    Viewer(second).watch_both()
    with pytest.raises(services.Conflict) as exc:
        services.ballot_cast(assignment=second, choice="first")
    assert exc.value.code_name == "cap"
    with pytest.raises(services.NothingToAssign) as exc:
        services.assignment_next(voter=voter, round_=round_)
    assert exc.value.code_name == "cap"


def test_no_ballot_once_the_round_stops_taking_votes(films):
    round_ = voting_round(films, entries=2)
    assignment = services.assignment_next(voter=new_voter(), round_=round_)
    Viewer(assignment).watch_both()
    from rounds import services as round_services
    from stats import services as stats_services

    round_services.round_transition(round_=round_, to="judging", actor="t")
    assert selectors.round_accepts_ballots(round_)  # judging still takes the open votes
    stats_services.round_lock(round_=round_, actor="t")
    assert LogEntry.objects.filter(kind="ballot_lock", subject=f"round:{round_.slug}").exists()
    with pytest.raises(services.Conflict) as exc:
        services.ballot_cast(assignment=assignment, choice="first")
    assert exc.value.code_name == "round_closed"


def test_impossible_speed_marks_the_ballot_excluded(films):
    round_ = voting_round(films, entries=2)
    assignment = services.assignment_next(voter=new_voter(), round_=round_)
    viewer = Viewer(assignment)
    viewer.send(1, [], at=0)
    # 2.5 s of film in 1 s passes the per-heartbeat allowance but not the film's clock.
    refused = viewer.send(1, [(0, 2.5, True)], at=0.5)
    assert refused.refusal in ("impossible_speed", "too_fast")
    viewer.send(1, [(0, 2.0, True)], at=0.6)  # 2 s in 0.6 s: impossible
    end = viewer.watch(1, at=10)
    viewer.watch(2, at=end + 1)
    ballot = services.ballot_cast(assignment=assignment, choice="first")
    assert "impossible_speed" in ballot.exclusion_reason


def test_identical_timing_across_voters_excludes_both_ballots(films):
    round_ = voting_round(films, entries=3)
    ballots = []
    for _ in range(2):
        assignment = services.assignment_next(voter=new_voter(), round_=round_, resume=False)
        viewer = Viewer(assignment, jitter=False)  # a script: the same timings every time
        viewer.watch_both()
        ballots.append(services.ballot_cast(assignment=assignment, choice="first"))
    first, second = ballots
    assert "identical_timing" in second.exclusion_reason
    exclusion = BallotExclusion.objects.get(ballot=first)
    assert exclusion.reason == "identical_timing"
    correction = LogEntry.objects.get(index=exclusion.log_index)
    assert correction.kind == "correction" and correction.supersedes_id == first.log_index
    assert selectors.ballots_frame(round_).empty
    first.refresh_from_db()
    assert first.exclusion_reason == ""  # the locked record itself never changes


def test_genuine_timings_are_not_flagged(films):
    round_ = voting_round(films, entries=3)
    for offset in (0, 137):
        assignment = services.assignment_next(voter=new_voter(), round_=round_, resume=False)
        viewer = Viewer(assignment, jitter=False)
        end = viewer.watch(1, at=0)
        viewer.watch(2, at=end + 1, client_step_ms=1000 + offset)  # Film 2's pace differs
        services.ballot_cast(assignment=assignment, choice="first")
    assert len(selectors.ballots_frame(round_)) == 2


def test_many_voters_from_one_network_are_flagged(films):
    round_ = voting_round(films, entries=3, voting_settings={"max_voters_per_network": 2})
    network = services.network_hash_of("203.0.113.7")
    assert network == services.network_hash_of("203.0.113.200")  # same /24
    assert network != services.network_hash_of("203.0.114.7")
    ballots = []
    for _ in range(3):
        voter = new_voter(network_hash=network)
        assignment = services.assignment_next(voter=voter, round_=round_, resume=False)
        Viewer(assignment).watch_both()
        ballots.append(
            services.ballot_cast(assignment=assignment, choice="first", network_hash=network)
        )
    assert [b.exclusion_reason for b in ballots] == ["", "", "network_crowd"]
    assert BallotExclusion.objects.filter(reason="network_crowd").count() == 2
    assert len(selectors.ballots_frame(round_, include_excluded=True)) == 3
    assert selectors.ballots_frame(round_).empty


def test_the_network_hash_never_stores_the_address():
    voter = new_voter(network_hash=services.network_hash_of("2001:db8:1234:5678::1"))
    assert voter.network_hash == services.network_hash_of("2001:db8:1234:ffff::9")  # same /48
    stored = json.dumps(list(Voter.objects.values()), default=str)
    assert "2001:db8" not in stored


# ---------------------------------------------------------------------------------------------
# Synthetic ballots


def test_synthetic_ballots_are_refused_outside_demo_rounds(films):
    round_ = voting_round(films, entries=2)
    voter = new_voter(synthetic=True)
    assignment = services.assignment_next(voter=voter, round_=round_)
    with pytest.raises(services.VotingError) as exc:
        services.ballot_cast(assignment=assignment, choice="first", synthetic=True)
    assert exc.value.code_name == "synthetic_refused"
    assert not Ballot.objects.exists()


def test_the_database_refuses_a_synthetic_ballot_in_a_real_round(films):
    demo = voting_round(films, entries=2, is_demo=True)
    real = voting_round(films, entries=2)
    voter = new_voter(synthetic=True)
    demo_ballot = services.ballot_cast(
        assignment=services.assignment_next(voter=voter, round_=demo),
        choice="first",
        synthetic=True,
    )
    assert demo_ballot.synthetic and demo_ballot.exclusion_reason == ""
    real_assignment = services.assignment_next(voter=new_voter(), round_=real)
    fields = {
        f.attname: getattr(demo_ballot, f.attname)
        for f in Ballot._meta.concrete_fields
        if f.attname not in ("id", "public_id")
    }
    fields.update(
        assignment_id=real_assignment.pk,
        voter_id=real_assignment.voter_id,
        round_id=real.pk,
        battle_id=real_assignment.battle_id,
        chosen_run_id=real_assignment.battle.run_a_id,
    )
    with pytest.raises(IntegrityError, match="demo"), transaction.atomic():
        Ballot.objects.create(**fields)
    fields["synthetic"] = False
    Ballot.objects.create(**fields)  # the same row, not synthetic, is accepted


def test_a_simulated_voter_cannot_cast_a_real_ballot(films):
    round_ = voting_round(films, entries=2, is_demo=True)
    assignment = services.assignment_next(voter=new_voter(synthetic=True), round_=round_)
    with pytest.raises(services.Forbidden):
        services.ballot_cast(assignment=assignment, choice="first")


# ---------------------------------------------------------------------------------------------
# Append-only, in the database


APPEND_ONLY_STATEMENTS = [
    "UPDATE voting_ballot SET choice = 'second'",
    "UPDATE voting_ballot SET exclusion_reason = ''",
    "DELETE FROM voting_ballot",
    "UPDATE voting_heartbeat SET accepted = FALSE",
    "DELETE FROM voting_heartbeat",
    "UPDATE voting_assignment SET first = 'b'",
    "DELETE FROM voting_assignment",
    "UPDATE voting_ballotexclusion SET reason = 'none'",
    "DELETE FROM voting_ballotexclusion",
]


def test_records_are_append_only_in_the_database(films):
    round_ = voting_round(films, entries=2, voting_settings={"max_voters_per_network": 0})
    network = services.network_hash_of("198.51.100.1")
    assignment = services.assignment_next(voter=new_voter(network_hash=network), round_=round_)
    ballot = cast_after_watching(assignment, audible=False, network_hash=network)
    assert ballot.exclusion_reason == "audio_off,network_crowd"
    BallotExclusion.objects.create(ballot=ballot, reason="manual_check")
    for statement in APPEND_ONLY_STATEMENTS:
        with pytest.raises(DatabaseError), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(statement)
    ballot.refresh_from_db()
    assert ballot.choice == "first" and ballot.exclusion_reason == "audio_off,network_crowd"
    assert Heartbeat.objects.filter(assignment=assignment, accepted=True).count() > 0
    assert BallotExclusion.objects.get(ballot=ballot).reason == "manual_check"


def test_round_ballot_lock_commits_the_ballot_set(films):
    round_ = voting_round(films, entries=2)
    ballot = cast_after_watching(services.assignment_next(voter=new_voter(), round_=round_))
    payload = services.round_ballots_lock(round_=round_, actor="staff")
    entry = LogEntry.objects.filter(kind="ballot_lock").get()
    assert entry.payload == payload
    assert payload["ballots"] == payload["valid"] == 1
    expected = canonical_sha256([[str(ballot.public_id), ballot.sha256, ""]])
    assert payload["ballots_sha256"] == expected


def test_round_voting_settings_default_and_override(films):
    round_ = Round(voting_settings={"ballots_per_voter": 3})
    settings_ = selectors.voting_settings(round_)
    assert settings_["ballots_per_voter"] == 3
    assert settings_["allow_ties"] is False and settings_["show_identities_after_vote"] is False
