"""Queries on one realistic web chunk, evaluated natively in one walk against
decode-then-evaluate in Python, with decodes as anchors, interleaved in one run.

``--plans bench`` (default): the companion bench's 10 substreams as queries (the three
examples' ``*_q.py`` twins and :data:`EXTRA_QUERIES`, which ``companion_bench.py``
installs too), every plan on the chunk whatever its ``types`` (a plan does not filter
by type: the platform does; two of them find none of their fields in web events);
``--plans examples``: web_5xx_q, url_latency_q and event_counts_q.

Ways, each the whole work from the stored document (zstd body) to the results:
  native         substreams.query.native.evaluate_document: one walk, every plan
  walk           the walk alone on the opened body (no decompression)
  projected+py   decode(fields=union of the plans' fields), then the reference evaluator
  full+py        decode(), then the reference evaluator
  projected      decode(fields=union of the plans' fields) alone: the anchor of issue
                 23's target (native <= 1.5x)
  decode         decode() alone: the anchor ("less CPU than decoding it once")
CPU: the median of --repeat process-CPU times per way. Instructions (--callgrind):
valgrind's count of --calls calls of a way, minus a run that only sets up, divided by
--calls; results checked equal to the reference first.

    .venv/bin/python bench/query_bench.py [--events 3600] [--repeat 31] [--callgrind]
        [--plans bench|examples]
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

import sereal_codec as sereal  # noqa: E402
from relocator.events import EXPERIMENTS, generate_events  # noqa: E402
from sereal_codec import compression  # noqa: E402
from sereal_codec.document import read_layout  # noqa: E402
from substreams.examples.event_counts_q import event_counts_q  # noqa: E402
from substreams.examples.url_latency_q import url_latency_q  # noqa: E402
from substreams.examples.web_5xx_q import web_5xx_q  # noqa: E402
from substreams.query.evaluate import compile_plan  # noqa: E402
from substreams.query.native import compile_program, evaluate_body, evaluate_document  # noqa: E402
from substreams.query.parse import parse_query  # noqa: E402
from substreams.query.plan import Plan  # noqa: E402

_EXPERIMENT_PATHS = [(f'"experiments.{x}"', x) for x in EXPERIMENTS]

#: The companion bench's 7 cherry-picks as queries: name -> (type, SQL). Each is as
#: close to its Python plugin (``companion_bench.EXTRA``) as the dialect allows:
#: pick_search gives NULL for an absent field (``pick`` leaves it out); status_counts,
#: mobile_share: one row per value, not a dict (mobile_share's total is the rows'
#: sum); experiments: counts per combination of the generator's five experiments (no
#: iteration over a map's keys: a consumer sums the marginals; a new experiment needs a
#: new version); bytes_by_host: the two fields summed apart (no COALESCE; every
#: generated event carries one of them).
EXTRA_QUERIES: dict[str, tuple[str | None, str]] = {
    "pick_search": ("web", """SELECT "search.city", "search.nights", lang FROM events
                              WHERE url = '/search'"""),
    "status_counts": (None, "SELECT status, count(*) AS events FROM events GROUP BY status"),
    "slow_lb": ("lb", "SELECT server, tt FROM events WHERE tt > 1500"),
    "cron_failures": ("cron", """SELECT job, message AS msg FROM events
                                 WHERE typeof(success) = 'boolean' AND success = FALSE"""),
    "experiments": ("web", f"SELECT {', '.join(f'{p} AS {x}' for p, x in _EXPERIMENT_PATHS)},"
                           f" count(*) AS events FROM events"
                           f" GROUP BY {', '.join(p for p, _ in _EXPERIMENT_PATHS)}"),
    "mobile_share": ("web", "SELECT is_mobile, count(*) AS events FROM events GROUP BY is_mobile"),
    "bytes_by_host": (None, """SELECT host, sum(bytes_sent) AS bytes_sent,
                               sum(bytes_read) AS bytes_read FROM events GROUP BY host"""),
}  # fmt: skip

EXAMPLES = [q.plan for q in (web_5xx_q, url_latency_q, event_counts_q)]
PLAN_SETS: dict[str, list[Plan]] = {
    "examples": EXAMPLES,
    "bench": EXAMPLES + [parse_query(f"{n}_q", sql) for n, (_, sql) in EXTRA_QUERIES.items()],
}


def chunk(n: int) -> bytes:
    """n web events of the shared generator, as a relocator writes a chunk."""
    events = [e for e in generate_events(n * 2, seed=11) if e["type"] == "web"][:n]
    return sereal.encode(events, compress="zstd", level=3, dedupe_strings=True, protocol=4)


def ways(doc: bytes, plans: list[Plan]) -> dict[str, Callable[[], Any]]:
    program = compile_program(plans)
    runs = [compile_plan(p) for p in plans]
    fields = sorted({f for p in plans for f in p.fields})
    layout = read_layout(doc)
    buf, pos, base = compression.unframe_body(
        doc, layout.protocol, layout.doc_type, layout.body_offset, 1 << 30
    )
    return {
        "native": lambda: evaluate_document(program, doc),
        "walk": lambda: evaluate_body(program, buf, pos, len(buf), base),
        "projected+py": lambda: _all(runs, sereal.decode(doc, fields=fields)),
        "full+py": lambda: _all(runs, sereal.decode(doc)),
        "projected": lambda: sereal.decode(doc, fields=fields),
        "decode": lambda: sereal.decode(doc),
    }


def _all(runs: list[Callable[[Any], Any]], events: Any) -> list[Any]:
    return [run(events) for run in runs]


def cpu(doc: bytes, repeat: int, plans: list[Plan]) -> dict[str, float]:
    fns = ways(doc, plans)
    want = _all([compile_plan(p) for p in plans], sereal.decode(doc))
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


def instructions(doc: bytes, calls: int, plans: str) -> dict[str, float]:
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
                 sys.executable, __file__, "--plans", plans, "--run", way, str(n), str(path)],
                check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"},
            )  # fmt: skip
            match = _SUMMARY.search(profile.read_text(errors="replace"))
            assert match, profile
            return int(match[1])

        for way in ways(doc, PLAN_SETS[plans]):
            out[way] = (count(way, calls + 1) - count(way, 1)) / calls
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3600)
    parser.add_argument("--repeat", type=int, default=31)
    parser.add_argument("--callgrind", action="store_true", help="count instructions too")
    parser.add_argument("--calls", type=int, default=3, help="calls a way under callgrind")
    parser.add_argument("--plans", choices=sorted(PLAN_SETS), default="bench")
    parser.add_argument("--run", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    plans = PLAN_SETS[args.plans]
    if args.run:  # under valgrind: one way, n calls (the first warms up)
        way, n, path = args.run
        fn = ways(Path(path).read_bytes(), plans)[way]
        for _ in range(int(n)):
            fn()
        return
    doc = chunk(args.events)
    body = sereal.decode(doc)
    print(
        f"load average {os.getloadavg()[0]:.2f}; chunk: {len(body)} web events, "
        f"{len(doc) / 1024:.0f} KB stored, plans: {', '.join(p.name for p in plans)}"
    )
    times = cpu(doc, args.repeat, plans)
    counts = instructions(doc, args.calls, args.plans) if args.callgrind else {}
    print(
        f"{'way':14} {'CPU ms':>8} {'x decode':>9} {'x proj.':>8}"
        + (f" {'instr M':>9} {'x decode':>9} {'x proj.':>8}" if counts else "")
    )
    for name, t in times.items():
        line = f"{name:14} {t * 1000:8.2f} {t / times['decode']:9.2f} {t / times['projected']:8.2f}"
        if counts:
            line += (
                f" {counts[name] / 1e6:9.1f} {counts[name] / counts['decode']:9.2f}"
                f" {counts[name] / counts['projected']:8.2f}"
            )
        print(line)
    print("target (issue 23, --plans bench): native <= 1.5x projected")


if __name__ == "__main__":
    main()
