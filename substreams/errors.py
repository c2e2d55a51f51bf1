"""Errors of the substream platform: one root, leaves named for what happened.

Plugin code never raises these; the platform does, about plugins. ``retriable`` says
whether running the same thing again may help.
"""

from __future__ import annotations

from typing import ClassVar


class SubstreamError(Exception):
    """Root of every error the ``substreams`` package raises on purpose."""

    retriable: ClassVar[bool] = False


class InvalidDeclaration(SubstreamError, ValueError):
    """A ``@substream(...)`` declaration is wrong (bad name, limits, types)."""


class PluginLoadError(SubstreamError):
    """A plugin file or entry point could not be loaded.

    Attributes:
        origin: the file path or entry point that failed.
        reason: what went wrong (the exception's type and message).
    """

    def __init__(self, origin: str, reason: str) -> None:
        self.origin = origin
        self.reason = reason
        super().__init__(f"plugin {origin}: {reason}")


class DuplicateSubstream(PluginLoadError):
    """Two plugins declare the same substream name; the first one loaded is kept."""


class RegistryError(SubstreamError):
    """The ZooKeeper registry could not be read or written."""

    retriable = True


class SoftTimeout(BaseException):
    """Raised inside a sandboxed child by its SIGALRM at the wall-clock limit.

    A BaseException, so a plugin's ``except Exception`` does not swallow it, and the
    loader lets it through instead of reporting it as the plugin's own failure.
    """
