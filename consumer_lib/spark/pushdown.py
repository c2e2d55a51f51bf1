"""``where=`` and ``select=`` of the batch source: the query plugins' plan, evaluated in
the walk of each chunk on the executors.

    load_events(spark, ..., where="typeof(status) = 'integer' AND status >= 500",
                select=["url", "status", '"search.city" AS city'])

Both options are SQL in the dialect of query plugins (``substreams/query/parse.py``:
a nested path in double quotes, ``"search.city"``; comparisons, ``AND``/``OR``/``NOT``,
``IN``, ``IS [NOT] NULL``, prefix ``LIKE``, ``typeof``), parsed by the same parser into
the same plan (:class:`substreams.query.plan.Plan`), once, on the driver: SQL outside
the subset is one line naming the construct (:class:`SparkSourceError`) before any read.

On the executor, per chunk (:class:`ChunkQuery`):

- with ``select``: the compiled core's walk of the chunk's Sereal body evaluates the
  plan (:func:`substreams.query.native.evaluate_document`, GIL released): the WHERE is
  tested in place and only a matching event's selected values become Python objects;
  where the walk does not take the chunk (the ``latin1`` mode, references, a container
  selected...), the reference evaluator over the decoded chunk gives the same rows.
  Each selected column is VARIANT, made from the values by the codec's own Sereal ->
  Variant walker (the values packed as one Sereal array per column and batch), so a
  value is byte for byte what ``event:path`` of the full read gives; a missing path
  (or a null) is SQL NULL.
- with ``where`` alone: the rows are whole events (``event``), so the chunk is
  transcoded as without the option and the matching events are taken from it; which
  ones match, the reference evaluator says over the chunk decoded to the WHERE's paths
  only (the walk gives rows, not positions). Cheaper for Spark (fewer rows), not for
  the executor: prefer ``select``.

Pure logic, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

import sereal_codec as sereal
from consumer_lib.errors import SparkSourceError
from substreams.errors import InvalidDeclaration
from substreams.query.evaluate import Rows, evaluate
from substreams.query.native import Program, compile_program, evaluate_document
from substreams.query.parse import parse_query
from substreams.query.plan import Column, Path, Plan, Predicate, under

__all__ = ["KEY_COLUMNS", "ChunkQuery", "Pushdown", "parse_pushdown", "variant_column"]

#: The rows' key columns: a selected column may not take one of these names.
KEY_COLUMNS = ("epoch", "dc", "type", "subtype", "chunk")


@dataclass(frozen=True)
class Pushdown:
    """The parsed ``where``/``select`` options (picklable: sent to the executors).

    Attributes:
        plan: the plan: ``outputs`` are the selected columns (empty without ``select``),
            ``where`` the condition (None without ``where``).
        select: whether ``select`` was given (rows are the selected columns, not events).
    """

    plan: Plan
    select: bool

    @property
    def columns(self) -> tuple[str, ...]:
        """The selected columns' names, in order."""
        return tuple(o.name for o in self.plan.outputs)


def _parsed(option: str, sql: str) -> Plan:
    try:
        return parse_query(option, sql)
    except InvalidDeclaration as e:
        message = str(e).removeprefix(f"query {option}: ")
        raise SparkSourceError(f"option {option!r}: {message}") from None


