"""The intake wire format shared by producers (``producer.py``) and listeners (``intake/``).

One event is one **frame**::

    magic "RE" | version 1 (u8) | epoch (u64 BE) |
    len(dc) (u8) dc | len(type) (u8) type | len(subtype) (u8) subtype |
    event: one Sereal document (any compression)

The routing fields are a fixed binary header so that intake never decodes the event: it
checks the header and journals the frame as it came. On a stream (TCP) and in a
datagram (UDP) every frame is preceded by its length (u32 BE); a datagram may carry
several frames. Over TCP the relocator answers with the cumulative number of frames of
this connection that are durable (or were rejected) as a u64 BE, after each group commit.

**Stream version 2** (idempotent producers, ``producers.py``): a producer with an id
opens the connection with a **hello**, length-prefixed like a frame::

    magic "RH" | stream version 2 (u8) | producer id (16 bytes) | first seq (u64 BE)

and waits for the relocator's answer, 8 bytes in the place of an acknowledgement:
``HELLO_REPLY`` (``"RH" | 2 | five zero bytes``, as a count never reachable). Its
frames are then numbered from ``first seq`` in the order they come (rejected ones
included), and the acknowledgements count this connection's frames as before. A stream
that starts with a frame (``RE``) is a producer without an id (stream version 1,
at-least-once). A relocator of stream version 1 takes the hello for a malformed frame
and acknowledges it as handled (a count of 1): the producer then knows it talks to an
old relocator and goes on without ids (**downgraded**: at-least-once), see
``producer.py``.

Pure logic, no I/O.
"""

from __future__ import annotations

import array
import re
import struct
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from relocator.errors import MalformedFrame
from sereal_codec import tags
from sereal_codec.compression import read_varint, screen_claim
from sereal_codec.errors import SerealError

MAGIC = b"RE"
VERSION = 1
_HEAD = struct.Struct(">2sBQ")
LENGTH = struct.Struct(">I")
ACK = struct.Struct(">Q")
_DC_RE = re.compile(rb"[A-Za-z0-9_]+")
_TYPE_RE = re.compile(rb"[A-Za-z0-9_.]+")
_SUBTYPE_RE = re.compile(rb"[A-Za-z0-9_.]*")
MAX_EPOCH = 2**63 - 1
HELLO_MAGIC = b"RH"
STREAM_VERSION = 2
_HELLO = struct.Struct(">2sB16sQ")
HELLO_MAX_BYTES = 1024  # later versions may add fields; a bigger one is garbage
#: The relocator's answer to a hello (a cumulative count no connection reaches).
HELLO_REPLY = struct.pack(">2sB5x", HELLO_MAGIC, STREAM_VERSION)


class Frame(NamedTuple):
    """A parsed frame: routing fields and the event's Sereal document (not decoded).

    A NamedTuple, not a frozen dataclass: one is built per event on the intake's hot
    path, and a frozen dataclass's ``__init__`` costs several times a tuple's.
    """

    epoch: int
    dc: str
    type: str
    subtype: str
    document: bytes


def encode_frame(epoch: int, dc: str, type: str, subtype: str, document: bytes) -> bytes:
    """Build one frame (without the length prefix).

    Raises:
        MalformedFrame: a field out of range or not a token.
    """
    return frame_head(epoch) + frame_tail(dc, type, subtype, document)


def frame_head(epoch: int) -> bytes:
    """The fixed-size start of a frame: magic, version, epoch.

    Raises:
        MalformedFrame: epoch out of range.
    """
    if not 0 <= epoch <= MAX_EPOCH:
        raise MalformedFrame(f"epoch {epoch} out of range")
    return _HEAD.pack(MAGIC, VERSION, epoch)


def frame_tail(dc: str, type: str, subtype: str, document: bytes) -> bytes:
    """The rest of a frame after :func:`frame_head` (a producer sending many events can
    build the tails once and stamp the epoch per send).

    Raises:
        MalformedFrame: a field not a token.
    """
    parts = []
    for text, pattern, what in (
        (dc, _DC_RE, "dc"),
        (type, _TYPE_RE, "type"),
        (subtype, _SUBTYPE_RE, "subtype"),
    ):
        raw = text.encode("ascii", "replace")
        if len(raw) > 255 or not pattern.fullmatch(raw):
            raise MalformedFrame(f"{what} {text!r} is not a valid token")
        parts.append(bytes((len(raw),)) + raw)
    return b"".join(parts) + document


