"""C2SP signed notes with Ed25519, and the C2SP tlog-checkpoint body (pure, no Django).

The log publishes its signed tree head as a checkpoint (protocol "Transparency log": "Timestamp
and sign each record"; issue 3: "the signed tree head is published as a checkpoint in the C2SP
tlog-checkpoint / signed-note text format, so standard tools can read it"). The formats are
the ones of c2sp.org/signed-note and c2sp.org/tlog-checkpoint, which Go's
``golang.org/x/mod/sumdb/note`` and the transparency-dev tools read:

- a *note* is UTF-8 text ending in a newline, a blank line, then signature lines
  ``— <key name> <base64(4-byte key id || signature)>`` (U+2014 em dash);
- the Ed25519 key id is ``SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4]``;
- a *verifier key* is ``<name>+<hex key id>+<base64(0x01 || public key)>``;
- a *checkpoint* text is the origin line, the tree size in decimal, the base64 root hash, then
  optional extension lines.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

EM_DASH = "\u2014"
SIGNATURE_PREFIX = EM_DASH + " "
ED25519_TYPE = 0x01
MAX_SIGNATURES = 100
MAX_NOTE_BYTES = 1 << 20
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


class NoteError(ValueError):
    """A note, key or checkpoint that is malformed or does not verify."""


# --- Keys ------------------------------------------------------------------------------------


def check_key_name(name: str) -> None:
    """Key names are non-empty and contain neither Unicode spaces nor ``+`` (signed-note)."""
    if not name or "+" in name or any(ch.isspace() for ch in name):
        raise NoteError(f"invalid key name {name!r}: it must be non-empty, without spaces or '+'")
    if any(ord(ch) < 0x20 for ch in name):
        raise NoteError(f"invalid key name {name!r}: control characters are not allowed")


def key_id(name: str, public_key: bytes) -> bytes:
    """The 4-byte Ed25519 key id: ``SHA-256(name || 0x0A || 0x01 || public key)[:4]``."""
    check_key_name(name)
    if len(public_key) != 32:
        raise NoteError("an Ed25519 public key is 32 bytes")
    return hashlib.sha256(
        name.encode("utf-8") + b"\n" + bytes([ED25519_TYPE]) + public_key
    ).digest()[:4]


def public_key_bytes(private_key: Ed25519PrivateKey) -> bytes:
    """The raw 32-byte public key of ``private_key``."""
    return private_key.public_key().public_bytes_raw()


@dataclass(frozen=True)
class VerifierKey:
    """A named Ed25519 public key, as a note verifier knows it."""

    name: str
    public_key: bytes

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.public_key)

    def __str__(self) -> str:
        return format_verifier_key(self.name, self.public_key)


def format_verifier_key(name: str, public_key: bytes) -> str:
    """``<name>+<hex key id>+<base64(0x01 || public key)>``, the text a verifier is given."""
    encoded = base64.b64encode(bytes([ED25519_TYPE]) + public_key).decode("ascii")
    return f"{name}+{key_id(name, public_key).hex()}+{encoded}"


def parse_verifier_key(text: str) -> VerifierKey:
    """Parse a verifier key string, checking its key id against its name and public key."""
    name, _, rest = text.strip().partition("+")
    hex_id, _, encoded = rest.partition("+")
    check_key_name(name)
    if len(hex_id) != 8 or not encoded:
        raise NoteError("a verifier key is <name>+<8 hex digits>+<base64 key>")
    try:
        declared = bytes.fromhex(hex_id)
        raw = base64.b64decode(encoded, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise NoteError(f"malformed verifier key: {exc}") from exc
    if len(raw) != 33 or raw[0] != ED25519_TYPE:
        raise NoteError("only Ed25519 verifier keys (type 0x01, 32 bytes) are supported")
    key = VerifierKey(name, raw[1:])
    if key.key_id != declared:
        raise NoteError("the verifier key's id does not match its name and public key")
    return key


def format_signer_key(name: str, private_key: Ed25519PrivateKey) -> str:
    """Go ``sumdb/note`` signer key text: ``PRIVATE+KEY+<name>+<hex id>+<base64(0x01||seed)>``."""
    seed = private_key.private_bytes_raw()
    encoded = base64.b64encode(bytes([ED25519_TYPE]) + seed).decode("ascii")
    return f"PRIVATE+KEY+{name}+{key_id(name, public_key_bytes(private_key)).hex()}+{encoded}"


def parse_signer_key(text: str) -> tuple[str, Ed25519PrivateKey]:
    """Parse a Go ``sumdb/note`` signer key into its name and private key."""
    parts = text.strip().split("+", 4)  # base64 may contain "+"
    if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
        raise NoteError("a signer key is PRIVATE+KEY+<name>+<hex id>+<base64 key>")
    name, hex_id, encoded = parts[2:]
    try:
        raw = base64.b64decode(encoded, validate=True)
        declared = bytes.fromhex(hex_id)
    except (ValueError, binascii.Error) as exc:
        raise NoteError(f"malformed signer key: {exc}") from exc
    if len(raw) != 33 or raw[0] != ED25519_TYPE:
        raise NoteError("only Ed25519 signer keys are supported")
    private_key = Ed25519PrivateKey.from_private_bytes(raw[1:])
    if key_id(name, public_key_bytes(private_key)) != declared:
        raise NoteError("the signer key's id does not match its name and key")
    return name, private_key


# --- Notes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: key name, 4-byte key id and the signature bytes."""

    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        encoded = base64.b64encode(self.key_id + self.signature).decode("ascii")
        return f"{SIGNATURE_PREFIX}{self.name} {encoded}\n"


