"""``python -m companion``: the same as ``riak-events companion``."""

from __future__ import annotations

import os

from companion.cli import companion
from eventstore.logformat import configure_from_environment

if __name__ == "__main__":
    # The log settings of ``riak-events --log-level/--log-format``, from the environment.
    configure_from_environment(os.environ)
    companion(auto_envvar_prefix="RIAK_EVENTS_COMPANION")
