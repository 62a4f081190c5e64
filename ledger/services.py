"""Writes to the transparency log: appending entries and corrections, publishing checkpoints.

Protocol "Transparency log": commit the protocol version, prompt hash, checklist hash, budget
and deadline, run start, every attempt and output hash, and the final manifest before identity
reveal; "Timestamp and sign each record. A correction must add a superseding record. It must
not overwrite the original record."

Other apps call ``entry_append`` inside the transaction of the change it records, so a
rolled-back change leaves no entry and a committed change always has one. Appending locks the
single ``LogHead`` row until that transaction ends: indexes are gap-free and unique under any
number of concurrent writers, and appenders are serialized, so call it late in the
transaction and keep network or media work outside it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from duel.canonical import canonical_json
from ledger import keys, merkle, note
from ledger.models import Checkpoint, EntryKind, LogEntry, LogHead, LogNode
from ledger.selectors import LogIntegrityError, from_stored_nodes

MAX_SUBJECT_LENGTH = LogEntry._meta.get_field("subject").max_length


class LogForkError(LogIntegrityError):
    """Signing this checkpoint would contradict a checkpoint the log already signed."""


def format_timestamp(moment: datetime) -> str:
    """The entry timestamp: UTC ISO 8601 with microseconds and a ``Z`` suffix."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entry_bytes_for(
    *,
    index: int,
    kind: str,
    subject: str,
    timestamp: str,
    payload: dict,
    supersedes: int | None,
) -> bytes:
    """The canonical JSON bytes of an entry: exactly what is hashed into the tree and signed."""
    return canonical_json(
        {
            "index": index,
            "kind": kind,
            "subject": subject,
            "timestamp": timestamp,
            "payload": payload,
            "supersedes": supersedes,
        }
    )


def _locked_head() -> LogHead:
    """Lock the head row; recreate it from the stored log if it is missing (e.g. a DB flush)."""
    head = LogHead.objects.select_for_update(no_key=True).filter(pk=1).first()
    if head is not None:
        return head
    size = LogEntry.objects.count()
    frontier = from_stored_nodes(lambda get: _frontier_of(size, get))
    root = merkle.CompactRange.from_frontier(size, frontier).root()
    try:
        with transaction.atomic():
            LogHead.objects.create(
                id=1, tree_size=size, root_hash=root, frontier=b"".join(frontier)
            )
    except IntegrityError:
        pass  # a concurrent appender created it; lock theirs
    return LogHead.objects.select_for_update(no_key=True).get(pk=1)


def _frontier_of(size: int, get_node: merkle.NodeGetter) -> list[bytes]:
    position, hashes = 0, []
    for level in merkle.frontier_levels(size):
        hashes.append(get_node(level, position >> level))
        position += 1 << level
    return hashes


def _split_frontier(head: LogHead) -> list[bytes]:
    raw = bytes(head.frontier)
    hashes = [raw[i : i + merkle.HASH_SIZE] for i in range(0, len(raw), merkle.HASH_SIZE)]
    if len(hashes) != len(merkle.frontier_levels(head.tree_size)):
        raise LogIntegrityError(f"the log head's frontier does not fit size {head.tree_size}")
    return hashes