@dataclass(frozen=True)
class Note:
    """A parsed signed note: the text (with its final newline) and its signature lines."""

    text: str
    signatures: tuple[NoteSignature, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        return self.text + "\n" + "".join(sig.line() for sig in self.signatures)


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise NoteError("note text must end in a newline")
    if any(ord(ch) < 0x20 and ch != "\n" for ch in text):
        raise NoteError("note text must not contain control characters other than newline")


def sign_note(
    text: str, name: str, private_key: Ed25519PrivateKey, *, existing: Sequence[NoteSignature] = ()
) -> str:
    """Sign ``text`` with ``private_key`` under ``name`` and return the signed note.

    The signature covers the text including its final newline (signed-note "Ed25519
    signatures"); Ed25519 is deterministic (RFC 8032), so the same key and text give the same
    note byte for byte.
    """
    _check_text(text)
    check_key_name(name)
    if "\n\n" in text:
        # Parsers split at the last blank line; an empty line in a checkpoint body would make
        # it ambiguous. The checkpoint format has no empty lines.
        raise NoteError("refusing to sign a text that contains an empty line")
    public = public_key_bytes(private_key)
    signature = NoteSignature(name, key_id(name, public), private_key.sign(text.encode("utf-8")))
    return str(Note(text, (*existing, signature)))


def parse_note(note: str | bytes) -> Note:
    """Split a signed note into text and signature lines, checking the format only."""
    if isinstance(note, bytes):
        if len(note) > MAX_NOTE_BYTES:
            raise NoteError("note too large")
        try:
            note = note.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NoteError("a note must be valid UTF-8") from exc
    if len(note.encode("utf-8")) > MAX_NOTE_BYTES:
        raise NoteError("note too large")
    if any(ord(ch) < 0x20 and ch != "\n" for ch in note):
        raise NoteError("a note must not contain control characters other than newline")
    split = note.rfind("\n\n")
    if split < 0:
        raise NoteError("a signed note needs a blank line before its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block.endswith("\n"):
        raise NoteError("the signature block must end in a newline")
    signatures = []
    for line in block[:-1].split("\n"):
        if not line.startswith(SIGNATURE_PREFIX):
            raise NoteError(f"malformed signature line {line!r}")
        name, space, encoded = line[len(SIGNATURE_PREFIX) :].partition(" ")
        if not space:
            raise NoteError(f"malformed signature line {line!r}")
        check_key_name(name)
        try:
            raw = base64.b64decode(encoded, validate=True)
        except binascii.Error as exc:
            raise NoteError(f"signature is not base64: {line!r}") from exc
        if len(raw) < 5:
            raise NoteError("a signature is a 4-byte key id followed by the signature")
        signatures.append(NoteSignature(name, raw[:4], raw[4:]))
    if not signatures:
        raise NoteError("a signed note has at least one signature")
    if len(signatures) > MAX_SIGNATURES:
        raise NoteError("too many signatures")
    return Note(text, tuple(signatures))


def open_note(note: str | bytes, verifiers: VerifierKey | Iterable[VerifierKey]) -> str:
    """Return the text of ``note`` once a known key's signature verifies; raise otherwise.

    Per signed-note "Signatures": signatures from unknown keys (name and id not both matching)
    are ignored; a known key's signature that fails rejects the whole note; a note with no
    verified known signature is rejected.
    """
    if isinstance(verifiers, VerifierKey):
        verifiers = [verifiers]
    known = {(v.name, v.key_id): v for v in verifiers}
    parsed = parse_note(note)
    message = parsed.text.encode("utf-8")
    verified = False
    for sig in parsed.signatures:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            continue
        try:
            Ed25519PublicKey.from_public_bytes(verifier.public_key).verify(sig.signature, message)
        except InvalidSignature as exc:
            raise NoteError(f"the signature of {sig.name} does not verify") from exc
        verified = True
    if not verified:
        raise NoteError("the note carries no signature from a known key")
    return parsed.text


# --- Checkpoints -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    """A tlog-checkpoint body: the log's origin, tree size, root hash and extension lines."""

    origin: str
    tree_size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        return format_checkpoint(self.origin, self.tree_size, self.root_hash, self.extensions)


def format_checkpoint(
    origin: str, tree_size: int, root_hash: bytes, extensions: Sequence[str] = ()
) -> str:
    """The checkpoint note text: origin, decimal size, base64 root, extension lines."""
    if not origin or "\n" in origin:
        raise NoteError("the origin is one non-empty line")
    if tree_size < 0:
        raise NoteError("tree size must be non-negative")
    if len(root_hash) != 32:
        raise NoteError("the root hash is 32 bytes")
    if any(not line or "\n" in line for line in extensions):
        raise NoteError("extension lines are non-empty single lines")
    lines = [origin, str(tree_size), base64.b64encode(root_hash).decode("ascii"), *extensions]
    return "\n".join(lines) + "\n"


def parse_checkpoint(text: str) -> Checkpoint:
    """Parse a checkpoint note text (without signatures)."""
    _check_text(text)
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise NoteError("a checkpoint has at least three lines")
    origin, size, encoded, *extensions = lines
    if not origin:
        raise NoteError("the checkpoint origin is empty")
    if not _DECIMAL.fullmatch(size):
        raise NoteError(f"the tree size {size!r} is not a decimal without leading zeroes")
    try:
        root = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise NoteError("the root hash is not base64") from exc
    if len(root) != 32:
        raise NoteError("the root hash is not 32 bytes")
    if any(not line for line in extensions):
        raise NoteError("extension lines must be non-empty")
    return Checkpoint(origin, int(size), root, tuple(extensions))


def sign_checkpoint(
    checkpoint: Checkpoint, private_key: Ed25519PrivateKey, key_name: str | None = None
) -> str:
    """The signed checkpoint note; the key name defaults to the origin (tlog-checkpoint)."""
    return sign_note(checkpoint.text(), key_name or checkpoint.origin, private_key)


def open_checkpoint(
    note: str | bytes, verifier: VerifierKey, *, origin: str | None = None
) -> Checkpoint:
    """Verify a signed checkpoint against ``verifier`` and return its parsed body.

    When ``origin`` is given the checkpoint must come from that log.
    """
    checkpoint = parse_checkpoint(open_note(note, verifier))
    if origin is not None and checkpoint.origin != origin:
        raise NoteError(f"checkpoint origin {checkpoint.origin!r} is not {origin!r}")
    return checkpoint
