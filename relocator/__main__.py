"""``python -m relocator``: the same as ``riak-events relocator``."""

from __future__ import annotations

import os

from eventstore.logformat import configure_from_environment
from relocator.cli import relocator

if __name__ == "__main__":
    # The log settings of ``riak-events --log-level/--log-format``, from the environment.
    configure_from_environment(os.environ)
    relocator(auto_envvar_prefix="RIAK_EVENTS_RELOCATOR")
