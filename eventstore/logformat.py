"""The log formats of every ``riak-events`` command: ``plain`` (one readable line) or
``json`` (one JSON object per line, for log shippers).

Only the command line configures logging (:func:`configure`); libraries just log. A
record's exception becomes a ``traceback`` field in JSON and the usual indented block in
plain text. ``python -m relocator`` (and ``companion``, ``devnode``) read the
same settings as ``riak-events`` from ``RIAK_EVENTS_LOG_LEVEL`` and
``RIAK_EVENTS_LOG_FORMAT`` (:func:`configure_from_environment`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime, timezone

__all__ = [
    "FORMATS",
    "LEVELS",
    "JsonFormatter",
    "configure",
    "configure_from_environment",
    "formatter",
]

FORMATS = ("plain", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", "pid"[, "traceback"]}`` per line; ``ts`` is
    ISO-8601 UTC with milliseconds."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "pid": record.process,
        }
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "json":
        return JsonFormatter()
    if fmt == "plain":
        return logging.Formatter(PLAIN)
    raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")


#: Libraries whose INFO records narrate every request or connection ("HTTP Request:
#: GET ...", "Connecting to ..."): shown from WARNING up unless the level is DEBUG.
CHATTY_LIBRARIES = ("httpx", "httpcore", "kazoo")


def configure(level: str, fmt: str) -> None:
    """Send every log record of the process to stderr in ``fmt`` at ``level`` and up
    (:data:`CHATTY_LIBRARIES` at WARNING and up, unless ``level`` is DEBUG)."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    quiet = logging.NOTSET if level.upper() == "DEBUG" else logging.WARNING
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(max(quiet, root.level) if quiet else logging.NOTSET)


def configure_from_environment(environ: Mapping[str, str]) -> None:
    """:func:`configure` from ``RIAK_EVENTS_LOG_LEVEL`` (default INFO) and
    ``RIAK_EVENTS_LOG_FORMAT`` (default plain): for ``python -m <daemon>``, which has no
    ``riak-events --log-level/--log-format``.

    Raises:
        SystemExit: a value that is not one of :data:`LEVELS` or :data:`FORMATS`, with
            one line naming the variable.
    """
    level = environ.get("RIAK_EVENTS_LOG_LEVEL", "INFO").upper()
    fmt = environ.get("RIAK_EVENTS_LOG_FORMAT", "plain")
    if level not in LEVELS:
        raise SystemExit(f"RIAK_EVENTS_LOG_LEVEL must be one of {', '.join(LEVELS)}, not {level!r}")
    if fmt not in FORMATS:
        raise SystemExit(f"RIAK_EVENTS_LOG_FORMAT must be one of {', '.join(FORMATS)}, not {fmt!r}")
    configure(level, fmt)
