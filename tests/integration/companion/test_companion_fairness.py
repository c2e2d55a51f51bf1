"""One bad plugin costs only its own results (issue 13.2): the hostile set beside a good
plugin under the companion's default scheduling settings (``max_wait_s``,
``disable_after``, workers, threads, ``isolation = "chunk"``), real gunicorn companion,
devnode and its hook.

Before the quarantine (companion/quarantine.py) every plugin of a chunk ran in one
shared child and the chunk's thread waited for all of them: the good plugin was ok on
8 of 60 chunks (``bench/fairness_bench.py``), the rest shed for overload.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from pathlib import Path

from companion import defaults
from companion.testing import Stack, children_of, hostile_plugins, process_alive
from eventstore.names import ChunkKey
from substreams.results import ResultRecord

EPOCH = 1_700_013_000
#: Epochs of twice as many chunks as the companion has chunk threads (2 workers x 2), each
#: written once the previous one's good results are stored: what the node can keep up
#: with on a loaded machine, so that a shed result says the plugins were unfair, not
#: that the machine was slow. 104 chunks: at most one may be other than ok.
PER_EPOCH = 8
CHUNKS = 13 * PER_EPOCH

GOOD = """
from substreams import substream

@substream(name="good", types=["t"])
def good(events, ctx):
    return {"n": len(events), "sum": sum(e.get("i", 0) for e in events)}
"""

# The hostile set of issue 13. The two that only a deadline stops declare half a second
# (the platform's default is 1 s) to keep the test short; the 100 MB result may use the
# memory it needs to be built, so it is refused for its size (or times out: below).
HOSTILE = hostile_plugins(timeout_s=0.5)

#: Each hostile plugin's status and what its error text starts with when it ran.
EXPECTED = {
    "h_loop": ("timeout", "timeout:"),
    "h_sleep": ("timeout", "timeout:"),
    "h_10gb": ("killed", "memory:"),
    "h_exit": ("killed", "killed: exited with code 3"),
    "h_segv": ("killed", "killed: died of signal SIGSEGV"),
    "h_raise": ("error", "exception: RuntimeError"),
    "h_100mb": ("error", "too_large:"),
    "h_forks": ("error", "exception: SandboxViolation: sandbox: os.fork"),
    "h_put": ("error", "exception: URLError: <urlopen error sandbox: socket"),
    "h_write": ("error", "exception: SandboxViolation: sandbox: opening"),
}


def left_running(workers: list[int]) -> list[int]:
    """The workers' children that are not their fork server, and the fork servers'
    children (the sandboxed runs): none once every chunk is answered."""
    left = []
    for worker in workers:
        for pid in children_of(worker):
            try:
                server = "forkserver_process" in Path(f"/proc/{pid}/cmdline").read_text()
            except OSError:
                continue  # gone
            left += children_of(pid) if server else [pid]
    return left


def test_the_hostile_set_costs_a_good_plugin_beside_it_no_results(
    stack_factory: Callable[..., Stack],
) -> None:
    # The scheduling settings are the defaults; start_stack only polls faster.
    stack = stack_factory(plugins={"good.py": GOOD, "hostile.py": HOSTILE})
    master = stack.companion.pid
    assert master is not None
    deadline = time.monotonic() + 30
    while len(children_of(master)) < defaults.WORKERS and time.monotonic() < deadline:
        time.sleep(0.05)  # /healthz answered as soon as one worker was up
    workers = children_of(master)
    assert len(workers) == defaults.WORKERS
    keys: list[ChunkKey] = []
    good: dict[ChunkKey, ResultRecord] = {}
    for e in range(CHUNKS // PER_EPOCH):
        chunks = {("t", "", c): [{"i": i} for i in range(50)] for c in range(PER_EPOCH)}
        epoch = stack.write_epoch(EPOCH + e, "dc1", chunks)
        good |= stack.wait_results("good", epoch, timeout_s=60)
        keys += epoch

    not_ok = {k.format(): (r.status, r.error) for k, r in good.items() if r.status != "ok"}
    assert len(not_ok) <= CHUNKS // 100, not_ok  # >= 99 % ok
    assert all(r.result == {"n": 50, "sum": 1225} for r in good.values() if r.status == "ok")

    disabled: set[str] = set()
    for name, (status, starts) in EXPECTED.items():
        results = stack.wait_results(name, keys, timeout_s=60)
        why = collections.Counter(_why(name, status, starts, r) for r in results.values())
        # Only these; a chunk shed for overload would have cost the good plugin too.
        assert set(why) <= {"ran", "timeout", "disabled", "quarantined", "overload"}, (name, why)
        assert why["overload"] <= CHUNKS // 100, (name, why)
        # Recorded with its right status (a run that overslept its deadline on a
        # loaded machine is a timeout, whatever it would have done); its runs are
        # bounded by the failures that disable it plus the runs already started by
        # then: its first runs, one per chunk thread, then one at a time per worker
        # in its lane, which reads the marker before each.
        runs = why["ran"] + why["timeout"]
        # (Making and packing 100 MB takes ~0.3 CPU s: on a machine at load 25 its 1 s
        # is not enough, and it times out instead of being refused for its size.)
        assert why["ran"] >= 1 or (name == "h_100mb" and runs >= 1), (name, why)
        bound = defaults.DISABLE_AFTER + defaults.THREADS * len(workers) - 1
        assert runs <= bound, (name, why)
        if runs >= defaults.DISABLE_AFTER:
            disabled.add(name)

    # The companion stayed healthy: same workers, nothing left running, nothing escaped.
    assert {p.stem for p in (stack.root / "state" / "disabled").glob("*.json")} == disabled
    assert len(disabled) >= len(EXPECTED) // 2  # most fail fast (the slow ones may not)
    assert stack.companion.request("GET", "/healthz")[0] == 200
    assert children_of(master) == workers
    deadline = time.monotonic() + 10
    while left_running(workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_running(workers) == []
    # each worker's one child is its fork server (companion/forkserver.py)
    assert [len(children_of(w)) for w in workers] == [1 for _ in workers]
    assert all(process_alive(w) for w in workers)
    assert stack.riak.stats()["devnode_hook_failed_total"] == 0


def _why(name: str, status: str, starts: str, record: ResultRecord) -> str:
    """What a hostile plugin's result says: it ran and failed as it should (``ran``),
    it ran out of time (``timeout``), it was disabled, quarantined, or shed for overload."""
    error = record.error or ""
    if record.status == status and error.startswith(starts):
        return "ran"
    if record.status == "timeout":
        return "timeout"
    if (record.status, error) == ("error", "disabled: on this node"):
        return "disabled"
    if record.status == "shed" and error.startswith(f"shed: quarantined: {name} runs apart"):
        return "quarantined"
    if record.status == "shed" and error.startswith("shed: overload: "):
        return "overload"
    return f"{record.status}: {error}"
