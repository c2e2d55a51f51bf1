"""``riak-events chunk get | ls`` and ``riak-events metadata get``: what is stored, read
back as an operator reads it.

    riak-events chunk get 1700000000:ams4:web:main:1000000000000     # events, JSON Lines
    riak-events chunk get KEY --json                                 # one JSON array
    riak-events chunk get KEY --raw > chunk.srl                      # the stored bytes
    riak-events chunk ls 1700000000 ams4 [--json]                    # its chunk keys
    riak-events metadata get 2026-11-22T10:00:00Z ams4 [--json]      # the metadata

EPOCH is unix seconds or an ISO-8601 time with its zone (``Z`` for UTC). Before
reading, the node must answer Riak's ``GET /ping`` (a companion's port answers 404
there). Every blob is checked against its checksum postfix before it is decoded.
Every option is also an environment variable (``RIAK_EVENTS_CHUNK_GET_NODE``...).

Exit status: 0 printed, 1 an error (one line naming the key), 3 no such key.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

import click

from eventstore.blob import unpack_blob
from eventstore.errors import EventStoreError
from eventstore.names import DEFAULT_NAMESPACES, ChunkKey, MetadataKey, parse_metadata
from eventstore.options import check_dc, check_node_urls, check_riak_node, json_option
from eventstore.riak import NotFound, RiakClient, RiakError
from eventstore.sereal_cli import binary_option, to_json

__all__ = ["chunk", "metadata", "parse_epoch"]

#: Exit status when the key does not exist.
EXIT_NOT_FOUND = 3


def parse_epoch(text: str) -> int:
    """Unix seconds, or an ISO-8601 time with a zone (``...Z`` or ``...+00:00``).

    Raises:
        click.BadParameter: neither, or a time without a zone (ambiguous).
    """
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither unix seconds nor an ISO-8601 time", param_hint="EPOCH"
        ) from None
    if when.tzinfo is None:
        raise click.BadParameter(
            f"{text!r} has no time zone: add Z (UTC) or +HH:MM", param_hint="EPOCH"
        )
    return int(when.timestamp())


def _node_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--node",
        default="http://127.0.0.1:8098",
        show_default=True,
        help="Riak (or devnode) HTTP URL.",
    )(f)


def _client(node: str) -> RiakClient:
    """A client of ``node`` once it answers as Riak (``check_riak_node``: one line
    naming the URL otherwise)."""
    (url,) = check_node_urls([node])
    check_riak_node(url)
    return RiakClient([url])


def _get(client: RiakClient, location: tuple[str, str, str], what: str) -> bytes:
    try:
        return client.get(*location).value
    except NotFound:
        click.echo(f"no {what} {location[2]} (bucket type {location[0]})", err=True)
        raise SystemExit(EXIT_NOT_FOUND) from None
    except RiakError as e:
        raise click.ClickException(f"{what} {location[2]}: {e}") from None


def _metadata(client: RiakClient, key: MetadataKey) -> tuple[str, list[ChunkKey]]:
    value = _get(client, DEFAULT_NAMESPACES.metadata_location(key), "metadata")
    try:
        refs = parse_metadata(value, key=key.format())
    except EventStoreError as e:
        raise click.ClickException(str(e)) from None
    return value.decode("ascii", "replace"), [key.chunk_key(ref) for ref in refs]


def _metadata_key(epoch: str, dc: str) -> MetadataKey:
    (dc,) = check_dc(dc, param_hint="DC")
    try:
        return MetadataKey(parse_epoch(epoch), dc)
    except EventStoreError as e:
        raise click.BadParameter(str(e)) from None


def _epoch_metadata_command(f: Callable[..., Any]) -> Callable[..., Any]:
    """EPOCH DC --node --json: the arguments of a command that reads one epoch's metadata."""
    for decorate in (json_option, _node_option, click.argument("dc"), click.argument("epoch")):
        f = decorate(f)
    return f


def _read_metadata(epoch: str, dc: str, node: str) -> tuple[MetadataKey, str, list[ChunkKey]]:
    """The metadata of EPOCH in DC on ``node``: its key, stored value and chunk keys."""
    key = _metadata_key(epoch, dc)
    with _client(node) as client:
        value, keys = _metadata(client, key)
    return key, value, keys


@click.group()
def chunk() -> None:
    """Read stored chunks."""


@chunk.command("get")
@click.argument("key")
@_node_option
@click.option("--raw", is_flag=True, help="Write the stored bytes (blob with checksum) as-is.")
@binary_option
@json_option
def chunk_get(key: str, node: str, raw: bool, binary: str, as_json: bool) -> None:
    """Print the events of chunk KEY (``epoch:dc:type:subtype:chunk``), one JSON per line
    (--json: one JSON array, as ``sereal decode`` prints the stored blob)."""
    try:
        chunk_key = ChunkKey.parse(key)
    except EventStoreError as e:
        raise click.BadParameter(str(e), param_hint="KEY") from None
    if raw and as_json:
        raise click.UsageError("--raw writes the stored bytes; it does not go with --json")
    with _client(node) as client:
        blob = _get(client, DEFAULT_NAMESPACES.chunk_location(chunk_key), "chunk")
    if raw:
        sys.stdout.buffer.write(blob)
        sys.stdout.buffer.flush()
        return
    try:
        events = unpack_blob(blob, key=key, binary=binary)
    except EventStoreError as e:
        raise click.ClickException(str(e)) from None
    listed = events if isinstance(events, list) else [events]
    if as_json:
        click.echo(json.dumps(to_json(listed), ensure_ascii=False))
        return
    for event in listed:
        click.echo(json.dumps(to_json(event), ensure_ascii=False, separators=(",", ":")))


@chunk.command("ls")
@_epoch_metadata_command
def chunk_ls(epoch: str, dc: str, node: str, as_json: bool) -> None:
    """List the chunk keys of EPOCH in DC (from its metadata)."""
    _key, _value, keys = _read_metadata(epoch, dc, node)
    if as_json:
        listing = [
            {"key": k.format(), "type": k.type, "subtype": k.subtype, "chunk": k.chunk}
            for k in keys
        ]
        click.echo(json.dumps(listing))
        return
    for k in keys:
        click.echo(k.format())


@click.group()
def metadata() -> None:
    """Read epoch metadata."""


@metadata.command("get")
@_epoch_metadata_command
def metadata_get(epoch: str, dc: str, node: str, as_json: bool) -> None:
    """Print the metadata of EPOCH in DC: the stored value and its chunks."""
    key, value, keys = _read_metadata(epoch, dc, node)
    if as_json:
        report = {
            "key": key.format(),
            "epoch": key.epoch,
            "dc": key.dc,
            "value": value,
            "chunks": [k.format() for k in keys],
        }
        click.echo(json.dumps(report))
        return
    click.echo(f"{key.format()}: {len(keys)} chunks")
    click.echo(value)
