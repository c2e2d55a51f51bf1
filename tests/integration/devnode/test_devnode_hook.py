"""The devnode's post-commit hook twin, with real companions standing in over HTTP.

Companions are real HTTP servers (http.server in threads) on loopback ports; one logical
node's companion URL is dead (nothing listens) and one hangs (accepts, never answers).
Metadata is written through the Riak client; each live companion must receive exactly
the chunk keys whose first preflist node it is, and the dead or hanging ones must never
slow or fail a PUT, only be counted in /stats (by the Erlang hook's counter names,
erlang_hooks/README.md). A companion that is down and comes back sees its breaker open,
refuse, probe after the cool-down and close, as the Erlang hook's does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devnode.testing import DevnodeProcess, free_port
from eventstore.riak import RiakClient
from eventstore.ring import Ring
from tests.integration.hook_receivers import Companion, HangingCompanion

NODES = ["dev1@127.0.0.1", "dev2@127.0.0.1", "dev3@127.0.0.1", "dev4@127.0.0.1"]
HOOK_TIMEOUT_S = 1.0


@pytest.fixture
def companions() -> Iterator[dict[str, Companion]]:
    live = {NODES[0]: Companion(), NODES[1]: Companion()}
    yield live
    for companion in live.values():
        companion.close()


@pytest.fixture
def hooked_node(
    tmp_path: Path, devnode_factory: type[DevnodeProcess], companions: dict[str, Companion]
) -> DevnodeProcess:
    """A started devnode whose hook posts to the live ``companions`` (default config)."""
    urls = {node: c.url for node, c in companions.items()}
    config = write_config(tmp_path / "devnode.toml", urls)
    return devnode_factory(tmp_path / "data", config=config).start()


@pytest.fixture
def hanging_url() -> Iterator[str]:
    """A URL whose server accepts connections and never answers."""
    hanging = HangingCompanion()
    yield hanging.url
    hanging.close()


def write_config(
    path: Path,
    companions: dict[str, str],
    *,
    queue_max: int = 1024,
    workers: int = 4,
    breaker: tuple[int, int] = (5, 10_000),
) -> Path:
    """A devnode config; ``breaker``: (breaker_failures, breaker_cooldown_ms)."""
    lines = [
        "[ring]",
        "ring_size = 64",
        "nodes = [" + ", ".join(f'"{n}"' for n in NODES) + "]",
        "[hook]",
        f"timeout_s = {HOOK_TIMEOUT_S}",
        f"queue_max = {queue_max}",
        f"workers = {workers}",
        f"breaker_failures = {breaker[0]}",
        f"breaker_cooldown_ms = {breaker[1]}",
        "[companions]",
        *[f'"{node}" = "{url}"' for node, url in companions.items()],
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def expected_groups(epoch: int, dc: str, entries: list[str]) -> dict[str, list[str]]:
    """Independently of the routing module: key -> first preflist node of events/events."""
    ring = Ring(NODES, 64)
    groups: dict[str, list[str]] = {}
    for entry in entries:
        key = f"{epoch}:{dc}:{entry}"
        node = ring.preflist("events", key, bucket_type="events", n_val=3)[0].node
        groups.setdefault(node, []).append(key)
    return groups


def wait_for(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_each_companion_gets_exactly_its_keys(
    tmp_path: Path,
    devnode_factory: type[DevnodeProcess],
    companions: dict[str, Companion],
    hanging_url: str,
) -> None:
    urls = {node: c.url for node, c in companions.items()}
    urls[NODES[2]] = f"http://127.0.0.1:{free_port()}"  # dead: nothing listens
    urls[NODES[3]] = hanging_url
    node = devnode_factory(tmp_path / "data", config=write_config(tmp_path / "devnode.toml", urls))
    node.start()
    all_expected: dict[str, list[str]] = {}
    groups_total = keys_total = hanging_groups = 0
    with RiakClient([node.url]) as riak:
        slowest = 0.0
        for epoch in range(1413813813, 1413813818):
            entries = sorted(
                f"type{t}:sub{s}:{c}" for t in range(3) for s in range(2) for c in range(4)
            )
            groups = expected_groups(epoch, "1", entries)
            groups_total += len(groups)
            keys_total += len(entries)
            hanging_groups += NODES[3] in groups
            for n, keys in groups.items():
                all_expected.setdefault(n, []).extend(keys)
            started = time.monotonic()
            riak.put(
                "epochs",
                "epochs",
                f"{epoch}-1",
                "|".join(entries).encode(),
                content_type="text/plain",
            )
            slowest = max(slowest, time.monotonic() - started)
        # The hanging companion holds a worker for HOOK_TIMEOUT_S; no PUT may wait for it.
        assert slowest < HOOK_TIMEOUT_S / 2

        def settled() -> bool:
            s = riak.stats()
            done = ("posted", "failed", "breaker_rejected")
            return bool(sum(s[f"devnode_hook_{c}_total"] for c in done) >= groups_total)

        wait_for(settled, timeout_s=20)
        stats = riak.stats()
    for n, companion in companions.items():
        assert sorted(companion.keys()) == sorted(all_expected[n])
        assert all(path == "/v1/keys" for path, _ in companion.documents())
        assert all(
            body["dc"] == "1" and isinstance(body["epoch"], int)
            for _, body in companion.documents()
        )
    failing = len([n for n in all_expected if n in (NODES[2], NODES[3])])
    assert failing > 0
    assert stats["devnode_hook_posted_total"] == sum(len(c.received) for c in companions.values())
    # One group per node and epoch: never 5 failures in a row before the last, so no
    # breaker refused anything.
    assert stats["devnode_hook_breaker_rejected_total"] == 0
    assert stats["devnode_hook_failed_total"] == groups_total - stats["devnode_hook_posted_total"]
    assert stats["devnode_hook_timeouts_total"] == hanging_groups > 0
    assert stats["devnode_hook_keys_total"] == keys_total
    assert stats["devnode_hook_received_total"] == 5
    assert stats["devnode_hook_dropped_total"] == 0


def test_one_post_per_node_with_epoch_and_dc(
    hooked_node: DevnodeProcess, companions: dict[str, Companion]
) -> None:
    node = hooked_node
    entries = ["type1:subtype1:0", "type1:subtype1:1", "type1:subtype1:2", "type3::0"]
    groups = expected_groups(1413813813, "2", entries)
    with RiakClient([node.url]) as riak:
        riak.put(
            "epochs",
            "epochs",
            "1413813813-2",
            "|".join(entries).encode(),
            content_type="text/plain",
        )
        wanted = len([n for n in groups if n in companions])
        wait_for(lambda: sum(len(c.received) for c in companions.values()) >= wanted)
    for n, companion in companions.items():
        if n in groups:
            assert companion.documents() == [
                ("/v1/keys", {"epoch": 1413813813, "dc": "2", "keys": groups[n]})
            ]
        else:
            assert companion.received == []


def test_invalid_metadata_is_counted_and_stored(
    hooked_node: DevnodeProcess, companions: dict[str, Companion]
) -> None:
    node = hooked_node
    with RiakClient([node.url]) as riak:
        riak.put("epochs", "epochs", "not-a-metadata-key", b"junk", content_type="text/plain")
        riak.put("epochs", "epochs", "1413813813-1", b"type1::x", content_type="text/plain")
        wait_for(lambda: riak.stats()["devnode_hook_parse_errors_total"] == 2)
        assert riak.get("epochs", "epochs", "not-a-metadata-key").value == b"junk"
    assert all(not c.received for c in companions.values())


def test_queue_overflow_drops_and_counts_without_failing_puts(
    tmp_path: Path, devnode_factory: type[DevnodeProcess], hanging_url: str
) -> None:
    urls = {n: hanging_url for n in NODES}
    config = write_config(tmp_path / "devnode.toml", urls, queue_max=2, workers=1)
    node = devnode_factory(tmp_path / "data", config=config)
    node.start()
    with RiakClient([node.url]) as riak:
        started = time.monotonic()
        for epoch in range(1413813813, 1413813833):
            riak.put("epochs", "epochs", f"{epoch}-1", b"type1::0", content_type="text/plain")
        assert time.monotonic() - started < HOOK_TIMEOUT_S * 2
        stats = riak.stats()
    assert stats["devnode_hook_dropped_total"] >= 15
    assert stats["devnode_hook_received_total"] + stats["devnode_hook_dropped_total"] == 20


def test_writes_to_other_types_fire_no_hook(
    hooked_node: DevnodeProcess, companions: dict[str, Companion]
) -> None:
    node = hooked_node
    with RiakClient([node.url]) as riak:
        riak.put("events", "epochs", "1413813813-1", b"type1::0")
        riak.put(None, "epochs", "1413813813-1", b"type1::0")
        time.sleep(0.3)
        assert riak.stats()["devnode_hook_received_total"] == 0


def test_breaker_opens_rejects_probes_and_closes(
    tmp_path: Path, devnode_factory: type[DevnodeProcess]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"  # nothing listens yet: every POST is refused
    cooldown_s = 3.0
    config = write_config(
        tmp_path / "devnode.toml",
        {n: url for n in NODES},
        workers=1,
        breaker=(2, int(cooldown_s * 1000)),
    )
    node = devnode_factory(tmp_path / "data", config=config)
    node.start()
    epochs = iter(range(1413813813, 1413813913))
    revived: Companion | None = None
    with RiakClient([node.url]) as riak:

        def write() -> int:
            """One metadata write of one key: one group, all to ``url``."""
            epoch = next(epochs)
            riak.put("epochs", "epochs", f"{epoch}-1", b"type1::0", content_type="text/plain")
            return epoch

        def settle(total: int) -> dict[str, Any]:
            done = ("posted", "failed", "breaker_rejected")

            def settled() -> bool:
                s = riak.stats()
                return bool(sum(s[f"devnode_hook_{c}_total"] for c in done) >= total)

            wait_for(settled)
            return riak.stats()

        try:
            # Two refused POSTs in a row open the breaker.
            write()
            write()
            stats = settle(2)
            assert stats["devnode_hook_failed_total"] == 2
            assert stats["devnode_hook_breaker_open_total"] == 1
            assert stats["devnode_breakers"] == {url: {"state": "open", "failures": 2}}
            opened_at = time.monotonic()

            # While open, groups are refused without a POST; the companion comes back,
            # but nothing is tried before the cool-down.
            revived = Companion(port=port)
            write()
            write()
            stats = settle(4)
            assert time.monotonic() - opened_at < cooldown_s, "too slow to see it open"
            assert stats["devnode_hook_breaker_rejected_total"] == 2
            assert stats["devnode_hook_failed_total"] == 2
            assert revived.received == []

            # After the cool-down one probe goes, succeeds and closes the breaker.
            time.sleep(max(0.0, opened_at + cooldown_s + 0.2 - time.monotonic()))
            probe = write()
            stats = settle(5)
            assert [body["epoch"] for _, body in revived.documents()] == [probe]
            assert stats["devnode_hook_posted_total"] == 1
            assert stats["devnode_breakers"] == {url: {"state": "closed", "failures": 0}}

            # Closed: the next groups go as usual.
            following = write()
            stats = settle(6)
            assert [body["epoch"] for _, body in revived.documents()] == [probe, following]
            assert stats["devnode_hook_breaker_rejected_total"] == 2
            assert stats["devnode_hook_breaker_open_total"] == 1
        finally:
            if revived is not None:
                revived.close()


def test_a_worker_outlives_an_unexpected_error(
    tmp_path: Path, devnode_factory: type[DevnodeProcess], companions: dict[str, Companion]
) -> None:
    # http.client refuses a non-numeric port with InvalidURL (a ValueError, not an
    # OSError) before any request: an error the hook does not expect. The only worker
    # must count it and go on to the next write.
    urls = {node: c.url for node, c in companions.items()}
    bad = {**urls, NODES[2]: "http://127.0.0.1:port", NODES[3]: "http://127.0.0.1:port"}
    config = write_config(tmp_path / "devnode.toml", bad, workers=1)
    node = devnode_factory(tmp_path / "data", config=config)
    node.start()
    entries = [f"type1::{c}" for c in range(40)]
    with RiakClient([node.url]) as riak:
        # Epochs whose keys go to dev3 or dev4 (the bad URLs), then one that goes only
        # to the live companions of dev1 and dev2.
        failing = next(
            e
            for e in range(1413813813, 1413814813)
            if expected_groups(e, "1", entries).keys() & {NODES[2], NODES[3]}
        )
        fine = next(
            e
            for e in range(1413813813, 1413814813)
            if set(expected_groups(e, "1", entries[:1])) <= {NODES[0], NODES[1]}
        )
        riak.put("epochs", "epochs", f"{failing}-1", "|".join(entries).encode(),
                 content_type="text/plain")  # fmt: skip
        wait_for(lambda: riak.stats()["devnode_hook_hook_errors_total"] == 1)
        riak.put("epochs", "epochs", f"{fine}-1", entries[0].encode(), content_type="text/plain")
        wait_for(lambda: any(body["epoch"] == fine for c in companions.values()
                             for _, body in c.documents()))  # fmt: skip
