"""Shared pytest options, the lanes, and server fixtures.

A test's lane is the folder it sits in (``tests/unit`` -> the ``unit`` marker, and so for
integration, contract, e2e, interop, fuzz and perf): :func:`pytest_collection_modifyitems`
marks each item, so no module writes its own lane marker. A unit test may not start a
process: ``subprocess``, ``os.fork`` and the other ways to one raise
:class:`ProcessInUnitTest` while it runs (set-up and teardown included), so a test that
needs a child, a server or an external program belongs in ``tests/integration`` (or
``tests/interop`` for Perl).

``--riak-url=http://host:8098`` points the store contract suite (``tests/contract``) at
a real Riak (or any devnode already running); without it, one devnode subprocess is
started for the session on a free loopback port. Fixtures that start servers wait for
health and print the server's log when a test using them fails.
"""

from __future__ import annotations

import _posixsubprocess
import os
import subprocess
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from consumer_lib.forkserver import fallback_server
from devnode.testing import DevnodeProcess
from eventstore.riak import Retry, RiakClient
from relocator.testing import RelocatorProcess, ZooKeeperProcess, zookeeper_available
from substreams.forkserver import ForkServer


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--riak-url",
        default=None,
        help="run the store contract suite against this Riak HTTP URL instead of a devnode",
    )


TESTS = Path(__file__).resolve().parent
#: The lanes, each the name of a folder of tests/ and of the marker its tests get.
LANES = ("unit", "integration", "contract", "e2e", "interop", "fuzz", "perf")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Before -m selects: each test is in the lane of the folder it sits in.
    for item in items:
        parts = item.path.resolve().relative_to(TESTS).parts
        if len(parts) < 2 or parts[0] not in LANES:
            raise pytest.UsageError(
                f"{item.nodeid}: a test module sits in a folder of its lane, one of "
                f"tests/{{{','.join(LANES)}}}"
            )
        item.add_marker(parts[0])


class ProcessInUnitTest(AssertionError):
    """A unit test tried to start a process (a subprocess, a fork, an external program)."""


def _refuse(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ProcessInUnitTest(
            f"a unit test may not start a process ({what}): move it to tests/integration"
            " (or tests/interop for Perl)"
        )

    return refuse


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # Unit tests run with every way to a new process refused.
    if item.get_closest_marker("unit") is None:
        return (yield)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subprocess.Popen, "__init__", _refuse("subprocess.Popen"))
        mp.setattr(_posixsubprocess, "fork_exec", _refuse("fork_exec"))
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
            mp.setattr(os, name, _refuse(f"os.{name}"))
        return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # Remember each phase's report on the item, so fixtures can see whether it failed.
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


def failed(request: pytest.FixtureRequest) -> bool:
    """Whether the test using this fixture failed in setup or call."""
    return any(
        getattr(getattr(request.node, f"report_{when}", None), "failed", False)
        for when in ("setup", "call")
    )


@pytest.fixture(scope="module")
def fork_server() -> Iterator[ForkServer]:
    """The consumer's fallback fork server (``consumer_lib.forkserver.fallback_server``),
    started on first use, closed after the module."""
    forks = fallback_server()
    yield forks
    forks.close()


@pytest.fixture(scope="session")
def session_devnode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevnodeProcess]:
    """One devnode process for the whole session (default config)."""
    node = DevnodeProcess(tmp_path_factory.mktemp("devnode") / "data").start()
    yield node
    node.stop()


@pytest.fixture(scope="session")
def riak_url(request: pytest.FixtureRequest) -> str:
    """The URL the contract suite runs against: ``--riak-url`` or the session devnode."""
    given = request.config.getoption("--riak-url")
    if given:
        return str(given).rstrip("/")
    node: DevnodeProcess = request.getfixturevalue("session_devnode")
    return node.url


@pytest.fixture
def riak(request: pytest.FixtureRequest, riak_url: str) -> Iterator[RiakClient]:
    """A client of the store under test; prints the devnode's log if the test failed."""
    client = RiakClient([riak_url], retry=Retry(max_tries=3, deadline_s=10.0))
    yield client
    client.close()
    if failed(request) and not request.config.getoption("--riak-url"):
        node: DevnodeProcess = request.getfixturevalue("session_devnode")
        print(f"--- devnode log ({node.log_path}) ---\n{node.log_text()[-20000:]}")


@pytest.fixture
def bucket() -> str:
    """A bucket name of its own for each test (isolation without deleting anything)."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def devnode_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[type[DevnodeProcess]]:
    """Start extra devnodes (own config, own data dir); all stopped after the test,
    and their logs printed if it failed."""
    started: list[DevnodeProcess] = []

    class Factory(DevnodeProcess):
        def start(self) -> DevnodeProcess:
            started.append(self)
            return super().start()

    yield Factory
    for node in started:
        node.stop()
        if failed(request):
            print(f"--- devnode log ({node.log_path}) ---\n{node.log_text()[-20000:]}")


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One real ZooKeeper server (Debian's zookeeper package) for the session, on a free
    loopback port with its own data dir; tests isolate themselves by znode root."""
    if not zookeeper_available():
        pytest.fail("ZooKeeper is not installed: apt-get install zookeeper default-jre-headless")
    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()


@pytest.fixture
def zookeeper(request: pytest.FixtureRequest, zookeeper_server: ZooKeeperProcess) -> Iterator[str]:
    """``hosts`` of the session's ZooKeeper plus a fresh root path for this test
    (``host:port`` and ``/t-<uuid>``); prints the server log if the test failed."""
    yield f"/t-{uuid.uuid4().hex[:12]}"
    if failed(request):
        print(f"--- zookeeper log ({zookeeper_server.log_path}) ---")
        print(zookeeper_server.log_text()[-20000:])


@pytest.fixture
def dc() -> str:
    """A dc name of its own for each test, so metadata keys never collide."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def relocators(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[RelocatorProcess]]:
    """Relocator processes a test starts; stopped afterwards, logs printed on failure."""
    started: list[RelocatorProcess] = []
    yield started
    for r in started:
        r.kill()
        if failed(request):
            print(f"--- relocator log ({r.log_path}) ---\n{r.log_text()[-15000:]}")
