"""``riak-events read`` and ``riak-events tail``: the consumer library on the command line.

    riak-events read --node http://127.0.0.1:8098 --dc dc1 --start now-5m --end now
    riak-events read --dc dc1 --start 1700000000 --end 1700000060 --type web --format text
    riak-events read --dc dc1 --start now-1h --end now --substream web_5xx --plugin-dir p/
    riak-events tail --dc dc1 --position var/tail-dc1.json --lag 5

Output: JSON Lines on stdout (one event, or one substream result, per line) or a
readable text form (``--format text``). Before reading, each ``--node`` must answer
Riak's ``GET /ping``: a wrong port (a companion's, say) is an error, not an empty
answer. A range that holds no data says so on stderr ("no epochs with data for dc X in
[a, b)") and exits with status 3; ``--limit N`` stops after N events (or results). A
substream read ends with a summary on stderr (results served, computed here, gaps by
why, and how to fill each kind) and exits with status 4 when it returned gaps; a
substream that no plugin here declares and that has no result in the range is one line
naming the known substreams and the closest one (status 3). A progress bar goes to
stderr for ranges of more than ``PROGRESS_MIN_EPOCHS`` epochs when stderr is a terminal
(``--progress`` forces it). Every option is also an environment variable
``RIAK_EVENTS_READ_<OPTION>`` / ``RIAK_EVENTS_TAIL_<OPTION>``. Errors are printed as one
line naming epoch, dc and key; exit status 1.
"""

from __future__ import annotations

import base64
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, TextIO

import click

from consumer_lib.client import EventsClient
from consumer_lib.errors import ConsumerError, SubstreamNotFound
from consumer_lib.gaps import ReadSummary
from consumer_lib.instants import range_text, when_text
from consumer_lib.tail import Tail
from consumer_lib.types import Epoch, SubstreamResult, TaggedEvent
from eventstore.options import (
    CANONICAL,
    aliased_option,
    check_dc,
    check_node_urls,
    check_riak_node,
    cli_range,
    parse_bound,
)
from eventstore.ranges import EpochRange

__all__ = ["check_riak_node", "cli_range", "parse_bound", "read", "tail"]

#: Ranges longer than this (epochs) get a progress bar on an interactive stderr.
PROGRESS_MIN_EPOCHS = 30

#: Exit status of ``read`` when the range holds no data for the dc (and filters), or
#: the substream is not known (the CLI's "not found").
EXIT_NO_DATA = 3
#: Exit status of ``read --substream`` that completed but returned gaps.
EXIT_GAPS = 4

#: Libraries whose INFO lines (plugins loaded, the fork server started) are routine on
#: every read: shown with ``--log-level DEBUG`` only.
QUIET_LOGGERS = ("substreams.loader", "substreams.forkserver")


def quiet_library_info() -> None:
    """Raise :data:`QUIET_LOGGERS` to WARNING unless the root logger shows DEBUG."""
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return {"$base64": base64.b64encode(raw).decode("ascii")}
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


def dumps(value: Any) -> str:
    """One JSON line (bytes as UTF-8 text, or ``{"$base64": ...}`` when not UTF-8)."""
    return json.dumps(value, default=_json_default, ensure_ascii=False, separators=(",", ":"))


def _text_event(ev: TaggedEvent) -> str:
    body = " ".join(f"{k}={dumps(v)}" for k, v in ev.event.items())
    return f"{ev.epoch} {ev.dc} {ev.type}:{ev.subtype}:{ev.chunk}  {body}"


def _text_result(res: SubstreamResult) -> str:
    how = res.served if res.reason is None else f"{res.served} ({res.reason})"
    payload = dumps(res.result) if res.served != "gap" else f"error: {res.error}"
    return f"{res.epoch} {res.dc} {res.type}:{res.subtype}:{res.chunk}  [{how}]  {payload}"


