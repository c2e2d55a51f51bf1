"""Our key hash against a real Erlang VM: crypto:hash(sha, term_to_binary(Term)).

Needs ``erl`` (Debian: erlang-nox). Missing ``erl`` fails the test: the ring's contract is
"exactly as Riak computes it", and only Erlang can say what that is.
"""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from eventstore.ring import bkey_term, key_hash, key_position


def _erl_binary(data: bytes) -> str:
    return "<<" + ",".join(str(b) for b in data) + ">>"


def _cases() -> list[tuple[bytes | None, bytes, bytes]]:
    rng = random.Random(20141020)
    cases: list[tuple[bytes | None, bytes, bytes]] = [
        (None, b"events", b"1413813813:1:type1:subtype1:0"),
        (b"mytype", b"events", b"1413813813:1:type1:subtype1:0"),
        (None, b"", b""),
        (b"t", b"b", bytes(300)),  # a key longer than 255 bytes
        (None, b"events", "café:ü".encode()),
    ]
    for i in range(300):
        bucket_type = None if i % 3 == 0 else rng.choice([b"events", b"epochs", b"mytype"])
        bucket = rng.choice([b"events", b"epochs", b"top_urls"])
        if i % 5 == 0:
            key = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))
        else:
            key = f"{1413813813 + i}:{i % 4}:type{i % 7}:sub{i % 3}:{i % 11}".encode()
        cases.append((bucket_type, bucket, key))
    return cases


def test_hash_matches_erlang() -> None:
    erl = shutil.which("erl")
    if erl is None:
        pytest.fail("erl is not installed (apt-get install erlang-nox)")
    cases = _cases()
    terms = []
    for bucket_type, bucket, key in cases:
        b = _erl_binary(bucket)
        if bucket_type is not None:
            b = "{" + _erl_binary(bucket_type) + "," + b + "}"
        terms.append("{" + b + "," + _erl_binary(key) + "}")
    script = (
        "Terms = [" + ",".join(terms) + "],"
        '[io:format("~s ~s~n", [binary:encode_hex(term_to_binary(T)),'
        " binary:encode_hex(crypto:hash(sha, term_to_binary(T)))]) || T <- Terms],"
        "halt()."
    )
    out = subprocess.run(
        [erl, "-noshell", "-eval", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    assert len(out) == 2 * len(cases)
    for i, (bucket_type, bucket, key) in enumerate(cases):
        term_hex, sha_hex = out[2 * i], out[2 * i + 1]
        assert bkey_term(bucket, key, bucket_type=bucket_type).hex() == term_hex.lower()
        assert key_hash(bucket, key, bucket_type=bucket_type) == int(sha_hex, 16)


def test_issue_vectors_against_erlang() -> None:
    # The issue's numbers: h div 2^154 = 35 at Q=64; in bucket type mytype, 43.
    assert key_hash("events", "1413813813:1:type1:subtype1:0") >> 154 == 35
    assert key_position("events", "1413813813:1:type1:subtype1:0") == 36
    assert key_position("events", "1413813813:1:type1:subtype1:0", bucket_type="mytype") == 44
