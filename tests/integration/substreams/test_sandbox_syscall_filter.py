"""The sandbox's seccomp filter against plugins that go around Python through ctypes:
a raw libc socket that PUTs into a real devnode, and a raw libc file write. Each probe
is run twice: with the filter (blocked, the result says why) and without it (the probe
really does what it claims, so the first half can fail)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from devnode.testing import DevnodeProcess
from eventstore.riak import NotFound, RiakClient
from substreams.api import Context, Substream
from substreams.loader import load_file
from substreams.sandbox import run_substreams
from substreams.syscall_filter import program

PROBES = """
import ctypes, os, struct
from substreams import substream

libc = ctypes.CDLL(None, use_errno=True)

@substream(name="libc_put", timeout_s=5)
def libc_put(events, ctx):
    host, port, key = events[0]["host"], events[0]["port"], events[0]["key"]
    fd = libc.socket(2, 1, 0)  # AF_INET, SOCK_STREAM
    if fd < 0:
        return {"socket_errno": ctypes.get_errno()}
    # struct sockaddr_in: family in host order, port and address in network order
    address = struct.pack("=H", 2) + struct.pack("!H4s8x", port, bytes(map(int, host.split("."))))
    if libc.connect(fd, address, len(address)) != 0:
        return {"connect_errno": ctypes.get_errno()}
    body = b"escaped"
    request = (
        f"PUT /types/default/buckets/probe/keys/{key} HTTP/1.1\\r\\nHost: {host}\\r\\n"
        f"Content-Type: text/plain\\r\\nContent-Length: {len(body)}\\r\\n"
        "Connection: close\\r\\n\\r\\n"
    ).encode() + body
    libc.send(fd, request, len(request), 0)
    answer = ctypes.create_string_buffer(4096)
    n = libc.recv(fd, answer, 4096, 0)
    libc.close(fd)
    return {"answer": answer.raw[:max(n, 0)].split(b"\\r\\n")[0].decode()}

@substream(name="libc_write", timeout_s=5)
def libc_write(events, ctx):
    path = events[0]["path"].encode()
    fd = libc.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    if fd < 0:
        return {"open_errno": ctypes.get_errno()}
    libc.write(fd, b"escaped", 7)
    libc.close(fd)
    return {"wrote": events[0]["path"]}
"""


@pytest.fixture
def probes(tmp_path: Path) -> dict[str, Substream]:
    path = tmp_path / "probes.py"
    path.write_text(PROBES)
    return {s.name: s for s in load_file(path)}


def test_the_filter_is_available_here() -> None:
    # Linux with Debian's libseccomp2 and pyseccomp: the tests below must not pass by
    # accident on a machine without the filter.
    assert program() is not None


def _stored(riak: RiakClient, key: str) -> bytes | None:
    try:
        return riak.get("default", "probe", key).value
    except NotFound:
        return None


def test_a_libc_socket_put_into_the_store_is_blocked_and_says_why(
    probes: dict[str, Substream], session_devnode: DevnodeProcess, riak: RiakClient
) -> None:
    host, port = session_devnode.url.removeprefix("http://").split(":")
    ctx = Context(1, "dc1", "t", "", 0)
    blocked_key, open_key = f"blocked-{uuid.uuid4().hex}", f"open-{uuid.uuid4().hex}"

    def event(key: str) -> list[dict[str, object]]:
        return [{"host": host, "port": int(port), "key": key}]

    (outcome,) = run_substreams([probes["libc_put"]], event(blocked_key), ctx)
    assert (outcome.status, outcome.kind) == ("killed", "killed")
    assert "seccomp filter refused a system call" in (outcome.error or "")
    assert _stored(riak, blocked_key) is None

    # The same probe without the filter reaches the store: the probe is real.
    (escaped,) = run_substreams([probes["libc_put"]], event(open_key), ctx, syscall_filter=False)
    assert escaped.ok, escaped.error
    assert _stored(riak, open_key) == b"escaped"


def test_a_libc_file_write_is_blocked_and_says_why(
    probes: dict[str, Substream], tmp_path: Path
) -> None:
    ctx = Context(1, "dc1", "t", "", 0)
    blocked, written = tmp_path / "blocked.txt", tmp_path / "written.txt"
    (outcome,) = run_substreams([probes["libc_write"]], [{"path": str(blocked)}], ctx)
    assert (outcome.status, outcome.kind) == ("killed", "killed")
    assert "seccomp filter refused a system call" in (outcome.error or "")
    assert not blocked.exists()

    (escaped,) = run_substreams(
        [probes["libc_write"]], [{"path": str(written)}], ctx, syscall_filter=False
    )
    assert escaped.ok, escaped.error
    assert written.read_bytes() == b"escaped"


def test_threads_still_work_under_the_filter(tmp_path: Path) -> None:
    # glibc's pthread_create tries clone3 first: the filter answers ENOSYS so it falls
    # back to clone with CLONE_THREAD, which is allowed.
    path = tmp_path / "threads.py"
    path.write_text(
        "import threading\nfrom substreams import substream\n"
        "@substream(name='threads')\n"
        "def threads(events, ctx):\n"
        "    out = []\n"
        "    workers = [threading.Thread(target=out.append, args=(i,)) for i in range(4)]\n"
        "    for w in workers: w.start()\n"
        "    for w in workers: w.join()\n"
        "    return sorted(out)\n"
    )
    (sub,) = load_file(path)
    (outcome,) = run_substreams([sub], [], Context(1, "dc1", "t", "", 0))
    assert outcome.ok, outcome.error
