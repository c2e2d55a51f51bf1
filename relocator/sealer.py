"""Sealing: a closed group (or a spool blob) becomes a :class:`~relocator.batch.Batch`.

The documents of each (type, subtype) of a group are joined, without decoding them, by
:func:`eventstore.chunking.chunk_documents` into blobs of at most ``chunk_max_bytes``
(zstd, checksum postfix; the compiled ``join_bodies`` validates each document as the
decoder would and rewrites its back-references); a spool blob is cut by
:func:`eventstore.chunking.split_blob` without decoding when the compiled splitter is
built, else decoded and re-chunked. Chunk numbers come
from a freshly reserved batch sequence number (``batch.chunk_number``).

Before joining, each event's document is screened (``wire.event_verdicts``, in C): a
compressed body is opened here with ``max_event_bytes`` as the cap (its claimed size is
checked before anything is inflated) and re-wrapped as an uncompressed document; an
event whose body is over the cap is dropped as ``too_large``, one that is not a hash as
``not_a_dict``. Intake already refuses what it can see from a frame's first bytes; the
sealer sees what intake cannot (the items of compressed bodies) and frames journaled
before an upgrade. Events that cannot be decoded or are too big for a chunk on their
own are dropped as ``undecodable`` / ``oversized``. Every drop is counted in
``relocator_events_dropped_total{reason}`` and logged (rate-limited) with the epoch, dc
and type; the other events of the group are sealed as usual. Pure CPU work apart from
reserving the sequence number.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

import sereal_codec as sereal
from eventstore.blob import add_postfix, has_postfix, postfix_length, verify_postfix
from eventstore.chunking import (
    MAX_DECOMPRESSED_BYTES,
    Chunk,
    chunk_documents,
    chunk_events,
    split_blob,
    splitter_available,
)
from eventstore.errors import EventStoreError, EventTooLarge
from eventstore.names import ChunkKey
from relocator import defaults
from relocator.aggregator import Group
from relocator.batch import Batch, batch_id, chunk_number
from relocator.errors import BadSpoolFile
from relocator.metrics import Metrics
from relocator.rejects import Rejections
from relocator.wire import EV_COMPRESSED, EV_NOT_A_DICT, EV_OK, EV_TOO_LARGE, event_verdicts
from sereal_codec import compression
from sereal_codec import document as sereal_document
from sereal_codec.errors import SerealError, SizeLimitExceeded

log = logging.getLogger(__name__)


class Sealer:
    """Turns groups and spool blobs into batches with fixed keys and bytes."""

    def __init__(
        self,
        *,
        writer_id: int,
        reserve_seq: Callable[[], int],
        chunk_max_bytes: int,
        compress: str | None,
        metrics: Metrics,
        max_event_bytes: int = defaults.MAX_EVENT_BYTES,
    ) -> None:
        self._writer_id = writer_id
        self._reserve_seq = reserve_seq
        self._limit = chunk_max_bytes
        self._compress = compress
        self._metrics = metrics
        self._max_event_bytes = max_event_bytes
        self._rejections = Rejections(metrics, "sealer")
        self._ratio: dict[tuple[str, str], float] = {}

    def seal(self, group: Group) -> Batch:
        """Chunk one group (its documents are joined, never decoded)."""
        return self.seal_all([group])[0]

    def seal_all(self, groups: list[Group], pool: Executor | None = None) -> list[Batch]:
        """Chunk groups, each (type, subtype) of each group as one job on ``pool`` (the
        joins and zstd of different kinds overlap; zstd releases the GIL). Sequence
        numbers are reserved here, in order."""
        jobs: list[tuple[Group, int, list[tuple[tuple[str, str], Future[list[Chunk]]]]]] = []
        for group in groups:
            seq = self._reserve_seq()
            kinds = []
            for kind, docs in sorted(group.docs.items()):
                args = (docs, group.epoch, group.dc, kind)
                future: Future[list[Chunk]]
                if pool is None:
                    future = Future()
                    future.set_result(self._chunks(*args))
                else:
                    future = pool.submit(self._chunks, *args)
                kinds.append((kind, future))
            jobs.append((group, seq, kinds))
        return [self._batch(group, seq, kinds) for group, seq, kinds in jobs]

    def _batch(
        self,
        group: Group,
        seq: int,
        kinds: list[tuple[tuple[str, str], Future[list[Chunk]]]],
    ) -> Batch:
        keys: list[ChunkKey] = []
        values: list[bytes] = []
        counts: list[int] = []
        for (type_, subtype), future in kinds:
            for i, ch in enumerate(future.result()):
                number = chunk_number(self._writer_id, seq, i)
                keys.append(ChunkKey(group.epoch, group.dc, type_, subtype, number))
                values.append(ch.data)
                counts.append(ch.count)
        return Batch(
            id=batch_id(self._writer_id, seq),
            epoch=group.epoch,
            dc=group.dc,
            keys=tuple(keys),
            values=tuple(values),
            events=tuple(counts),
            positions=group.positions,
            late=group.late,
            sealed_at=time.time(),
            segments=frozenset(group.segments),
        )

    def _chunks(self, docs: list[bytes], epoch: int, dc: str, kind: tuple[str, str]) -> list[Chunk]:
        """Join the documents of one (type, subtype) into chunks.

        The stored/document ratio is learnt per (type, subtype) from the chunks made so
        far and given to ``chunk_documents`` as its size estimate (a run that comes out
        too big is split again there). Undecodable documents are dropped and counted; an
        event too big for a chunk of its own is dropped and the rest chunked again.
        """
        type_ = kind[0]

        bad: list[int] = []

        def undecodable(index: int, e: SerealError) -> None:
            bad.append(index)
            self._rejections.add("undecodable", 1, f"epoch={epoch} dc={dc} type={type_}: {e}")

        docs = self._screen(docs, f"epoch={epoch} dc={dc} type={type_}")
        while True:
            try:
                chunks = chunk_documents(
                    docs,
                    chunk_max_bytes=self._limit,
                    compress=self._compress,
                    ratio=self._ratio.get(kind),
                    on_bad=undecodable,
                    max_decompressed_size=self._max_event_bytes,
                )
            except EventTooLarge as e:
                self._rejections.add(
                    "oversized",
                    1,
                    f"epoch={epoch} dc={dc} type={type_}: {e.size_bytes} B, more than a chunk",
                )
                gone = {*bad, e.index}  # chunk the rest again, without re-counting
                docs = [d for i, d in enumerate(docs) if i not in gone]
                bad.clear()
                continue
            self._learn(kind, sum(map(len, docs)), chunks)
            return chunks

    def _screen(self, docs: list[bytes], where: str) -> list[bytes]:
        """The documents to join: compressed ones opened (capped at max_event_bytes)
        and re-wrapped uncompressed; too large and non-hash events left out, counted."""
        cap = self._max_event_bytes
        verdicts = event_verdicts(docs, cap)
        if verdicts.count(EV_OK) == len(verdicts):  # the common case: nothing to do
            return list(docs)
        out: list[bytes] = []
        for given, first in zip(docs, verdicts, strict=True):
            doc, verdict = given, first
            if first == EV_COMPRESSED:
                try:
                    doc = _uncompressed(given, cap)
                except SizeLimitExceeded as e:
                    self._rejections.add("too_large", 1, f"{where}: {e}")
                    continue
                except SerealError:
                    pass  # chunk_documents names it and drops it as undecodable
                else:
                    verdict = event_verdicts([doc], cap)[0]
            if verdict == EV_TOO_LARGE:
                self._rejections.add("too_large", 1, f"{where}: body claims more than {cap} B")
            elif verdict == EV_NOT_A_DICT:
                self._rejections.add("not_a_dict", 1, f"{where}: the event is not a hash")
            else:
                out.append(doc)
        return out

    def _learn(self, kind: tuple[str, str], encoded: int, chunks: list[Chunk]) -> None:
        # A small group compresses worse than a full chunk does: it would talk the
        # ratio up and make the next big group's chunks smaller than they could be.
        if kind in self._ratio and encoded < self._limit:
            return
        if encoded > 0 and chunks:
            seen = sum(len(c.data) for c in chunks) / encoded
            old = self._ratio.get(kind, seen)
            self._ratio[kind] = max(old * 0.5 + seen * 0.5, _MIN_RATIO)
            if len(self._ratio) > 10_000:  # bounded: forget rare kinds
                self._ratio.clear()

    def _events_chunks(self, events: list[Any], epoch: int, dc: str, type_: str) -> list[Chunk]:
        while True:
            try:
                return chunk_events(events, chunk_max_bytes=self._limit, compress=self._compress)
            except EventTooLarge as e:
                self._metrics.dropped.labels("oversized").inc()
                log.warning(
                    "sealer: dropped event of %d bytes epoch=%d dc=%s type=%s",
                    e.size_bytes,
                    epoch,
                    dc,
                    type_,
                )
                del events[e.index]
            except SerealError as e:  # an unencodable value inside a decoded event
                raise BadSpoolFile(f"epoch={epoch} dc={dc} type={type_}: {e}") from e

    def _verbatim(self, data: bytes, name: str) -> Chunk | None:
        """The spool blob itself as the one chunk, when it already is one: it fits
        ``chunk_max_bytes`` with our postfix, it is a protocol 4+ document in a format
        every reader takes (a type the encoder writes: ``compression.DOC_TYPES``) and
        its body is an array. Its bytes are kept (plus the checksum postfix): nothing
        decoded, nothing re-encoded.
        Booking's aggregators write most per-epoch blobs under 500 KB, so this is the
        common case of the spool path.
        """
        doc = bytes(verify_postfix(data, name, required=False))
        if len(doc) + postfix_length() > self._limit:
            return None
        try:
            sereal.decode_header(doc)  # the user header too: readers may read it
            layout = sereal_document.read_layout(doc)
        except SerealError:
            return None
        if layout.protocol < 4 or compression.DOC_TYPES[layout.doc_type].method is None:
            return None
        count = _array_length(doc, layout)
        if count is None:
            return None
        return Chunk(add_postfix(doc), 0, count)

    def seal_spool(
        self,
        name: str,
        data: bytes,
        *,
        epoch: int,
        dc: str,
        type_: str,
        subtype: str,
        seq: int | None = None,
        writer_id: int | None = None,
    ) -> Batch:
        """Cut one spool blob (a Sereal array of events) into a batch.

        ``seq``/``writer_id`` given: reuse a numbering already committed (a takeover).

        Raises:
            BadSpoolFile: not a Sereal array, or undecodable.
        """
        writer = self._writer_id if writer_id is None else writer_id
        seq = self._reserve_seq() if seq is None else seq
        try:
            verbatim = self._verbatim(data, name)
            if verbatim is not None:
                chunks = [verbatim]
            elif splitter_available():
                chunks = split_blob(
                    data, key=name, chunk_max_bytes=self._limit, compress=self._compress
                )
            else:
                events = sereal.decode(data[: _document_end(data)])
                if not isinstance(events, list):
                    raise BadSpoolFile(f"spool file {name}: body is not an array")
                chunks = self._events_chunks(events, epoch, dc, type_)
        except (EventStoreError, SerealError) as e:
            raise BadSpoolFile(f"spool file {name}: {e}") from e
        keys = tuple(
            ChunkKey(epoch, dc, type_, subtype, chunk_number(writer, seq, i))
            for i in range(len(chunks))
        )
        return Batch(
            id=batch_id(writer, seq),
            epoch=epoch,
            dc=dc,
            keys=keys,
            values=tuple(c.data for c in chunks),
            events=tuple(c.count for c in chunks),
            spool=name,
            sealed_at=time.time(),
        )


#: The smallest stored/document ratio ever assumed (real events with dedupe + zstd come
#: out near 0.1; a ratio far too low would make every run split again).
_MIN_RATIO = 0.02


def _array_length(doc: bytes, layout: sereal_document.Layout) -> int | None:
    """Elements of the document's top-level array, walking its body in C (never decoding
    it to Python objects); None when the splitter is not built or it is not an array."""
    if not splitter_available():
        return None
    from sereal_codec._sereal import array_layout  # noqa: PLC0415

    buf, start, base = sereal_document.open_body(
        doc, layout, max_decompressed_size=MAX_DECOMPRESSED_BYTES
    )
    try:
        bounds: list[int] = array_layout(buf, start, len(buf), base)
    except ValueError:
        return None
    return len(bounds) - 1


def _uncompressed(doc: bytes, max_bytes: int) -> bytes:
    """The same document with its body decompressed, at most ``max_bytes`` (checked
    against the body's claim before inflating): the document layer's
    ``decompressed_document``, which keeps every offset where it was.

    Raises:
        SizeLimitExceeded: the body claims (or inflates to) more than ``max_bytes``.
        SerealError: a bad header or compressed body.
    """
    return sereal_document.decompressed_document(doc, max_decompressed_size=max_bytes)


def _document_end(data: bytes) -> int:
    """Length of the Sereal document, without our checksum postfix if present."""
    if has_postfix(data):
        return len(verify_postfix(data))
    return len(data)
