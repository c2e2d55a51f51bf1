"""``riak-events dev``: a whole local stack in one command, for trying the system and for
the plugin author's loop.

``dev up`` starts, on the embedded default, ZooKeeper (Debian's package, when
installed), a devnode whose post-commit hook posts to a companion, the companion (the
plugins directory given, plus the installed example plugins), a relocator pushing to the
devnode and, with ``--loadgen``, a load generator; it prints the endpoints, streams one
merged log with a prefix per process, and stops everything on Ctrl-C or SIGTERM.
``dev up --detach`` runs it in the background; ``dev status`` and ``dev down`` find it
through the state file in its data directory.

This package sits above every other one (it starts their daemons through their test
harnesses, :mod:`fleet.harness`); nothing imports it. Design and failure
scenarios: ``fleet/devstack/DESIGN.md``.
"""
