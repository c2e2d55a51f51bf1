"""Object requests: GET/HEAD, PUT/POST and DELETE on ``.../buckets/B/keys/K``.

Status codes and headers follow riak_kv's ``riak_kv_wm_object`` resource:
GET 200 (304 on a matching If-None-Match), 404 ``not found`` (with
``X-Riak-Deleted: true`` and the tombstone's ``X-Riak-Vclock`` for a deleted key);
PUT 204, or 200 with the object when ``returnbody=true``, 412 when its ``If-Match`` or
``If-None-Match`` does not hold for the live object (webmachine's decisions; like Riak,
not atomic against a concurrent PUT; ``If-(Un)Modified-Since`` on a PUT is refused with
a 400 rather than ignored); 400 without Content-Type or
with a bad option; 415 for a Content-Type that is not ``type/subtype``; 413 over the
size limit (refused while the body is read); DELETE 204, or 404 when nothing live is
there. 300 is never produced: every bucket type here has last_write_wins. An unknown
bucket type answers 404 ``Unknown bucket type: T`` on every method, after the checks of
the request's form (missing Content-Type, malformed options) as in Riak.

Quorum options are validated as Riak validates them (values and n_val violations) and
are then trivially met: one process holds every replica. Path segments are always
percent-decoded (as Riak does with ``http_url_encoding = on``).
"""

from __future__ import annotations

import base64
import os
import secrets
import struct
import time
from email.utils import formatdate
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.requests import Request
from starlette.responses import Response

from devnode import records
from devnode.bodies import read_body
from devnode.buckets import is_quorum, resolve_quorum
from devnode.errors import (
    ConditionNotMet,
    InvalidRequest,
    ObjectNotFound,
    UnsupportedMediaType,
)
from devnode.records import StoredObject
from devnode.state import Devnode

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_META_PREFIX = "x-riak-meta-"
_GET_QUORUMS = ("r", "pr")
_PUT_QUORUMS = ("w", "dw", "pw")
_DELETE_QUORUMS = ("rw", "r", "w", "pr", "pw", "dw")
_BOOLEANS = ("basic_quorum", "notfound_ok", "asis", "returnbody")


def parse_location(request: Request) -> tuple[str, str, str]:
    """(bucket_type, bucket, key) from the raw path, each segment percent-decoded.

    Raises:
        InvalidRequest: a segment is not UTF-8 or the key is empty.
    """
    raw = request.scope.get("raw_path") or request.url.path.encode()
    parts = bytes(raw).split(b"/")
    # ['', 'types', T, 'buckets', B, 'keys', K...] or ['', 'buckets', B, 'keys', K...]
    if parts[1] == b"types":
        type_raw, bucket_raw, key_parts = parts[2], parts[4], parts[6:]
    else:
        type_raw, bucket_raw, key_parts = b"default", parts[2], parts[4:]
    try:
        bucket_type = unquote_to_bytes(type_raw).decode()
        bucket = unquote_to_bytes(bucket_raw).decode()
        key = "/".join(unquote_to_bytes(p).decode() for p in key_parts)
    except UnicodeDecodeError as e:
        raise InvalidRequest(f"path segment is not UTF-8: {e}") from e
    if not key:
        raise InvalidRequest("Key cannot be zero-length")
    return bucket_type, bucket, key


def check_options(request: Request, quorums: tuple[str, ...]) -> None:
    """Validate the form of Riak's request options, as riak_kv_wm_object's
    ``malformed_request`` does (before it looks at the bucket type).

    Raises:
        InvalidRequest: a malformed value.
    """
    params = request.query_params
    for name in quorums:
        text = params.get(name)
        if text is not None and not is_quorum(int(text) if text.isdigit() else text):
            raise InvalidRequest(
                f"{name} query parameter must be an integer or one of the following words: "
                "'one', 'quorum' or 'all'"
            )
    for name in _BOOLEANS:
        text = params.get(name)
        if text is not None and text.lower() not in ("true", "false", "default"):
            raise InvalidRequest(f"{name} query parameter must be true or false")
    timeout = params.get("timeout")
    if timeout is not None and not timeout.isdigit():
        raise InvalidRequest(f"Bad timeout value {timeout!r}")