def _dc(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    return None if value is None else check_dc(value)[0]


def _client_options(command: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options of both commands; renamed parameters get their variable explicitly,
    so every option reads ``RIAK_EVENTS_<COMMAND>_<OPTION>``."""
    env = f"RIAK_EVENTS_{command.upper()}_"

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        options = [
            click.option(
                "--node",
                "nodes",
                multiple=True,
                envvar=env + "NODE",
                help="Riak HTTP URL, http://HOST:PORT (repeat for more).",
            ),
            aliased_option(
                "--zookeeper",
                aliases=("--zk-hosts",),
                default=None,
                help="ZooKeeper hosts HOST:PORT[,...]: read from its live nodes.",
            ),
            click.option("--zk-root", default="/riak-events", show_default=True),
            click.option(
                "--dc",
                required=True,
                callback=_dc,
                help="The data centre (" + CANONICAL["--dc"] + ").",
            ),
            click.option(
                "--type",
                "types",
                multiple=True,
                envvar=env + "TYPE",
                help="Event type or glob (repeat).",
            ),
            click.option(
                "--subtype",
                "subtypes",
                multiple=True,
                envvar=env + "SUBTYPE",
                help="Subtype or glob (repeat).",
            ),
            click.option(
                "--format",
                "fmt",
                type=click.Choice(["jsonl", "text"]),
                default="jsonl",
                show_default=True,
                envvar=env + "FORMAT",
            ),
            click.option(
                "--concurrency", type=click.IntRange(1, 256), default=8, show_default=True
            ),
            click.option("--prefetch", type=click.IntRange(1, 4096), default=16, show_default=True),
        ]
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def _substream_options(command: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--substream and what its fallback needs."""
    env = f"RIAK_EVENTS_{command.upper()}_"

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        options = [
            click.option("--substream", default=None, help="A substream instead of all events."),
            click.option(
                "--plugin-dir",
                "plugin_dirs",
                multiple=True,
                envvar=env + "PLUGIN_DIR",
                type=click.Path(path_type=Path, file_okay=False, exists=True),
                help="Plugin directory for the fallback (the companions').",
            ),
            click.option("--entry-points/--no-entry-points", default=True, show_default=True),
            click.option(
                "--fallback",
                type=click.Choice(["auto", "off", "always"]),
                default="auto",
                show_default=True,
                help="Substream results missing or failed: compute them here, or leave gaps.",
            ),
        ]
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def _client(nodes: tuple[str, ...], zookeeper: str | None, zk_root: str, **kw: Any) -> EventsClient:
    nodes = check_node_urls(nodes)
    if not nodes and not zookeeper:
        nodes = ("http://127.0.0.1:8098",)
    for node in nodes:
        check_riak_node(node)
    return EventsClient(list(nodes) or None, zookeeper=zookeeper, zk_root=zk_root, **kw)


def _no_data(dc: str, epochs: EpochRange, types: tuple[str, ...], substream: str | None) -> None:
    what = f"substream {substream} results" if substream else "epochs with data"
    only = f" (types {', '.join(types)})" if types else ""
    when = f"{epochs} = {range_text(epochs.start, epochs.end)}"
    click.echo(f"no {what} for dc {dc} in {when}{only}", err=True)
    raise SystemExit(EXIT_NO_DATA)


def _progress(show: bool, epochs: EpochRange) -> AbstractContextManager[Any]:
    if not show:
        return nullcontext(None)
    return click.progressbar(
        length=len(epochs), label="epochs", file=sys.stderr, show_eta=True, show_pos=True
    )


@click.command()
@_client_options("read")
@click.option("--start", required=True, help=CANONICAL["--start"] + ".")
@click.option("--end", required=True, help=CANONICAL["--end"] + ".")
@_substream_options("read")
@click.option(
    "--limit",
    type=click.IntRange(1),
    default=None,
    help="Stop after N events (with --substream: N results).",
)
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr.")
def read(  # noqa: PLR0917 (one parameter per click option)
    nodes: tuple[str, ...],
    zookeeper: str | None,
    zk_root: str,
    dc: str,
    types: tuple[str, ...],
    subtypes: tuple[str, ...],
    fmt: str,
    concurrency: int,
    prefetch: int,
    start: str,
    end: str,
    substream: str | None,
    plugin_dirs: tuple[Path, ...],
    entry_points: bool,
    fallback: str,
    limit: int | None,
    progress: bool | None,
) -> None:
    """Read an epoch range [START, END) of the full stream, or of a substream.

    A substream's served results need no plugin code; where a result is missing or
    failed it is computed here with the plugin (--plugin-dir, entry points), or the
    chunk is a gap. The end of a substream read prints a summary on stderr: gaps by
    why, and how to fill them.

    Exit status: 0 data was written, 1 an error (one line on stderr), 2 bad arguments,
    3 the range holds no data for the dc and filters, or no substream of that name,
    4 a substream read completed with gaps (see the summary)."""
    epochs = cli_range(start, end)
    quiet_library_info()
    summary: ReadSummary | None = None
    try:
        show = (
            progress
            if progress is not None
            else (sys.stderr.isatty() and len(epochs) > PROGRESS_MIN_EPOCHS)
        )
        with (
            _client(
                nodes,
                zookeeper,
                zk_root,
                concurrency=concurrency,
                prefetch=prefetch,
                plugin_dirs=plugin_dirs,
                use_entry_points=entry_points,
            ) as client,
            _progress(show, epochs) as bar,
        ):
            out = sys.stdout
            if substream is None:
                written = _write_epochs(
                    client.epochs(
                        dc, epochs.start, epochs.end, types=types or None, subtypes=subtypes or None
                    ),
                    out,
                    fmt,
                    bar,
                    epochs.start,
                    limit,
                )
            else:
                results = client.substream(
                    substream,
                    dc,
                    epochs.start,
                    epochs.end,
                    types=types or None,
                    subtypes=subtypes or None,
                    fallback=fallback,  # type: ignore[arg-type]
                )
                summary = results.summary
                try:
                    written = _write_results(results, out, fmt, bar, epochs.start, limit)
                finally:
                    results.close()
    except SubstreamNotFound as e:
        click.echo(str(e), err=True)
        raise SystemExit(EXIT_NO_DATA) from e
    except ConsumerError as e:
        raise click.ClickException(str(e)) from e
    except BrokenPipeError:  # `| head`: the reader is gone
        sys.stderr.close()
        return
    if written == 0:
        _no_data(dc, epochs, types, substream)
    if summary is not None and (summary.gap_count or summary.not_read):
        for line in summary.lines():
            click.echo(line, err=True)
        if summary.gap_count:
            raise SystemExit(EXIT_GAPS)


def _write_epochs(  # noqa: PLR0917 (internal; the two writers take the same arguments)
    epochs: Iterator[Epoch], out: TextIO, fmt: str, bar: Any, first: int, limit: int | None = None
) -> int:
    """Write every event (at most ``limit``); returns how many epochs held at least one
    chunk (any epoch written counts when the limit stopped it)."""
    done = first
    with_data = 0
    left = limit
    try:
        for epoch in epochs:
            with_data += bool(epoch.chunks)
            for chunk in epoch.chunks:
                k = chunk.key
                for event in chunk.events:
                    if left is not None:
                        if left == 0:
                            return with_data
                        left -= 1
                    ev = TaggedEvent(k.epoch, k.dc, k.type, k.subtype, k.chunk, event)
                    out.write((dumps(ev.as_dict()) if fmt == "jsonl" else _text_event(ev)) + "\n")
            if bar is not None:
                bar.update(epoch.epoch + 1 - done)
                done = epoch.epoch + 1
    finally:
        close = getattr(epochs, "close", None)
        if close is not None:
            close()  # a --limit reached: queued fetches are cancelled
    return with_data


def _write_results(  # noqa: PLR0917 (internal; the two writers take the same arguments)
    results: Iterator[SubstreamResult],
    out: TextIO,
    fmt: str,
    bar: Any,
    first: int,
    limit: int | None = None,
) -> int:
    """Write every result (at most ``limit``); returns how many were written."""
    done = first
    written = 0
    for res in results:
        written += 1
        out.write((dumps(res.as_dict()) if fmt == "jsonl" else _text_result(res)) + "\n")
        if bar is not None and res.epoch > done:
            bar.update(res.epoch - done)
            done = res.epoch
        if limit is not None and written >= limit:
            break
    return written


@click.command()
@_client_options("tail")
@click.option(
    "--position",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Position file: resume from it, save to it.",
)
@click.option(
    "--start", default=None, help="First epoch without a saved position (forms of read --start)."
)
@aliased_option(
    "--end", aliases=("--until",), default=None, help="Stop before this epoch (default: never)."
)
@click.option("--lag", "lag_s", type=float, default=5.0, show_default=True, help="Seconds.")
@click.option("--late-wait", "late_wait_s", type=float, default=30.0, show_default=True)
@_substream_options("tail")
def tail(  # noqa: PLR0917 (one parameter per click option)
    nodes: tuple[str, ...],
    zookeeper: str | None,
    zk_root: str,
    dc: str,
    types: tuple[str, ...],
    subtypes: tuple[str, ...],
    fmt: str,
    concurrency: int,
    prefetch: int,
    position: Path | None,
    start: str | None,
    end: str | None,
    lag_s: float,
    late_wait_s: float,
    substream: str | None,
    plugin_dirs: tuple[Path, ...],
    entry_points: bool,
    fallback: str,
) -> None:
    """Follow DC seconds behind real time (the full stream, or --substream NAME);
    skipped epochs are reported on stderr.

    Without a saved --position or --start, a tail starts at the newest due epoch (now
    minus --lag): an --end before that prints nothing (it says so on stderr). To read
    recent epochs and stop, give both: --start now-2m --end now-30s."""
    now = time.time()
    quiet_library_info()
    if start is not None and end is not None:
        cli_range(start, end, now=now)  # a backwards range is an error here too
    options: dict[str, Any] = {
        "position": position,
        "start": None if start is None else parse_bound(start, "--start", now=now),
        "end": None if end is None else parse_bound(end, "--end", now=now),
        "types": types or None,
        "subtypes": subtypes or None,
        "lag_s": lag_s,
        "late_wait_s": late_wait_s,
    }
    try:
        with _client(
            nodes,
            zookeeper,
            zk_root,
            concurrency=concurrency,
            prefetch=prefetch,
            plugin_dirs=plugin_dirs,
            use_entry_points=entry_points,
        ) as client:
            printed = 0
            if substream is None:
                with client.tail(dc, **options) as follower:
                    for epoch in follower:
                        if _report_skip(epoch.skipped, epoch.epoch, dc):
                            continue
                        printed += _write_epochs(iter([epoch]), sys.stdout, fmt, None, epoch.epoch)
                        sys.stdout.flush()
                    ended: Tail[Any] = follower
            else:
                with client.tail_substream(
                    substream,
                    dc,
                    fallback=fallback,  # type: ignore[arg-type]
                    **options,
                ) as results:
                    for sub_epoch in results:
                        if _report_skip(sub_epoch.skipped, sub_epoch.epoch, dc):
                            continue
                        printed += _write_results(iter(sub_epoch.results), sys.stdout, fmt, None, 0)
                        sys.stdout.flush()
                    ended = results
            if not printed:
                click.echo(_nothing_printed(ended, dc, position), err=True)
    except ConsumerError as e:
        raise click.ClickException(str(e)) from e
    except KeyboardInterrupt:
        pass


def _nothing_printed(follower: Tail[Any], dc: str, position: Path | None) -> str:
    """Why a tail that reached its --end printed nothing, and what to give instead."""
    first, end = follower.first_epoch, follower.until
    if end is not None and first >= end:
        where = {
            "newest due": "a fresh position starts at the newest due epoch (now - --lag)",
            "position": f"the position file {position} resumes at epoch",
            "start": "--start is epoch",
        }[follower.origin]
        return (
            f"tail dc={dc}: nothing printed: {where} {when_text(first)}, at or after --end "
            f"{when_text(end)}; to read recent epochs and stop give both, e.g. "
            "--start now-2m --end now-30s"
        )
    span = range_text(first, follower.next_epoch)
    return f"tail dc={dc}: nothing printed: no data for the filters in {span}"


def _report_skip(skipped: bool, epoch: int, dc: str) -> bool:
    # Nothing printed per epoch: the tail logs one summary a minute per dc on stderr
    # ("no metadata for N epoch(s) in [a, b]"), in the chosen --log-format.
    return skipped
