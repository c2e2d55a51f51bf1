"""Errors of the companion: one root; the app maps each class to one HTTP answer.

Domain code raises these; ``companion.app`` holds the one table from classes to status
codes. ``retriable`` says whether the sender may try again later.
"""

from __future__ import annotations

from typing import ClassVar

from eventstore.errors import RiakEventsError


class CompanionError(RiakEventsError):
    """Root of every error the companion raises on purpose (a ``RiakEventsError``)."""

    status_code: ClassVar[int] = 500


class PeerNotAllowed(CompanionError):
    """A request came from an address not in ``peers``; answered 403."""

    status_code = 403


class BadKeyGroup(CompanionError):
    """A POST /v1/keys body is not ``{"epoch": E, "dc": D, "keys": [...]}`` with keys of
    that epoch and dc; answered 400."""

    status_code = 400


class BodyTooLarge(CompanionError):
    """A request body is over ``MAX_BODY_BYTES``; answered 413 as soon as that many
    bytes have arrived (the rest is never read)."""

    status_code = 413


class UnknownSubstream(CompanionError):
    """An operator request names a substream this node does not have; answered 404."""

    status_code = 404


class InputChunkUnreadable(CompanionError):
    """The chunk a substream run takes as input could not be fetched, verified or decoded;
    its results are marked error. (The consumer library's ``ChunkUnreadable`` is a
    reader's error, not this one.)"""


class SubstreamDisabled(CompanionError):
    """A refill asks for a substream disabled on this node (its runs would only be
    marked ``disabled`` again); answered 409: enable it first."""

    status_code = 409
