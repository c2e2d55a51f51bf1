"""``riak-events spark export`` and ``riak-events spark backfill``: the Spark jobs.

    riak-events spark export --node http://127.0.0.1:8098 --dc ams4 \\
        --start 2026-11-22T00:00:00Z --end 2026-11-22T06:00:00Z --out /data/events
    riak-events spark backfill --node http://127.0.0.1:8098 --dc ams4 --substream web_5xx \\
        --start now-7d --end now-1h --max-chunks-per-s 20 --plugin-dir plugins/

Locally they start a Spark session (``--master``, default ``local[*]``, Python workers
on this interpreter). On a cluster, give this file to spark-submit, which supplies the
master and the session (the jobs use the active session and leave it running)::

    CLI=$(python -c 'import consumer_lib.spark.cli as m; print(m.__file__)')
    spark-submit --master yarn "$CLI" export --node http://riak1:8098 --dc ams4 \\
        --start ... --end ... --out hdfs:///events

Progress goes to stderr: one line per hour (export); chunks done/total, rate and ETA
(backfill: a progress bar on a terminal, lines with ``--progress`` elsewhere) and a
summary. ``--json`` prints the hours written or the counts as JSON on stdout; under
spark-submit it arrives on spark-submit's stdout (Spark forwards the driver's stderr). Every
option is also an environment variable ``RIAK_EVENTS_SPARK_<COMMAND>_<OPTION>``.
Bad input exits with status 2 naming the option; a failed job with status 1.

Where the data is, when the cluster names it otherwise (the ``[namespaces]`` keys of
the daemons' config files): ``--events-bucket-type``, ``--events-bucket``,
``--epochs-bucket-type``, ``--epochs-bucket`` and, for backfill,
``--substreams-bucket-type``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import click

from eventstore.errors import InvalidName
from eventstore.names import DEFAULT_NAMESPACES, Namespaces
from eventstore.options import (
    CANONICAL,
    aliased_option,
    check_dc,
    check_node_urls,
    check_riak_node,
    json_option,
)


@contextmanager
def _session(master: str | None) -> Iterator[Any]:
    """The active session (spark-submit, tests), or a new one stopped afterwards."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 (optional extra)

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    # The CLI is the one place that reads the environment: Python workers must import
    # consumer_lib, so they run this interpreter unless told otherwise.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("riak-events")
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    # No master given: spark-submit's, or local[*] when run as a plain command.
    session = (builder if master is None else builder.master(master)).getOrCreate()
    try:
        yield session
    finally:
        session.stop()


def _range(start: str, end: str) -> tuple[int, int]:
    """``--start`` / ``--end`` as epochs; raises click errors naming the option."""
    from consumer_lib.cli import cli_range  # noqa: PLC0415 (keep --help fast)

    epochs = cli_range(start, end)
    return epochs.start, epochs.end


def _checked_nodes(nodes: tuple[str, ...]) -> list[str]:
    """The ``--node`` URLs, each checked to answer as Riak before Spark starts."""
    found = list(check_node_urls(nodes))
    if not found:
        raise click.BadParameter("at least one Riak HTTP URL is required", param_hint="--node")
    for node in found:
        check_riak_node(node)
    return found


@contextmanager
def _job(name: str, usage_errors: tuple[type[Exception], ...]) -> Iterator[None]:
    """Bad arguments found by the job (``usage_errors``) become usage errors; a Spark
    failure becomes one line naming what went wrong."""
    from consumer_lib.errors import ConsumerError  # noqa: PLC0415
    from eventstore.errors import EventStoreError  # noqa: PLC0415

    try:
        yield
    except usage_errors as e:
        raise click.UsageError(str(e)) from None
    except _job_errors() as e:
        raise click.ClickException(f"{name} failed: {_summary(e)}") from None
    except (EventStoreError, ConsumerError) as e:  # raised on the driver (a node went down)
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise click.ClickException(f"{name} failed: {type(e).__name__}: {first}") from None


def _job_errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JJavaError  # noqa: PLC0415 (optional extra)
    from pyspark.errors import PySparkException  # noqa: PLC0415

    return (Py4JJavaError, PySparkException)


def _summary(error: BaseException) -> str:
    """The lines of a Spark failure that name what went wrong (the Python error raised
    in a task, or the JVM exception's message), not the whole stack."""
    text = str(error)
    wanted = [
        line.strip()
        for line in text.splitlines()
        if "Error:" in line or "Exception:" in line or "error:" in line
    ]
    return " | ".join(dict.fromkeys(wanted[-3:])) or text.splitlines()[0]


