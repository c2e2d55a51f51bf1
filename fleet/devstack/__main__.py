"""``python -m fleet.devstack``: the same as ``riak-events dev`` (``dev up --detach`` runs its
supervisor this way)."""

from __future__ import annotations

from fleet.devstack.cli import dev

if __name__ == "__main__":
    dev(prog_name="riak-events dev", auto_envvar_prefix="RIAK_EVENTS_DEV")