def bucket_props(
    devnode: Devnode, request: Request, bucket_type: str, bucket: str, quorums: tuple[str, ...]
) -> dict[str, Any]:
    """The props of the request's bucket, once its bucket type is known to exist, with
    the request's quorums checked against the bucket's n_val.

    Raises:
        UnknownBucketType: the bucket type does not exist (404, Riak's wording).
        InvalidRequest: a quorum larger than the bucket's n_val.
    """
    props = devnode.registry.bucket_props(bucket_type, bucket)
    n_val = int(props["n_val"])
    for name in quorums:
        text = request.query_params.get(name)
        if text is None:
            continue
        value: int | str = int(text) if text.isdigit() else text
        if resolve_quorum(value, n_val, props.get(name, "quorum")) > n_val:
            raise InvalidRequest(f"Specified w/dw/pw values invalid for bucket n value of {n_val}")
    return props


def object_request(
    request: Request, quorums: tuple[str, ...]
) -> tuple[Devnode, str, str, str, dict[str, Any]]:
    """The devnode, the request's (bucket_type, bucket, key) and the bucket's props, once
    the request passes Riak's checks in Riak's order: the path, a PUT's or POST's
    Content-Type, the options' form, then the bucket type and the quorums.

    Raises:
        InvalidRequest: a bad path, option or quorum, or a PUT without Content-Type.
        UnknownBucketType: the bucket type does not exist.
    """
    devnode: Devnode = request.app.state.devnode
    bucket_type, bucket, key = parse_location(request)
    if request.method in ("PUT", "POST") and request.headers.get("content-type") is None:
        raise InvalidRequest("Missing Content-Type request header")
    check_options(request, quorums)
    props = bucket_props(devnode, request, bucket_type, bucket, quorums)
    return devnode, bucket_type, bucket, key, props


async def get_object(request: Request) -> Response:
    """GET/HEAD an object."""
    devnode, bucket_type, bucket, key, _ = object_request(request, _GET_QUORUMS)
    now_s = time.time()
    devnode.gets.add(now_s)
    obj = _live(devnode, records.location_key(bucket_type, bucket, key), now_s)
    etag = f'"{obj.vtag}"'
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers={"ETag": etag})
    headers = object_headers(bucket_type, bucket, obj)
    body = b"" if request.method == "HEAD" else obj.value
    if request.method == "HEAD":
        headers["Content-Length"] = str(len(obj.value))
    return Response(body, status_code=200, headers=headers)


async def put_object(request: Request) -> Response:
    """PUT (or POST) an object: store it durably, then fire the post-commit hook."""
    devnode, bucket_type, bucket, key, props = object_request(request, _PUT_QUORUMS)
    content_type, charset = _content_type(request)
    value = await read_body(request, devnode.settings.max_object_bytes, "object")
    now_s = time.time()
    loc_key = records.location_key(bucket_type, bucket, key)
    _check_preconditions(devnode, request, loc_key, now_s)
    expiry_s = devnode.expiry_s(bucket_type)
    write_ms = int(now_s * 1000)
    obj = StoredObject(
        value=value,
        content_type=content_type,
        charset=charset,
        usermeta=tuple(
            (name, v) for name, v in request.headers.items() if name.startswith(_META_PREFIX)
        ),
        vclock=_new_vclock(write_ms),
        vtag=_new_vtag(),
        write_time_ms=write_ms,
        purge_at_ms=write_ms + int(expiry_s * 1000) if expiry_s else 0,
    )
    await devnode.wait(devnode.store.write(loc_key, obj))
    devnode.puts.add(now_s)
    devnode.object_bytes_written += len(value)
    if any(h.get("mod") == devnode.settings.hook.module for h in props.get("postcommit", ())):
        devnode.hook.submit(key, value)
    if request.query_params.get("returnbody", "").lower() == "true":
        return Response(
            obj.value, status_code=200, headers=object_headers(bucket_type, bucket, obj)
        )
    return Response(status_code=204)


async def delete_object(request: Request) -> Response:
    """DELETE an object: write a tombstone that reads as 404 until it is reaped."""
    devnode, bucket_type, bucket, key, _ = object_request(request, _DELETE_QUORUMS)
    now_s = time.time()
    loc_key = records.location_key(bucket_type, bucket, key)
    _live(devnode, loc_key, now_s)
    now_ms = int(now_s * 1000)
    tombstone = StoredObject(
        value=b"",
        content_type="application/octet-stream",
        vclock=_new_vclock(now_ms),
        vtag=_new_vtag(),
        write_time_ms=now_ms,
        purge_at_ms=now_ms + max(1, int(devnode.settings.tombstone_ttl_s * 1000)),
        tombstone=True,
    )
    await devnode.wait(devnode.store.write(loc_key, tombstone))
    devnode.deletes.add(now_s)
    return Response(status_code=204)


