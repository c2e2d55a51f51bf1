"""Chunk keys, metadata keys, metadata values and the default Riak namespaces.

The contract (``../shared/DESIGN.md`` section 3, detailed in ``eventstore/DESIGN.md``):

- chunk key ``<epoch>:<dc>:<type>:<subtype>:<chunk>`` in bucket type/bucket ``events``;
- metadata key ``<epoch>-<dc>`` in bucket type/bucket ``epochs``;
- metadata value: ``<type>:<subtype>:<chunk>`` entries, ASCII, sorted, joined by ``|``;
- substream results: bucket type ``substreams``, bucket = the substream's name, the key of
  the chunk they were computed from.

Only canonical forms are accepted: a name that parses formats back to the very same
text, so a key is never stored twice under two spellings. Pure logic, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from eventstore.errors import InvalidKey, InvalidMetadataValue, InvalidName

__all__ = [
    "DEFAULT_NAMESPACES",
    "EPOCHS_BUCKET",
    "EPOCHS_BUCKET_TYPE",
    "EVENTS_BUCKET",
    "EVENTS_BUCKET_TYPE",
    "MAX_INT",
    "SUBSTREAMS_BUCKET_TYPE",
    "ChunkKey",
    "ChunkRef",
    "MetadataKey",
    "Namespaces",
    "format_metadata",
    "merge_metadata",
    "parse_metadata",
]

#: Default bucket type and bucket of the event chunks.
EVENTS_BUCKET_TYPE = "events"
EVENTS_BUCKET = "events"
#: Default bucket type and bucket of the per-epoch-and-dc metadata.
EPOCHS_BUCKET_TYPE = "epochs"
EPOCHS_BUCKET = "epochs"
#: Default bucket type of substream results; the bucket is the substream's name.
SUBSTREAMS_BUCKET_TYPE = "substreams"

#: Largest epoch or chunk number accepted: a signed 64-bit integer, so that every
#: language reading our keys (Perl, Erlang, Java/Spark) holds it natively.
MAX_INT = 2**63 - 1

_DC_RE = re.compile(r"[A-Za-z0-9_]+")
_TYPE_RE = re.compile(r"[A-Za-z0-9_.]+")
# Canonical decimal: "0" or no leading zero; ASCII digits only (int() would also take
# "+1", " 1", "1_0" and non-ASCII digits, none of which may appear in a key).
_INT_RE = re.compile(r"0|[1-9][0-9]*")
# Bucket names we generate or accept for substreams and namespaces.
_BUCKET_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")

_EntryError = type[InvalidName]


def _check_int(text: str, whole: str, part: str, err: _EntryError) -> int:
    if not _INT_RE.fullmatch(text):
        raise err(whole, part, f"{text!r} is not a canonical decimal integer >= 0")
    if len(text) > 19 or int(text) > MAX_INT:
        raise err(whole, part, f"{text} is larger than {MAX_INT}")
    return int(text)


def _check_token(text: str, whole: str, part: str, err: _EntryError, *, dots: bool) -> str:
    pattern = _TYPE_RE if dots else _DC_RE
    if not pattern.fullmatch(text):
        allowed = "[A-Za-z0-9_.]+" if dots else "[A-Za-z0-9_]+"
        raise err(whole, part, f"{text!r} does not match {allowed}")
    return text


def _validate_int_field(value: object, whole: str, part: str, err: _EntryError) -> None:
    # bool is an int subclass; True as an epoch is a bug, not 1.
    if not isinstance(value, int) or isinstance(value, bool):
        raise err(whole, part, f"must be an int, not {type(value).__name__}")
    if not 0 <= value <= MAX_INT:
        raise err(whole, part, f"{value} is outside 0..{MAX_INT}")


def _validate_str_field(value: object, whole: str, part: str, err: _EntryError) -> None:
    if not isinstance(value, str):
        raise err(whole, part, f"must be a str, not {type(value).__name__}")


@dataclass(frozen=True, order=True)
class ChunkRef:
    """One metadata entry: a chunk of an epoch and dc, named without them.

    Attributes:
        type: event type, ``[A-Za-z0-9_.]+``.
        subtype: event subtype, ``[A-Za-z0-9_.]*`` (may be empty).
        chunk: chunk number, from 0.
    """

    type: str
    subtype: str
    chunk: int

    def __post_init__(self) -> None:
        whole = f"{self.type!r}:{self.subtype!r}:{self.chunk!r}"
        _validate_str_field(self.type, whole, "type", InvalidMetadataValue)
        _validate_str_field(self.subtype, whole, "subtype", InvalidMetadataValue)
        _validate_int_field(self.chunk, whole, "chunk", InvalidMetadataValue)
        _check_token(self.type, whole, "type", InvalidMetadataValue, dots=True)
        if self.subtype:
            _check_token(self.subtype, whole, "subtype", InvalidMetadataValue, dots=True)

    def format(self) -> str:
        """Returns: the entry as written in a metadata value, ``type:subtype:chunk``."""
        return f"{self.type}:{self.subtype}:{self.chunk}"

    def __str__(self) -> str:
        return self.format()

    @classmethod
    def parse(cls, entry: str, *, value: str | None = None, index: int = 0) -> ChunkRef:
        """Parse one ``type:subtype:chunk`` entry.

        Args:
            entry: the entry text.
            value: the whole metadata value it came from, named in errors.
            index: the entry's position in ``value``, named in errors.

        Raises:
            InvalidMetadataValue: naming the value, the entry and the wrong part.
        """
        whole = entry if value is None else value
        where = "entry" if value is None else f"entry {index} ({entry!r})"
        parts = entry.split(":")
        if len(parts) != 3:
            raise InvalidMetadataValue(
                whole, where, f"has {len(parts)} ':'-separated parts, expected 3"
            )
        type_, subtype, chunk = parts
        _check_token(type_, whole, f"{where} type", InvalidMetadataValue, dots=True)
        if subtype:
            _check_token(subtype, whole, f"{where} subtype", InvalidMetadataValue, dots=True)
        number = _check_int(chunk, whole, f"{where} chunk", InvalidMetadataValue)
        return cls(type_, subtype, number)

    def key(self, epoch: int, dc: str) -> ChunkKey:
        """Returns: the full chunk key of this entry in ``epoch`` and ``dc``."""
        return ChunkKey(epoch, dc, self.type, self.subtype, self.chunk)


@dataclass(frozen=True, order=True)
class ChunkKey:
    """The key of one chunk of events: ``<epoch>:<dc>:<type>:<subtype>:<chunk>``.

    Attributes:
        epoch: unix seconds, UTC, >= 0.
        dc: data centre, ``[A-Za-z0-9_]+``.
        type: event type, ``[A-Za-z0-9_.]+``.
        subtype: event subtype, ``[A-Za-z0-9_.]*`` (may be empty).
        chunk: chunk number, from 0.

    Raises:
        InvalidKey: on construction, when a field is out of its domain.
    """

    epoch: int
    dc: str
    type: str
    subtype: str
    chunk: int

    def __post_init__(self) -> None:
        whole = f"{self.epoch!r}:{self.dc!r}:{self.type!r}:{self.subtype!r}:{self.chunk!r}"
        _validate_int_field(self.epoch, whole, "epoch", InvalidKey)
        _validate_str_field(self.dc, whole, "dc", InvalidKey)
        _validate_str_field(self.type, whole, "type", InvalidKey)
        _validate_str_field(self.subtype, whole, "subtype", InvalidKey)
        _validate_int_field(self.chunk, whole, "chunk", InvalidKey)
        _check_token(self.dc, whole, "dc", InvalidKey, dots=False)
        _check_token(self.type, whole, "type", InvalidKey, dots=True)
        if self.subtype:
            _check_token(self.subtype, whole, "subtype", InvalidKey, dots=True)

    @classmethod
    def parse(cls, key: str) -> ChunkKey:
        """Parse a chunk key.

        Args:
            key: e.g. ``"1413813813:1:type1:subtype1:0"`` or ``"1413813813:2:type3::0"``.

        Returns:
            The key's parts.

        Raises:
            InvalidKey: naming ``key`` and the part that is wrong.
        """
        if not isinstance(key, str):
            raise InvalidKey(repr(key), "key", f"must be a str, not {type(key).__name__}")
        parts = key.split(":")
        if len(parts) != 5:
            raise InvalidKey(key, "key", f"has {len(parts)} ':'-separated parts, expected 5")
        epoch, dc, type_, subtype, chunk = parts
        e = _check_int(epoch, key, "epoch", InvalidKey)
        _check_token(dc, key, "dc", InvalidKey, dots=False)
        _check_token(type_, key, "type", InvalidKey, dots=True)
        if subtype:
            _check_token(subtype, key, "subtype", InvalidKey, dots=True)
        c = _check_int(chunk, key, "chunk", InvalidKey)
        return cls(e, dc, type_, subtype, c)

    def format(self) -> str:
        """Returns: the key text, ``<epoch>:<dc>:<type>:<subtype>:<chunk>``."""
        return f"{self.epoch}:{self.dc}:{self.type}:{self.subtype}:{self.chunk}"

    def __str__(self) -> str:
        return self.format()

    @property
    def ref(self) -> ChunkRef:
        """This key's metadata entry (``type:subtype:chunk``)."""
        return ChunkRef(self.type, self.subtype, self.chunk)

    @property
    def metadata_key(self) -> MetadataKey:
        """The metadata key of this chunk's epoch and dc."""
        return MetadataKey(self.epoch, self.dc)


