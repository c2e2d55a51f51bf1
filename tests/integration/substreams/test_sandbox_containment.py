"""The sandbox on its own: each hostile plugin is contained and classified.

These fork real children (so they are not unit tests) but need no server. What the
sandbox prevents, and what it does not, is documented in substreams/DESIGN.md; the
last tests here pin the "does not" side so the documentation stays true.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from companion.testing import process_alive
from sereal_codec.projection import Tree, project_events
from substreams import sandbox
from substreams.api import Context, Event, Substream
from substreams.batch import run_batch
from substreams.child import Loader
from substreams.loader import load_file
from substreams.protocol import Isolation
from substreams.results import read_result, stored_value
from substreams.sandbox import run_substreams

HOSTILE = """
import ctypes, os, socket, time
from substreams import substream

@substream(name="good")
def good(events, ctx):
    return {"n": len(events), "epoch": ctx.epoch, "key": str(ctx.key)}

@substream(name="infinite_loop", timeout_s=0.3)
def infinite_loop(events, ctx):
    while True:
        pass

@substream(name="stubborn_loop", timeout_s=0.3)
def stubborn_loop(events, ctx):
    while True:  # swallows even the soft timeout: only SIGKILL ends it
        try:
            while True:
                pass
        except BaseException:
            pass

@substream(name="sleeper", timeout_s=0.3)
def sleeper(events, ctx):
    time.sleep(30)

@substream(name="memory_bomb", memory_mb=64)
def memory_bomb(events, ctx):
    hoard = []
    while True:
        hoard.append(bytearray(8 * 2**20))

@substream(name="exits")
def exits(events, ctx):
    os._exit(7)

@substream(name="segfault")
def segfault(events, ctx):
    ctypes.string_at(0)

@substream(name="raises")
def raises(events, ctx):
    return {e["missing"] for e in events}

@substream(name="oversized", max_result_bytes=4096)
def oversized(events, ctx):
    return os.urandom(64 * 1024).hex()

@substream(name="forks")
def forks(events, ctx):
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
    return pid

@substream(name="forks_via_libc")
def forks_via_libc(events, ctx):
    pid = ctypes.CDLL(None).fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    return pid

@substream(name="opens_socket")
def opens_socket(events, ctx):
    s = socket.socket()
    s.connect(("127.0.0.1", 9))
    return 1

@substream(name="writes_file")
def writes_file(events, ctx):
    with open("/tmp/substream-sandbox-escape", "w") as f:
        f.write("x")
    return 1

@substream(name="unencodable")
def unencodable(events, ctx):
    return object()
