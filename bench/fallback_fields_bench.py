"""Declared fields in the client-side fallback: CPU of the fork server's child per chunk
(decode + the plugin's run) for each shipped example plugin as shipped (with its
``fields=[...]``) against the same file without them, interleaved in one run.

The child decodes the verified bytes with the union of its plugins' declared fields
(``unpack_blob(fields=...)``: the decoder builds only those) and runs the plugin on
them (``substreams/forkserver_process.py``). One chunk of ``--events`` generated
events of the plugin's type, ``--repeat`` runs each way; the medians of the child's own
CPU figures (``Reply.decode.cpu_s``, the run's ``cpu_s``); results checked equal.

    .venv/bin/python bench/fallback_fields_bench.py [--events 3600] [--repeat 15] [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from events import generate_events
from report import emit, figure

from consumer_lib.forkserver import fallback_server
from eventstore.blob import DecodeLimits, pack_blob
from eventstore.names import ChunkKey
from substreams.loader import load_file, plugin_files
from substreams.protocol import DEFAULT_CAP, Limits
from substreams.results import read_result

EXAMPLES = Path(__file__).resolve().parents[1] / "substreams" / "examples"


def without_fields(source: str) -> str:
    """The plugin's source with its ``fields=[...]`` argument left out."""
    start = source.index("fields=[")
    end = source.index("]", start) + 1
    return source[:start] + source[end:].removeprefix(",")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3600, help="events per chunk")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="headline figures as JSON, last")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    events = generate_events(args.events * 12, seed=3)
    figures = []
    server = fallback_server()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for path in plugin_files(EXAMPLES):
                (declared,) = load_file(path)
                if declared.plan is not None:
                    continue  # a query twin: its fields are its SQL's, run natively
                whole = Path(tmp) / f"whole_{path.name}"
                whole.write_text(without_fields(path.read_text()))
                (undeclared,) = load_file(whole)
                assert declared.fields is not None and undeclared.fields is None
                type_ = declared.types[0] if declared.types else "web"
                chunk = [e for e in events if e["type"] == type_][: args.events]
                blob = pack_blob(chunk)
                key = ChunkKey(1, "dc1", type_, "main", 0)
                limits = Limits.of(declared, DEFAULT_CAP)
                cpu: dict[str, list[tuple[float, float]]] = {"fields": [], "whole": []}
                results = {}
                for _ in range(args.repeat):
                    for way, sub in (("fields", declared), ("whole", undeclared)):
                        served = server.run_chunks(
                            [([sub], blob, key)], decode_limits=DecodeLimits(), cap=limits,
                            where="bench",
                        )  # fmt: skip
                        ((run,),) = (c.outcomes for c in served.chunks)
                        assert run is not None and run.ok, (served, run)
                        results[way] = read_result(run.payload, key=key.format()).result
                        cpu[way].append((run.load_cpu_s, run.cpu_s))
                assert results["fields"] == results["whole"], declared.name
                ms = {
                    way: [1000 * statistics.median(x[i] for x in xs) for i in (0, 1)]
                    for way, xs in cpu.items()
                }
                print(
                    f"{declared.name} ({len(chunk)} {type_} events, {len(blob)} bytes, "
                    f"fields {', '.join(declared.fields)}): "
                    f"decode {ms['fields'][0]:.2f} ms CPU vs {ms['whole'][0]:.2f} whole; "
                    f"run {ms['fields'][1]:.2f} vs {ms['whole'][1]:.2f}"
                )
                figures.append(
                    figure(
                        f"fallback child, {declared.name}: decode + run with its fields",
                        round(sum(ms["fields"]), 3),
                        "ms CPU/chunk",
                        anchor="the same plugin without fields (same run)",
                        anchor_value=round(sum(ms["whole"]), 3),
                    )
                )
        finally:
            server.close()
    if args.json:
        emit(figures)


if __name__ == "__main__":
    main()
