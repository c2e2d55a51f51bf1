"""The chaos campaign's plan: which faults, when, held how long, drawn from a seed
(no I/O; ``chaos_faults.py`` injects them, and its docstring describes each kind)."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["EXTRA_KINDS", "HOLD_S", "KINDS", "OVERLAP_PARTS", "TARGETS", "PlannedFault", "plan"]

KINDS = (
    "kill",
    "kill_recovering",
    "zk_restart",
    "zk_expire",
    "journal_corrupt",
    "chunk_corrupt",
    "store_stop",
    "store_link",
    "disk_full",
    "worker_kill",
    "relocator_state_corrupt",
    "companion_state_corrupt",
    "big_spool",
    "ack_cut",
    "overlap",
)
#: Kinds drawn only when named in ``kinds``.
EXTRA_KINDS = ("state_store_emptied", "cursor_not_utf8")
#: Targets of the kinds that pick a daemon (each is cycled through, so a few faults of a
#: kind reach every target).
TARGETS = {
    "kill": ("relocator-1", "relocator-2", "companion", "devnode", "zookeeper"),
    "kill_recovering": ("relocator-1", "relocator-2", "companion", "devnode", "zookeeper"),
    "zk_expire": ("relocator-1", "relocator-2", "companion"),
    "journal_corrupt": ("relocator-1", "relocator-2"),
    "relocator_state_corrupt": ("relocator-1", "relocator-2"),
    "state_store_emptied": ("relocator-1", "relocator-2"),
    "worker_kill": ("companion",),
    "companion_state_corrupt": ("companion",),
    "cursor_not_utf8": ("companion",),
    "ack_cut": ("p1", "p2", "legacy"),
}
#: What an overlap combines: (kind, target) per part of the system; an overlap takes
#: one of each of two or three parts.
OVERLAP_PARTS = {
    "store": (("store_stop", ""), ("store_link", ""), ("kill", "devnode")),
    "zookeeper": (
        ("zk_restart", ""),
        ("kill", "zookeeper"),
        ("zk_expire", "relocator-1"),
        ("zk_expire", "relocator-2"),
        ("zk_expire", "companion"),
    ),
    "relocator": (
        ("kill", "relocator-1"),
        ("kill", "relocator-2"),
        ("kill_recovering", "relocator-1"),
        ("kill_recovering", "relocator-2"),
        ("journal_corrupt", "relocator-1"),
        ("journal_corrupt", "relocator-2"),
        ("relocator_state_corrupt", "relocator-1"),
        ("relocator_state_corrupt", "relocator-2"),
        ("disk_full", ""),
    ),
    "companion": (
        ("kill", "companion"),
        ("worker_kill", "companion"),
        ("companion_state_corrupt", "companion"),
    ),
    "producer": (("ack_cut", "p1"), ("ack_cut", "p2"), ("ack_cut", "legacy")),
}
HOLD_S = {
    "zk_restart": (1.0, 8.0),
    "store_stop": (0.5, 4.0),
    "store_link": (1.0, 6.0),
    "disk_full": (1.0, 5.0),
    "ack_cut": (1.0, 4.0),
}


@dataclass(frozen=True)
class PlannedFault:
    """One fault of the plan: drawn from the seed before the run starts."""

    index: int
    kind: str
    target: str
    at_s: float
    hold_s: float
    delay_s: float
    graceful: bool
    #: an overlap's parts: each starts ``at_s`` seconds after the overlap
    parts: tuple[PlannedFault, ...] = ()


def plan(
    seed: int,
    faults: int,
    duration_s: float,
    *,
    kinds: tuple[str, ...] = KINDS,
    warmup_s: float = 5.0,
) -> list[PlannedFault]:
    """``faults`` faults drawn from ``seed``: every kind about equally often (a shuffled
    deck of the kinds, dealt again when empty), at uniform random points of
    ``[warmup_s, duration_s]`` (a fault starts after the previous one has ended), each
    with its random hold, delay and graceful/kill choice."""
    rng = random.Random(seed)
    deck: list[str] = []
    cursors = {k: rng.randrange(len(t)) for k, t in TARGETS.items()}
    times = sorted(rng.uniform(warmup_s, max(warmup_s, duration_s)) for _ in range(faults))
    out: list[PlannedFault] = []
    for i, at in enumerate(times):
        if not deck:
            deck = list(kinds)
            rng.shuffle(deck)
        kind = deck.pop()
        targets = TARGETS.get(kind, ("",))
        target = targets[cursors.get(kind, 0) % len(targets)]
        cursors[kind] = cursors.get(kind, 0) + 1
        first = not any(p.parts for p in out)
        parts = _overlap_parts(rng, i, kinds, first=first) if kind == "overlap" else ()
        hold = rng.uniform(*HOLD_S.get(kind, (0.0, 1.5)))
        out.append(
            PlannedFault(
                index=i,
                kind=kind,
                target=" + ".join(f"{p.kind} {p.target}".strip() for p in parts) or target,
                at_s=at,
                hold_s=max((q.hold_s for q in parts), default=hold),
                delay_s=rng.uniform(0.05, 1.5),
                graceful=rng.random() < 0.5,
                parts=parts,
            )
        )
    return out


def _overlap_parts(
    rng: random.Random, index: int, kinds: tuple[str, ...], *, first: bool = False
) -> tuple[PlannedFault, ...]:
    """Two or three faults on different parts of the system (``OVERLAP_PARTS``; of the
    other kinds drawn, or of all when only overlaps are), the longest held first, each
    later one starting 0.2-1 s after the one before. The ``first`` overlap of a plan is
    issue 24's example: ZooKeeper restarted, the store stopped, a relocator killed."""
    allowed = kinds if set(kinds) - {"overlap"} else KINDS
    pools = {
        part: [c for c in choices if c[0] in allowed] for part, choices in OVERLAP_PARTS.items()
    }
    pools = {part: pool for part, pool in pools.items() if pool}
    example = {"zookeeper": "zk_restart", "store": "store_stop", "relocator": "kill"}
    if first and all(any(c[0] == k for c in pools.get(p, [])) for p, k in example.items()):
        picks = [
            rng.choice([c for c in pools[part] if c[0] == kind]) for part, kind in example.items()
        ]
    else:
        chosen = rng.sample(sorted(pools), min(len(pools), rng.choice((2, 3))))
        picks = [rng.choice(pools[part]) for part in chosen]
    drawn = []
    for kind, target in picks:
        # the outages are held at least 2 s, so what follows them lands inside
        low, high = HOLD_S.get(kind, (0.0, 1.5))
        low = max(low, 2.0) if kind in HOLD_S else low
        drawn.append((rng.uniform(low, max(low, high)), kind, target))
    drawn.sort(key=lambda d: -d[0])
    parts, offset = [], 0.0
    for j, (hold, kind, target) in enumerate(drawn):
        parts.append(
            PlannedFault(
                index=index * 10 + j,
                kind=kind,
                target=target,
                at_s=offset,
                hold_s=hold,
                delay_s=rng.uniform(0.05, 1.5),
                graceful=rng.random() < 0.5,
            )
        )
        offset += rng.uniform(0.2, 1.0)
    return tuple(parts)
