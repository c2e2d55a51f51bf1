"""Query plugins run natively, in the caller (issue 23 item 3): the consumer's fallback
and ``substream test`` evaluate a query plugin on the chunk's stored bytes in their own
process (``substreams/query/run.py``), with no fork server and no child, and give byte
for byte the stored record the sandboxed child gives (status, version, result, and
``too_large`` over ``max_result_bytes``), also where the compiled walk leaves the chunk
to the reference evaluator; the reader gets that record's result, status and error
without the record being packed and read back where the walk built plain rows within
the cap."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from consumer_lib import EventsClient
from consumer_lib.fallback import UndecodedChunk, run_native
from consumer_lib.forkserver import fallback_server
from consumer_lib.substream import SubstreamReader
from eventstore.blob import DecodeLimits, pack_blob, unpack_blob
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient
from eventstore.testing import write_epoch
from relocator.events import generate_events
from substreams.api import Substream
from substreams.forkserver import ForkServer
from substreams.harness import chunks_from_blob, run_plugin_file
from substreams.loader import load_file
from substreams.protocol import DEFAULT_CAP, Limits, Outcome
from substreams.query.run import run_queries
from substreams.results import ResultRecord, read_result, stored_value

EXAMPLES = Path(__file__).parents[3] / "substreams" / "examples"
E0 = 1_700_002_000
KEY = ChunkKey(E0, "dc1", "web", "app", 0)

#: A SELECT of a container (left to the reference), and a SELECT with a small cap.
EXTRA = textwrap.dedent("""
    from substreams.query import query

    searches_q = query(name="searches_q", types=["web"],
                       sql='SELECT search, url FROM events WHERE status >= 400')
    small_q = query(name="small_q", types=["web"], max_result_bytes=2048,
                    sql="SELECT url, status FROM events")
