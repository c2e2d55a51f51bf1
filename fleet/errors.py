"""The root of the errors of running and observing the system from outside (fleet)."""

from __future__ import annotations

from eventstore.errors import RiakEventsError

__all__ = ["FleetError"]


class FleetError(RiakEventsError):
    """Root of fleet's errors: the container cluster's (:mod:`fleet.cluster.errors`) and
    the dev stack's (:mod:`fleet.devstack.errors`)."""
