"""Reader pages and downloads: the leaderboard, disclosures on every page and export, the
automated-critics statement, inputs downloads, visibility, and query counts."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest
from django.test import Client

from duel.canonical import sha256_hex
from rounds import services as round_services
from stats import results, services
from stats.models import ResultSnapshot
from tests.results.conftest import to_judging

pytestmark = pytest.mark.django_db

OPERATOR = (
    "AI Duel is operated by XP.COM, LLC, which also operates UNCEN. UNCEN is one measured "
    "participant."
)


@pytest.fixture
def published(results_round, cast_votes):
    """A locked demo round with votes and disclosures at every level."""
    made = results_round(entries=3, packages=2)
    cast_votes(made.round, voters=3, seed=11)
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
    system = made.entries[1].system_version.system
    round_services.disclosure_add(
        kind="affiliate", party="Someone", text="Tied to an entrant.", system=system
    )
    made.round = services.round_lock(round_=to_judging(made.round), actor="staff")
    return made


def test_leaderboard_page_shows_the_result_in_full(published):
    client = Client()
    slug = published.round.slug
    response = client.get(f"/results/{slug}/")
    assert response.status_code == 200
    page = response.content.decode()
    snapshot = ResultSnapshot.objects.get(round=published.round, result_kind="full_film_votes")
    result = snapshot.result
    assert "<svg" in page and "interval-plot" in page  # ratings with interval bars
    assert "Win matrix" in page
    assert f"Publication label: {result['publication']['text']}" in page
    for row in result["systems"]:
        assert row["label"] in page
    assert "ai-duel-0.1" in page  # the protocol version used
    assert "Reliability result" in page and "completed_conforming" in page
    assert "Wall time" in page and "billed_cost" in page
    assert f"python manage.py recompute_result {snapshot.pk}" in page
    assert f"/results/{slug}/inputs/{snapshot.pk}.json" in page
    # Counts behind each label: votes, prompts, opponents, voters.
    first = result["systems"][0]
    assert first["counts"]["votes"] > 0 and first["counts"]["opponents"] == 2


def test_disclosures_and_the_critics_statement_are_on_every_page_and_export(published):
    client = Client()
    slug = published.round.slug
    texts = {
        "index": client.get("/results/").content.decode(),
        "page": client.get(f"/results/{slug}/").content.decode(),
        "json": client.get(f"/results/{slug}.json").content.decode(),
        "csv": client.get(f"/results/{slug}.csv").content.decode(),
    }
    for name, text in texts.items():
        assert OPERATOR in text, name
        assert "Larkspur Foundation" in text, name
        assert "never decide rank" in text, name
    for name in ("page", "json", "csv"):
        assert "Cobalt Compute" in texts[name], name
        assert "Tied to an entrant." not in texts[name], name
    assert "1 disclosure is tied to entrants and will be shown at the reveal" in texts["page"]
    document = json.loads(texts["json"])
    assert document["disclosures"]["entrant_disclosures_withheld"] == 1
    assert document["critics"] == results.CRITICS_STATEMENT
    rows = list(csv.DictReader(io.StringIO(texts["csv"])))
    assert rows[0]["section"] == "disclosure" and rows[0]["detail"] == OPERATOR
    sections = {row["section"] for row in rows}
    assert {"disclosure", "statement", "rating", "count", "label", "win_matrix"} <= sections
    assert "reliability" in sections


def test_exports_carry_the_ratings_and_the_protocol(published):
    client = Client()
    slug = published.round.slug
    document = client.get(f"/results/{slug}.json").json()
    assert document["protocol"]["key"] == "ai-duel-0.1"
    assert document["identities"] == {} and not document["identities_revealed"]
    votes = document["results"]["full_film_votes"]
    snapshot = ResultSnapshot.objects.get(pk=votes["snapshot"])
    assert votes["result"] == snapshot.result
    assert votes["inputs_sha256"] == snapshot.inputs_sha256
    rows = list(csv.DictReader(io.StringIO(client.get(f"/results/{slug}.csv").content.decode())))
    ratings = {r["label"]: float(r["value"]) for r in rows if r["section"] == "rating"}
    assert ratings == {r["label"]: r["rating"] for r in snapshot.result["systems"]}


def test_inputs_downloads_are_the_hashed_bytes(published):
    client = Client()
    slug = published.round.slug
    client.get(f"/results/{slug}/")  # results are computed on demand
    snapshot = ResultSnapshot.objects.get(round=published.round, result_kind="full_film_votes")
    response = client.get(f"/results/{slug}/inputs/{snapshot.pk}.json")
    assert response.status_code == 200
    assert sha256_hex(response.content) == snapshot.inputs_sha256 == response["X-Content-SHA256"]
    inputs = json.loads(response.content)
    table = client.get(f"/results/{slug}/inputs/{snapshot.pk}/ballots.csv").content.decode()
    rows = list(csv.reader(io.StringIO(table)))
    assert rows[0] == list(results.TABLE_COLUMNS["ballots"])
    assert len(rows) - 1 == len(inputs["tables"]["ballots"]["rows"])
    assert client.get(f"/results/{slug}/inputs/{snapshot.pk}/nothing.csv").status_code == 404
    assert client.get(f"/results/{slug}/inputs/999999.json").status_code == 404


def test_results_stay_hidden_until_judgments_are_locked(results_round):
    real = results_round(entries=2, packages=1, is_demo=False).round
    client = Client()
    for url in (
        f"/results/{real.slug}/",
        f"/results/{real.slug}.json",
        f"/results/{real.slug}.csv",
    ):
        assert client.get(url).status_code == 404
    assert real.slug not in client.get("/results/").content.decode()
    assert not ResultSnapshot.objects.filter(round=real).exists()

    # A demo round shows interim results while it takes votes, and says so.
    demo = results_round(entries=2, packages=1).round
    page = client.get(f"/results/{demo.slug}/").content.decode()
    assert "Interim results of a demo round" in page


def test_query_counts_of_the_pages_stay_flat(
    results_round, cast_votes, revealer, django_assert_max_num_queries
):
    client = Client()
    rounds = []
    for seed in range(3):
        made = results_round(entries=3, packages=1)
        cast_votes(made.round, voters=2, seed=seed)
        rounds.append(services.round_lock(round_=to_judging(made.round), actor="staff"))
        client.get(f"/results/{made.round.slug}/")  # computes and caches the snapshots

    # The same number of queries whatever the number of rounds, ballots or systems.
    with django_assert_max_num_queries(4):
        assert client.get("/results/").status_code == 200
    slug = rounds[0].slug
    for url in (f"/results/{slug}/", f"/results/{slug}.json", f"/results/{slug}.csv"):
        with django_assert_max_num_queries(6):
            assert client.get(url).status_code == 200
    snapshot = ResultSnapshot.objects.filter(round=rounds[0]).first()
    with django_assert_max_num_queries(3):
        assert client.get(f"/results/{slug}/inputs/{snapshot.pk}.json").status_code == 200

    # After the reveal: identities (one query) and the reveal check against the log (three).
    services.round_reveal(round_=rounds[0], user=revealer)
    with django_assert_max_num_queries(10):
        assert client.get(f"/results/{slug}/").status_code == 200
    with django_assert_max_num_queries(7):
        assert client.get(f"/results/{slug}.json").status_code == 200
