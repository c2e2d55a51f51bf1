"""Several chunks in one sandboxed child: one fork, one setup and exit, one warm heap.

A child forked for one chunk builds its events in fresh memory: every page it touches
is a fault (~3,800 per 370 KB chunk of the companion bench, about a third of the
child's CPU), and its setup and exit cost ~3 ms more; a child that runs a second chunk
reuses what the first freed. Measured (bench chunks, decode + 6.4 runs, children's CPU
per chunk): 18.2 ms one chunk per child, 15.0 two, 13.0 four (companion/DESIGN.md,
"Performance"). :func:`run_batch` is :func:`substreams.sandbox.run_substreams` with a
loader, for several chunks at once, under the same limits.
"""

from __future__ import annotations

from collections.abc import Sequence

from substreams.api import Context, Substream
from substreams.child import Job, Loaded, Loader, substream_target
from substreams.protocol import Limits, Outcome
from substreams.sandbox import SandboxUnavailable, run_in_child, run_substreams

__all__ = ["BatchChunk", "run_batch"]


#: One chunk of a batch: its substreams, the loader of its events, its context.
BatchChunk = tuple[Sequence[Substream], Loader, Context]


def run_batch(
    chunks: Sequence[BatchChunk],
    *,
    cap: Limits | None = None,
    max_parallel: int = 4,
    syscall_filter: bool = True,
    nice: int = 0,
) -> tuple[list[list[Outcome | None]], str | None]:
    """Run several chunks' substreams in one shared child (isolation ``"chunk"``).

    What :func:`run_substreams` with a loader does for one chunk, for a batch: one fork,
    one child setup and exit, and one warm heap for all of them (a child built fresh
    for each chunk pays its page faults again: companion/DESIGN.md, "Performance").
    The child loads every chunk of the batch once (each with the union of its own
    substreams' fields), then runs the jobs in order; each run has its own deadline
    and limits and sees its own chunk's events narrowed to its fields, exactly as
    alone. When a run kills the child, the jobs after it run in a new child, which
    loads only the chunks they need. When a load fails (any chunk of the batch
    unreadable, or the child died loading), each chunk of that child is run again
    alone, so the unreadable one alone gets ``unreadable`` outcomes.

    Plugins of different chunks share the child's module state as those of one
    chunk do (read-only events by contract; a plugin must not keep state between
    calls).

    Args:
        chunks: (substreams, loader, context) of each chunk.
        cap, max_parallel, syscall_filter, nice: see :func:`run_substreams`.

    Returns:
        Each chunk's outcomes in order (``None``: not run, the sandbox could not start a
        child), and why some are ``None`` (the :class:`SandboxUnavailable` message), or
        None when every run has an outcome.
    """
    if len(chunks) == 1:
        subs, loader, ctx = chunks[0]
        try:
            alone = run_substreams(
                subs, loader, ctx, cap=cap, max_parallel=max_parallel, isolation="chunk",
                syscall_filter=syscall_filter, nice=nice,
            )  # fmt: skip
        except SandboxUnavailable as e:
            return [list(e.outcomes) or [None] * len(subs)], str(e)
        return [list(alone)], None
    sources = [Loaded(loader) for _, loader, _ in chunks]
    owner: list[tuple[int, int]] = []  # job -> (chunk, its index in the chunk)
    jobs: list[Job] = []
    for c, (subs, _, ctx) in enumerate(chunks):
        for i, sub in enumerate(subs):
            jobs.append((sub.name, substream_target(sub, sources[c], ctx, own_list=True),
                         Limits.of(sub, cap)))  # fmt: skip
            owner.append((c, i))

    def load(indexes: list[int]) -> None:
        mine: dict[int, list[int]] = {}
        for j in indexes:
            c, i = owner[j]
            mine.setdefault(c, []).append(i)
        for c, local in mine.items():
            sources[c].load(chunks[c][0], local)

    results: list[list[Outcome | None]] = [[None] * len(subs) for subs, _, _ in chunks]
    unavailable: str | None = None
    try:
        ran: Sequence[Outcome | None] = run_in_child(
            jobs, max_parallel=max_parallel, isolation="chunk", syscall_filter=syscall_filter,
            nice=nice, load=load,
        )  # fmt: skip
    except SandboxUnavailable as e:
        ran, unavailable = list(e.outcomes) or [None] * len(jobs), str(e)
    for (c, i), outcome in zip(owner, ran, strict=True):
        results[c][i] = outcome
    for c, chunk in enumerate(chunks):
        if unavailable is None and any(
            o is not None and o.kind == "unreadable" for o in results[c]
        ):
            again, why = run_batch([chunk], cap=cap, max_parallel=max_parallel,
                                   syscall_filter=syscall_filter, nice=nice)  # fmt: skip
            results[c], unavailable = again[0], why
    return results, unavailable
