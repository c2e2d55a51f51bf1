"""The compiled form of a declarative substream: a small tree of frozen dataclasses.

A plan is data, not code: every node is a frozen dataclass of strings, numbers and
tuples, so a plan is hashable, compares by value, and round-trips through JSON
(:func:`to_dict`, :func:`from_dict`). That is what lets another evaluator take it (the
compiled core's walk of a chunk, a Spark source's pushdown) without ever seeing SQL or
Python: ``substreams/query/parse.py`` makes plans, ``substreams/query/evaluate.py`` is
the reference evaluator, and anything else that evaluates a plan must give its results
(the semantics are in ``substreams/DESIGN.md``, "Declarative substreams").

    Plan(name="web_5xx_q",
         outputs=(Column("url", Path(("url",))), Column("ms", Path(("duration_ms",)))),
         where=Compare(">=", Path(("status",)), Const(500)),
         group_by=())

Pure logic, no I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "AGGREGATE_FUNCTIONS",
    "COMPARISONS",
    "FORMAT",
    "Aggregate",
    "And",
    "Column",
    "Compare",
    "Const",
    "InList",
    "IsNull",
    "Like",
    "Not",
    "Operand",
    "Or",
    "Output",
    "Path",
    "Plan",
    "Predicate",
    "TypeOf",
    "from_dict",
    "to_dict",
    "under",
]

#: The version of the serialised form (:func:`to_dict`); bumped on any change of meaning.
FORMAT = 1

Comparison = Literal["=", "<>", "<", "<=", ">", ">="]
COMPARISONS: tuple[Comparison, ...] = ("=", "<>", "<", "<=", ">", ">=")
AggregateFunction = Literal["count", "sum", "min", "max", "histogram"]
AGGREGATE_FUNCTIONS: tuple[AggregateFunction, ...] = ("count", "sum", "min", "max", "histogram")
#: A literal's value: what SQL can spell (no bytes, no NaN or infinity).
Scalar = None | bool | int | float | str


@dataclass(frozen=True)
class Path:
    """A field of the event: its keys from the top (``("search", "city")``); a part
    that is a decimal number also indexes a list, as ``dig`` does."""

    parts: tuple[str, ...]

    @property
    def dotted(self) -> str:
        """The path as ``fields=`` spells it (``"search.city"``)."""
        return ".".join(self.parts)


@dataclass(frozen=True)
class Const:
    """A literal."""

    value: Scalar


@dataclass(frozen=True)
class TypeOf:
    """``typeof(path)``: the kind of the value, as text (``"integer"``, ...)."""

    path: Path


Operand = Path | Const | TypeOf


@dataclass(frozen=True)
class Compare:
    """``left op right``."""

    op: Comparison
    left: Operand
    right: Operand


@dataclass(frozen=True)
class InList:
    """``operand IN (values...)``: true when it equals one of them."""

    operand: Operand
    values: tuple[Const, ...]


@dataclass(frozen=True)
class IsNull:
    """``operand IS NULL`` (``IS NOT NULL`` is ``Not(IsNull(...))``)."""

    operand: Operand


@dataclass(frozen=True)
class Like:
    """``operand LIKE 'prefix%'``: ``prefix`` may hold ``_`` (any one character);
    ``exact``: the pattern had no final ``%``, so the whole text must match."""

    operand: Operand
    prefix: str
    exact: bool = False


@dataclass(frozen=True)
class And:
    items: tuple[Predicate, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Predicate, ...]


@dataclass(frozen=True)
class Not:
    item: Predicate


Predicate = Compare | InList | IsNull | Like | And | Or | Not


@dataclass(frozen=True)
class Column:
    """One output column that is not an aggregate: a path's value, or a literal."""

    name: str
    value: Path | Const


@dataclass(frozen=True)
class Aggregate:
    """One aggregate output column. ``path`` is None for ``count(*)``; ``bounds`` are the
    upper bounds of a histogram's buckets (strictly increasing; one more bucket holds
    what is above the last)."""

    name: str
    function: AggregateFunction
    path: Path | None = None
    bounds: tuple[int | float, ...] = ()


Output = Column | Aggregate


