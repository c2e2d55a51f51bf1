"""The whole system's state, as ``riak-events status`` shows it, from HTTP and ZooKeeper.

It asks what every daemon already serves and imports none of their daemons' code (only
the shared contracts: the ZooKeeper paths, the substream registry's reading of the live
companions):

- each Riak node: ``GET /ping``; ``GET /stats`` for the post-commit hook's counters,
  which only the devnode serves (``devnode_hook_*``): on Riak they are read with
  ``riak eval "riak_events_notifier:status()."`` (erlang_hooks/README.md);
- each companion: ``GET /v1/status`` (per substream: versions loaded, runs, failures,
  p50/p99, last error, and the 10 s series of runs and failures of the last 10 minutes;
  disabled markers; the plugins that did not load and the registry plugins rejected);
- each relocator: ``GET /status`` (backlog per cluster, open events) and ``GET /metrics``
  (``relocator_epoch_lag_seconds``: from an epoch's end to its metadata committed);
- ZooKeeper (optional): the live companions ``<root>/companions/<node>`` (JSON naming
  their URLs and their Riak nodes) and the registered relocators ``<root>/relocators/<id>``
  (an id only: their ops URL must be given).

A substream is ``failing`` when more than ``max_failure_rate`` of its runs failed in the
last ``failure_window_s`` (from the companion's series of runs and failures per 10 s;
a shed result is not a run of the plugin), or when it failed and never ran ok.

Failure semantics: nothing raises for a daemon that is down or answers badly: its entry
says ``up: false`` and ``error``, and :func:`problems` lists it; only an unreachable
ZooKeeper that was asked for is an entry of its own. Every request has ``timeout_s``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from eventstore.statusjson import get_json
from substreams.registry import live_companions

__all__ = ["collect", "problems"]

#: A relocator's backlog for a cluster is a problem from this many epochs on (a push
#: cycle or two of backlog is the normal state of a running relocator).
BACKLOG_WARN_EPOCHS = 10

#: ``status``'s default window for a substream's failure rate, seconds: all a companion
#: keeps (companion.defaults: 60 points of 10 s).
FAILURE_WINDOW_S = 600.0

#: ``status``'s default: a substream that failed more than this fraction of its runs in
#: the window is a problem.
MAX_FAILURE_RATE = 0.01

#: The hook's counters in the devnode's ``/stats``, shown without their prefix.
_HOOK_PREFIX = "devnode_hook_"


def _node(url: str, timeout_s: float) -> dict[str, Any]:
    entry: dict[str, Any] = {"url": url, "up": False, "error": None, "hook": None}
    try:
        ping = httpx.get(f"{url}/ping", timeout=timeout_s)
    except httpx.HTTPError as e:
        entry["error"] = f"unreachable ({type(e).__name__})"
        return entry
    if ping.status_code != 200:
        entry["error"] = f"does not answer as Riak (GET /ping: HTTP {ping.status_code})"
        return entry
    entry["up"] = True
    stats, error = get_json(f"{url}/stats", timeout_s=timeout_s)
    if isinstance(stats, dict) and any(k.startswith(_HOOK_PREFIX) for k in stats):
        entry["kind"] = "devnode"
        entry["hook"] = {
            k.removeprefix(_HOOK_PREFIX): v for k, v in stats.items() if k.startswith(_HOOK_PREFIX)
        }
    else:
        entry["kind"] = "riak"
        entry["hook_note"] = (
            "hook counters are not served over HTTP by Riak: "
            'riak eval "riak_events_notifier:status()." on the node'
        )
        if error:
            entry["hook_note"] += f" (/stats: {error})"
    return entry


def _probe(entry: dict[str, Any], path: str, timeout_s: float) -> dict[str, Any] | None:
    """The JSON object a daemon serves at ``path`` of ``entry["url"]``, ``entry["up"]``
    then set; or None, ``entry["error"]`` saying why."""
    view, error = get_json(f"{entry['url']}{path}", timeout_s=timeout_s)
    if not isinstance(view, dict):
        entry["error"] = error or f"unexpected {path}"
        return None
    entry["up"] = True
    return view


def _window(info: dict[str, Any], window_s: float, now: float) -> dict[str, Any]:
    """Runs and failures of the series' points that start in the last ``window_s``."""
    runs = failures = 0
    for bucket, point in info.get("series", {}).items():
        if float(bucket) >= now - window_s:
            runs += int(point[0])
            failures += int(point[1])
    return {"s": window_s, "runs": runs, "failures": failures}


def _substream_state(
    name: str, info: dict[str, Any], disabled: dict[str, Any], window: dict[str, Any],
    max_failure_rate: float,
) -> str:  # fmt: skip
    if name in disabled:
        return "disabled"
    failures = sum(int(n) for n in info.get("failures", {}).values())
    if info.get("runs", 0) and failures and not info.get("ok"):
        return "failing"
    if window["failures"] and window["failures"] > max_failure_rate * max(
        window["runs"], window["failures"]
    ):
        return "failing"
    return "ok" if info.get("runs", 0) else "idle"


