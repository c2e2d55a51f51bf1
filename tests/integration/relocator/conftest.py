"""Fixtures of the relocator's integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from relocator_rig import Rig

from devnode.testing import DevnodeProcess
from eventstore.riak import RiakClient
from relocator.testing import RelocatorProcess


@pytest.fixture
def rig(
    tmp_path: Path,
    session_devnode: DevnodeProcess,
    riak: RiakClient,
    dc: str,
    relocators: list[RelocatorProcess],
) -> Rig:
    """The test's directory, the session's devnode, a client, a dc and its relocators."""
    return Rig(tmp_path, session_devnode, riak, dc, relocators)
