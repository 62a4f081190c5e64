"""Reads of the transparency log: the root, stored nodes, proofs, entries and checkpoints.

Roots and proofs come from stored subtree hashes (``LogNode``) in O(log n): the coordinates a
computation needs are listed first (``merkle.required_nodes``) and fetched in one query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from django.db import connection
from django.db.models import QuerySet

from ledger import merkle
from ledger.models import Checkpoint, LogEntry, LogHead, LogNode

T = TypeVar("T")


class LogIntegrityError(RuntimeError):
    """The stored log is inconsistent with itself (a missing node, a head that disagrees)."""


def log_head() -> LogHead | None:
    """The head row (tree size and root); ``None`` only before the first migration ran."""
    return LogHead.objects.filter(pk=1).first()


def tree_size() -> int:
    """Number of entries in the log."""
    head = log_head()
    return head.tree_size if head else 0


def log_root() -> dict:
    """``{"tree_size": n, "root_hash": hex}``: the log root a manifest records.

    Issue 3: "Every run manifest carries the log root (tree size and root hash) at the time it
    was written."
    """
    head = log_head()
    if head is None:
        return {"tree_size": 0, "root_hash": merkle.EMPTY_ROOT.hex()}
    return {"tree_size": head.tree_size, "root_hash": bytes(head.root_hash).hex()}


def nodes_by_coordinate(coordinates: Iterable[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    """Stored node hashes for ``(level, index)`` coordinates, in one query.

    A row-value ``IN`` list (PostgreSQL and SQLite) keeps this one indexed lookup per
    coordinate on the composite primary key, without building an ORM ``Q`` tree per proof.
    """
    wanted = list(dict.fromkeys(coordinates))
    if not wanted:
        return {}
    meta = LogNode._meta
    level, index = meta.get_field("level").column, meta.get_field("index").column
    rows = ", ".join(["(%s, %s)"] * len(wanted))
    sql = (
        f"SELECT {level}, {index}, hash FROM {meta.db_table} "
        f"WHERE ({level}, {index}) IN (VALUES {rows})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for pair in wanted for value in pair])
        return {(lvl, idx): bytes(value) for lvl, idx, value in cursor.fetchall()}


def from_stored_nodes(compute: Callable[[merkle.NodeGetter], T]) -> T:
    """Run a ``merkle.stored_*`` computation against the database's nodes (one query)."""
    nodes = nodes_by_coordinate(merkle.required_nodes(compute))

    def get_node(level: int, index: int) -> bytes:
        try:
            return nodes[(level, index)]
        except KeyError:
            raise LogIntegrityError(f"stored node ({level}, {index}) is missing") from None

    return compute(get_node)


def _check_size(size: int, current: int | None = None) -> int:
    current = tree_size() if current is None else current
    if size < 0 or size > current:
        raise merkle.ProofError(f"tree size {size} is outside the log (size {current})")
    return current


def root_at(size: int) -> bytes:
    """Root hash of the log's first ``size`` entries."""
    _check_size(size)
    return from_stored_nodes(lambda get: merkle.stored_root(size, get))


def inclusion_proof(index: int, size: int) -> list[bytes]:
    """RFC 9162 inclusion proof of entry ``index`` in the tree of the first ``size`` entries."""
    _check_size(size)
    return from_stored_nodes(lambda get: merkle.stored_inclusion_proof(index, size, get))


def consistency_proof(first: int, second: int) -> list[bytes]:
    """RFC 9162 consistency proof from the tree of size ``first`` to that of size ``second``."""
    _check_size(second)
    return from_stored_nodes(lambda get: merkle.stored_consistency_proof(first, second, get))


def inclusion_proof_and_root(index: int, size: int) -> tuple[list[bytes], bytes]:
    """The inclusion proof of ``index`` and the root it proves against, in one node query."""
    _check_size(size)
    return from_stored_nodes(
        lambda get: (
            merkle.stored_inclusion_proof(index, size, get),
            merkle.stored_root(size, get),
        )
    )


def consistency_proof_and_roots(first: int, second: int) -> tuple[list[bytes], bytes, bytes]:
    """The consistency proof from ``first`` to ``second`` and both roots, in one node query."""
    _check_size(second)
    return from_stored_nodes(
        lambda get: (
            merkle.stored_consistency_proof(first, second, get),
            merkle.stored_root(first, get),
            merkle.stored_root(second, get),
        )
    )


def entries_between(start: int, end: int) -> QuerySet[LogEntry]:
    """Entries with ``start <= index < end``, in index order."""
    return LogEntry.objects.filter(index__gte=start, index__lt=end).order_by("index")


def entry_at(index: int) -> LogEntry | None:
    return LogEntry.objects.filter(index=index).first()


def records_of_kind(kind: str, *, after: int = -1, limit: int = 100) -> list[LogEntry]:
    """Published records of one kind (ballots, segment windows, ...), by index."""
    return list(LogEntry.objects.filter(kind=kind, index__gt=after).order_by("index")[:limit])


def latest_checkpoint() -> Checkpoint | None:
    """The stored checkpoint with the largest tree size."""
    return Checkpoint.objects.order_by("-tree_size").first()


def checkpoint_at(size: int) -> Checkpoint | None:
    return Checkpoint.objects.filter(tree_size=size).first()