""")


def _web(n: int, seed: int) -> list[dict[str, Any]]:
    return [e for e in generate_events(n, seed=seed) if e["type"] == "web"]


@pytest.fixture(scope="module")
def plugins(tmp_path_factory: pytest.TempPathFactory) -> list[Substream]:
    extra = tmp_path_factory.mktemp("plugins") / "extra_q.py"
    extra.write_text(EXTRA)
    subs = [s for name in ("web_5xx_q", "url_latency_q", "event_counts_q")
            for s in load_file(EXAMPLES / f"{name}.py")]  # fmt: skip
    return subs + load_file(extra)


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    s = fallback_server()
    yield s
    s.close()


class Forks:
    """Every os.fork() of this process while counting (a real count, not a mock)."""

    counting = False
    seen = 0

    @classmethod
    def before(cls) -> None:
        if cls.counting:
            cls.seen += 1


os.register_at_fork(before=Forks.before)


def _child_road(
    server: ForkServer, subs: list[Substream], blob: bytes, key: ChunkKey = KEY
) -> list[Outcome]:
    """The outcomes of the fork server's child (the companion's road) for ``subs``."""
    served = server.run_chunks(
        [(subs, blob, key)], decode_limits=DecodeLimits(), cap=DEFAULT_CAP, where="test"
    )
    (chunk,) = served.chunks
    outcomes = [o for o in chunk.outcomes if o is not None]
    assert (chunk.refused, served.unavailable, len(outcomes)) == ({}, None, len(subs))
    assert not [o.error for o in outcomes if o.kind == "unreadable"]
    return outcomes


@pytest.mark.parametrize(
    "blob",
    [
        pytest.param(pack_blob(_web(3000, 23)), id="zstd"),
        pytest.param(pack_blob(_web(300, 24), compress=None), id="raw"),
        pytest.param(pack_blob([]), id="empty"),
    ],
)
def test_stored_records_are_byte_identical_to_the_childs(
    plugins: list[Substream], server: ForkServer, blob: bytes
) -> None:
    jobs = [(s, Limits.of(s, DEFAULT_CAP)) for s in plugins]
    Forks.counting, Forks.seen = True, 0
    try:
        native = run_queries(jobs, blob, KEY.format(), DecodeLimits())
    finally:
        Forks.counting = False
    assert Forks.seen == 0
    child = _child_road(server, plugins, blob)
    for sub, mine, theirs in zip(plugins, native, child, strict=True):
        assert (mine.kind, mine.error) == (theirs.kind, theirs.error), sub.name
        assert stored_value(sub, mine) == stored_value(sub, theirs), sub.name
        assert mine.max_rss_kb == 0  # never a child
    kinds = {s.name: o.kind for s, o in zip(plugins, native, strict=True)}
    if len(blob) > 10_000:  # the big chunk: the small SELECT is over its cap
        assert kinds["small_q"] == "too_large"
        assert sum(k == "ok" for k in kinds.values()) == len(plugins) - 1
        assert read_result(stored_value(plugins[0], native[0])).result, "5xx rows"


def test_a_chunk_that_does_not_verify_is_refused_as_the_childs_decode_refuses_it(
    plugins: list[Substream],
) -> None:
    blob = bytearray(pack_blob(_web(200, 25)))
    blob[40] ^= 0xFF
    with pytest.raises(UndecodedChunk, match=r"chunk_unreadable: .* postfix says"):
        run_native(plugins[:1], bytes(blob), KEY, DecodeLimits())


def _started() -> float:
    return REGISTRY.get_sample_value("consumer_fallback_server_starts_total") or 0.0


def test_the_fallback_reads_a_query_without_forking(
    plugins: list[Substream], server: ForkServer, riak: RiakClient, dc: str, tmp_path: Path
) -> None:
    """Through a real devnode: the reader's fallback of a query plugin gives the child
    road's result, and forks nothing (the client's fork server never starts)."""
    keys = write_epoch([riak], E0, dc, {("web", "app"): [_web(1500, 26), _web(1500, 27)]})
    with EventsClient(riak.nodes.nodes, plugin_dirs=[tmp_path], use_entry_points=False) as client:
        before = _started()
        Forks.counting, Forks.seen = True, 0
        try:
            got = {
                (sub.name, key): SubstreamReader(
                    client.store, sub.name, sub, fallback="always", server=client.fallback_server
                ).resolve(key)
                for sub in plugins
                for key in keys
            }
        finally:
            Forks.counting = False
        assert (Forks.seen, _started() - before) == (0, 0)
        for key in keys:
            blob = client.store.chunk_blob(key).value
            for sub, theirs in zip(plugins, _child_road(server, plugins, blob, key), strict=True):
                mine = got[sub.name, key]
                assert mine.version == sub.version
                if theirs.ok:
                    assert (mine.served, mine.fallback_status) == ("fallback", "ok")
                    assert mine.result == read_result(theirs.payload).result, sub.name
                else:
                    assert (mine.served, mine.fallback_status) == ("gap", theirs.status)
                    assert mine.error == f"fallback {theirs.status}: {theirs.error}", sub.name


def test_substream_test_runs_a_query_natively(
    plugins: list[Substream], server: ForkServer, tmp_path: Path
) -> None:
    path = tmp_path / "chunk.blob"
    blob = pack_blob(_web(3000, 28))
    path.write_bytes(blob)
    runs = run_plugin_file(EXAMPLES / "url_latency_q.py", chunks_from_blob(path, KEY))
    (child,) = _child_road(server, [runs[0].substream], blob)
    assert [r.substream.name for r in runs] == ["url_latency_q"]
    assert runs[0].outcome.ok and runs[0].outcome.max_rss_kb == 0  # no child ran it
    assert stored_value(runs[0].substream, runs[0].outcome) == child.payload
    assert runs[0].result == read_result(child.payload).result


# -- the reader's road: the record's result, the record neither packed nor read back ---


@contextlib.contextmanager
def _calls(*functions: Callable[..., Any]) -> Iterator[list[str]]:
    """The calls of ``functions`` made by this thread meanwhile (a real profiler hook,
    nothing replaced)."""
    codes = {f.__code__: f.__qualname__ for f in functions}
    seen: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            seen.append(codes[frame.f_code])

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(before)


def _typed(value: Any) -> Any:
    """``value`` with the type of every scalar in it, so 1 and True, or 1 and 1.0, differ."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return type(value).__name__, value


