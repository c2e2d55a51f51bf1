"""Every health command of `riak-events cluster` (and compose) against a tiny server that
answers 200, 404, 500, garbage or nothing: healthy means healthy, and a failure says what
the service answered."""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from fleet.cluster import topology as topo

ROOT = Path(__file__).resolve().parents[3]
RIAK_HEALTH = ROOT / "deploy/images/riak-health.sh"
NODE = "riak@rc-riak1"


class Answers:
    """What the fake node answers, per path: (status, body)."""

    def __init__(self) -> None:
        self.paths: dict[str, tuple[int, str]] = {}


def stats(node: str, members: list[str]) -> str:
    # The shape of Riak's /stats JSON (mochijson2: no spaces), with other keys around.
    return json.dumps(
        {"connected_nodes": [], "nodename": node, "ring_members": members, "vnode_gets": 3},
        separators=(",", ":"),
    )


@pytest.fixture
def node() -> Iterator[tuple[int, Answers]]:
    answers = Answers()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            code, body = answers.paths.get(self.path, (404, "not found"))
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], answers
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    path = tmp_path / "setup-done"
    path.touch()
    return path


def run(command: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)
    return done.returncode, (done.stdout + done.stderr).strip()


def riak_health(port: int, marker: Path) -> tuple[int, str]:
    return run(
        ["bash", str(RIAK_HEALTH), str(port)],
        env={"PATH": "/usr/bin:/bin", "RIAK_EVENTS_SETUP_MARKER": str(marker)},
    )


def test_a_member_with_bucket_types_is_healthy(node: tuple[int, Answers], marker: Path) -> None:
    port, answers = node
    answers.paths["/types/epochs/props"] = (200, '{"props":{"n_val":3}}')
    answers.paths["/stats"] = (200, stats(NODE, ["riak@rc-riak2", NODE]))
    assert riak_health(port, marker) == (0, "")


@pytest.mark.parametrize(("code", "reason"), [(404, "Not Found"), (500, "Internal Server Error")])
def test_a_node_without_bucket_types_is_not_healthy_and_says_what_it_answered(
    node: tuple[int, Answers], marker: Path, code: int, reason: str
) -> None:
    # The old check passed every status line without " 200" in it: a 404 was healthy.
    port, answers = node
    answers.paths["/types/epochs/props"] = (code, "no")
    answers.paths["/stats"] = (200, stats(NODE, [NODE]))
    status, said = riak_health(port, marker)
    assert status == 1
    assert f"GET /types/epochs/props: HTTP/1.0 {code} {reason}" in said


def test_a_node_that_is_not_a_ring_member_is_not_healthy(
    node: tuple[int, Answers], marker: Path
) -> None:
    port, answers = node
    answers.paths["/types/epochs/props"] = (200, "{}")
    answers.paths["/stats"] = (200, stats(NODE, ["riak@rc-riak2", "riak@rc-riak10"]))
    status, said = riak_health(port, marker)
    assert status == 1
    assert said.startswith(f"{NODE} is not a ring member yet")


def test_a_member_whose_name_prefixes_another_is_told_apart(
    node: tuple[int, Answers], marker: Path
) -> None:
    port, answers = node
    answers.paths["/types/epochs/props"] = (200, "{}")
    answers.paths["/stats"] = (200, stats(NODE, [NODE + "0"]))
    assert riak_health(port, marker)[0] == 1


def test_stats_without_membership_fields_is_not_healthy(
    node: tuple[int, Answers], marker: Path
) -> None:
    port, answers = node
    answers.paths["/types/epochs/props"] = (200, "{}")
    answers.paths["/stats"] = (200, "{}")
    assert riak_health(port, marker) == (1, "GET /stats: no nodename or ring_members in the answer")


def test_first_start_steps_not_finished_is_not_healthy(
    node: tuple[int, Answers], tmp_path: Path
) -> None:
    port, answers = node
    answers.paths["/types/epochs/props"] = (200, "{}")
    answers.paths["/stats"] = (200, stats(NODE, [NODE]))
    status, said = riak_health(port, tmp_path / "absent")
    assert status == 1
    assert said.startswith("first-start steps not finished")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_nothing_listening_is_not_healthy(marker: Path) -> None:
    port = free_port()
    assert riak_health(port, marker) == (
        1,
        f"GET /types/epochs/props: nothing answers on 127.0.0.1:{port}",
    )


@contextlib.contextmanager
def tcp_server(answer: bytes | None) -> Iterator[int]:
    """A server on a free loopback port that reads up to 4 bytes, then writes ``answer``
    and closes (``None``: closes at once, without a word); yields its port."""

    class Reply(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            if answer is not None:
                self.request.recv(4)
                self.request.sendall(answer)
            self.request.close()

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Reply)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def silent() -> Iterator[int]:
    with tcp_server(None) as port:
        yield port


def test_a_connection_closed_without_an_answer_is_not_healthy(silent: int, marker: Path) -> None:
    status, said = riak_health(silent, marker)
    assert status == 1
    assert said.startswith("GET /types/epochs/props: no answer")


# -- the project image's check (python -m fleet.waitready) -----------------------


def project_health(port: int) -> tuple[int, str]:
    command = list(topo.http_ok(port, "/readyz"))
    command[0] = sys.executable
    return run(command)


@pytest.mark.parametrize("code", [200, 404, 500])
def test_the_project_image_check_passes_on_200_only(node: tuple[int, Answers], code: int) -> None:
    port, answers = node
    answers.paths["/readyz"] = (code, "not ready: riak" if code != 200 else "ok")
    status, said = project_health(port)
    assert (status == 0) is (code == 200), said
    if code != 200:
        assert f"HTTP {code}" in said


def test_the_project_image_check_fails_with_nothing_listening() -> None:
    status, said = project_health(free_port())
    assert status == 1
    assert "ConnectError" in said


# -- ZooKeeper's ruok ------------------------------------------------------------------


def zookeeper_health(port: int) -> int:
    script = topo.ZOOKEEPER_HEALTH[-1].replace("/2181", f"/{port}")
    return run(["bash", "-c", script])[0]


@pytest.mark.parametrize(("answer", "healthy"), [(b"imok", True), (b"", False), (b"nope", False)])
def test_zookeeper_is_healthy_only_when_it_answers_imok(answer: bytes, healthy: bool) -> None:
    with tcp_server(answer) as port:
        assert (zookeeper_health(port) == 0) is healthy


def test_zookeeper_not_listening_is_not_healthy() -> None:
    assert zookeeper_health(free_port()) != 0


# -- one check everywhere ----------------------------------------------------------------


def test_compose_and_cluster_up_run_the_same_checks() -> None:
    compose = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())
    services = compose["services"]
    riak = topo.build("rc", flavor="riak", nodes=2)
    node_health = riak.get("riak1")
    assert node_health is not None
    assert services["riak1"]["healthcheck"]["test"] == ["CMD", *node_health.health]
    zookeeper = riak.get("zookeeper")
    assert zookeeper is not None
    # Compose spells a literal $ as $$.
    compose_zookeeper = [a.replace("$$", "$") for a in services["zookeeper"]["healthcheck"]["test"]]
    assert compose_zookeeper == ["CMD", *zookeeper.health]
