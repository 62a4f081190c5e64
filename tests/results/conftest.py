"""Fixtures of the results tests: real short films, rounds with finished runs taken through the
run services, synthetic demo votes through the ballot service, and staff users."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from rounds import services as round_services
from rounds.models import Entry, Round, System, SystemVersion
from tests import factories
from tests.films import make_film

FILM_SECONDS = 2


@pytest.fixture(scope="session")
def film(tmp_path_factory) -> Path:
    return make_film(tmp_path_factory.mktemp("results-films") / "film.mp4", FILM_SECONDS)


@dataclass(frozen=True)
class Identity:
    """A system identity with strings distinctive enough to search every response for."""

    name: str
    vendor: str
    version: str
    tier: str
    # A protocol's fixed scope makes the tier public (Tovaki: every integration at 720p).
    tier_is_public: bool = False

    @property
    def strings(self) -> list[str]:
        hidden = [self.name, self.vendor, self.version]
        return hidden if self.tier_is_public else [*hidden, self.tier]


IDENTITIES = [
    Identity("Zephyrine Cinema Engine", "Quillmark Heliographics", "v7.3.9-zeta", "orchid-tier"),
    Identity("Marrowlight Director", "Banyan Obscura Labs", "r2026.11-kestrel", "tangerine-plan"),
    Identity("Halcyon Reelsmith", "Pelerine Dynamics", "build-4471-umber", "sapphire-seat"),
    Identity("Corvantis Storyloom", "Ashgrove Mirrorworks", "k9.0.2-vellum", "marigold-lane"),
]


@dataclass
class ResultsRound:
    round: Round
    entries: list[Entry]
    identities: list[Identity]
    runs: dict = field(default_factory=dict)


def _system_version(identity: Identity, **overrides) -> SystemVersion:
    system, _ = System.objects.get_or_create(name=identity.name, vendor=identity.vendor)
    version, _ = SystemVersion.objects.get_or_create(
        system=system,
        version=identity.version,
        customer_tier=identity.tier,
        defaults={"settings": {"quality": "high"}, **overrides},
    )
    return version


@pytest.fixture
def results_round(film):
    """``make(entries=3, packages=2, is_demo=True, nonconforming=(), exhibition=None,
    failed=())``: an open round whose entries have finished runs on every package.

    ``nonconforming``: (entry index, package index) pairs whose run ends
    completed_nonconforming; ``failed``: pairs whose run fails (provider error, no output);
    ``exhibition``: index of an entry entered as an exhibition.
    """

    def make(
        *,
        entries: int | None = None,
        packages: int | None = None,
        is_demo: bool = True,
        nonconforming=(),
        failed=(),
        exhibition: int | None = None,
        duration_class: str = "minute_1",
        protocol: str = "ai-duel-0.1",
    ) -> ResultsRound:
        # None: the protocol's fixed scope when it has one (Tovaki), else 3 entries, 2 packages.
        fixed = factories.protocol_version(protocol).protocol.fixed_scope
        if entries is None:
            entries = fixed["model_integrations"] if fixed else 3
        round_ = factories.round_(
            protocol=protocol,
            entries=0,
            packages=packages if packages is not None or fixed else 2,
            is_demo=is_demo,
            duration_class=duration_class,
        )
        identities = IDENTITIES[:entries]
        if fixed:
            identities = [
                replace(i, tier=fixed["resolution_tier"], tier_is_public=True) for i in identities
            ]
        for k, identity in enumerate(identities):
            round_services.entry_add(
                round_=round_,
                system_version=_system_version(identity),
                provider_config={"adapter": "reference", "profile": "good"},
                path=Entry.Path.EXHIBITION if k == exhibition else Entry.Path.OPERATED,
            )
        round_ = round_services.round_commit(round_=round_, actor="test")
        round_ = round_services.round_open(round_=round_, actor="test")
        if round_.protocol.budget_gate:
            owner = get_user_model().objects.create_user(
                f"owner-{round_.pk}", password="x", is_staff=True
            )
            round_services.budget_approve(round_=round_, owner=owner, limit_credits=100)
        by_name = {e.system_version.system.name: e for e in round_.entries.all()}
        ordered = [by_name[i.name] for i in identities]
        made = ResultsRound(round=round_, entries=ordered, identities=list(identities))
        for e, entry in enumerate(ordered):
            for p, package in enumerate(round_.packages.order_by("prompt_key")):
                if (e, p) in failed:
                    run = round_services.run_create(entry=entry, package=package)
                    run = round_services.run_start(run=run)
                    attempt = round_services.attempt_begin(run=run)
                    round_services.attempt_fail(
                        attempt=attempt,
                        failure_code="safety_block",
                        message=f"blocked by {identities[e].vendor}",
                        cost={"billed_cost": "0.50"},
                    )
                else:
                    problems = ["duration outside tolerance"] if (e, p) in nonconforming else []
                    run = factories.finished_run(
                        entry, package, original_path=film, problems=problems
                    )
                made.runs[(e, p)] = run
        return made

    return make


@pytest.fixture
def cast_votes():
    """``cast(round_, voters=6, seed=1)``: synthetic demo ballots through ``ballot_cast``."""
    from voting import services as voting_services
    from voting.simulation import votes_simulate

    def cast(round_: Round, *, voters: int = 6, seed: int = 1, per_voter: int = 10):
        # Every proxy here is the same generated film of known length: pair the outputs
        # without probing each proxy again.
        voting_services.battle_sync(round_=round_, measure=lambda media_file: FILM_SECONDS)
        return votes_simulate(round_=round_, voters=voters, seed=seed, ballots_per_voter=per_voter)

    return cast


@pytest.fixture
def revealer(db):
    """A staff user with the reveal permission."""
    user = get_user_model().objects.create_user("revealer", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="reveal_round"))
    return get_user_model().objects.get(pk=user.pk)


@pytest.fixture
def staff(db):
    """A staff user without the reveal permission."""
    return get_user_model().objects.create_user("plainstaff", password="x", is_staff=True)


def to_judging(round_: Round) -> Round:
    return round_services.round_transition(round_=round_, to=Round.State.JUDGING, actor="test")