"""

EXPECTED = {
    "good": ("ok", "ok"),
    "infinite_loop": ("timeout", "timeout"),
    "stubborn_loop": ("timeout", "timeout"),
    "sleeper": ("timeout", "timeout"),
    "memory_bomb": ("killed", "memory"),
    "exits": ("killed", "killed"),
    "segfault": ("killed", "killed"),
    "raises": ("error", "exception"),
    "oversized": ("error", "too_large"),
    "forks": ("error", "exception"),
    "forks_via_libc": ("killed", "killed"),  # the seccomp filter (SIGSYS)
    "opens_socket": ("error", "exception"),
    "writes_file": ("error", "exception"),
    "unencodable": ("error", "unencodable"),
}


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, Substream]:
    path = tmp_path / "hostile.py"
    path.write_text(HOSTILE)
    return {s.name: s for s in load_file(path)}


ISOLATION = pytest.mark.parametrize("isolation", ["substream", "chunk"])


@ISOLATION
def test_every_hostile_plugin_is_contained_and_classified(
    hostile: dict[str, Substream], isolation: Isolation
) -> None:
    events = [{"i": i, "host": f"h{i % 3}"} for i in range(500)]
    ctx = Context(1_700_000_000, "dc1", "web", "main", 0)
    subs = list(hostile.values())
    outcomes = run_substreams(subs, events, ctx, max_parallel=8, isolation=isolation)
    got = {o.name: (o.status, o.kind) for o in outcomes}
    assert got == EXPECTED
    by_name = {o.name: o for o in outcomes}
    # Every outcome becomes a stored value naming its status; only ok carries a result.
    for sub, outcome in zip(subs, outcomes, strict=True):
        record = read_result(stored_value(sub, outcome))
        assert (record.status, record.substream, record.version) == (
            outcome.status,
            sub.name,
            sub.version,
        )
        assert (record.error is None) == outcome.ok
    assert read_result(by_name["good"].payload).result == {
        "n": 500,
        "epoch": 1_700_000_000,
        "key": "1700000000:dc1:web:main:0",
    }
    assert "KeyError" in (by_name["raises"].error or "")
    assert "os.fork is not allowed" in (by_name["forks"].error or "")
    assert "socket.__new__ is not allowed" in (by_name["opens_socket"].error or "")
    assert "for writing is not allowed" in (by_name["writes_file"].error or "")
    assert "SIGSEGV" in (by_name["segfault"].error or "")
    assert "seccomp filter refused" in (by_name["forks_via_libc"].error or "")
    assert "code 7" in (by_name["exits"].error or "")
    assert not Path("/tmp/substream-sandbox-escape").exists()


@ISOLATION
def test_a_grandchild_forked_through_libc_is_killed_with_the_group(
    hostile: dict[str, Substream], isolation: Isolation
) -> None:
    # The audit hook does not see a fork made by calling libc directly, and without the
    # seccomp filter (where libseccomp is missing) nothing refuses it: the process group
    # kill after the run is the backstop.
    subs = [hostile["forks_via_libc"], hostile["good"]]
    outcome, _ = run_substreams(
        subs, [], Context(1, "d", "t", "", 0), isolation=isolation, syscall_filter=False
    )
    grandchild = read_result(outcome.payload).result
    assert isinstance(grandchild, int) and grandchild > 0
    deadline = time.monotonic() + 5
    while process_alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not process_alive(grandchild)


def test_the_hard_deadline_kills_code_that_ignores_the_soft_timeout(
    hostile: dict[str, Substream],
) -> None:
    (outcome,) = run_substreams([hostile["stubborn_loop"]], [], Context(1, "d", "t", "", 0))
    assert outcome.kind == "timeout"
    assert "killed after" in (outcome.error or "")
    assert outcome.wall_s < 5  # bounded by the deadline, not by the plugin


@ISOLATION
def test_one_plugin_dying_leaves_the_others_results_intact(
    hostile: dict[str, Substream], isolation: Isolation
) -> None:
    subs = [hostile["segfault"], hostile["good"], hostile["memory_bomb"], hostile["exits"]]
    subs += [hostile["stubborn_loop"], hostile["good"]]
    outcomes = run_substreams(
        subs, [{"a": 1}], Context(5, "dc", "t", "", 3), max_parallel=1, isolation=isolation
    )
    assert [o.kind for o in outcomes] == ["killed", "ok", "memory", "killed", "timeout", "ok"]
    assert read_result(outcomes[1].payload).result["n"] == 1


MUTATING = """
from substreams import substream

@substream(name="clears")
def clears(events, ctx):
    n = len(events)
    events.clear()
    return n

@substream(name="counts")
def counts(events, ctx):
    return len(events)
"""


def test_in_one_child_per_chunk_each_run_gets_its_own_list_of_events(tmp_path: Path) -> None:
    # isolation "chunk" shares the child: a plugin emptying, sorting or extending its
    # list must not change what the next plugin of the chunk sees (the event dicts are
    # shared, read-only by contract: DESIGN.md).
    path = tmp_path / "mutating.py"
    path.write_text(MUTATING)
    subs = {s.name: s for s in load_file(path)}
    events = [{"i": i} for i in range(10)]
    outcomes = run_substreams(
        [subs["clears"], subs["counts"]], events, Context(1, "d", "t", "", 0), isolation="chunk"
    )
    assert [read_result(o.payload).result for o in outcomes] == [10, 10]
    assert len(events) == 10


NARROW = """
from substreams import substream

@substream(name="just_a", fields=["a"])
def just_a(events, ctx):
    return [sorted(e) for e in events]

@substream(name="b_c", fields=["b.c"])
def b_c(events, ctx):
    return events

@substream(name="also_a", fields=["a"])
def also_a(events, ctx):
    events.clear()  # its own list: the next run still sees every event
    return 0
