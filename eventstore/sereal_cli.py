"""``riak-events sereal``: inspect and produce Sereal documents from the shell.

    riak-events sereal header FILE          protocol, compression, user header
    riak-events sereal decode FILE          the value as JSON (one document per file;
                                            --json says so explicitly, as elsewhere)
    riak-events sereal encode [FILE]        JSON (or JSON Lines with --lines) to Sereal

FILE may be ``-`` for standard input. ``header`` and ``decode`` also take a stored blob
(``riak-events chunk get KEY --raw``): its checksum postfix is verified and stripped
first, and a blob that fails its checksum is an error naming the digest (exit 1).
Values JSON cannot hold are shown tagged: bytes as ``{"$bytes_hex": ...}``, PerlRef as
``{"$ref": ...}``, PerlObject as ``{"$object": class, "value": ...}``, PerlRegexp as
``{"$regexp": pattern, "flags": f}``.
"""

from __future__ import annotations

import json
import sys
from typing import Any, BinaryIO

import click

import sereal_codec as sereal
from eventstore.blob import has_postfix, verify_postfix
from eventstore.errors import BlobError


def to_json(value: Any) -> Any:
    """``value`` as JSON can hold it (the tagged forms of the module docstring)."""
    if isinstance(value, bytes):
        return {"$bytes_hex": value.hex()}
    if isinstance(value, sereal.PerlRef):
        return {"$ref": "<self>" if value.value is value else to_json(value.value)}
    if isinstance(value, sereal.PerlObject):
        return {"$object": value.class_name, "frozen": value.frozen, "value": to_json(value.value)}
    if isinstance(value, sereal.PerlRegexp):
        return {"$regexp": value.pattern, "flags": value.flags}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, str):
        # Undecodable Perl bytes are held as surrogate escapes; JSON cannot carry them.
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return value


def _read(stream: BinaryIO) -> bytes:
    return stream.read()


def _document(stream: BinaryIO) -> bytes:
    """The Sereal document in ``stream``: a stored blob's checksum postfix is verified
    and stripped; bytes without one are taken as a bare document."""
    data = _read(stream)
    if not has_postfix(data):
        return data
    try:
        return bytes(verify_postfix(data, stream.name))
    except BlobError as exc:
        raise click.ClickException(str(exc)) from exc


#: ``--binary``: how Perl binary strings decode (parameter ``binary``), for every command
#: that decodes Sereal (``sereal decode``, ``chunk get``).
binary_option = click.option(
    "--binary",
    type=click.Choice(["utf8", "latin1", "bytes"]),
    default="utf8",
    show_default=True,
    help="How Perl binary strings decode.",
)


@click.group("sereal")
def sereal_command() -> None:
    """Inspect and produce Sereal documents."""


@sereal_command.command("header")
@click.argument("file", type=click.File("rb"))
def header_command(file: BinaryIO) -> None:
    """Print the header of the Sereal document in FILE as JSON."""
    try:
        head = sereal.decode_header(_document(file))
    except sereal.SerealError as exc:
        raise click.ClickException(f"{file.name}: {exc}") from exc
    click.echo(
        json.dumps(
            {
                "protocol": head.protocol,
                "compression": head.compression,
                "body_offset": head.body_offset,
                "user_header": to_json(head.user_header),
                "implementation": sereal.IMPLEMENTATION,
            }
        )
    )


@sereal_command.command("decode")
@click.argument("file", type=click.File("rb"))
@binary_option
@click.option("--pretty", is_flag=True, help="Indent the JSON.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the value as JSON (what decode always prints; accepted like "
              "every command's --json).")  # fmt: skip
def decode_command(file: BinaryIO, binary: str, pretty: bool, as_json: bool) -> None:
    """Decode the Sereal document (or stored blob) in FILE and print it as JSON (one
    document; ``--json`` says so explicitly)."""
    try:
        value = sereal.decode(_document(file), binary=binary)
    except sereal.SerealError as exc:
        raise click.ClickException(f"{file.name}: {exc}") from exc
    click.echo(json.dumps(to_json(value), ensure_ascii=False, indent=2 if pretty else None))


@sereal_command.command("encode")
@click.argument("file", type=click.File("rb"), default="-")
@click.option("--lines", is_flag=True, help="Input is JSON Lines; encode them as one array.")
@click.option(
    "--compress",
    type=click.Choice(["zstd", "zlib", "snappy", "none"]),
    default="zstd",
    show_default=True,
)
@click.option("--protocol", type=click.IntRange(3, 5), default=4, show_default=True)
@click.option("--output", "-o", type=click.File("wb"), default="-", help="Where to write.")
def encode_command(
    file: BinaryIO, lines: bool, compress: str, protocol: int, output: BinaryIO
) -> None:
    """Encode JSON from FILE (default stdin) as a Sereal document."""
    text = _read(file).decode("utf-8")
    try:
        value = (
            [json.loads(line) for line in text.splitlines() if line.strip()]
            if lines
            else json.loads(text)
        )
    except json.JSONDecodeError as exc:
        raise click.ClickException(f"{file.name}: not JSON: {exc}") from exc
    output.write(sereal.encode(value, compress=compress, protocol=protocol))
    if output is sys.stdout.buffer:
        output.flush()
