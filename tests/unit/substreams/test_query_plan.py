"""The plan's tree helpers: ``under`` moves a condition one level down, as the Spark
pushdown needs to run a plan over events wrapped with their position."""

from __future__ import annotations

import pytest

from substreams.query.evaluate import evaluate
from substreams.query.parse import parse_query
from substreams.query.plan import Column, Path, Plan, under

EVENTS = [
    {"status": 503, "url": "/api/a", "tags": ["x"], "user": {"id": 7}},
    {"status": 200, "url": "/web/b", "user": {"id": None}},
    {"status": "500", "url": None},
    {"url": "/api/c", "user": {"id": 9}},
]


@pytest.mark.parametrize(
    "where",
    [
        "status >= 500",
        "status IN (200, 503) AND url LIKE '/api/%'",
        "NOT (\"user.id\" IS NULL) OR typeof(status) = 'text'",
        "url LIKE '/web/_'",
        "\"tags.0\" = 'x'",
    ],
)
def test_a_condition_moved_under_a_key_picks_the_same_wrapped_events(where: str) -> None:
    plan = parse_query("t", f"SELECT url FROM events WHERE {where}")
    assert plan.where is not None
    direct = [i for i, e in enumerate(EVENTS) if evaluate(plan, [e])]
    wrapped = Plan("t", (Column("i", Path(("i",))),), under("e", plan.where))
    marked = [{"e": e, "i": i} for i, e in enumerate(EVENTS)]
    assert [row["i"] for row in evaluate(wrapped, marked)] == direct
    assert direct, "each case must pick at least one event"
    assert len(direct) < len(EVENTS), "and leave at least one out"
