"""RFC 9162 / RFC 6962 Merkle tree: published test vectors and a naive reference implementation.

The vectors are the 8-leaf test data used across certificate-transparency implementations
(google/certificate-transparency python/ct/crypto/merkle_test.py, google/trillian
merkle/log_verifier_test.go): leaves d0..d7, the roots of their prefixes, known audit paths and
consistency proofs, and one audit path from a real CT log of 3,630,887 entries.
"""

from __future__ import annotations

import hashlib

import pytest

from ledger import merkle

LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
ROOTS = [
    bytes.fromhex(h)
    for h in (
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    )
]


def hexes(*values: str) -> list[bytes]:
    return [bytes.fromhex(v) for v in values]


# (leaf index, tree size, audit path)
INCLUSION_VECTORS = [
    (
        0,
        8,
        hexes(
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ),
    ),
    (
        5,
        8,
        hexes(
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ),
    ),
    (2, 3, hexes("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")),
    (
        1,
        5,
        hexes(
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ),
    ),
    (0, 1, []),
]

# (old size, new size, consistency proof)
CONSISTENCY_VECTORS = [
    (1, 1, []),
    (
        1,
        8,
        hexes(
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ),
    ),
    (
        6,
        8,
        hexes(
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ),
    ),
    (
        2,
        5,
        hexes(
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ),
    ),
]

# An audit path served by a production CT log (certificate-transparency merkle_test.py).
CT_LEAF_HASH = bytes.fromhex("7a395c866d5ecdb0cccb623e011dbc392cd348d1d1d72776174e127a24b09c78")
CT_LEAF_INDEX = 848049
CT_TREE_SIZE = 3630887
CT_ROOT = bytes.fromhex("78316a05c9bcf14a3a4548f5b854a9adfcd46a4c034401b3ce7eb7ac2f1d0ecb")
CT_AUDIT_PATH = hexes(
    "1a208aeebcd1b39fe2de247ee8db9454e1e93a312d206b87f6ca9cc6ec6f1ddd",
    "0a1b78b383f580856f433c01a5741e160d451c185910027f6cc9f828687a40c4",
    "3d1745789bc63f2da15850de1c12a5bf46ed81e1cc90f086148b1662e79aab3d",
    "9095b61e14d8990acf390905621e62b1714fb8e399fbb71de5510e0aef45affe",
    "0a332b91b8fab564e6afd1dd452449e04619b18accc0ff9aa8393cd4928451f2",
    "2336f0181d264aed6d8f3a6507ca14a8d3b3c3a23791ac263e845d208c1ee330",
    "b4ce56e300590500360c146c6452edbede25d4ed83919278749ee5dbe178e048",
    "933f6ddc848ea562e4f9c5cfb5f176941301dad0c6fdb9d1fbbe34fac1be6966",
    "b95a6222958a86f74c030be27c44f57dbe313e5e7c7f4ffb98bcbd3a03bb52f2",
    "daeeb3ce5923defd0faeb8e0c210b753b85b809445d7d3d3cd537a9aabaa9c45",
    "7fadd0a13e9138a2aa6c3fdec4e2275af233b94812784f66bcca9aa8e989f2bc",
    "1864e6ba3e32878610546539734fb5eeae2529991f130c575c73a7e25a2a7c56",
    "12842d1202b1dc6828a17ab253c02e7ce9409b5192430feba44189f39cc02d66",
    "29af64b16fa3053c13d02ac63aa75b23aa468506e44c3a2315edc85d2dc22b11",
    "b527b99934a0bd9edd154e449b0502e2c499bba783f3bc3dfe23364b6b532009",
    "4584db8ae8e351ace08e01f306378a92bfd43611714814f3d834a2842d69faa8",
    "86a9a41573b0d6e4292f01e93243d6cc65b30f06606fc6fa57390e7e90ed580f",
    "a88b98fbe84d4c6aae8db9d1605dfac059d9f03fe0fcb0d5dff1295dacba09e6",
    "06326dc617a6d1f7021dc536026dbfd5fffc6f7c5531d48ef6ccd1ed1569f2a1",
    "f41fe8fdc3a2e4e8345e30216e7ebecffee26ff266eeced208a6c2a3cf08f960",
    "40cf5bde8abb76983f3e98ba97aa36240402975674e120f234b3448911090f8d",
    "b3222dc8658538079883d980d7fdc2bef9285344ea34338968f736b04aeb387a",
)


