"""The log formats of every ``riak-events`` command: ``plain`` (one readable line) or
``json`` (one JSON object per line, for log shippers).

Only the command line configures logging (:func:`configure`); libraries just log. A
record's exception becomes a ``traceback`` field in JSON and the usual indented block in
plain text.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

__all__ = ["FORMATS", "JsonFormatter", "configure", "formatter"]

FORMATS = ("plain", "json")
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


def configure(level: str, fmt: str) -> None:
    """Send every log record of the process to stderr in ``fmt`` at ``level`` and up."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
