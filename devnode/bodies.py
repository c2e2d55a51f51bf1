"""Request bodies: read within a byte limit, parse JSON within a nesting limit.

Every handler that takes a body reads it through :func:`read_body`, which refuses it
while reading: at once when ``Content-Length`` declares more than the limit, else as
soon as the bytes received pass it (chunked bodies). Nothing past the limit is kept in
memory; uvicorn reads the rest of the refused body off the connection and discards it,
so the client (which sends its whole body before reading the answer) still gets the 413.

JSON documents (bucket props) go through :func:`parse_json`: a document nested deeper
than ``max_depth`` is a 400 naming the depth, never a ``RecursionError`` (500).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from devnode.errors import EntityTooLarge, InvalidRequest


async def read_body(request: Request, limit: int, what: str) -> bytes:
    """The request's body, refused as soon as it is known to exceed ``limit`` bytes.

    Args:
        request: the request whose body to read.
        limit: the most bytes accepted.
        what: names the body in the error ("object", "bucket props").

    Raises:
        EntityTooLarge: the declared or received size exceeds ``limit``.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise EntityTooLarge(f"{what} of {declared} bytes exceeds the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise EntityTooLarge(f"{what} exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(raw: bytes, *, max_depth: int, what: str) -> Any:
    """Parse ``raw`` as JSON whose arrays and objects nest at most ``max_depth`` deep.

    Returns:
        The document, or ``None`` when ``raw`` is not JSON (the caller words that 400,
        as Riak words it per resource).

    Raises:
        InvalidRequest: the document nests deeper than ``max_depth``.
    """
    try:
        document = json.loads(raw)
    except RecursionError:
        # The parser recurses once per level; far deeper than any limit we set.
        raise InvalidRequest(f"{what} JSON nests deeper than {max_depth} levels") from None
    except ValueError:
        return None
    depth = _depth(document, max_depth)
    if depth > max_depth:
        raise InvalidRequest(f"{what} JSON nests deeper than {max_depth} levels")
    return document


def _depth(document: Any, stop_after: int) -> int:
    """How deep arrays and objects nest in ``document`` (a scalar is 0), iteratively;
    stops counting once past ``stop_after``."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > stop_after:
            return deepest
        pending.extend((child, depth + 1) for child in children)
    return deepest