def parse_frame(data: bytes) -> Frame:
    """Parse a frame's header; the document is returned as given, not decoded.

    Raises:
        MalformedFrame: wrong magic or version, truncated, or a field not a token.
    """
    if len(data) < _HEAD.size + 3:
        raise MalformedFrame(f"frame of {len(data)} bytes is shorter than a header")
    magic, version, epoch = _HEAD.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        raise MalformedFrame(f"bad magic/version {magic!r}/{version}")
    if epoch > MAX_EPOCH:
        raise MalformedFrame(f"epoch {epoch} out of range")
    pos = _HEAD.size
    fields: list[str] = []
    for pattern, what in ((_DC_RE, "dc"), (_TYPE_RE, "type"), (_SUBTYPE_RE, "subtype")):
        if pos >= len(data):
            raise MalformedFrame(f"frame truncated in {what}")
        n = data[pos]
        raw = data[pos + 1 : pos + 1 + n]
        if len(raw) != n or not pattern.fullmatch(raw):
            raise MalformedFrame(f"{what} {raw!r} is not a valid token")
        fields.append(raw.decode("ascii"))
        pos += 1 + n
    if pos >= len(data):
        raise MalformedFrame("frame has no event document")
    return Frame(epoch, fields[0], fields[1], fields[2], data[pos:])


class FrameParser:
    """:func:`parse_frame` with a cache of recently seen headers.

    Producers send many events with the same (epoch, dc, type, subtype), i.e. byte-equal
    headers; the cache turns the three token checks into one dict lookup. Bounded: it
    is cleared when it reaches ``max_entries``. One per thread (not thread-safe).
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self._cache: dict[bytes, tuple[int, str, str, str]] = {}
        self._max = max_entries

    def header(self, head: bytes) -> tuple[int, str, str, str]:
        """(epoch, dc, type, subtype) of a frame header (the bytes before its document).

        Raises:
            MalformedFrame: as :func:`parse_frame`.
        """
        hit = self._cache.get(head)
        if hit is None:
            f = parse_frame(head + b"\0")
            if len(f.document) != 1:
                raise MalformedFrame(f"header {head!r} does not end where its fields do")
            if len(self._cache) >= self._max:
                self._cache.clear()
            hit = self._cache[head] = (f.epoch, f.dc, f.type, f.subtype)
        return hit

    def parse(self, data: bytes) -> Frame:
        """As :func:`parse_frame`.

        Raises:
            MalformedFrame: as :func:`parse_frame`.
        """
        try:
            n1 = data[11]
            n2 = data[12 + n1]
            end = 14 + n1 + n2 + data[13 + n1 + n2]
        except IndexError:
            return parse_frame(data)
        head = data[:end]
        hit = self._cache.get(head)
        if hit is None or end >= len(data):
            f = parse_frame(data)
            if len(self._cache) >= self._max:
                self._cache.clear()
            self._cache[head] = (f.epoch, f.dc, f.type, f.subtype)
            return f
        return Frame(hit[0], hit[1], hit[2], hit[3], data[end:])


class Hello(NamedTuple):
    """A producer's hello: who it is and the number of the first frame that follows."""

    version: int
    producer_id: bytes
    first_seq: int


def encode_hello(producer_id: bytes, first_seq: int) -> bytes:
    """A length-prefixed hello of stream version 2.

    Raises:
        ValueError: the id is not 16 bytes or the number is out of range.
    """
    if len(producer_id) != 16 or not 0 <= first_seq < 2**64:
        raise ValueError("a hello needs a 16-byte producer id and a u64 first seq")
    body = _HELLO.pack(HELLO_MAGIC, STREAM_VERSION, producer_id, first_seq)
    return LENGTH.pack(len(body)) + body


def take_hello(buffer: bytes | bytearray) -> tuple[Hello | None, int] | None:
    """Read the start of a TCP stream: a hello, or a first frame (no producer id).

    Returns:
        None: too few bytes yet to tell; ``(None, 0)``: the stream starts with a frame
        (stream version 1); ``(hello, n)``: a hello of ``n`` bytes, length prefix
        included.

    Raises:
        MalformedFrame: a hello of a size or version that cannot be one.
    """
    if len(buffer) < LENGTH.size + 2:
        return None
    if buffer[LENGTH.size : LENGTH.size + 2] != HELLO_MAGIC:
        return None, 0
    (n,) = LENGTH.unpack_from(buffer)
    if not _HELLO.size <= n <= HELLO_MAX_BYTES:
        raise MalformedFrame(f"hello of {n} bytes (a hello is {_HELLO.size} bytes or more)")
    if len(buffer) < LENGTH.size + n:
        return None
    _, version, producer_id, first_seq = _HELLO.unpack_from(buffer, LENGTH.size)
    if version < STREAM_VERSION:
        raise MalformedFrame(f"hello of stream version {version} (version 2 is the first)")
    return Hello(version, producer_id, first_seq), LENGTH.size + n


