"""Sereal codec benchmark: our compiled core and pure reference against Perl's XS codec
and orjson, on one realistic epoch blob; and the compiled transcoder from the blob
straight to JSON lines (issue 8), against decoding then orjson-encoding each event.

    .venv/bin/python bench/sereal_bench.py [--events N] [--repeat R]

The events come from ``bench/events.py`` (deterministic). Every Sereal row works on the
same data: encoders encode the same events (protocol 4, zstd level 3, dedupe_strings),
decoders decode the same blob (the one Perl's Sereal::Encoder wrote). orjson encodes and
parses the same events as one JSON array. Times are the best of R runs
(``time.perf_counter``; Perl times its own loop with a monotonic clock); the pure
reference is slow, so it runs on fewer repetitions. MB/s is measured against the events'
size as compact JSON, the same yardstick for every row. Ratios are against Perl (> 1 is
faster than Perl).

The projected row (issue 16) decodes the same blob with ``fields=PROJECTED_FIELDS``, what
a typical web substream reads: a third of the events' top-level keys (10 of a web event's
25, 6 of an lb event's 28, 5 of a cron event's 23; the bench prints the share), and of
``search`` only ``city``. Its ratio is against Perl's full decode of the blob.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from events import generate_events
from report import emit, figure

from relocator.events import WEB_SUBSTREAM_FIELDS
from sereal_codec.projection import compile_fields, project_events

PERL_SCRIPT = Path(__file__).resolve().parent / "perl" / "sereal_bench.pl"
#: What a typical web substream reads (see the module docstring).
PROJECTED_FIELDS = list(WEB_SUBSTREAM_FIELDS)
PROJECTED_ROW = "decode, fields=PROJECTED_FIELDS (compiled)"
ENCODE_OPTIONS: dict[str, Any] = {
    "compress": "zstd",
    "level": 3,
    "dedupe_strings": True,
    "protocol": 4,
}


@dataclass
class Row:
    name: str
    encode_s: float | None  # best time for the whole batch
    decode_s: float | None
    note: str = ""


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    """Best wall time of ``repeat`` calls; each result is released after its timing."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        dt = time.perf_counter() - t0
        del result
        best = min(best, dt)
    return best


def best_of_nogc(repeat: int, fn: Callable[[], object]) -> float:
    gc.disable()
    try:
        return best_of(repeat, fn)
    finally:
        gc.enable()


def run_perl(raw_events: bytes, repeat: int, workdir: Path) -> tuple[Row, bytes]:
    events_path = workdir / "events.srl"
    blob_path = workdir / "perl_blob.srl"
    events_path.write_bytes(raw_events)
    proc = subprocess.run(
        ["perl", str(PERL_SCRIPT), str(events_path), str(blob_path), str(repeat)],
        capture_output=True,
        check=False,
        timeout=1800,
    )
    if proc.returncode != 0:
        sys.exit(
            f"Perl benchmark failed (run `make test` to install Perl's Sereal):\n"
            f"{proc.stderr.decode(errors='replace')}"
        )
    out = json.loads(proc.stdout)
    row = Row(f"Perl Sereal {out['sereal_version']} (XS)", out["encode_s"], out["decode_s"])
    return row, blob_path.read_bytes()


def warm(codec: ModuleType) -> None:
    """Run the codec's Python layer until CPython has specialised its bytecode.

    Before that, ``value, pos = decode_body(...)`` in ``document.py`` allocates an
    iterator, and that allocation starts the young collection over the whole result
    inside the timed call (the decoder pauses the collector while it builds); after
    it, the collection falls to whatever the caller allocates next. Every timed call
    then measures the same thing: the decode, the result freed before the next one.
    """
    small = codec.encode([{"k": 1}])
    for _ in range(32):
        codec.decode(small)
        codec.decode(small, fields=["k"])
        codec.encode([{"k": 1}], **ENCODE_OPTIONS)


def bench_codec(name: str, codec: ModuleType, events: list[Any], blob: bytes, repeat: int) -> Row:
    warm(codec)
    encode_s = best_of(repeat, lambda: codec.encode(events, **ENCODE_OPTIONS))
    decode_s = best_of(repeat, lambda: codec.decode(blob))
    return Row(name, encode_s, decode_s)


