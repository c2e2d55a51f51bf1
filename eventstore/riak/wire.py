"""HTTP/1.1 on one socket: a request's bytes out, its whole answer in (no ``http.client``).

    connection = Connection.open(host, port, connect_timeout_s=2.0)
    head = request_head("PUT", "/types/t/buckets/b/keys/k", host_header, headers, len(body))
    status, headers, body, will_close = connection.exchange(head, body, "PUT", timeout_s)

Why not ``http.client``: per request it builds a response object, a buffered file over
the socket and an ``email`` message for the headers; a companion stores 6-7 results of
~1 KB per chunk, and that machinery was most of each PUT's client CPU (0.16-0.25 ms;
``bench/http_client_bench.py`` measures both). Here the request is one ``bytes`` sent
in one call (with the body when it is small: one segment, so no Nagle wait either); the
answer goes from ``recv_into`` (into the connection's receive buffer, reused) straight
to ``httptools``' response parser, and its body into a second buffer the connection
keeps, copied out once.

What llhttp (through ``httptools``, which the project already uses for pipelined GETs)
does: the status line and headers, the framing of the body (``Content-Length``,
``Transfer-Encoding: chunked`` with its extensions and trailers, a body to the end of
the connection), no body after 1xx, 204 and 304, an interim ``100 Continue`` as a
message of its own, keep-alive (``should_keep_alive()``: ``Connection: close``,
HTTP/1.0 without ``keep-alive``, a body to the end), and the refusal of whatever is
malformed (a bad status line, a negative or repeated ``Content-Length``, a bad chunk
size, ``Content-Length`` with ``Transfer-Encoding``). Two of its strict rules are
relaxed, as ``http.client`` relaxes them: a bare LF ends a line, and a folded header
line continues the value before it (RFC 9112 section 5.2 asks a user agent to accept
it; the leniency that allows it also lets control characters through in a value).

What is left here, because ``httptools`` does not offer it:

- **HEAD**: llhttp learns that an answer has no body only from its caller (a 1 returned
  by ``on_headers_complete``), which ``httptools`` does not pass on. The answer to a
  HEAD ends with its head: the parse stops there, and the connection is closed, as
  whatever came after the head cannot be placed (the client sends no HEAD).
- **The end of the connection**: ``httptools`` has no ``llhttp_finish``; when the peer
  closes, an answer whose head had neither ``Content-Length`` nor chunked coding is
  complete (its body ran to the end), any other is cut short (``IncompleteRead``); no
  byte at all is ``RemoteDisconnected`` (a stale keep-alive connection: the transport
  tries once more on a fresh one).
- **Limits**: llhttp has none on the head; here at most 65536 bytes and 100 header
  lines, as ``http.client``.
- **Bytes after the answer** (the start of another message): nothing to pair them
  with; the connection is not reused.
- **Names**: header names lower-cased, repeated ones joined with ", ", values stripped.

Errors are those ``http.client`` raises (the client translates them at one boundary,
``client.py``): ``OSError`` (``TimeoutError`` for the socket timeout),
``RemoteDisconnected`` (above), ``BadStatusLine`` for a status line llhttp refuses,
``IncompleteRead`` for a body cut short or malformed, ``LineTooLong`` and
``HTTPException`` for a head too long or refused, or an upgrade (``101``);
``http.client.InvalidURL`` and ``ValueError`` for a request that cannot be sent as given
(control characters in the target or a header).
"""

from __future__ import annotations

import http.client
import re
import socket
from collections.abc import Mapping

import httptools

from eventstore.riak.errors import RiakError

__all__ = ["Connection", "host_header", "request_head"]

#: Bytes asked of the socket at once (the connection's one receive buffer).
RECV_BYTES = 65536
#: A body is gathered in the connection's own buffer, then copied out once; the buffer
#: is kept for the next answer while it is up to this size. A fresh buffer for every
#: body (or a list of pieces joined) cost a 400 KB GET a page fault per 4 KB.
BODY_BUFFER_BYTES = 2**20
#: At most this many bytes of status line and headers (``http.client``: 65536 a line).
MAX_HEAD_BYTES = 65536
#: At most this many header lines (``http.client``'s limit).
MAX_HEADERS = 100
#: A body up to this size is sent in the request head's buffer (one send, one segment).
INLINE_BODY_BYTES = 65536

