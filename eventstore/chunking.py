"""Cutting events, or an existing Sereal array blob, into stored chunks of bounded size.

A chunk is what we store under one chunk key: a **blob** (a Sereal document whose body is
an array of events, plus the checksum postfix of :mod:`eventstore.blob`). Each chunk is a
valid standalone document; the chunks' arrays concatenated, in order, are the input.

**The limit** ``chunk_max_bytes`` (default 500 000) applies to the stored bytes:
compressed document plus postfix. Compression makes the size of a group of events
unknowable before encoding it, so the policy is *estimate, encode, re-split*:

1. Weigh every element: its uncompressed encoded size (an event encoded alone, or the
   element's byte span in the blob's body).
2. Encode everything as one chunk; if it fits, done. Otherwise the ratio stored bytes /
   total weight estimates what a group will cost; cut the elements greedily into groups
   whose estimated cost is at most ``FILL`` (90 %) of the limit.
3. Encode each group. A group over the limit is split in two halves by count and each
   half encoded again (binary split) until every chunk fits. A group of one element
   over the limit raises :class:`EventTooLarge` with its index and stored size.

No chunk ever exceeds the limit; an estimate that is too low costs one more encode of the
offending group, never an oversized chunk. Pure logic, no I/O.

**The body limit** ``max_body_bytes`` (default :data:`CHUNK_MAX_BODY_BYTES`, 8 MiB)
bounds a chunk's *decompressed* body the same way (groups by weight, a chunk over it
split in two), so that readers can cap what a chunk may decode to
(:class:`eventstore.blob.DecodeLimits`, whose floor is twice this) without ever refusing
one we wrote: near-identical events compress a thousandfold, so 500 KB stored could
otherwise hold gigabytes. A single element is never split, whatever its body.

:func:`split_blob` does the same for a blob written by an external aggregator (Perl's
Sereal::Encoder, dedupe on, zstd/zlib/snappy/raw) *without decoding it to Python
objects*: the compiled splitter (``sereal_codec._sereal``) walks the body at element
boundaries and rewrites the back-references (COPY) that would cross a cut.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sereal_codec as sereal
from eventstore.blob import add_postfix, pack_blob, postfix_length, verify_postfix
from eventstore.errors import EventTooLarge, NotAnArrayBlob, SplitterUnavailable
from sereal_codec import compression, tags
from sereal_codec import document as sereal_document
from sereal_codec.errors import SerealError

__all__ = [
    "CHUNK_MAX_BODY_BYTES",
    "CHUNK_MAX_BYTES",
    "FILL",
    "Chunk",
    "chunk_documents",
    "chunk_events",
    "join_available",
    "split_blob",
    "splitter_available",
]

#: Default limit of a stored chunk, in bytes (the seed's 500 KB).
CHUNK_MAX_BYTES = 500_000
#: Default limit of a chunk's decompressed body, bytes: half of the readers' floor
#: (``eventstore.blob.DECODED_FLOOR_BYTES``); realistic 500 KB chunks hold ~1.3 MB.
CHUNK_MAX_BODY_BYTES = 8 * 2**20
#: Fraction of the limit the estimate aims at, leaving room for estimation error.
FILL = 0.9
#: Default cap on a blob's decompressed body in :func:`split_blob` (as the codec's).
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Chunk:
    """One stored chunk.

    Attributes:
        data: the blob bytes (Sereal document + checksum postfix), ``len(data) <=
            chunk_max_bytes``.
        start, stop: the chunk holds elements ``[start, stop)`` of the input, 0-based.
    """

    data: bytes
    start: int
    stop: int

    @property
    def count(self) -> int:
        """Number of events in the chunk."""
        return self.stop - self.start


def _check_limit(chunk_max_bytes: int) -> None:
    if not isinstance(chunk_max_bytes, int) or chunk_max_bytes <= postfix_length() + 16:
        raise ValueError(f"chunk_max_bytes must be an int > 32, got {chunk_max_bytes!r}")


def _groups(weights: Sequence[int], budget: float) -> list[tuple[int, int]]:
    """Greedy cut of elements into ranges whose total weight stays within ``budget``."""
    ranges: list[tuple[int, int]] = []
    start, total = 0, 0
    for i, w in enumerate(weights):
        if i > start and total + w > budget:
            ranges.append((start, i))
            start, total = i, 0
        total += w
    if start < len(weights):
        ranges.append((start, len(weights)))
    return ranges


def _body_bytes(blob: bytes) -> int:
    """The decompressed body size a chunk's header claims (a few header bytes read)."""
    return sereal_document.body_size(blob[: len(blob) - postfix_length()])


