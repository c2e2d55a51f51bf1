"""The companion's HTTP surface under hostile or failing conditions (real gunicorn):
deeply nested JSON is a 400, an oversized body is refused (413) while it is still
arriving, readiness follows the Riak node while liveness does not, and a second
companion on the same state directory exits with one line naming the holder.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Callable

import pytest

from companion.testing import CompanionProcess, Stack

TEN_MB = 10 * 1024 * 1024


def post_raw(port: int, body_chunks: int, chunk: bytes) -> tuple[int, int]:
    """POST /v1/keys with a declared 10 MB body sent chunk by chunk, until the server
    answers; returns (status, bytes sent before the answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        head = (
            "POST /v1/keys HTTP/1.1\r\nHost: companion\r\nContent-Type: application/json\r\n"
            f"Content-Length: {body_chunks * len(chunk)}\r\n\r\n"
        )
        sock.sendall(head.encode())
        sent = 0
        for _ in range(body_chunks):
            if select.select([sock], [], [], 0)[0]:
                break  # answered before the body ended
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
        answer = b""
        while b"\r\n" not in answer:
            data = sock.recv(4096)
            if not data:
                break
            answer += data
    return int(answer.split(b" ", 2)[1]), sent


def test_a_key_group_nested_too_deeply_is_a_400(stack_factory: Callable[..., Stack]) -> None:
    stack = stack_factory()
    nested = b"[" * 100_000 + b"]" * 100_000
    status, body = stack.companion.request("POST", "/v1/keys", None, raw=nested)
    assert status == 400, body
    assert b"nested too deeply" in body
    status, body = stack.companion.request("POST", "/v1/audit", None, raw=b'{"a":' * 50_000)
    assert status == 400, body
    assert stack.companion.json("/healthz")["status"] == "ok"


def test_a_body_over_the_limit_is_refused_while_it_arrives(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    # Declared size over the limit: refused before any of the body is read.
    status, sent = post_raw(stack.companion.port, TEN_MB // 65536, b" " * 65536)
    assert status == 413
    assert sent < TEN_MB
    # No declared size (chunked): refused as soon as the bytes read pass the limit.
    with socket.create_connection(("127.0.0.1", stack.companion.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/keys HTTP/1.1\r\nHost: companion\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        piece = b" " * 65536
        frame = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        sent = 0
        while sent < TEN_MB and not select.select([sock], [], [], 0)[0]:
            try:
                sock.sendall(frame)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert sent < TEN_MB
    assert stack.companion.json("/healthz")["status"] == "ok"


def test_readiness_follows_the_riak_node_while_liveness_does_not(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    status, body = stack.companion.request("GET", "/readyz")
    assert status == 200, body
    assert json.loads(body) == {"status": "ready", "riak": True, "zookeeper": None}
    stack.devnode.stop()
    status, body = stack.companion.request("GET", "/readyz")
    assert status == 503
    answer = json.loads(body)
    assert answer["riak"] is False
    assert "riak node http://127.0.0.1:" in answer["status"]
    assert stack.companion.json("/healthz")["status"] == "ok"


def test_a_second_companion_on_the_same_state_directory_exits_naming_the_holder(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    second = CompanionProcess(stack.companion.config, start_timeout_s=20)
    with pytest.raises(RuntimeError) as failed:
        second.start()
    second.stop()
    message = str(failed.value)
    assert "companion exited with 1" in message
    assert f"is in use by process {stack.companion.pid}" in message
    assert "Traceback" not in message
    # The first one was not disturbed: it serves, its workers' status files are there.
    assert stack.companion.json("/healthz")["status"] == "ok"
    deadline = time.monotonic() + 20
    while stack.companion.json("/v1/status")["workers"] < 2 and time.monotonic() < deadline:
        time.sleep(0.1)  # both workers booted (on a loaded machine, maybe not yet)
    assert stack.companion.json("/v1/status")["workers"] == 2
