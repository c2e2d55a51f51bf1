"""The example plugins twice: ``web_5xx``, ``url_latency`` and ``event_counts`` as
functions and as queries (``*_q``) give the same results, on the shared generator's
events and on hypothesis-generated ones (missing fields, values of every wrong kind,
nested paths, Perl byte strings), in-process and through the companion's sandbox and
both consumer fallbacks.

A query's result has the shape every query has (rows; or one row per group), not its
twin's own (a dict keyed by URL, say), so each pair is compared through a small
adapter from the query's shape to the function's: the twins agree when the adapted
query result equals the function's result. Where they differ by design (the function
writes ``str(host)``, so a host that is None is ``"None"``, a list ``"[1]"``; NaN), the
generated events leave that case out and DESIGN.md ("Declarative substreams") says so.

Events reach both twins as the platform gives them: packed with the codec (a Perl byte
string is a Sereal BINARY string) and decoded in its default mode, narrowed to each
plugin's fields.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sereal_codec as sereal
from companion.chunks import decode_chunk
from consumer_lib.fallback import run_fallback, run_served
from eventstore.blob import DecodeLimits, pack_blob, unpack_blob
from eventstore.names import ChunkKey
from eventstore.testing import stored_by_type
from relocator.events import generate_events
from sereal_codec.projection import project_events
from substreams.api import Context, Substream
from substreams.child import Loader
from substreams.examples.url_latency import BOUNDS_MS
from substreams.forkserver import ForkServer
from substreams.loader import load_file
from substreams.query import merge_partials, query
from substreams.query.plan import Aggregate
from substreams.results import read_result
from substreams.sandbox import run_substreams

EXAMPLES = Path(__file__).parents[2] / "substreams" / "examples"
Adapter = Callable[[Any, Context], Any]


@functools.cache
def load(name: str) -> Substream:
    (sub,) = load_file(EXAMPLES / f"{name}.py")
    return sub


def as_web_5xx(rows: Any, ctx: Context) -> Any:
    return rows


def as_url_latency(rows: Any, ctx: Context) -> Any:
    urls = {
        r["url"]: {
            "count": r["count"],
            "sum_ms": round(float(r["sum_ms"]), 3),
            "buckets": r["buckets"],
        }
        for r in rows
    }
    return {"epoch": ctx.epoch, "bounds_ms": list(BOUNDS_MS), "urls": urls}


def as_event_counts(rows: Any, ctx: Context) -> Any:
    by_host: dict[str, int] = {}
    for r in rows:
        host = "?" if r["host"] is None else str(r["host"])
        by_host[host] = by_host.get(host, 0) + r["events"]  # 5 and "5" are one for str()
    total = sum(r["events"] for r in rows)
    return {"type": ctx.type, "subtype": ctx.subtype, "total": total, "by_host": by_host}


TWINS: list[tuple[str, Adapter]] = [
    ("web_5xx", as_web_5xx),
    ("url_latency", as_url_latency),
    ("event_counts", as_event_counts),
]


@pytest.fixture(scope="module")
def pairs() -> list[tuple[Substream, Substream, Adapter]]:
    return [(load(name), load(f"{name}_q"), adapt) for name, adapt in TWINS]


def test_each_query_declares_what_its_twin_declares(
    pairs: list[tuple[Substream, Substream, Adapter]],
) -> None:
    for function, q, _ in pairs:
        assert q.plan is not None and function.plan is None
        assert (q.types, q.subtypes, q.timeout_s) == (
            function.types,
            function.subtypes,
            function.timeout_s,
        )
        assert q.max_result_bytes == function.max_result_bytes
        assert set(q.fields or ()) == set(function.fields or ()), "derived = declared"
    histogram = next(o for o in pairs[1][1].plan.outputs if isinstance(o, Aggregate) and o.bounds)  # type: ignore[union-attr]
    assert histogram.bounds == BOUNDS_MS


def in_process(sub: Substream, events: list[dict[str, Any]], ctx: Context) -> Any:
    """The plugin's result on the events narrowed to its fields, after the Sereal round
    trip a stored result goes through."""
    return sereal.decode(sereal.encode(sub(project_events(events, sub.projection), ctx)))


def chunks() -> list[tuple[ChunkKey, bytes, list[dict[str, Any]]]]:
    """(key, stored blob, its events decoded) of the shared generator's events, and an
    empty chunk."""
    return stored_by_type(generate_events(3000, seed=23), 700, empty=True)


def companion_loader(key: ChunkKey, blob: bytes) -> Loader:
    return functools.partial(decode_chunk, key, blob, DecodeLimits())


def test_twins_agree_on_the_generators_events_every_way_they_run(
    pairs: list[tuple[Substream, Substream, Adapter]], fork_server: ForkServer
) -> None:
    ran: dict[str, int] = {}
    rows: dict[str, int] = {}
    for key, blob, events in chunks():
        ctx = Context.of(key)
        subs = [s for f, q, _ in pairs for s in (f, q) if s.matches(key.type, key.subtype)]
        outcomes = run_substreams(subs, companion_loader(key, blob), ctx, isolation="chunk")
        stored = {}
        for sub, outcome in zip(subs, outcomes, strict=True):
            assert outcome.ok, f"{sub.name}: {outcome.error}"
            stored[sub.name] = read_result(outcome.payload, key=key.format()).result
            assert stored[sub.name] == in_process(sub, events, ctx), sub.name
        for function, q, adapt in pairs:
            if q.name not in stored:
                continue
            assert adapt(stored[q.name], ctx) == stored[function.name], (q.name, key)
            ran[q.name] = ran.get(q.name, 0) + 1
            rows[q.name] = rows.get(q.name, 0) + len(stored[q.name])
        qs = [q for _, q, _ in pairs if q.name in stored]
        for run in run_fallback(qs, events, key):
            assert (run.status, run.error, run.result) == ("ok", None, stored[run.substream])
        for run in run_served(fork_server, qs, blob, key, DecodeLimits()):
            assert (run.status, run.error, run.result) == ("ok", None, stored[run.substream])
    assert ran == {"web_5xx_q": 4, "url_latency_q": 4, "event_counts_q": 7}  # one chunk empty
    assert rows["web_5xx_q"] > 50 and rows["url_latency_q"] > 50 and rows["event_counts_q"] > 50


def test_a_reader_merges_the_partials_of_chunks_into_the_whole_ranges_aggregate(
    pairs: list[tuple[Substream, Substream, Adapter]],
) -> None:
    _, url_latency_q, adapt = pairs[1]
    web = [c for c in chunks() if c[0].type == "web"]
    partials = [in_process(url_latency_q, events, Context.of(key)) for key, _, events in web]
    everything = [e for _, _, events in web for e in events]
    ctx = Context.of(web[0][0])
    merged = adapt(merge_partials(url_latency_q, partials), ctx)
    whole = adapt(in_process(url_latency_q, everything, ctx), ctx)
    assert merged["urls"].keys() == whole["urls"].keys()
    for url, h in merged["urls"].items():
        assert (
            h["count"] == whole["urls"][url]["count"]
            and h["buckets"] == whole["urls"][url]["buckets"]
        )
        assert h["sum_ms"] == pytest.approx(whole["urls"][url]["sum_ms"])


# -- hypothesis-generated events --------------------------------------------------------

#: Values of every kind but huge integers (:data:`HUGE`).
WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([503.0, 500.5, -0.0, 1e300]),
    st.text(max_size=6),
    st.sampled_from(["503", "/index.html", "web-01", "é"]),
    # Perl byte strings: Sereal BINARY, decoded as the codec's default mode decodes them
    st.binary(max_size=6),
    st.sampled_from([b"/index.html", b"\xff\xfe", b"caf\xc3\xa9"]),
    st.dictionaries(st.sampled_from(["code", "0", "ms"]), st.integers(0, 600), max_size=2),
    st.lists(st.integers(0, 600), max_size=2),
)
#: The codec's integer range's ends. Not durations: the function sums in floats from
#: 0.0, so past 2**53 its sums round where the query's integer sum is exact.
HUGE = st.sampled_from([2**53 + 1, 2**63 - 1, 2**64 - 1, -(2**63)])
STATUS = st.one_of(st.sampled_from([200, 404, 500, 503, 599, 600, 499]), WRONG, HUGE)
URL = st.one_of(st.sampled_from(["/", "/search", "/api/v2/prices"]), WRONG, HUGE)
#: The bucket bounds themselves too: a value on a bound is in the bucket it closes.
DURATION = st.one_of(
    st.integers(-(10**9), 10**9),
    st.floats(-1e6, 1e6),
    st.sampled_from(BOUNDS_MS),
    st.sampled_from(BOUNDS_MS).map(float),
    WRONG,
)
#: count_by writes str(host): None, containers and floats' spelling (-0.0 is 0.0 as a
#: group key) are where the twins differ by design.
HOST = st.one_of(
    st.sampled_from(["web-1", "web-2", "5"]),
    st.integers(-3, 6),
    st.booleans(),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.just(b"web-1"),
)
FIELDS = {
    "status": STATUS,
    "url": URL,
    "duration_ms": DURATION,
    "host": HOST,
    "request_id": st.one_of(WRONG, HUGE),
}


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    """One event: each field the examples read present or missing, of any kind; some
    noise around them, and sometimes the fields nested one level down instead."""
    event: dict[str, Any] = {"type": "web"}
    for name, values in FIELDS.items():
        if draw(st.booleans()) or draw(st.booleans()):
            event[name] = draw(values)
    if draw(st.booleans()):
        event["http"] = {"status": draw(STATUS), "url": draw(URL)}  # a nested path nobody reads
    return event


def decoded(evs: list[dict[str, Any]], key: ChunkKey) -> tuple[bytes, list[dict[str, Any]]]:
    blob = pack_blob(evs)
    return blob, unpack_blob(blob, key=key.format())


KEY = ChunkKey(1_700_000_000, "dc1", "web", "www", 0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(evs=st.lists(events(), max_size=30))
def test_twins_agree_on_generated_events(evs: list[dict[str, Any]]) -> None:
    _, got = decoded(evs, KEY)
    ctx = Context.of(KEY)
    for name, adapt in TWINS:
        function, q = load(name), load(f"{name}_q")
        assert adapt(in_process(q, got, ctx), ctx) == in_process(function, got, ctx), name


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(evs=st.lists(events(), min_size=1, max_size=30))
def test_twins_agree_on_generated_events_through_the_companions_sandbox(
    evs: list[dict[str, Any]],
) -> None:
    blob, got = decoded(evs, KEY)
    ctx = Context.of(KEY)
    subs = [load(n) for name, _ in TWINS for n in (name, f"{name}_q")]
    outcomes = run_substreams(subs, companion_loader(KEY, blob), ctx, isolation="chunk")
    results = {}
    for sub, outcome in zip(subs, outcomes, strict=True):
        assert outcome.ok, f"{sub.name}: {outcome.error}"
        results[sub.name] = read_result(outcome.payload, key=KEY.format()).result
    for name, adapt in TWINS:
        assert adapt(results[f"{name}_q"], ctx) == results[name], name
        assert results[f"{name}_q"] == in_process(load(f"{name}_q"), got, ctx)


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, list):
        return [_text(v) for v in value]
    if isinstance(value, dict):
        return {_text(k): _text(v) for k, v in value.items()}
    return value


@settings(max_examples=200, deadline=None)
@given(evs=st.lists(events(), max_size=30))
def test_a_querys_result_does_not_depend_on_the_codecs_binary_mode(
    evs: list[dict[str, Any]],
) -> None:
    """Perl byte strings decoded as ``str`` (the default) or as ``bytes``: the same
    rows and groups (a value copied out keeps the form it was decoded in)."""
    blob = pack_blob(evs)
    as_text = unpack_blob(blob, key=KEY.format())
    as_bytes = unpack_blob(blob, key=KEY.format(), binary="bytes")
    for q in [load(f"{name}_q") for name, _ in TWINS] + [TEXTS]:
        got = q(as_text, Context.of(KEY))
        assert _text(q(as_bytes, Context.of(KEY))) == got, q.name


#: Text compared every way a query can: what Perl byte strings must match.
TEXTS = query(
    name="texts",
    sql="""SELECT url, host, min(url) AS lo, max(host) AS hi, count(*) AS n FROM events
           WHERE url LIKE '/api%' OR host IN ('web-1', 'é') OR url = '/index.html'
              OR host > 'x' GROUP BY url, host""",
).__substream__


def test_a_select_over_its_result_cap_ends_too_large_as_a_function_would(tmp_path: Path) -> None:
    path = tmp_path / "all_urls.py"
    path.write_text(
        "from substreams.query import query\n"
        "all_urls = query(name='all_urls', types=['web'], max_result_bytes=512,\n"
        "                 sql='SELECT url, request_id FROM events')\n"
    )
    (sub,) = load_file(path)
    key, blob, _ = next(c for c in chunks() if c[0].type == "web")
    (outcome,) = run_substreams(
        [sub], companion_loader(key, blob), Context.of(key), isolation="chunk"
    )
    assert outcome.status == "error" and (outcome.error or "").startswith("too_large: result")


def test_query_is_defined_for_plugin_files_not_for_this_module() -> None:
    made = query(name="local", sql="SELECT a FROM events")
    assert made.__module__ == __name__