def _companion(
    url: str,
    timeout_s: float,
    *,
    failure_window_s: float = FAILURE_WINDOW_S,
    max_failure_rate: float = MAX_FAILURE_RATE,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"url": url, "up": False, "error": None, "substreams": {}}
    view = _probe(entry, "/v1/status", timeout_s)
    if view is None:
        return entry
    entry["workers"] = view.get("workers")
    entry["queue_depth"] = view.get("queue_depth")
    # Plugins that did not load: named where the companion says which (load_failed),
    # else only counted per worker (load_failures).
    entry["load_failed"] = view.get("load_failed")
    entry["load_failures"] = max(view.get("load_failures") or [0])
    entry["rejected"] = (view.get("registry") or {}).get("rejected", {})
    disabled = view.get("disabled", {})
    stats = view.get("substreams", {})
    now = time.time()
    for name in sorted(set(view.get("loaded", {})) | set(stats) | set(disabled)):
        info = stats.get(name, {})
        window = _window(info, failure_window_s, now)
        entry["substreams"][name] = {
            "state": _substream_state(name, info, disabled, window, max_failure_rate),
            "window": window,
            "versions": sorted(view.get("loaded", {}).get(name, {})),
            "runs": info.get("runs", 0),
            "ok": info.get("ok", 0),
            "failures": info.get("failures", {}),
            "shed": info.get("shed", 0),
            "p50_ms": info.get("p50_ms"),
            "p99_ms": info.get("p99_ms"),
            "last_error": info.get("last_error"),
            "disabled": disabled.get(name),
        }
    return entry


def _lag(metrics_text: str) -> dict[str, float | None]:
    """Mean and p99 (bucket upper bound) of ``relocator_epoch_lag_seconds``."""
    buckets: list[tuple[float, float]] = []
    total = count = 0.0
    for family in text_string_to_metric_families(metrics_text):
        if family.name != "relocator_epoch_lag_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                buckets.append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_sum"):
                total = sample.value
            elif sample.name.endswith("_count"):
                count = sample.value
    if not count:
        return {"mean_s": None, "p99_s": None}
    p99 = next((le for le, n in sorted(buckets) if n >= 0.99 * count), math.inf)
    return {"mean_s": total / count, "p99_s": None if math.isinf(p99) else p99}


def _relocator(url: str, timeout_s: float) -> dict[str, Any]:
    entry: dict[str, Any] = {"url": url, "up": False, "error": None}
    status = _probe(entry, "/status", timeout_s)
    if status is None:
        return entry
    entry["id"] = status.get("zk_id")
    entry["backlog"] = status.get("backlog", {})
    entry["events_pushed"] = status.get("events_pushed", {})
    entry["open_events"] = status.get("open_events")
    try:
        metrics = httpx.get(f"{url}/metrics", timeout=timeout_s).text
        entry["lag"] = _lag(metrics)
    except (httpx.HTTPError, ValueError) as e:
        entry["lag"] = {"mean_s": None, "p99_s": None, "error": type(e).__name__}
    return entry


def _from_zookeeper(hosts: str, root: str, timeout_s: float) -> dict[str, Any]:
    """What ZooKeeper says is live: companions (with URLs) and relocator ids."""
    try:
        from kazoo.client import KazooClient  # noqa: PLC0415 (optional dependency)
    except ImportError:
        return {
            "hosts": hosts,
            "ok": False,
            "error": "kazoo not installed (riak-events[zookeeper])",
        }
    client = KazooClient(hosts=hosts, timeout=timeout_s)
    try:
        client.start(timeout=timeout_s)
    except Exception as e:  # kazoo raises its own timeout and connection errors
        client.close()
        return {"hosts": hosts, "ok": False, "error": f"unreachable ({type(e).__name__})"}
    try:
        companions = live_companions(client, root)
        path = f"{root.rstrip('/')}/relocators"
        relocators = sorted(client.get_children(path)) if client.exists(path) else []
    finally:
        client.stop()
        client.close()
    return {"hosts": hosts, "root": root, "ok": True, "companions": companions,
            "relocators": relocators}  # fmt: skip


