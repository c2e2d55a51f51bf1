"""``riak-events ls``: what a dc holds over a range, and which substreams have results.

    riak-events ls --node http://127.0.0.1:8098 --dc ams4 --start now-5m --end now
    riak-events ls --dc ams1 --dc ams4 --start now-1h --end now --json
    riak-events ls --dc ams4 --start now-1d --end now --max-epochs 600 --no-substream-check

Read from the metadata only (one small GET per epoch, a range longer than
``--max-epochs`` sampled evenly) plus a few result reads per substream and type:subtype
(:mod:`consumer_lib.listing`); no key is listed, no chunk fetched. Every option is also
an environment variable ``RIAK_EVENTS_LS_<OPTION>``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from consumer_lib import defaults
from consumer_lib.cli import EXIT_NO_DATA, _client, quiet_library_info
from consumer_lib.errors import ConsumerError
from consumer_lib.instants import range_text, utc
from consumer_lib.listing import Inventory
from eventstore.options import CANONICAL, aliased_option, check_dc, cli_range

__all__ = ["ls"]


def _dcs(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(check_dc(v)[0] for v in value)


def _mark(found: bool | None) -> str:
    return {True: "yes", False: "no", None: "unchecked"}[found]


def _text(inv: Inventory) -> list[str]:
    sample = f", sampled: {inv.epochs_read} of {len(inv.range)} epochs read" if inv.sampled else ""
    lines = [
        f"dc {inv.dc} {range_text(inv.range.start, inv.range.end)}: "
        f"{inv.epochs_with_data} of {inv.epochs_read} epochs read hold data{sample}"
    ]
    for g in inv.groups:
        lines.append(
            f"  {g.type}:{g.subtype}  {g.epochs} epochs, {g.chunks} chunks, "
            f"{g.first} ({utc(g.first)}) .. {g.last} ({utc(g.last)})"
        )
        with_results = [n for n, found in g.substreams.items() if found]
        unchecked = [n for n, found in g.substreams.items() if found is None]
        if inv.substreams:
            lines.append(f"    substreams with results: {', '.join(with_results) or 'none'}")
        if unchecked:
            lines.append(f"    not checked (probe cap): {', '.join(unchecked)}")
    return lines


@click.command()
@click.option(
    "--node",
    "nodes",
    multiple=True,
    envvar="RIAK_EVENTS_LS_NODE",
    help="Riak HTTP URL, http://HOST:PORT (repeat for more).",
)
@aliased_option(
    "--zookeeper",
    aliases=("--zk-hosts",),
    default=None,
    help="ZooKeeper hosts HOST:PORT[,...]: read from its live nodes; its registry and "
    "companions also name the substreams to check.",
)
@click.option("--zk-root", default="/riak-events", show_default=True)
@click.option(
    "--dc",
    "dcs",
    multiple=True,
    required=True,
    envvar="RIAK_EVENTS_LS_DC",
    callback=_dcs,
    help="The data centre (" + CANONICAL["--dc"] + "; repeat for more). dcs cannot be "
    "listed: Riak would have to list keys, which no read does; take them from your "
    "relocators' or producers' configuration.",
)
@click.option("--start", required=True, help=CANONICAL["--start"] + ".")
@click.option("--end", required=True, help=CANONICAL["--end"] + ".")
@click.option(
    "--max-epochs",
    type=click.IntRange(1),
    default=defaults.INVENTORY_MAX_EPOCHS,
    show_default=True,
    help="Read the metadata of at most this many epochs; a longer range is sampled evenly "
    "(the output says so).",
)
@click.option(
    "--substream",
    "substreams",
    multiple=True,
    help="Substream to check (repeat; default: every name the plugin directories, entry "
    "points and, with --zookeeper, the registry and companions know).",
)
@click.option(
    "--substream-check/--no-substream-check",
    default=True,
    show_default=True,
    help=f"Probe {defaults.INVENTORY_PROBES_PER_GROUP} chunks per substream and type:subtype "
    f"for a result (at most {defaults.INVENTORY_MAX_PROBES} reads).",
)
@click.option(
    "--plugin-dir",
    "plugin_dirs",
    multiple=True,
    envvar="RIAK_EVENTS_LS_PLUGIN_DIR",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Plugin directory whose substream names are checked (nothing is run).",
)
@click.option("--entry-points/--no-entry-points", default=True, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per dc, per line.")
def ls(  # noqa: PLR0917 (one parameter per click option)
    nodes: tuple[str, ...],
    zookeeper: str | None,
    zk_root: str,
    dcs: tuple[str, ...],
    start: str,
    end: str,
    max_epochs: int,
    substreams: tuple[str, ...],
    substream_check: bool,
    plugin_dirs: tuple[Path, ...],
    entry_points: bool,
    as_json: bool,
) -> None:
    """List the types and subtypes with data in each --dc over [START, END), from the
    metadata, and which substreams have results for them.

    Exit status: 0 something was found, 1 an error, 2 bad arguments, 3 no dc holds data
    in the range."""
    epochs = cli_range(start, end)
    quiet_library_info()
    found = 0
    try:
        with _client(
            nodes,
            zookeeper,
            zk_root,
            plugin_dirs=plugin_dirs,
            use_entry_points=entry_points,
        ) as client:
            for dc in dcs:
                inv = client.inventory(
                    dc,
                    epochs.start,
                    epochs.end,
                    substreams=list(substreams) or None,
                    check_substreams=substream_check,
                    max_epochs=max_epochs,
                )
                found += inv.epochs_with_data
                out: list[Any] = [json.dumps(inv.as_dict())] if as_json else _text(inv)
                for line in out:
                    sys.stdout.write(line + "\n")
    except ConsumerError as e:
        raise click.ClickException(str(e)) from e
    if not found:
        click.echo(
            f"no data for dc {', '.join(dcs)} in {epochs} = {range_text(epochs.start, epochs.end)}",
            err=True,
        )
        raise SystemExit(EXIT_NO_DATA)
