"""Generate hook_routing.json: shared vectors for the post-commit hook's routing.

Both the devnode's Python twin (devnode/routing.py) and the Erlang hook
(erlang_hooks/) must route every case here identically. Expected groups are computed
from the ring's preflists directly (not through routing.py), so the vectors test it.

    .venv/bin/python tests/vectors/gen_hook_routing.py > tests/vectors/hook_routing.json

Rules the vectors pin down: entries are parsed, de-duplicated and sorted in byte order
before grouping; a group's keys keep that order; groups are listed in the order of their
first key; the node is the first entry of the key's preflist in bucket type "events",
bucket "events", n_val 3, with the listed nodes down (up primaries first, then
fallbacks); an empty value routes nothing; any malformed key or entry rejects the whole
write ("error": "invalid_key" or "invalid_value") and nothing is sent.
"""

from __future__ import annotations

import json
import sys

from eventstore.ring import Ring

NODES = ["dev1@127.0.0.1", "dev2@127.0.0.1", "dev3@127.0.0.1", "dev4@127.0.0.1"]


def expected(key: str, value: str, down: list[str], ring: Ring) -> dict[str, object]:
    epoch, _, dc = key.partition("-")
    entries = sorted(set(value.split("|"))) if value else []
    groups: dict[str, list[str]] = {}
    for entry in entries:
        chunk_key = f"{epoch}:{dc}:{entry}"
        node = ring.preflist("events", chunk_key, bucket_type="events", n_val=3, down=down)[0].node
        groups.setdefault(node, []).append(chunk_key)
    return {"epoch": int(epoch), "dc": dc, "groups": [[n, ks] for n, ks in groups.items()]}


def main() -> None:
    ring = Ring(NODES, 64)
    cases: list[dict[str, object]] = []
    valid = [
        ("1413813813-1", "type1:subtype1:0", []),
        ("1413813813-2", "type1:subtype1:0|type1:subtype1:1|type3::0", []),
        ("1413813813-2", "type3::0|type1:subtype1:1|type1:subtype1:0|type3::0", []),
        ("1413813813-1", "", []),
        ("1413813813-dc_2", "a.b:c_d:10|a.b:c_d:2|a.b:c_d:0", []),
        ("1413813813-1", "|".join(f"t{i % 3}:s{i % 2}:{i}" for i in range(40)), []),
        ("1413813813-1", "|".join(f"t{i % 3}:s{i % 2}:{i}" for i in range(40)), [NODES[0]]),
        ("1413813813-1", "|".join(f"t{i % 3}:s{i % 2}:{i}" for i in range(40)), NODES[1:3]),
        ("0-1", "WEB:app:0|EMK::0", []),
    ]
    for key, value, down in valid:
        cases.append(
            {
                "metadata_key": key,
                "metadata_value": value,
                "down": list(down),
                "expect": expected(key, value, list(down), ring),
            }
        )
    for key, value, error in [
        ("1413813813", "type1::0", "invalid_key"),
        ("1413813813:1", "type1::0", "invalid_key"),
        ("abc-1", "type1::0", "invalid_key"),
        ("1413813813-", "type1::0", "invalid_key"),
        ("1413813813-d-c", "type1::0", "invalid_key"),
        ("1413813813-1", "type1::x", "invalid_value"),
        ("1413813813-1", "type1:0", "invalid_value"),
        ("1413813813-1", "type1::0|", "invalid_value"),
        ("1413813813-1", "type1::0||type2::0", "invalid_value"),
        ("1413813813-1", ":sub:0", "invalid_value"),
        ("1413813813-1", "type 1::0", "invalid_value"),
    ]:
        cases.append({"metadata_key": key, "metadata_value": value, "down": [], "error": error})
    document = {
        "description": __doc__.split("\n\n")[0] if __doc__ else "",
        "ring": {"ring_size": 64, "nodes": NODES},
        "data": {"bucket_type": "events", "bucket": "events", "n_val": 3},
        "cases": cases,
    }
    json.dump(document, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
