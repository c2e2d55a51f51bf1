"""riak-events shared core: names, ranges, the ring, blobs, chunking, errors, the Riak client.

This package imports nothing from the packages built on top of it (relocator, companion,
substreams, consumer_lib).
"""

from __future__ import annotations

from eventstore import moved

__version__ = "0.1.0"

moved.install()  # the deprecated paths of packages that moved out (eventstore/moved.py)
