"""The plugin API: a substream is a plain function declared with ``@substream``.

    from substreams import substream, dig

    @substream(name="web_5xx", types=["web"], timeout_s=0.5, max_result_bytes=32768)
    def web_5xx(events, ctx):
        return [
            {"url": dig(e, "http.url"), "ms": dig(e, "http.latency_ms")}
            for e in events
            if (dig(e, "http.status") or 0) >= 500
        ]

The decorator does not wrap or change the function: it attaches a :class:`Substream`
declaration as ``f.__substream__`` and returns ``f`` itself, so the same function is
called unchanged by the companion (inside the sandbox) and by the consumer library's
client-side fallback (a plain call). A plugin's version is the hash of its source file,
recorded in every result it produces. A substream may also be declared as a query
(``substreams.query.query``): the same :class:`Substream`, its function the query's
evaluator and its :attr:`Substream.plan` the compiled query.

Pure logic, no I/O except reading the plugin's own source to hash it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import inspect
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from eventstore.names import ChunkKey
from sereal_codec.projection import Tree, compile_fields
from substreams import defaults
from substreams.errors import InvalidDeclaration

if TYPE_CHECKING:  # the plan's types only: substreams.query imports this module
    from substreams.query.plan import Plan

__all__ = [
    "Context",
    "Event",
    "Substream",
    "SubstreamFunction",
    "check_name",
    "declaration_of",
    "declare",
    "substream",
    "union_fields",
    "version_of",
]

#: One decoded event: a dict at the top level (schema-less below it).
Event = dict[str, Any]
#: What a plugin is: events of one chunk and its context in, a small result out.
SubstreamFunction = Callable[[list[Event], "Context"], Any]
F = TypeVar("F", bound=Callable[..., Any])

_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
_PATTERN_RE = re.compile(r"[A-Za-z0-9_.*?\[\]!-]*")


@dataclass(frozen=True)
class Context:
    """Where the events of one run come from.

    Attributes:
        epoch: unix seconds, UTC.
        dc: data centre.
        type, subtype: the chunk's event type and subtype (subtype may be empty).
        chunk: the chunk number within (epoch, dc, type, subtype).
    """

    epoch: int
    dc: str
    type: str
    subtype: str
    chunk: int

    @classmethod
    def of(cls, key: ChunkKey) -> Context:
        """Returns: the context of the chunk stored under ``key``."""
        return cls(key.epoch, key.dc, key.type, key.subtype, key.chunk)

    @property
    def key(self) -> ChunkKey:
        """The chunk key these events were read from."""
        return ChunkKey(self.epoch, self.dc, self.type, self.subtype, self.chunk)


def version_of(source: bytes) -> str:
    """A plugin's version: the first 16 hex digits of the SHA-256 of its source bytes."""
    return hashlib.sha256(source).hexdigest()[:16]


@dataclass(frozen=True)
class Substream:
    """One declared substream.

    Attributes:
        name: the substream's name, also its results' bucket (``[A-Za-z0-9_][A-Za-z0-9_.-]*``).
        function: the plain function ``f(events, ctx) -> result``.
        types, subtypes: glob patterns of the event types/subtypes it reads; empty = all.
        timeout_s: wall-clock limit of one run, seconds.
        memory_mb: memory a run may allocate above what it inherits, MiB.
        max_result_bytes: size limit of one Sereal-encoded result, bytes.
        version: hash of the plugin's source (:func:`version_of`).
        origin: where it was loaded from (file path or entry point), for messages.
        fields: the fields of each event it reads, as dotted paths (``None``: all of
            them); every run, in the companion and in the consumer's fallback, sees
            each event narrowed to them (``sereal_codec/projection.py``).
        plan: a declarative substream's compiled query (``substreams.query``), whose
            evaluator is ``function``; None for a function plugin.
    """

    name: str
    function: SubstreamFunction = field(compare=False)
    types: tuple[str, ...] = ()
    subtypes: tuple[str, ...] = ()
    timeout_s: float = defaults.TIMEOUT_S
    memory_mb: int = defaults.MEMORY_MB
    max_result_bytes: int = defaults.MAX_RESULT_BYTES
    version: str = ""
    origin: str = ""
    fields: tuple[str, ...] | None = None
    plan: Plan | None = field(default=None, compare=False)

    @property
    def projection(self) -> Tree | None:
        """The compiled :attr:`fields` (``None``: every field)."""
        return compile_fields(self.fields)

    def matches(self, type_: str, subtype: str) -> bool:
        """Whether this substream reads chunks of ``type_`` / ``subtype``."""
        if self.types and not any(fnmatch.fnmatchcase(type_, p) for p in self.types):
            return False
        return not self.subtypes or any(fnmatch.fnmatchcase(subtype, p) for p in self.subtypes)

    def __call__(self, events: list[Event], ctx: Context) -> Any:
        """Run the plugin in this process, without any limit (the consumer fallback)."""
        return self.function(events, ctx)

    def with_origin(self, *, version: str, origin: str) -> Substream:
        """Returns: a copy naming its source version and origin."""
        return replace(self, version=version, origin=origin)


