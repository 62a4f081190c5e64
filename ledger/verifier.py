"""Verify the transparency log without trusting its operator: HTTP and the public key only.

Usage::

    python -m ledger.verifier https://duel.example/api/v1/log --key KEY [--checkpoint FILE]

``KEY`` is the log's C2SP verifier key (``<name>+<hex id>+<base64 key>``, from ``/key`` or
published elsewhere) or a file holding it. ``FILE`` is a checkpoint saved by an earlier run:
the log must still contain exactly the tree it signed then (or the run fails); on success the
new checkpoint is written back to ``FILE``.

The verifier downloads every entry and checks, entry by entry, that the bytes are canonical
JSON whose fields match what is displayed, that the leaf hash is RFC 9162's, and that the
Ed25519 signature verifies; it recomputes the Merkle tree, checks the signed checkpoint's root
against it, checks the saved checkpoint against the same tree and through the server's
consistency proof, and spot-checks the server's inclusion proofs. Problems are reported with
the first bad index (protocol "Transparency log"; issue 3 "Reading and verifying").

This module imports no Django (only ``ledger.merkle``, ``ledger.note`` and the standard
library plus ``cryptography``); ``manage.py verify_log`` uses the same ``LogChecker`` on the
database's rows.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import multiprocessing
import os
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger import merkle, note

ENTRY_FIELDS = frozenset({"index", "kind", "subject", "timestamp", "payload", "supersedes"})

# Problem kinds, in the words of issue 3.
TAMPERED_ENTRY = "tampered_entry"
MISSING_ENTRY = "missing_entry"
REWRITTEN_HISTORY = "rewritten_history"
FORKED_CHECKPOINT = "forked_checkpoint"
BAD_CHECKPOINT = "bad_checkpoint"
BAD_NODE = "bad_node"
BAD_HEAD = "bad_head"
BAD_PROOF = "bad_proof"


def canonical_json(value: object) -> bytes:
    """The canonical JSON of ``duel.canonical.canonical_json`` (sorted keys, UTF-8, compact).

    Restated here because importing ``duel`` starts Django's Celery app; a test keeps the two
    identical.
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the log, and the first entry index it makes untrustworthy."""

    kind: str
    first_bad_index: int
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} at index {self.first_bad_index}: {self.detail}"


@dataclass
class Report:
    """The outcome of a verification run."""

    tree_size: int = 0
    root_hash: bytes = merkle.EMPTY_ROOT
    entries_checked: int = 0
    checkpoints_checked: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first_bad_index(self) -> int | None:
        return min((p.first_bad_index for p in self.problems), default=None)

    def summary(self) -> str:
        lines = [
            f"entries checked: {self.entries_checked}",
            f"tree size: {self.tree_size}",
            f"root hash: {self.root_hash.hex()}",
            f"checkpoints checked: {self.checkpoints_checked}",
        ]
        if self.ok:
            lines.append("OK: every entry, signature and checkpoint verifies")
        else:
            lines.extend(f"FAIL {p}" for p in self.problems)
            lines.append(f"first bad index: {self.first_bad_index}")
        return "\n".join(lines)


def _verify_batch(public_key: bytes, batch: list[tuple[int, bytes, bytes]]) -> list[int]:
    """Indexes in ``batch`` whose Ed25519 signature does not verify (runs in a worker)."""
    key = Ed25519PublicKey.from_public_bytes(public_key)
    failed = []
    for index, data, signature in batch:
        try:
            key.verify(signature, data)
        except InvalidSignature:
            failed.append(index)
    return failed


class _SignatureChecks:
    """Entry signature checks, inline or in batches on a process pool (``jobs > 1``)."""

    BATCH = 2000

    def __init__(self, public_key: bytes, jobs: int) -> None:
        self.public_key = public_key
        self.key = Ed25519PublicKey.from_public_bytes(public_key)
        self.jobs = max(1, jobs)
        self.batch: list[tuple[int, bytes, bytes]] = []
        self.pending: list[Future] = []
        self.pool: ProcessPoolExecutor | None = None

    def check(self, index: int, data: bytes, signature: bytes) -> list[int]:
        """Check one signature; return indexes found bad so far (maybe of earlier entries)."""
        if self.jobs == 1:
            try:
                self.key.verify(signature, data)
            except InvalidSignature:
                return [index]
            return []
        self.batch.append((index, data, signature))
        if len(self.batch) < self.BATCH:
            return []
        if self.pool is None:
            # spawn: workers import only this module, never a caller's Django state.
            context = multiprocessing.get_context("spawn")
            self.pool = ProcessPoolExecutor(self.jobs, mp_context=context)
        self.pending.append(self.pool.submit(_verify_batch, self.public_key, self.batch))
        self.batch = []
        failed: list[int] = []
        # Bound memory: at most two batches per worker in flight.
        while len(self.pending) > 2 * self.jobs:
            failed.extend(self.pending.pop(0).result())
        return failed

    def finish(self) -> list[int]:
        """Indexes of every remaining bad signature; shuts the pool down."""
        failed = _verify_batch(self.public_key, self.batch)
        self.batch = []
        for future in self.pending:
            failed.extend(future.result())
        self.pending = []
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None
        return failed


class LogChecker:
    """Checks a log streamed entry by entry, in index order, and the checkpoints over it.

    Register every checkpoint size before streaming (``want_root_at``), so the root at that
    size is taken as the stream passes it; memory stays O(log n) plus one root per checkpoint.
    """

    def __init__(
        self, verifier_key: note.VerifierKey, *, origin: str | None = None, jobs: int = 1
    ) -> None:
        self.verifier_key = verifier_key
        self.key_id = verifier_key.key_id
        # Ed25519 verification dominates a full check; with jobs > 1 it runs in a process pool.
        self.signatures = _SignatureChecks(verifier_key.public_key, jobs)
        self.origin = origin
        self.compact = merkle.CompactRange()
        self.report = Report()
        self.roots: dict[int, bytes] = {0: merkle.EMPTY_ROOT}
        self.wanted: set[int] = set()
        # (size, root, source, kind of problem if the entries disagree) per signed checkpoint
        self.signed: list[tuple[int, bytes, str, str]] = []
        self.max_problems = 50

    # -- problems ------------------------------------------------------------------------

    def problem(self, kind: str, first_bad_index: int, detail: str) -> None:
        if len(self.report.problems) < self.max_problems:
            self.report.problems.append(Problem(kind, first_bad_index, detail))

    # -- entries -------------------------------------------------------------------------

    def want_root_at(self, size: int) -> None:
        if size > self.compact.size:
            self.wanted.add(size)

    @property
    def size(self) -> int:
        return self.compact.size

    def add_entry(
        self,
        index: int,
        entry_bytes: bytes,
        *,
        signature: bytes,
        leaf_hash: bytes | None = None,
        key_id: bytes | None = None,
        fields: dict | None = None,
    ) -> list[merkle.Node]:
        """Check one entry and append it to the recomputed tree; return the nodes it makes.

        ``leaf_hash``, ``key_id`` and ``fields`` are what the log claims besides the bytes
        (stored columns or the JSON an endpoint showed); each must agree with the bytes.
        """
        expected = self.compact.size
        if index != expected:
            self.problem(
                MISSING_ENTRY, expected, f"expected entry {expected}, the log gave {index}"
            )
        self._check_entry(index, entry_bytes, signature, leaf_hash, key_id, fields)
        added = self.compact.append(merkle.leaf_hash(entry_bytes))
        self.report.entries_checked += 1
        if self.compact.size in self.wanted:
            self.roots[self.compact.size] = self.compact.root()
        return added

    def _check_entry(
        self,
        index: int,
        data: bytes,
        signature: bytes,
        leaf_hash: bytes | None,
        key_id: bytes | None,
        fields: dict | None,
    ) -> None:
        try:
            parsed = json.loads(data)
            canonical = isinstance(parsed, dict) and canonical_json(parsed) == data
        except (ValueError, UnicodeDecodeError):
            parsed, canonical = None, False
        if not canonical or set(parsed) != ENTRY_FIELDS:
            self.problem(TAMPERED_ENTRY, index, "entry bytes are not a canonical JSON entry")
            parsed = None
        elif parsed["index"] != index:
            self.problem(TAMPERED_ENTRY, index, f"entry bytes claim index {parsed['index']}")
        elif parsed["supersedes"] is not None and not (
            isinstance(parsed["supersedes"], int) and 0 <= parsed["supersedes"] < index
        ):
            self.problem(TAMPERED_ENTRY, index, "supersedes is not an earlier entry")
        if parsed is not None and fields is not None:
            changed = sorted(k for k, v in fields.items() if parsed.get(k) != v)
            if changed:
                self.problem(
                    TAMPERED_ENTRY, index, f"displayed {', '.join(changed)} differ from the bytes"
                )
        if leaf_hash is not None and leaf_hash != merkle.leaf_hash(data):
            self.problem(TAMPERED_ENTRY, index, "stored leaf hash is not the hash of the bytes")
        if key_id is not None and key_id != self.key_id:
            self.problem(TAMPERED_ENTRY, index, f"signed by an unknown key id {key_id.hex()}")
        for bad in self.signatures.check(index, data, signature):
            self.problem(TAMPERED_ENTRY, bad, "the entry signature does not verify")

    # -- checkpoints ---------------------------------------------------------------------

    def open_checkpoint(
        self, signed_note: str | bytes, source: str, *, size_hint: int = 0
    ) -> note.Checkpoint | None:
        """Verify a checkpoint's signature (and origin); report and return None when bad.

        ``size_hint`` is the tree size the checkpoint is said to sign, used to place the
        problem when the note itself cannot be trusted.
        """
        try:
            checkpoint = note.open_checkpoint(signed_note, self.verifier_key, origin=self.origin)
        except note.NoteError as exc:
            self.problem(BAD_CHECKPOINT, max(0, size_hint - 1), f"{source}: {exc}")
            return None
        self.report.checkpoints_checked += 1
        return checkpoint

    def check_checkpoint(
        self, size: int, root: bytes, source: str, *, mismatch: str = REWRITTEN_HISTORY
    ) -> None:
        """Record a signed tree head to compare with the tree recomputed from the entries.

        Call after the entries have streamed past ``size``; ``finish`` judges. Two signed
        roots for one size are a fork; a root the entries do not give is ``mismatch``
        (rewritten history, or a fork shown to whoever kept that checkpoint); a signed size
        beyond the log means entries vanished.
        """
        if size > self.compact.size:
            self.problem(
                REWRITTEN_HISTORY,
                self.compact.size,
                f"{source} signs {size} entries but the log has only {self.compact.size}",
            )
            return
        if size not in self.roots:
            raise ValueError(f"no root recorded at size {size}: call want_root_at first")
        self.signed.append((size, root, source, mismatch))

    def _last_good_below(self, size: int) -> int:
        """The largest signed size below ``size`` whose root the entries reproduce."""
        return max(
            (s for s, root, _, _ in self.signed if s < size and root == self.roots[s]),
            default=0,
        )

    def finish(self) -> Report:
        """Judge the signatures and checkpoints; localize bad checkpoints between good ones.

        Entries below a checkpoint whose root the entries reproduce are proven unchanged,
        so the first changed entry lies between the last such size and the bad checkpoint.
        """
        for bad in self.signatures.finish():
            self.problem(TAMPERED_ENTRY, bad, "the entry signature does not verify")
        entry_problems = [
            p.first_bad_index
            for p in self.report.problems
            if p.kind in (TAMPERED_ENTRY, MISSING_ENTRY)
        ]
        first_source: dict[int, tuple[bytes, str]] = {}
        for size, root, source, mismatch in self.signed:
            lower = self._last_good_below(size)
            # An entry in the range that fails its own checks explains the difference.
            explained = min((i for i in entry_problems if lower <= i < size), default=None)
            first_bad = lower if explained is None else explained
            where = f"the first changed entry is in [{lower}, {size})" + (
                "" if explained is None else f"; entry {explained} fails its own checks"
            )
            earlier = first_source.setdefault(size, (root, source))
            if earlier[0] != root:
                self.problem(
                    FORKED_CHECKPOINT,
                    first_bad,
                    f"{source} and {earlier[1]} sign different roots for tree size {size}; "
                    + where,
                )
            elif root != self.roots[size]:
                self.problem(
                    mismatch,
                    first_bad,
                    f"{source} signs root {root.hex()} for tree size {size} but the entries "
                    f"give {self.roots[size].hex()}; " + where,
                )
        self.report.tree_size = self.compact.size
        self.report.root_hash = self.compact.root()
        return self.report


# --- HTTP ------------------------------------------------------------------------------------


class FetchError(RuntimeError):
    """The log could not be read over HTTP."""


def _get(url: str, timeout: float = 30.0) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "duel-ledger-verifier/1"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        raise FetchError(f"GET {url}: HTTP {exc.code}: {exc.read()[:200]!r}") from exc
    except urllib.error.URLError as exc:
        raise FetchError(f"GET {url}: {exc.reason}") from exc


Fetch = Callable[[str], bytes]


def _get_json(fetch: Fetch, url: str) -> dict:
    try:
        return json.loads(fetch(url))
    except ValueError as exc:
        raise FetchError(f"GET {url}: not JSON") from exc


def _url(base: str, path: str, **params: int) -> str:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    return f"{base.rstrip('/')}/{path}{query}"


def _b64(value: str) -> bytes:
    return base64.b64decode(value, validate=True)


def _spot_check_indexes(size: int, count: int) -> list[int]:
    if size == 0:
        return []
    picks = {0, size - 1, size // 2}
    step = max(1, size // max(1, count))
    picks.update(range(step // 2, size, step))
    return sorted(picks)[: count + 3]


def verify_remote(
    base_url: str,
    verifier_key: note.VerifierKey,
    *,
    saved_checkpoint: str | None = None,
    page_size: int = 1000,
    fetch: Fetch = _get,
    jobs: int = 1,
) -> tuple[Report, str | None]:
    """Verify the log served at ``base_url``; return the report and the checkpoint note read.

    ``saved_checkpoint`` is a signed note kept from an earlier run; the log must be
    consistent with it. ``fetch`` performs one GET and returns the body (urllib by default).
    """
    checker = LogChecker(verifier_key, origin=None, jobs=jobs)
    try:
        latest_note = fetch(_url(base_url, "checkpoint")).decode("utf-8")
    except (FetchError, UnicodeDecodeError) as exc:
        checker.problem(BAD_CHECKPOINT, 0, f"cannot read the checkpoint: {exc}")
        return checker.finish(), None
    latest = checker.open_checkpoint(latest_note, "the served checkpoint")
    if latest is None:
        return checker.finish(), None
    checker.origin = latest.origin
    saved = None
    if saved_checkpoint:
        saved = checker.open_checkpoint(saved_checkpoint, "the saved checkpoint")
    if saved is not None and saved.origin != latest.origin:
        checker.problem(BAD_CHECKPOINT, 0, "the saved checkpoint is from another log")
        saved = None
    checker.want_root_at(latest.tree_size)
    if saved is not None:
        checker.want_root_at(saved.tree_size)

    served_leaves: dict[int, bytes] = {}
    try:
        _stream_entries(fetch, base_url, checker, latest.tree_size, page_size, served_leaves)
    except FetchError as exc:
        checker.problem(MISSING_ENTRY, checker.size, str(exc))
    if checker.size < latest.tree_size:
        checker.problem(
            MISSING_ENTRY,
            checker.size,
            f"the log serves {checker.size} entries but its checkpoint signs {latest.tree_size}",
        )
        return checker.finish(), latest_note

    if saved is not None:
        checker.check_checkpoint(saved.tree_size, saved.root_hash, "the saved checkpoint")
    # The served checkpoint is checked against the served entries: a mismatch means the log
    # signs a tree it does not serve, a fork between what it signs and what it shows.
    checker.check_checkpoint(
        latest.tree_size, latest.root_hash, "the served checkpoint", mismatch=FORKED_CHECKPOINT
    )
    if saved is not None and saved.tree_size <= latest.tree_size:
        _check_consistency_proof(fetch, base_url, checker, saved, latest)
    _check_inclusion_proofs(fetch, base_url, checker, latest, served_leaves)
    return checker.finish(), latest_note


def _stream_entries(
    fetch: Fetch,
    base_url: str,
    checker: LogChecker,
    size: int,
    page_size: int,
    served_leaves: dict[int, bytes],
) -> None:
    wanted_leaves = set(_spot_check_indexes(size, 8))
    while checker.size < size:
        start = checker.size
        page = _get_json(
            fetch, _url(base_url, "entries", start=start, end=min(size, start + page_size))
        )
        entries = page.get("entries") or []
        if not entries:
            return
        for item in entries:
            try:
                data = _b64(item["entry"])
                signature = _b64(item["signature"])
                leaf = bytes.fromhex(item["leaf_hash"])
                key_id = bytes.fromhex(item["key_id"])
            except (KeyError, ValueError, binascii.Error) as exc:
                checker.problem(TAMPERED_ENTRY, checker.size, f"malformed entry JSON: {exc}")
                return
            index = item.get("index")
            fields = {k: item[k] for k in ENTRY_FIELDS if k in item}
            checker.add_entry(
                index, data, signature=signature, leaf_hash=leaf, key_id=key_id, fields=fields
            )
            if index in wanted_leaves:
                served_leaves[index] = merkle.leaf_hash(data)
            if checker.size >= size:
                return


def _check_consistency_proof(
    fetch: Fetch,
    base_url: str,
    checker: LogChecker,
    saved: note.Checkpoint,
    latest: note.Checkpoint,
) -> None:
    try:
        body = _get_json(
            fetch,
            _url(base_url, "proof/consistency", first=saved.tree_size, second=latest.tree_size),
        )
        proof = [bytes.fromhex(h) for h in body["consistency_path"]]
    except (FetchError, KeyError, ValueError) as exc:
        checker.problem(BAD_PROOF, 0, f"no consistency proof from the saved checkpoint: {exc}")
        return
    if not merkle.verify_consistency(
        saved.tree_size, latest.tree_size, saved.root_hash, latest.root_hash, proof
    ):
        checker.problem(
            FORKED_CHECKPOINT,
            checker._last_good_below(saved.tree_size),
            f"the served checkpoint (size {latest.tree_size}) is not consistent with the saved "
            f"checkpoint (size {saved.tree_size})",
        )


def _check_inclusion_proofs(
    fetch: Fetch,
    base_url: str,
    checker: LogChecker,
    latest: note.Checkpoint,
    leaves: dict[int, bytes],
) -> None:
    for index, leaf in sorted(leaves.items()):
        try:
            body = _get_json(
                fetch, _url(base_url, "proof/inclusion", index=index, tree_size=latest.tree_size)
            )
            proof = [bytes.fromhex(h) for h in body["inclusion_path"]]
        except (FetchError, KeyError, ValueError) as exc:
            checker.problem(BAD_PROOF, index, f"no inclusion proof: {exc}")
            continue
        if not merkle.verify_inclusion(leaf, index, latest.tree_size, proof, latest.root_hash):
            checker.problem(BAD_PROOF, index, "the served inclusion proof does not verify")


# --- Command line ----------------------------------------------------------------------------


def read_verifier_key(value: str) -> note.VerifierKey:
    """A verifier key given inline or as the path of a file that holds it."""
    if os.path.isfile(value):
        value = Path(value).read_text(encoding="utf-8")
    return note.parse_verifier_key(value.strip())


def save_checkpoint(path: Path, signed_note: str) -> None:
    """Write a checkpoint note atomically (temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".checkpoint-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(signed_note)
    os.replace(tmp, path)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ledger.verifier",
        description="Verify a Duel transparency log over HTTP with its public key.",
    )
    parser.add_argument("url", help="base URL of the log API, e.g. https://host/api/v1/log")
    parser.add_argument("--key", required=True, help="verifier key string, or a file holding it")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        help="checkpoint saved by an earlier run: checked, then replaced by the new one",
    )
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="processes checking signatures"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        verifier_key = read_verifier_key(args.key)
    except note.NoteError as exc:
        parser.error(f"--key: {exc}")
    saved = None
    if args.checkpoint and args.checkpoint.exists():
        saved = args.checkpoint.read_text(encoding="utf-8")
    report, latest_note = verify_remote(
        args.url, verifier_key, saved_checkpoint=saved, page_size=args.page_size, jobs=args.jobs
    )
    print(report.summary())
    if report.ok and args.checkpoint and latest_note:
        save_checkpoint(args.checkpoint, latest_note)
        print(f"checkpoint saved to {args.checkpoint}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
