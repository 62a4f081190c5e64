"""LogChecker without a database: entry checks, checkpoint judgement, pooled signature checks."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger import merkle, note, verifier

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
ORIGIN = "duel.test/log"
VKEY = note.VerifierKey(ORIGIN, note.public_key_bytes(KEY))


def entry(position: int, **changes) -> bytes:
    fields = {
        "index": position,
        "kind": "attempt",
        "subject": "run:1",
        "timestamp": "2026-01-01T00:00:00.000000Z",
        "payload": {"i": position},
        "supersedes": None,
    }
    fields.update(changes)
    return verifier.canonical_json(fields)


def feed(checker: verifier.LogChecker, entries: list[bytes], signatures=None) -> None:
    for index, data in enumerate(entries):
        signature = signatures[index] if signatures else KEY.sign(data)
        checker.add_entry(index, data, signature=signature, key_id=VKEY.key_id)


@pytest.mark.parametrize("jobs", [1, 2])
def test_bad_signatures_are_found_inline_and_in_a_process_pool(jobs, monkeypatch):
    monkeypatch.setattr(verifier._SignatureChecks, "BATCH", 3)
    entries = [entry(i) for i in range(20)]
    signatures = [KEY.sign(e) for e in entries]
    signatures[4] = KEY.sign(b"something else")
    signatures[17] = bytes(64)
    checker = verifier.LogChecker(VKEY, origin=ORIGIN, jobs=jobs)
    feed(checker, entries, signatures)
    report = checker.finish()
    assert sorted(p.first_bad_index for p in report.problems) == [4, 17]
    assert report.tree_size == 20
    assert report.root_hash == merkle.root_hash(entries)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"index":0}', "not a canonical JSON entry"),
        (entry(0).replace(b'{"index":0,', b'{ "index":0,'), "not a canonical JSON entry"),
        (entry(0, index=5), "claim index 5"),
        (entry(0, supersedes=0), "supersedes"),
        (b"\xff\xfe", "not a canonical JSON entry"),
    ],
)
def test_malformed_entry_bytes_are_tampered_entries(data, message):
    checker = verifier.LogChecker(VKEY)
    checker.add_entry(0, data, signature=KEY.sign(data))
    (problem,) = checker.finish().problems
    assert problem.kind == verifier.TAMPERED_ENTRY
    assert message in problem.detail


def test_a_foreign_key_id_is_reported():
    checker = verifier.LogChecker(VKEY)
    data = entry(0)
    checker.add_entry(0, data, signature=KEY.sign(data), key_id=b"\x00\x00\x00\x00")
    assert [p.detail for p in checker.finish().problems] == ["signed by an unknown key id 00000000"]


def test_checkpoint_mismatches_are_localized_between_good_checkpoints():
    entries = [entry(i) for i in range(12)]
    checker = verifier.LogChecker(VKEY, origin=ORIGIN)
    for size in (4, 8, 12):
        checker.want_root_at(size)
    feed(checker, entries)
    checker.check_checkpoint(4, merkle.root_hash(entries[:4]), "cp4")
    checker.check_checkpoint(8, merkle.root_hash(entries[:8]), "cp8")
    checker.check_checkpoint(12, merkle.root_hash([b"other"] * 12), "cp12")
    (problem,) = checker.finish().problems
    assert (problem.kind, problem.first_bad_index) == (verifier.REWRITTEN_HISTORY, 8)
    assert "[8, 12)" in problem.detail


def test_two_signed_roots_for_one_size_are_a_fork():
    entries = [entry(i) for i in range(6)]
    checker = verifier.LogChecker(VKEY)
    checker.want_root_at(6)
    feed(checker, entries)
    checker.check_checkpoint(6, merkle.root_hash(entries), "ours")
    checker.check_checkpoint(6, merkle.root_hash(entries[:5] + [b"x"]), "theirs")
    (problem,) = checker.finish().problems
    assert problem.kind == verifier.FORKED_CHECKPOINT
    assert "theirs and ours" in problem.detail


def test_a_signed_size_beyond_the_log_means_entries_vanished():
    checker = verifier.LogChecker(VKEY)
    feed(checker, [entry(i) for i in range(3)])
    checker.check_checkpoint(5, bytes(32), "saved")
    assert [(p.kind, p.first_bad_index) for p in checker.finish().problems] == [
        (verifier.REWRITTEN_HISTORY, 3)
    ]
