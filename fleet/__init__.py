"""Running and observing the whole system from outside.

- ``fleet.cluster``: container images and a cluster of them (``riak-events cluster``);
- ``fleet.devstack``: every daemon on one machine under one supervisor (``riak-events dev``);
- ``fleet.status`` and ``fleet.status_cli``: the whole system's state from what each
  daemon serves (``riak-events status``);
- ``fleet.harness``: start a daemon as a real process, wait until it is ready, stop it
  (the base of every package's ``testing`` harness); ``fleet.waitready``: the readiness
  probe that images and units run.

Nothing below imports this package, except a package's ``testing`` harness, which may use
``fleet.harness`` (tests/unit/test_import_graph.py).
"""
