"""Logs and metrics people can use (issue 14.6), checked on a real run.

One module-scoped run: a devnode whose hook drives a companion started as the README
starts it (``riak-events --log-format json companion``, two gunicorn workers, one plugin
that works and one that does not import), a relocator (``python -m relocator`` with
``RIAK_EVENTS_LOG_FORMAT=json``) pushing into the devnode, both on a real ZooKeeper,
and events sent over TCP. Each daemon's ``/metrics`` is scraped twice while events
flow; then everything is stopped and the tests read what was recorded:

- every line the companion (master and workers, gunicorn's records included) and the
  relocator wrote is one JSON object;
- the broken plugin's error is logged in full by one worker, as one line by the other;
- no ``_created`` sample in any daemon's exposition;
- every metric name the alert rules, their promtool tests and the Grafana dashboard use
  exists in the real expositions (or in the consumer library's registry);
- ``promtool check rules`` and ``promtool test rules`` pass, and the recorded series
  replayed through promtool (at the rates measured between the two scrapes) fire no
  alert: a healthy stack is quiet.
"""

from __future__ import annotations

import json
import logging
import math
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import companion.metrics
import consumer_lib.store
import consumer_lib.substream
import consumer_lib.tail
from companion.testing import CompanionProcess, start_stack
from consumer_lib import EventsClient
from devnode.testing import DevnodeProcess, free_port
from eventstore.riak import Retry, RiakClient
from fleet.harness import environment_without
from relocator.testing import AckedSender, ZooKeeperProcess, relocator_process
from substreams.examples import event_counts

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "riak-events-rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "riak-events-rules.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "riak-events.json"
RIAK_EVENTS = Path(sys.executable).parent / "riak-events"
BROKEN_PLUGIN = "import no_such_module_for_observability\n"
#: A metric name of ours, wherever it appears (expressions, series, descriptions).
METRIC_NAME = re.compile(r"\b(?:relocator|companion|devnode|consumer)_[a-z0-9_]*[a-z0-9]\b")
SCRAPE_GAP_S = 4.0


class JsonLogCompanion(CompanionProcess):
    """The companion as the README starts it: ``riak-events --log-format json companion``."""

    def start(self) -> JsonLogCompanion:
        argv = [str(RIAK_EVENTS), "--log-format", "json", "companion"]
        argv += ["--config", str(self.config), "--listen", f"{self.host}:{self.port}"]
        self._launch(
            argv,
            healthy=lambda: self.request("GET", "/healthz")[0] == 200,
            timeout_s=30.0,
            env=environment_without(("RIAK_EVENTS_", "PROMETHEUS_MULTIPROC_DIR")),
        )
        return self


@dataclass
class Run:
    """What a real run left: two scrapes per daemon, the logs, the workers' count."""

    scrapes: dict[str, tuple[str, str]]  # daemon -> (first, second) /metrics text
    logs: dict[str, str]  # daemon -> its whole log (stdout and stderr)
    workers: int


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"not {what} within {timeout_s}s")