_BODY_METHODS = frozenset({"PUT", "POST", "PATCH"})
#: What ``http.client`` refuses in a request target.
_BAD_TARGET = re.compile("[\x00-\x20\x7f]")


def host_header(host: str, port: int) -> str:
    """The ``Host`` value ``http.client`` sends: the port unless 80, IPv6 in brackets."""
    name = f"[{host}]" if ":" in host else host
    return name if port == 80 else f"{name}:{port}"


def request_head(
    method: str, target: str, host: str, headers: Mapping[str, str], body_bytes: int | None
) -> bytes:
    """The request line and headers, ending with the blank line.

    Args:
        method: ``GET``, ``PUT``, ...
        target: the path and query, already percent-encoded.
        host: the ``Host`` value (:func:`host_header`).
        headers: header name -> value (``Host``, ``Content-Length`` and
            ``Accept-Encoding`` are set here).
        body_bytes: the body's length, or None without a body.

    Raises:
        http.client.InvalidURL: ``target`` holds a space or a control character.
        ValueError: a header name or value holds CR or LF (or a name is empty or holds
            ``:`` or whitespace); a value is not Latin-1, the target not ASCII.
    """
    if _BAD_TARGET.search(target):
        raise http.client.InvalidURL(f"URL can't contain control characters. {target!r}")
    target.encode("ascii")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity"]
    if body_bytes is not None:
        lines.append(f"Content-Length: {body_bytes}")
    elif method in _BODY_METHODS:
        lines.append("Content-Length: 0")
    for name, value in headers.items():
        if not name or ":" in name or any(c in name for c in " \t\r\n"):
            raise ValueError(f"Invalid header name {name!r}")
        if "\r" in value or "\n" in value:
            raise ValueError(f"Invalid header value {value!r}")
        lines.append(f"{name}: {value}")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1")


