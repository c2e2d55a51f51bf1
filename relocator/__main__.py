"""``python -m relocator``: the same as ``riak-events relocator``."""

from __future__ import annotations

import logging

from relocator.cli import relocator

if __name__ == "__main__":
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    relocator(auto_envvar_prefix="RIAK_EVENTS_RELOCATOR")