def entry_append(
    *, kind: str, subject: str, payload: dict, supersedes: int | None = None
) -> LogEntry:
    """Append one signed entry to the log, inside the caller's transaction; return it.

    ``kind`` is an ``EntryKind`` value; ``subject`` names what the entry is about
    (``"round:<id>"``, ``"run:<id>"``...); ``payload`` is a JSON object, stored in canonical
    form. ``supersedes`` is the index of an earlier entry this one replaces. Raises
    ``ValueError`` for an unknown kind, a bad subject or payload, or a ``supersedes`` that is
    not an earlier entry.
    """
    if kind not in EntryKind.values:
        raise ValueError(f"unknown log entry kind {kind!r}")
    if not subject or len(subject) > MAX_SUBJECT_LENGTH:
        raise ValueError(f"subject must be 1 to {MAX_SUBJECT_LENGTH} characters")
    if not isinstance(payload, dict):
        raise ValueError("payload must be a JSON object (dict)")
    # Round-trip through canonical JSON so the stored column equals what the bytes say
    # (tuples become lists, NaN is refused before any lock is taken).
    canonical_payload = json.loads(canonical_json(payload))
    key = keys.signing_key()
    key_id = note.key_id(keys.origin(), note.public_key_bytes(key))

    with transaction.atomic():
        head = _locked_head()
        index = head.tree_size
        if supersedes is not None and not (0 <= supersedes < index):
            raise ValueError(f"entry {supersedes} is not an earlier entry of the log")
        moment = timezone.now()
        timestamp = format_timestamp(moment)
        data = entry_bytes_for(
            index=index,
            kind=kind,
            subject=subject,
            timestamp=timestamp,
            payload=canonical_payload,
            supersedes=supersedes,
        )
        leaf = merkle.leaf_hash(data)

        # The head's frontier (the current tree's complete subtrees) is all the new leaf's
        # parents and the new root need: an append reads no stored node.
        tree = merkle.CompactRange.from_frontier(index, _split_frontier(head))
        new_nodes = tree.append(leaf)
        root = tree.root()

        entry = LogEntry.objects.create(
            index=index,
            kind=kind,
            subject=subject,
            timestamp=moment,
            payload=canonical_payload,
            supersedes_id=supersedes,
            entry_bytes=data,
            leaf_hash=leaf,
            key_id=key_id,
            signature=key.sign(data),
        )
        LogNode.objects.bulk_create(
            [LogNode(level=level, index=i, hash=h) for level, i, h in new_nodes]
        )
        head.tree_size = index + 1
        head.root_hash = root
        head.frontier = b"".join(tree.frontier_hashes())
        head.save(update_fields=["tree_size", "root_hash", "frontier"])
    return entry


def correction_append(*, supersedes: int, reason: str, payload: dict) -> LogEntry:
    """Append a ``correction`` entry that supersedes entry ``supersedes``; nothing is rewritten.

    The correction keeps the superseded entry's subject; its payload is
    ``{"reason": reason, "correction": payload}``.
    """
    if not reason or not reason.strip():
        raise ValueError("a correction needs a reason")
    with transaction.atomic():
        original = LogEntry.objects.filter(index=supersedes).only("subject").first()
        if original is None:
            raise ValueError(f"entry {supersedes} does not exist")
        return entry_append(
            kind=EntryKind.CORRECTION,
            subject=original.subject,
            payload={"reason": reason.strip(), "correction": payload},
            supersedes=supersedes,
        )


def checkpoint_publish() -> Checkpoint:
    """Sign and store the checkpoint for the current tree, or return the stored one.

    Before signing, the new root is checked to be consistent with the latest checkpoint
    already signed (tlog-checkpoint: "A log MUST not sign any checkpoint which is inconsistent
    with any checkpoint it previously signed"). Idempotent: one checkpoint per tree size.
    """
    head = LogHead.objects.filter(pk=1).first()
    size = head.tree_size if head else 0
    root = from_stored_nodes(lambda get: merkle.stored_root(size, get))
    if head is not None and bytes(head.root_hash) != root:
        raise LogIntegrityError(f"the log head's root disagrees with the stored nodes at {size}")

    existing = Checkpoint.objects.filter(tree_size=size).first()
    if existing is not None:
        if bytes(existing.root_hash) != root:
            raise LogForkError(f"a different root was already signed for tree size {size}")
        return existing

    previous = Checkpoint.objects.filter(tree_size__lt=size).order_by("-tree_size").first()
    if previous is not None:
        proof = from_stored_nodes(
            lambda get: merkle.stored_consistency_proof(previous.tree_size, size, get)
        )
        if not merkle.verify_consistency(
            previous.tree_size, size, bytes(previous.root_hash), root, proof
        ):
            raise LogForkError(
                f"the tree of size {size} is not consistent with the checkpoint signed at "
                f"size {previous.tree_size}"
            )

    origin = keys.origin()
    signed = note.sign_checkpoint(note.Checkpoint(origin, size, root), keys.signing_key(), origin)
    try:
        with transaction.atomic():
            return Checkpoint.objects.create(
                tree_size=size, root_hash=root, note=signed, created_at=timezone.now()
            )
    except IntegrityError:
        existing = Checkpoint.objects.get(tree_size=size)
        if bytes(existing.root_hash) != root:
            raise LogForkError(
                f"a different root was already signed for tree size {size}"
            ) from None
        return existing
