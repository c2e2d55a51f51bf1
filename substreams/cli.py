"""``riak-events substream``: test, check, publish, withdraw and list plugins.

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
from substreams.errors import PluginLoadError, RegistryError

_ZK_HOSTS = click.option(
    "--zk-hosts", default="127.0.0.1:2181", show_default=True, help="ZooKeeper hosts."
)
_ZK_ROOT = click.option("--zk-root", default="/riak-events", show_default=True)


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
def _zk(hosts: str) -> Iterator[Any]:
    try:
        from kazoo.client import KazooClient  # noqa: PLC0415
    except ImportError as e:
        raise click.ClickException(
            "kazoo is not installed (pip install riak-events[zookeeper])"
        ) from e
    client = KazooClient(hosts=hosts, timeout=5.0)
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
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_ZK_HOSTS
@_ZK_ROOT
def publish(file: Path, zk_hosts: str, zk_root: str) -> None:
    """Publish FILE to every companion of the cluster (through ZooKeeper)."""
    from substreams.registry import publish as do_publish  # noqa: PLC0415

    with _zk(zk_hosts) as client:
        try:
            entry = do_publish(client, file, root=zk_root)
        except (PluginLoadError, RegistryError) as e:
            raise click.ClickException(str(e)) from e
    click.echo(f"published {entry.file} version {entry.version}: {', '.join(entry.substreams)}")


@substream.command()
@click.argument("name")
@_ZK_HOSTS
@_ZK_ROOT
def withdraw(name: str, zk_hosts: str, zk_root: str) -> None:
    """Withdraw the published plugin declaring substream NAME."""
    from substreams.registry import withdraw as do_withdraw  # noqa: PLC0415

    with _zk(zk_hosts) as client:
        try:
            removed = do_withdraw(client, name, root=zk_root)
        except RegistryError as e:
            raise click.ClickException(str(e)) from e
    click.echo(f"withdrew {removed}")


@substream.command(name="list")
@_ZK_HOSTS
@_ZK_ROOT
def list_command(zk_hosts: str, zk_root: str) -> None:
    """List the plugins published in the registry."""
    from substreams.registry import list_entries  # noqa: PLC0415

    with _zk(zk_hosts) as client:
        entries = list_entries(client, root=zk_root)
    for entry in entries.values():
        click.echo(f"{entry.file}\t{entry.version}\t{', '.join(entry.substreams)}")
    if not entries:
        click.echo(f"no plugins published under {zk_root}/substreams")
