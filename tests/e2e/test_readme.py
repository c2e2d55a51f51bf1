"""The README is executable and true: every shell and Python block of README.md runs.

The blocks are taken from README.md in order and each is a test of its own (in README
order; they share one stack and one working directory, so a block may use what an
earlier one made: the plugin file, the key pair, the events ``loadgen`` sent).

Markers: an HTML comment on the line right before a block's opening fence.

- ``<!-- readme-test: skip (reason) -->``: not run (needs a real cluster, installs
  packages...). The reason is shown as the skip reason.
- ``<!-- readme-test: background -->``: daemons. Each command line is started in the
  background, the next block waits until it is healthy (``/ping``, ``/readyz``,
  ``/healthz``), and it keeps running for the blocks after it; at the end each must
  still be running and stop cleanly on SIGTERM.
- ``<!-- readme-test: file PATH -->``: not run, written to PATH (a plugin the blocks
  after it use).
- ``<!-- readme-test: expect (RE ; RE ...) -->``: run as any block, and its output
  (stdout and stderr) must match each regular expression (`` ; `` between them): what
  the block's comments promise it shows (the author's loop: results served, then
  computed here, and the broken plugin's ``problem:`` line).

Every other block must exit with status 0 and print no traceback; a Python block must
also print something (each prints what its query returned: an empty answer fails, as
``read`` exits with status 3 on a range without data).

Addresses: the README uses the well-known ones (8098 Riak or the devnode, ``riak1``
and ``riak2``, 5140/5141 the relocator's intake, 5000 the companion, ``zk:2181``);
this test rewrites them to the free ports of its stack, and sets the environment
variables the daemons read for what the README leaves to their config files
(``RIAK_EVENTS_DEVNODE_CONFIG``: the hook's companion; ``RIAK_EVENTS_RELOCATOR_*``:
intake ports and the cluster; ``RIAK_EVENTS_COMPANION_*``: listen address, node,
ZooKeeper; ``RIAK_EVENTS_LOADGEN_TARGET``). ZooKeeper is the one server the test
starts itself. ``HOME`` is a directory of the working directory, which is not the
checkout: the example configs the README names are linked into it. The context file is
the default one under that ``HOME``: a block that starts the dev stack (``dev up
--detach``, the author's loop) is found by the commands after it, with no address, as
the README says; a dev stack a failed block left running is stopped at the end.
"""

from __future__ import annotations

import http.client
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devnode.testing import free_port
from fleet.harness import ServerProcess, environment_without
from relocator.testing import ZooKeeperProcess, zookeeper_available

README = Path(__file__).parents[2] / "README.md"
MARKER_RE = re.compile(r"<!--\s*readme-test:\s*(skip|background|file|expect)\b\s*(.*?)\s*-->")
FENCE_RE = re.compile(r"^```(\w+)\s*$")
LANGS = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python", "py": "python"}
#: Seconds one block may take (Spark blocks start a JVM on a shared machine).
BLOCK_TIMEOUT_S = 280.0


@dataclass(frozen=True)
class Block:
    """One fenced block of the README."""

    line: int  # of the opening fence, 1-based
    lang: str  # "sh" or "python"
    code: str
    marker: str  # "", "skip", "background", "file", "expect"
    argument: str  # the skip reason, the file path or the expected output

    @property
    def id(self) -> str:
        return f"L{self.line}-{self.lang}" + (f"-{self.marker}" if self.marker else "")


def readme_blocks(text: str) -> list[Block]:
    """The shell and Python blocks of ``text``, each with the marker before it."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE_RE.match(lines[i])
        if fence is None:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        lang = LANGS.get(fence.group(1))
        if lang is None:
            continue
        before = lines[start - 1] if start > 0 else ""
        marker = MARKER_RE.search(before)
        kind, argument = (marker.group(1), marker.group(2).strip("() ")) if marker else ("", "")
        blocks.append(Block(start + 1, lang, "\n".join(body) + "\n", kind, argument))
    return blocks


BLOCKS = readme_blocks(README.read_text())


def http_ok(port: int, path: str) -> bool:
    """Whether ``GET path`` on loopback ``port`` answers 200 now."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2.0)
    try:
        connection.request("GET", path)
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