def _sample(text: str, name: str, labels: dict[str, str]) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperProcess
) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("observability")
    zk_root = f"/t-{uuid.uuid4().hex[:12]}"
    stack = start_stack(
        root / "stack",
        plugins={
            "event_counts.py": Path(event_counts.__file__).read_text(),
            "broken.py": BROKEN_PLUGIN,
        },
        zk_hosts=zookeeper_server.hosts,
        zk_root=zk_root,
    )
    stack.companion.stop()  # started by the harness as python -m companion: start it anew
    companion = JsonLogCompanion(stack.companion.config, port=stack.companion.port)
    companion.log_path = root / "companion-json.log"  # not the first one's log
    relocator, tcp = relocator_process(
        root,
        {"main": stack.devnode.url},
        name="relocator",
        data_dir=root / "relocator",
        env={"RIAK_EVENTS_LOG_FORMAT": "json"},
        zookeeper=(zookeeper_server.hosts, zk_root),
    )
    dc = f"t{uuid.uuid4().hex[:10]}"
    try:
        companion.start()
        relocator.start()
        sender = AckedSender(tcp, dc, first_id=0).start()

        def scrape() -> dict[str, str]:
            return {
                "relocator": relocator.metrics(),
                "companion": companion.request("GET", "/metrics")[1].decode(),
                "devnode": _devnode_metrics(stack.devnode.url),
            }

        def processing() -> bool:
            text = scrape()["companion"]
            return _sample(text, "companion_chunks_total", {"outcome": "processed"}) > 0

        _wait(processing, 60.0, "processing chunks")
        first = scrape()
        time.sleep(SCRAPE_GAP_S)
        second = scrape()
        sender.stop()
        assert sender.acked, "the relocator acknowledged nothing"
    finally:
        relocator.stop()
        companion.stop()
        stack.devnode.stop()
    yield Run(
        scrapes={d: (first[d], second[d]) for d in first},
        logs={"companion": companion.log_text(), "relocator": relocator.log_text()},
        workers=2,
    )


