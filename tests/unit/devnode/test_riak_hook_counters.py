"""One set of counter names for the two hooks, listed once in erlang_hooks/README.md.

The Erlang hook's counters are the names of ``riak_events_stats:names/0``; the devnode
twin's are the fields of :class:`devnode.hook.HookCounters`. The README's
table ("Operate") lists every Erlang counter once and marks the ones the twin keeps:
this test fails when a hook counts something the table does not say, or under another
name.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from devnode.hook import HookCounters

ROOT = Path(__file__).parents[3]
GAUGES = {"backlog", "queue_len", "in_flight", "queue_max"}


def erlang_names() -> list[str]:
    source = (ROOT / "erlang_hooks" / "src" / "riak_events_stats.erl").read_text()
    body = re.search(r"^names\(\) ->\s*\[(.*?)\]\.", source, re.S | re.M)
    assert body, "riak_events_stats:names/0 not found"
    return [n.strip() for n in body.group(1).split(",")]


def readme_table() -> dict[str, bool]:
    """Counter -> kept by the twin, from the README's table of counters."""
    readme = (ROOT / "erlang_hooks" / "README.md").read_text()
    header = "| counter | counts | devnode twin |"
    assert header in readme
    rows = readme[readme.index(header) :].splitlines()[2:]
    table: dict[str, bool] = {}
    for row in rows:
        if not row.startswith("|"):
            break
        names_cell, _, twin_cell = (c.strip() for c in row.strip("|").split("|"))
        names = re.findall(r"`(\w+)`", names_cell)
        kept = set(names) if twin_cell.startswith("yes") else set(re.findall(r"`(\w+)`", twin_cell))
        assert kept <= set(names), f"README row {row!r} marks a counter it does not name"
        for name in names:
            assert name not in table, f"README names {name} twice"
            table[name] = name in kept
    return table


def test_readme_lists_every_erlang_counter_once() -> None:
    counters = [n for n in erlang_names() if n not in GAUGES]
    assert len(counters) == 18
    assert sorted(readme_table()) == sorted(counters)


def test_twin_counts_by_the_erlang_names_the_readme_marks() -> None:
    twin = [f.name for f in fields(HookCounters)]
    assert sorted(twin) == sorted(name for name, kept in readme_table().items() if kept)
    # In the Erlang hook's order, so /stats and status() read alike.
    order = erlang_names()
    assert twin == sorted(twin, key=order.index)
