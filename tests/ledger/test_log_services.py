"""Appending to the log: entries, nodes, head, corrections, checkpoints, rollback, triggers.

Runs on whichever database is configured: SQLite by default, PostgreSQL with DATABASE_URL.
"""

from __future__ import annotations

import base64
import json
import math

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import DatabaseError, connection, transaction

from duel.canonical import canonical_json
from ledger import keys, merkle, note, selectors, services
from ledger.models import Checkpoint, EntryKind, LogEntry, LogHead, LogNode

pytestmark = pytest.mark.django_db


def append(n: int, kind: str = EntryKind.ATTEMPT, subject: str = "run:1") -> list[LogEntry]:
    return [
        services.entry_append(kind=kind, subject=subject, payload={"n": i, "tags": ("a", "b")})
        for i in range(n)
    ]


def all_entry_bytes() -> list[bytes]:
    return [
        bytes(b) for b in LogEntry.objects.order_by("index").values_list("entry_bytes", flat=True)
    ]


def test_an_entry_is_canonical_json_of_its_fields_signed_by_the_log_key():
    entry = services.entry_append(
        kind=EntryKind.PROMPT_HASH, subject="round:7", payload={"sha256": "ab" * 32, "z": 1}
    )
    data = bytes(entry.entry_bytes)
    fields = json.loads(data)
    assert fields == {
        "index": 0,
        "kind": "prompt_hash",
        "subject": "round:7",
        "timestamp": services.format_timestamp(entry.timestamp),
        "payload": {"sha256": "ab" * 32, "z": 1},
        "supersedes": None,
    }
    assert canonical_json(fields) == data
    assert fields["timestamp"].endswith("Z")
    assert bytes(entry.leaf_hash) == merkle.leaf_hash(data)
    verifier = keys.verifier_key()
    assert bytes(entry.key_id) == verifier.key_id
    keys.signing_key().public_key().verify(bytes(entry.signature), data)


def test_indexes_are_consecutive_and_the_head_root_is_the_rfc_root_of_the_entries():
    entries = append(37)
    assert [e.index for e in entries] == list(range(37))
    data = all_entry_bytes()
    root = merkle.root_hash(data)
    assert selectors.log_root() == {"tree_size": 37, "root_hash": root.hex()}
    # Every complete aligned subtree is stored exactly once: 37 leaves make 2*37 - popcount(37).
    assert LogNode.objects.count() == 2 * 37 - bin(37).count("1")
    for size in (1, 2, 5, 16, 36, 37):
        assert selectors.root_at(size) == merkle.root_hash(data[:size])


def test_proofs_from_stored_nodes_equal_the_rfc_proofs():
    append(21)
    data = all_entry_bytes()
    for size in (1, 8, 13, 21):
        for index in range(size):
            assert selectors.inclusion_proof(index, size) == merkle.inclusion_proof(
                data[:size], index
            )
        for first in range(size + 1):
            assert selectors.consistency_proof(first, size) == merkle.consistency_proof(
                data[:size], first
            )


def test_a_proof_reads_stored_nodes_in_one_query(django_assert_num_queries):
    append(40)
    with django_assert_num_queries(2):  # the head (tree size) and the nodes
        selectors.inclusion_proof(17, 40)


def test_proofs_beyond_the_log_are_refused():
    append(3)
    with pytest.raises(merkle.ProofError):
        selectors.inclusion_proof(0, 4)
    with pytest.raises(merkle.ProofError):
        selectors.inclusion_proof(3, 3)
    with pytest.raises(merkle.ProofError):
        selectors.consistency_proof(2, 5)


def test_a_rolled_back_change_leaves_no_entry_and_no_gap():
    append(2)
    with pytest.raises(RuntimeError), transaction.atomic():
        services.entry_append(kind=EntryKind.RUN_START, subject="run:9", payload={})
        raise RuntimeError("the change this entry records failed")
    assert LogEntry.objects.count() == 2
    assert LogHead.objects.get().tree_size == 2
    assert not LogNode.objects.filter(level=0, index=2).exists()
    assert services.entry_append(kind=EntryKind.RUN_START, subject="run:9", payload={}).index == 2
    assert selectors.log_root()["root_hash"] == merkle.root_hash(all_entry_bytes()).hex()


def test_an_append_inside_a_savepoint_survives_the_outer_transaction():
    with transaction.atomic():
        entry = services.entry_append(kind=EntryKind.MANIFEST, subject="run:1", payload={})
    assert LogEntry.objects.filter(index=entry.index).exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "not_a_kind", "subject": "x", "payload": {}}, "unknown log entry kind"),
        ({"kind": EntryKind.ATTEMPT, "subject": "", "payload": {}}, "subject"),
        ({"kind": EntryKind.ATTEMPT, "subject": "x" * 201, "payload": {}}, "subject"),
        ({"kind": EntryKind.ATTEMPT, "subject": "x", "payload": [1]}, "JSON object"),
        ({"kind": EntryKind.ATTEMPT, "subject": "x", "payload": {"v": math.nan}}, "JSON"),
        ({"kind": EntryKind.ATTEMPT, "subject": "x", "payload": {}, "supersedes": 0}, "earlier"),
    ],
)
def test_invalid_appends_are_refused_and_leave_nothing(kwargs, message):
    with pytest.raises(ValueError, match=message):
        services.entry_append(**kwargs)
    assert LogEntry.objects.count() == 0


