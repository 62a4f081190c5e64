"""Synthetic voters of known preferences for demo rounds (issue 8: ``simulate_votes``).

Each entry of the round gets a latent strength drawn from the seed; a simulated voter facing a
pair picks side a with the Bradley-Terry probability ``1 / (1 + exp(s_b - s_a))`` (protocol:
"Use Bradley-Terry maximum likelihood estimation", so a fit of these ballots should recover
the strengths). The ballots go through the same ``ballot_cast`` service as real ones on its
``synthetic`` path: no playback proof, marked synthetic, refused outside demo rounds by the
service and by the database.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np

from rounds.models import Round
from voting import services
from voting.cohorts import DEVICE_DESKTOP, DEVICE_PHONE, DEVICE_TABLET, EXPERTISE_VALUES
from voting.selectors import round_accepts_ballots


class SimulationRefused(ValueError):
    """The round cannot take synthetic ballots (not a demo, not taking votes, no pairs)."""


def win_probability(strength_a: float, strength_b: float) -> float:
    """Bradley-Terry probability that a beats b, strengths on the natural-log scale."""
    return 1.0 / (1.0 + math.exp(strength_b - strength_a))


def latent_strengths(labels: list[str], seed: int, scale: float = 1.0) -> dict[str, float]:
    """A strength per entry label, drawn from the seed, centred to mean zero."""
    rng = np.random.default_rng(seed)
    values = rng.normal(0.0, scale, size=len(labels))
    values = values - values.mean()
    return {label: float(v) for label, v in zip(sorted(labels), values, strict=True)}


@dataclass
class SimulationSummary:
    round: str
    voters: int = 0
    ballots: int = 0
    battles: int = 0
    strengths: dict[str, float] = field(default_factory=dict)
    wins: dict[str, int] = field(default_factory=dict)


def votes_simulate(
    *, round_: Round, voters: int, seed: int, ballots_per_voter: int = 10
) -> SimulationSummary:
    """Fill a demo round with ``voters`` synthetic voters casting up to ``ballots_per_voter``
    ballots each (fewer when they run out of new pairs or reach the round's cap)."""
    if not round_.is_demo:
        raise SimulationRefused(
            f"round {round_.slug} is not a demo round: synthetic ballots can only exist in rounds "
            "marked as demos (Round.is_demo), never in a real round"
        )
    if not round_accepts_ballots(round_):
        raise SimulationRefused(
            f"round {round_.slug} is {round_.state} ({round_.duration_class}): it is not taking "
            "pairwise votes (it must be open or judging, in a pairwise duration class)"
        )
    services.battle_sync(round_=round_)
    battles = round_.battles.count()
    if battles == 0:
        raise SimulationRefused(
            f"round {round_.slug} has no pair of rankable outputs on the same prompt yet"
        )
    labels = list(round_.entries.values_list("label", flat=True))
    strengths = latent_strengths(labels, seed)
    rng = random.Random(seed)
    summary = SimulationSummary(
        round=round_.slug, battles=battles, strengths=strengths, wins=dict.fromkeys(labels, 0)
    )
    devices = [DEVICE_DESKTOP, DEVICE_PHONE, DEVICE_TABLET]
    for _ in range(voters):
        voter = services.voter_create(
            synthetic=True, expertise=rng.choice(EXPERTISE_VALUES), device=rng.choice(devices)
        )
        summary.voters += 1
        for _ in range(ballots_per_voter):
            try:
                assignment = services.assignment_next(
                    voter=voter, round_=round_, rng=rng, resume=False
                )
            except services.NothingToAssign:
                break
            battle = assignment.battle
            label_a, label_b = battle.run_a.entry.label, battle.run_b.entry.label
            p_a = win_probability(strengths[label_a], strengths[label_b])
            winner = "a" if rng.random() < p_a else "b"
            choice = "first" if winner == assignment.first else "second"
            services.ballot_cast(assignment=assignment, choice=choice, synthetic=True)
            summary.ballots += 1
            summary.wins[label_a if winner == "a" else label_b] += 1
    return summary
