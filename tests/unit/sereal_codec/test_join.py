"""The compiled ``join_bodies``: N single-item bodies -> one body REFN ARRAY N.

The oracle is the pure-Python decoder: for any list of parts (our encoder's documents
with shared containers, objects and string dedupe; Perl's in
tests/interop/test_perl_join.py), the joined body decodes
to the list of the parts' decodes, sharing included. A part the decoder rejects is
rejected with its index; a part it accepts is never rejected.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sereal_strategies import mutated, same_value, values
from sereal_testlib import core, joined, needs_core, part_of, pure_decode

import sereal_codec as codec
from sereal_codec import tags
from sereal_codec.document import DEFAULT_MAX_DEPTH
from sereal_codec.errors import DepthExceeded, SerealError
from sereal_codec.types import PerlObject, PerlRef

pytestmark = [needs_core]


def encodable(value: Any, **options: Any) -> bytes:
    try:
        return codec.encode(value, **options)
    except SerealError:
        assume(False)
        raise


documents = st.builds(
    lambda v, dedupe, compress: encodable(
        v, dedupe_strings=dedupe, compress=compress, compress_threshold=0
    ),
    values(),
    st.booleans(),
    st.sampled_from([None, None, "zstd", "snappy"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, max_size=8))
def test_join_of_our_documents_decodes_to_the_list_of_decodes(docs: list[bytes]) -> None:
    parts = [part_of(d) for d in docs]
    assert same_value(joined(parts), [pure_decode(p) for p in parts])


# A string long enough that the part after it sits past offset 127 / 16383, so its
# rewritten offsets need longer varints than the ones it was written with.
@pytest.mark.parametrize("pad", [0, 100, 120, 125, 126, 127, 130, 16300, 16380, 16400])
def test_offsets_that_grow_a_varint(pad: int) -> None:
    shared: list[Any] = ["k"]
    event = {"a": "value-x", "b": "value-x", "c": shared, "d": shared, "o": PerlObject("C", [1])}
    event["p"] = PerlObject("C", [2])
    docs = [codec.encode("x" * pad, compress=None), codec.encode(event, compress=None)]
    docs.append(codec.encode([event, event], compress=None))
    parts = [part_of(d) for d in docs]
    assert same_value(joined(parts), [pure_decode(p) for p in parts])


def test_parts_with_offsets_and_pads() -> None:
    # protocol 1 body (0-based offsets from the document start), PADs around items
    body = bytes((tags.PAD, tags.REFN, tags.HASH, 1, 0x61, ord("k"), 0x62, ord("v"), ord("w")))
    copy_key = bytes((0x62, ord("v"), ord("w"), tags.PAD, tags.PAD))
    doc1 = b"=srl\x01\x00" + bytes((tags.REFN, tags.ARRAY, 2)) + copy_key[:3]
    doc1 += bytes((tags.COPY, 9, tags.PAD))
    parts = [(body, 0, len(body), -1), part_of(doc1), (copy_key, 0, len(copy_key), -1)]
    assert joined(parts) == [{"k": "vw"}, ["vw", "vw"], "vw"]


def test_empty_join_and_bytes_like_parts() -> None:
    assert core.join_bodies([]) == bytes((tags.REFN, tags.ARRAY, 0))
    doc = codec.encode({"a": "b"}, compress=None)
    b, pos, end, base = part_of(doc)
    assert (
        joined([(memoryview(b), pos, end, base), (bytearray(b), pos, end, base)])
        == [{"a": "b"}] * 2
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hostile_parts_are_rejected_naming_their_index(data: st.DataObject) -> None:
    docs = data.draw(st.lists(documents, min_size=1, max_size=4))
    parts = [part_of(d) for d in docs]
    i = data.draw(st.integers(0, len(parts) - 1))
    bad = data.draw(mutated(parts[i][0][parts[i][1] : parts[i][2]]))
    parts[i] = (bad, 0, len(bad), -1)
    try:
        expected = [pure_decode(p) for p in parts]
    except SerealError:
        expected = None
    if expected is None:
        with pytest.raises(SerealError) as info:
            core.join_bodies(parts)
        assert getattr(info.value, "index", None) == i
        assert str(info.value).startswith(f"part {i}: ")
    else:  # the decoder accepts it: so must join, with the same values
        assert same_value(joined(parts), expected)


def test_depth_leaves_a_level_for_the_array() -> None:
    def nested(n: int) -> Any:
        v: Any = 1
        for _ in range(n):
            v = [v] if n % 2 else PerlRef(v)
        return v

    for depth in (DEFAULT_MAX_DEPTH - 1, DEFAULT_MAX_DEPTH):
        deep: Any = [1] * 20  # REFN ARRAY: one level, as the decoder counts it
        for _ in range(depth - 1):
            deep = [deep] if len(deep) > 1 else [deep, 2] * 8
        part = part_of(codec.encode(deep, compress=None, max_depth=depth))
        pure_decode(part, depth)
        if depth < DEFAULT_MAX_DEPTH:  # decodes (too deep to compare recursively)
            body = core.join_bodies([part])
            assert len(pure_decode((body, 0, len(body), -1))) == 1
        else:
            with pytest.raises(DepthExceeded) as info:
                core.join_bodies([part, part])
            assert getattr(info.value, "index", None) == 0
    assert core.join_bodies([part_of(codec.encode(nested(5), compress=None))], max_depth=7)
    with pytest.raises(DepthExceeded):
        core.join_bodies([part_of(codec.encode(nested(5), compress=None))], max_depth=5)


def test_bad_arguments() -> None:
    doc = codec.encode(1, compress=None)
    with pytest.raises(TypeError):
        core.join_bodies([[doc, 6, len(doc), 5]])
    with pytest.raises(ValueError, match="part 1"):
        core.join_bodies([part_of(doc), (doc, 6, len(doc) + 1, 5)])
    with pytest.raises(ValueError, match="max_depth"):
        core.join_bodies([], max_depth=0)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, max_size=6), st.data())
def test_whole_documents_as_parts(docs: list[bytes], data: st.DataObject) -> None:
    """bytes parts: uncompressed documents (any header suffix), located in C; others
    (compressed, bad headers) are rejected as SerealError naming their index."""
    raw = [d for d in docs if d[4] >> 4 == 0]
    raw.append(codec.encode({"u": ["v", "v"]}, compress=None, user_header={"h": "v"}))
    raw.append(b"=srl\x01\x00" + bytes((tags.REFN, tags.ARRAY, 2, 0x61, 0x76, tags.COPY, 9)))
    raw.append(
        b"=srl\x02\x02\x01\x00" + bytes((tags.REFN, tags.ARRAY, 2, 0x61, 0x76, tags.COPY, 4))
    )
    data.draw(st.randoms()).shuffle(raw)
    assert same_value(joined(raw), [codec.decode(d) for d in raw])
    bad = [d for d in docs if d[4] >> 4] + [b"", b"=srl", b"=srl\x09\x00\x01", b"xxxxxx\x01"]
    for b in bad:
        i = data.draw(st.integers(0, len(raw)))
        with pytest.raises(SerealError) as info:
            core.join_bodies([*raw[:i], b, *raw[i:]])
        assert getattr(info.value, "index", None) == i


# --- whole documents are joined without the GIL (errors and growth: again with it) ---


def _events(n: int) -> list[bytes]:
    shared: list[Any] = ["tag"]
    return [
        codec.encode(
            {"i": i, "host": "web-12", "path": "/a" * (i % 7), "same": shared, "also": shared},
            dedupe_strings=i % 2 == 0,
        )
        for i in range(n)
    ]


def test_threads_joining_at_once_get_what_one_thread_gets() -> None:
    import threading

    docs = _events(3000)
    expected = core.join_bodies(docs)
    assert same_value(joined(list(docs)), [codec.decode(d) for d in docs])
    results: list[bytes] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(5):
            body = core.join_bodies(docs)
            with lock:
                results.append(body)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 20 and all(r == expected for r in results)


@pytest.mark.parametrize("bad_at", [0, 1, 57, 199])
def test_a_bad_document_in_a_long_run_is_named(bad_at: int) -> None:
    docs = _events(200)
    docs[bad_at] = docs[bad_at][:-2]  # truncated body
    with pytest.raises(SerealError, match=f"^part {bad_at}: ") as info:
        core.join_bodies(docs)
    assert info.value.index == bad_at  # type: ignore[attr-defined]


def test_mixed_runs_of_documents_and_opened_bodies() -> None:
    docs = _events(40)
    parts: list[Any] = [d if i % 9 else part_of(d) for i, d in enumerate(docs)]
    assert core.join_bodies(parts) == core.join_bodies(docs)
    # a header error (compressed whole document) is raised with the GIL, naming the part
    zipped = codec.encode({"x": "y" * 200}, compress="zstd", compress_threshold=0)
    with pytest.raises(SerealError, match=r"^part 3: .*compressed document"):
        core.join_bodies([*docs[:3], zipped, *docs[3:]])