@dataclass(frozen=True)
class Plan:
    """One declarative substream, compiled.

    Attributes:
        name: the substream's name (for messages).
        outputs: the result's columns, in SELECT order.
        where: the filter (None: every event).
        group_by: the group keys; each is also an output column (so partial aggregates
            of different chunks can be merged by their rows alone).
    """

    name: str
    outputs: tuple[Output, ...]
    where: Predicate | None = None
    group_by: tuple[Path, ...] = ()

    @property
    def aggregates(self) -> bool:
        """Whether the result is a partial aggregate (GROUP BY or an aggregate) rather
        than rows."""
        return bool(self.group_by) or any(isinstance(o, Aggregate) for o in self.outputs)

    @property
    def fields(self) -> tuple[str, ...]:
        """Every path the plan reads, dotted, each once, in order of appearance: the
        substream's declared fields."""
        found: dict[str, None] = {}
        for output in self.outputs:
            if isinstance(output, Column) and isinstance(output.value, Path):
                found[output.value.dotted] = None
            elif isinstance(output, Aggregate) and output.path is not None:
                found[output.path.dotted] = None
        if self.where is not None:
            for path in _paths(self.where):
                found[path.dotted] = None
        for path in self.group_by:
            found[path.dotted] = None
        return tuple(found)

    def key_columns(self) -> tuple[str, ...]:
        """The output names of the group keys, in GROUP BY order."""
        by_path = {
            o.value: o.name
            for o in self.outputs
            if isinstance(o, Column) and isinstance(o.value, Path)
        }
        return tuple(by_path[p] for p in self.group_by)


def _paths(node: Predicate | Operand) -> list[Path]:
    if isinstance(node, Path):
        return [node]
    if isinstance(node, TypeOf):
        return [node.path]
    if isinstance(node, Const):
        return []
    if isinstance(node, Compare):
        return _paths(node.left) + _paths(node.right)
    if isinstance(node, InList | IsNull | Like):
        return _paths(node.operand)
    if isinstance(node, And | Or):
        return [p for item in node.items for p in _paths(item)]
    return _paths(node.item)


def under(key: str, node: Predicate) -> Predicate:
    """``node`` with every path read one level down, under ``key`` (``a.b`` -> ``key.a.b``):
    the condition of a plan run over wrapped events (``{key: event, ...}``)."""

    def operand(o: Operand) -> Operand:
        if isinstance(o, Path):
            return Path((key, *o.parts))
        if isinstance(o, TypeOf):
            return TypeOf(Path((key, *o.path.parts)))
        return o

    if isinstance(node, Compare):
        return dataclasses.replace(node, left=operand(node.left), right=operand(node.right))
    if isinstance(node, InList | IsNull | Like):
        return dataclasses.replace(node, operand=operand(node.operand))
    if isinstance(node, Not):
        return Not(under(key, node.item))
    return dataclasses.replace(node, items=tuple(under(key, i) for i in node.items))


_NODES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        Path, Const, TypeOf, Compare, InList, IsNull, Like, And, Or, Not, Column, Aggregate, Plan
    )
}  # fmt: skip


def to_dict(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-able data: each node a dict with ``"node"`` (its class name) and
    its fields, tuples as lists, ``"format"`` (:data:`FORMAT`) at the top."""
    out = _to_data(plan)
    assert isinstance(out, dict)
    return {"format": FORMAT, **out}


def _to_data(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: _to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"node": type(value).__name__, **data}
    if isinstance(value, tuple):
        return [_to_data(v) for v in value]
    return value


def from_dict(data: dict[str, Any]) -> Plan:
    """The plan :func:`to_dict` gave.

    Raises:
        ValueError: another format version, or data that is not a plan.
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a query plan of format {FORMAT}")
    plan = _from_data({k: v for k, v in data.items() if k != "format"})
    if not isinstance(plan, Plan):
        raise ValueError("not a query plan: the top node is not a Plan")
    return plan


def _from_data(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_from_data(v) for v in value)
    if not isinstance(value, dict):
        return value
    cls = _NODES.get(value.get("node", ""))
    if cls is None:
        raise ValueError(f"not a query plan: unknown node {value.get('node')!r}")
    try:
        return cls(**{k: _from_data(v) for k, v in value.items() if k != "node"})
    except TypeError as e:
        raise ValueError(f"not a query plan: {e}") from None