def _devnode_metrics(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as r:
        text: str = r.read().decode()
    return text


def _json_lines(text: str) -> list[dict[str, object]]:
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            raise AssertionError(f"line {number} is not JSON: {line!r}") from None
        assert isinstance(record, dict), line
        assert {"ts", "level", "logger", "msg", "pid"} <= record.keys(), line
        records.append(record)
    return records


@pytest.mark.parametrize("daemon", ["companion", "relocator"])
def test_every_log_line_is_json(run: Run, daemon: str) -> None:
    records = _json_lines(run.logs[daemon])
    assert records
    if daemon == "companion":
        # gunicorn's own records, the master's and every worker's, in the same format.
        gunicorn = [r for r in records if r["logger"] == "gunicorn.error"]
        master = {r["pid"] for r in gunicorn if str(r["msg"]).startswith("Starting gunicorn")}
        booted = {r["pid"] for r in gunicorn if str(r["msg"]).startswith("Booting worker")}
        assert len(master) == 1 and len(booted) == run.workers and not master & booted
        assert {r["pid"] for r in records if r["logger"] == "companion.app"} == booted


def test_a_plugin_failure_is_logged_in_full_once_per_node(run: Run) -> None:
    records = _json_lines(run.logs["companion"])
    about = [str(r["msg"]) for r in records if "broken.py" in str(r["msg"])]
    full = [m for m in about if "no_such_module_for_observability" in m]
    brief = [m for m in about if "logged in full by pid" in m]
    assert len(full) == 1, about
    assert len(brief) == run.workers - 1, about
    assert all("\n" not in m and "Traceback" not in m for m in brief)


def test_no_created_samples_in_any_daemon(run: Run) -> None:
    for daemon, (_, text) in run.scrapes.items():
        names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
        assert names, daemon
        assert not [n for n in names if n.endswith("_created")], daemon
    # Not vacuous: the counters are there, only their _created twins are gone.
    assert "relocator_events_received_total" in run.scrapes["relocator"][1]
    assert "companion_key_groups_total" in run.scrapes["companion"][1]
    assert "devnode_puts_total" in run.scrapes["devnode"][1]


#: A gunicorn worker whose app fails to start, as each worker of a node would.
FAILING_WORKER = """
import logging, sys
from pathlib import Path
from gunicorn.config import Config
from companion.logging_config import GunicornLogger
from eventstore.logformat import configure
from eventstore.logonce import OncePerDirectory

configure("INFO", "json")
for handler in logging.getLogger().handlers:
    handler.addFilter(OncePerDirectory(Path(sys.argv[1])))
log = GunicornLogger(Config())
try:
    raise RuntimeError("riak node http://127.0.0.1:1 refused the connection")
except RuntimeError as e:
    log.exception("Worker exception: %s", e)
"""


def test_gunicorn_tracebacks_are_json_and_once_per_node(tmp_path: Path) -> None:
    markers = tmp_path / "logged-once"
    markers.mkdir()
    lines = []
    for _ in range(3):  # three workers of one node, one after the other
        done = subprocess.run(
            [sys.executable, "-c", FAILING_WORKER, str(markers)],
            capture_output=True,
            text=True,
            check=True,
            env=environment_without(),
        )
        lines += _json_lines(done.stderr)
    assert [r["logger"] for r in lines] == ["gunicorn.error"] * 3
    assert "RuntimeError: riak node" in str(lines[0]["traceback"])
    first = lines[0]["pid"]
    for later in lines[1:]:
        assert "traceback" not in later
        assert later["msg"] == (
            "Worker exception: riak node http://127.0.0.1:1 refused the connection"
            f" (logged in full by pid {first})"
        )


def _exposed_names(texts: list[str]) -> set[str]:
    """Every sample name the expositions carry, and those a family declares even before
    its first labelled child exists (``relocator_events_dropped_total{reason}``)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    names: set[str] = set()
    for text in texts:
        for family in text_string_to_metric_families(text):
            names.update(s.name for s in family.samples)
            names.add(family.name)  # as text names it ("companion_substream_seconds")
            names.update(family.name + x for x in suffixes.get(family.type, ("",)))
    return names


def _declared_exposition() -> str:
    """The families the consumer library and the companion declare, children or not.

    The consumer's metrics live in the application's registry (no daemon serves them);
    the companion's multiprocess exposition shows a labelled family only once one of
    its series has a value (``companion_results_not_stored_total{substream}`` after a
    failed write), which a healthy run does not make.
    """
    assert consumer_lib.store.CHECKSUM_RETRIES and consumer_lib.tail.SKIPPED_TOTAL
    assert consumer_lib.substream.FALLBACK_TOTAL and companion.metrics.RESULTS_NOT_STORED
    return generate_latest(REGISTRY).decode()


@pytest.mark.parametrize("path", [RULES, RULE_TESTS, DASHBOARD], ids=lambda p: p.name)
def test_every_metric_name_used_exists_in_real_scrapes(run: Run, path: Path) -> None:
    exposed = _exposed_names([t for pair in run.scrapes.values() for t in pair])
    exposed |= _exposed_names([_declared_exposition()])
    used = set(METRIC_NAME.findall(path.read_text()))
    assert used
    assert not used - exposed, f"{path.name} uses names no daemon exposes: {used - exposed}"


def _promtool() -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed: apt-get install prometheus (make system-deps)")
    return promtool


def test_promtool_checks_the_rules_and_runs_their_unit_tests() -> None:
    promtool = _promtool()
    check = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS" in check.stdout
    tested = subprocess.run(
        [promtool, "test", "rules", str(RULE_TESTS)],
        capture_output=True,
        text=True,
        check=False,
        cwd=RULE_TESTS.parent,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_dashboard_is_valid_and_its_queries_parse(tmp_path: Path) -> None:
    promtool = _promtool()
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    graphs = [p for p in panels if p["type"] != "row"]
    assert len(graphs) >= 20 and all(p["targets"] for p in graphs)
    exprs = [t["expr"] for p in graphs for t in p["targets"]]
    # PromQL checked by promtool, each query as a recording rule (Grafana's
    # $__rate_interval stands for a duration).
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query{i}", "expr": e.replace("$__rate_interval", "5m")}
                    for i, e in enumerate(exprs)
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(json.dumps(rules))
    check = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr


def _series(run: Run, minutes: int) -> list[dict[str, str]]:
    """The recorded samples as promtool input series, one value a minute: counters grow
    at the rate measured between the two scrapes, gauges keep their last value."""
    out = []
    for daemon, (first, second) in run.scrapes.items():
        before = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(first)
            for s in f.samples
        }
        for family in text_string_to_metric_families(second):
            for s in family.samples:
                labels = {**s.labels, "job": daemon, "instance": f"{daemon}:1"}
                text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                value = s.value
                if math.isnan(value):  # no expansion notation for NaN in promtool
                    nans = " ".join(["NaN"] * minutes)
                    out.append({"series": f"{s.name}{{{text}}}", "values": nans})
                    continue
                grows = family.type in ("counter", "histogram") and not s.name.endswith("_created")
                old = before.get((s.name, tuple(sorted(s.labels.items()))), value)
                step = max(0.0, (value - old) / SCRAPE_GAP_S * 60) if grows else 0.0
                out.append({"series": f"{s.name}{{{text}}}", "values": f"{value}+{step}x{minutes}"})
    return out


def _alert_names() -> list[str]:
    return re.findall(r"^\s*- alert:\s*(\S+)\s*$", RULES.read_text(), re.MULTILINE)


def test_the_recorded_run_fires_no_alert(run: Run, tmp_path: Path) -> None:
    promtool = _promtool()
    alerts = _alert_names()
    assert len(alerts) >= 10
    minutes = 40
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": _series(run, minutes),
                "alert_rule_test": [
                    {"eval_time": f"{t}m", "alertname": name, "exp_alerts": []}
                    for name in alerts
                    for t in (15, 35)
                ],
            }
        ],
    }
    # JSON is YAML: promtool reads it as it is.
    path = tmp_path / "recorded.test.yml"
    path.write_text(json.dumps(test, indent=1))
    tested = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert tested.returncode == 0, tested.stdout[-5000:] + tested.stderr[-5000:]


def test_tail_reports_an_idle_dc_once_a_minute_and_says_what_it_awaits(
    session_devnode: DevnodeProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """150 epochs of an idle dc (no metadata), on a clock that runs as fast as the
    reads: a line at start, a summary when the first epoch is skipped, one a minute
    after that, and the rest when the tail is left."""
    now = [1_800_000_000.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    caplog.set_level(logging.DEBUG, logger="consumer_lib.tail")
    first = int(now[0]) - 1
    with (
        EventsClient([session_devnode.url]) as client,
        client.tail(
            f"idle{uuid.uuid4().hex[:8]}",
            start=first,
            end=first + 150,
            lag_s=0,
            late_wait_s=0,
            clock=lambda: now[0],
            sleep=sleep,
        ) as tail,
    ):
        assert all(epoch.skipped for epoch in tail)
    records = [r for r in caplog.records if r.name == "consumer_lib.tail"]
    info = [r.getMessage() for r in records if r.levelno == logging.INFO]
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(info) == 1 and f"waiting for epoch {first} (lag 0 s" in info[0]
    assert [r.levelno for r in records].count(logging.DEBUG) == 150  # one per epoch
    spans = [
        re.search(r"no metadata for (\d+) epoch\(s\) in \[(\d+), (\d+)\]", w) for w in warnings
    ]
    counts = [(int(m[1]), int(m[2]), int(m[3])) for m in spans if m]
    assert len(counts) == len(warnings) == 4
    assert counts[0] == (1, first, first)
    assert counts[1] == (60, first + 1, first + 60)
    assert counts[2] == (60, first + 61, first + 120)
    assert counts[3] == (29, first + 121, first + 149)  # said when the tail was left


def test_riak_client_logs_retries_at_debug_with_one_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A node that refuses every connection: each failed try at DEBUG, one WARNING."""
    dead = f"http://127.0.0.1:{free_port()}"
    caplog.set_level(logging.DEBUG, logger="eventstore.riak.client")
    with RiakClient([dead], retry=Retry(max_tries=4, delay_s=0.001, deadline_s=5)) as client:
        for _ in range(5):
            with pytest.raises(Exception, match="failed"):
                client.get("events", "events", "k")
    records = [r for r in caplog.records if r.name == "eventstore.riak.client"]
    assert [r.levelno for r in records].count(logging.DEBUG) == 20
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # the first failure, then the rest when the client closed
    assert warnings[0].startswith(f"riak: 1 failed tries on node {dead} in the last 0 s")
    assert warnings[1].startswith(f"riak: 19 failed tries on node {dead}")
    assert not [r for r in records if r.levelno == logging.INFO]