def skip_frames(buffer: bytes | bytearray, start: int, count: int) -> int:
    """The offset after ``count`` length-prefixed frames from ``start`` (they must be
    complete, as :func:`scan_stream` consumed them). O(count)."""
    pos = start
    for _ in range(count):
        (n,) = LENGTH.unpack_from(buffer, pos)
        pos += LENGTH.size + n
    return pos


def split_stream(buffer: bytearray, max_frame_bytes: int) -> tuple[list[bytes], int]:
    """Take every complete length-prefixed frame from the front of ``buffer``.

    Returns:
        (frames, consumed bytes). Frames longer than ``max_frame_bytes`` come back as
        ``b""`` placeholders once complete (the caller counts and rejects them) so that
        the stream stays in sync.

    Raises:
        MalformedFrame: a length prefix beyond 64 MiB (the stream is garbage).
    """
    frames: list[bytes] = []
    pos = 0
    end = len(buffer)
    while end - pos >= LENGTH.size:
        (n,) = LENGTH.unpack_from(buffer, pos)
        if n > 64 * 1024 * 1024:
            raise MalformedFrame(f"length prefix {n} is not plausible")
        if end - pos - LENGTH.size < n:
            break
        start = pos + LENGTH.size
        frames.append(bytes(buffer[start : start + n]) if n <= max_frame_bytes else b"")
        pos = start + n
    return frames, pos


class FrameGroup(NamedTuple):
    """The frames of one header among frames received together."""

    epoch: int
    dc: str
    type: str
    subtype: str
    offsets: Sequence[int]  # of each frame's length prefix in Received.data
    documents: list[bytes]  # the frames' event documents, in arrival order


class Received(NamedTuple):
    """Frames received together, as the journal stores them and the aggregator takes them.

    ``data`` is the good frames with their length prefixes, back to back (one journal
    record); ``groups`` holds them by header. Rejected frames are only counted.
    """

    data: bytes
    groups: list[FrameGroup]
    events: int  # good frames
    malformed: int
    oversized: int
    too_large: int = 0  # the document claims a decompressed body above the limit
    not_a_dict: int = 0  # the (uncompressed) document holds no hash

    @property
    def rejected(self) -> int:
        """Frames left out, whatever the reason."""
        return self.malformed + self.oversized + self.too_large + self.not_a_dict


#: :func:`event_verdict` codes (the compiled ``event_verdict`` in frames.c has the same).
EV_OK, EV_TOO_LARGE, EV_NOT_A_DICT, EV_COMPRESSED, EV_UNREADABLE = range(5)


def event_verdict(doc: bytes, max_bytes: int) -> int:
    """What an event's Sereal document shows in its first bytes, never decompressing
    or decoding it (the compiled ``event_verdicts`` does the same per document).

    Returns:
        ``EV_TOO_LARGE``: compressed, and the size its body claims (Snappy preamble,
        zlib uncompressed length, zstd content size) is above ``max_bytes``;
        ``EV_NOT_A_DICT``: uncompressed and its item is not a hash (after PADs and
        WEAKENs: ``HASH``, ``HASHREF_n`` or ``REFN HASH``, what decodes to a dict);
        ``EV_COMPRESSED``: compressed within ``max_bytes`` (or a zstd frame without a
        content size, which the codec refuses to open); ``EV_UNREADABLE``: not a
        document we could read this far (the decoder names the fault later);
        ``EV_OK``: an uncompressed hash.
    """
    n = len(doc)
    if n < 6:
        return EV_UNREADABLE
    # The header as frames.c's srl_header_start / srl_header_suffix read it (no check
    # of the type against the protocol: the decoder names that fault later).
    version, kind = doc[4] & 0x0F, doc[4] >> 4
    v3 = doc[:4] == tags.MAGIC_V3
    if (not v3 and doc[:4] != tags.MAGIC_V1) or not 1 <= version <= _PROTOCOL_MAX:
        return EV_UNREADABLE
    if v3 != (version >= 3):
        return EV_UNREADABLE
    try:
        suffix, pos = read_varint(doc, 5, n)
    except SerealError:  # cut short or over 64 bits
        return EV_UNREADABLE
    if suffix > n - pos:
        return EV_UNREADABLE
    pos += suffix
    if kind == tags.TYPE_RAW:
        return _item_verdict(doc, pos)
    claim = screen_claim(doc, kind, pos)
    if claim == -1:  # no claim to check: the codec refuses to open it
        return EV_COMPRESSED
    if claim < 0:
        return EV_UNREADABLE
    return EV_TOO_LARGE if claim > max_bytes else EV_COMPRESSED


_PROTOCOL_MAX = tags.PROTOCOLS[-1]