def _patterns(value: Iterable[str] | None, what: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    patterns = tuple(value)
    for p in patterns:
        if not isinstance(p, str) or not _PATTERN_RE.fullmatch(p):
            raise InvalidDeclaration(f"substream {name!r}: {what} pattern {p!r} is not valid")
    return () if "*" in patterns else patterns


def _fields(value: Sequence[str] | None, name: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(f, str) for f in value):
        raise InvalidDeclaration(
            f"substream {name!r}: fields must be a list of dotted paths, not {value!r}"
        )
    try:
        compile_fields(value)
    except ValueError as e:
        raise InvalidDeclaration(f"substream {name!r}: {e}") from None
    return tuple(dict.fromkeys(value))


def _number(value: object, what: str, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidDeclaration(f"substream {name!r}: {what} must be a number, not {value!r}")
    if not low < value <= high:
        raise InvalidDeclaration(f"substream {name!r}: {what}={value} is outside ({low}, {high}]")
    return float(value)


def substream(
    *,
    name: str,
    types: Sequence[str] | None = None,
    subtypes: Sequence[str] | None = None,
    timeout_s: float = defaults.TIMEOUT_S,
    memory_mb: int = defaults.MEMORY_MB,
    max_result_bytes: int = defaults.MAX_RESULT_BYTES,
    fields: Sequence[str] | None = None,
) -> Callable[[F], F]:
    """Declare a function as a substream.

    Args:
        name: the substream's name; its results are stored in the bucket of that name.
        types, subtypes: glob patterns (``"web"``, ``"web.*"``) of the chunks it reads;
            ``None`` or ``["*"]`` for all.
        timeout_s: wall-clock limit of one run on one chunk, seconds (<= 30).
        memory_mb: memory a run may allocate, MiB (<= 8192).
        max_result_bytes: limit of one Sereal-encoded result, bytes (<= 4 MiB).
        fields: the dotted paths of each event the function reads
            (``["status", "http.latency_ms"]``); ``None`` for all. Each event it is given
            holds only those (a path into a list or a scalar keeps it whole), so the
            companion builds no more of a chunk than its substreams read.

    Returns:
        A decorator that attaches the declaration as ``f.__substream__`` and returns ``f``.

    Raises:
        InvalidDeclaration: a name, pattern, limit or field out of its domain.
    """
    declared = declare(
        name=name,
        types=types,
        subtypes=subtypes,
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        max_result_bytes=max_result_bytes,
        fields=fields,
    )

    def attach(function: F) -> F:
        if not callable(function):
            raise InvalidDeclaration(f"substream {name!r}: @substream must decorate a function")
        version, origin = "", getattr(function, "__qualname__", name)
        source_file = inspect.getsourcefile(function)
        if source_file is not None and Path(source_file).is_file():
            origin = source_file
            version = version_of(Path(source_file).read_bytes())
        function.__substream__ = replace(  # type: ignore[attr-defined]
            declared, function=function, version=version, origin=origin
        )
        return function

    return attach


def check_name(name: object) -> str:
    """Returns: ``name``, a valid substream name.

    Raises:
        InvalidDeclaration: it does not match ``[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}``.
    """
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidDeclaration(
            f"substream name {name!r} does not match [A-Za-z0-9_][A-Za-z0-9_.-]{{0,99}}"
        )
    return name


def declare(
    *,
    name: str,
    types: Sequence[str] | None = None,
    subtypes: Sequence[str] | None = None,
    timeout_s: float = defaults.TIMEOUT_S,
    memory_mb: int = defaults.MEMORY_MB,
    max_result_bytes: int = defaults.MAX_RESULT_BYTES,
    fields: Sequence[str] | None = None,
) -> Substream:
    """A validated declaration without its function yet: what ``@substream`` and
    ``substreams.query.query`` share (arguments as :func:`substream`'s).

    Raises:
        InvalidDeclaration: a name, pattern, limit or field out of its domain.
    """
    check_name(name)
    return Substream(
        name=name,
        function=lambda events, ctx: None,
        types=_patterns(types, "types", name),
        subtypes=_patterns(subtypes, "subtypes", name),
        timeout_s=_number(timeout_s, "timeout_s", name, 0.0, defaults.MAX_TIMEOUT_S),
        memory_mb=int(_number(memory_mb, "memory_mb", name, 0.0, defaults.MAX_MEMORY_MB)),
        max_result_bytes=int(
            _number(max_result_bytes, "max_result_bytes", name, 0, defaults.MAX_RESULT_BYTES_CAP)
        ),
        fields=_fields(fields, name),
    )


def declaration_of(obj: object) -> Substream | None:
    """Returns: the :class:`Substream` attached to ``obj`` by ``@substream``, else None."""
    declared = getattr(obj, "__substream__", None)
    return declared if isinstance(declared, Substream) else None


def union_fields(substreams: Sequence[Substream]) -> list[str] | None:
    """Every field any of ``substreams`` declares, to decode a chunk once for all of them
    (None: one of them reads every field)."""
    if any(sub.fields is None for sub in substreams):
        return None
    return [field for sub in substreams for field in sub.fields or ()]