class Daemon(ServerProcess):
    """One command line of a ``background`` block, run by bash (``exec``: bash becomes
    the daemon), healthy when ``healthy()`` says so."""

    def __init__(self, line: str, log_path: Path, cwd: Path, env: dict[str, str]) -> None:
        super().__init__(line.split("#", maxsplit=1)[0].strip(), log_path)
        self.line = line
        self._cwd = cwd
        self._env = env

    def start_with(self, healthy: Callable[[], bool]) -> Daemon:
        argv = ["bash", "-c", f"cd {self._cwd} && exec {self.line}"]
        self._launch(argv, healthy=healthy, timeout_s=60.0, env=self._env, poll_interval_s=0.2)
        return self


@dataclass
class Stack:
    """The working directory, environment, address rewrites and daemons of the run."""

    workdir: Path
    env: dict[str, str]
    rewrites: list[tuple[str, str]]
    health: dict[str, Callable[[], bool]]
    daemons: list[Daemon]

    def rewrite(self, code: str) -> str:
        for old, new in self.rewrites:
            code = code.replace(old, new)
        return code


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """ZooKeeper, and the addresses and environment the README's daemons are given;
    the daemons themselves are started by the README's background blocks."""
    if not zookeeper_available():
        pytest.fail("ZooKeeper is not installed: apt-get install zookeeper default-jre-headless")
    root = tmp_path_factory.mktemp("readme")
    workdir = root / "work"
    (workdir / "home").mkdir(parents=True)
    # The README names the example configs by their path in a checkout; they are linked
    # (read only) into the working directory, which is outside the checkout so that
    # nothing the blocks write lands in the source tree.
    for name in sorted(set(re.findall(r"\b[\w]+/example-config\.toml", README.read_text()))):
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).symlink_to(README.parent / name)
    zookeeper = ZooKeeperProcess(root / "zookeeper").start()
    devnode, companion = free_port(), free_port()
    udp, tcp, metrics = free_port(), free_port(), free_port()
    node = "dev1@127.0.0.1"
    devnode_config = root / "devnode.toml"
    devnode_config.write_text(
        f'[ring]\nring_size = 64\nnodes = ["{node}"]\n'
        f'[companions]\n"{node}" = "http://127.0.0.1:{companion}"\n'
    )
    devnode_url = f"http://127.0.0.1:{devnode}"
    env = environment_without(("RIAK_EVENTS_", "PROMETHEUS_MULTIPROC_DIR"))
    # The default context file, under HOME: written by a block's `dev up`, read by the
    # commands after it (environment_without names none).
    env.pop("RIAK_EVENTS_CONTEXT", None)
    env.update(
        {
            "HOME": str(workdir / "home"),
            "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "RIAK_EVENTS_DEVNODE_CONFIG": str(devnode_config),
            "RIAK_EVENTS_RELOCATOR_UDP_LISTEN": f"127.0.0.1:{udp}",
            "RIAK_EVENTS_RELOCATOR_TCP_LISTEN": f"127.0.0.1:{tcp}",
            "RIAK_EVENTS_RELOCATOR_METRICS_LISTEN": f"127.0.0.1:{metrics}",
            "RIAK_EVENTS_RELOCATOR_CLUSTER": f"local={devnode_url}",
            "RIAK_EVENTS_RELOCATOR_GRACE_S": "1",
            "RIAK_EVENTS_COMPANION_LISTEN": f"127.0.0.1:{companion}",
            "RIAK_EVENTS_COMPANION_NODE": devnode_url,
            "RIAK_EVENTS_COMPANION_ZOOKEEPER": zookeeper.hosts,
            "RIAK_EVENTS_LOADGEN_TARGET": f"127.0.0.1:{tcp}",
        }
    )
    rewrites = [
        ("http://riak1:8098", devnode_url),
        ("http://riak2:8098", f"http://localhost:{devnode}"),  # another URL, same node
        ("127.0.0.1:8098", f"127.0.0.1:{devnode}"),
        ('"127.0.0.1", 5140', f'"127.0.0.1", {udp}'),
        ('"127.0.0.1", 5141', f'"127.0.0.1", {tcp}'),
        ("127.0.0.1:5140", f"127.0.0.1:{udp}"),
        ("127.0.0.1:5141", f"127.0.0.1:{tcp}"),
        ("127.0.0.1:5000", f"127.0.0.1:{companion}"),
        ("zk:2181", zookeeper.hosts),
        ("127.0.0.1:2181", zookeeper.hosts),
    ]
    health = {
        "devnode": lambda: http_ok(devnode, "/ping"),
        "relocator": lambda: http_ok(metrics, "/readyz"),
        "companion": lambda: http_ok(companion, "/healthz"),
    }
    running = Stack(workdir, env, rewrites, health, [])
    try:
        yield running
    finally:
        died = [d.name for d in running.daemons if not d.running]
        logs = {d.name: d.log_text()[-4000:] for d in running.daemons}
        codes = {d.name: d.stop(timeout_s=30.0) for d in reversed(running.daemons)}
        _stop_dev_stack(workdir, env)
        zookeeper.stop()
    assert not died, f"background daemons died during the README run: {died}\n{logs}"
    unclean = {name: code for name, code in codes.items() if code not in (0, -15)}
    assert not unclean, f"daemons did not stop cleanly on SIGTERM: {unclean}\n{logs}"