def _fits(
    blob: bytes,
    chunk_max_bytes: int,
    max_body_bytes: int,
    body_bytes: Callable[[bytes], int] = _body_bytes,
) -> bool:
    return len(blob) <= chunk_max_bytes and body_bytes(blob) <= max_body_bytes


def _build(
    ranges: list[tuple[int, int]],
    make: Callable[[int, int], bytes],
    chunk_max_bytes: int,
    *,
    max_body_bytes: int,
    body_bytes: Callable[[bytes], int] = _body_bytes,
) -> list[Chunk]:
    """Encode each range; binary-split any that comes out over a limit."""
    out: list[Chunk] = []
    stack = list(reversed(ranges))
    while stack:
        a, b = stack.pop()
        data = make(a, b)
        if len(data) > chunk_max_bytes and b - a == 1:
            raise EventTooLarge(a, len(data), chunk_max_bytes)
        if b - a == 1 or _fits(data, chunk_max_bytes, max_body_bytes, body_bytes):
            out.append(Chunk(data, a, b))
        else:
            mid = (a + b) // 2
            stack.append((mid, b))
            stack.append((a, mid))  # popped first: output stays in input order
    return out


def _plan(
    weights: Sequence[int],
    whole: bytes,
    make: Callable[[int, int], bytes],
    chunk_max_bytes: int,
    *,
    max_body_bytes: int,
    body_bytes: Callable[[bytes], int] = _body_bytes,
) -> list[Chunk]:
    n = len(weights)
    if _fits(whole, chunk_max_bytes, max_body_bytes, body_bytes):
        return [Chunk(whole, 0, n)]
    ratio = len(whole) / max(sum(weights), 1)
    budget = min(chunk_max_bytes * FILL / ratio, max_body_bytes * FILL)
    return _build(
        _groups(weights, budget),
        make,
        chunk_max_bytes,
        max_body_bytes=max_body_bytes,
        body_bytes=body_bytes,
    )


def chunk_events(
    events: Sequence[Any],
    *,
    chunk_max_bytes: int = CHUNK_MAX_BYTES,
    compress: str | None = "zstd",
    level: int | None = None,
    dedupe_strings: bool = True,
    protocol: int | None = None,
    max_body_bytes: int = CHUNK_MAX_BODY_BYTES,
) -> list[Chunk]:
    """Cut a list of events into blobs of at most ``chunk_max_bytes`` stored bytes.

    Args:
        events: the events, in order (usually dicts).
        chunk_max_bytes: limit of one stored chunk (compressed document + postfix).
        compress, level, dedupe_strings, protocol: Sereal encoder options, see
            :func:`eventstore.blob.pack_blob`.
        max_body_bytes: limit of a chunk's decompressed body (module docstring).

    Returns:
        The chunks in order; their events concatenated are ``events``. No chunk for an
        empty list (an epoch without events has nothing to store).

    Raises:
        EventTooLarge: one event alone takes more than ``chunk_max_bytes`` stored.
        sereal_codec.errors.SerealEncodeError: an event cannot be encoded.
        ValueError: ``chunk_max_bytes`` too small to hold any blob.
    """
    _check_limit(chunk_max_bytes)
    if not events:
        return []
    items = list(events)
    opts: dict[str, Any] = {"compress": compress, "dedupe_strings": dedupe_strings}
    if level is not None:
        opts["level"] = level
    if protocol is not None:
        opts["protocol"] = protocol

    def make(a: int, b: int) -> bytes:
        return pack_blob(items[a:b], **opts)

    whole = make(0, len(items))
    if _fits(whole, chunk_max_bytes, max_body_bytes):
        return [Chunk(whole, 0, len(items))]
    raw = {k: v for k, v in opts.items() if k not in ("compress", "level")}
    weights = [len(sereal.encode(e, compress=None, **raw)) for e in items]
    return _plan(weights, whole, make, chunk_max_bytes, max_body_bytes=max_body_bytes)


