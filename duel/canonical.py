"""Canonical JSON and SHA-256: the one way Duel turns a record into bytes to hash or sign.

Canonical form: keys sorted, UTF-8, no insignificant whitespace, no NaN or infinity.
Every commitment (protocol definitions, input packages, checklists, manifests, ballots,
scorecards, log entries) is hashed over these bytes, so anyone can recompute it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    """Return the canonical JSON encoding of ``value`` as UTF-8 bytes."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(value: Any) -> str:
    """Hex SHA-256 over the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))
