"""C2SP signed notes and tlog checkpoints, checked against Go's sumdb/note reference vector."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger import note

# golang.org/x/mod/sumdb/note: the package documentation's signed-note example.
GO_SIGNER_KEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VERIFIER_KEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_NOTE = (
    GO_TEXT + "\n"
    "\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqd"
    "ngotpRZb6KE6RyyBwJnAM=\n"
)


def test_signing_reproduces_gos_reference_note_byte_for_byte():
    name, private_key = note.parse_signer_key(GO_SIGNER_KEY)
    assert name == "PeterNeumann"
    assert note.sign_note(GO_TEXT, name, private_key) == GO_NOTE
    assert note.format_signer_key(name, private_key) == GO_SIGNER_KEY


def test_verifier_key_matches_gos_format_and_key_id():
    _, private_key = note.parse_signer_key(GO_SIGNER_KEY)
    public = note.public_key_bytes(private_key)
    assert note.key_id("PeterNeumann", public).hex() == "c74f20a3"
    assert note.format_verifier_key("PeterNeumann", public) == GO_VERIFIER_KEY
    parsed = note.parse_verifier_key(GO_VERIFIER_KEY)
    assert parsed == note.VerifierKey("PeterNeumann", public)
    assert str(parsed) == GO_VERIFIER_KEY


def test_gos_note_opens_and_a_changed_text_does_not():
    verifier = note.parse_verifier_key(GO_VERIFIER_KEY)
    assert note.open_note(GO_NOTE, verifier) == GO_TEXT
    assert note.open_note(GO_NOTE.encode("utf-8"), [verifier]) == GO_TEXT
    with pytest.raises(note.NoteError, match="does not verify"):
        note.open_note(GO_NOTE.replace("cryptography", "cryptographY"), verifier)


@pytest.mark.parametrize(
    "bad_key",
    [
        GO_VERIFIER_KEY.replace("c74f20a3", "c74f20a4"),  # wrong id
        GO_VERIFIER_KEY.replace("PeterNeumann", "PeterNeuman"),  # id no longer matches
        GO_VERIFIER_KEY.replace("+ARpc", "+AhpC"),  # other type byte
        GO_VERIFIER_KEY[:-4],  # truncated key
        "PeterNeumann+c74f20a3",
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    ],
)
def test_malformed_verifier_keys_are_refused(bad_key):
    with pytest.raises(note.NoteError):
        note.parse_verifier_key(bad_key)


def test_unknown_signers_are_ignored_but_one_known_signature_is_required():
    ours = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    other = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
    ours_key = note.VerifierKey("duel.test/log", note.public_key_bytes(ours))
    other_key = note.VerifierKey("witness.test", note.public_key_bytes(other))
    text = "duel.test/log\n3\n" + base64.b64encode(bytes(32)).decode() + "\n"

    by_other = note.parse_note(note.sign_note(text, "witness.test", other))
    cosigned = note.sign_note(text, "duel.test/log", ours, existing=by_other.signatures)
    assert note.open_note(cosigned, ours_key) == text
    assert note.open_note(cosigned, [ours_key, other_key]) == text
    with pytest.raises(note.NoteError, match="no signature from a known key"):
        note.open_note(str(by_other), ours_key)

    # A known (name, id) whose signature fails rejects the note even if another verifies.
    forged = note.NoteSignature("duel.test/log", ours_key.key_id, bytes(64))
    parsed = note.parse_note(cosigned)
    tampered = str(note.Note(parsed.text, (forged, *parsed.signatures)))
    with pytest.raises(note.NoteError, match="does not verify"):
        note.open_note(tampered, ours_key)


@pytest.mark.parametrize(
    "bad_note",
    [
        GO_TEXT,  # no signatures
        GO_TEXT + "\n",  # blank line but no signature
        GO_NOTE.replace("\u2014", "-"),  # hyphen instead of em dash
        GO_NOTE.rstrip("\n"),  # signature line without newline
        GO_NOTE.replace("x08go", "x08g!"),  # not base64
        GO_NOTE.replace("If you", "If\tyou"),  # control character
        GO_TEXT + "\n\u2014 PeterNeumann AAAA\n",  # too short for key id + signature
    ],
)
def test_malformed_notes_are_refused(bad_note):
    verifier = note.parse_verifier_key(GO_VERIFIER_KEY)
    with pytest.raises(note.NoteError):
        note.open_note(bad_note, verifier)


def test_note_text_must_end_in_a_newline_and_have_no_blank_line():
    key = Ed25519PrivateKey.generate()
    with pytest.raises(note.NoteError):
        note.sign_note("no newline", "duel.test/log", key)
    with pytest.raises(note.NoteError):
        note.sign_note("a\n\nb\n", "duel.test/log", key)


def test_checkpoint_round_trip_and_format():
    key = Ed25519PrivateKey.from_private_bytes(bytes(32))
    root = bytes.fromhex("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")
    checkpoint = note.Checkpoint("duel.test/log", 8, root)
    signed = note.sign_checkpoint(checkpoint, key)
    lines = signed.split("\n")
    assert lines[:4] == ["duel.test/log", "8", base64.b64encode(root).decode(), ""]
    assert lines[4].startswith("\u2014 duel.test/log ")
    verifier = note.VerifierKey("duel.test/log", note.public_key_bytes(key))
    assert note.open_checkpoint(signed, verifier) == checkpoint
    assert note.open_checkpoint(signed, verifier, origin="duel.test/log") == checkpoint
    with pytest.raises(note.NoteError, match="origin"):
        note.open_checkpoint(signed, verifier, origin="elsewhere.test/log")
    # The signature covers the tree size: a changed size fails.
    with pytest.raises(note.NoteError):
        note.open_checkpoint(signed.replace("\n8\n", "\n9\n", 1), verifier)


def test_checkpoint_extension_lines_survive():
    checkpoint = note.Checkpoint("o", 0, bytes(32), ("ext one", "ext two"))
    assert note.parse_checkpoint(checkpoint.text()) == checkpoint


@pytest.mark.parametrize(
    "text",
    [
        "o\n01\n" + base64.b64encode(bytes(32)).decode() + "\n",  # leading zero
        "o\n-1\n" + base64.b64encode(bytes(32)).decode() + "\n",
        "o\n1\n" + base64.b64encode(bytes(31)).decode() + "\n",  # short root
        "o\n1\n",  # missing root
        "\n1\n" + base64.b64encode(bytes(32)).decode() + "\n",  # empty origin
    ],
)
def test_malformed_checkpoints_are_refused(text):
    with pytest.raises(note.NoteError):
        note.parse_checkpoint(text)