def flipped(value: bytes, position: int = 0) -> bytes:
    return value[:position] + bytes([value[position] ^ 1]) + value[position + 1 :]


# --- Hashing ---------------------------------------------------------------------------------


def test_empty_tree_is_the_hash_of_nothing():
    assert merkle.root_hash([]) == hashlib.sha256(b"").digest() == merkle.EMPTY_ROOT


def test_leaf_and_node_hashes_use_the_rfc_prefixes():
    assert merkle.leaf_hash(b"").hex() == ROOTS[0].hex()
    assert (
        merkle.leaf_hash(bytes.fromhex("101112131415161718191a1b1c1d1e1f")).hex()
        == "3bfb960453ebaebf33727da7a1f4db38acc051d381b6da20d6d4e88f0eabfd7a"
    )
    left = bytes.fromhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
    right = bytes.fromhex("202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f")
    assert (
        merkle.node_hash(left, right).hex()
        == "1a378704c17da31e2d05b6d121c2bb2c7d76f6ee6fa8f983e596c2d034963c57"
    )


@pytest.mark.parametrize("size", range(1, 9))
def test_roots_match_the_published_vectors(size):
    assert merkle.root_hash(LEAVES[:size]) == ROOTS[size - 1]


@pytest.mark.parametrize(("index", "size", "path"), INCLUSION_VECTORS)
def test_inclusion_proofs_match_the_published_vectors(index, size, path):
    assert merkle.inclusion_proof(LEAVES[:size], index) == path
    leaf = merkle.leaf_hash(LEAVES[index])
    assert merkle.verify_inclusion(leaf, index, size, path, ROOTS[size - 1])


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY_VECTORS)
def test_consistency_proofs_match_the_published_vectors(old, new, proof):
    assert merkle.consistency_proof(LEAVES[:new], old) == proof
    assert merkle.verify_consistency(old, new, ROOTS[old - 1], ROOTS[new - 1], proof)


def test_a_production_ct_audit_path_verifies():
    assert merkle.verify_inclusion(
        CT_LEAF_HASH, CT_LEAF_INDEX, CT_TREE_SIZE, CT_AUDIT_PATH, CT_ROOT
    )
    assert not merkle.verify_inclusion(
        CT_LEAF_HASH, CT_LEAF_INDEX + 1, CT_TREE_SIZE, CT_AUDIT_PATH, CT_ROOT
    )
    assert not merkle.verify_inclusion(
        CT_LEAF_HASH, CT_LEAF_INDEX, CT_TREE_SIZE, CT_AUDIT_PATH, flipped(CT_ROOT, 31)
    )


# --- Verifier rejections (after trillian's verifier checks) ----------------------------------


