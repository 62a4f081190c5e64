"""The judgment lock and the gated, logged identity reveal."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import AnonymousUser
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import RequestFactory
from django.utils import timezone

from ledger.models import LogEntry
from ledger.services import entry_append
from rounds.models import Round, identity_commitment
from rounds.services import TransitionError
from stats import admin_actions, results, selectors, services
from tests.results.conftest import to_judging
from voting import services as voting_services
from voting.models import Ballot

pytestmark = pytest.mark.django_db


def _unlocked_ballot(round_: Round) -> Ballot:
    """A ballot written around the ballot service: never committed to the log."""
    voter = voting_services.voter_create(synthetic=True)
    assignment = voting_services.assignment_next(voter=voter, round_=round_, resume=False)
    return Ballot.objects.create(
        assignment=assignment,
        round=round_,
        battle=assignment.battle,
        voter=voter,
        choice="first",
        chosen_run=assignment.battle.run_for(assignment.first),
        outcome=assignment.first,
        first=assignment.first,
        audio_on=True,
        synthetic=True,
        record={},
        sha256="0" * 64,
        log_index=None,
        locked_at=timezone.now(),
    )


@pytest.fixture
def judged(results_round, cast_votes):
    """A demo round in judging with committed synthetic ballots."""
    made = results_round(entries=3, packages=1)
    cast_votes(made.round, voters=2, per_voter=2)
    made.round = to_judging(made.round)
    return made


def test_lock_commits_the_ballot_set_and_logs_the_transition(judged):
    round_ = services.round_lock(round_=judged.round, actor="staff")
    assert round_.state == Round.State.LOCKED
    subject = f"round:{round_.slug}"
    lock = LogEntry.objects.filter(kind="ballot_lock", subject=subject).get()
    assert lock.payload["ballots"] == Ballot.objects.filter(round=round_).count() > 0
    transition = LogEntry.objects.filter(kind="round_transition", subject=subject).last()
    assert transition.payload["from"] == "judging" and transition.payload["to"] == "locked"
    assert transition.index > lock.index


def test_lock_is_refused_with_an_unlocked_ballot(judged):
    _unlocked_ballot(judged.round)
    with pytest.raises(ValidationError, match="1 ballots .* not locked"):
        services.round_lock(round_=judged.round, actor="staff")
    judged.round.refresh_from_db()
    assert judged.round.state == Round.State.JUDGING
    assert not LogEntry.objects.filter(kind="ballot_lock").exists()


def test_lock_is_refused_with_an_unlocked_scorecard(judged, monkeypatch):
    monkeypatch.setattr("juries.selectors.unlocked_scorecard_count", lambda round_: 2)
    with pytest.raises(ValidationError, match="2 scorecards"):
        services.round_lock(round_=judged.round, actor="staff")
    judged.round.refresh_from_db()
    assert judged.round.state == Round.State.JUDGING


def test_lock_needs_a_round_in_judging(results_round):
    made = results_round(entries=2, packages=1)
    with pytest.raises(TransitionError, match="only a round in judging"):
        services.round_lock(round_=made.round, actor="staff")


def test_reveal_is_refused_without_the_permission(judged, staff):
    round_ = services.round_lock(round_=judged.round, actor="staff")
    for user in (staff, AnonymousUser()):
        with pytest.raises(PermissionDenied):
            services.round_reveal(round_=round_, user=user)
    round_.refresh_from_db()
    assert round_.state == Round.State.LOCKED and round_.revealed_at is None
    assert not LogEntry.objects.filter(kind="reveal_unlock").exists()


def test_reveal_is_refused_before_the_lock(judged, revealer):
    with pytest.raises(TransitionError, match="only a locked round"):
        services.round_reveal(round_=judged.round, user=revealer)
    judged.round.refresh_from_db()
    assert judged.round.state == Round.State.JUDGING


def test_reveal_is_refused_with_unlocked_ballots(judged, revealer):
    round_ = services.round_lock(round_=judged.round, actor="staff")
    # Judging is over, but something wrote a ballot around the service afterwards.
    Round.objects.filter(pk=round_.pk).update(state=Round.State.JUDGING)
    round_.refresh_from_db()
    _unlocked_ballot(round_)
    Round.objects.filter(pk=round_.pk).update(state=Round.State.LOCKED)
    round_.refresh_from_db()
    with pytest.raises(ValidationError, match="not locked and committed"):
        services.round_reveal(round_=round_, user=revealer)
    round_.refresh_from_db()
    assert round_.state == Round.State.LOCKED


def test_reveal_logs_identities_that_verify_against_the_commitments(judged, revealer):
    services.result_compute(round_=judged.round, result_kind=results.FULL_FILM_VOTES)
    round_ = services.round_lock(round_=judged.round, actor="staff")
    assert selectors.verify_reveal(round_).problems == ["the round has no reveal_unlock entry"]
    round_ = services.round_reveal(round_=round_, user=revealer)
    assert round_.state == Round.State.REVEALED and round_.revealed_at is not None

    subject = f"round:{round_.slug}"
    unlock = LogEntry.objects.get(kind="reveal_unlock", subject=subject)
    assert unlock.payload["actor"] == "revealer"
    commits = {
        e.payload["label"]: e.payload["identity_commitment"]
        for e in LogEntry.objects.filter(kind="entry_commit", subject__startswith=subject + "/")
    }
    revealed = {item["label"]: item for item in unlock.payload["entries"]}
    assert set(revealed) == set(commits) == {e.label for e in judged.entries}
    for entry, identity in zip(judged.entries, judged.identities, strict=True):
        item = revealed[entry.label]
        assert item["system"] == identity.name and item["vendor"] == identity.vendor
        assert item["nonce"] == entry.identity_nonce
        # Anyone can recompute the commitment from what the unlock published.
        assert (
            identity_commitment(entry.label, item["identity"], item["nonce"])
            == commits[entry.label]
        )
    assert [r["result_kind"] for r in unlock.payload["results"]] == ["full_film_votes"]
    transition = LogEntry.objects.filter(kind="round_transition", subject=subject).last()
    assert (transition.payload["from"], transition.payload["to"]) == ("locked", "revealed")

    check = selectors.verify_reveal(round_)
    assert check.ok, check.problems
    assert len(check.checked) == 3 and all(c["matches"] for c in check.checked)
    with pytest.raises(TransitionError):
        services.round_reveal(round_=round_, user=revealer)


def test_verify_reveal_catches_an_identity_that_does_not_match(results_round):
    made = results_round(entries=2, packages=1)
    entry = made.entries[0]
    other = made.entries[1]
    entry_append(
        kind="reveal_unlock",
        subject=f"round:{made.round.slug}",
        payload={
            "entries": [
                {"label": entry.label, "identity": other.identity, "nonce": entry.identity_nonce},
                {"label": other.label, "identity": other.identity, "nonce": other.identity_nonce},
            ]
        },
    )
    check = selectors.verify_reveal(made.round)
    assert not check.ok
    assert check.problems == [
        f"label {entry.label}: the revealed identity does not match its commitment"
    ]


def _request(user):
    request = RequestFactory().post("/admin/rounds/round/")
    SessionMiddleware(lambda r: None).process_request(request)
    request.user = user
    request._messages = FallbackStorage(request)
    return request


def test_admin_actions_lock_and_reveal_through_the_services(judged, staff, revealer):
    modeladmin = admin.site._registry[Round]
    queryset = Round.objects.filter(pk=judged.round.pk)

    request = _request(staff)
    admin_actions.lock_judgments(modeladmin, request, queryset)
    assert Round.objects.get(pk=judged.round.pk).state == Round.State.LOCKED
    admin_actions.reveal_identities(modeladmin, request, queryset)
    texts = [str(m) for m in get_messages(request)]
    assert any("reveal_round permission" in t for t in texts), texts
    assert Round.objects.get(pk=judged.round.pk).state == Round.State.LOCKED

    request = _request(revealer)
    admin_actions.recompute_results(modeladmin, request, queryset)
    admin_actions.reveal_identities(modeladmin, request, queryset)
    texts = [str(m) for m in get_messages(request)]
    assert "1 round(s) revealed." in texts
    assert any("full_film_votes: new snapshot" in t for t in texts), texts
    assert Round.objects.get(pk=judged.round.pk).state == Round.State.REVEALED
    assert admin_actions.lock_judgments.short_description.startswith("Lock judgments")
    assert admin_actions.reveal_identities.short_description.startswith("Reveal identities")
