"""The reference evaluator of a query plan over one chunk's (projected) events.

    rows = evaluate(plan, events)      # SELECT: a list of row dicts
                                       # GROUP BY / aggregates: the chunk's partial
    merged = merge_rows(plan, [rows_of_chunk1, rows_of_chunk2, ...])

Any other evaluator of a plan (the compiled core's walk, later) must give what this one
gives on the same events; the semantics are those of :mod:`substreams.query.values`
and :mod:`substreams.query.aggregate` (``substreams/DESIGN.md``, "Declarative
substreams"). :func:`compile_plan` turns a plan into one Python function once, so a run
costs a walk of the events with no interpretation of the tree.

Pure logic, no I/O.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any

from substreams.query import aggregate
from substreams.query import plan as nodes
from substreams.query.values import NULL, OTHER, TEXT, getter, group_key, scalar, typeof

__all__ = ["Rows", "compile_plan", "evaluate", "merge_rows"]

#: A query's result: its rows (SELECT), or a chunk's partial aggregate (one row a group).
Rows = list[dict[str, Any]]
#: A compiled condition: an event -> True, False or None (unknown: a NULL was compared).
_Test = Callable[[Any], "bool | None"]

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def evaluate(plan: nodes.Plan, events: Iterable[Any]) -> Rows:
    """The plan's result on one chunk's events (see :func:`compile_plan`)."""
    return compile_plan(plan)(events)


def compile_plan(plan: nodes.Plan) -> Callable[[Iterable[Any]], Rows]:
    """The plan as one function from a chunk's events to its result.

    The result: for a SELECT, one dict per event the WHERE keeps, in event order, with
    every output column (a missing path is None; values as the event holds them); for
    a GROUP BY or aggregate query, one dict per group in order of first appearance,
    its key columns then its aggregates in SELECT order (without GROUP BY, exactly one
    row, even for no event).
    """
    keep = _condition(plan.where) if plan.where is not None else None
    if not plan.aggregates:
        return _select(plan, keep)
    return _grouped(plan, keep)


def _select(plan: nodes.Plan, keep: _Test | None) -> Callable[[Iterable[Any]], Rows]:
    columns = [(c.name, _value(c.value)) for c in plan.outputs if isinstance(c, nodes.Column)]

    def select(events: Iterable[Any]) -> Rows:
        return [
            {name: get(e) for name, get in columns}
            for e in events
            if keep is None or keep(e) is True
        ]

    return select


def _grouped(plan: nodes.Plan, keep: _Test | None) -> Callable[[Iterable[Any]], Rows]:
    keys = [getter(p) for p in plan.group_by]
    key_names = plan.key_columns()
    aggs = [o for o in plan.outputs if isinstance(o, nodes.Aggregate)]
    reads = [getter(a.path) if a.path is not None else _none for a in aggs]
    consts = {
        o.name: o.value.value
        for o in plan.outputs
        if isinstance(o, nodes.Column) and isinstance(o.value, nodes.Const)
    }

    def grouped(events: Iterable[Any]) -> Rows:
        groups: dict[tuple[Any, ...], tuple[list[Any], list[Any]]] = {}
        for e in events:
            if keep is not None and keep(e) is not True:
                continue
            values = [get(e) for get in keys]
            gk = tuple(group_key(v) for v in values)
            group = groups.get(gk)
            if group is None:
                shown = [None if k == ("null",) else v for k, v in zip(gk, values, strict=True)]
                group = groups[gk] = (shown, [aggregate.start(a) for a in aggs])
            states = group[1]
            for i, agg in enumerate(aggs):
                states[i] = aggregate.step(agg, states[i], reads[i](e))
        if not groups and not plan.group_by:
            groups[()] = ([], [aggregate.start(a) for a in aggs])
        return [
            _row(plan, consts, dict(zip(key_names, g[0], strict=True)), g[1])
            for g in groups.values()
        ]

    return grouped


def _row(
    plan: nodes.Plan, consts: dict[str, Any], keys: dict[str, Any], states: list[Any]
) -> dict[str, Any]:
    row: dict[str, Any] = {}
    it = iter(states)
    for output in plan.outputs:
        if isinstance(output, nodes.Aggregate):
            row[output.name] = next(it)
        elif output.name in keys:
            row[output.name] = keys[output.name]
        else:
            row[output.name] = consts[output.name]
    return row


def _none(event: Any) -> None:
    return None


def _value(node: nodes.Path | nodes.Const | nodes.TypeOf) -> Callable[[Any], Any]:
    if isinstance(node, nodes.Path):
        return getter(node)
    if isinstance(node, nodes.TypeOf):
        get = getter(node.path)
        return lambda e: typeof(get(e))
    constant = node.value
    return lambda e: constant


def _condition(node: nodes.Predicate) -> _Test:
    if isinstance(node, nodes.Compare):
        return _compare(node.op, _value(node.left), _value(node.right))
    if isinstance(node, nodes.InList):
        get = _value(node.operand)
        options = [scalar(c.value) for c in node.values]
        return lambda e: _is_in(scalar(get(e)), options)
    if isinstance(node, nodes.IsNull):
        get = _value(node.operand)
        return lambda e: scalar(get(e))[0] == NULL
    if isinstance(node, nodes.Like):
        return _like(_value(node.operand), node.prefix, node.exact)
    if isinstance(node, nodes.Not):
        inner = _condition(node.item)

        def negated(e: Any) -> bool | None:
            result = inner(e)
            return None if result is None else not result

        return negated
    items = [_condition(i) for i in node.items]
    if isinstance(node, nodes.And):
        return lambda e: _all(items, e)
    assert isinstance(node, nodes.Or)
    return lambda e: _any(items, e)


def _all(items: list[_Test], e: Any) -> bool | None:
    unknown = False
    for test in items:
        result = test(e)
        if result is False:
            return False
        unknown = unknown or result is None
    return None if unknown else True


def _any(items: list[_Test], e: Any) -> bool | None:
    unknown = False
    for test in items:
        result = test(e)
        if result is True:
            return True
        unknown = unknown or result is None
    return None if unknown else False


def _compare(op: str, left: Callable[[Any], Any], right: Callable[[Any], Any]) -> _Test:
    python_op = _OPS[op]

    def compare(e: Any) -> bool | None:
        ka, a = scalar(left(e))
        kb, b = scalar(right(e))
        if NULL in (ka, kb):
            return None
        if ka != kb or ka == OTHER:
            return op == "<>"  # values of different kinds are not equal, nor ordered
        return python_op(a, b)

    return compare


def _is_in(value: tuple[int, Any], options: list[tuple[int, Any]]) -> bool | None:
    kind, v = value
    if kind == NULL:
        return None
    if kind == OTHER:
        return False
    return any(kind == k and v == o for k, o in options)


def _like(get: Callable[[Any], Any], prefix: str, exact: bool) -> _Test:
    wild = "_" in prefix

    def like(e: Any) -> bool | None:
        kind, text = scalar(get(e))
        text = str(text) if kind == TEXT else text
        if kind == NULL:
            return None
        if kind != TEXT or len(text) < len(prefix) or (exact and len(text) != len(prefix)):
            return False
        if not wild:
            return text.startswith(prefix)
        return all(p in ("_", c) for p, c in zip(prefix, text, strict=False))

    return like


def merge_rows(plan: nodes.Plan, partials: Iterable[Rows]) -> Rows:
    """Merge the partial aggregates of many chunks into one, as if one chunk had held
    all their events (a sum of floats may differ in its last bits: the order of the
    additions differs). For a SELECT, the rows of every partial in turn.

    Args:
        plan: the query's plan (``Substream.plan``).
        partials: each chunk's result.

    Returns:
        One row per group, in order of first appearance (without GROUP BY: one row).

    Raises:
        ValueError: a partial that is not a list of this query's rows (a gap's None, a
            row without one of the columns, an aggregate state of the wrong shape).
    """
    if not plan.aggregates:
        out: Rows = []
        for rows in partials:
            out.extend(_checked(plan, rows))
        return out
    key_names = plan.key_columns()
    aggs = [o for o in plan.outputs if isinstance(o, nodes.Aggregate)]
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for rows in partials:
        for row in _checked(plan, rows):
            gk = tuple(group_key(row[name]) for name in key_names)
            held = merged.get(gk)
            if held is None:
                merged[gk] = dict(row)
                continue
            for agg in aggs:
                held[agg.name] = aggregate.combine(agg, held[agg.name], row[agg.name])
    if not merged and not plan.group_by:
        return _grouped(plan, None)([])
    return list(merged.values())


def _checked(plan: nodes.Plan, rows: Any) -> list[dict[str, Any]]:
    if not isinstance(rows, list):
        raise ValueError(
            f"query {plan.name}: a partial result is {type(rows).__name__}, not a list of rows"
            + (" (a gap: its chunk has no result)" if rows is None else "")
        )
    names = [o.name for o in plan.outputs]
    for row in rows:
        if not isinstance(row, dict) or any(n not in row for n in names):
            raise ValueError(
                f"query {plan.name}: a partial row {row!r:.80} lacks a column of {names}"
            )
    return rows
