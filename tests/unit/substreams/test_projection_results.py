"""Projection gives the same results (issue 16): every example plugin, and plugins
reading nested paths, lists and whole sub-documents, return on projected events exactly
what they return on fully decoded ones, over the shared event generator's chunks.

"Projected" is what the companion, the consumer's fallback and ``substream test`` give
a plugin: the chunk decoded with the declared fields (``unpack_blob(fields=...)``: the
decoder builds only those) when the decoder takes them, else decoded whole and narrowed
by :func:`~sereal_codec.projection.project_events`; both follow the rule of
``sereal_codec/projection.py``. Also: a chunk decoded with the union of several
plugins' fields, then narrowed per plugin, gives each the same; a declaration naming
no field list, or an empty part, is refused naming the plugin; ``substream test``'s
report names the fields."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

import sereal_codec as sereal
from eventstore.blob import unpack_blob
from eventstore.names import ChunkKey
from eventstore.testing import stored_by_type
from relocator.events import generate_events
from sereal_codec.projection import compile_fields, project_events
from substreams import Context, count_by, declaration_of, dig, substream
from substreams.api import Substream
from substreams.errors import InvalidDeclaration, PluginLoadError
from substreams.harness import HarnessRun, format_runs
from substreams.loader import load_file, plugin_files
from substreams.protocol import Outcome

EXAMPLES = Path(__file__).parents[3] / "substreams" / "examples"
#: Whether the decoder builds only the declared fields (eventstore.blob, issue 16);
#: without it the events are decoded whole and narrowed, by the same rule.
DECODES_FIELDS = "fields" in inspect.signature(unpack_blob).parameters


@substream(name="search_cities", types=["web"], fields=["search.city", "status", "timings"])
def search_cities(events: list[dict[str, Any]], ctx: Context) -> dict[str, Any]:
    """A nested path (a dict narrowed to one key) and a list kept whole."""
    return {
        "cities": count_by(events, "search.city"),
        "errors": sum(1 for e in events if (dig(e, "status") or 0) >= 500),
        "timings": round(sum(sum(dig(e, "timings") or []) for e in events), 3),
    }


@substream(name="lb_conn", types=["lb"], fields=["conn.active", "ssl", "queue.0"])
def lb_conn(events: list[dict[str, Any]], ctx: Context) -> dict[str, Any]:
    """A whole sub-document, and a path stepping into a list (kept whole)."""
    return {
        "active": sum(dig(e, "conn.active") or 0 for e in events),
        "tls": count_by(events, "ssl.version"),
        "queued": sum(dig(e, "queue.0") or 0 for e in events),
    }


@substream(name="cron_failures", types=["cron"], fields=["job", "exit_code", "resources"])
def cron_failures(events: list[dict[str, Any]], ctx: Context) -> list[Any]:
    return [
        [e["job"], e["exit_code"], dig(e, "resources.max_rss_kb")]
        for e in events
        if e["exit_code"] != 0
    ]


def plugins() -> list[Substream]:
    found = [sub for path in plugin_files(EXAMPLES) for sub in load_file(path)]
    names = {"web_5xx", "url_latency", "event_counts"}
    assert {s.name for s in found} == names | {f"{n}_q" for n in names}  # and query twins
    assert all(s.fields is not None for s in found), "every example declares its fields"
    extra = [declaration_of(f) for f in (search_cities, lb_conn, cron_failures)]
    return found + [s for s in extra if s is not None]


@functools.cache
def chunks() -> list[tuple[ChunkKey, bytes]]:
    """The generator's events by type, 300 a chunk, as stored."""
    return [(key, blob) for key, blob, _ in stored_by_type(generate_events(4000, seed=16), 300)]


def decode(blob: bytes, key: ChunkKey, fields: Iterable[str] | None) -> list[dict[str, Any]]:
    """The chunk as a plugin declaring ``fields`` is given it."""
    if DECODES_FIELDS:
        events = unpack_blob(blob, key=key.format(), fields=fields)  # type: ignore[call-arg,unused-ignore]
    else:
        events = project_events(unpack_blob(blob, key=key.format()), compile_fields(fields))
    assert isinstance(events, list)
    return events