@dataclass(frozen=True, order=True)
class MetadataKey:
    """The key of an epoch's metadata in one dc: ``<epoch>-<dc>``.

    Attributes:
        epoch: unix seconds, UTC, >= 0.
        dc: data centre, ``[A-Za-z0-9_]+``.

    Raises:
        InvalidKey: on construction, when a field is out of its domain.
    """

    epoch: int
    dc: str

    def __post_init__(self) -> None:
        whole = f"{self.epoch!r}-{self.dc!r}"
        _validate_int_field(self.epoch, whole, "epoch", InvalidKey)
        _validate_str_field(self.dc, whole, "dc", InvalidKey)
        _check_token(self.dc, whole, "dc", InvalidKey, dots=False)

    @classmethod
    def parse(cls, key: str) -> MetadataKey:
        """Parse a metadata key such as ``"1413813813-2"``.

        Raises:
            InvalidKey: naming ``key`` and the part that is wrong.
        """
        if not isinstance(key, str):
            raise InvalidKey(repr(key), "key", f"must be a str, not {type(key).__name__}")
        epoch, sep, dc = key.partition("-")
        if not sep:
            raise InvalidKey(key, "key", "has no '-' between epoch and dc")
        e = _check_int(epoch, key, "epoch", InvalidKey)
        _check_token(dc, key, "dc", InvalidKey, dots=False)
        return cls(e, dc)

    def format(self) -> str:
        """Returns: the key text, ``<epoch>-<dc>``."""
        return f"{self.epoch}-{self.dc}"

    def __str__(self) -> str:
        return self.format()

    def chunk_key(self, ref: ChunkRef) -> ChunkKey:
        """Returns: the chunk key of metadata entry ``ref`` in this epoch and dc."""
        return ref.key(self.epoch, self.dc)