# -- splitting an existing blob ----------------------------------------------------------


def splitter_available() -> bool:
    """True when the compiled splitter primitives are built and implemented."""
    try:
        # The compiled core is optional at import time (built by setup.py).
        from sereal_codec._sereal import array_layout  # noqa: PLC0415
    except ImportError:
        return False
    probe = bytes((tags.REFN, tags.ARRAY, 0))  # the body of []
    try:
        array_layout(probe, 0, len(probe), -1)
    except NotImplementedError:  # the module is built but the splitter is a stub
        return False
    return True


def _open_blob(data: bytes, cap: int) -> tuple[sereal_document.Layout, bytes, int, int]:
    """The layout of a blob's document and its body (decompressed by the document
    layer, at most ``cap`` bytes) as ``(layout, buffer, pos, base)``."""
    try:
        layout = sereal_document.read_layout(data)
    except SerealError as e:
        raise NotAnArrayBlob(f"bad Sereal header: {e}") from e
    if layout.protocol < 2:  # protocol 1 counts offsets from the document's start
        raise NotAnArrayBlob(f"protocol {layout.protocol} documents cannot be split (need 2+)")
    try:
        buf, pos, base = sereal_document.open_body(data, layout, max_decompressed_size=cap)
    except SerealError as e:
        raise NotAnArrayBlob(f"body does not decompress: {e}") from e
    return layout, buf, pos, base


#: ``compress=`` choices of the splitter: the document layer's, and None.
_COMPRESSION = (None, *compression.METHODS)


def split_blob(
    blob: bytes | memoryview,
    *,
    key: str | None = None,
    chunk_max_bytes: int = CHUNK_MAX_BYTES,
    compress: str | None = "zstd",
    level: int | None = None,
    max_decompressed_size: int = MAX_DECOMPRESSED_BYTES,
    max_body_bytes: int = CHUNK_MAX_BODY_BYTES,
) -> list[Chunk]:
    """Split a Sereal array blob into chunks without decoding its elements.

    Args:
        blob: a Sereal document (protocol 2+) whose body is an array (``REFN ARRAY``,
            ``ARRAY`` or ``ARRAYREF_n``), compressed or not, with or without our
            checksum postfix (verified when present).
        key: the blob's name, for errors.
        chunk_max_bytes: limit of one stored chunk (compressed document + postfix).
        compress, level: compression of the chunks ("zstd", "zlib", "snappy", None).
        max_decompressed_size: cap on the input's decompressed body, bytes.
        max_body_bytes: limit of a chunk's decompressed body (module docstring).

    Returns:
        Chunks whose arrays, concatenated, are the blob's array element for element
        (back-references that would cross a cut are rewritten, so each is standalone).

    Raises:
        SplitterUnavailable: the compiled splitter is not built.
        NotAnArrayBlob: not a Sereal document, unsupported protocol or compression, or
            its body is not an array.
        EventTooLarge: one element alone exceeds ``chunk_max_bytes`` as a chunk.
        ChecksumMismatch: the blob has our postfix and it does not match.
    """
    if not splitter_available():
        raise SplitterUnavailable("sereal_codec._sereal.array_layout/extract_array are not built")
    from sereal_codec._sereal import array_layout, extract_array  # noqa: PLC0415

    _check_limit(chunk_max_bytes)
    if compress not in _COMPRESSION:
        raise ValueError(f"compress must be one of {sorted(map(str, _COMPRESSION))}")
    data = bytes(verify_postfix(blob, key, required=False))
    layout, body, pos, base = _open_blob(data, max_decompressed_size)
    if body is not data:
        # Opened: only the header is needed now (the chunks keep its suffix). Holding
        # the compressed input through the split cost the next split ~800 page faults
        # (glibc trims the heap top the freed body leaves: +20% CPU on a zlib blob).
        data = data[: layout.body_offset]
    end = len(body)
    try:
        bounds: list[int] = array_layout(body, pos, end, base)
    except ValueError as e:
        # e names what: not an array, or a SerealError (e.g. DepthExceeded past the
        # codec's MAX_DEPTH_CAP levels, with the offset), the cause kept.
        raise NotAnArrayBlob(f"blob {key!r}: body does not split as an array: {e}") from e
    count = len(bounds) - 1
    if count == 0:
        return []
    weights = [bounds[i + 1] - bounds[i] for i in range(count)]

    def make(a: int, b: int) -> bytes:
        part = extract_array(body, pos, end, base, a, b)
        doc = sereal_document.rewrap_body(part, data, layout, compress=compress, level=level)
        return add_postfix(doc)

    whole = make(0, count)
    return _plan(weights, whole, make, chunk_max_bytes, max_body_bytes=max_body_bytes)