def _err(line: str) -> None:
    click.echo(line, err=True)


@contextmanager
def _backfill_progress(show: bool, substream: str) -> Iterator[Callable[[Any], None] | None]:
    """The backfill's progress reporter: a click progress bar on a terminal (as
    ``read``'s), else a line on stderr at most every ``_PROGRESS_EVERY_S`` and the last."""
    if not show:
        yield None
        return
    with ExitStack() as stack:
        bar: Any = None
        printed = -math.inf

        def report(p: Any) -> None:  # a BackfillProgress
            nonlocal bar, printed
            if not sys.stderr.isatty():
                now = time.monotonic()
                if now - printed >= _PROGRESS_EVERY_S or p.done >= p.total:
                    printed = now
                    _err(f"backfill {substream}: {p}")
                return
            if bar is None:
                bar = stack.enter_context(
                    click.progressbar(
                        length=p.total,
                        label=f"backfill {substream}",
                        file=sys.stderr,
                        show_pos=True,
                        item_show_func=lambda q: q and q.pace(),  # our ETA: per unit
                    )
                )
            bar.update(min(p.done, p.total) - bar.pos, p)

        yield report


_PROGRESS_EVERY_S = 2.0


@click.group(context_settings={"auto_envvar_prefix": "RIAK_EVENTS_SPARK"})
def spark() -> None:
    """Spark jobs over the event store: export to Parquet, substream backfill."""


_common = [
    aliased_option(
        "--node",
        "nodes",
        multiple=True,
        required=True,
        aliases=("--riak",),
        help="Riak HTTP URL, http://HOST:PORT (repeat); each must answer /ping.",
    ),
    click.option("--master", default=None, help="Spark master when not under spark-submit."),
]


def _with_common(f: Any) -> Any:
    for option in reversed(_common):
        f = option(f)
    return f


#: Where the data is, by ``[namespaces]`` key (the daemons' config files): the help
#: of its option. ``substreams_bucket_type`` only for backfill, which writes results.
_NAMESPACE_HELP = {
    "events_bucket_type": "Bucket type of the chunks of events",
    "events_bucket": "Bucket of the chunks of events",
    "epochs_bucket_type": "Bucket type of the epochs' metadata",
    "epochs_bucket": "Bucket of the epochs' metadata",
    "substreams_bucket_type": "Bucket type of the substream results",
}


def _namespace_options(*, results: bool) -> Callable[[Any], Any]:
    """``--events-bucket-type`` ... (the ``[namespaces]`` keys) as click options;
    ``results``: also ``--substreams-bucket-type``."""
    names = [n for n in _NAMESPACE_HELP if results or n != "substreams_bucket_type"]

    def add(f: Any) -> Any:
        for name in reversed(names):
            f = click.option(
                "--" + name.replace("_", "-"),
                name,
                default=getattr(DEFAULT_NAMESPACES, name),
                show_default=True,
                help=_NAMESPACE_HELP[name] + f" ([namespaces] {name}).",
            )(f)
        return f

    return add


def _namespaces(values: dict[str, str]) -> Namespaces:
    """The namespaces the options name; a bad name is a usage error naming the option."""
    try:
        return Namespaces(**values)
    except InvalidName as e:
        raise click.BadParameter(
            f"{e.text} {e.reason}", param_hint="--" + e.part.replace("_", "-")
        ) from None


