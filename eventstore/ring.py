"""Riak's consistent-hash ring: key positions, ownership and preflists, as riak_core computes them.

Pure logic, no I/O. Every rule here was checked against riak_core's own Erlang code (see
``eventstore/DESIGN.md``, "Ring"); the tests compare with a real ``erl``.

- **Hash.** ``SHA-1(term_to_binary({Bucket, Key}))`` as a 160-bit big-endian integer,
  where Bucket and Key are Erlang binaries; for a bucket in a bucket type other than
  ``default`` the term is ``{{Type, Bucket}, Key}`` (riak_core's ``chash:key_of``).
- **Positions.** The ring has ``ring_size`` (Q) equal ring partitions; position ``p``
  starts at ``p * (2**160 // Q)``. A key's first primary is the position just after its
  hash, ``(h // (2**160 // Q) + 1) % Q`` (``chash:next_index``); the next ``n_val``
  positions, wrapping, hold its primaries.
- **Ownership.** What riak_core's default claim (``choose_claim_v2``, target_n_val 4)
  gives a fresh cluster whose members joined in one committed plan: see :func:`claim`.
- **Fallbacks.** ``riak_core_apl:get_apl_ann``: up primaries first, then for each down
  primary, in order, the next up node among the positions after the first ``n_val``
  (a node may appear twice; Riak does not avoid that), annotated with the primary's
  position.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

__all__ = [
    "DEFAULT_RING_SIZE",
    "DEFAULT_TARGET_N_VAL",
    "HASH_SPACE",
    "PreflistEntry",
    "Ring",
    "bkey_term",
    "claim",
    "key_hash",
    "key_position",
]

#: Size of the SHA-1 hash space: positions are arcs of ``HASH_SPACE // ring_size``.
HASH_SPACE = 2**160
#: Riak's default ring_size.
DEFAULT_RING_SIZE = 64
#: riak_core's default ``target_n_val``: claim spaces a node's positions this far apart.
DEFAULT_TARGET_N_VAL = 4

# Erlang external term format tags (erts/emulator/beam/external.h).
_VERSION = 131
_SMALL_TUPLE_EXT = 104
_BINARY_EXT = 109


def _as_bytes(value: str | bytes, what: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be str or bytes, not {type(value).__name__}")


def _binary_ext(data: bytes) -> bytes:
    return struct.pack(">BI", _BINARY_EXT, len(data)) + data


def _pair(a: bytes, b: bytes) -> bytes:
    return bytes((_SMALL_TUPLE_EXT, 2)) + a + b


def _is_default_type(bucket_type: str | bytes | None) -> bool:
    return bucket_type is None or _as_bytes(bucket_type, "bucket_type") == b"default"


def bkey_term(
    bucket: str | bytes, key: str | bytes, *, bucket_type: str | bytes | None = None
) -> bytes:
    """The Erlang external term format of the object's name, as Riak hashes it.

    Args:
        bucket: bucket name (``str`` is UTF-8 encoded, as Riak's HTTP API does).
        key: object key (same encoding).
        bucket_type: None or ``"default"`` for a plain bucket, else the bucket type.

    Returns:
        ``term_to_binary({Bucket, Key})`` or ``term_to_binary({{Type, Bucket}, Key})``.
    """
    b = _binary_ext(_as_bytes(bucket, "bucket"))
    if not _is_default_type(bucket_type):
        assert bucket_type is not None
        b = _pair(_binary_ext(_as_bytes(bucket_type, "bucket_type")), b)
    return bytes((_VERSION,)) + _pair(b, _binary_ext(_as_bytes(key, "key")))


def key_hash(
    bucket: str | bytes, key: str | bytes, *, bucket_type: str | bytes | None = None
) -> int:
    """The key's 160-bit hash, ``SHA-1(bkey_term(...))`` read as a big-endian integer."""
    digest = hashlib.sha1(bkey_term(bucket, key, bucket_type=bucket_type)).digest()
    return int.from_bytes(digest, "big")


def _check_ring_size(ring_size: int) -> None:
    if (
        not isinstance(ring_size, int)
        or isinstance(ring_size, bool)
        or ring_size < 1
        or ring_size & (ring_size - 1)
    ):
        raise ValueError(f"ring_size must be a power of 2, got {ring_size!r}")


def key_position(
    bucket: str | bytes,
    key: str | bytes,
    *,
    bucket_type: str | bytes | None = None,
    ring_size: int = DEFAULT_RING_SIZE,
) -> int:
    """The position (0-based ring partition number) of a key's first primary.

    Args:
        bucket, key, bucket_type: the object's name; ``bucket_type`` None or
            ``"default"`` means the plain bucket.
        ring_size: Q, a power of 2 (Riak allows 8..1024 in practice).

    Returns:
        ``(h // (2**160 // Q) + 1) % Q``.

    Raises:
        ValueError: when ring_size is not a power of 2.
    """
    _check_ring_size(ring_size)
    h = key_hash(bucket, key, bucket_type=bucket_type)
    return (h // (HASH_SPACE // ring_size) + 1) % ring_size


# -- claim --------------------------------------------------------------------------------


def _spaced_by_n(a: int, b: int, target_n: int, q: int) -> bool:
    # True when positions a and b are at least target_n apart both ways round the ring.
    if a > b:
        fwd, back = a - b, b - a + q
    else:
        fwd, back = a - b + q, b - a
    return fwd >= target_n and back >= target_n


def _sequential_claim(nodes: Sequence[str], q: int, target_n: int) -> list[str]:
    """riak_core's re-diagonalisation: round robin over the sorted nodes, moving a few
    nodes out of earlier rounds into the last one when the wrap-around would put a node
    within target_n of itself ("tail violation") and enough nodes exist to avoid it."""
    n = len(nodes)
    overhang = q % n
    has_tail_violation = 0 < overhang < target_n
    shortfall = target_n - overhang
    complete = q // n
    max_fetches = n - target_n
    min_fetches = -(-shortfall // complete)  # ceiling
    if not (has_tail_violation and complete * max_fetches >= shortfall):
        return [nodes[i % n] for i in range(q)]
    # Build the last round longer by `shortfall` nodes, then take those nodes out of
    # the preceding rounds (at most min_fetches a round), newest round first.
    segments: list[list[str]] = [list(nodes[: overhang + shortfall])]
    counter = overhang + 1  # 1-based index of the next node to take out
    while shortfall:
        remove = min(min_fetches, shortfall, n - counter)
        if remove <= 0:  # riak_core would loop for ever here; never seen for n >= 4
            raise ValueError(f"tail violation of {n} nodes over {q} positions is unsolvable")
        removed = set(nodes[counter - 1 : counter - 1 + remove])
        segments.insert(0, [x for x in nodes if x not in removed])
        counter += remove
        shortfall -= remove
    filled = sum(len(s) for s in segments)
    segments[:0] = [list(nodes)] * ((q - filled) // n)
    owners = [node for seg in segments for node in seg]
    if len(owners) != q:  # riak_core's lists:zip would crash
        raise ValueError(f"tail-violation layout of {n} nodes does not fill {q} positions")
    return owners


def _atom_phash(name: str, range_: int) -> int:
    """``erlang:phash(list_to_atom(name), range_)``: the atom table's hashpjw of the
    name, reduced to 1..range_."""
    h = 0
    for v in name.encode("latin-1"):
        h = ((h << 4) + v) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
            h ^= g
    return h % range_ + 1


def _erlang_dict_order(keys: Sequence[str]) -> list[str]:
    """The order ``dict:to_list(dict:from_list(...))`` returns atoms inserted in ``keys``
    order: by hash slot, newest first within a slot (a dict of up to 80 keys has 16
    slots)."""
    if len(keys) > 80:  # the dict would have grown; only small clusters come here
        raise ValueError("dict order is only modelled for up to 80 keys")
    return [k for _, _, k in sorted((_atom_phash(k, 16), -i, k) for i, k in enumerate(keys))]


def _deltas(owners: Sequence[str], members: Sequence[str], q: int) -> dict[str, int]:
    """riak_core get_deltas: how many positions each member should gain (> 0) or lose."""
    n = len(members)
    avg = q / n
    most = -(-q // n)
    counts = {m: 0 for m in members}
    for o in owners:
        if o in counts:
            counts[o] += 1
    # riak_core keeps the counts in an Erlang dict and walks dict:to_list/1, whose order
    # decides which node gets a rounding extra (N = 3 and Q % 3 == 2), so walk it so.
    order = _erlang_dict_order(members)
    own = [counts[m] for m in order]
    # A node over its share gives up as many as it can (ceiling), one under it asks for
    # as few as it needs (truncation); then riak_core evens out the rounding error:
    # increase_keeps (givers keep one more), then increase_takes (takers get one more).
    delta = [
        -math.ceil(own[i] - avg) if avg < own[i] else math.trunc(avg - own[i]) for i in range(n)
    ]
    error = sum(own) + sum(delta) - q
    for giving in (True, False):
        for i in range(n):
            if error >= 0:
                break
            if (delta[i] < 0) if giving else (delta[i] > 0):
                add = 1 if own[i] + delta[i] + 1 <= most else 0
                delta[i] += add
                error += add
    result = dict(zip(order, delta, strict=True))
    for o in owners:
        result.setdefault(o, 0)
    return result


def _choose_claim_v2_few(
    owners: list[str], members: Sequence[str], node: str, q: int, target_n: int
) -> list[str]:
    """choose_claim_v2 for a node of a cluster too small to meet target_n (N < 4)."""
    deltas = _deltas(owners, members, q)
    want = deltas[node]
    expanded: list[str | None] = [*members, *([None] * target_n)][:target_n]
    preferred = [i for i in range(q) if expanded[i % target_n] == node]
    offsets = range(q // len(preferred) + 1)
    candidates = [(x + y) % q for y in offsets for x in preferred][:q]
    current = [i for i, o in enumerate(owners) if o == node]
    candidates = [c for c in candidates if all(_spaced_by_n(p, c, target_n, q) for p in current)]
    claim: list[int] = []
    if candidates:
        left = dict(deltas)
        last, first = candidates[0], True
        for c in candidates:
            giver = owners[c]
            if left[giver] < 0 and (first or _spaced_by_n(last, c, target_n, q)):
                claim.append(c)
                left[giver] += 1
                last, first = c, False
        claim = claim[: max(want, 0)]
    if not claim:
        return _sequential_claim(sorted(set(members) | {node}), q, target_n)
    new = list(owners)
    for c in claim:
        new[c] = node
    return new


def claim(
    nodes: Iterable[str],
    ring_size: int = DEFAULT_RING_SIZE,
    *,
    target_n_val: int = DEFAULT_TARGET_N_VAL,
) -> list[str]:
    """Ownership of a fresh cluster: the owner of each position, as riak_core's claim leaves it.

    The model: the sorted-first node creates the ring and owns every position; the others
    join and the plan is committed once; riak_core's claimant then runs the default claim
    (``wants_claim_v2`` / ``choose_claim_v2``, ``target_n_val`` 4) for each member in
    sorted order. Established by running riak_core 3.x's own claim code in ``erl``:

    - N >= 4 (tested N = 4..20, Q = 8..1024): the result is riak_core's
      ``sequential_claim``: position i owned by ``sorted(nodes)[i % N]`` when
      ``Q % N == 0`` or ``Q % N >= 4``; otherwise the tail-violation layout (the last
      round lengthened, a few nodes taken out of earlier rounds).
    - N = 2 or 3: ``choose_claim_v2``'s small-cluster branch claims positions near a
      4-way diagonal, so the layout is *not* round robin (N = 2: ``a b b a`` repeated)
      and some preflists hold the same node twice. N = 1: one node owns everything.

    A cluster grown by several commits may differ; pass its real ownership to
    :class:`Ring` instead.

    Args:
        nodes: node names (ASCII; Erlang sorts atoms like Python sorts ASCII strings).
        ring_size: Q, a power of 2, at least the number of nodes.
        target_n_val: riak_core's target_n_val (default 4).

    Returns:
        Q node names: the owner of each position.

    Raises:
        ValueError: no nodes, duplicate or non-ASCII names, more nodes than positions,
            ring_size not a power of 2.
    """
    _check_ring_size(ring_size)
    members = sorted(nodes)
    if not members:
        raise ValueError("a ring needs at least one node")
    if len(set(members)) != len(members):
        raise ValueError(f"duplicate node names in {members!r}")
    if not all(isinstance(m, str) and m.isascii() and m for m in members):
        raise ValueError(f"node names must be non-empty ASCII strings: {members!r}")
    n, q = len(members), ring_size
    if n > q:  # riak_core's sequential_claim divides by q // n
        raise ValueError(f"{n} nodes cannot share a ring of {q} positions")
    enough_nodes = n > target_n_val or (n == target_n_val and q % target_n_val == 0)
    if enough_nodes:
        return _sequential_claim(members, q, target_n_val)
    owners = [members[0]] * q
    for node in members:
        # claim_until_balanced: claim while the node owns fewer than Q div N.
        for _ in range(q + 1):
            if owners.count(node) >= q // n:
                break
            owners = _choose_claim_v2_few(owners, members, node, q, target_n_val)
        else:  # pragma: no cover - riak_core would loop for ever
            raise ValueError(f"claim for {node} does not converge on {q} positions")
    return owners


# -- preflists ----------------------------------------------------------------------------


class PreflistEntry(NamedTuple):
    """One vnode of a preflist.

    Attributes:
        position: the ring position (partition number, 0..Q-1) whose data this holds;
            for a fallback, the position of the down primary it stands in for.
        node: the node that holds it.
        is_primary: True for a primary, False for a fallback.
    """

    position: int
    node: str
    is_primary: bool


class Ring:
    """A ring of ``ring_size`` positions and their owners.

    Args:
        nodes: the cluster's node names; ownership is :func:`claim` of them unless
            ``owners`` is given.
        ring_size: Q, a power of 2.
        owners: optional explicit owner of each position (e.g. read from a real
            cluster), Q entries, each one of ``nodes``.

    Raises:
        ValueError: see :func:`claim`; or ``owners`` of the wrong length or naming a
            node not in ``nodes``.
    """

    def __init__(
        self,
        nodes: Iterable[str],
        ring_size: int = DEFAULT_RING_SIZE,
        *,
        owners: Sequence[str] | None = None,
    ) -> None:
        node_list = sorted(nodes)
        _check_ring_size(ring_size)
        self.ring_size = ring_size
        self.nodes: tuple[str, ...] = tuple(node_list)
        if owners is None:
            self.owners: tuple[str, ...] = tuple(claim(node_list, ring_size))
        else:
            if len(owners) != ring_size:
                raise ValueError(f"owners has {len(owners)} entries, ring_size is {ring_size}")
            unknown = set(owners) - set(node_list)
            if unknown:
                raise ValueError(f"owners names nodes not in the ring: {sorted(unknown)!r}")
            self.owners = tuple(owners)

    def __repr__(self) -> str:
        return f"Ring({list(self.nodes)!r}, ring_size={self.ring_size})"

    def partition_index(self, position: int) -> int:
        """The 160-bit index Riak shows for a position (``position * 2**160 // Q``)."""
        return position * (HASH_SPACE // self.ring_size)

    def key_position(
        self, bucket: str | bytes, key: str | bytes, *, bucket_type: str | bytes | None = None
    ) -> int:
        """The position of a key's first primary on this ring (see :func:`key_position`)."""
        return key_position(bucket, key, bucket_type=bucket_type, ring_size=self.ring_size)

    def preflist(
        self,
        bucket: str | bytes,
        key: str | bytes,
        *,
        bucket_type: str | bytes | None = None,
        n_val: int = 3,
        down: Iterable[str] = (),
    ) -> list[PreflistEntry]:
        """The annotated preflist of a key, as ``riak_core_apl:get_apl_ann`` builds it.

        Args:
            bucket, key, bucket_type: the object's name.
            n_val: number of primaries (1..Q).
            down: nodes that are not up.

        Returns:
            The up primaries in ring order, then one fallback per down primary for as
            long as up nodes remain among the later positions. Fewer than ``n_val``
            entries when too few nodes are up.

        Raises:
            ValueError: n_val outside 1..Q.
        """
        q = self.ring_size
        if not 1 <= n_val <= q:
            raise ValueError(f"n_val must be in 1..{q}, got {n_val}")
        down_set = set(down)
        first = self.key_position(bucket, key, bucket_type=bucket_type)
        walk = [(first + i) % q for i in range(q)]
        result: list[PreflistEntry] = []
        pangs: list[int] = []
        for p in walk[:n_val]:
            if self.owners[p] in down_set:
                pangs.append(p)
            else:
                result.append(PreflistEntry(p, self.owners[p], True))
        fallbacks = iter(walk[n_val:])
        for p in pangs:
            for f in fallbacks:
                if self.owners[f] not in down_set:
                    result.append(PreflistEntry(p, self.owners[f], False))
                    break
            else:
                break
        return result

    def primary_node(
        self, bucket: str | bytes, key: str | bytes, *, bucket_type: str | bytes | None = None
    ) -> str:
        """The owner of a key's first primary position: where the hook routes the key."""
        return self.owners[self.key_position(bucket, key, bucket_type=bucket_type)]
