"""``riak-events devnode``: run the single-node stand-in for Riak's HTTP API.

Every option can also be given as ``RIAK_EVENTS_DEVNODE_<OPTION>``: ``--data-dir`` and
``--listen`` as declared in ``options.py``, ``--config`` by click's auto_envvar_prefix.
Served by uvicorn in this one process: the devnode must be one process (one LMDB writer
with group commit, one hook queue, one set of counters), so gunicorn's pre-forked
workers would bring only a second process and nothing to use it. For the same reason the
data directory is locked (``eventstore.dirlock``) before anything is opened: a second
devnode on it exits 1 with one line naming the directory and the pid that holds it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click
import uvicorn

from devnode.app import create_app
from devnode.options import OPTIONS
from devnode.settings import load
from eventstore.dirlock import DirectoryLocked, lock_directory
from eventstore.settings import SettingsError

log = logging.getLogger(__name__)


@click.command()
@OPTIONS.click("data_dir")
@OPTIONS.click("listen", metavar="HOST:PORT")
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML file: ring, companions, hook, bucket types (see devnode/example-config.toml).",
)
def devnode(data_dir: str | None, listen: str | None, config: Path | None) -> None:
    """Serve Riak's HTTP API subset on one node, without replication (dev and CI only)."""
    try:
        settings = load(config, data_dir=data_dir, listen=listen)
    except SettingsError as e:
        raise click.ClickException(str(e)) from e
    try:
        lock = lock_directory(settings.data_dir)
    except DirectoryLocked as e:
        raise click.ClickException(str(e)) from e
    except OSError as e:
        raise click.ClickException(f"cannot lock data directory {settings.data_dir}: {e}") from e
    if settings.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning(
            "devnode: listening on %s, not loopback; it has no authentication", settings.host
        )
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, lock=lock),
            host=settings.host,
            port=settings.port,
            lifespan="on",
            # Measured (bench/devnode_bench.py): with h11 and asyncio's loop one client
            # got 51 PUT/s and 497 GET/s of 400 KB values; with httptools and uvloop
            # 287 and 1739. Named explicitly so a missing package fails loudly.
            http="httptools",
            loop="uvloop",
            log_config=None,
            access_log=False,
            server_header=False,
            timeout_keep_alive=75,
        )
    )
    try:
        server.run()
    finally:
        lock.release()