@spark.command()
@_with_common
@click.option("--dc", required=True, help="The data centre (one).")
@click.option("--start", required=True, help=CANONICAL["--start"] + " (widened to its hour).")
@click.option("--end", required=True, help=CANONICAL["--end"] + " (widened to a whole hour).")
@click.option("--out", required=True, help="Output directory (path or URI).")
@click.option("--types", default="", help="Comma-separated type or type:subtype (default all).")
@click.option("--files-per-hour", default=2, show_default=True, type=click.IntRange(1))
@click.option(
    "--settle-s",
    default=35.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds after an hour's end before it is marked complete.",
)
@_namespace_options(results=False)
@json_option
def export(  # noqa: PLR0917 (click passes options as arguments)
    nodes: tuple[str, ...],
    master: str | None,
    dc: str,
    start: str,
    end: str,
    out: str,
    types: str,
    files_per_hour: int,
    settle_s: float,
    as_json: bool,
    **names: str,
) -> None:
    """Export [start, end) of one dc to Parquet: date/hour/dc/type, an hour at a time,
    each replaced whole and marked _COMPLETE once finished."""
    from consumer_lib.spark.export import export_range  # noqa: PLC0415
    from consumer_lib.spark.source import SparkSourceError  # noqa: PLC0415

    first, stop = _range(start, end)
    if "," in dc:
        raise click.BadParameter(f"export writes one dc at a time: {dc!r}", param_hint="--dc")
    check_dc(dc)
    namespaces = _namespaces(names)
    node_list = _checked_nodes(nodes)  # all of it before Spark starts
    with _session(master) as session, _job("export", (SparkSourceError, ValueError)):
        hours = export_range(
            session,
            nodes=node_list,
            dc=dc,
            start=first,
            end=stop,
            out=out,
            types=types,
            files_per_hour=files_per_hour,
            settle_s=settle_s,
            progress=_err,
            namespaces=namespaces,
        )
    events = sum(h.events for h in hours)
    complete = sum(1 for h in hours if h.complete)
    _err(f"export dc={dc}: {len(hours)} hours ({complete} complete), {events} events")
    if events == 0:  # empty hours are still written and marked: say why, not just "0"
        _err(f"no epochs with data for dc {dc} in [{first}, {stop})")
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(h) for h in hours]))


@spark.command()
@_with_common
@click.option("--dc", required=True, help="Comma-separated dcs.")
@click.option("--substream", required=True, help="The substream to run.")
@click.option("--start", required=True, help=CANONICAL["--start"] + ".")
@click.option("--end", required=True, help=CANONICAL["--end"] + ".")
@click.option(
    "--max-chunks-per-s",
    default=50.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Chunks run per second, whole job (0: no limit).",
)
@click.option(
    "--plugin-dir",
    "plugin_dirs",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="Plugin directory (repeat); on a cluster it must exist on every executor too.",
)
@click.option("--entry-points/--no-entry-points", default=True, show_default=True)
@click.option("--parallelism", default=None, type=click.IntRange(1), help="Spark tasks.")
@click.option("--replace-version", is_flag=True,
              help="Overwrite stored results of another version of the plugin.")  # fmt: skip
@click.option("--progress/--no-progress", default=None,
              help="Chunks done/total, rate, ETA on stderr (default: on a terminal).")  # fmt: skip
@_namespace_options(results=True)
@json_option
def backfill(  # noqa: PLR0917 (click passes options as arguments)
    nodes: tuple[str, ...],
    master: str | None,
    dc: str,
    substream: str,
    start: str,
    end: str,
    max_chunks_per_s: float,
    plugin_dirs: tuple[str, ...],
    entry_points: bool,
    parallelism: int | None,
    replace_version: bool,
    progress: bool | None,
    as_json: bool,
    **names: str,
) -> None:
    """Run one substream over [start, end) and store its results as the companion does
    (a stored result of the same version is kept; one of another version is kept too,
    and the job fails saying so, unless --replace-version)."""
    from consumer_lib.errors import ConsumerError  # noqa: PLC0415
    from consumer_lib.spark.backfill import backfill as run  # noqa: PLC0415

    first, stop = _range(start, end)
    dcs = check_dc(dc, several=True)
    namespaces = _namespaces(names)
    node_list = _checked_nodes(nodes)  # all of it before Spark starts
    show = sys.stderr.isatty() if progress is None else progress
    with _session(master) as session, _backfill_progress(show, substream) as report:
        began = time.monotonic()
        with _job("backfill", (ConsumerError, ValueError)):
            counts = run(
                session,
                nodes=node_list,
                dcs=dcs,
                substream=substream,
                start=first,
                end=stop,
                plugin_dirs=plugin_dirs,
                entry_points=entry_points,
                max_chunks_per_s=max_chunks_per_s,
                parallelism=parallelism,
                replace_version=replace_version,
                progress=report,
                namespaces=namespaces,
            )
    summary = ", ".join(f"{k} {v}" for k, v in counts.items())
    _err(f"backfill {substream} [{first}, {stop}): {summary} in {time.monotonic() - began:.1f}s")
    if as_json:
        click.echo(json.dumps({"substream": substream, "start": first, "end": stop, **counts}))
    if counts.get("other_version"):
        raise click.ClickException(
            f"{counts['other_version']} stored results of {substream} are of another "
            "version and were not overwritten: pass --replace-version to replace them"
        )


if __name__ == "__main__":  # spark-submit .../consumer_lib/spark/cli.py export ...
    spark()
