"""verify_log and the standalone verifier catch every kind of tampering, with the first bad index.

Tampering needs the append-only triggers out of the way, so each case switches them off
inside the test's transaction (PostgreSQL: replica mode; SQLite: drop and
recreate), the way an attacker with database access would.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from duel.canonical import canonical_json
from duel.db import append_only_sql
from ledger import audit, keys, merkle, note, services, verifier
from ledger.models import Checkpoint, EntryKind, LogEntry, LogHead, LogNode

pytestmark = pytest.mark.django_db


@contextmanager
def triggers_off(*tables: str) -> Iterator[None]:
    with connection.cursor() as cursor:
        for table in tables:
            if connection.vendor == "postgresql":
                # Replica mode skips ordinary triggers for this transaction only.
                cursor.execute("SET LOCAL session_replication_role = replica")
            else:
                for statement in append_only_sql(table)["sqlite"][1]:
                    cursor.execute(statement)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for table in tables:
                if connection.vendor == "postgresql":
                    cursor.execute("SET LOCAL session_replication_role = origin")
                else:
                    for statement in append_only_sql(table)["sqlite"][0]:
                        cursor.execute(statement)


def grow(n: int, subject: str = "run:1") -> None:
    for i in range(n):
        services.entry_append(kind=EntryKind.ATTEMPT, subject=subject, payload={"attempt": i})


def problems(report: verifier.Report) -> list[tuple[str, int]]:
    return [(p.kind, p.first_bad_index) for p in report.problems]


def rewrite_from(index: int, subject: str) -> None:
    """Truncate the log at ``index`` and append a different history, re-signed with the key."""
    with triggers_off("ledger_logentry", "ledger_lognode"):
        LogEntry.objects.filter(index__gte=index).delete()
        LogNode.objects.filter(level=0, index__gte=index).delete()
        for level in range(1, 64):
            # every subtree that reaches index or beyond
            LogNode.objects.filter(level=level, index__gte=index >> level).delete()
        tree = merkle.CompactRange()
        for leaf in LogEntry.objects.order_by("index").values_list("leaf_hash", flat=True):
            tree.append(bytes(leaf))
        LogHead.objects.filter(pk=1).update(
            tree_size=index, root_hash=tree.root(), frontier=b"".join(tree.frontier_hashes())
        )
    grow(8, subject=subject)


# --- A clean log ------------------------------------------------------------------------------


def test_a_clean_log_verifies_and_a_saved_checkpoint_round_trips(tmp_path, capsys):
    grow(12)
    services.checkpoint_publish()
    saved = tmp_path / "checkpoint.txt"
    call_command("verify_log", "--save-checkpoint", str(saved))
    assert "OK" in capsys.readouterr().out
    grow(5)
    call_command("verify_log", "--since-checkpoint", str(saved))
    out = capsys.readouterr().out
    assert "entries checked: 17" in out
    assert "OK" in out
    body = note.open_checkpoint(saved.read_text(), keys.verifier_key())
    assert body.tree_size == 12


def test_an_empty_log_verifies():
    report = audit.verify_database()
    assert report.ok
    assert report.tree_size == 0


# --- Tampering, each kind ---------------------------------------------------------------------


def test_edited_entry_bytes_are_reported_at_their_index():
    grow(10)
    entry = LogEntry.objects.get(index=6)
    forged = bytes(entry.entry_bytes).replace(b'"attempt":6', b'"attempt":7')
    with triggers_off("ledger_logentry"):
        LogEntry.objects.filter(index=6).update(entry_bytes=forged)
    report = audit.verify_database()
    assert not report.ok
    assert report.first_bad_index == 6
    assert {kind for kind, _ in problems(report)} >= {verifier.TAMPERED_ENTRY}
    with pytest.raises(CommandError, match="first bad index 6") as raised:
        call_command("verify_log")
    assert raised.value.returncode == 1


def test_a_recomputed_leaf_hash_does_not_hide_an_edit_without_the_key():
    grow(10)
    entry = LogEntry.objects.get(index=3)
    forged = bytes(entry.entry_bytes).replace(b'"attempt":3', b'"attempt":30')
    store = merkle.MemoryNodeStore(
        merkle.leaf_hash(forged) if e.index == 3 else bytes(e.leaf_hash)
        for e in LogEntry.objects.order_by("index")
    )
    with triggers_off("ledger_logentry", "ledger_lognode"):
        LogEntry.objects.filter(index=3).update(
            entry_bytes=forged, leaf_hash=merkle.leaf_hash(forged), payload={"attempt": 30}
        )
        for (level, index), value in store.nodes.items():
            LogNode.objects.filter(level=level, index=index).update(hash=value)
        tree = merkle.CompactRange.from_frontier(10, [store.get_node(3, 0), store.get_node(1, 4)])
        LogHead.objects.filter(pk=1).update(
            root_hash=store.root(), frontier=b"".join(tree.frontier_hashes())
        )
    report = audit.verify_database()
    assert problems(report) == [(verifier.TAMPERED_ENTRY, 3)]
    assert "signature" in report.problems[0].detail


def test_an_edited_column_that_disagrees_with_the_bytes_is_reported():
    grow(5)
    with triggers_off("ledger_logentry"):
        LogEntry.objects.filter(index=2).update(subject="run:2")
    report = audit.verify_database()
    assert problems(report) == [(verifier.TAMPERED_ENTRY, 2)]
    assert "subject" in report.problems[0].detail


def test_a_deleted_entry_is_reported_as_missing():
    grow(6)
    with triggers_off("ledger_logentry"):
        LogEntry.objects.filter(index=4).delete()
    report = audit.verify_database()
    assert report.first_bad_index == 4
    assert (verifier.MISSING_ENTRY, 4) in problems(report)


def test_a_tampered_stored_node_is_reported_at_its_first_leaf():
    grow(16)
    with triggers_off("ledger_lognode"):
        LogNode.objects.filter(level=2, index=3).update(hash=bytes(32))
    report = audit.verify_database()
    assert (verifier.BAD_NODE, 12) in problems(report)
    assert report.first_bad_index == 12


def test_rewritten_history_is_localized_by_the_stored_checkpoints():
    grow(5)
    services.checkpoint_publish()  # size 5
    grow(4)
    services.checkpoint_publish()  # size 9
    rewrite_from(5, subject="run:rewritten")
    assert LogEntry.objects.count() == 13
    report = audit.verify_database()
    assert problems(report) == [(verifier.REWRITTEN_HISTORY, 5)]
    assert "[5, 9)" in report.problems[0].detail


def test_rewritten_history_is_caught_by_a_saved_checkpoint(tmp_path):
    grow(7)
    saved = services.checkpoint_publish().note
    with triggers_off("ledger_checkpoint"):
        Checkpoint.objects.all().delete()  # the operator also destroys its own records
    rewrite_from(3, subject="run:rewritten")
    path = tmp_path / "saved.txt"
    path.write_text(saved)
    report = audit.verify_database(saved_checkpoint=saved)
    assert problems(report) == [(verifier.REWRITTEN_HISTORY, 0)]
    with pytest.raises(CommandError) as raised:
        call_command("verify_log", "--since-checkpoint", str(path))
    assert raised.value.returncode == 1


def test_a_truncated_log_is_caught_by_a_saved_checkpoint():
    grow(9)
    saved = services.checkpoint_publish().note
    with triggers_off("ledger_logentry", "ledger_lognode", "ledger_checkpoint"):
        LogEntry.objects.filter(index__gte=6).delete()
        Checkpoint.objects.all().delete()
    report = audit.verify_database(saved_checkpoint=saved)
    assert (verifier.REWRITTEN_HISTORY, 6) in problems(report)


def test_a_forked_checkpoint_is_reported():
    grow(8)
    services.checkpoint_publish()
    grow(2)
    # The key holder signs another tree of size 8 for someone else.
    other = note.sign_checkpoint(
        note.Checkpoint(keys.origin(), 8, merkle.root_hash([b"another", b"history"])),
        keys.signing_key(),
    )
    report = audit.verify_database(saved_checkpoint=other)
    assert problems(report) == [(verifier.FORKED_CHECKPOINT, 0)]
    assert "different roots for tree size 8" in report.problems[0].detail


def test_a_stored_checkpoint_with_a_forged_signature_is_reported():
    grow(4)
    checkpoint = services.checkpoint_publish()
    forged = checkpoint.note.replace("\n4\n", "\n3\n")
    with triggers_off("ledger_checkpoint"):
        Checkpoint.objects.filter(tree_size=4).update(note=forged)
    report = audit.verify_database()
    assert [kind for kind, _ in problems(report)] == [verifier.BAD_CHECKPOINT]


def test_a_head_that_disagrees_is_reported():
    grow(3)
    LogHead.objects.filter(pk=1).update(root_hash=bytes(32))
    report = audit.verify_database()
    assert problems(report) == [(verifier.BAD_HEAD, 3)]


# --- The standalone verifier, through the public endpoints -------------------------------------

BASE = "http://testserver/api/v1/log"


@pytest.fixture
def fetch(client):
    def get(url: str) -> bytes:
        parts = urllib.parse.urlsplit(url)
        response = client.get(parts.path, dict(urllib.parse.parse_qsl(parts.query)))
        if response.status_code >= 400:
            raise verifier.FetchError(f"HTTP {response.status_code}")
        return response.content

    return get


def test_the_standalone_verifier_accepts_a_clean_log_over_http(fetch):
    grow(23)
    first, saved = verifier.verify_remote(BASE, keys.verifier_key(), page_size=5, fetch=fetch)
    assert first.ok, first.summary()
    assert first.tree_size == 23
    grow(4)
    report, latest = verifier.verify_remote(
        BASE, keys.verifier_key(), saved_checkpoint=saved, page_size=7, fetch=fetch
    )
    assert report.ok, report.summary()
    assert report.entries_checked == 27
    assert note.open_checkpoint(latest, keys.verifier_key()).tree_size == 27


def test_the_standalone_verifier_catches_an_edited_entry(fetch):
    grow(9)
    forged = bytes(LogEntry.objects.get(index=5).entry_bytes).replace(b"run:1", b"run:2")
    with triggers_off("ledger_logentry"):
        LogEntry.objects.filter(index=5).update(entry_bytes=forged)
    report, _ = verifier.verify_remote(BASE, keys.verifier_key(), fetch=fetch)
    assert report.first_bad_index == 5
    assert verifier.TAMPERED_ENTRY in {p.kind for p in report.problems}


def test_the_standalone_verifier_catches_rewritten_history(fetch):
    grow(6)
    _, saved = verifier.verify_remote(BASE, keys.verifier_key(), fetch=fetch)
    with triggers_off("ledger_checkpoint"):
        Checkpoint.objects.all().delete()
    rewrite_from(2, subject="run:rewritten")
    report, _ = verifier.verify_remote(
        BASE, keys.verifier_key(), saved_checkpoint=saved, fetch=fetch
    )
    assert not report.ok
    kinds = {p.kind for p in report.problems}
    assert verifier.REWRITTEN_HISTORY in kinds
    assert verifier.FORKED_CHECKPOINT in kinds  # the server's consistency proof fails too


def test_the_standalone_verifier_rejects_another_key(fetch):
    grow(2)
    stranger = note.VerifierKey(keys.origin(), bytes(range(32)))
    report, _ = verifier.verify_remote(BASE, stranger, fetch=fetch)
    assert [p.kind for p in report.problems] == [verifier.BAD_CHECKPOINT]


def test_a_checkpoint_that_signs_a_tree_the_log_does_not_serve_is_a_fork(fetch, monkeypatch):
    grow(4)
    real_fetch = fetch

    def lying_fetch(url: str) -> bytes:
        if url.endswith("/checkpoint"):
            body = note.Checkpoint(keys.origin(), 4, merkle.root_hash([b"a", b"b", b"c", b"d"]))
            return note.sign_checkpoint(body, keys.signing_key()).encode()
        return real_fetch(url)

    report, _ = verifier.verify_remote(BASE, keys.verifier_key(), fetch=lying_fetch)
    assert (verifier.FORKED_CHECKPOINT, 0) in problems(report)


def test_the_verifier_restates_canonical_json_exactly():
    samples = [{"b": [1, 2.5, None], "a": "é", "c": {"z": True, "y": -3}}, {}, {"k": "\u2014"}]
    for sample in samples:
        assert verifier.canonical_json(sample) == canonical_json(sample)


def test_entry_json_shows_the_exact_signed_bytes(client):
    grow(2)
    body = client.get("/api/v1/log/entries", {"start": 0, "end": 2}).json()
    first = body["entries"][0]
    data = LogEntry.objects.get(index=0).entry_bytes
    assert json.loads(bytes(data)) == {
        k: first[k] for k in ("index", "kind", "subject", "timestamp", "payload", "supersedes")
    }


def test_a_head_frontier_that_disagrees_is_reported():
    grow(6)
    LogHead.objects.filter(pk=1).update(frontier=bytes(64))
    report = audit.verify_database()
    assert problems(report) == [(verifier.BAD_HEAD, 6)]
