"""The public endpoints under /api/v1/log/: formats, proofs that verify, clear 400s."""

from __future__ import annotations

import base64

import pytest

from ledger import keys, merkle, note, services, views
from ledger.models import EntryKind, LogEntry

pytestmark = pytest.mark.django_db

API = "/api/v1/log"


def grow(n: int, kind: str = EntryKind.ATTEMPT) -> None:
    for i in range(n):
        services.entry_append(kind=kind, subject=f"run:{i % 3}", payload={"i": i})


def signed_root(client) -> note.Checkpoint:
    response = client.get(f"{API}/checkpoint")
    assert response.status_code == 200
    return note.open_checkpoint(response.content, keys.verifier_key(), origin=keys.origin())


def test_checkpoint_is_a_signed_note_in_plain_text(client):
    grow(5)
    response = client.get(f"{API}/checkpoint")
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    text = response.content.decode()
    assert text.split("\n")[:2] == [keys.origin(), "5"]
    assert "\n\n\u2014 " in text
    checkpoint = signed_root(client)
    entries = [bytes(e.entry_bytes) for e in LogEntry.objects.order_by("index")]
    assert checkpoint.root_hash == merkle.root_hash(entries)


def test_an_earlier_checkpoint_is_served_by_size(client):
    grow(3)
    first = client.get(f"{API}/checkpoint").content
    grow(2)
    assert client.get(f"{API}/checkpoint").content != first
    assert client.get(f"{API}/checkpoint", {"tree_size": 3}).content == first
    assert client.get(f"{API}/checkpoint", {"tree_size": 4}).status_code == 404
    assert client.get(f"{API}/checkpoint", {"tree_size": "x"}).status_code == 400


def test_entries_carry_exact_bytes_and_signatures(client):
    grow(4)
    body = client.get(f"{API}/entries", {"start": 1, "end": 3}).json()
    assert body["tree_size"] == 4
    assert [e["index"] for e in body["entries"]] == [1, 2]
    public = keys.signing_key().public_key()
    for item in body["entries"]:
        data = base64.b64decode(item["entry"])
        assert data == bytes(LogEntry.objects.get(index=item["index"]).entry_bytes)
        assert bytes.fromhex(item["leaf_hash"]) == merkle.leaf_hash(data)
        public.verify(base64.b64decode(item["signature"]), data)
        assert item["key_id"] == keys.verifier_key().key_id.hex()


def test_entry_pages_are_bounded_and_clamped(client, monkeypatch):
    monkeypatch.setattr(views, "MAX_PAGE", 5)
    grow(12)
    body = client.get(f"{API}/entries", {"start": 2, "end": 100}).json()
    assert (body["start"], body["end"]) == (2, 7)
    assert len(body["entries"]) == 5
    assert client.get(f"{API}/entries", {"start": 12}).json()["entries"] == []


def test_an_entries_page_costs_a_fixed_number_of_queries(client, django_assert_num_queries):
    grow(30)
    with django_assert_num_queries(2):
        client.get(f"{API}/entries", {"start": 0, "end": 30})


@pytest.mark.parametrize(
    ("path", "params", "message"),
    [
        ("entries", {"start": "-1"}, "non-negative"),
        ("entries", {"start": "abc"}, "integer"),
        ("entries", {"start": "3", "end": "1"}, "smaller"),
        ("entries", {"start": "99"}, "beyond"),
        ("proof/inclusion", {}, "'index' is required"),
        ("proof/inclusion", {"index": "5", "tree_size": "5"}, "not in a tree"),
        ("proof/inclusion", {"index": "0", "tree_size": "50"}, "outside the log"),
        ("proof/consistency", {}, "'first' is required"),
        ("proof/consistency", {"first": "4", "second": "2"}, "larger"),
        ("proof/consistency", {"first": "1", "second": "9"}, "outside the log"),
    ],
)
def test_bad_parameters_get_a_clear_400(client, path, params, message):
    grow(5)
    response = client.get(f"{API}/{path}", params)
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_inclusion_proofs_verify_against_the_signed_root(client):
    grow(11)
    checkpoint = signed_root(client)
    for index in range(11):
        body = client.get(f"{API}/proof/inclusion", {"index": index}).json()
        assert body["tree_size"] == 11
        assert bytes.fromhex(body["root_hash"]) == checkpoint.root_hash
        proof = [bytes.fromhex(h) for h in body["inclusion_path"]]
        leaf = bytes.fromhex(body["leaf_hash"])
        assert merkle.verify_inclusion(leaf, index, 11, proof, checkpoint.root_hash)


def test_consistency_proofs_link_two_signed_checkpoints(client):
    grow(6)
    old = signed_root(client)
    grow(7)
    new = signed_root(client)
    body = client.get(f"{API}/proof/consistency", {"first": 6, "second": 13}).json()
    proof = [bytes.fromhex(h) for h in body["consistency_path"]]
    assert bytes.fromhex(body["first_root"]) == old.root_hash
    assert merkle.verify_consistency(6, 13, old.root_hash, new.root_hash, proof)
    default = client.get(f"{API}/proof/consistency", {"first": 6}).json()
    assert default["second"] == 13


def test_the_public_key_is_published_with_its_verifier_key(client):
    body = client.get(f"{API}/key").json()
    verifier = note.parse_verifier_key(body["verifier_key"])
    assert verifier == keys.verifier_key()
    assert base64.b64decode(body["public_key"]) == verifier.public_key
    assert body["key_id"] == verifier.key_id.hex()
    assert body["algorithm"] == "Ed25519"
    assert body["origin"] == body["key_name"] == keys.origin()


def test_published_records_list_the_entries_of_one_kind(client):
    grow(3, kind=EntryKind.SEGMENT_WINDOWS)
    grow(2, kind=EntryKind.ATTEMPT)
    grow(2, kind=EntryKind.SEGMENT_WINDOWS)
    body = client.get(f"{API}/records/segment_windows", {"limit": 4}).json()
    assert [r["index"] for r in body["records"]] == [0, 1, 2, 5]
    assert body["next_after"] == 5
    rest = client.get(f"{API}/records/segment_windows", {"after": 5}).json()
    assert [r["index"] for r in rest["records"]] == [6]
    assert rest["next_after"] is None
    assert client.get(f"{API}/records/not_a_kind").status_code == 404
    assert client.get(f"{API}/records/ballot", {"limit": "x"}).status_code == 400


def test_the_log_endpoints_are_in_the_openapi_schema(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for path in ("checkpoint", "entries", "proof/inclusion", "proof/consistency", "key"):
        assert f"{API}/{path}" in schema["paths"]