@pytest.mark.parametrize(("index", "size", "path"), INCLUSION_VECTORS[:4])
def test_inclusion_verification_rejects_every_mutation(index, size, path):
    leaf = merkle.leaf_hash(LEAVES[index])
    root = ROOTS[size - 1]
    verify = merkle.verify_inclusion
    assert not verify(leaf, index - 1, size, path, root)
    assert not verify(leaf, index + 1, size, path, root)
    assert not verify(leaf, index ^ 2, size, path, root)
    assert not verify(leaf, index, size * 2, path, root)
    assert not verify(leaf, index, size // 2, path, root)
    assert not verify(merkle.leaf_hash(b"WrongLeaf"), index, size, path, root)
    assert not verify(leaf, index, size, path, merkle.EMPTY_ROOT)
    for position in range(len(path)):
        wrong = list(path)
        wrong[position] = merkle.EMPTY_ROOT
        assert not verify(leaf, index, size, wrong, root)
    assert not verify(leaf, index, size, path + [b""], root)
    assert not verify(leaf, index, size, path + [root], root)
    assert not verify(leaf, index, size, path[:-1], root)
    assert not verify(leaf, index, size, [b""] + path, root)
    assert not verify(leaf, index, size, [root] + path, root)


def test_inclusion_verification_rejects_impossible_positions():
    for index, size in [(0, 0), (1, 0), (2, 1), (-1, 4)]:
        assert not merkle.verify_inclusion(merkle.leaf_hash(b""), index, size, [], ROOTS[0])


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY_VECTORS[1:])
def test_consistency_verification_rejects_every_mutation(old, new, proof):
    old_root, new_root = ROOTS[old - 1], ROOTS[new - 1]
    verify = merkle.verify_consistency
    assert not verify(old - 1, new, old_root, new_root, proof)
    assert not verify(old + 1, new, old_root, new_root, proof)
    assert not verify(old ^ 2, new, old_root, new_root, proof)
    assert not verify(old, new * 2, old_root, new_root, proof)
    assert not verify(old, new // 2, old_root, new_root, proof)
    assert not verify(old, new, flipped(old_root), new_root, proof)
    assert not verify(old, new, old_root, flipped(new_root), proof)
    assert not verify(old, new, new_root, old_root, proof)
    assert not verify(old, new, old_root, new_root, [])
    for position in range(len(proof)):
        wrong = list(proof)
        wrong[position] = merkle.EMPTY_ROOT
        assert not verify(old, new, old_root, new_root, wrong)
    assert not verify(old, new, old_root, new_root, proof + [b""])
    assert not verify(old, new, old_root, new_root, proof + [old_root])
    assert not verify(old, new, old_root, new_root, proof[:-1])
    assert not verify(old, new, old_root, new_root, [proof[0]] + proof)


def test_consistency_edge_cases():
    verify = merkle.verify_consistency
    assert verify(0, 5, merkle.EMPTY_ROOT, ROOTS[4], [])
    assert not verify(0, 5, ROOTS[0], ROOTS[4], [])
    assert not verify(0, 5, merkle.EMPTY_ROOT, ROOTS[4], [ROOTS[0]])
    assert verify(3, 3, ROOTS[2], ROOTS[2], [])
    assert not verify(3, 3, ROOTS[2], ROOTS[2], [ROOTS[2]])
    assert not verify(3, 3, ROOTS[2], ROOTS[3], [])
    assert not verify(5, 2, ROOTS[4], ROOTS[1], [])
    assert merkle.consistency_proof(LEAVES, 0) == []
    with pytest.raises(merkle.ProofError):
        merkle.consistency_proof(LEAVES[:3], 4)
    with pytest.raises(merkle.ProofError):
        merkle.inclusion_proof(LEAVES[:3], 3)


# --- Property test against a literal transcription of the RFC definitions --------------------

MAX_SIZE = 200
PROPERTY_ENTRIES = [i.to_bytes(2, "big") * (i % 5) + bytes([i % 256]) for i in range(MAX_SIZE)]
PROPERTY_LEAF_HASHES = [merkle.leaf_hash(e) for e in PROPERTY_ENTRIES]


class NaiveTree:
    """A literal transcription of the RFC 9162 section 2.1 definitions, memoised per range."""

    def __init__(self, entries: list[bytes]) -> None:
        self.entries = entries
        self.memo: dict[tuple[int, int], bytes] = {}

    @staticmethod
    def k(n: int) -> int:
        k = 1
        while k * 2 < n:
            k *= 2
        return k

    def mth(self, start: int, end: int) -> bytes:
        """MTH(D[start:end]) (section 2.1.1)."""
        if (start, end) not in self.memo:
            n = end - start
            if n == 0:
                value = hashlib.sha256(b"").digest()
            elif n == 1:
                value = hashlib.sha256(b"\x00" + self.entries[start]).digest()
            else:
                k = self.k(n)
                value = hashlib.sha256(
                    b"\x01" + self.mth(start, start + k) + self.mth(start + k, end)
                ).digest()
            self.memo[(start, end)] = value
        return self.memo[(start, end)]

    def path(self, m: int, start: int, end: int) -> list[bytes]:
        """PATH(m, D[start:end]) (section 2.1.3.1)."""
        n = end - start
        if n == 1:
            return []
        k = self.k(n)
        if m < k:
            return self.path(m, start, start + k) + [self.mth(start + k, end)]
        return self.path(m - k, start + k, end) + [self.mth(start, start + k)]

    def subproof(self, m: int, start: int, end: int, complete: bool) -> list[bytes]:
        """SUBPROOF(m, D[start:end], b) (section 2.1.4.1)."""
        n = end - start
        if m == n:
            return [] if complete else [self.mth(start, end)]
        k = self.k(n)
        if m <= k:
            return self.subproof(m, start, start + k, complete) + [self.mth(start + k, end)]
        return self.subproof(m - k, start + k, end, False) + [self.mth(start, start + k)]


NAIVE = NaiveTree(PROPERTY_ENTRIES)


@pytest.fixture(scope="module")
def grown_store() -> merkle.MemoryNodeStore:
    """One store grown leaf by leaf to MAX_SIZE, as the database log grows."""
    return merkle.MemoryNodeStore(PROPERTY_LEAF_HASHES)


def test_naive_reference_agrees_with_the_published_vectors():
    # Guards the reference itself, so the property tests compare against something true.
    reference = NaiveTree(LEAVES)
    assert [reference.mth(0, n) for n in range(1, 9)] == ROOTS
    for index, size, path in INCLUSION_VECTORS:
        assert reference.path(index, 0, size) == path
    for old, new, proof in CONSISTENCY_VECTORS:
        assert reference.subproof(old, 0, new, True) == proof


def test_roots_match_the_reference_for_every_size_up_to_200(grown_store):
    for size in range(0, MAX_SIZE + 1):
        expected = NAIVE.mth(0, size)
        assert merkle.root_hash(PROPERTY_ENTRIES[:size]) == expected
        assert grown_store.root(size) == expected


def test_every_inclusion_proof_up_to_200_matches_and_verifies(grown_store):
    for size in range(1, MAX_SIZE + 1):
        root = NAIVE.mth(0, size)
        for index in range(size):
            proof = merkle.stored_inclusion_proof(index, size, grown_store.get_node)
            assert proof == NAIVE.path(index, 0, size), (index, size)
            leaf = PROPERTY_LEAF_HASHES[index]
            assert merkle.verify_inclusion(leaf, index, size, proof, root)
            assert not merkle.verify_inclusion(flipped(leaf), index, size, proof, root)
            if proof:
                assert not merkle.verify_inclusion(
                    leaf, index, size, [flipped(proof[0], 7)] + proof[1:], root
                )
                assert not merkle.verify_inclusion(
                    leaf, index, size, proof[:-1] + [flipped(proof[-1], 31)], root
                )
            assert not merkle.verify_inclusion(leaf, index, size, proof, flipped(root, 5))


def test_every_consistency_proof_up_to_200_matches_and_verifies(grown_store):
    for new_size in range(1, MAX_SIZE + 1):
        new_root = NAIVE.mth(0, new_size)
        for old_size in range(1, new_size + 1):
            old_root = NAIVE.mth(0, old_size)
            proof = merkle.stored_consistency_proof(old_size, new_size, grown_store.get_node)
            assert proof == NAIVE.subproof(old_size, 0, new_size, True), (old_size, new_size)
            assert merkle.verify_consistency(old_size, new_size, old_root, new_root, proof)
            assert not merkle.verify_consistency(
                old_size, new_size, flipped(old_root), new_root, proof
            )
            assert not merkle.verify_consistency(
                old_size, new_size, old_root, flipped(new_root, 9), proof
            )
            if proof:
                assert not merkle.verify_consistency(
                    old_size, new_size, old_root, new_root, [flipped(proof[0], 3)] + proof[1:]
                )
                assert not merkle.verify_consistency(
                    old_size, new_size, old_root, new_root, proof[:-1] + [flipped(proof[-1])]
                )


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 9, 31, 64, 65, 200])
def test_raw_entry_functions_agree_with_the_reference(size):
    entries = PROPERTY_ENTRIES[:size]
    for index in range(size):
        assert merkle.inclusion_proof(entries, index) == NAIVE.path(index, 0, size)
    for old_size in range(0, size + 1):
        expected = [] if old_size == 0 else NAIVE.subproof(old_size, 0, size, True)
        assert merkle.consistency_proof(entries, old_size) == expected


