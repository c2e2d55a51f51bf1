"""Plans evaluated by the compiled core, in one walk of a chunk's Sereal body.

    program = compile_program([plan_a, plan_b], max_result_bytes=[256 * 1024, 1 << 20])
    results = evaluate_document(program, document)     # one Rows a plan

:func:`compile_program` flattens plans once (per plugin version) into a program: int64
words and a byte pool (layout: ``sereal_codec/csrc/query_eval.h``), data only, no
code. :func:`evaluate_document` hands it with the chunk's body to
``_sereal.query_evaluate``, which walks the body once for all the plans, comparing
values in place, building only the output's Python objects, without the GIL. Whatever
the walk does not take (``sereal_codec/DESIGN.md``, "Query evaluation": the
latin-1 mode, references, objects, a container as a SELECT column, malformed input, a
plan's rows past its ``max_result_bytes``) the reference evaluator
(:mod:`substreams.query.evaluate`) answers, over the decoded chunk, so the result is
always the reference's (held to it by ``tests/unit/substreams/test_query_native.py``).

Pure logic, no I/O.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sereal_codec as sereal
from sereal_codec import compression
from sereal_codec.document import DEFAULT_MAX_DECOMPRESSED_SIZE, DEFAULT_MAX_DEPTH, read_layout
from substreams.errors import SubstreamError
from substreams.query import plan as nodes
from substreams.query.evaluate import Rows, evaluate
from substreams.query.values import _index

#: ``_sereal.query_evaluate`` (csrc/query_py.c), or None (the pure codec): the
#: reference evaluates every plan.
_query_evaluate: Callable[..., Any] | None
try:
    from sereal_codec import _sereal

    _query_evaluate = getattr(_sereal, "query_evaluate", None)
except ImportError:
    _query_evaluate = None

__all__ = [
    "NATIVE",
    "Program",
    "compile_program",
    "evaluate_body",
    "evaluate_document",
]

#: Whether the compiled core can evaluate plans here.
NATIVE = _query_evaluate is not None

_MAGIC = 0x51505230  # query_eval.h: QPROG_MAGIC
_NO_INDEX = -(2**63)
_K_UNDEF, _K_BOOL, _K_INT, _K_UINT, _K_FLOAT, _K_TEXT = range(6)
_P_AND, _P_OR, _P_NOT, _P_CMP, _P_IN, _P_ISNULL, _P_LIKE = range(1, 8)
_O_PATH, _O_CONST, _O_TYPEOF = range(3)
_CMP = {"=": 0, "<>": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
_OUT_PATH, _OUT_CONST, _OUT_AGG = range(3)
_FN = {"count": 0, "sum": 1, "min": 2, "max": 3, "histogram": 4}
#: query_eval.h: QP_MAX_DEPTH (a deeper WHERE is left to the reference).
_MAX_DEPTH = 64
_NO_CAP = 2**63 - 1


class _NotNative(SubstreamError):
    """Internal, never raised to a caller: the plan holds what the program cannot say (a
    literal beyond 64 bits, a path part that is no UTF-8, a WHERE nested past the
    evaluator's depth): the reference runs it."""


@dataclass(frozen=True)
class Program:
    """Plans flattened for the compiled core.

    Attributes:
        plans: every plan, in the caller's order (results come in this order).
        native: the indexes in ``plans`` of those the program holds; the others are
            always the reference's.
        words, pool, names, consts: the program (``query_evaluate``'s arguments).
    """

    plans: tuple[nodes.Plan, ...]
    native: tuple[int, ...]
    words: bytes
    pool: bytes
    names: tuple[tuple[str, ...], ...]
    consts: tuple[Any, ...]


class _Builder:
    def __init__(self) -> None:
        self.nodes: dict[tuple[str, ...], int] = {(): 0}
        self.node_words: list[int] = []
        self.const_words: list[int] = []
        self.consts: list[Any] = []
        self.const_index: dict[tuple[type, Any], int] = {}
        self.pool = bytearray()

    def text(self, value: str, errors: str) -> tuple[int, int]:
        try:
            data = value.encode("utf-8", errors)
        except UnicodeEncodeError:
            raise _NotNative(f"{value!r} is not UTF-8") from None
        self.pool += data
        return len(self.pool) - len(data), len(data)

    def node(self, path: nodes.Path) -> int:
        parts = path.parts
        for depth in range(1, len(parts) + 1):
            prefix = parts[:depth]
            if prefix not in self.nodes:
                part = prefix[-1]
                off, length = self.text(part, "surrogateescape")  # as keys decode
                index = _index(part)
                if index is None or not _NO_INDEX < index < 2**63:
                    index = _NO_INDEX  # never a list's: no index
                self.node_words += [self.nodes[prefix[:-1]], off, length, index]
                self.nodes[prefix] = len(self.nodes)
        return self.nodes[parts]

    def const(self, value: Any) -> int:
        key = (type(value), value)
        if key in self.const_index:
            return self.const_index[key]
        if value is None:
            words = [_K_UNDEF, 0, 0]
        elif isinstance(value, bool):
            words = [_K_BOOL, int(value), 0]
        elif isinstance(value, int):
            if -(2**63) <= value < 2**63:
                words = [_K_INT, value, 0]
            elif value < 2**64:
                words = [_K_UINT, value - 2**64, 0]
            else:
                raise _NotNative(f"the literal {value} is beyond 64 bits")
        elif isinstance(value, float):
            if math.isnan(value):
                raise _NotNative("a NaN literal")
            words = [_K_FLOAT, struct.unpack("<q", struct.pack("<d", value))[0], 0]
        elif isinstance(value, str):
            words = [_K_TEXT, *self.text(value, "strict")]
        else:
            raise _NotNative(f"a literal {type(value).__name__}")
        self.const_words += words
        self.consts.append(value)
        self.const_index[key] = len(self.consts) - 1
        return len(self.consts) - 1

    def operand(self, node: nodes.Path | nodes.Const | nodes.TypeOf) -> list[int]:
        if isinstance(node, nodes.Path):
            return [_O_PATH, self.node(node)]
        if isinstance(node, nodes.TypeOf):
            return [_O_TYPEOF, self.node(node.path)]
        return [_O_CONST, self.const(node.value)]

    def predicate(self, node: nodes.Predicate, depth: int = 0) -> list[int]:
        if depth > _MAX_DEPTH:
            raise _NotNative("a WHERE nested too deep")
        body: list[int]
        if isinstance(node, nodes.And | nodes.Or):
            op = _P_AND if isinstance(node, nodes.And) else _P_OR
            body = [len(node.items)]
            for item in node.items:
                body += self.predicate(item, depth + 1)
        elif isinstance(node, nodes.Not):
            op, body = _P_NOT, self.predicate(node.item, depth + 1)
        elif isinstance(node, nodes.Compare):
            op = _P_CMP
            body = [_CMP[node.op], *self.operand(node.left), *self.operand(node.right)]
        elif isinstance(node, nodes.InList):
            op = _P_IN
            body = [*self.operand(node.operand), len(node.values)]
            body += [self.const(c.value) for c in node.values]
        elif isinstance(node, nodes.IsNull):
            op, body = _P_ISNULL, self.operand(node.operand)
        else:
            assert isinstance(node, nodes.Like)
            op = _P_LIKE
            body = [*self.operand(node.operand), self.const(node.prefix), int(node.exact)]
        return [op, len(body) + 2, *body]

    def plan(self, plan: nodes.Plan, cap: int) -> list[int]:
        where = self.predicate(plan.where) if plan.where is not None else []
        keys = [self.node(p) for p in plan.group_by]
        outputs: list[int] = []
        for output in plan.outputs:
            if isinstance(output, nodes.Aggregate):
                node = self.node(output.path) if output.path is not None else -1
                bounds = [self.const(b) for b in output.bounds]
                outputs += [_OUT_AGG, _FN[output.function], node, len(bounds), *bounds]
            elif isinstance(output.value, nodes.Path):
                node = self.node(output.value)
                key = plan.group_by.index(output.value) if plan.aggregates else -1
                outputs += [_OUT_PATH, node, key, 0]
            else:
                outputs += [_OUT_CONST, self.const(output.value.value), 0, 0]
        head = [int(plan.aggregates), cap, len(plan.outputs), len(keys), len(where)]
        return head + where + keys + outputs


def compile_program(
    plans: Sequence[nodes.Plan], max_result_bytes: Sequence[int] | None = None
) -> Program:
    """Flatten plans into one program (once per plugin version: it is immutable).

    Args:
        plans: the declarative substreams of a chunk.
        max_result_bytes: each plan's cap (``Substream.max_result_bytes``); the walk
            stops building a plan's rows past an estimate of it and leaves that plan to
            the reference (whose result the caller then refuses as ``too_large``).
            None: no cap.

    Returns:
        The program; plans it cannot hold (a literal beyond 64 bits, a path part that
        is not UTF-8, a WHERE nested more than 64 deep) are left to the reference.
    """
    caps = list(max_result_bytes) if max_result_bytes is not None else [_NO_CAP] * len(plans)
    if len(caps) != len(plans):
        raise ValueError(f"{len(plans)} plans but {len(caps)} max_result_bytes")
    builder = _Builder()
    plan_words: list[int] = []
    native: list[int] = []
    names: list[tuple[str, ...]] = []
    for i, (plan, cap) in enumerate(zip(plans, caps, strict=True)):
        saved = (dict(builder.nodes), list(builder.node_words), list(builder.const_words),
                 list(builder.consts), dict(builder.const_index), bytes(builder.pool))  # fmt: skip
        try:
            words = builder.plan(plan, min(max(cap, 0), _NO_CAP))
        except _NotNative:
            (builder.nodes, builder.node_words, builder.const_words, builder.consts,
             builder.const_index) = saved[:5]  # fmt: skip
            builder.pool = bytearray(saved[5])
            continue
        plan_words += words
        native.append(i)
        names.append(tuple(o.name for o in plan.outputs))
    head = [_MAGIC, len(builder.nodes), len(builder.consts), len(native)]
    all_words = head + builder.node_words + builder.const_words + plan_words
    return Program(
        plans=tuple(plans),
        native=tuple(native),
        words=struct.pack(f"<{len(all_words)}q", *all_words),
        pool=bytes(builder.pool),
        names=tuple(names),
        consts=tuple(builder.consts),
    )


def evaluate_body(
    program: Program,
    buf: bytes,
    pos: int,
    end: int,
    base: int,
    *,
    binary: int = 0,
    max_depth: int = 512,
    max_objects: int = -1,
) -> list[Rows | None] | None:
    """The compiled walk alone, over an opened body (``decode_body``'s arguments).

    Returns:
        None when the walk does not take the body (the reference must answer); else
        one item for each plan of ``program.native``: its rows, or None when they went
        past its ``max_result_bytes`` (the reference must answer that plan).
    """
    if _query_evaluate is None or not program.native:
        return None
    result: list[Rows | None] | None = _query_evaluate(
        buf, pos, end, base, binary, max_depth, max_objects,
        program.words, program.pool, program.names, program.consts,
    )  # fmt: skip
    return result


def evaluate_document(
    program: Program,
    data: bytes,
    *,
    binary: str = "utf8",
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    max_objects: int | None = None,
) -> list[Rows]:
    """Every plan's result on one chunk (a Sereal document whose body is the events'
    array): natively where the walk takes it, else by the reference over the decoded
    events, which gives the same rows (or the decoder's error).

    Args:
        program: from :func:`compile_program`.
        data: the chunk's document; binary, max_depth, max_decompressed_size,
            max_objects: as :func:`sereal_codec.decode` takes them.

    Returns:
        One result a plan, in ``program.plans`` order.

    Raises:
        SerealDecodeError: what decoding the chunk raises (only ever raised by the
            reference's decode: the walk never raises on the body).
    """
    mode = {"utf8": 0, "latin1": 1, "bytes": 2}.get(binary)
    if mode is None:
        raise ValueError(f"binary must be utf8, latin1 or bytes, got {binary!r}")
    results: list[Rows | None] = [None] * len(program.plans)
    layout = read_layout(data)
    buf, pos, base = compression.unframe_body(
        data, layout.protocol, layout.doc_type, layout.body_offset, max_decompressed_size
    )
    budget = -1 if max_objects is None else max_objects
    native = evaluate_body(
        program, buf, pos, len(buf), base, binary=mode, max_depth=max_depth, max_objects=budget
    )
    if native is not None:
        for i, rows in zip(program.native, native, strict=True):
            results[i] = rows
    missing = [i for i, rows in enumerate(results) if rows is None]
    if missing:
        events = sereal.decode(
            data,
            binary=binary,
            max_depth=max_depth,
            max_decompressed_size=max_decompressed_size,
            max_objects=max_objects,
        )
        for i in missing:
            results[i] = evaluate(program.plans[i], events)
    return [rows if rows is not None else [] for rows in results]
