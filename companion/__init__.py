"""The companion daemon: runs every substream on each chunk next to where it is stored.

See ``companion/DESIGN.md``. ``riak-events companion --config FILE`` serves it under
gunicorn; :func:`companion.app.create_app` builds the ASGI app.
"""