# --- Stored subtree representation -----------------------------------------------------------


def test_appending_stores_each_completed_subtree_once():
    store = merkle.MemoryNodeStore()
    counts = [len(store.append_leaf_hash(h)) for h in PROPERTY_LEAF_HASHES[:16]]
    # Leaf 7 (0-based) completes subtrees of 2, 4 and 8 leaves.
    assert counts[7] == 4
    assert counts[:4] == [1, 2, 1, 3]
    assert len(store.nodes) == 2 * 16 - 1
    assert store.get_node(4, 0) == NAIVE.mth(0, 16)
    assert store.get_node(2, 1) == NAIVE.mth(4, 8)


def test_proofs_read_only_logarithmically_many_stored_nodes(grown_store):
    size = 199
    reads = merkle.required_nodes(
        lambda get: merkle.stored_inclusion_proof(77, size, get)
    ) + merkle.required_nodes(lambda get: merkle.stored_consistency_proof(100, size, get))
    assert len(reads) <= 4 * size.bit_length()
    assert all((level, index) in grown_store.nodes for level, index in reads)


def test_required_nodes_are_exactly_what_a_proof_reads(grown_store):
    coordinates = merkle.required_nodes(lambda get: merkle.stored_root(200, get))
    fetched = {c: grown_store.nodes[c] for c in coordinates}
    assert merkle.stored_root(200, lambda level, index: fetched[(level, index)]) == NAIVE.mth(
        0, 200
    )
    # 200 = 128 + 64 + 8: three complete subtrees.
    assert coordinates == [(7, 0), (6, 2), (3, 24)]