# -- joining single-event documents -----------------------------------------------------


_TYPE_BYTE = operator.itemgetter(sereal_document.VERSION_TYPE_AT)
_COMPRESSED_FROM = sereal_document.UNCOMPRESSED_BELOW


def join_available() -> bool:
    """True when the compiled ``join_bodies`` is built."""
    try:
        from sereal_codec._sereal import join_bodies  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def chunk_documents(
    docs: Sequence[bytes],
    *,
    chunk_max_bytes: int = CHUNK_MAX_BYTES,
    compress: str | None = "zstd",
    level: int | None = None,
    ratio: float | None = None,
    on_bad: Callable[[int, SerealError], None] | None = None,
    max_decompressed_size: int = MAX_DECOMPRESSED_BYTES,
    max_body_bytes: int = CHUNK_MAX_BODY_BYTES,
) -> list[Chunk]:
    """Cut single-value Sereal documents into chunks without decoding them.

    Each chunk's array holds the documents' values in order: ``decode`` of the chunks,
    concatenated, is ``[decode(d) for d in docs]`` (minus the documents given to
    ``on_bad``). The bodies are joined by the compiled ``join_bodies`` (validated as
    the decoder would, back-references rewritten) and wrapped with the document
    layer's compression; without the compiled core the documents are decoded and
    handed to :func:`chunk_events`.

    Sizes: a chunk's stored size is estimated as ``ratio`` x its bodies' bytes; runs
    are cut to ``FILL`` of the limit by that estimate, and a run that comes out over
    the limit is split in two until it fits. With ``ratio`` None a first chunk-sized
    run is made and measured (the caller should learn a ratio from the result and pass
    it next time: ``sum(len(c.data)) / sum(len(d))`` is close enough).

    Args:
        docs: Sereal documents (any protocol and compression), one value each.
        chunk_max_bytes, compress, level: as for :func:`chunk_events`.
        ratio: expected stored bytes per body byte, or None to measure.
        on_bad: called with (index in ``docs``, error) for a document that does not
            decode; it is left out. None: the error is raised (with an ``index``
            attribute).
        max_decompressed_size: cap on one document's decompressed body.
        max_body_bytes: limit of a chunk's decompressed body (module docstring).

    Returns:
        The chunks; ``start``/``stop`` index the documents that were kept (``docs``
        without the ones given to ``on_bad``), in order.

    Raises:
        EventTooLarge: one document alone takes more than ``chunk_max_bytes`` stored
            (its ``index`` is its position in ``docs``).
        SerealError: a bad document and no ``on_bad``.
        ValueError: bad options.
    """
    _check_limit(chunk_max_bytes)
    if not join_available():
        return _chunk_documents_decoded(
            docs, chunk_max_bytes, compress, level, on_bad, max_body_bytes=max_body_bytes
        )
    from sereal_codec._sereal import join_bodies  # noqa: PLC0415

    def bad(i: int, e: SerealError) -> None:
        if on_bad is None:
            e.index = i  # type: ignore[attr-defined]
            raise e
        on_bad(i, e)

    # An uncompressed document goes to join_bodies as it is (it finds the body itself);
    # a compressed one is opened here. Weights: the bodies' sizes.
    parts: list[bytes | tuple[bytes, int, int, int]] = list(docs)
    weights = list(map(len, parts))
    dropped: set[int] = set()
    try:  # the version/type byte of each document, in C; any compressed?
        kinds = list(map(_TYPE_BYTE, docs))
        compressed = (
            [i for i, k in enumerate(kinds) if k >= _COMPRESSED_FROM]
            if max(kinds, default=0) >= _COMPRESSED_FROM
            else []
        )
    except IndexError:  # a document shorter than 5 bytes (join_bodies rejects it)
        at, low = sereal_document.VERSION_TYPE_AT, bytes((_COMPRESSED_FROM,))
        compressed = [i for i, d in enumerate(docs) if d[at : at + 1] >= low]
    for i in compressed:
        try:
            buf, pos, base = sereal_document.open_document(
                docs[i], max_decompressed_size=max_decompressed_size
            )
        except SerealError as e:
            dropped.add(i)
            bad(i, e)
            continue
        parts[i] = (buf, pos, len(buf), base)
        weights[i] = len(buf) - pos

    def make(a: int, b: int) -> bytes:
        while True:
            keep = [k for k in range(a, b) if k not in dropped] if dropped else range(a, b)
            try:
                body = join_bodies([parts[k] for k in keep] if dropped else parts[a:b])
            except SerealError as e:
                k = keep[getattr(e, "index", 0)]
                dropped.add(k)
                bad(k, e)
                continue
            doc = sereal_document.wrap_body(body, compress=compress, level=level)
            return add_postfix(doc)

    n = len(parts)
    if n == 0:
        return []
    if ratio is None:
        # Measure on a first run the size of a chunk of raw bodies (rarely wasted: a
        # small input is then already done).
        first = _groups(weights, chunk_max_bytes)[0]
        sample = make(*first)
        if first == (0, n) and _fits(sample, chunk_max_bytes, max_body_bytes):
            made = [Chunk(sample, 0, n)]
            return _renumber(made, dropped, n)
        kept_weight = sum(weights[k] for k in range(*first) if k not in dropped)
        ratio = len(sample) / max(kept_weight, 1)
    budget = min(chunk_max_bytes * FILL / max(ratio, 1e-3), max_body_bytes * FILL)
    made = _build(_groups(weights, budget), make, chunk_max_bytes, max_body_bytes=max_body_bytes)
    return _renumber(made, dropped, n)


def _renumber(chunks: list[Chunk], dropped: set[int], n: int) -> list[Chunk]:
    """Chunk ranges over the parts -> ranges over the kept parts."""
    if not dropped:
        return chunks
    before = [0] * (n + 1)
    for k in range(n):
        before[k + 1] = before[k] + (k not in dropped)
    out = [Chunk(c.data, before[c.start], before[c.stop]) for c in chunks]
    return [c for c in out if c.stop > c.start]


def _chunk_documents_decoded(
    docs: Sequence[bytes],
    chunk_max_bytes: int,
    compress: str | None,
    level: int | None,
    on_bad: Callable[[int, SerealError], None] | None,
    *,
    max_body_bytes: int,
) -> list[Chunk]:
    events: list[Any] = []
    for i, doc in enumerate(docs):
        try:
            events.append(sereal.decode(doc))
        except SerealError as e:
            if on_bad is None:
                e.index = i  # type: ignore[attr-defined]
                raise
            on_bad(i, e)
    return chunk_events(
        events,
        chunk_max_bytes=chunk_max_bytes,
        compress=compress,
        level=level,
        max_body_bytes=max_body_bytes,
    )
