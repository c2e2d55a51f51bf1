"""``python -m eventstore.devnode``: the same command as ``riak-events devnode``."""

from __future__ import annotations

import logging

from eventstore.devnode.cli import devnode

if __name__ == "__main__":
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    devnode(auto_envvar_prefix="RIAK_EVENTS_DEVNODE")
