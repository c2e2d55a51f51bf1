"""The main job on the embedded default (the devnode), end to end.

    make run                       # or: .venv/bin/python scripts/main_job.py [--events N]

1. starts a devnode (the single-node stand-in for Riak) on a free loopback port;
2. takes one epoch of realistic events, groups them by (dc, type, subtype), cuts each
   group into checksummed Sereal chunks of at most 500 KB and writes every chunk, then
   each epoch-dc's metadata (the list of its chunk keys) last, as relocators do;
3. reads the epoch back the way consumers do (metadata, then the chunks in parallel,
   checksums verified) and checks that every event came back, in order;
4. shows what was stored and what the devnode's post-commit hook routed;
6. reads back through ``consumer_lib.EventsClient``: a slice of the full stream (one
   dc's web events) and a substream (``event_counts``: served by a companion when one
   stored results, else computed by the client-side fallback).

Exit status 0 when everything written was read back identically.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.events import generate_events  # noqa: E402
from eventstore import sereal  # noqa: E402
from eventstore.blob import unpack_blob  # noqa: E402
from eventstore.chunking import chunk_events  # noqa: E402
from eventstore.devnode.testing import DevnodeProcess  # noqa: E402
from eventstore.names import ChunkKey, MetadataKey, Namespaces, format_metadata, parse_metadata  # noqa: E402
from eventstore.riak import RiakClient  # noqa: E402
from eventstore.riak.types import PutItem  # noqa: E402

Group = tuple[str, str, str]  # dc, type, subtype


def write_epoch(
    client: RiakClient, ns: Namespaces, epoch: int, events: list[dict[str, Any]]
) -> dict[str, list[ChunkKey]]:
    """Write the chunks of one epoch, then each dc's metadata. Returns keys by dc."""
    groups: dict[Group, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        groups[(str(event["dc"]), event["type"], event["subtype"])].append(event)
    keys_by_dc: dict[str, list[ChunkKey]] = defaultdict(list)
    items: list[PutItem] = []
    for (dc, type_, subtype), group in sorted(groups.items()):
        for number, chunk in enumerate(chunk_events(group)):
            key = ChunkKey(epoch, dc, type_, subtype, number)
            keys_by_dc[dc].append(key)
            items.append(PutItem(key.format(), chunk.data))
    client.multi_put(ns.events_bucket_type, ns.events_bucket, items, w=3)
    # Metadata last: a reader that sees it can read every chunk it lists.
    for dc, keys in sorted(keys_by_dc.items()):
        bucket_type, bucket, meta_key = ns.metadata_location(MetadataKey(epoch, dc))
        client.put(
            bucket_type,
            bucket,
            meta_key,
            format_metadata(keys).encode("ascii"),
            content_type="text/plain",
        )
    return keys_by_dc


def read_epoch(
    client: RiakClient, ns: Namespaces, epoch: int, dcs: list[str]
) -> tuple[list[dict[str, Any]], int]:
    """Read every event of the epoch back, as a consumer does. Returns events, bytes."""
    events: list[dict[str, Any]] = []
    stored_bytes = 0
    for dc in dcs:
        mkey = MetadataKey(epoch, dc)
        meta = client.get(*ns.metadata_location(mkey))
        refs = parse_metadata(meta.value.decode("ascii"))
        # Metadata is byte-order sorted ("t::10" < "t::2"); read in chunk order.
        refs = tuple(sorted(refs, key=lambda r: (r.type, r.subtype, r.chunk)))
        keys = [mkey.chunk_key(ref).format() for ref in refs]
        fetched = client.multi_get(ns.events_bucket_type, ns.events_bucket, keys)
        for key in keys:
            obj = fetched[key]
            if obj is None:
                raise SystemExit(f"metadata {mkey} lists chunk {key}, which is missing")
            stored_bytes += len(obj.value)
            events.extend(unpack_blob(obj.value, key=key))
    return events, stored_bytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events in the epoch")
    parser.add_argument("--data-dir", type=Path, help="devnode data dir (default: a temp dir)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="riak-events-main-") as tmp:
        data_dir = args.data_dir or Path(tmp) / "devnode"
        with DevnodeProcess(data_dir) as devnode:
            print(
                f"devnode: {devnode.url} (data in {data_dir}; Sereal codec: "
                f"{sereal.IMPLEMENTATION})"
            )
            epoch = int(time.time()) - 1
            events = [dict(e, epoch=epoch) for e in generate_events(args.events)]
            ns = Namespaces()
            with RiakClient([devnode.url]) as client:
                t0 = time.perf_counter()
                keys_by_dc = write_epoch(client, ns, epoch, events)
                t1 = time.perf_counter()
                dcs = sorted(keys_by_dc)
                by_dc = {dc: [e for e in events if str(e["dc"]) == dc] for dc in dcs}
                back, stored = read_epoch(client, ns, epoch, dcs)
                t2 = time.perf_counter()
                stats = client.stats()
            expected = [e for dc in dcs for e in _in_key_order(by_dc[dc])]
            nchunks = sum(len(k) for k in keys_by_dc.values())
            print(
                f"epoch {epoch}: wrote {len(events)} events as {nchunks} chunks "
                f"({stored / 1e6:.2f} MB stored) in {t1 - t0:.2f}s, "
                f"read back in {t2 - t1:.2f}s"
            )
            for dc in dcs:
                sample = ", ".join(k.format() for k in keys_by_dc[dc][:3])
                print(f"  metadata {epoch}-{dc}: {len(keys_by_dc[dc])} chunks ({sample}, ...)")
            hook = {k: v for k, v in stats.items() if k.startswith("devnode_hook")}
            print(f"  post-commit hook: {hook}")
            if back != expected:
                print("FAILED: the events read back differ from those written", file=sys.stderr)
                return 1
            print("OK: every event read back identical, checksums verified")
            if not consumer_read_back(devnode.url, epoch, dcs[0], by_dc[dcs[0]]):
                return 1
    return 0


def consumer_read_back(url: str, epoch: int, dc: str, written: list[dict[str, Any]]) -> bool:
    """Step 6: a full-stream slice and a substream through the consumer library."""
    from consumer_lib import EventsClient  # noqa: PLC0415 (step 6 only)

    with EventsClient([url]) as consumer:
        web = [t.event for t in consumer.events(dc, epoch, epoch + 1, types=["web"])]
        results = list(consumer.substream("event_counts", dc, epoch, epoch + 1))
    served: dict[str, int] = defaultdict(int)
    for r in results:
        served[r.served if r.reason is None else f"{r.served} ({r.reason})"] += 1
    total = sum(r.result["total"] for r in results)
    print(f"  consumer_lib: {len(web)} web events of dc {dc}; substream event_counts over")
    print(f"    {len(results)} chunks counts {total} events, served: {dict(served)}")
    if web != _in_key_order([e for e in written if e["type"] == "web"]) or total != len(written):
        print("FAILED: consumer_lib read back something else", file=sys.stderr)
        return False
    print("OK: full-stream slice and substream read back through consumer_lib")
    return True


def _in_key_order(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events in the order a reader meets them: by (type, subtype), stable within."""
    return sorted(events, key=lambda e: (e["type"], e["subtype"]))


if __name__ == "__main__":
    sys.exit(main())
