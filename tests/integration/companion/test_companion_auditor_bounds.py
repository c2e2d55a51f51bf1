"""The auditor's bounds, against the session devnode: at most ``audit_max_keys`` keys
per round, the next round resuming at the epoch where the cap stopped the last one (so
old epochs are not starved), and the dcs it audits learned from key groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from companion.auditor import Auditor, SeenDcs
from companion.settings import CompanionSettings
from eventstore.names import ChunkKey, MetadataKey, Namespaces, format_metadata
from eventstore.riak import RiakClient
from eventstore.riak.settings import RiakSettings

pytestmark = pytest.mark.integration

NOW = 1_700_004_000


def test_rounds_are_capped_and_resume_where_the_cap_stopped(
    riak: RiakClient, riak_url: str, dc: str, tmp_path: Path
) -> None:
    settings = CompanionSettings(
        state_dir=tmp_path,
        riak=RiakSettings(nodes=(riak_url,)),
        audit_max_keys=6,
        audit_lookback_s=20,
    )
    ns = Namespaces()
    for age in (12, 13, 14):
        epoch = NOW - age
        keys = [ChunkKey(epoch, dc, "t", "", c) for c in range(5)]
        meta = MetadataKey(epoch, dc)
        riak.put(*ns.metadata_location(meta), format_metadata(keys).encode(),
                 content_type="text/plain")  # fmt: skip
    seen = SeenDcs(tmp_path / "dcs", clock=lambda: NOW)
    posted: list[tuple[int, str, int]] = []
    auditor = Auditor(
        settings,
        riak,
        lambda epoch, d, keys: posted.append((epoch, d, len(keys))),
        seen=seen,
        clock=lambda: NOW,
    )
    assert auditor.dcs() == []  # nothing configured, no key group yet
    seen.note(dc)
    assert auditor.dcs() == [dc]
    rounds = [auditor.run_once() for _ in range(3)]
    assert rounds == [5, 5, 5]  # one epoch of 5 keys each time: 10 would pass the cap
    assert posted == [(NOW - 12, dc, 5), (NOW - 13, dc, 5), (NOW - 14, dc, 5)]