def parse_metadata(
    value: str | bytes | bytearray | memoryview, *, key: str | None = None
) -> tuple[ChunkRef, ...]:
    """Parse a metadata value into its entries, sorted and without duplicates.

    Readers are lenient about order and repeats (another writer may not sort) but strict
    about every entry's form. An empty value means an epoch with no chunks.

    Args:
        value: the stored value, ``str`` or ASCII ``bytes``.
        key: the metadata key it was read from, named in errors.

    Returns:
        The distinct entries in canonical order (see :func:`format_metadata`).

    Raises:
        InvalidMetadataValue: naming the key (or the value) and the offending entry.
    """
    label = repr(value) if key is None else f"{value!r} of key {key}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            text = bytes(value).decode("ascii")
        except UnicodeDecodeError as e:
            raise InvalidMetadataValue(label, f"byte {e.start}", "is not ASCII") from None
    elif isinstance(value, str):
        text = value
        if not text.isascii():
            raise InvalidMetadataValue(label, "value", "is not ASCII")
    else:
        raise InvalidMetadataValue(
            repr(value), "value", f"must be str or bytes, not {type(value).__name__}"
        )
    if text == "":
        return ()
    refs = {ChunkRef.parse(entry, value=label, index=i) for i, entry in enumerate(text.split("|"))}
    return tuple(sorted(refs, key=_sort_key))