def result(sub: Substream, events: list[dict[str, Any]], key: ChunkKey) -> Any:
    """The result as stored and read back (the Sereal round trip every result takes)."""
    return sereal.decode(sereal.encode(sub(events, Context.of(key))))


def union(subs: Sequence[Substream]) -> list[str] | None:
    fields: list[str] = []
    for sub in subs:
        if sub.fields is None:
            return None
        fields += sub.fields
    return fields


@pytest.mark.parametrize("sub", plugins(), ids=lambda s: s.name)
def test_projected_and_full_decode_give_the_same_results(sub: Substream) -> None:
    ran = 0
    for key, blob in chunks():
        if not sub.matches(key.type, key.subtype):
            continue
        full = unpack_blob(blob, key=key.format())
        projected = decode(blob, key, sub.fields)
        assert len(projected) == len(full)
        assert result(sub, projected, key) == result(sub, full, key), key
        ran += 1
    assert ran >= 2


def test_a_chunk_decoded_for_several_plugins_then_narrowed_gives_each_the_same() -> None:
    """The companion's way: one decode with the union of the matching plugins' fields,
    then each plugin's own projection of it."""
    for key, blob in chunks():
        subs = [s for s in plugins() if s.matches(key.type, key.subtype)]
        shared = decode(blob, key, union(subs))
        full = unpack_blob(blob, key=key.format())
        for sub in subs:
            mine = project_events(shared, sub.projection)
            assert mine == decode(blob, key, sub.fields), (key, sub.name)
            assert result(sub, mine, key) == result(sub, full, key), (key, sub.name)


def test_a_plugin_sees_only_what_it_declared() -> None:
    key, blob = next((k, b) for k, b in chunks() if k.type == "web")
    events = decode(blob, key, ["search.city", "status", "timings"])
    assert {k for e in events for k in e} == {"search", "status", "timings"}
    assert {k for e in events for k in e["search"]} == {"city"}
    assert all(isinstance(e["timings"], list) for e in events)


@pytest.mark.parametrize(
    "fields",
    ["status", ["a..b"], [""], [".a"], ["a."], ["ok", 3], [None]],
    ids=["string", "empty-middle", "empty", "leading-dot", "trailing-dot", "number", "none"],
)
def test_an_invalid_field_declaration_is_refused_naming_the_plugin(fields: object) -> None:
    with pytest.raises(InvalidDeclaration, match="substream 'counts'") as info:
        substream(name="counts", fields=fields)  # type: ignore[arg-type]
    assert "field" in str(info.value)


def test_a_plugin_file_with_an_invalid_field_does_not_load(tmp_path: Path) -> None:
    path = tmp_path / "bad_fields.py"
    path.write_text(
        "from substreams import substream\n"
        "@substream(name='bad_fields', fields=['http..status'])\n"
        "def f(events, ctx):\n    return 0\n"
    )
    with pytest.raises(PluginLoadError, match=r"substream 'bad_fields'.*'http\.\.status'"):
        load_file(path)


def test_declared_fields_are_kept_once_in_order() -> None:
    declared = declaration_of(substream(name="d", fields=["b", "a.x", "b"])(lambda e, c: 0))
    assert declared is not None and declared.fields == ("b", "a.x")
    assert declared.projection == {"b": None, "a": {"x": None}}
    everything = declaration_of(substream(name="e")(lambda e, c: 0))
    assert everything is not None and (everything.fields, everything.projection) == (None, None)


def _run(sub: Substream, outcome: Outcome) -> HarnessRun:
    return HarnessRun(sub, ChunkKey(1, "dc1", "web", "", 0), 3, outcome, 10, None)


def test_the_report_names_the_fields() -> None:
    declared = declaration_of(
        substream(name="slow_urls", fields=["status", "http.latency_ms"])(lambda e, c: 0)
    )
    assert declared is not None
    failed = Outcome("slow_urls", "exception", error="exception: UndeclaredField: ...")
    text = format_runs([_run(declared, failed)], verbose=True)
    assert "fields: status, http.latency_ms" in text
    assert _run(declared, failed).as_dict()["fields"] == ["status", "http.latency_ms"]
    everything = declaration_of(substream(name="all")(lambda e, c: 0))
    assert everything is not None
    assert "fields: all" in format_runs([_run(everything, Outcome("all", "ok"))])
