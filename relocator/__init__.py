"""The relocator: the write path of riak-events.

Producers send single events (UDP, or TCP with acknowledgements; ``producer.py``) or an
external aggregator drops per-epoch blobs in a spool directory; the relocator journals
them, groups them by (epoch, dc, type, subtype), cuts them into chunks of at most
500 KB, and pushes them to every configured Riak cluster: chunks first, then the
epoch's metadata. See ``DESIGN.md`` beside this file.
"""