def test_a_correction_supersedes_without_overwriting():
    original = services.entry_append(
        kind=EntryKind.BUDGET_AND_DEADLINE, subject="round:3", payload={"usd": 100}
    )
    correction = services.correction_append(
        supersedes=original.index, reason="typo in the ceiling", payload={"usd": 1000}
    )
    assert correction.kind == EntryKind.CORRECTION
    assert correction.subject == "round:3"
    assert correction.supersedes_id == original.index
    assert json.loads(bytes(correction.entry_bytes))["supersedes"] == original.index
    assert correction.payload == {"reason": "typo in the ceiling", "correction": {"usd": 1000}}
    original.refresh_from_db()
    assert original.payload == {"usd": 100}
    assert list(original.superseded_by.all()) == [correction]
    with pytest.raises(ValueError):
        services.correction_append(supersedes=99, reason="no such entry", payload={})
    with pytest.raises(ValueError):
        services.correction_append(supersedes=0, reason=" ", payload={})


def test_any_kind_may_supersede_an_earlier_entry():
    first = services.entry_append(kind=EntryKind.ROUND_CONTROLS, subject="round:1", payload={})
    second = services.entry_append(
        kind=EntryKind.ROUND_CONTROLS, subject="round:1", payload={"v": 2}, supersedes=first.index
    )
    assert second.supersedes_id == first.index


def test_checkpoints_are_signed_c2sp_notes_and_published_once_per_size():
    append(5)
    checkpoint = services.checkpoint_publish()
    assert checkpoint.tree_size == 5
    body = note.open_checkpoint(checkpoint.note, keys.verifier_key(), origin=keys.origin())
    assert body.tree_size == 5
    assert body.root_hash == merkle.root_hash(all_entry_bytes())
    assert services.checkpoint_publish().note == checkpoint.note
    assert Checkpoint.objects.count() == 1
    append(1)
    assert services.checkpoint_publish().tree_size == 6
    assert Checkpoint.objects.count() == 2


def test_the_empty_log_has_a_checkpoint_too():
    checkpoint = services.checkpoint_publish()
    assert checkpoint.tree_size == 0
    assert bytes(checkpoint.root_hash) == merkle.EMPTY_ROOT


def test_the_log_refuses_to_sign_a_checkpoint_inconsistent_with_an_earlier_one():
    append(4)
    Checkpoint.objects.create(
        tree_size=2, root_hash=bytes(32), note="forged", created_at="2026-01-01T00:00:00Z"
    )
    with pytest.raises(services.LogForkError):
        services.checkpoint_publish()


def test_the_head_is_rebuilt_from_the_stored_log_if_its_row_is_missing():
    append(3)
    LogHead.objects.all().delete()
    entry = services.entry_append(kind=EntryKind.ATTEMPT, subject="run:1", payload={})
    assert entry.index == 3
    assert selectors.log_root()["root_hash"] == merkle.root_hash(all_entry_bytes()).hex()


# --- Keys ------------------------------------------------------------------------------------


def test_a_development_key_is_generated_once_in_the_key_file(settings, tmp_path):
    settings.DUEL_LEDGER_SIGNING_KEY = ""
    settings.DUEL_LEDGER_KEY_FILE = tmp_path / "keys" / "dev.key"
    key = keys.signing_key()
    assert settings.DUEL_LEDGER_KEY_FILE.exists()
    assert settings.DUEL_LEDGER_KEY_FILE.stat().st_mode & 0o777 == 0o600
    assert keys.signing_key().private_bytes_raw() == key.private_bytes_raw()
    assert keys.encode_private_key(key) == settings.DUEL_LEDGER_KEY_FILE.read_text().strip()


def test_a_configured_key_wins_over_the_key_file(settings, tmp_path):
    configured = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    settings.DUEL_LEDGER_SIGNING_KEY = base64.b64encode(bytes(range(32))).decode()
    settings.DUEL_LEDGER_KEY_FILE = tmp_path / "unused.key"
    settings.DUEL_LEDGER_ORIGIN = "duel.test/log"
    assert keys.signing_key().private_bytes_raw() == configured.private_bytes_raw()
    assert not settings.DUEL_LEDGER_KEY_FILE.exists()
    assert str(keys.verifier_key()) == note.format_verifier_key(
        "duel.test/log", note.public_key_bytes(configured)
    )


# --- Append-only at the database -------------------------------------------------------------

RAW_CHANGES = [
    ("ledger_logentry", "UPDATE ledger_logentry SET subject = 'forged' WHERE entry_index = 0"),
    ("ledger_logentry", "UPDATE ledger_logentry SET entry_bytes = entry_bytes"),
    ("ledger_logentry", "DELETE FROM ledger_logentry WHERE entry_index = 1"),
    ("ledger_lognode", "UPDATE ledger_lognode SET hash = hash WHERE level = 0"),
    ("ledger_lognode", "DELETE FROM ledger_lognode"),
    ("ledger_checkpoint", "UPDATE ledger_checkpoint SET note = 'forged'"),
    ("ledger_checkpoint", "DELETE FROM ledger_checkpoint"),
]


@pytest.mark.parametrize(("table", "statement"), RAW_CHANGES)
def test_the_database_refuses_raw_updates_and_deletes_of_the_log(table, statement):
    append(2)
    services.checkpoint_publish()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        (before,) = cursor.fetchone()
    assert before > 0
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(statement)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        assert cursor.fetchone() == (before,)
    entry = LogEntry.objects.get(index=0)
    assert entry.subject == "run:1"


def test_the_orm_cannot_update_or_delete_entries_either():
    (entry,) = append(1)
    entry.subject = "forged"
    with pytest.raises(DatabaseError), transaction.atomic():
        entry.save(update_fields=["subject"])
    with pytest.raises(DatabaseError), transaction.atomic():
        LogEntry.objects.filter(index=0).delete()
    assert LogEntry.objects.get(index=0).subject == "run:1"
