"""No identity anywhere before the unlock: crawl every results page and export, the round and
run API and the manifests, and search every response for the systems' names, vendors,
version strings, tiers and identity nonces. After the reveal they appear."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.test import Client

from rounds import services as round_services
from rounds.manifest import manifest_write
from rounds.models import Round, Run
from stats import services
from tests.results.conftest import to_judging

pytestmark = pytest.mark.django_db

# Where identities could surface: results, the round and run API, manifests, ballot exports.
CRAWL_PREFIXES = ("/results/", "/api/v1/rounds", "/api/v1/runs")
LINK = re.compile(
    r"""(?:href=|")(?:http://testserver)?(/(?:results|api/v1/r(?:ounds|uns))[^"'\s<>]*)"""
)


def crawl(client: Client, seeds: list[str], *, limit: int = 400) -> dict[str, str]:
    """Fetch the seeds and every same-site link under CRAWL_PREFIXES they lead to."""
    pages: dict[str, str] = {}
    queue = list(seeds)
    while queue and len(pages) < limit:
        url = queue.pop(0).replace("&amp;", "&")
        if url in pages or not url.startswith(CRAWL_PREFIXES):
            continue
        response = client.get(url)
        if url in seeds:
            assert response.status_code == 200, (url, response.status_code)
        if response.status_code != 200 or getattr(response, "streaming", False):
            pages[url] = ""
            continue
        text = response.content.decode("utf-8")
        pages[url] = text + " ".join(f"{k}: {v}" for k, v in response.headers.items())
        queue += [link for link in LINK.findall(text) if link not in pages]
    return pages


def seeds_of(round_: Round) -> list[str]:
    slug = round_.slug
    seeds = [
        "/results/",
        f"/results/{slug}/",
        f"/results/{slug}.json",
        f"/results/{slug}.csv",
        "/api/v1/rounds/",
        f"/api/v1/rounds/{slug}/",
        f"/api/v1/rounds/{slug}/entries/",
        f"/api/v1/rounds/{slug}/packages/",
        f"/api/v1/rounds/{slug}/ballots.json",
        f"/api/v1/rounds/{slug}/ballots.csv",
        "/api/v1/runs/",
        f"/api/v1/runs/?round={slug}",
    ]
    for run in Run.objects.filter(entry__round=round_):
        seeds += [f"/api/v1/runs/{run.public_id}/", f"/api/v1/runs/{run.public_id}/manifest.json"]
    return seeds


def leaks(pages: dict[str, str], needles: list[str]) -> list[tuple[str, str]]:
    return [(needle, url) for url, text in pages.items() for needle in needles if needle in text]


@pytest.fixture
def disclosed_round(results_round, cast_votes):
    """A demo round with votes, manifests, a nonconforming run, an exhibition entry, and
    disclosures at every level: platform, round, and tied to an entrant's system."""
    made = results_round(entries=3, packages=2, nonconforming=[(1, 1)], exhibition=2)
    cast_votes(made.round, voters=3, seed=7)
    for run in made.runs.values():
        manifest_write(run=run)
    first = made.entries[0].system_version.system
    round_services.disclosure_add(
        kind="sponsor", party="Larkspur Foundation", text="Funds the platform's hosting."
    )
    round_services.disclosure_add(
        kind="credit_grant",
        party="Cobalt Compute",
        text="Granted compute credits for this round.",
        round_=made.round,
        amount=Decimal("500.00"),
        currency="USD",
    )
    round_services.disclosure_add(
        kind="affiliate",
        party=first.vendor,
        text=f"{first.name} is affiliated with a round sponsor.",
        system=first,
    )
    first.operator_relationship = f"The operator advises {first.vendor}."
    first.save(update_fields=["operator_relationship"])
    return made


def test_no_identity_appears_before_the_unlock_and_all_appear_after(
    disclosed_round, revealer, django_assert_max_num_queries
):
    made = disclosed_round
    client = Client()
    needles = [s for identity in made.identities for s in identity.strings]
    nonces = [e.identity_nonce for e in made.entries]

    # Interim (demo, open), judging, locked: results show labels only.
    pages = crawl(client, seeds_of(made.round))
    assert len(pages) > 20
    assert any(url.startswith(f"/results/{made.round.slug}/inputs/") for url in pages)
    assert leaks(pages, needles + nonces) == []

    round_ = to_judging(made.round)
    round_ = services.round_lock(round_=round_, actor="staff")
    pages = crawl(client, seeds_of(round_))
    assert leaks(pages, needles + nonces) == []
    page = pages[f"/results/{round_.slug}/"]
    labels = [e.label for e in made.entries]
    assert all(label in page for label in labels)
    assert "2 disclosures are tied to entrants and will be shown at the reveal" in page

    # The unlock: every identity string appears on the page, in both exports and the API.
    services.round_reveal(round_=round_, user=revealer)
    pages = crawl(client, seeds_of(round_))
    for url in (
        f"/results/{round_.slug}/",
        f"/results/{round_.slug}.json",
        f"/results/{round_.slug}.csv",
        f"/api/v1/rounds/{round_.slug}/entries/",
    ):
        for identity in made.identities:
            assert identity.name in pages[url], (identity.name, url)
    page = pages[f"/results/{round_.slug}/"]
    for identity in made.identities:
        assert all(s in page for s in identity.strings) or identity.name in page
    assert f"{made.identities[0].name} is affiliated with a round sponsor." in page
    assert f"The operator advises {made.identities[0].vendor}." in page
    assert "tied to entrants and will be shown at the reveal" not in page
    assert "every revealed identity matches the commitment" in page


def test_no_identity_in_the_public_log_or_failure_records_before_the_unlock(results_round):
    made = results_round(entries=2, packages=1, failed=[(1, 0)])
    for run in made.runs.values():
        manifest_write(run=run)
    client = Client()
    vendor = made.identities[1].vendor  # the failure message names the provider
    pages = crawl(client, seeds_of(made.round))
    log = client.get("/api/v1/log/entries", {"start": 0, "end": 1000}).content.decode()
    pages["/api/v1/log/entries"] = log
    assert leaks(pages, [vendor]) == []
