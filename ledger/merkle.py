"""RFC 9162 Merkle tree hashing, proofs and proof verification (pure, no Django).

The transparency log (protocol "Transparency log"; DESIGN.md "Contracts") is a Merkle hash tree
in the form defined by RFC 9162 section 2.1 (identical to RFC 6962 section 2.1), so that anyone
can check inclusion and consistency with standard tools:

- ``leaf_hash(d) = SHA-256(0x00 || d)`` and ``node_hash(l, r) = SHA-256(0x01 || l || r)``;
- the hash of the empty tree is SHA-256 of nothing;
- a tree of ``n > 1`` leaves splits at ``k``, the largest power of two smaller than ``n``.

Two families of functions live here:

1. Functions over raw entries (``root_hash``, ``inclusion_proof``, ``consistency_proof``) and
   the verifiers (``verify_inclusion``, ``verify_consistency``), with the signatures named by
   the issue.
2. The *stored subtree* representation the database uses so that roots and proofs cost
   O(log n) reads instead of rehashing every entry. When leaf ``i`` is appended, the hash of
   every complete, aligned subtree it completes is stored under its coordinate
   ``(level, index)``: the subtree covering leaves ``[index * 2**level, (index + 1) * 2**level)``.
   Level 0 holds the leaf hashes. Every subtree that the RFC's recursive definitions visit is
   either such a complete aligned subtree or the right edge of the tree, which folds from
   O(log n) of them (``stored_range_hash``). The ``stored_*`` functions take a
   ``get_node(level, index) -> bytes`` callback and only ever ask for stored coordinates;
   ``required_nodes`` lists the coordinates a computation reads, so a caller can fetch them in
   one query.

Hashes are 32-byte ``bytes`` throughout; sizes and indexes are ``int``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

HASH_SIZE = 32
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
EMPTY_ROOT = hashlib.sha256(b"").digest()

NodeGetter = Callable[[int, int], bytes]
Node = tuple[int, int, bytes]  # (level, index, hash)


class ProofError(ValueError):
    """Raised when a proof is asked for sizes or indexes that the tree cannot prove."""


# --- Hashing (RFC 9162 section 2.1.1) ---------------------------------------------------------


def leaf_hash(data: bytes) -> bytes:
    """Hash of one leaf: ``SHA-256(0x00 || data)``; the 0x00 prefix separates leaves from nodes."""
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Hash of an interior node: ``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def split_point(size: int) -> int:
    """The RFC's ``k``: the largest power of two strictly smaller than ``size`` (``size > 1``)."""
    if size < 2:
        raise ValueError("a tree of fewer than two leaves does not split")
    return 1 << ((size - 1).bit_length() - 1)


# --- Stored subtree representation ------------------------------------------------------------


def appended_nodes(index: int, leaf: bytes, get_node: NodeGetter) -> list[Node]:
    """Nodes to store when leaf number ``index`` (0-based) with hash ``leaf`` is appended.

    Returns ``(0, index, leaf)`` followed by every complete aligned subtree that this leaf
    completes, bottom-up; their left siblings are read through ``get_node``, so appending costs
    O(log n) reads (two stored nodes per leaf on average).
    """
    if index < 0:
        raise ValueError("leaf index must be non-negative")
    nodes: list[Node] = [(0, index, leaf)]
    level, position, current = 0, index, leaf
    while position & 1:
        current = node_hash(get_node(level, position - 1), current)
        level, position = level + 1, position >> 1
        nodes.append((level, position, current))
    return nodes


def stored_range_hash(start: int, end: int, get_node: NodeGetter) -> bytes:
    """``MTH(D[start:end])`` for a subtree the RFC recursion can visit, from stored nodes.

    Such a range starts at a multiple of a power of two at least as large as its size, so it is
    the fold, right to left, of the complete aligned subtrees given by the binary digits of
    ``end - start`` (largest first). At most ``log2(n)`` reads.
    """
    size = end - start
    if size <= 0:
        if size == 0:
            return EMPTY_ROOT
        raise ProofError("range end before its start")
    parts: list[bytes] = []
    position = start
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            if position % (1 << level):
                raise ProofError(f"range [{start}, {end}) is not a subtree of an RFC 9162 tree")
            parts.append(get_node(level, position >> level))
            position += 1 << level
    result = parts[-1]
    for part in reversed(parts[:-1]):
        result = node_hash(part, result)
    return result


