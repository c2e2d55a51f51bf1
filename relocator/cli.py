"""``riak-events relocator`` and ``riak-events loadgen``.

Every option has an environment variable, shown in ``--help``
(``RIAK_EVENTS_RELOCATOR_<OPTION>``, ``RIAK_EVENTS_LOADGEN_<OPTION>``); the relocator's
options, but for ``--config`` and ``--cluster``, come from ``relocator/options.py``. The CLI is the
only place that reads the environment and configures logging handlers.
"""

from __future__ import annotations

import gc
import json
import logging
import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import click

from eventstore.settings import SettingsError, parse_listen
from relocator.options import OPTIONS
from relocator.settings import load, parse_cluster_option

log = logging.getLogger(__name__)

_R = "RIAK_EVENTS_RELOCATOR_"


@click.command()
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar=_R + "CONFIG",
    show_envvar=True,
    help="TOML file (see relocator/example-config.toml).",
)
@OPTIONS.click("data_dir")
@OPTIONS.click("udp_listen")
@OPTIONS.click("tcp_listen")
@OPTIONS.click("metrics_listen")
@OPTIONS.click("spool_dir")
@OPTIONS.click("writer_id")
@OPTIONS.click("grace_s")
@click.option(
    "--cluster",
    "clusters",
    multiple=True,
    metavar="NAME=URL[,URL]",
    envvar=_R + "CLUSTER",
    show_envvar=True,
    help="A cluster to push to (repeatable; replaces [clusters] of the file).",
)
@OPTIONS.click("zk_hosts")
@OPTIONS.click("fsync")
def relocator(
    *,
    config: Path | None,
    data_dir: Path | None,
    udp_listen: str | None,
    tcp_listen: str | None,
    metrics_listen: str | None,
    spool_dir: str | None,
    writer_id: int | None,
    grace_s: float | None,
    clusters: tuple[str, ...],
    zk_hosts: str | None,
    fsync: bool | None,
) -> None:
    """Receive events, aggregate them per epoch, and push chunks then metadata to Riak."""
    from eventstore.dirlock import DirectoryLocked  # noqa: PLC0415
    from relocator.daemon import Relocator  # noqa: PLC0415 (heavy imports only when run)
    from relocator.errors import ListenFailed, RelocatorError  # noqa: PLC0415
    from relocator.ops import OpsServer  # noqa: PLC0415

    try:
        settings = load(
            config,
            data_dir=data_dir,
            udp_listen=udp_listen,
            tcp_listen=tcp_listen,
            metrics_listen=metrics_listen,
            spool_dir=spool_dir,
            writer_id=writer_id,
            grace_s=grace_s,
            zk_hosts=zk_hosts,
            fsync=fsync,
            clusters=tuple(parse_cluster_option(c) for c in clusters),
        )
    except SettingsError as e:
        raise click.ClickException(str(e)) from e
    # Many long-lived small objects (open groups) make the default gen-0 threshold (700)
    # trigger collections that walk them again and again.
    gc.set_threshold(50_000, 20, 100)
    try:
        # Refusals at start (data directory in use, writer id held by a live relocator,
        # kazoo missing, an unreadable journal) are one line and exit 1, no traceback.
        daemon = Relocator(settings)
    except (DirectoryLocked, RelocatorError) as e:
        raise click.ClickException(str(e)) from e

    def stop(signum: int, frame: FrameType | None) -> None:
        log.info("relocator: signal %d, shutting down (flushing)", signum)
        daemon.request_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        daemon.start()
    except RelocatorError as e:
        raise click.ClickException(str(e)) from e
    ops = None
    if settings.metrics_listen:
        host, port = parse_listen(settings.metrics_listen, source="metrics_listen")
        try:
            ops = OpsServer(
                host,
                port,
                registry=daemon.metrics.registry,
                status=daemon.status,
                healthy=lambda: daemon.writer.failed is None,
                ready=daemon.readiness,
            )
        except OSError as e:
            # What intake took meanwhile is journaled: shutdown keeps it for next start.
            daemon.shutdown(drain_s=0.0)
            raise click.ClickException(
                str(ListenFailed("metrics_listen", settings.metrics_listen, e))
            ) from e
        ops.start()
    log.info(
        "relocator: writer %d running; clusters %s",
        settings.writer_id,
        ", ".join(c.name for c in settings.clusters),
    )
    try:
        daemon.run()
    finally:
        if ops:
            ops.stop()
    if daemon.writer.failed is not None:
        raise click.ClickException(f"journal failed: {daemon.writer.failed}")


_L = "RIAK_EVENTS_LOADGEN_"
_Decorated = TypeVar("_Decorated", bound=Callable[..., Any])


def _loadgen_option(flag: str, **kwargs: Any) -> Callable[[_Decorated], _Decorated]:
    """A ``loadgen`` option, its default and its environment variable
    (``RIAK_EVENTS_LOADGEN_<FLAG>``) shown in ``--help``."""
    env = _L + flag.removeprefix("--").replace("-", "_").upper()
    return click.option(flag, show_default=True, envvar=env, show_envvar=True, **kwargs)


@click.command()
@_loadgen_option("--target", default="127.0.0.1:5141", help="Relocator intake HOST:PORT.")
@_loadgen_option("--transport", type=click.Choice(["udp", "tcp"]), default="tcp")
@_loadgen_option(
    "--rate", type=float, default=1000.0, help="Events per second (0: as fast as possible)."
)
@_loadgen_option("--duration-s", type=float, default=10.0)
@_loadgen_option("--dcs", default="ams1,ams4", help="Comma-separated dcs to spread events over.")
@_loadgen_option("--seed", type=int, default=1)
def loadgen(
    *, target: str, transport: str, rate: float, duration_s: float, dcs: str, seed: int
) -> None:
    """Emit a realistic mix of web, cron and load-balancer events at a given rate."""
    from relocator.loadgen import run  # noqa: PLC0415

    try:
        host, port = parse_listen(target, source="--target")
    except SettingsError as e:
        raise click.ClickException(str(e)) from e
    report = run(
        host,
        port,
        transport=transport,
        rate=rate,
        duration_s=duration_s,
        dcs=tuple(d for d in dcs.split(",") if d),
        seed=seed,
    )
    click.echo(json.dumps(report))
