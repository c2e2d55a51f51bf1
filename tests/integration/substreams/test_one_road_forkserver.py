"""One fork-server protocol (issue 22, item 2): the server answers one kind of request,
the companion's ``"chunk"``, which the consumer's fallback sends too, through the one
client (:class:`substreams.forkserver.ForkServer`); the fallback's answers for a chunk
the decoder refuses and for a plugin the server cannot load stay what they were."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from consumer_lib.fallback import UndecodedChunk, run_served
from consumer_lib.forkserver import fallback_server
from eventstore.blob import DecodeLimits, pack_blob
from eventstore.names import ChunkKey
from substreams.forkserver import ForkServer
from substreams.loader import load_file
from substreams.protocol import DEFAULT_CAP

KEY = ChunkKey(1_700_003_000, "dc1", "web", "app", 0)
EVENTS = [{"type": "web", "status": s, "url": f"/{i}"} for i, s in enumerate([200, 503, 500])]
PLUGIN = """
from substreams import substream

@substream(name="errors_{n}", types=["web"], fields=["status"])
def errors(events, ctx):
    return {{"errors": sum(1 for e in events if e["status"] >= 500), "n": {n}}}
"""


def plugin_file(directory: Path, n: int) -> Path:
    """``directory/errors.py`` holding version ``n`` of :data:`PLUGIN`."""
    path = directory / "errors.py"
    path.write_text(PLUGIN.format(n=n))
    return path


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    s = fallback_server()
    yield s
    s.close()


def test_the_fork_server_answers_only_the_chunk_request(server: ForkServer) -> None:
    # The consumer's old request ("decode", no kind) is refused by name, not served.
    header = {
        "plugins": [],
        "ctx": [KEY.epoch, KEY.dc, KEY.type, KEY.subtype, KEY.chunk],
        "decode_limits": dataclasses.asdict(DecodeLimits()),
    }
    reply, payloads = server.request(header, [pack_blob(EVENTS)], 60.0, "test")
    assert (reply, payloads) == ({"unavailable": "no request of kind None: only 'chunk'"}, [])


def test_the_fallback_and_a_batch_of_the_companion_go_the_same_road(
    server: ForkServer, tmp_path: Path
) -> None:
    subs = load_file(plugin_file(tmp_path, 1))
    blob = pack_blob(EVENTS)
    (run,) = run_served(server, subs, blob, KEY, DecodeLimits())
    assert (run.status, run.result) == ("ok", {"errors": 2, "n": 1})
    # Two chunks in one request and one child, as a companion worker sends them.
    other = ChunkKey(KEY.epoch, KEY.dc, KEY.type, KEY.subtype, 1)
    served = server.run_chunks(
        [(subs, blob, KEY), (subs, pack_blob(EVENTS[:1]), other)],
        decode_limits=DecodeLimits(), cap=DEFAULT_CAP, max_parallel=1, where="test",
    )  # fmt: skip
    assert served.unavailable is None
    assert [[o is not None and o.ok for o in c.outcomes] for c in served.chunks] == [[True], [True]]


def test_a_chunk_the_decoder_refuses_raises_for_the_stores_own_error(
    server: ForkServer, tmp_path: Path
) -> None:
    subs = load_file(plugin_file(tmp_path, 2))
    with pytest.raises(UndecodedChunk, match=r"chunk does not decode: .*not an array of events"):
        run_served(server, subs, pack_blob({"not": "events"}), KEY, DecodeLimits())


def test_a_plugin_changed_since_it_was_loaded_is_an_error_naming_why(
    server: ForkServer, tmp_path: Path
) -> None:
    subs = load_file(plugin_file(tmp_path, 3))
    plugin_file(tmp_path, 4)  # another version on disk than the one loaded
    (run,) = run_served(server, subs, pack_blob(EVENTS), KEY, DecodeLimits())
    assert run.status == "error"
    assert run.error is not None
    assert run.error.startswith("exception: not loadable in the fork server: "), run.error
    assert "is now version" in run.error