def _stop_dev_stack(workdir: Path, env: dict[str, str]) -> None:
    """``dev down``, when a block's dev stack still runs (that block failed)."""
    if not (workdir / "home" / ".local" / "state" / "riak-events" / "dev").exists():
        return
    subprocess.run(
        ["riak-events", "dev", "down"], cwd=workdir, env=env, capture_output=True,
        timeout=120, check=False,
    )  # fmt: skip


def _daemon_kind(line: str) -> str:
    words = line.split()
    return words[1] if len(words) > 1 and words[0] == "riak-events" else words[0]


def _start_background(stack: Stack, block: Block) -> None:
    for text in block.code.splitlines():
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        line = stack.rewrite(text)
        kind = _daemon_kind(line)
        healthy = stack.health.get(kind)
        assert healthy is not None, f"README line {block.line}: no health check for {kind!r}"
        log_path = stack.workdir.parent / f"{kind}-L{block.line}.log"
        daemon = Daemon(line, log_path, stack.workdir, stack.env)
        daemon.start_with(healthy)
        stack.daemons.append(daemon)
        assert "Traceback" not in daemon.log_text(), daemon.log_text()


def _run(stack: Stack, block: Block) -> subprocess.CompletedProcess[str]:
    code = stack.rewrite(block.code)
    if block.lang == "python":
        script = stack.workdir / f"readme_L{block.line}.py"
        script.write_text(code)
        argv = [sys.executable, str(script)]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-c", code]
    return subprocess.run(
        argv,
        cwd=stack.workdir,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )


def test_the_readme_has_blocks_and_markers_are_known() -> None:
    text = README.read_text()
    assert len(BLOCKS) >= 10
    markers = re.findall(r"<!--\s*readme-test:\s*(\w+)", text)
    assert set(markers) <= {"skip", "background", "file", "expect"}, markers
    # Every marker sits right before a block it applies to.
    assert len(markers) == sum(1 for b in BLOCKS if b.marker)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_readme_block(stack: Stack, block: Block) -> None:
    if block.marker == "skip":
        pytest.skip(f"README line {block.line}: {block.argument}")
    if block.marker == "file":
        path = stack.workdir / block.argument
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.code)
        return
    if block.marker == "background":
        _start_background(stack, block)
        return
    done = _run(stack, block)
    where = f"README line {block.line} ({block.lang}) exited {done.returncode}"
    shown = f"{where}\n--- code ---\n{block.code}--- stdout ---\n{done.stdout[-3000:]}\n"
    shown += f"--- stderr ---\n{done.stderr[-5000:]}"
    assert done.returncode == 0, shown
    assert "Traceback" not in done.stdout + done.stderr, shown
    if block.lang == "python":
        assert done.stdout.strip(), f"README line {block.line} printed nothing\n{shown}"
    if block.marker == "expect":
        for expected in block.argument.split(" ; "):
            assert re.search(expected, done.stdout + done.stderr), f"no {expected!r}\n{shown}"
