from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from eventstore.ring import (
    HASH_SPACE,
    PreflistEntry,
    Ring,
    bkey_term,
    claim,
    key_hash,
    key_position,
)

VECTORS = Path(__file__).parents[2] / "vectors" / "ring_preflists.json"
KEY = "1413813813:1:type1:subtype1:0"


def dev(n: int) -> list[str]:
    return [f"dev{i}@127.0.0.1" for i in range(1, n + 1)]


def test_issue_vectors() -> None:
    assert key_hash("events", KEY) // 2**154 == 35
    assert key_position("events", KEY) == 36
    assert key_position("events", KEY, bucket_type="default") == 36
    assert key_position(b"events", KEY.encode(), bucket_type=b"default") == 36
    assert key_position("events", KEY, bucket_type="mytype") == 44
    ring = Ring(dev(5))
    assert [e.position for e in ring.preflist("events", KEY)] == [36, 37, 38]
    typed = ring.preflist("events", KEY, bucket_type="mytype")
    assert [e.position for e in typed] == [44, 45, 46]
    assert all(e.is_primary for e in typed)


def test_term_format() -> None:
    # 131, SMALL_TUPLE_EXT arity 2, BINARY_EXT len "b", BINARY_EXT len "k"
    assert bkey_term("b", "k") == bytes([131, 104, 2, 109, 0, 0, 0, 1, 98, 109, 0, 0, 0, 1, 107])
    typed = bkey_term("b", "k", bucket_type="t")
    assert typed[:4] == bytes([131, 104, 2, 104])
    assert bkey_term("b", "é") == bkey_term("b", "é".encode())


def test_position_is_just_after_the_hash() -> None:
    for q in (8, 64, 1024):
        h = key_hash("events", KEY)
        assert key_position("events", KEY, ring_size=q) == (h // (HASH_SPACE // q) + 1) % q


@pytest.mark.parametrize("bad", [0, 3, 48, -8])
def test_ring_size_must_be_power_of_two(bad: int) -> None:
    with pytest.raises(ValueError, match="power of 2"):
        key_position("b", "k", ring_size=bad)


def test_shared_vectors() -> None:
    data = json.loads(VECTORS.read_text())
    for r in data["rings"]:
        assert claim(r["nodes"], r["ring_size"]) == r["owners"], r["ring_size"]
    assert len(data["cases"]) > 300
    for c in data["cases"]:
        ring = Ring(c["nodes"], c["ring_size"])
        key = bytes.fromhex(c["key_hex"])
        assert (
            key_hash(c["bucket"], key, bucket_type=c["bucket_type"])
            // (HASH_SPACE // c["ring_size"])
            == c["hash_div"]
        )
        got = ring.preflist(
            c["bucket"], key, bucket_type=c["bucket_type"], n_val=c["n_val"], down=c["down"]
        )
        assert [list(e) for e in got] == c["expected"], c


def test_vectors_hold_the_issue_positions() -> None:
    data = json.loads(VECTORS.read_text())
    hits = {
        c["bucket_type"]: [e[0] for e in c["expected"]]
        for c in data["cases"]
        if c["key_hex"] == KEY.encode().hex()
        and c["bucket"] == "events"
        and c["ring_size"] == 64
        and c["n_val"] == 3
        and not c["down"]
    }
    assert hits[None] == [36, 37, 38]
    assert hits["mytype"] == [44, 45, 46]


@pytest.mark.parametrize("n", [4, 5, 6, 8, 16])
def test_round_robin_when_no_tail_violation(n: int) -> None:
    for q in (8, 16, 32, 64, 128, 256, 512, 1024):
        if n > q or not (q % n == 0 or q % n >= 4):
            continue
        nodes = dev(n)
        assert claim(nodes, q) == [sorted(nodes)[i % n] for i in range(q)]


def test_tail_violation_is_solved() -> None:
    # Q=64, N=7: 64 % 7 == 1 would put dev1 at 63 and 0, within 4 of itself.
    owners = claim(dev(7), 64)
    assert Counter(owners) == Counter(dict(zip(dev(7), [10, 9, 9, 9, 9, 9, 9], strict=True)))
    for i in range(64):
        window = [owners[(i + j) % 64] for j in range(4)]
        assert len(set(window)) == 4, i


def test_small_clusters_follow_claim_v2() -> None:
    assert claim(dev(1), 8) == dev(1) * 8
    a, b = dev(2)
    assert claim(dev(2), 16) == [a, b, b, a] * 4
    # Three nodes: not round robin; the rounding extra goes by Erlang dict order.
    three = claim(dev(3), 32)
    assert Counter(three) == Counter({dev(3)[0]: 11, dev(3)[1]: 10, dev(3)[2]: 11})


def test_node_order_does_not_matter() -> None:
    assert claim(dev(5)[::-1], 64) == claim(dev(5), 64)


@pytest.mark.parametrize(("nodes", "q"), [([], 64), (["a", "a"], 64), (["ü"], 64), (dev(9), 8)])
def test_claim_rejects(nodes: list[str], q: int) -> None:
    with pytest.raises(ValueError):
        claim(nodes, q)


def test_fallbacks_take_the_next_up_node() -> None:
    ring = Ring(dev(5))
    full = ring.preflist("events", KEY)
    assert full == [
        PreflistEntry(36, "dev2@127.0.0.1", True),
        PreflistEntry(37, "dev3@127.0.0.1", True),
        PreflistEntry(38, "dev4@127.0.0.1", True),
    ]
    one_down = ring.preflist("events", KEY, down=["dev3@127.0.0.1"])
    # position 39 is dev5's: it stands in for 37
    assert one_down == [full[0], full[2], PreflistEntry(37, "dev5@127.0.0.1", False)]
    # with dev5 down too, 39 is skipped and 40 (dev1) stands in
    two_down = ring.preflist("events", KEY, down=["dev3@127.0.0.1", "dev5@127.0.0.1"])
    assert two_down[-1] == PreflistEntry(37, "dev1@127.0.0.1", False)


def test_all_down_gives_empty_preflist() -> None:
    ring = Ring(dev(4), 8)
    assert ring.preflist("b", "k", down=dev(4)) == []


def test_explicit_owners() -> None:
    owners = ["x"] * 7 + ["y"]
    ring = Ring(["x", "y"], 8, owners=owners)
    assert ring.owners == tuple(owners)
    with pytest.raises(ValueError):
        Ring(["x"], 8, owners=owners)
    with pytest.raises(ValueError):
        Ring(["x", "y"], 8, owners=owners[:-1])


def test_n_val_bounds() -> None:
    ring = Ring(dev(4), 8)
    with pytest.raises(ValueError):
        ring.preflist("b", "k", n_val=0)
    assert len(ring.preflist("b", "k", n_val=8)) == 8
