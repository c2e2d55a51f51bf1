"""The ZooKeeper state file: written by two threads of the master at once."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from companion.zkstate import STATE_FILE, write_zookeeper_state


def test_two_threads_rewriting_the_state_file_never_fail(tmp_path: Path) -> None:
    # kazoo's connection thread and the refresh thread both publish the state; with one
    # temporary name per process, one thread renamed the other's file away (OSError).
    errors: list[OSError] = []

    def publish(who: str) -> None:
        for i in range(1500):
            try:
                write_zookeeper_state(tmp_path, {"who": who, "i": i})
            except OSError as e:
                errors.append(e)

    threads = [threading.Thread(target=publish, args=(w,)) for w in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert state["i"] == 1499 and state["configured"] is True
    assert [p.name for p in tmp_path.iterdir()] == [STATE_FILE]
