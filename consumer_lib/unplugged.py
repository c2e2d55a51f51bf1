"""Reading a substream whose plugin code is not here: which chunks are its.

Without the plugin the reader does not know which types and subtypes it reads (its
``@substream(types=..., subtypes=...)``), so it asks the server for a result of every
chunk the caller's filter keeps. A chunk without a result is then either a gap (the
substream reads it; the companion shed it, or was down) or a chunk of a type it does not
read. The server's own results tell them apart: a ``type:subtype`` with a result (of any
status) somewhere in the range is the substream's, so its chunks without one are gaps
(``missing, no plugin to run``); a ``type:subtype`` with none in the range is taken as
not read, and its chunks are left out (counted in :attr:`ReadSummary.not_read`).

Results are handed out in order, so a chunk without a result waits until its
``type:subtype`` is decided, at most ``window_epochs`` epochs of the read (then it is
taken as not read): that many epochs' results are held meanwhile, never more::

    for each result r, in order:
        r has a record (served, or a stored failure): its type:subtype is covered
        queue r
        hand out from the front: every result with a record, and every one without
            whose type:subtype is covered; one without, not covered, waits until
            window_epochs epochs later have been read, then is left out (not_read)
    end: the rest of the queue as above, the undecided left out
    no result had a record, chunks were asked, and no source knows the name:
        SubstreamNotFound("no substream NAME; known: ... (did you mean ...?)")

Failure semantics: a type:subtype whose every result in the first ``window_epochs``
epochs is missing (the companion was down then) and that has results later: those
first chunks are left out, counted under ``not_read`` (which names the type:subtype), not
reported as gaps. With the plugin's code none of this applies (its declaration decides).

Pure logic over the resolved results, no I/O.
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from consumer_lib.errors import SubstreamNotFound
from consumer_lib.gaps import ReadSummary
from consumer_lib.types import SubstreamResult

__all__ = ["no_substream", "served_groups_only"]


def _has_record(res: SubstreamResult) -> bool:
    """Whether the server holds something for the chunk (a result, or a failure)."""
    return not (res.served == "gap" and res.reason == "missing")


def _group(res: SubstreamResult) -> str:
    return f"{res.type}:{res.subtype}"


def served_groups_only(
    results: Iterable[SubstreamResult],
    summary: ReadSummary,
    *,
    window_epochs: int,
    not_found: Callable[[], SubstreamNotFound | None] | None,
) -> Iterator[SubstreamResult]:
    """``results`` of a substream read without its plugin, without the chunks of
    types it does not read (see the module).

    Args:
        results: every kept chunk's result, in order.
        summary: where the chunks left out are counted (``not_read``).
        window_epochs: how long a chunk without a result waits for its type:subtype.
        not_found: the error to raise when no chunk had a record (None, or it returns
            None: no error; the name is known to some source, the range just holds no
            result of it).

    Raises:
        SubstreamNotFound: from ``not_found``, after the last result.
    """
    covered: set[str] = set()
    queue: deque[SubstreamResult] = deque()
    asked = False

    def ready(head: SubstreamResult, newest: int | None) -> bool | None:
        """True: hand out; False: leave out; None: wait."""
        if _has_record(head) or _group(head) in covered:
            return True
        if newest is None or newest - head.epoch >= window_epochs:
            return False
        return None

    def drain(newest: int | None) -> Iterator[SubstreamResult]:
        while queue:
            decision = ready(queue[0], newest)
            if decision is None:
                return
            head = queue.popleft()
            if decision:
                yield head
            else:
                summary.not_read[_group(head)] += 1

    for res in results:
        asked = True
        yield from drain(res.epoch)  # the window is over for older ones before this counts
        if _has_record(res):
            covered.add(_group(res))
        queue.append(res)
        yield from drain(res.epoch)
    yield from drain(None)
    if asked and not covered and not_found is not None:
        error = not_found()
        if error is not None:
            summary.not_read.clear()  # nothing was the substream's: the name is wrong
            raise error


def no_substream(name: str, known: Iterable[str], shown: int) -> SubstreamNotFound:
    """``no substream NAME; known: a, b, c (did you mean a_b?)``: the closest known name
    by :func:`difflib.get_close_matches`, the first ``shown`` names listed."""
    names = sorted(set(known))
    more = len(names) - shown
    listed = ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    message = f"no substream {name}; known: {listed or 'none'}"
    if close:
        message += f" (did you mean {close[0]}?)"
    error = SubstreamNotFound(message)
    error.known = tuple(names)
    return error
