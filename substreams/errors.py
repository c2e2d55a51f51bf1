"""Errors of the substream platform: one root, leaves named for what happened.

Plugin code never raises these; the platform does, about plugins. ``retriable`` says
whether running the same thing again may help.
"""

from __future__ import annotations

from eventstore.errors import RiakEventsError


class SubstreamError(RiakEventsError):
    """Root of every error the ``substreams`` package raises on purpose (a
    ``RiakEventsError``)."""


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


class InvalidSigningKey(SubstreamError):
    """A publisher's private key or a trusted public key cannot be read or is not Ed25519."""


class SignatureRejected(SubstreamError):
    """A registry plugin is not signed by a trusted key (unsigned, unknown key, bad
    signature, or no trusted keys configured); the message says which."""


class RegistryAccessDenied(RegistryError):
    """ZooKeeper refused a registry write: no or wrong digest credentials, or the
    registry's znode belongs to another publisher identity."""

    retriable = False


class ReplaceRefused(RegistryError):
    """Publishing would replace a published plugin with another source; pass
    ``--replace`` (``replace=True``) to do it on purpose."""

    retriable = False


class OtherVersionStored(SubstreamError):
    """A stored result was made by another version of the plugin; a backfill keeps it
    unless told to replace other versions (``--replace-version``)."""


class RefillRefused(SubstreamError):
    """A companion refused a refill for good (not a peer, no such substream, disabled
    there), or was still not done after the tries; the message names the companion."""


class UndeclaredField(SubstreamError):
    """A plugin read a field its ``@substream(fields=...)`` does not declare (with
    ``e[...]``, ``e.get``, ``in`` or ``dig``); the message names the field and the
    declared ones. Raised inside the run (``substreams/declared.py``), so the run's
    result is ``error`` with that message. Not a ``KeyError``: ``except KeyError`` does
    not swallow it."""
