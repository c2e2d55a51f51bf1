"""The three example queries (web_5xx_q, url_latency_q, event_counts_q) on one
realistic web chunk, evaluated natively in one walk against decode-then-evaluate in
Python, with a plain full decode as the anchor, interleaved in one run.

Ways, each the whole work from the stored document (zstd body) to the results:
  native         substreams.query.native.evaluate_document: one walk, all three plans
  walk           the walk alone on the opened body (no decompression)
  projected+py   decode(fields=union of the plans' fields), then the reference evaluator
  full+py        decode(), then the reference evaluator
  decode         decode() alone: the anchor ("less CPU than decoding it once")
CPU: the median of --repeat process-CPU times per way. Instructions (--callgrind):
valgrind's count of --calls calls of a way, minus a run that only sets up, divided by
--calls; results checked equal to the reference first.

    .venv/bin/python bench/query_bench.py [--events 3600] [--repeat 31] [--callgrind]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventstore import sereal  # noqa: E402
from eventstore.sereal import compression  # noqa: E402
from eventstore.sereal.document import read_layout  # noqa: E402
from relocator.events import generate_events  # noqa: E402
from substreams.examples.event_counts_q import event_counts_q  # noqa: E402
from substreams.examples.url_latency_q import url_latency_q  # noqa: E402
from substreams.examples.web_5xx_q import web_5xx_q  # noqa: E402
from substreams.query.evaluate import compile_plan  # noqa: E402
from substreams.query.native import compile_program, evaluate_body, evaluate_document  # noqa: E402

PLANS = [q.plan for q in (web_5xx_q, url_latency_q, event_counts_q)]
FIELDS = sorted({f for p in PLANS for f in p.fields})


def chunk(n: int) -> bytes:
    """n web events of the shared generator, as a relocator writes a chunk."""
    events = [e for e in generate_events(n * 2, seed=11) if e["type"] == "web"][:n]
    return sereal.encode(events, compress="zstd", level=3, dedupe_strings=True, protocol=4)


def ways(doc: bytes) -> dict[str, Callable[[], Any]]:
    program = compile_program(PLANS)
    runs = [compile_plan(p) for p in PLANS]
    layout = read_layout(doc)
    buf, pos, base = compression.open_body(
        doc, layout.protocol, layout.doc_type, layout.body_offset, 1 << 30
    )
    return {
        "native": lambda: evaluate_document(program, doc),
        "walk": lambda: evaluate_body(program, buf, pos, len(buf), base),
        "projected+py": lambda: _all(runs, sereal.decode(doc, fields=FIELDS)),
        "full+py": lambda: _all(runs, sereal.decode(doc)),
        "decode": lambda: sereal.decode(doc),
    }


def _all(runs: list[Callable[[Any], Any]], events: Any) -> list[Any]:
    return [run(events) for run in runs]


def cpu(doc: bytes, repeat: int) -> dict[str, float]:
    fns = ways(doc)
    want = _all([compile_plan(p) for p in PLANS], sereal.decode(doc))
    assert fns["native"]() == want and fns["walk"]() == want, "native differs"
    assert fns["projected+py"]() == want
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():  # interleaved
            start = time.process_time()
            fn()
            times[name].append(time.process_time() - start)
    return {name: statistics.median(t) for name, t in times.items()}


_SUMMARY = re.compile(r"^summary: (\d+)$", re.MULTILINE)


def instructions(doc: bytes, calls: int) -> dict[str, float]:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed")
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chunk.srl"
        path.write_bytes(doc)

        def count(way: str, n: int) -> int:
            profile = Path(tmp) / f"cg.{way}.{n}"
            subprocess.run(
                [valgrind, "--tool=callgrind", f"--callgrind-out-file={profile}",
                 sys.executable, __file__, "--run", way, str(n), str(path)],
                check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"},
            )  # fmt: skip
            match = _SUMMARY.search(profile.read_text(errors="replace"))
            assert match, profile
            return int(match[1])

        for way in ways(doc):
            out[way] = (count(way, calls + 1) - count(way, 1)) / calls
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3600)
    parser.add_argument("--repeat", type=int, default=31)
    parser.add_argument("--callgrind", action="store_true", help="count instructions too")
    parser.add_argument("--calls", type=int, default=3, help="calls a way under callgrind")
    parser.add_argument("--run", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:  # under valgrind: one way, n calls (the first warms up)
        way, n, path = args.run
        fn = ways(Path(path).read_bytes())[way]
        for _ in range(int(n)):
            fn()
        return
    doc = chunk(args.events)
    body = sereal.decode(doc)
    print(
        f"load average {os.getloadavg()[0]:.2f}; chunk: {len(body)} web events, "
        f"{len(doc) / 1024:.0f} KB stored, plans: {', '.join(p.name for p in PLANS)}"
    )
    times = cpu(doc, args.repeat)
    counts = instructions(doc, args.calls) if args.callgrind else {}
    print(
        f"{'way':14} {'CPU ms':>8} {'x decode':>9}"
        + (f" {'instr M':>9} {'x decode':>9}" if counts else "")
    )
    for name, t in times.items():
        line = f"{name:14} {t * 1000:8.2f} {t / times['decode']:9.2f}"
        if counts:
            line += f" {counts[name] / 1e6:9.1f} {counts[name] / counts['decode']:9.2f}"
        print(line)


if __name__ == "__main__":
    main()
