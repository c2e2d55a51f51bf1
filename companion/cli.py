"""``riak-events companion``: serve the companion under gunicorn with pre-forked workers.

The options come from ``companion/options.py`` (flag, type, bounds, help and the one
environment variable each reads, shown in ``--help``: ``RIAK_EVENTS_COMPANION_NODE``,
``..._NODE_NAME``, ``..._WORKERS``...; ``--config`` reads ``..._CONFIG``). The old names
``--riak`` and ``--zk-hosts`` are hidden aliases of ``--node`` and ``--zookeeper``; a
node URL without ``http://`` is refused before gunicorn starts. gunicorn runs in
this process as the master (``-k asgi``: gunicorn's native ASGI worker); each worker
builds its own app resources after the fork. The master also holds the ZooKeeper
session (live-node znode and registry mirror, made in the background: the companion
serves at once whether ZooKeeper is up or not), so there is one per node, and runs the
auditor.

The master first locks the state directory (``eventstore.dirlock``; the workers and
their children inherit the lock): a second companion on the same directory exits at
once with one line naming the directory and the process that holds it.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import click

from companion import defaults
from companion.options import OPTIONS
from companion.settings import CompanionSettings, load
from eventstore.dirlock import DirectoryLock, DirectoryLocked, lock_directory
from eventstore.options import check_node_urls
from eventstore.settings import SettingsError

log = logging.getLogger(__name__)


def _prepare_state_dir(settings: CompanionSettings) -> Path:
    """Create the state directory; empty what belongs to a previous run."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    metrics_dir = settings.state_dir / "prometheus"
    for stale in (metrics_dir, settings.state_dir / "status", settings.state_dir / "held"):
        shutil.rmtree(stale, ignore_errors=True)
    (settings.state_dir / "zookeeper.json").unlink(missing_ok=True)  # the last run's
    metrics_dir.mkdir()
    settings.registry_dir.mkdir(exist_ok=True)
    return metrics_dir


def serve(settings: CompanionSettings, lock: DirectoryLock) -> None:
    """Run gunicorn's master with ``settings.workers`` ASGI workers until stopped.

    Args:
        settings: the companion's settings.
        lock: the state directory's lock, held until this returns.
    """
    from gunicorn.app.base import BaseApplication  # noqa: PLC0415

    metrics_dir = _prepare_state_dir(settings)
    # prometheus-client picks its multiprocess mode from the environment when first
    # imported; nothing has imported it yet in this process (companion.app does).
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    from prometheus_client import multiprocess  # noqa: PLC0415

    from companion.app import create_app  # noqa: PLC0415
    from companion.held import requeue  # noqa: PLC0415
    from companion.inbox import Inbox  # noqa: PLC0415
    from companion.logging_config import gunicorn_options  # noqa: PLC0415
    from companion.stats import merge, read_snapshots  # noqa: PLC0415

    # The node's queue, made before the workers fork so that they all share it: the
    # hook sends one key group per node, and any free worker takes the next chunk.
    inbox = Inbox(settings.queue_max * settings.workers)

    presence: list[Any] = []

    def when_ready(server: Any) -> None:
        start_auditor()
        if not settings.zk_hosts:
            return
        from companion.zk import ZooKeeperPresence  # noqa: PLC0415

        def health() -> dict[str, Any]:
            view = merge(read_snapshots(settings.state_dir / "status"))
            return {
                "workers": view["workers"],
                "queue_depth": view["queue_depth"],
                # name -> the versions this node's workers have loaded
                "substreams": {n: sorted(v) for n, v in view["loaded"].items()},
            }

        # Returns at once: the session is made (and made again) in the background.
        presence.append(
            ZooKeeperPresence(
                settings, health=health, interval_s=settings.zk_health_interval_s
            ).start()
        )

    def start_auditor() -> None:
        if settings.audit_interval_s <= 0:
            return
        from companion.auditor import Auditor, http_post  # noqa: PLC0415

        host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
        # The hook's work goes first: while the inbox holds a worker's queue or more,
        # a round checks only audit_min_keys keys.
        auditor = Auditor(
            settings,
            settings.riak.client(),
            http_post(host, settings.port),
            busy=lambda: inbox.depth() >= settings.queue_max,
        )
        presence.append(auditor.start())

    def on_exit(server: Any) -> None:
        for p in presence:
            p.stop()

    def child_exit(server: Any, worker: Any) -> None:
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
        # The chunks its threads took beyond the one each ran (a batch): queued again.
        requeue(settings.state_dir / "held", worker.pid, inbox)

    options = {
        "bind": [settings.listen],
        "workers": settings.workers,
        "worker_class": "asgi",
        "asgi_lifespan": "on",
        "graceful_timeout": defaults.GRACEFUL_TIMEOUT_S,
        "timeout": defaults.WORKER_TIMEOUT_S,
        "proc_name": f"riak-events-companion {settings.node or settings.listen}",
        # One control socket per companion (several may share a host in tests).
        "control_socket": str(settings.state_dir / "gunicorn.ctl"),
        # gunicorn's records in our format (--log-format); tracebacks once per node.
        **gunicorn_options(settings.state_dir),
        "when_ready": when_ready,
        "on_exit": on_exit,
        "child_exit": child_exit,
    }

    class CompanionServer(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for name, value in options.items():
                self.cfg.set(name, value)

        def load(self) -> Any:
            return create_app(settings, metrics_dir=metrics_dir, inbox=inbox)

    CompanionServer().run()
    lock.release()


def _riak_urls(values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        if "@" in value and "://" not in value:  # the logical name, --node before 0.x
            raise click.BadParameter(
                f"{value!r} looks like a node name: --node is this node's Riak URL "
                "(http://HOST:PORT); give the logical name as --node-name",
                param_hint="--node",
            )
    return check_node_urls(values)


def _warn_missing_dirs(settings: CompanionSettings, config: Path | None) -> None:
    """A configured plugins directory that does not exist is watched (a plugin dropped
    there later is loaded), but is most often a typo or a path taken against the wrong
    directory: say so."""
    where = f"plugin_dirs of {config}" if config else "--plugin-dir"
    for directory in settings.plugin_dirs:
        if not directory.is_dir():
            log.warning(
                "companion: plugins directory %s does not exist (%s; relative paths are "
                "taken from the config file's directory); create it or fix the setting",
                directory,
                where,
            )


@click.command()
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML settings file (see companion/example-config.toml).",
)
@OPTIONS.click("listen", metavar="HOST:PORT")
@OPTIONS.click("node")
@OPTIONS.click("workers")
@OPTIONS.click("threads")
@OPTIONS.click("state_dir")
@OPTIONS.click("plugin_dirs")
@OPTIONS.click("peers")
@OPTIONS.click("riak_nodes", callback=lambda ctx, param, value: _riak_urls(value))
@OPTIONS.click("zk_hosts")
def companion(config: Path | None, **overrides: Any) -> None:
    """Run substreams next to the data: receive key groups from the hook, run every
    plugin sandboxed on each chunk, store the results."""
    try:
        settings = load(config, **overrides)
    except SettingsError as e:
        raise click.ClickException(str(e)) from e
    _warn_missing_dirs(settings, config)
    try:
        lock = lock_directory(settings.state_dir)
    except DirectoryLocked as e:
        raise click.ClickException(str(e)) from e
    if settings.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("companion: listening on %s; only peers %s may POST", settings.host,
                    ", ".join(settings.peers))  # fmt: skip
    serve(settings, lock)