def projected_row(codec: ModuleType, blob: bytes, events: list[Any], repeat: int) -> Row:
    """Decode of the blob building only ``PROJECTED_FIELDS`` of each event."""
    tree = compile_fields(PROJECTED_FIELDS)
    warm(codec)
    if codec.decode(blob, fields=PROJECTED_FIELDS) != project_events(codec.decode(blob), tree):
        sys.exit("the projected decode is not the projection of the decode")
    kept = sum(1 for e in events for k in e if tree is not None and k in tree)
    share = kept / sum(len(e) for e in events)
    seconds = best_of(repeat, lambda: codec.decode(blob, fields=PROJECTED_FIELDS))
    return Row(PROJECTED_ROW, None, seconds, f"{share:.0%} of the top-level keys built")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="events in the blob")
    parser.add_argument("--repeat", type=int, default=7, help="repetitions (best is kept)")
    parser.add_argument(
        "--pure-repeat",
        type=int,
        default=None,
        help="repetitions for the pure reference (default: repeat // 3)",
    )
    parser.add_argument("--json", action="store_true", help="headline figures as JSON, last")
    args = parser.parse_args()
    repeat: int = max(1, args.repeat)
    pure_repeat: int = args.pure_repeat or max(1, repeat // 3)

    import sereal_codec as default_codec
    import sereal_codec.pure as pure_codec

    print(f"machine: {machine()}")
    events = generate_events(args.events)
    json_bytes = orjson.dumps(events)
    n = len(events)
    print(
        f"events: {n}, {len(json_bytes) / n:.0f} bytes each as JSON "
        f"({len(json_bytes) / 1e6:.1f} MB); repeat {repeat} (pure: {pure_repeat})"
    )

    raw_events = default_codec.encode(events, compress="none")
    with tempfile.TemporaryDirectory(prefix="sereal-bench-") as tmp:
        perl_row, blob = run_perl(raw_events, repeat, Path(tmp))
    ours = default_codec.encode(events, **ENCODE_OPTIONS)
    print(
        f"blob: Perl {len(blob) / 1e6:.2f} MB, ours {len(ours) / 1e6:.2f} MB "
        f"(zstd-3, dedupe, protocol 4)"
    )
    # Perl writes protocol-4 booleans as 1 / "", so compare shape, not values
    if len(default_codec.decode(blob)) != n or default_codec.decode(ours) != events:
        sys.exit("our codec does not reproduce the events")

    rows = [perl_row]
    impl = getattr(default_codec, "IMPLEMENTATION", "?")
    if impl == "c":
        rows.append(bench_codec("sereal_codec (compiled)", default_codec, events, blob, repeat))
        rows.append(projected_row(default_codec, blob, events, repeat))
        if len(default_codec.decode_json_lines(blob)) != n:
            sys.exit("decode_json_lines does not reproduce the events")
        # Issue 8: events as JSON text for Spark's parse_json, without Python objects;
        # against decoding then orjson-encoding each event (the way with Python objects).
        rows.append(
            Row(
                "transcode to JSON lines (compiled)",
                None,
                best_of(repeat, lambda: default_codec.decode_json_lines(blob)),
                "decode_json_lines(blob): one JSON text per event, no Python objects",
            )
        )
        rows.append(
            Row(
                "decode + orjson.dumps per event (compiled)",
                None,
                best_of(repeat, lambda: [orjson.dumps(e) for e in default_codec.decode(blob)]),
            )
        )
    else:
        rows.append(
            Row("sereal_codec (compiled)", None, None, f"not built: IMPLEMENTATION={impl!r}")
        )
    rows.append(bench_codec("sereal_codec.pure", pure_codec, events, blob, pure_repeat))
    rows.append(
        Row(
            "orjson (JSON), gc on",
            best_of(repeat, lambda: orjson.dumps(events)),
            best_of(repeat, lambda: orjson.loads(json_bytes)),
        )
    )
    rows.append(
        Row(
            "orjson (JSON), gc off",
            best_of_nogc(repeat, lambda: orjson.dumps(events)),
            best_of_nogc(repeat, lambda: orjson.loads(json_bytes)),
        )
    )
    print_table(rows, n, len(json_bytes), perl_row)
    if args.json:
        emit(headline(rows, n))


def headline(rows: list[Row], n: int) -> list[dict[str, Any]]:
    """The figures bench/report.py shows: the compiled codec against Perl, same run."""
    by_name = {"Perl" if r.name.startswith("Perl") else r.name: r for r in rows}
    perl, ours = by_name["Perl"], by_name["sereal_codec (compiled)"]
    projected = by_name.get(PROJECTED_ROW)
    lines = by_name.get("transcode to JSON lines (compiled)")
    # (figure, its seconds, the anchor, the anchor's seconds, target): each as events/s
    pairs = (
        (f"Sereal decode, compiled, {n} events", ours.decode_s,
         "Perl XS, same run", perl.decode_s, ">= 1.3x"),
        (f"Sereal encode (dedupe, zstd-3), compiled, {n} events", ours.encode_s,
         "Perl XS, same run", perl.encode_s, ">= 1.5x"),
        ("Sereal decode of a third of the fields, compiled", projected and projected.decode_s,
         "Perl XS full decode, same run", perl.decode_s, ">= 3x"),
        ("Sereal -> JSON lines, compiled", lines and lines.decode_s,
         "compiled decode, same run", ours.decode_s, ">= 2x"),
    )  # fmt: skip
    out = []
    for path, mine, anchor, theirs, target in pairs:
        if mine and theirs:
            mark = {"anchor": anchor, "anchor_value": n / theirs, "target": target}
            out.append(figure(path, n / mine, "events/s", **mark))
    return out


def _rate(n: int, seconds: float | None) -> str:
    return "-" if seconds is None else f"{n / seconds / 1000:,.0f}k"


def _mbs(size: int, seconds: float | None) -> str:
    return "-" if seconds is None else f"{size / seconds / 1e6:,.0f}"


def _ratio(perl_s: float | None, seconds: float | None) -> str:
    return "-" if seconds is None or perl_s is None else f"{perl_s / seconds:.2f}"


def print_table(rows: list[Row], n: int, json_size: int, perl: Row) -> None:
    header = ("", "enc ev/s", "enc MB/s", "dec ev/s", "dec MB/s", "enc vs Perl", "dec vs Perl")
    lines = [header]
    for r in rows:
        lines.append(
            (
                r.name,
                _rate(n, r.encode_s),
                _mbs(json_size, r.encode_s),
                _rate(n, r.decode_s),
                _mbs(json_size, r.decode_s),
                _ratio(perl.encode_s, r.encode_s),
                _ratio(perl.decode_s, r.decode_s),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    print()
    for i, line in enumerate(lines):
        cells = [line[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)
        ]
        print("  ".join(cells))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for r in rows:
        if r.note:
            print(f"{r.name}: {r.note}")
    print("\nMB/s: the events' size as compact JSON per second; ratios: Perl's time / ours.")


if __name__ == "__main__":
    main()
