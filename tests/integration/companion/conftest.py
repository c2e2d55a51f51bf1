"""Fixtures of the companion's integration tests: a devnode whose hook drives a real
companion (gunicorn, pre-forked workers) with the plugins a test writes. ZooKeeper
comes from tests/conftest.py (``zookeeper_server``, ``zookeeper``: a root per test).

``stack_factory(plugins={...}, companion={...})`` writes the plugin files, starts a
devnode (one logical node, its companion URL = the companion's port) and the
companion, and returns a :class:`Stack`; everything is stopped after the test and the
servers' logs are printed when it failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from companion.testing import Stack, start_stack


def failed(request: pytest.FixtureRequest) -> bool:
    """Whether the test failed in setup or call (reports stored by tests/conftest.py)."""
    return any(
        getattr(getattr(request.node, f"report_{when}", None), "failed", False)
        for when in ("setup", "call")
    )


@pytest.fixture
def stack_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Stack]]:
    started: list[Stack] = []

    def make(**kwargs: Any) -> Stack:
        stack = start_stack(tmp_path / f"stack{len(started)}", **kwargs)
        started.append(stack)
        return stack

    yield make
    for stack in started:
        stack.stop()
        if failed(request):
            print(f"--- companion log ---\n{stack.companion.log_text()[-20000:]}")
            print(f"--- devnode log ---\n{stack.devnode.log_text()[-5000:]}")