def stored_root(tree_size: int, get_node: NodeGetter) -> bytes:
    """Root hash of the first ``tree_size`` leaves, from stored nodes (O(log n) reads)."""
    if tree_size < 0:
        raise ProofError("tree size must be non-negative")
    return stored_range_hash(0, tree_size, get_node)


def stored_inclusion_proof(index: int, tree_size: int, get_node: NodeGetter) -> list[bytes]:
    """RFC 9162 section 2.1.3.1 ``PATH(index, D[0:tree_size])`` from stored nodes.

    The proof lists sibling hashes from the leaf up to the root. O(log n) reads.
    """
    if not 0 <= index < tree_size:
        raise ProofError(f"leaf index {index} is not in a tree of size {tree_size}")
    return _path(index, 0, tree_size, get_node)


def _path(index: int, start: int, end: int, get_node: NodeGetter) -> list[bytes]:
    # PATH(m, D[n]) for the subtree D[start:end] and m = index - start.
    size = end - start
    if size == 1:
        return []
    k = split_point(size)
    if index - start < k:
        return _path(index, start, start + k, get_node) + [
            stored_range_hash(start + k, end, get_node)
        ]
    return _path(index, start + k, end, get_node) + [stored_range_hash(start, start + k, get_node)]


def stored_consistency_proof(old_size: int, new_size: int, get_node: NodeGetter) -> list[bytes]:
    """RFC 9162 section 2.1.4.1 ``PROOF(old_size, D[0:new_size])`` from stored nodes.

    An empty list for ``old_size == new_size`` and for ``old_size == 0`` (the empty tree is
    consistent with every tree). O(log n) reads.
    """
    if not 0 <= old_size <= new_size:
        raise ProofError(f"no consistency proof from size {old_size} to size {new_size}")
    if old_size == 0:
        return []
    return _subproof(old_size, 0, new_size, True, get_node)


def _subproof(
    old_size: int, start: int, end: int, complete: bool, get_node: NodeGetter
) -> list[bytes]:
    # SUBPROOF(m, D[n], b) for the subtree D[start:end] and m = old_size - start.
    size = end - start
    m = old_size - start
    if m == size:
        return [] if complete else [stored_range_hash(start, end, get_node)]
    k = split_point(size)
    if m <= k:
        return _subproof(old_size, start, start + k, complete, get_node) + [
            stored_range_hash(start + k, end, get_node)
        ]
    return _subproof(old_size, start + k, end, False, get_node) + [
        stored_range_hash(start, start + k, get_node)
    ]


def required_nodes(compute: Callable[[NodeGetter], object]) -> list[tuple[int, int]]:
    """The stored coordinates ``compute(get_node)`` reads, in first-read order, without reading.

    Which nodes a root or proof needs depends only on the sizes and indexes, never on hash
    values, so running the computation once with placeholder hashes lists them; a database
    caller then fetches them all in one query and runs the computation again on the results.
    """
    seen: dict[tuple[int, int], None] = {}

    def record(level: int, index: int) -> bytes:
        seen.setdefault((level, index), None)
        return bytes(HASH_SIZE)

    compute(record)
    return list(seen)


class MemoryNodeStore:
    """An in-memory stored-subtree tree: the same representation as the database's nodes.

    Used by the raw-entry functions below and by the verifiers that rebuild the whole tree.
    """

    def __init__(self, leaf_hashes: Iterable[bytes] = ()) -> None:
        self.nodes: dict[tuple[int, int], bytes] = {}
        self.size = 0
        for leaf in leaf_hashes:
            self.append_leaf_hash(leaf)

    def append_leaf_hash(self, leaf: bytes) -> list[Node]:
        """Append one leaf hash and return the nodes it stored."""
        added = appended_nodes(self.size, leaf, self.get_node)
        for level, index, value in added:
            self.nodes[(level, index)] = value
        self.size += 1
        return added

    def get_node(self, level: int, index: int) -> bytes:
        return self.nodes[(level, index)]

    def root(self, tree_size: int | None = None) -> bytes:
        return stored_root(self.size if tree_size is None else tree_size, self.get_node)


def frontier_levels(size: int) -> list[int]:
    """Levels of the complete subtrees that make a tree of ``size`` leaves, largest first."""
    return [level for level in range(size.bit_length() - 1, -1, -1) if size >> level & 1]