def _records(subs: list[Substream], blob: bytes, cap: Limits) -> list[ResultRecord]:
    """What the companion stores for ``subs`` on ``blob``, read back as a reader reads it."""
    jobs = [(s, Limits.of(s, cap)) for s in subs]
    outcomes = run_queries(jobs, blob, KEY.format(), DecodeLimits())
    return [read_result(stored_value(s, o)) for s, o in zip(subs, outcomes, strict=True)]


def _assert_as_stored(subs: list[Substream], blob: bytes, cap: Limits = DEFAULT_CAP) -> None:
    runs = run_native(subs, blob, KEY, DecodeLimits(), cap=cap)
    for sub, run, record in zip(subs, runs, _records(subs, blob, cap), strict=True):
        assert (run.substream, run.status, run.error) == (sub.name, record.status, record.error)
        assert _typed(run.result) == _typed(record.result), sub.name


def test_the_reader_gets_the_walks_rows_without_packing_the_record(
    plugins: list[Substream],
) -> None:
    """The three example queries on a chunk the walk takes: each result is the stored
    record's (values and types), and no record is packed or read back to get it."""
    examples = plugins[:3]
    blob = pack_blob(_web(3000, 29))
    with _calls(pack_blob, unpack_blob) as seen:
        runs = run_native(examples, blob, KEY, DecodeLimits())
    assert seen == []
    assert all(run.ok for run in runs) and runs[0].result, "5xx rows"
    _assert_as_stored(examples, blob)


def test_the_record_is_packed_where_the_rows_need_it(plugins: list[Substream]) -> None:
    """A SELECT of a container (the reference's rows: read back from the record) and a
    result over its cap (``too_large``, in the child's words) take the record's road."""
    searches, small = plugins[3:]
    blob = pack_blob(_web(3000, 30))
    with _calls(pack_blob, unpack_blob) as seen:
        runs = run_native([searches, small], blob, KEY, DecodeLimits())
    assert runs[0].ok and runs[0].result, "rows with a container"
    assert (runs[1].status, (runs[1].error or "").split(":")[0]) == ("error", "too_large")
    assert seen.count("pack_blob") == 2
    _assert_as_stored([searches, small], blob)


#: Values of every kind the examples' fields may hold in a chunk.
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.sampled_from([500, 503, 599, -0.0, 503.0, "/a", "é", b"\xff\xfe", b"caf\xc3\xa9"]),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.lists(st.integers(0, 600), max_size=2),
)
_FIELDS = ("status", "url", "duration_ms", "host", "request_id", "search")
_EVENTS = st.lists(
    st.dictionaries(st.sampled_from(_FIELDS), st.one_of(st.integers(500, 599), _VALUES)).map(
        lambda e: {"type": "web", **e}
    ),
    max_size=40,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_EVENTS, compress=st.booleans(), slack=st.integers(-48, 48))
def test_the_reader_gets_what_the_stored_record_gives_on_generated_chunks(
    plugins: list[Substream], events: list[dict[str, Any]], compress: bool, slack: int
) -> None:
    """Generated events (every kind of value, missing fields, Perl byte strings) and, for
    each plugin, a result cap around its stored record's size: the reader's status,
    error and result (values and types) are the stored record's, on both sides of it."""
    blob = pack_blob(events, compress="zstd" if compress else None)
    jobs = [(s, Limits.of(s, DEFAULT_CAP)) for s in plugins]
    outcomes = run_queries(jobs, blob, KEY.format(), DecodeLimits())
    for sub, outcome in zip(plugins, outcomes, strict=True):
        size = len(stored_value(sub, outcome))
        cap = dataclasses.replace(DEFAULT_CAP, max_result_bytes=max(1, size + slack))
        _assert_as_stored([sub], blob, cap)
