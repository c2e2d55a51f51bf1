"""URL paths and query strings of Riak's HTTP API (pure functions, no I/O).

Every path segment is percent-encoded with nothing left unquoted but RFC 3986's
unreserved characters, so keys such as ``1413813813:1:type1:subtype1:0`` and
``1413813813-1`` travel intact, and so do ``/``, ``%``, ``?`` and spaces. Riak unquotes
segments only when ``http_url_encoding`` is on or the request carries
``X-Riak-URL-Encoding: on``; the client always sends that header (see ``client.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlencode

from eventstore.riak.types import DEFAULT_BUCKET_TYPE

OptionValue = int | str | bool | None


def segment(text: str) -> str:
    """Percent-encode one path segment (UTF-8; only unreserved characters kept)."""
    return quote(text, safe="")


def bucket_path(bucket_type: str | None, bucket: str) -> str:
    """The path of a bucket: ``/types/T/buckets/B`` or ``/buckets/B`` for the default type."""
    if bucket_type is None or bucket_type == DEFAULT_BUCKET_TYPE:
        return f"/buckets/{segment(bucket)}"
    return f"/types/{segment(bucket_type)}/buckets/{segment(bucket)}"


def object_path(bucket_type: str | None, bucket: str, key: str) -> str:
    """The path of an object: ``<bucket path>/keys/K``."""
    return f"{bucket_path(bucket_type, bucket)}/keys/{segment(key)}"


def bucket_props_path(bucket_type: str | None, bucket: str) -> str:
    """The path of a bucket's properties: ``<bucket path>/props``."""
    return f"{bucket_path(bucket_type, bucket)}/props"


def bucket_type_props_path(bucket_type: str) -> str:
    """The path of a bucket type's properties: ``/types/T/props``."""
    return f"/types/{segment(bucket_type)}/props"


def query(options: Mapping[str, OptionValue]) -> str:
    """A query string (with its leading ``?``, or empty) from Riak's request options.

    ``None`` means "use the bucket's default" and is left out; booleans are written
    ``true``/``false`` as Riak expects.
    """
    pairs = [
        (name, ("true" if value else "false") if isinstance(value, bool) else str(value))
        for name, value in options.items()
        if value is not None
    ]
    return "?" + urlencode(pairs) if pairs else ""
