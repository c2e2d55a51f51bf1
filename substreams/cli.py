"""``riak-events substream``: test, check, keygen, publish, withdraw and list plugins.

Every option can also be given as ``RIAK_EVENTS_SUBSTREAM_<COMMAND>_<OPTION>`` (click's
auto_envvar_prefix), e.g. ``RIAK_EVENTS_SUBSTREAM_PUBLISH_ZOOKEEPER``. The old names
``--zk-hosts`` and ``--devnode`` are hidden aliases of ``--zookeeper`` and ``--node``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from eventstore.errors import EventStoreError
from eventstore.names import ChunkKey
from eventstore.options import (
    CANONICAL,
    aliased_option,
    check_dc,
    check_node_urls,
    check_riak_node,
    cli_range,
    json_option,
)
from substreams.errors import InvalidSigningKey, PluginLoadError, RegistryError

_ZK_HOSTS = aliased_option(
    "--zookeeper",
    "zk_hosts",
    aliases=("--zk-hosts",),
    default="127.0.0.1:2181",
    show_default=True,
    help="ZooKeeper hosts HOST:PORT[,...].",
)
_ZK_ROOT = click.option("--zk-root", default="/riak-events", show_default=True)
_ZK_AUTH = click.option(
    "--zk-auth",
    metavar="USER:PASSWORD",
    help="The registry's publisher identity (ZooKeeper digest auth); needed to write.",
)


@click.group()
def substream() -> None:
    """Write, try and publish substream plugins."""


@substream.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--blob", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A stored blob file to run on.")  # fmt: skip
@click.option("--key", help="The blob's chunk key (sets the context and type matching).")
@aliased_option(
    "--node",
    "url",
    aliases=("--devnode",),
    help="Read the epochs [--start, --end) of --dc from this Riak HTTP URL (http://HOST:PORT).",
)
@click.option("--dc", help="The dc of the epoch range.")
@click.option("--start", help=CANONICAL["--start"] + ".")
@click.option("--end", help=CANONICAL["--end"] + " [default: --start + 1: one epoch]")
@click.option("--verbose", "-v", is_flag=True,
              help="Every run (verdict, fields, time, result), not only the problems.")  # fmt: skip
@json_option
def test(  # noqa: PLR0917 (click passes every option positionally by name)
    file: Path,
    blob: Path | None,
    key: str | None,
    url: str | None,
    dc: str | None,
    start: str | None,
    end: str | None,
    verbose: bool,
    as_json: bool,
) -> None:
    """Run FILE's substreams as the companion would, on sample data, and report.

    Sample data: a blob file (--blob, as stored), or the chunks of the epochs
    [START, END) of one dc (end exclusive, as every range) read from a Riak node or
    devnode. The report: a summary first (runs, per substream: ok, failures, empty
    results), then one line per failed run; --verbose adds every run; --json is
    {"summary": ..., "runs": [...]}. Exit status: 0 every run ok, 1 a run failed or an
    error, 2 bad arguments, 3 the range holds no chunk."""
    from substreams.harness import (  # noqa: PLC0415 (keep `--help` fast)
        chunks_from_blob,
        chunks_from_riak,
        format_runs,
        run_plugin_file,
    )

    chunks: Iterator[tuple[ChunkKey, bytes]]
    epochs = None
    if blob is not None:
        try:
            chunk_key = ChunkKey.parse(key) if key else None
        except EventStoreError as e:
            raise click.BadParameter(str(e), param_hint="--key") from e
        chunks = chunks_from_blob(blob, chunk_key)
        match = chunk_key is not None
    elif url and dc and start is not None:
        check_dc(dc)
        (node,) = check_node_urls([url])
        epochs = cli_range(start, end if end is not None else start)
        if end is None:
            epochs = type(epochs)(epochs.start, epochs.start + 1)
        check_riak_node(node)
        chunks = chunks_from_riak(node, dc, epochs.start, epochs.end)
        match = True
    else:
        raise click.UsageError("give --blob FILE, or --node URL --dc DC --start WHEN [--end WHEN]")
    try:
        runs = run_plugin_file(file, chunks, match_types=match)
    except (PluginLoadError, EventStoreError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    if epochs is not None and not runs:
        click.echo(
            f"no chunks for dc {dc} in {epochs} that {file.name}'s substreams read", err=True
        )
        raise SystemExit(3)
    click.echo(format_runs(runs, as_json=as_json, verbose=verbose))
    if any(not r.outcome.ok for r in runs):
        raise SystemExit(1)


@substream.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@json_option
def check(paths: tuple[Path, ...], as_json: bool) -> None:
    """Load plugin files or directories and report what loads and what does not."""
    from substreams.loader import LoadReport, load_file, plugin_files  # noqa: PLC0415

    report = LoadReport()
    for path in paths:
        for file in plugin_files(path) if path.is_dir() else [path]:
            try:
                report.add(load_file(file, check_in_child=True))
            except PluginLoadError as e:
                report.failures.append(e)
    if as_json:
        loaded = [
            {"substream": sub.name, "version": sub.version, "types": list(sub.types),
             "fields": None if sub.fields is None else list(sub.fields),
             "origin": str(sub.origin)}
            for sub in report.substreams.values()
        ]  # fmt: skip
        failed = [str(f) for f in report.failures]
        click.echo(json.dumps({"ok": loaded, "failed": failed}, indent=2, ensure_ascii=False))
    else:
        for sub in report.substreams.values():
            types = ",".join(sub.types) or "*"
            fields = "every field" if sub.fields is None else ",".join(sub.fields) or "no field"
            click.echo(
                f"ok      {sub.name}@{sub.version} reads {types} ({sub.origin}); fields: {fields}"
            )
        for failure in report.failures:
            click.echo(f"FAILED  {failure}")
    if report.failures:
        raise SystemExit(1)


@contextlib.contextmanager
def _zk(hosts: str, auth: str | None = None) -> Iterator[Any]:
    try:
        from kazoo.client import KazooClient  # noqa: PLC0415
    except ImportError as e:
        raise click.ClickException(
            "kazoo is not installed (pip install riak-events[zookeeper])"
        ) from e
    auth_data = [("digest", auth)] if auth else None
    client = KazooClient(hosts=hosts, timeout=5.0, auth_data=auth_data)
    try:
        client.start(timeout=10.0)
    except Exception as e:
        raise click.ClickException(f"ZooKeeper at {hosts}: {e}") from e
    try:
        yield client
    finally:
        client.stop()
        client.close()


@substream.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def keygen(path: Path) -> None:
    """Write a new Ed25519 publisher key: PATH (private, mode 0600) and PATH.pub."""
    from substreams.signing import generate  # noqa: PLC0415

    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        public_path, text = generate(path)
    except (InvalidSigningKey, OSError) as e:
        raise click.ClickException(f"cannot write the key pair {path}: {e}") from e
    click.echo(f"private key: {path} (keep it secret; publish --key {path})")
    click.echo(f"public key:  {public_path}")
    click.echo(f'trust it on every node: trusted_keys = ["{text}"]')


@substream.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--key", "key_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The publisher's private key (substream keygen); unsigned plugins run "
              "nowhere.")  # fmt: skip
@click.option("--replace", is_flag=True,
              help="Replace another version that is published or running.")  # fmt: skip
@_ZK_HOSTS
@_ZK_ROOT
@_ZK_AUTH
def publish(  # noqa: PLR0917 (click passes every option positionally by name)
    file: Path,
    key_path: Path | None,
    replace: bool,
    zk_hosts: str,
    zk_root: str,
    zk_auth: str | None,
) -> None:
    """Check, sign and publish FILE to every companion of the cluster (through ZooKeeper)."""
    from substreams.registry import publish as do_publish  # noqa: PLC0415
    from substreams.signing import load_private_key  # noqa: PLC0415

    try:
        key = load_private_key(key_path) if key_path is not None else None
    except InvalidSigningKey as e:
        raise click.ClickException(str(e)) from e
    if key is None:
        click.echo("warning: publishing unsigned (no --key): no node will run it", err=True)
    with _zk(zk_hosts, zk_auth) as client:
        try:
            done = do_publish(
                client, file, root=zk_root, key=key, credentials=zk_auth, replace=replace
            )
        except (PluginLoadError, RegistryError) as e:
            raise click.ClickException(str(e)) from e
    entry = done.entry
    signed = f", signed by key {entry.signer}" if entry.signer else ", unsigned"
    click.echo(
        f"published {entry.file} version {entry.version}{signed}: {', '.join(entry.substreams)}"
    )
    if done.replaced is not None:
        click.echo(f"replaced version {done.replaced.version}")
    for running in done.running:
        click.echo(f"was running: {running}")


@substream.command()
@click.argument("name")
@_ZK_HOSTS
@_ZK_ROOT
@_ZK_AUTH
def withdraw(name: str, zk_hosts: str, zk_root: str, zk_auth: str | None) -> None:
    """Withdraw the published plugin declaring substream NAME."""
    from substreams.registry import withdraw as do_withdraw  # noqa: PLC0415

    with _zk(zk_hosts, zk_auth) as client:
        try:
            removed = do_withdraw(client, name, root=zk_root)
        except RegistryError as e:
            raise click.ClickException(str(e)) from e
    click.echo(f"withdrew {removed}")


@substream.command(name="list")
@click.option("--trusted-key", "trusted_keys", multiple=True,
              help="A public key file or base64 key to check signatures against "
              "(repeatable).")  # fmt: skip
@_ZK_HOSTS
@_ZK_ROOT
@json_option
def list_command(trusted_keys: tuple[str, ...], zk_hosts: str, zk_root: str, as_json: bool) -> None:
    """List the published plugins and, per live node, the versions it runs and the
    registry plugins it rejected (with why)."""
    from substreams.registry import list_entries, node_reports  # noqa: PLC0415
    from substreams.signing import TrustedKeys  # noqa: PLC0415

    try:
        trust = TrustedKeys.load(trusted_keys) if trusted_keys else None
    except InvalidSigningKey as e:
        raise click.ClickException(str(e)) from e
    with _zk(zk_hosts) as client:
        entries = list_entries(client, root=zk_root)
        nodes = node_reports(client, root=zk_root)
    if as_json:
        click.echo(json.dumps(listing_json(entries, nodes, trust), indent=2, ensure_ascii=False))
    else:
        click.echo(format_listing(entries, nodes, trust))


def _trust_verdict(entry: Any, trust: Any) -> str | None:
    """None without trusted keys; else "trusted" or "REJECTED: why"."""
    from substreams.errors import SignatureRejected  # noqa: PLC0415

    if trust is None:
        return None
    try:
        trust.verify(entry.file, entry.source.encode(), entry.signature, entry.signer)
    except SignatureRejected as e:
        return f"REJECTED: {e}"
    return "trusted"


def listing_json(entries: Any, nodes: Any, trust: Any) -> dict[str, Any]:
    """What ``substream list --json`` prints: ``{"published": [...], "nodes": {...}}``."""
    published = [
        {
            "file": entry.file,
            "version": entry.version,
            "substreams": list(entry.substreams),
            "signer": entry.signer if entry.signature else None,
            "trust": _trust_verdict(entry, trust),
        }
        for entry in entries.values()
    ]
    return {"published": published, "nodes": dict(nodes)}


def format_listing(entries: Any, nodes: Any, trust: Any) -> str:
    """The text of ``substream list``: published plugins, then every node's view."""
    lines = [f"published ({len(entries)}):"]
    for entry in entries.values():
        signed = f"signed by {entry.signer}" if entry.signature else "UNSIGNED"
        verdict = _trust_verdict(entry, trust)
        if verdict is not None:
            signed += f" ({verdict})"
        lines.append(f"  {entry.file}\t{entry.version}\t{', '.join(entry.substreams)}\t{signed}")
    if not entries:
        lines.append("  none")
    lines.append(f"nodes ({len(nodes)} live):")
    for node, report in nodes.items():
        lines.append(f"  {node}:")
        for name, versions in sorted(report["substreams"].items()):
            lines.append(f"    runs {name} {', '.join(versions) or '(not loaded)'}")
        for file, info in sorted(report["registry"].get("rejected", {}).items()):
            lines.append(f"    REJECTED {file} {info.get('version')}: {info.get('reason')}")
    return "\n".join(lines)


def _add_operator_commands() -> None:
    """``enable``, ``disable`` and ``status``: a substream on running companions."""
    from substreams.control import COMMANDS  # noqa: PLC0415 (its own module)

    for command in COMMANDS:
        substream.add_command(command)


_add_operator_commands()