def parse_pushdown(where: str | None, select: str | None) -> Pushdown | None:
    """The plan of the ``where`` and ``select`` options (None when neither is given).

    Args:
        where: a condition over the event's paths (the body of a query's WHERE).
        select: a select list: paths, ``path AS name``, ``literal AS name``.

    Raises:
        SparkSourceError: one line naming the option and what is wrong: SQL that does
            not parse, a construct outside the subset, an aggregate, a clause smuggled
            into the option, a column named like a key column.
    """
    where = where.strip() if where is not None else ""
    select = select.strip() if select is not None else ""
    if not where and not select:
        return None
    condition: Predicate | None = None
    if where:
        # In parentheses: a condition, and nothing after it (no GROUP BY appended).
        parsed = _parsed("where", f"SELECT 1 AS one FROM events WHERE ({where})")
        if parsed.group_by or len(parsed.outputs) != 1:
            raise SparkSourceError(f"option 'where' must be one condition: {where!r}")
        condition = parsed.where
    outputs: tuple[Column, ...] = ()
    if select:
        parsed = _parsed("select", f"SELECT {select} FROM events")
        if parsed.where is not None or parsed.group_by:
            raise SparkSourceError(f"option 'select' must be a select list only: {select!r}")
        if parsed.aggregates:
            raise SparkSourceError(
                "option 'select': aggregates (count, sum, min, max, histogram) are not "
                "supported in a read: aggregate the rows in Spark"
            )
        outputs = tuple(o for o in parsed.outputs if isinstance(o, Column))
        seen: dict[str, str] = {}
        for output in outputs:
            lower = output.name.lower()
            if lower in KEY_COLUMNS or lower in seen:
                other = f"the key column {lower!r}" if lower in KEY_COLUMNS else repr(seen[lower])
                raise SparkSourceError(
                    f"option 'select': the column {output.name!r} is named like {other} "
                    "(Spark's column names ignore case): rename it with AS"
                )
            seen[lower] = output.name
    return Pushdown(Plan("load_events", outputs, condition), select=bool(select))


class ChunkQuery:
    """The pushdown on one executor: the plan compiled once, evaluated per chunk.

    Args:
        pushdown: the parsed options.
        binary: the source's ``binary`` option (``utf8``, ``latin1``, ``bytes``).
    """

    def __init__(self, pushdown: Pushdown, binary: str) -> None:
        self.pushdown = pushdown
        self.binary = binary
        self.program: Program | None = None
        self._marked: Plan | None = None
        self._fields: tuple[str, ...] = ()
        plan = pushdown.plan
        if pushdown.select:
            self.program = compile_program([plan])
        elif plan.where is not None:
            # Each event wrapped as {"e": event, "i": its position}: the reference
            # evaluator's rows then say which events match.
            self._marked = Plan(plan.name, (Column("i", Path(("i",))),), under("e", plan.where))
            self._fields = plan.fields

    def rows(self, document: bytes | memoryview) -> Rows:
        """The selected columns of the chunk's matching events, one dict each, in
        event order (``select`` given).

        Raises:
            SerealDecodeError: the chunk does not decode (only where the walk did not
                take it and the reference decodes it).
        """
        assert self.program is not None
        (rows,) = evaluate_document(self.program, bytes(document), binary=self.binary)
        return rows

    def matching(self, document: bytes | memoryview) -> list[int] | None:
        """The positions of the chunk's events the WHERE keeps (``where`` alone), or None
        when there is no WHERE.

        Raises:
            SerealDecodeError: the chunk does not decode.
        """
        if self._marked is None:
            return None
        events = sereal.decode(document, binary=self.binary, fields=self._fields)
        if not isinstance(events, list):
            return []  # as the transcoders: a body that is no array has no events
        marked = ({"e": event, "i": i} for i, event in enumerate(events))
        return [row["i"] for row in evaluate(self._marked, marked)]


def variant_column(values: Sequence[object], binary: str, type_: pa.DataType) -> pa.Array:
    """``values`` (a column of rows) as a VARIANT column: the struct of ``value`` and
    ``metadata`` binaries pyspark maps to VARIANT (``type_``, the schema's), made by the
    codec's Sereal -> Variant walker; None is SQL NULL.

    Raises:
        SerealEncodeError: a value the codec cannot encode (rows hold decoded values only).
    """
    document = sereal.encode(list(values), compress=None)
    value, value_offsets, metadata, metadata_offsets = sereal.decode_variant_packed(
        document, binary=binary
    )
    n = len(values)
    children = [
        pa.Array.from_buffers(
            pa.binary(), n, [None, pa.py_buffer(value_offsets), pa.py_buffer(value)]
        ),
        pa.Array.from_buffers(
            pa.binary(), n, [None, pa.py_buffer(metadata_offsets), pa.py_buffer(metadata)]
        ),
    ]
    nulls = pa.array([v is None for v in values], pa.bool_())
    return pa.StructArray.from_arrays(children, fields=list(type_), mask=nulls)