def object_headers(bucket_type: str, bucket: str, obj: StoredObject) -> dict[str, str]:
    """The headers Riak sends with an object (GET 200 and PUT returnbody)."""
    content_type = obj.content_type + (f"; charset={obj.charset}" if obj.charset else "")
    up = (
        f"/buckets/{bucket}"
        if bucket_type == "default"
        else f"/types/{bucket_type}/buckets/{bucket}"
    )
    headers = {
        "Content-Type": content_type,
        "X-Riak-Vclock": obj.vclock,
        "Vary": "Accept-Encoding",
        "Last-Modified": formatdate(obj.write_time_ms / 1000, usegmt=True),
        "ETag": f'"{obj.vtag}"',
        "Link": f'<{up}>; rel="up"',
    }
    headers.update(obj.usermeta)
    return headers


def _check_preconditions(devnode: Devnode, request: Request, loc_key: bytes, now_s: float) -> None:
    """A PUT's conditional headers, decided as webmachine decides them for Riak's object
    resource: with a live object, ``If-Match`` must name its ETag (or be ``*``) and
    ``If-None-Match`` must be neither ``*`` nor its ETag; without one, only
    ``If-Match: *`` fails.

    Raises:
        ConditionNotMet: a condition does not hold (412).
        InvalidRequest: ``If-Modified-Since``/``If-Unmodified-Since`` (not implemented
            here: refused rather than ignored).
    """
    for name in ("if-modified-since", "if-unmodified-since"):
        if name in request.headers:
            raise InvalidRequest(f"the devnode does not implement {name} on a PUT")
    if_match = request.headers.get("if-match")
    if_none_match = request.headers.get("if-none-match")
    if if_match is None and if_none_match is None:
        return
    try:
        etag: str | None = _live(devnode, loc_key, now_s).vtag
    except ObjectNotFound:
        etag = None
    if etag is None:
        if if_match is not None and if_match.strip() == "*":
            raise ConditionNotMet("If-Match: * and no object")
        return
    if if_match is not None and if_match.strip() != "*" and etag not in _etags(if_match):
        raise ConditionNotMet("If-Match does not name the object's ETag")
    if if_none_match is not None and (
        if_none_match.strip() == "*" or etag in _etags(if_none_match)
    ):
        raise ConditionNotMet("If-None-Match names the object")


def _etags(header: str) -> set[str]:
    """The entity tags of an If-Match/If-None-Match header, unquoted (weak ones too)."""
    tags = set()
    for part in header.split(","):
        tag = part.strip().removeprefix("W/")
        tags.add(tag[1:-1] if len(tag) >= 2 and tag[0] == tag[-1] == '"' else tag)
    return tags


def _live(devnode: Devnode, loc_key: bytes, now_s: float) -> StoredObject:
    """The live object at ``loc_key``.

    Raises:
        ObjectNotFound: absent, expired, or a tombstone (then with its vclock).
    """
    obj = devnode.store.read(loc_key)
    if obj is None:
        raise ObjectNotFound("not found")
    now_ms = int(now_s * 1000)
    if obj.purge_at_ms and obj.purge_at_ms <= now_ms:
        # Expired (or a tombstone past its time): gone for readers; reap it now.
        devnode.expired_reads += 1
        devnode.store.purge_one(loc_key, obj.write_time_ms)
        raise ObjectNotFound("not found")
    if obj.tombstone:
        raise ObjectNotFound("not found", tombstone_vclock=obj.vclock)
    return obj


def _content_type(request: Request) -> tuple[str, str | None]:
    raw = request.headers.get("content-type", "")
    media, *params = [p.strip() for p in raw.split(";")]
    if len([p for p in media.split("/") if p]) != 2:
        raise UnsupportedMediaType(
            f'"{media}" is not a valid media type for the Content-type header.'
        )
    charset = None
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"')
    return media, charset


def _new_vtag() -> str:
    """A random 22-character base-62 id, like Riak's vtags."""
    n = int.from_bytes(secrets.token_bytes(16), "big")
    out = []
    while n:
        n, r = divmod(n, 62)
        out.append(_BASE62[r])
    return "".join(out) or "0"


def _new_vclock(write_ms: int) -> str:
    """An opaque vclock: unique per write. Clients pass it back; the devnode ignores it."""
    return base64.b64encode(b"dn" + struct.pack("!Q", write_ms) + os.urandom(6)).decode()
