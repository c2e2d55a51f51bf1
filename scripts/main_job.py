"""The main job on the embedded default (the devnode), end to end.

    make run                       # or: .venv/bin/python scripts/main_job.py [--seconds S]

1. starts a devnode (the single-node stand-in for Riak) whose post-commit hook drives a
   companion (real gunicorn) running the example substream plugins;
2. starts a relocator and feeds it realistic events from ``riak-events loadgen`` over
   acknowledged TCP; the relocator aggregates them per second, cuts checksummed Sereal
   chunks of at most 500 KB, writes every chunk, then each epoch-dc's metadata;
3. every metadata write fires the hook, which sends the chunk keys to the companion;
   the companion decodes each chunk once and stores each substream's small result;
4. reads everything back through ``consumer_lib``: the full stream (every event the
   relocator acknowledged must be there) and the substreams (served by the companion,
   or by the client-side fallback where a result is missing), and checks that the
   ``event_counts`` substream counts exactly the events of the full stream.

Exit status 0 when everything acknowledged was read back and the substreams agree.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sereal_codec as sereal  # noqa: E402
import substreams.examples  # noqa: E402
from companion.testing import start_stack  # noqa: E402
from consumer_lib import EventsClient  # noqa: E402
from relocator.testing import run_pipeline  # noqa: E402

DCS = ("ams1", "ams4")
SUBSTREAMS = ("event_counts", "web_5xx", "url_latency")


def example_plugins() -> dict[str, str]:
    """The shipped example plugins, as file name -> source."""
    folder = Path(substreams.examples.__file__).parent
    return {p.name: p.read_text() for p in sorted(folder.glob("[!_]*.py"))}


def wait_for_results(consumer: EventsClient, start: int, end: int, timeout_s: float) -> None:
    """Give the companion time to finish; the fallback covers whatever it has not."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = sum(
            1
            for dc in DCS
            for r in consumer.substream("event_counts", dc, start, end, fallback="off")
            if r.served != "server"
        )
        if pending == 0:
            return
        time.sleep(0.5)


def read_back(url: str, plugin_dir: Path, start: int, end: int) -> bool:
    """Step 4: the full stream and the substreams through the consumer library."""
    ok = True
    # The companion runs the plugin files of plugin_dir; the fallback loads the same files.
    with EventsClient([url], plugin_dirs=[plugin_dir], use_entry_points=False) as consumer:
        wait_for_results(consumer, start, end, timeout_s=20.0)
        for dc in DCS:
            events = list(consumer.events(dc, start, end))
            kinds = Counter(f"{t.type}/{t.subtype}" for t in events)
            print(f"  full stream dc {dc}: {len(events)} events {dict(kinds.most_common(4))}")
            for name in SUBSTREAMS:
                results = list(consumer.substream(name, dc, start, end))
                served = Counter(r.served + (f" ({r.reason})" if r.reason else "") for r in results)
                print(f"  substream {name:12} dc {dc}: {len(results)} chunks, {dict(served)}")
                if name == "event_counts":
                    counted = sum(r.result["total"] for r in results if r.result is not None)
                    if counted != len(events):
                        print(
                            f"FAILED: event_counts counted {counted}, the full stream has "
                            f"{len(events)}",
                            file=sys.stderr,
                        )
                        ok = False
                if name == "web_5xx" and dc == DCS[0]:
                    sample = next((r.result for r in results if r.result), None)
                    print(f"    e.g. {_short(sample)}")
    return ok


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="how long to emit events")
    parser.add_argument("--rate", type=float, default=3000.0, help="events per second")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="riak-events-main-") as tmp:
        stack = start_stack(Path(tmp) / "stack", plugins=example_plugins())
        try:
            print(
                f"devnode {stack.devnode.url}, companion {stack.companion.url} "
                f"(status page), Sereal codec: {sereal.IMPLEMENTATION}"
            )
            start = int(time.time()) - 1
            report = run_pipeline(
                stack.devnode.url, Path(tmp), rate=args.rate, seconds=args.seconds, dcs=DCS
            )
            end = int(time.time()) + 1
            print(
                f"relocator: {report['sent']} events acknowledged, {report['stored']} "
                f"stored as {report['chunks']} chunks over {report['epochs']} epoch-dcs"
            )
            print(f"  e.g. metadata {_short(report['sample_metadata'])}")
            ok = report["stored"] == report["sent"] and not report["unreadable"]
            if not ok:
                print(
                    f"FAILED: stored {report['stored']} of {report['sent']}, unreadable "
                    f"{report['unreadable']}",
                    file=sys.stderr,
                )
            ok = read_back(stack.devnode.url, stack.plugin_dir, start, end) and ok
            hook = {
                k.removeprefix("devnode_hook_"): v
                for k, v in stack.riak.stats().items()
                if k.startswith("devnode_hook_")
            }
            print(f"  post-commit hook: {hook}")
        finally:
            stack.stop()
    print(
        "OK: every acknowledged event read back; substreams agree with the full stream"
        if ok
        else "FAILED"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
