"""Full verification of the stored log, as ``manage.py verify_log`` runs it.

Recomputes the Merkle tree from the stored entry bytes (streamed, O(log n) memory), checks
every entry's canonical form, displayed columns, leaf hash and Ed25519 signature
(``ledger.verifier.LogChecker``, the same checks the standalone verifier makes over HTTP),
every stored subtree node, the head, every stored checkpoint, and a checkpoint saved earlier
by a reader. Issue 3: "A tampered entry, a rewritten history or a forked checkpoint is
reported, with the first bad index."
"""

from __future__ import annotations

from collections.abc import Iterator

from ledger import keys
from ledger.models import Checkpoint, LogEntry, LogHead, LogNode
from ledger.services import format_timestamp
from ledger.verifier import (
    BAD_CHECKPOINT,
    BAD_HEAD,
    BAD_NODE,
    FORKED_CHECKPOINT,
    REWRITTEN_HISTORY,
    LogChecker,
    Report,
)

CHUNK = 2000


def verify_database(
    *, saved_checkpoint: str | None = None, chunk_size: int = CHUNK, jobs: int = 1
) -> Report:
    """Verify everything stored against the log's public key; return the report.

    ``jobs`` processes check entry signatures, the dominant cost of a full verification.
    """
    checker = LogChecker(keys.verifier_key(), origin=keys.origin(), jobs=jobs)

    stored: list[tuple[int, bytes]] = []
    for size, root, signed in Checkpoint.objects.order_by("tree_size").values_list(
        "tree_size", "root_hash", "note"
    ):
        body = checker.open_checkpoint(signed, f"stored checkpoint {size}", size_hint=size)
        if body is None:
            continue
        if body.tree_size != size or body.root_hash != bytes(root):
            checker.problem(
                BAD_CHECKPOINT,
                max(0, min(size, body.tree_size) - 1),
                f"stored checkpoint {size}: its columns differ from the note it signed",
            )
        stored.append((body.tree_size, body.root_hash))
        checker.want_root_at(body.tree_size)
    saved = None
    if saved_checkpoint:
        saved = checker.open_checkpoint(saved_checkpoint, "the saved checkpoint")
        if saved is not None:
            checker.want_root_at(saved.tree_size)
    head = LogHead.objects.filter(pk=1).first()
    if head is not None:
        checker.want_root_at(head.tree_size)

    _check_entries_and_nodes(checker, chunk_size)

    size, root = checker.size, checker.compact.root()
    if head is not None and (head.tree_size != size or bytes(head.root_hash) != root):
        checker.problem(
            BAD_HEAD,
            min(head.tree_size, size),
            f"the head says {head.tree_size} entries with root {bytes(head.root_hash).hex()}; "
            f"the entries give {size} with root {root.hex()}",
        )
    elif head is not None and bytes(head.frontier) != b"".join(checker.compact.frontier_hashes()):
        checker.problem(BAD_HEAD, size, "the head's frontier is not the tree's (next appends)")
    for tree_size, tree_root in stored:
        checker.check_checkpoint(tree_size, tree_root, f"stored checkpoint {tree_size}")
    if saved is not None:
        # A stored checkpoint of the same size that the saved one contradicts is a fork: the
        # log signed two trees of one size. Otherwise the log no longer holds what it signed.
        contradicted = any(s == saved.tree_size and r != saved.root_hash for s, r in stored)
        checker.check_checkpoint(
            saved.tree_size,
            saved.root_hash,
            "the saved checkpoint",
            mismatch=FORKED_CHECKPOINT if contradicted else REWRITTEN_HISTORY,
        )
    return checker.finish()


class _StoredNodes:
    """Stored nodes read level by level, in index order, as the recomputed tree creates them.

    Appending leaf ``i`` creates nodes bottom-up whose index grows with ``i`` on every level,
    so one ordered cursor per level meets them in step: memory stays O(log n) and every
    stored node is compared with the node recomputed from the entries, not with other
    stored nodes.
    """

    def __init__(self, checker: LogChecker, chunk_size: int) -> None:
        self.checker = checker
        self.chunk_size = chunk_size
        self.cursors: dict[int, Iterator[tuple[int, bytes]]] = {}
        self.bad: set[tuple[int, int]] = set()

    def _cursor(self, level: int, start: int = 0) -> Iterator[tuple[int, bytes]]:
        rows = (
            LogNode.objects.filter(level=level, index__gte=start)
            .order_by("index")
            .values_list("index", "hash")
        )
        return ((index, bytes(value)) for index, value in rows.iterator(self.chunk_size))

    def check(self, level: int, index: int, expected: bytes) -> None:
        cursor = self.cursors.get(level)
        if cursor is None:
            cursor = self.cursors[level] = self._cursor(level)
        stored = next(cursor, None)
        if stored is not None and stored[0] == index and stored[1] == expected:
            return
        if stored is not None and stored[0] != index:
            self.cursors[level] = self._cursor(level, index + 1)
        self.bad.add((level, index))
        if level and ({(level - 1, 2 * index), (level - 1, 2 * index + 1)} & self.bad):
            return  # a consequence of a difference below, already reported there
        detail = "is missing" if stored is None or stored[0] != index else "is wrong"
        self.checker.problem(BAD_NODE, index << level, f"stored node ({level}, {index}) {detail}")

    def check_nothing_beyond(self, size: int) -> None:
        """No stored node may cover leaves the log does not have."""
        for level in range(0, max(size, 1).bit_length() + 1):
            beyond = LogNode.objects.filter(level=level, index__gte=size >> level).first()
            if beyond is not None:
                self.checker.problem(
                    BAD_NODE,
                    size,
                    f"stored node ({level}, {beyond.index}) lies beyond the {size}-entry tree",
                )
        deeper = LogNode.objects.filter(level__gt=max(size, 1).bit_length()).first()
        if deeper is not None:
            self.checker.problem(BAD_NODE, size, f"stored node ({deeper.level}, {deeper.index})")


def _check_entries_and_nodes(checker: LogChecker, chunk_size: int) -> None:
    """Every entry, and every stored node against the tree recomputed from the entries."""
    nodes = _StoredNodes(checker, chunk_size)
    rows = LogEntry.objects.order_by("index").values_list(
        "index",
        "kind",
        "subject",
        "timestamp",
        "payload",
        "supersedes_id",
        "entry_bytes",
        "leaf_hash",
        "key_id",
        "signature",
    )
    for (
        index,
        kind,
        subject,
        timestamp,
        payload,
        supersedes,
        data,
        leaf,
        key_id,
        signature,
    ) in rows.iterator(chunk_size=chunk_size):
        added = checker.add_entry(
            index,
            bytes(data),
            signature=bytes(signature),
            leaf_hash=bytes(leaf),
            key_id=bytes(key_id),
            fields={
                "index": index,
                "kind": kind,
                "subject": subject,
                "timestamp": format_timestamp(timestamp),
                "payload": payload,
                "supersedes": supersedes,
            },
        )
        for level, node_index, expected in added:
            nodes.check(level, node_index, expected)
    nodes.check_nothing_beyond(checker.size)
