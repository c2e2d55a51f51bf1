"""``python -m devnode``: the same command as ``riak-events devnode``."""

from __future__ import annotations

import os

from devnode.cli import devnode
from eventstore.logformat import configure_from_environment

if __name__ == "__main__":
    # The log settings of ``riak-events --log-level/--log-format``, from the environment.
    configure_from_environment(os.environ)
    devnode(auto_envvar_prefix="RIAK_EVENTS_DEVNODE")
