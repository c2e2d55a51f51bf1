"""``riak-events cluster``: a whole cluster in containers through the Docker Engine API.

Layering: this package only starts containers, so it imports nothing of the other
packages (relocator, companion, ...); images, compose file and this command share the
Dockerfiles of ``deploy/images/``. Modules: ``topology`` (what runs, as data),
``images`` (builds keyed by a hash of their inputs), ``engine`` (up, status, logs,
kill, down through the ``docker`` SDK), ``cli`` (the click group).
"""
