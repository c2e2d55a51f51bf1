"""SQL to a query plan: a declarative substream's text, parsed by ``sqlglot``, checked
against the subset the plan can say, and compiled (:func:`parse_query`).

The subset (``substreams/DESIGN.md``, "Declarative substreams"):

    SELECT <path | literal AS name | aggregate> [AS name], ...
    FROM events
    [WHERE <condition>]
    [GROUP BY <path>, ...]

- a *path* is a field of the event: a plain name (``status``), or a dotted path in
  double quotes (``"search.city"``, ``"queue.0"``: ``search.city`` unquoted would be
  SQL's table.column); names are case-sensitive, as event keys are;
- a *literal*: a number, a 'text' in single quotes, TRUE, FALSE, NULL;
- a *condition*: comparisons (``=``, ``<>``/``!=``, ``<``, ``<=``, ``>``, ``>=``,
  ``BETWEEN``) of paths, literals and ``typeof(path)``; ``AND``, ``OR``, ``NOT``;
  ``IN (literals)``; ``IS [NOT] NULL``; ``[NOT] LIKE 'prefix%'`` (``%`` only at the end,
  ``_`` any one character);
- *aggregates*: ``count(*)``, ``count(path)``, ``sum``, ``min``, ``max`` of a path,
  ``histogram(path, b1, ..., bn)`` (bounds: increasing numbers); every GROUP BY path
  is selected, and every other selected path is grouped by.

Anything else is refused with one line naming the construct, raised as
``InvalidDeclaration`` when the plugin file is loaded.

Pure logic, no I/O.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NoReturn

import sqlglot
from sqlglot import exp

from substreams.errors import InvalidDeclaration
from substreams.query.plan import (
    Aggregate,
    And,
    Column,
    Compare,
    Const,
    InList,
    IsNull,
    Like,
    Not,
    Operand,
    Or,
    Output,
    Path,
    Plan,
    Predicate,
    Scalar,
    TypeOf,
)
from substreams.query.values import KINDS

__all__ = ["SUPPORTED", "parse_query"]

#: What the one-line refusal of an unsupported construct lists.
SUPPORTED = (
    "supported: SELECT paths, literals, count/sum/min/max/histogram FROM events; "
    "WHERE =, <>, <, <=, >, >=, BETWEEN, AND, OR, NOT, IN, IS [NOT] NULL, "
    "LIKE 'prefix%', typeof(path); GROUP BY paths"
)

_CLAUSES = {"expressions", "from_", "from", "where", "group"}
_CLAUSE_NAMES = {
    "with_": "WITH", "with": "WITH", "joins": "JOIN", "order": "ORDER BY", "limit": "LIMIT",
    "offset": "OFFSET", "having": "HAVING", "distinct": "DISTINCT", "qualify": "QUALIFY",
    "windows": "WINDOW", "laterals": "LATERAL", "into": "SELECT INTO", "sort": "SORT BY",
    "cluster": "CLUSTER BY", "distribute": "DISTRIBUTE BY", "locks": "FOR UPDATE",
    "sample": "TABLESAMPLE", "pivots": "PIVOT", "connect": "CONNECT BY",
}  # fmt: skip
_NODE_NAMES: dict[type[exp.Expression], str] = {
    exp.Join: "JOIN", exp.Subquery: "a subquery", exp.Star: "*", exp.Case: "CASE",
    exp.Cast: "CAST", exp.TryCast: "CAST", exp.Window: "window functions (OVER)",
    exp.Distinct: "DISTINCT", exp.ILike: "ILIKE", exp.Exists: "EXISTS",
    exp.Union: "UNION", exp.Intersect: "INTERSECT", exp.Except: "EXCEPT",
    exp.Placeholder: "parameters", exp.Bracket: "brackets (write a path as \"a.b\")",
    exp.Escape: "LIKE ... ESCAPE", exp.Xor: "XOR", exp.Is: "IS other than IS [NOT] NULL",
}  # fmt: skip
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.DPipe, exp.IntDiv)
_COMPARISONS: dict[type[exp.Expression], str] = {
    exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=",
}  # fmt: skip
_FUNCTIONS: dict[type[exp.Expression], str] = {exp.Sum: "sum", exp.Min: "min", exp.Max: "max"}


def parse_query(name: str, sql: str) -> Plan:
    """Compile ``sql`` into the plan of query ``name``.

    Raises:
        InvalidDeclaration: one line, ``query NAME: ...``: SQL that does not parse, a
            construct outside the subset (named), or a misuse of one inside it.
    """
    return _Compiler(name).statement(sql)


class _Compiler:
    def __init__(self, name: str) -> None:
        self.name = name

    def fail(self, message: str) -> NoReturn:
        raise InvalidDeclaration(f"query {self.name}: {message}")

    def unsupported(self, node: exp.Expression | str) -> NoReturn:
        what = node if isinstance(node, str) else _construct(node)
        self.fail(f"{what} is not supported ({SUPPORTED})")

    # -- the statement -----------------------------------------------------------------

    def statement(self, sql: str) -> Plan:
        if not isinstance(sql, str) or not sql.strip():
            self.fail("sql= must be a SELECT statement as text")
        try:
            trees = sqlglot.parse(sql)
        except sqlglot.errors.ParseError as e:
            first = e.errors[0] if e.errors else {}
            at = (
                f" at line {first.get('line')}, column {first.get('col')} "
                f"(near {first.get('highlight')!r})"
                if first
                else ""
            )
            what = str(first.get("description", e)).split(" but got <Token")[0]
            self.fail(f"the SQL does not parse{at}: {what}")
        except sqlglot.errors.SqlglotError as e:
            self.fail(f"the SQL does not parse: {str(e).splitlines()[0]}")
        trees = [t for t in trees if t is not None]
        if len(trees) != 1:
            self.fail(f"sql= must be one statement, not {len(trees)}")
        select: exp.Expression = trees[0]  # type: ignore[assignment]
        if isinstance(select, exp.SetOperation):
            self.unsupported(select)
        if not isinstance(select, exp.Select):
            self.fail(f"not a SELECT statement: {select.sql()[:60]!r}")
        for arg, value in select.args.items():
            if value and arg not in _CLAUSES:
                self.unsupported(_CLAUSE_NAMES.get(arg, arg.rstrip("_").upper()))
        self.source(select.args.get("from_") or select.args.get("from"))
        where: exp.Where | None = select.args.get("where")
        group: exp.Group | None = select.args.get("group")
        group_by = self.group_by(group) if group else ()
        outputs = tuple(self.output(e) for e in select.expressions)
        plan = Plan(
            name=self.name,
            outputs=outputs,
            where=self.condition(where.this) if where is not None else None,
            group_by=group_by,
        )
        self.check_outputs(plan)
        return plan

    def source(self, source: exp.Expression | None) -> None:
        if source is None:
            self.fail("FROM events is missing")
        table = source.this
        if not isinstance(table, exp.Table):
            self.unsupported(table)
        extra = [a for a, v in table.args.items() if v and a != "this"]
        if extra or not isinstance(table.this, exp.Identifier) or table.name != "events":
            self.fail(f"FROM must name the table events (a chunk's events), not {table.sql()!r}")

    def group_by(self, group: exp.Group) -> tuple[Path, ...]:
        for arg, value in group.args.items():
            if value and arg != "expressions":
                self.unsupported(f"GROUP BY {arg.upper()}")
        paths = []
        for node in group.expressions:
            if not isinstance(node, exp.Column):
                self.fail(f"GROUP BY takes paths, not {node.sql()!r}")
            paths.append(self.path(node))
        if len(set(paths)) != len(paths):
            self.fail("GROUP BY names a path twice")
        return tuple(paths)

    def check_outputs(self, plan: Plan) -> None:
        names = [o.name for o in plan.outputs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            self.fail(f"the column name {twice[0]!r} is given twice (use AS)")
        if not plan.aggregates:
            return
        grouped = set(plan.group_by)
        selected = set()
        for output in plan.outputs:
            if isinstance(output, Column) and isinstance(output.value, Path):
                if output.value not in grouped:
                    self.fail(
                        f"{output.value.dotted} is selected but neither grouped by nor "
                        "aggregated (add it to GROUP BY, or aggregate it)"
                    )
                if output.value in selected:
                    self.fail(f"{output.value.dotted} is selected twice in a GROUP BY query")
                selected.add(output.value)
        for path in plan.group_by:
            if path not in selected:
                self.fail(
                    f"GROUP BY {path.dotted}: select it too, so partial results of "
                    "chunks can be merged by their rows"
                )

    # -- SELECT ------------------------------------------------------------------------

    def output(self, node: exp.Expression) -> Output:
        alias = None
        if isinstance(node, exp.Alias):
            alias, node = node.alias, node.this
        if isinstance(node, exp.Column):
            path = self.path(node)
            return Column(alias or path.dotted, path)
        if isinstance(node, exp.Count | exp.Sum | exp.Min | exp.Max) or _is_call(node, "histogram"):
            agg = self.aggregate(node)
            return Aggregate(alias or agg.name, agg.function, agg.path, agg.bounds)
        if _is_literal(node):
            if alias is None:
                self.fail(f"the literal {node.sql()} needs a name: {node.sql()} AS name")
            return Column(alias, Const(self.literal(node)))
        self.unsupported(node)

    def aggregate(self, node: exp.Expression) -> Aggregate:
        if isinstance(node, exp.Count):
            arg = node.this
            if isinstance(arg, exp.Star):
                return Aggregate("count", "count")
            if node.expressions or not isinstance(arg, exp.Column):
                self.unsupported(arg if isinstance(arg, exp.Distinct) else node)
            path = self.path(arg)
            return Aggregate(f"count_{path.dotted}", "count", path)
        if isinstance(node, exp.Sum | exp.Min | exp.Max):
            function = _FUNCTIONS[type(node)]
            extra = [a for a, v in node.args.items() if v and a != "this"]
            if extra or not isinstance(node.this, exp.Column):
                self.fail(f"{function}() takes one path, not {node.sql()!r}")
            path = self.path(node.this)
            return Aggregate(f"{function}_{path.dotted}", function, path)  # type: ignore[arg-type]
        args = node.expressions
        if len(args) < 2 or not isinstance(args[0], exp.Column):
            self.fail("histogram() takes a path and its buckets' upper bounds: "
                      "histogram(duration_ms, 10, 100, 1000)")  # fmt: skip
        path = self.path(args[0])
        bounds = []
        for arg in args[1:]:
            value = self.literal(arg) if _is_literal(arg) else None
            if isinstance(value, bool) or not isinstance(value, int | float):
                self.fail(f"histogram() bounds are numbers, not {arg.sql()}")
            bounds.append(value)
        if any(a >= b for a, b in itertools.pairwise(bounds)):
            self.fail(f"histogram() bounds must increase: {', '.join(map(str, bounds))}")
        return Aggregate(f"histogram_{path.dotted}", "histogram", path, tuple(bounds))

    # -- WHERE -------------------------------------------------------------------------

    def condition(self, node: exp.Expression) -> Predicate:
        if isinstance(node, exp.Paren):
            return self.condition(node.this)
        if isinstance(node, exp.And | exp.Or):
            items: list[Predicate] = []
            for side in (node.this, node.expression):
                item = self.condition(side)
                same = isinstance(item, And) if isinstance(node, exp.And) else isinstance(item, Or)
                items.extend(item.items if same else [item])  # type: ignore[union-attr]
            return And(tuple(items)) if isinstance(node, exp.And) else Or(tuple(items))
        if isinstance(node, exp.Not):
            return Not(self.condition(node.this))
        if type(node) in _COMPARISONS:
            left, right = self.operand(node.this), self.operand(node.expression)
            for side in (left, right):
                if isinstance(side, Const) and side.value is None:
                    self.fail(f"{node.sql()!r} is never true: write IS NULL or IS NOT NULL")
            self.check_kind_literal(left, right)
            return Compare(_COMPARISONS[type(node)], left, right)  # type: ignore[arg-type]
        if isinstance(node, exp.Between):
            value = self.operand(node.this)
            low, high = self.operand(node.args["low"]), self.operand(node.args["high"])
            return And((Compare(">=", value, low), Compare("<=", value, high)))
        if isinstance(node, exp.In):
            return self.in_list(node)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return IsNull(self.operand(node.this))
        if isinstance(node, exp.Like):
            return self.like(node)
        if isinstance(node, exp.Column):
            self.fail(
                f"WHERE {node.sql()}: a path is not a condition; compare it ({node.sql()} = TRUE)"
            )
        self.unsupported(node)

    def in_list(self, node: exp.In) -> Predicate:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            self.unsupported("IN (SELECT ...)")
        values: list[Const] = []
        for item in node.expressions:
            if not _is_literal(item):
                self.fail(f"IN takes a list of literals, not {item.sql()!r}")
            literal = self.literal(item)
            if literal is None:
                self.fail("IN (... NULL ...) is never true for it: write IS NULL")
            values.append(Const(literal))
        operand = self.operand(node.this)
        for const in values:
            self.check_kind_literal(operand, const)
        return InList(operand, tuple(values))

    def like(self, node: exp.Like) -> Predicate:
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            self.fail(f"LIKE takes a 'text' pattern, not {pattern.sql()!r}")
        text = pattern.this
        body = text[:-1] if text.endswith("%") else text
        if "%" in body:
            self.unsupported(f"LIKE {pattern.sql()} (only a prefix: '%' at the end)")
        like = Like(self.operand(node.this), body, exact=not text.endswith("%"))
        return Not(like) if node.args.get("negate") else like

    def operand(self, node: exp.Expression) -> Operand:
        if isinstance(node, exp.Paren):
            return self.operand(node.this)
        if isinstance(node, exp.Column):
            return self.path(node)
        if isinstance(node, exp.Typeof) or _is_call(node, "typeof"):
            arg = node.this if isinstance(node, exp.Typeof) else (node.expressions or [None])[0]
            if not isinstance(arg, exp.Column):
                self.fail("typeof() takes one path")
            return TypeOf(self.path(arg))
        if _is_literal(node):
            return Const(self.literal(node))
        if isinstance(node, exp.Count | exp.Sum | exp.Min | exp.Max):
            self.fail(
                f"{node.sql()}: aggregates are allowed in SELECT only (HAVING is not supported)"
            )
        self.unsupported(node)

    def check_kind_literal(self, *operands: Operand) -> None:
        if any(isinstance(o, TypeOf) for o in operands):
            for o in operands:
                if isinstance(o, Const) and o.value not in KINDS:
                    self.fail(f"typeof() gives one of {', '.join(KINDS)}; not {o.value!r}")

    # -- leaves ------------------------------------------------------------------------

    def path(self, node: exp.Column) -> Path:
        if any(node.args.get(a) for a in ("table", "db", "catalog")):
            dotted = ".".join(p.name for p in node.parts)
            self.fail(
                f"{node.sql()} reads as table.column; write a nested path in double "
                f'quotes: "{dotted}"'
            )
        ident = node.this
        if not isinstance(ident, exp.Identifier):
            self.unsupported(ident)
        text = ident.this
        parts = tuple(text.split(".")) if ident.quoted else (text,)
        if not all(parts):
            self.fail(f"the path {text!r} has an empty part")
        return Path(parts)

    def literal(self, node: exp.Expression) -> Scalar:
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        negative = isinstance(node, exp.Neg)
        if negative:
            node = node.this
        assert isinstance(node, exp.Literal)
        if node.is_string:
            return str(node.this)
        value = _number(node.this)
        if value is None:
            self.fail(f"the number {node.sql()} is not finite")
        return -value if negative else value


def _number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        value = float(text)
        return value if math.isfinite(value) else None


def _is_literal(node: exp.Expression) -> bool:
    if isinstance(node, exp.Neg):
        return isinstance(node.this, exp.Literal) and not node.this.is_string
    return isinstance(node, exp.Literal | exp.Boolean | exp.Null)


def _is_call(node: exp.Expression, name: str) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).lower() == name


def _construct(node: Any) -> str:
    for cls, name in _NODE_NAMES.items():
        if isinstance(node, cls):
            return name
    if isinstance(node, _ARITHMETIC):
        return f"arithmetic ({node.sql()})"
    if isinstance(node, exp.Anonymous):
        return f"the function {node.this}()"
    if isinstance(node, exp.Func):
        return f"the function {node.sql_name()}()"
    return f"{node.key.upper()} ({node.sql()[:40]})"
