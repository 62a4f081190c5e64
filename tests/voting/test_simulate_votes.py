"""``simulate_votes``: synthetic voters of known preferences, only in demo rounds."""

from __future__ import annotations

import math

import pytest
from django.core.management import CommandError, call_command

from ledger.models import LogEntry
from tests.voting.voting_support import voting_round
from voting import selectors
from voting.models import Ballot, Voter
from voting.simulation import latent_strengths, win_probability


def test_bradley_terry_choice_probability():
    assert win_probability(0.0, 0.0) == 0.5
    assert win_probability(math.log(3), 0.0) == pytest.approx(0.75)
    assert win_probability(1.0, 2.0) == pytest.approx(1 - win_probability(2.0, 1.0))


def test_latent_strengths_are_seeded_and_centred():
    a = latent_strengths(["B", "A", "C"], seed=4)
    assert a == latent_strengths(["A", "B", "C"], seed=4)
    assert a != latent_strengths(["A", "B", "C"], seed=5)
    assert sum(a.values()) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.django_db
def test_simulate_votes_refuses_a_real_round(films):
    round_ = voting_round(films, entries=2)
    with pytest.raises(CommandError, match="not a demo round"):
        call_command("simulate_votes", round_.slug, "--voters", "2", "--seed", "1")
    assert not Ballot.objects.exists() and not Voter.objects.filter(synthetic=True).exists()
    with pytest.raises(CommandError, match="no round"):
        call_command("simulate_votes", "nope", "--voters", "2")


@pytest.mark.django_db
def test_simulate_votes_fills_a_demo_round_through_the_ballot_service(films, capsys):
    round_ = voting_round(films, entries=3, packages=2, is_demo=True)  # 6 battles
    call_command(
        "simulate_votes", round_.slug, "--voters", "8", "--seed", "11", "--ballots-per-voter", "4"
    )
    out = capsys.readouterr().out
    assert "32 synthetic ballots from 8 voters over 6 battles" in out
    frame = selectors.ballots_frame(round_)
    assert len(frame) == 32 and frame["synthetic"].all() and not frame["excluded"].any()
    assert frame.groupby("voter")["battle"].nunique().eq(4).all()  # never the same pair twice
    assert set(frame["prompt"]) == {"P1", "P2"}
    assert LogEntry.objects.filter(kind="ballot").count() == 32
    assert all(b.record["synthetic"] for b in Ballot.objects.all())
    assert Voter.objects.filter(synthetic=True).count() == 8
