"""The platform's Ed25519 log key: from configuration, or a development key made on first use.

Issue 3: "The private key comes from configuration (a development key is generated on first
use); the public key is published." ``DUEL_LEDGER_SIGNING_KEY`` is the base64 of the raw 32-byte
private key; without it the key lives in ``DUEL_LEDGER_KEY_FILE`` (created once, mode 0600).
Production refuses to start without the setting (``duel/settings.py``). The key name is
``DUEL_LEDGER_ORIGIN``, which is also the checkpoint origin line (tlog-checkpoint: "The log's
key name in its signature line SHOULD match the origin line").
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from ledger import note

DEFAULT_ORIGIN = "duel.local/log"


def origin() -> str:
    """The checkpoint origin line and the log key's name."""
    return getattr(settings, "DUEL_LEDGER_ORIGIN", "") or DEFAULT_ORIGIN


def signing_key() -> Ed25519PrivateKey:
    """The log's private key (configured, or the development key file, created if missing)."""
    configured = getattr(settings, "DUEL_LEDGER_SIGNING_KEY", "") or ""
    key_file = getattr(settings, "DUEL_LEDGER_KEY_FILE", None) or (
        Path(settings.BASE_DIR) / "var" / "keys" / "ledger-ed25519.key"
    )
    return _load_key(configured.strip(), str(key_file))


def verifier_key() -> note.VerifierKey:
    """The public key as a note verifier knows it, named by the origin."""
    return note.VerifierKey(origin(), note.public_key_bytes(signing_key()))


def decode_private_key(encoded: str) -> Ed25519PrivateKey:
    """A private key from the base64 of its raw 32 bytes."""
    try:
        raw = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ImproperlyConfigured("the ledger signing key is not valid base64") from exc
    if len(raw) != 32:
        raise ImproperlyConfigured("the ledger signing key must be 32 raw bytes in base64")
    return Ed25519PrivateKey.from_private_bytes(raw)


def encode_private_key(key: Ed25519PrivateKey) -> str:
    """Base64 of the raw 32-byte private key, the format of ``DUEL_LEDGER_SIGNING_KEY``."""
    return base64.b64encode(key.private_bytes_raw()).decode("ascii")


@lru_cache(maxsize=8)
def _load_key(configured: str, key_file: str) -> Ed25519PrivateKey:
    if configured:
        return decode_private_key(configured)
    path = Path(key_file)
    if not path.exists():
        _create_key_file(path)
    return decode_private_key(path.read_text(encoding="ascii").strip())


def _create_key_file(path: Path) -> None:
    # Written under a temporary name and linked into place, so concurrent first uses agree on
    # one key and a crash never leaves a half-written key file.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".ledger-key-")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(encode_private_key(Ed25519PrivateKey.generate()) + "\n")
        os.chmod(tmp, 0o600)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process created it first: use theirs
    finally:
        os.unlink(tmp)
