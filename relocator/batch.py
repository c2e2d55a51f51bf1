"""A **batch**: the unit that is sealed, stored durably, pushed and acknowledged.

One batch holds every chunk the relocator made for one (epoch, dc) at one sealing, plus
where its events came from (journal positions, or one spool file). Its chunk numbers are
``writer_id * 10**15 + seq * 10**4 + i`` (``i`` counts the chunks of one type:subtype
within the batch), so no two batches, of this relocator or another with a different
writer id, ever name the same chunk key. A batch's bytes are fixed when it is sealed:
pushing it again writes identical keys and values (idempotent).

Encoding (stored in the state store)::

    header length (u32 BE) | header JSON | positions (u64 BE each) | chunk values

Pure logic, no I/O.
"""

from __future__ import annotations

import array
import json
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from eventstore.names import ChunkKey, ChunkRef
from relocator import defaults

_U32 = struct.Struct(">I")


def batch_id(writer_id: int, seq: int) -> str:
    """The batch's id: sortable by writer then sealing order."""
    return f"{writer_id:04d}-{seq:012d}"


def chunk_number(writer_id: int, seq: int, index: int) -> int:
    """The chunk number of the ``index``-th chunk of one type:subtype in batch ``seq``.

    Raises:
        ValueError: index beyond 10**4 or seq beyond 10**11 (the arithmetic would overlap).
    """
    if not 0 <= index < defaults.SEQ_STRIDE:
        raise ValueError(f"chunk index {index} out of range")
    if not 0 <= seq < defaults.WRITER_STRIDE // defaults.SEQ_STRIDE:
        raise ValueError(f"batch seq {seq} out of range")
    return writer_id * defaults.WRITER_STRIDE + seq * defaults.SEQ_STRIDE + index


@dataclass(frozen=True)
class Batch:
    """Chunks of one (epoch, dc), ready to push: keys and bytes fixed.

    Attributes:
        id: ``batch_id(writer_id, seq)``.
        epoch, dc: what the metadata key ``<epoch>-<dc>`` will be.
        keys: the chunk keys, in order; ``values[i]`` is the blob stored under ``keys[i]``.
        events: how many events each chunk holds.
        positions: journal positions of the events inside (empty for a spool batch),
            kept as an ``array("Q")``.
        spool: the spool file this batch came from ("" for journal batches).
        late: how many of its events arrived after their epoch had closed.
        sealed_at: wall-clock time it was sealed, seconds.
    """

    id: str
    epoch: int
    dc: str
    keys: tuple[ChunkKey, ...]
    values: tuple[bytes, ...]
    events: tuple[int, ...]
    positions: Sequence[int] = ()
    spool: str = ""
    late: int = 0
    sealed_at: float = 0.0
    segments: frozenset[int] = field(default=frozenset())

    def __post_init__(self) -> None:
        # one representation (compared by ==, encoded without an int per event)
        if not (isinstance(self.positions, array.array) and self.positions.typecode == "Q"):
            object.__setattr__(self, "positions", array.array("Q", self.positions))

    @property
    def refs(self) -> list[ChunkRef]:
        """The metadata entries this batch adds."""
        return [k.ref for k in self.keys]

    @property
    def metadata_key(self) -> str:
        """``<epoch>-<dc>``."""
        return f"{self.epoch}-{self.dc}"

    @property
    def nbytes(self) -> int:
        """Stored bytes of all chunks."""
        return sum(len(v) for v in self.values)


def encode_batch(b: Batch) -> bytes:
    """Serialise a batch for the state store."""
    header = json.dumps(
        {
            "v": 1,
            "id": b.id,
            "epoch": b.epoch,
            "dc": b.dc,
            "keys": [k.format() for k in b.keys],
            "sizes": [len(v) for v in b.values],
            "events": list(b.events),
            "npos": len(b.positions),
            "spool": b.spool,
            "late": b.late,
            "sealed_at": b.sealed_at,
            "segments": sorted(b.segments),
        },
        separators=(",", ":"),
    ).encode()
    pos = array.array("Q", b.positions)
    if sys.byteorder == "little":
        pos.byteswap()
    return b"".join((_U32.pack(len(header)), header, pos.tobytes(), *b.values))


def decode_batch(data: bytes) -> Batch:
    """Inverse of :func:`encode_batch`.

    Raises:
        ValueError: the stored bytes are not a batch of version 1.
    """
    (n,) = _U32.unpack_from(data)
    h = json.loads(data[4 : 4 + n])
    if h.get("v") != 1:
        raise ValueError(f"batch record version {h.get('v')!r} unknown")
    at = 4 + n
    npos = h["npos"]
    positions = array.array("Q")
    positions.frombytes(data[at : at + 8 * npos])
    if len(positions) != npos:
        raise ValueError(f"batch {h['id']} record is cut inside its positions")
    if sys.byteorder == "little":
        positions.byteswap()
    at += 8 * npos
    values = []
    for size in h["sizes"]:
        values.append(data[at : at + size])
        at += size
    if at != len(data):
        raise ValueError(f"batch {h['id']} record has {len(data) - at} trailing bytes")
    return Batch(
        id=h["id"],
        epoch=h["epoch"],
        dc=h["dc"],
        keys=tuple(ChunkKey.parse(k) for k in h["keys"]),
        values=tuple(values),
        events=tuple(h["events"]),
        positions=positions,
        spool=h["spool"],
        late=h["late"],
        sealed_at=h["sealed_at"],
        segments=frozenset(h["segments"]),
    )