class Connection:
    """One keep-alive HTTP/1.1 connection over ``sock``; one request at a time.

    Args:
        sock: a connected stream socket (:meth:`open` makes one).
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._timeout_s: float | None = None
        self._view = memoryview(bytearray(RECV_BYTES))
        self._body = bytearray()  # grown to the largest body read, up to BODY_BUFFER_BYTES

    @classmethod
    def open(cls, host: str, port: int, *, connect_timeout_s: float) -> Connection:
        """Connect to ``host:port`` (``TCP_NODELAY`` on).

        Raises:
            OSError: the connection could not be made within ``connect_timeout_s``.
        """
        sock = socket.create_connection((host, port), timeout=connect_timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self.sock.close()

    def exchange(
        self, head: bytes, body: bytes | None, method: str, timeout_s: float
    ) -> tuple[int, dict[str, str], bytes, bool]:
        """Send one request and read its whole answer.

        Returns:
            (status, headers with lower-case names, body, whether the connection must
            be closed rather than reused).

        Raises:
            See the module docstring; the connection is unusable after any of them.
        """
        if timeout_s != self._timeout_s:  # each change costs the socket two fcntl calls
            self.sock.settimeout(timeout_s)
            self._timeout_s = timeout_s
        self._send(head, body)
        answer = _Answer(self._body, head_only=method == "HEAD")
        feed = answer.parser.feed_data
        view, received = self._view, 0
        while not answer.complete:
            n = self.sock.recv_into(view)
            if not n:
                answer.at_end(received)
                break
            received += n
            try:
                feed(view[:n])
            except httptools.HttpParserCallbackError as e:
                if not isinstance(e.__context__, _Stop):  # one of ours, raised in a callback
                    raise e.__context__ or http.client.HTTPException(str(e)) from None
            except httptools.HttpParserUpgrade:
                raise http.client.HTTPException(
                    f"the server switched protocols ({answer.status})"
                ) from None
            except httptools.HttpParserError as e:
                raise answer.refused(e) from None
            if answer.in_head and received > MAX_HEAD_BYTES:
                raise http.client.LineTooLong("header block")
        data = answer.take_body()
        if len(self._body) > BODY_BUFFER_BYTES:
            self._body = bytearray()
        return answer.status, answer.headers, data, not answer.keep_alive

    def _send(self, head: bytes, body: bytes | None) -> None:
        if not body:
            self.sock.sendall(head)
        elif len(body) <= INLINE_BODY_BYTES:
            self.sock.sendall(head + body)
        else:  # a large body is not copied: both buffers in one call, the rest after
            sent = self.sock.sendmsg([head, body])
            if sent < len(head):
                self.sock.sendall(head[sent:])
                sent = len(head)
            if sent - len(head) < len(body):
                self.sock.sendall(memoryview(body)[sent - len(head) :])


class _Stop(RiakError):
    """Raised in a callback to end the parse: the answer is complete (never leaves
    :meth:`Connection.exchange`)."""

    def __init__(self) -> None:
        super().__init__("the answer is complete")


class _Answer:
    """One answer as llhttp reads it: the ``httptools`` callbacks and what they found.

    Interim (1xx) answers pass through it: each new message starts afresh, and only a
    final one completes it.
    """

    def __init__(self, body: bytearray, *, head_only: bool) -> None:
        self.head_only = head_only
        self.status = 0
        self.headers: dict[str, str] = {}
        self._body = body
        self._body_bytes = 0
        self.lines = 0  # header lines of this message
        self.status_read = False  # the status line was accepted
        self.in_head = True
        self.complete = False
        self.keep_alive = False
        self.parser = httptools.HttpResponseParser(self)
        self.parser.set_dangerous_leniencies(
            lenient_headers=True, lenient_optional_cr_before_lf=True
        )

    # -- httptools callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:  # bytes after the answer: never reuse such a connection
            self.keep_alive = False
            raise _Stop
        self.headers, self._body_bytes, self.lines = {}, 0, 0  # an interim answer's dropped
        self.status_read, self.in_head = False, True

    def on_status(self, reason: bytes) -> None:
        self.status_read = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.in_head:
            return  # a trailer after a chunked body: dropped, as http.client does
        self.status_read = True
        self.lines += 1
        if self.lines > MAX_HEADERS:
            raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1").strip()
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        self.in_head = False
        self.status = self.parser.get_status_code()
        if self.head_only and self.status >= 200:
            self.complete, self.keep_alive = True, False
            raise _Stop

    def on_body(self, data: bytes) -> None:
        end = self._body_bytes + len(data)
        self._body[self._body_bytes : end] = data  # in place, or growing the buffer
        self._body_bytes = end

    def on_message_complete(self) -> None:
        if self.status >= 200:  # 100 Continue and the like: the final answer follows
            self.complete = True
            self.keep_alive = self.parser.should_keep_alive()

    # -- what httptools leaves to us ----------------------------------------------------

    def take_body(self) -> bytes:
        """The body read so far, copied out of the connection's buffer."""
        with memoryview(self._body) as view:
            return bytes(view[: self._body_bytes])

    def at_end(self, received: int) -> None:
        """The peer closed the connection before the answer was complete.

        Raises:
            http.client.RemoteDisconnected: not a byte of an answer came.
            http.client.IncompleteRead: the answer was cut short.
        """
        if not received:
            raise http.client.RemoteDisconnected("Remote end closed connection without response")
        coding = self.headers.get("transfer-encoding", "").rpartition(",")[2]
        if self.in_head or "content-length" in self.headers or coding.strip().lower() == "chunked":
            raise http.client.IncompleteRead(self.take_body())
        self.complete, self.keep_alive = True, False  # the body ran to the end

    def refused(self, error: httptools.HttpParserError) -> http.client.HTTPException:
        """What ``http.client`` raises for the part of the answer llhttp refused."""
        if isinstance(error, httptools.HttpParserInvalidStatusError) or not self.status_read:
            return http.client.BadStatusLine(f"{error}")
        if not self.in_head:
            return http.client.IncompleteRead(self.take_body())
        return http.client.HTTPException(f"{error}")
