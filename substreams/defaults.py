"""Every default of the substream platform, documented, in one place.

A plugin's own declaration may lower or raise its limits up to the platform caps; a
companion may lower the caps further in its settings.
"""

from __future__ import annotations

#: Wall-clock time one run of a substream on one chunk may take, seconds.
TIMEOUT_S = 1.0
#: Memory a run may allocate above what the forked child inherits, MiB (RLIMIT_AS).
MEMORY_MB = 256
#: Size of one encoded result, bytes: substreams are small by definition.
MAX_RESULT_BYTES = 64 * 1024

#: Caps on what a declaration may ask for.
MAX_TIMEOUT_S = 30.0
MAX_MEMORY_MB = 8192
MAX_RESULT_BYTES_CAP = 4 * 1024 * 1024

#: The platform's default caps on every plugin's declared limits
#: (:data:`substreams.protocol.DEFAULT_CAP`): a companion's unless its settings say
#: otherwise (``companion/defaults.py`` refers to these), the consumer's fallback, the
#: backfill and ``substream test``, so a plugin gets the same limits everywhere.
CAP_TIMEOUT_S = 5.0
CAP_MEMORY_MB = 1024
CAP_MAX_RESULT_BYTES = 1024 * 1024

#: The parent kills the child's process group this long after the plugin's own
#: wall-clock deadline (the child first tries to stop itself with SIGALRM), seconds.
KILL_GRACE_S = 0.25
#: Bytes of a traceback kept in an error result.
ERROR_MAX_BYTES = 2000

#: Entry-point group of installed plugins.
ENTRY_POINT_GROUP = "riak_events.substreams"
#: How often a watched plugins directory is scanned for changes, seconds.
WATCH_INTERVAL_S = 1.0

#: ZooKeeper path of the cluster-wide registry: one child znode per substream.
REGISTRY_PATH = "/riak-events/substreams"
#: Largest plugin source accepted by the registry (ZooKeeper's jute.maxbuffer is 1 MiB).
REGISTRY_MAX_SOURCE_BYTES = 512 * 1024
