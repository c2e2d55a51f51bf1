"""riak-events shared core: names, the Sereal codec, blobs, the Riak client and the devnode.

This package imports nothing from the packages built on top of it (relocator, companion,
substreams, consumer_lib).
"""

from __future__ import annotations

__version__ = "0.1.0"