def test_a_range_that_is_not_an_rfc_subtree_is_refused(grown_store):
    with pytest.raises(merkle.ProofError):
        merkle.stored_range_hash(3, 7, grown_store.get_node)


def test_a_compact_range_streams_the_same_roots_and_nodes(grown_store):
    compact = merkle.CompactRange()
    stored = merkle.MemoryNodeStore()
    for size, leaf in enumerate(PROPERTY_LEAF_HASHES, start=1):
        assert compact.append(leaf) == stored.append_leaf_hash(leaf)
        assert compact.root() == NAIVE.mth(0, size)
        assert len(compact.frontier) == bin(size).count("1")
    assert merkle.CompactRange().root() == merkle.EMPTY_ROOT


def test_a_compact_range_resumes_from_its_frontier():
    assert merkle.frontier_levels(0) == []
    assert merkle.frontier_levels(200) == [7, 6, 3]
    whole = merkle.CompactRange()
    for leaf in PROPERTY_LEAF_HASHES[:150]:
        whole.append(leaf)
    resumed = merkle.CompactRange.from_frontier(150, whole.frontier_hashes())
    for leaf in PROPERTY_LEAF_HASHES[150:]:
        resumed.append(leaf)
    assert resumed.root() == NAIVE.mth(0, 200)
    with pytest.raises(ValueError):
        merkle.CompactRange.from_frontier(150, whole.frontier_hashes()[:-1])
