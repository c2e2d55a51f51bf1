"""Companion stand-ins for the post-commit hooks' tests (the Erlang hook and the
devnode's twin): real HTTP servers on loopback ports that record every POST, and one that
accepts connections and never answers."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple


class Post(NamedTuple):
    """One POST a :class:`Companion` received."""

    path: str
    content_type: str
    body: bytes


class Companion:
    """A companion stand-in on a loopback port (``port``, or a free one), recording every
    POST it receives in :attr:`received` and answering 202."""

    def __init__(self, port: int = 0) -> None:
        self.received: list[Post] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append(Post(self.path, self.headers.get("Content-Type", ""), body))
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def bodies(self) -> list[bytes]:
        """Each POST's body, in the order received."""
        return [post.body for post in self.received]

    def documents(self) -> list[tuple[str, dict[str, Any]]]:
        """Each POST's path and its body parsed as JSON, in the order received."""
        return [(post.path, json.loads(post.body)) for post in self.received]

    def keys(self) -> list[str]:
        """Every chunk key of every key-group body received."""
        return [key for _, document in self.documents() for key in document["keys"]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class HangingCompanion:
    """Accepts connections (the kernel's backlog) and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.sock.close()