"""


@ISOLATION
def test_with_a_loader_each_child_decodes_the_union_once_and_each_run_sees_its_own_fields(
    tmp_path: Path, isolation: Isolation
) -> None:
    path = tmp_path / "narrow.py"
    path.write_text(NARROW)
    subs = load_file(path)
    events = [{"a": 1, "b": {"c": 2, "d": 3}, "e": 4}, {"b": 5}]
    asked: list[Tree | None] = []  # in each child, its own copy
    union = {"a": None, "b": {"c": None}}

    def loader(tree: Tree | None) -> list[Event]:  # runs in the child
        if asked or (isolation == "chunk" and tree != union):
            raise ValueError(f"asked for {tree} after {asked}")
        asked.append(tree)
        return project_events(events, tree)

    outcomes = run_substreams(subs, loader, Context(1, "d", "t", "", 0), isolation=isolation)
    assert [o.kind for o in outcomes] == ["ok", "ok", "ok"], [o.error for o in outcomes]
    got = [read_result(o.payload).result for o in outcomes]
    # What the fallback gives each plugin: the events narrowed to its own fields.
    assert got == [[["a"], []], [{"b": {"c": 2}}, {"b": 5}], 0]
    children = 1 if isolation == "chunk" else 3
    assert sum(o.load_cpu_s > 0 for o in outcomes) == children
    # Each child's whole CPU (wait4) once: at least its load and its runs.
    assert sum(o.child_cpu_s > 0 for o in outcomes) == children
    total = sum(o.child_cpu_s for o in outcomes)
    assert total >= sum(o.load_cpu_s + o.cpu_s for o in outcomes)


def _fails(tree: Tree | None) -> list[Event]:
    raise ValueError("chunk_unreadable: key 7 holds a dict, not an array of events")


def _dies(tree: Tree | None) -> list[Event]:
    os._exit(3)


def _hangs(tree: Tree | None) -> list[Event]:
    while True:
        pass


@ISOLATION
@pytest.mark.parametrize(
    ("loader", "error"),
    [
        (_fails, "chunk_unreadable: key 7 holds a dict, not an array of events"),
        (
            _dies,
            "chunk_unreadable: loading the events: killed: exited with code 3 without a result",
        ),
        (_hangs, "chunk_unreadable: loading the events: not loaded within 0.5s"),
    ],
)
def test_events_a_child_cannot_load_give_every_run_an_unreadable_outcome_naming_why(
    hostile: dict[str, Substream],
    isolation: Isolation,
    loader: Loader,
    error: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sandbox, "LOAD_TIMEOUT_S", 0.5)
    subs = [hostile["good"], hostile["raises"], hostile["good"]]
    outcomes = run_substreams(subs, loader, Context(1, "d", "t", "", 0), isolation=isolation)
    assert [(o.kind, o.status, o.error) for o in outcomes] == [("unreadable", "error", error)] * 3
    for sub, outcome in zip(subs, outcomes, strict=True):
        record = read_result(stored_value(sub, outcome))
        assert (record.status, record.error) == ("error", error)


def _chunk(n: int) -> Loader:
    def load(tree: Tree | None) -> list[Event]:  # runs in the child
        return project_events([{"i": i, "host": "h"} for i in range(n)], tree)

    return load


def test_a_batch_runs_each_chunk_as_alone_and_a_killed_run_costs_only_itself(
    hostile: dict[str, Substream],
) -> None:
    good, segfault = hostile["good"], hostile["segfault"]
    ctxs = [Context(1_700_000_000, "dc1", "web", "main", c) for c in range(3)]
    batch = [([good, segfault], _chunk(3), ctxs[0]), ([good], _chunk(5), ctxs[1]),
             ([segfault, good], _chunk(7), ctxs[2])]  # fmt: skip
    ran, unavailable = run_batch(batch)
    assert unavailable is None
    kinds = [[o.kind if o else None for o in chunk] for chunk in ran]
    assert kinds == [["ok", "killed"], ["ok"], ["killed", "ok"]]
    got = [read_result(o.payload).result for chunk in ran for o in chunk if o and o.ok]
    # each run saw its own chunk's events and context, in the child of the batch or
    # the new one that the segfaults' deaths started
    assert [(g["n"], g["key"]) for g in got] == [
        (3, str(ctxs[0].key)), (5, str(ctxs[1].key)), (7, str(ctxs[2].key))
    ]  # fmt: skip


def test_a_batch_with_an_unreadable_chunk_marks_that_chunk_only(
    hostile: dict[str, Substream],
) -> None:
    good = hostile["good"]
    ctx = Context(1_700_000_000, "dc1", "web", "main", 0)
    ran, unavailable = run_batch([([good], _chunk(2), ctx), ([good, good], _fails, ctx)])
    assert unavailable is None
    assert [o.kind for o in ran[0] if o] == ["ok"]
    assert [(o.kind, o.error) for o in ran[1] if o] == [
        ("unreadable", "chunk_unreadable: key 7 holds a dict, not an array of events")
    ] * 2