class CompactRange:
    """The O(log n) state that streams a whole log: the complete subtrees of the tree so far.

    A verifier appends every leaf hash in order and can take the root at any size it reaches,
    holding only one hash per set bit of the size (the tree's "frontier"), so verifying a
    million entries needs no more memory than verifying ten.
    """

    def __init__(self) -> None:
        self.size = 0
        self.frontier: list[tuple[int, bytes]] = []  # (level, hash), largest subtree first

    @classmethod
    def from_frontier(cls, size: int, hashes: Sequence[bytes]) -> CompactRange:
        """Resume from a tree of ``size`` leaves given its frontier hashes, largest first."""
        levels = frontier_levels(size)
        if len(hashes) != len(levels):
            raise ValueError(f"a tree of size {size} has {len(levels)} frontier hashes")
        compact = cls()
        compact.size = size
        compact.frontier = list(zip(levels, hashes, strict=True))
        return compact

    def frontier_hashes(self) -> list[bytes]:
        return [value for _, value in self.frontier]

    def append(self, leaf: bytes) -> list[Node]:
        """Append one leaf hash; return the nodes it completes, as ``appended_nodes`` does."""
        index = self.size
        added: list[Node] = [(0, index, leaf)]
        level, current = 0, leaf
        while self.frontier and self.frontier[-1][0] == level:
            _, left = self.frontier.pop()
            current = node_hash(left, current)
            level += 1
            added.append((level, index >> level, current))
        self.frontier.append((level, current))
        self.size += 1
        return added

    def root(self) -> bytes:
        """Root hash of the tree of all leaves appended so far."""
        if not self.frontier:
            return EMPTY_ROOT
        result = self.frontier[-1][1]
        for _, part in reversed(self.frontier[:-1]):
            result = node_hash(part, result)
        return result


# --- Functions over raw entries (the interface) --------------------------------------


def _store(entries: Sequence[bytes]) -> MemoryNodeStore:
    return MemoryNodeStore(leaf_hash(entry) for entry in entries)


def root_hash(entries: Sequence[bytes]) -> bytes:
    """RFC 9162 ``MTH(D[n])`` over raw entry bytes; ``EMPTY_ROOT`` for no entries."""
    return _store(entries).root()


def inclusion_proof(entries: Sequence[bytes], index: int) -> list[bytes]:
    """RFC 9162 inclusion proof (audit path) for entry ``index`` in the tree of all ``entries``."""
    store = _store(entries)
    return stored_inclusion_proof(index, store.size, store.get_node)


def consistency_proof(entries: Sequence[bytes], old_size: int) -> list[bytes]:
    """RFC 9162 consistency proof from the first ``old_size`` entries to all of ``entries``."""
    store = _store(entries)
    return stored_consistency_proof(old_size, store.size, store.get_node)


# --- Verification (RFC 9162 sections 2.1.3.2 and 2.1.4.2) ------------------------------------


def _is_hash(value: object) -> bool:
    return isinstance(value, bytes) and len(value) == HASH_SIZE


def root_from_inclusion_proof(
    leaf_hash: bytes, index: int, tree_size: int, proof: Sequence[bytes]
) -> bytes | None:
    """The root that an inclusion proof implies, or ``None`` when the proof cannot be valid."""
    if not (0 <= index < tree_size) or not _is_hash(leaf_hash):
        return None
    if not all(_is_hash(p) for p in proof):
        return None
    fn, sn = index, tree_size - 1
    result = leaf_hash
    for sibling in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            result = node_hash(sibling, result)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            result = node_hash(result, sibling)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        return None
    return result


def verify_inclusion(
    leaf_hash: bytes, index: int, tree_size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """True when ``proof`` shows the leaf with hash ``leaf_hash`` at ``index`` in ``root``."""
    computed = root_from_inclusion_proof(leaf_hash, index, tree_size, proof)
    return computed is not None and computed == root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """True when ``proof`` shows the tree ``old_root`` of ``old_size`` is a prefix of ``new_root``.

    Follows RFC 9162 section 2.1.4.2 for ``0 < old_size < new_size``. Equal sizes need equal
    roots and an empty proof; size 0 is the empty tree (root ``EMPTY_ROOT``), consistent with
    every tree through an empty proof.
    """
    if not (0 <= old_size <= new_size) or not (_is_hash(old_root) and _is_hash(new_root)):
        return False
    if not all(_is_hash(p) for p in proof):
        return False
    if old_size == 0:
        return not proof and old_root == EMPTY_ROOT
    if old_size == new_size:
        return not proof and old_root == new_root
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for node in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(node, fr)
            sr = node_hash(node, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, node)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root