def _item_verdict(doc: bytes, pos: int) -> int:
    after_refn = False
    for byte in doc[pos:]:
        tag = byte & 0x7F
        if tag == tags.PAD:
            continue
        if tag == tags.HASH:
            return EV_OK
        if after_refn:
            return EV_NOT_A_DICT
        if tags.HASHREF_LOW <= tag < tags.SHORT_BINARY_LOW:
            return EV_OK
        if tag == tags.REFN:
            after_refn = True
        elif tag != tags.WEAKEN:
            return EV_NOT_A_DICT
    return EV_UNREADABLE


_Scan = tuple[int, bytes, list[tuple[bytes, Any, list[bytes]]], int, int, int, int]


def _scan_python(buffer: bytearray | bytes, max_frame_bytes: int) -> _Scan:
    """The compiled ``scan_frames`` in Python (used when the extension is not built)."""
    heads: dict[bytes, tuple[bytes, array.array[int], list[bytes]]] = {}
    out: list[bytes] = []
    size = malformed = oversized = too_large = not_a_dict = 0
    pos = 0
    while len(buffer) - pos >= LENGTH.size:
        (n,) = LENGTH.unpack_from(buffer, pos)
        if n > 64 * 1024 * 1024:
            raise ValueError(f"length prefix {n} is not plausible")
        start = pos + LENGTH.size
        if len(buffer) - start < n:
            break
        pos = start + n
        if n > max_frame_bytes:
            oversized += 1
            continue
        p = bytes(buffer[start:pos])
        try:
            f = parse_frame(p)
        except MalformedFrame:
            malformed += 1
            continue
        verdict = event_verdict(f.document, max_frame_bytes)
        if verdict == EV_TOO_LARGE:
            too_large += 1
            continue
        if verdict == EV_NOT_A_DICT:
            not_a_dict += 1
            continue
        head = p[: len(p) - len(f.document)]
        entry = heads.get(head)
        if entry is None:
            entry = heads[head] = (head, array.array("I"), [])
        entry[1].append(size)
        entry[2].append(f.document)
        out.append(LENGTH.pack(n) + p)
        size += LENGTH.size + n
    return pos, b"".join(out), list(heads.values()), malformed, oversized, too_large, not_a_dict


_scan_c: Callable[[bytearray | bytes, int], _Scan] | None
_positions_c: Callable[[Any, int], bytes] | None
_verdicts_c: Callable[[Sequence[bytes], int], bytes] | None
try:
    from relocator._frames import event_verdicts as _verdicts_c
    from relocator._frames import frame_positions as _positions_c
    from relocator._frames import scan_frames as _scan_c
except ImportError:  # the extension is not built: the same in Python
    _scan_c = _positions_c = _verdicts_c = None


def event_verdicts(docs: Sequence[bytes], max_bytes: int, *, compiled: bool = True) -> bytes:
    """:func:`event_verdict` of each document, one byte each (in C when built, with the
    GIL released; ``compiled=False`` forces Python, for tests)."""
    if compiled and _verdicts_c is not None:
        return _verdicts_c(docs, max_bytes)
    return bytes(event_verdict(d, max_bytes) for d in docs)


def frame_positions(offsets: Sequence[int], base: int) -> array.array[int]:
    """``base + offset`` for each offset of a :class:`FrameGroup`: the frames' journal
    positions, as an ``array("Q")`` (built in C when compiled: no int per frame)."""
    out = array.array("Q")
    if _positions_c is not None:
        out.frombytes(_positions_c(offsets, base))
    else:
        out.extend(base + o for o in offsets)
    return out


def scan_stream(
    buffer: bytearray | bytes, max_frame_bytes: int, parser: FrameParser, *, compiled: bool = True
) -> tuple[Received, int]:
    """Take every complete length-prefixed frame from the front of ``buffer``.

    Headers are checked (as :func:`parse_frame`), and each document's first bytes
    (:func:`event_verdict`: a compressed body claiming more than ``max_frame_bytes``,
    an uncompressed item that is not a hash); bad, oversized, too large and non-dict
    frames are counted and left out. The compiled ``scan_frames`` does the per-frame
    work when built (``compiled=False`` forces the Python path, for tests).

    Returns:
        (the frames, bytes of ``buffer`` consumed).

    Raises:
        MalformedFrame: a length prefix beyond 64 MiB (the stream is garbage).
    """
    scan = _scan_c if compiled and _scan_c is not None else _scan_python
    try:
        used, data, heads, malformed, oversized, too_large, not_a_dict = scan(
            buffer, max_frame_bytes
        )
    except ValueError as e:
        raise MalformedFrame(str(e)) from e
    groups: list[FrameGroup] = []
    count = 0
    for head, offsets, docs in heads:
        epoch, dc, type_, subtype = parser.header(head)
        view = offsets if isinstance(offsets, array.array) else memoryview(offsets).cast("I")
        groups.append(FrameGroup(epoch, dc, type_, subtype, view, docs))
        count += len(docs)
    return Received(data, groups, count, malformed, oversized, too_large, not_a_dict), used
