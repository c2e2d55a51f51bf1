"""tail across a relocator restart: a real relocator stores what a producer sends, is
killed (SIGKILL) and restarted mid-stream while a tail follows the dc; the tail itself is
restarted from its position file too. Every event the relocator acknowledged is
delivered once: nothing lost, nothing repeated."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from consumer_lib import EventsClient
from devnode.testing import DevnodeProcess
from relocator.testing import AckedSender, RelocatorProcess, relocator_process

#: Seconds behind real time: above the relocator's restart and recovery time, so a
#: restarted relocator's late pushes land before their epochs are read.
LAG_S = 4.0


def test_tail_across_a_relocator_restart_loses_and_repeats_nothing(
    tmp_path: Path, session_devnode: DevnodeProcess, dc: str, relocators: list[RelocatorProcess]
) -> None:
    relocator, tcp = relocator_process(tmp_path, {"a": session_devnode.url})
    relocators.append(relocator)
    position = tmp_path / "tail.json"
    start = int(time.time())
    delivered: list[int] = []
    stop_first = threading.Event()

    def follow(client: EventsClient, stop: threading.Event | None, until: list[int]) -> None:
        with client.tail(
            dc, position=position, start=start, lag_s=LAG_S, late_wait_s=3.0, poll_s=0.1
        ) as tail:
            tail.until = until[0] if until else None
            for epoch in tail:
                delivered.extend(e["id"] for e in epoch.events)
                if stop is not None and stop.is_set():
                    break
                if until:
                    tail.until = until[0]

    with EventsClient([session_devnode.url]) as client:
        first = threading.Thread(target=follow, args=(client, stop_first, []), daemon=True)
        first.start()
        relocator.start()
        sender = AckedSender(tcp, dc, first_id=0).start()
        time.sleep(2.0)
        relocator.kill()  # a crash mid-stream
        sender.stop()
        acked = list(sender.acked)
        stop_first.set()  # the consumer restarts too
        first.join(30)
        assert not first.is_alive()
        relocator.start()
        sender = AckedSender(tcp, dc, first_id=sender.next_id).start()
        until: list[int] = []
        second = threading.Thread(target=follow, args=(client, None, until), daemon=True)
        second.start()
        time.sleep(2.0)
        sender.stop()
        acked += sender.acked
        until.append(int(time.time()) + 2)
        second.join(LAG_S + 20)
        assert not second.is_alive(), "tail did not reach the end"
    assert len(acked) > 200, "too few events acknowledged to test anything"
    counts = Counter(delivered)
    repeated = [i for i, n in counts.items() if n > 1]
    lost = set(acked) - set(counts)
    assert not lost, f"{len(lost)} acknowledged events never delivered, e.g. {sorted(lost)[:5]}"
    assert not repeated, f"{len(repeated)} events delivered twice, e.g. {repeated[:5]}"