def collect(
    *,
    nodes: Sequence[str] = (),
    companions: Sequence[str] = (),
    relocators: Sequence[str] = (),
    zookeeper: str | None = None,
    zk_root: str = "/riak-events",
    timeout_s: float = 3.0,
    failure_window_s: float = FAILURE_WINDOW_S,
    max_failure_rate: float = MAX_FAILURE_RATE,
    sources: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The system's status (see the module docstring).

    Args:
        nodes, companions, relocators: base URLs given by the operator.
        zookeeper: hosts to find live companions (and their Riak nodes) and relocators.
        zk_root: our root znode.
        timeout_s: per request and for the ZooKeeper connection, seconds.
        failure_window_s: the window of a substream's failure rate, seconds.
        max_failure_rate: above this fraction of failed runs in the window, a
            substream is ``failing``.
        sources: ``"nodes"``, ``"companions"``, ``"relocators"`` -> where those URLs
            came from (``flag``, ``env``, ``context``, ``default``); each entry's
            ``source`` (default ``"given"``).

    Returns:
        ``{"nodes": [...], "companions": [...], "relocators": [...], "zookeeper": ...}``.
    """
    given = dict(sources or {})
    zk = _from_zookeeper(zookeeper, zk_root, timeout_s) if zookeeper else None
    node_urls = [u.rstrip("/") for u in nodes]
    node_sources = {u: given.get("nodes", "given") for u in node_urls}
    companion_urls = {u.rstrip("/"): given.get("companions", "given") for u in companions}
    for node, znode in (zk or {}).get("companions", {}).items():
        endpoints = znode.get("endpoints", {})
        if isinstance(endpoints.get("companion"), str):
            companion_urls.setdefault(endpoints["companion"].rstrip("/"), f"zookeeper {node}")
        riak = endpoints.get("riak", [])
        for url in [riak] if isinstance(riak, str) else riak:
            if url.rstrip("/") not in node_urls:
                node_urls.append(url.rstrip("/"))
                node_sources[url.rstrip("/")] = f"zookeeper {node}"
    rules = {"failure_window_s": failure_window_s, "max_failure_rate": max_failure_rate}
    report: dict[str, Any] = {
        "nodes": [{**_node(u, timeout_s), "source": node_sources[u]} for u in node_urls],
        "companions": [
            {**_companion(u, timeout_s, **rules), "source": source}
            for u, source in companion_urls.items()
        ],
        "relocators": [
            {**_relocator(u.rstrip("/"), timeout_s), "source": given.get("relocators", "given")}
            for u in relocators
        ],
        "rules": rules,
        "zookeeper": None if zk is None else {k: v for k, v in zk.items() if k != "companions"},
    }
    seen = {r.get("id") for r in report["relocators"]}
    for rid in (zk or {}).get("relocators", []):
        if rid not in seen:
            report["relocators"].append(
                {"url": None, "id": rid, "up": None,
                 "error": "registered in ZooKeeper; pass --relocator URL for its status"}
            )  # fmt: skip
    return report


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g}m" if seconds >= 60 else f"{seconds:g}s"


def _substream_problem(name: str, s: dict[str, Any], rules: dict[str, Any]) -> str:
    if s["state"] == "disabled":
        reason = (s.get("disabled") or {}).get("reason")
        return f"substream {name} disabled" + (f" ({reason})" if reason else "")
    w = s.get("window") or {}
    if w.get("failures"):
        rate = w["failures"] / max(w["runs"], w["failures"])
        what = (
            f"substream {name} failing: {w['failures']} of {w['runs']} runs failed in the "
            f"last {_minutes(w['s'])} ({rate:.1%} > {rules.get('max_failure_rate', 0):.1%})"
        )
    else:
        what = f"substream {name} failing: no run ok"
    last = s.get("last_error")
    return what + (f"; last error: {str(last).splitlines()[0][:160]}" if last else "")


def _plugin_problems(c: dict[str, Any]) -> list[str]:
    """The plugins a companion did not load, and the registry plugins it rejected."""
    found = []
    named = c.get("load_failed")
    if named:
        found += [f"plugin {f['origin']} failed to load: {f['reason']}" for f in named]
    elif c.get("load_failures"):
        found.append(f"{c['load_failures']} plugin(s) failed to load (see its status page)")
    for file, info in sorted((c.get("rejected") or {}).items()):
        found.append(
            f"registry plugin {file} version {info.get('version')} rejected: {info.get('reason')}"
        )
    return found


def problems(report: dict[str, Any]) -> list[str]:
    """One line per thing that is wrong: a daemon down, a substream disabled or failing
    (over the report's ``rules``), a plugin that failed to load or was rejected, a
    backlog, ZooKeeper unreachable."""
    found = []
    rules = report.get("rules", {})
    zk = report.get("zookeeper")
    if zk is not None and not zk.get("ok"):
        found.append(f"zookeeper {zk['hosts']}: {zk.get('error')}")
    for node in report["nodes"]:
        if not node["up"]:
            found.append(f"node {node['url']}: {node['error']}")
    for c in report["companions"]:
        if not c["up"]:
            found.append(f"companion {c['url']}: {c['error']}")
        for name, s in c["substreams"].items():
            if s["state"] in ("disabled", "failing"):
                found.append(f"companion {c['url']}: {_substream_problem(name, s, rules)}")
        found += [f"companion {c['url']}: {line}" for line in _plugin_problems(c)]
    for r in report["relocators"]:
        if r["up"] is False:
            found.append(f"relocator {r['url']}: {r['error']}")
        for cluster, n in (r.get("backlog") or {}).items():
            if n >= BACKLOG_WARN_EPOCHS:
                found.append(f"relocator {r['url']}: backlog of {n} epochs for {cluster}")
    # One problem, one line (a plugin's error may carry its traceback's lines).
    return [" / ".join(part.strip() for part in line.splitlines()) for line in found]
