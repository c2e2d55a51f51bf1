"""``python -m companion``: the same as ``riak-events companion``."""

from __future__ import annotations

import logging

from companion.cli import companion

if __name__ == "__main__":
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    companion(auto_envvar_prefix="RIAK_EVENTS_COMPANION")
