"""Every default of the consumer library, documented, in one place."""

from __future__ import annotations

#: Riak read options of every GET: one replica's value is enough (the seed's r=1: chunks
#: are immutable and verified by their checksum postfix), but a "not found" is believed
#: only from a quorum of replicas (notfound_ok=false, the bucket's basic_quorum=true), not
#: from the first one: while a primary is down its empty fallback replica answers "not
#: found" first, and with the seed's notfound_ok=true a whole dc's epochs vanished for
#: readers of a real 3-node cluster with one node killed (eventstore.riak.defaults).
R = 1
NOTFOUND_OK = False

#: Socket timeout of one request, seconds.
TIMEOUT_S = 10.0
#: Tries of one request on the node list (first included), and their deadline, seconds.
RETRY_MAX_TRIES = 4
RETRY_DEADLINE_S = 15.0

#: What one chunk may decode to (its decompressed body): at most this many bytes and
#: this many times its stored size, but always 16 MiB (eventstore.blob.DecodeLimits;
#: chunks we write stay under 8 MiB, realistic 500 KB ones hold ~1.3 MB). Over it:
#: ChunkTooLarge, before anything is decompressed.
MAX_DECODED_BYTES = 64 * 2**20
MAX_DECODED_RATIO = 64.0

#: Threads fetching and decoding chunks (and running fallbacks) in parallel.
CONCURRENCY = 8
#: Chunks fetched ahead of the consumer: bounds memory (at most this many decoded
#: chunks of <= 500 KB stored each are held ahead) whatever the range.
PREFETCH_CHUNKS = 16
#: Epochs whose metadata is read ahead.
METADATA_DEPTH = 8

#: Tail: seconds after an epoch's end before it is read (the writers' grace window plus
#: their push time; the seed's consumers ran 10-15 s behind).
TAIL_LAG_S = 5.0
#: Tail: how long after that to wait for late metadata before skipping the epoch.
TAIL_LATE_WAIT_S = 30.0
#: Tail: interval between metadata reads while waiting, seconds.
TAIL_POLL_S = 0.5

#: Our ZooKeeper root (companions register live nodes under <root>/companions).
ZK_ROOT = "/riak-events"

#: A substream read without the plugin's code: how many epochs a chunk without a result
#: waits for a result of its type:subtype to show up later in the range before it is
#: taken as not read by the substream (results held meanwhile: at most this many
#: epochs' worth). See consumer_lib/unplugged.py.
UNPLUGGED_WINDOW_EPOCHS = 60

#: ``ls`` / ``EventsClient.inventory``: metadata read at most for this many epochs; a
#: longer range is sampled (this many epochs spread evenly over it, said in the output).
INVENTORY_MAX_EPOCHS = 3600
#: ``ls``: result keys probed per (substream, type:subtype) when checking which
#: substreams have results (the first and last chunk seen), and in all at most.
INVENTORY_PROBES_PER_GROUP = 2
INVENTORY_MAX_PROBES = 2000
#: Known substream names listed at most in a "no substream NAME; known: ..." message.
KNOWN_NAMES_SHOWN = 20