def _sort_key(ref: ChunkRef) -> str:
    # The canonical order is plain byte order of the entry text, the order any language
    # gets from sorting the strings (Erlang lists:usort on binaries, Perl sort, ...).
    # So "t::10" sorts before "t::2"; readers that want chunk order sort by ChunkRef.
    return ref.format()


def format_metadata(refs: Iterable[ChunkRef | ChunkKey]) -> str:
    """Format metadata entries: ASCII, byte-order sorted, duplicates removed, ``|``-joined.

    Args:
        refs: entries, or chunk keys (their epoch and dc are dropped: the metadata key
            holds them; callers must only pass keys of that epoch and dc).

    Returns:
        The metadata value text (empty for no entries).
    """
    texts = {(r.ref if isinstance(r, ChunkKey) else r).format() for r in refs}
    return "|".join(sorted(texts))


def merge_metadata(*values: str | bytes | Iterable[ChunkRef | ChunkKey]) -> str:
    """Merge metadata values: the sorted union of their entries, never dropping one.

    A late blob for an epoch whose metadata exists adds its chunks to the stored value;
    another writer's entries are always kept.

    Args:
        values: stored values (``str`` / ``bytes``) or iterables of entries.

    Returns:
        The merged value text.

    Raises:
        InvalidMetadataValue: when one of the stored values is malformed.
    """
    merged: set[ChunkRef] = set()
    for v in values:
        if isinstance(v, (str, bytes, bytearray, memoryview)):
            merged.update(parse_metadata(v))
        else:
            merged.update(r.ref if isinstance(r, ChunkKey) else r for r in v)
    return format_metadata(merged)


@dataclass(frozen=True)
class Namespaces:
    """Where things are stored: bucket types and buckets, all configurable.

    Attributes:
        events_bucket_type, events_bucket: the chunks of events.
        epochs_bucket_type, epochs_bucket: the metadata; writing here fires the hook.
        substreams_bucket_type: substream results; the bucket is the substream's name.

    Raises:
        InvalidName: on construction, for a name outside ``[A-Za-z0-9_][A-Za-z0-9_.-]*``.
    """

    events_bucket_type: str = EVENTS_BUCKET_TYPE
    events_bucket: str = EVENTS_BUCKET
    epochs_bucket_type: str = EPOCHS_BUCKET_TYPE
    epochs_bucket: str = EPOCHS_BUCKET
    substreams_bucket_type: str = SUBSTREAMS_BUCKET_TYPE

    def __post_init__(self) -> None:
        for field in (
            "events_bucket_type",
            "events_bucket",
            "epochs_bucket_type",
            "epochs_bucket",
            "substreams_bucket_type",
        ):
            check_bucket_name(getattr(self, field), field)

    def chunk_location(self, key: ChunkKey) -> tuple[str, str, str]:
        """Returns: ``(bucket_type, bucket, key)`` of a chunk."""
        return (self.events_bucket_type, self.events_bucket, key.format())

    def metadata_location(self, key: MetadataKey) -> tuple[str, str, str]:
        """Returns: ``(bucket_type, bucket, key)`` of an epoch's metadata."""
        return (self.epochs_bucket_type, self.epochs_bucket, key.format())

    def substream_location(self, substream: str, key: ChunkKey) -> tuple[str, str, str]:
        """Returns: ``(bucket_type, bucket, key)`` of a substream result for a chunk.

        Raises:
            InvalidName: when ``substream`` is not a valid bucket name.
        """
        check_bucket_name(substream, "substream")
        return (self.substreams_bucket_type, substream, key.format())


def check_bucket_name(name: str, what: str = "bucket") -> str:
    """Check a bucket, bucket type or substream name: ``[A-Za-z0-9_][A-Za-z0-9_.-]*``.

    Riak allows more, but these names appear in URLs, file names and metric labels, so we
    keep them to characters that need no escaping anywhere.

    Returns:
        ``name`` unchanged.

    Raises:
        InvalidName: naming ``what`` and the offending name.
    """
    if not isinstance(name, str) or not _BUCKET_RE.fullmatch(name):
        raise InvalidName(repr(name), what, "does not match [A-Za-z0-9_][A-Za-z0-9_.-]*")
    return name


#: The default namespaces: events/events, epochs/epochs, substreams/<name>.
DEFAULT_NAMESPACES = Namespaces()
