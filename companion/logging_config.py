"""The companion's logging under gunicorn: one format for gunicorn's records and ours,
and a failure's traceback once per node rather than once per worker.

gunicorn's logger writes its ``gunicorn.error`` records through a handler and a format
of its own. :class:`GunicornLogger` (gunicorn's ``logger_class``) removes those handlers
and lets the records propagate to the root logger, whose handler the command line
configured (:func:`eventstore.logformat.configure`, ``riak-events --log-format``): the
master's and the workers' lines come out in the one format, plain or JSON. The access
log stays off (``/metrics`` is the request record).

The workers meet the same failures at the same time (a plugin that does not load, an
app that does not start); :func:`gunicorn_options` installs
:class:`eventstore.logonce.OncePerDirectory` on the root handlers before the fork, over
``<state_dir>/logged-once``: a marked record is logged in full by the first process, as
one line by the others. gunicorn's own tracebacks (``Worker exception``, ``Exception in
worker process``) are marked here.

Left as it is: after a worker's boot failure gunicorn also ``print``s the exception's
message to stderr, unformatted (a line outside logging).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from gunicorn import glogging

from eventstore import logonce

__all__ = ["GunicornLogger", "gunicorn_options"]


class GunicornLogger(glogging.Logger):  # type: ignore[misc]
    """gunicorn's logger with its records sent to the root logger's handlers (when the
    command line configured some; otherwise gunicorn's own handlers stay)."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        if not logging.getLogger().handlers:
            return
        for log in (self.error_log, self.access_log):
            for handler in list(log.handlers):
                if getattr(handler, "_gunicorn", False):
                    log.removeHandler(handler)
            log.propagate = True

    def exception(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        # Every worker fails the same way at once: the traceback once per node.
        error = sys.exc_info()[1]
        text = str(msg) % args if args else str(msg)
        kwargs.setdefault(
            "extra", logonce.once(f"gunicorn:{text}:{type(error).__name__}:{error}", brief=text)
        )
        self.error_log.exception(msg, *args, **kwargs)


def gunicorn_options(state_dir: Path) -> dict[str, Any]:
    """gunicorn settings that route its logging through ours; installs the log-once
    filter over ``state_dir/logged-once`` (emptied: a new run logs its failures again).

    Call in the master before gunicorn starts, after the root logger was configured.

    Returns:
        ``logger_class``, ``errorlog``, ``accesslog`` and ``loglevel`` for gunicorn.
    """
    logonce.install(state_dir / "logged-once")
    level = logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower()
    return {"logger_class": GunicornLogger, "errorlog": "-", "accesslog": None, "loglevel": level}
