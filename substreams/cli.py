"""``riak-events substream``: test, check, keygen, publish, withdraw and list plugins.

Every option can also be given as ``RIAK_EVENTS_SUBSTREAM_<COMMAND>_<OPTION>`` (click's
auto_envvar_prefix), e.g. ``RIAK_EVENTS_SUBSTREAM_PUBLISH_ZK_HOSTS``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from eventstore.errors import EventStoreError
from eventstore.names import ChunkKey
from substreams.errors import InvalidKey, PluginLoadError, RegistryError

_ZK_HOSTS = click.option(
    "--zk-hosts", default="127.0.0.1:2181", show_default=True, help="ZooKeeper hosts."
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
@click.option("--devnode", "url", help="Read an epoch range from this Riak/devnode URL.")
@click.option("--dc", help="The dc of the epoch range.")
@click.option("--start", type=int, help="First epoch of the range.")
@click.option("--end", type=int, help="Last epoch of the range (inclusive).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def test(  # noqa: PLR0917 (click passes every option positionally by name)
    file: Path,
    blob: Path | None,
    key: str | None,
    url: str | None,
    dc: str | None,
    start: int | None,
    end: int | None,
    as_json: bool,
) -> None:
    """Run FILE's substreams as the companion would, on sample data, and report."""
    from substreams.harness import (  # noqa: PLC0415 (keep `--help` fast)
        chunks_from_blob,
        chunks_from_riak,
        format_runs,
        run_plugin_file,
    )

    chunks: Iterator[tuple[ChunkKey, bytes]]
    if blob is not None:
        try:
            chunk_key = ChunkKey.parse(key) if key else None
        except EventStoreError as e:
            raise click.BadParameter(str(e), param_hint="--key") from e
        chunks = chunks_from_blob(blob, chunk_key)
        match = chunk_key is not None
    elif url and dc and start is not None:
        chunks = chunks_from_riak(url, dc, start, start if end is None else end)
        match = True
    else:
        raise click.UsageError("give --blob FILE, or --devnode URL --dc D --start E [--end E]")
    try:
        runs = run_plugin_file(file, chunks, match_types=match)
    except (PluginLoadError, EventStoreError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    click.echo(format_runs(runs, as_json=as_json))
    if any(not r.outcome.ok for r in runs):
        raise SystemExit(1)


@substream.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
def check(paths: tuple[Path, ...]) -> None:
    """Load plugin files or directories and report what loads and what does not."""
    from substreams.loader import LoadReport, load_file, plugin_files  # noqa: PLC0415

    report = LoadReport()
    for path in paths:
        for file in plugin_files(path) if path.is_dir() else [path]:
            try:
                report.add(load_file(file, check_in_child=True))
            except PluginLoadError as e:
                report.failures.append(e)
    for sub in report.substreams.values():
        types = ",".join(sub.types) or "*"
        click.echo(f"ok      {sub.name}@{sub.version} reads {types} ({sub.origin})")
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
        public_path, text = generate(path)
    except InvalidKey as e:
        raise click.ClickException(str(e)) from e
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
    except InvalidKey as e:
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
def list_command(trusted_keys: tuple[str, ...], zk_hosts: str, zk_root: str) -> None:
    """List the published plugins and, per live node, the versions it runs and the
    registry plugins it rejected (with why)."""
    from substreams.registry import list_entries, node_reports  # noqa: PLC0415
    from substreams.signing import TrustedKeys  # noqa: PLC0415

    try:
        trust = TrustedKeys.load(trusted_keys) if trusted_keys else None
    except InvalidKey as e:
        raise click.ClickException(str(e)) from e
    with _zk(zk_hosts) as client:
        entries = list_entries(client, root=zk_root)
        nodes = node_reports(client, root=zk_root)
    click.echo(format_listing(entries, nodes, trust))


def format_listing(entries: Any, nodes: Any, trust: Any) -> str:
    """The text of ``substream list``: published plugins, then every node's view."""
    from substreams.errors import SignatureRejected  # noqa: PLC0415

    lines = [f"published ({len(entries)}):"]
    for entry in entries.values():
        signed = f"signed by {entry.signer}" if entry.signature else "UNSIGNED"
        if trust is not None:
            try:
                trust.verify(entry.file, entry.source.encode(), entry.signature, entry.signer)
                signed += " (trusted)"
            except SignatureRejected as e:
                signed += f" (REJECTED: {e})"
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
