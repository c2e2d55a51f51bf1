"""``riak-events status``: the whole system in one table, or JSON (``--json``).

    riak-events status                                    # the local defaults (dev up)
    riak-events status --zookeeper zk1:2181 --relocator http://reloc1:9141
    riak-events status --node http://riak1:8098 --companion http://riak1:5000 --json

Nodes (up, the hook's counters where served), companions (given, or the live ones in
ZooKeeper) with each substream's state and p50/p99, relocators with their backlog per
cluster and epoch lag, and what is wrong. With no option at all, the documented local
defaults are asked (devnode 8098, companion 5000, relocator 9141). Every option is also
an environment variable ``RIAK_EVENTS_STATUS_<OPTION>``.

Exit status: 0 nothing wrong, 1 something is (each problem one line on stderr).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import click

from eventstore.options import FlagEnvOption, check_node_urls, json_option
from eventstore.system_status import collect, problems

__all__ = ["format_report", "status"]

_LOCAL = {
    "nodes": ("http://127.0.0.1:8098",),
    "companions": ("http://127.0.0.1:5000",),
    "relocators": ("http://127.0.0.1:9141",),
}


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}"


def _s(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}s"


def format_report(report: dict[str, Any]) -> str:
    """The report as readable text: one block per kind of daemon."""
    lines = ["nodes:"]
    for n in report["nodes"]:
        if not n["up"]:
            lines.append(f"  {n['url']}  DOWN: {n['error']}")
            continue
        if n["hook"] is not None:
            hook = " ".join(f"{k.removesuffix('_total')} {v}" for k, v in sorted(n["hook"].items()))
            lines.append(f"  {n['url']}  up  {n['kind']}  hook: {hook}")
        else:
            lines.append(f"  {n['url']}  up  {n['kind']}  ({n['hook_note']})")
    lines.append("companions:")
    for c in report["companions"]:
        where = f"{c['url']} ({c['source']})"
        if not c["up"]:
            lines.append(f"  {where}  DOWN: {c['error']}")
            continue
        lines.append(f"  {where}  up  workers {c['workers']}  queue {c['queue_depth']}")
        header = f"    {'substream':<20} {'state':<9} {'version':<17} {'runs':>7} {'ok':>7}"
        lines.append(header + f" {'failed':>7} {'p50 ms':>8} {'p99 ms':>8}")
        for name, s in c["substreams"].items():
            failed = sum(s["failures"].values())
            version = ",".join(s["versions"]) or "-"
            lines.append(
                f"    {name:<20} {s['state']:<9} {version:<17} {s['runs']:>7} {s['ok']:>7}"
                f" {failed:>7} {_ms(s['p50_ms']):>8} {_ms(s['p99_ms']):>8}"
            )
    lines.append("relocators:")
    for r in report["relocators"]:
        name = f"{r['url'] or '(no URL)'}" + (f" ({r['id']})" if r.get("id") else "")
        if not r["up"]:
            lines.append(f"  {name}  {'DOWN' if r['up'] is False else 'unknown'}: {r['error']}")
            continue
        lag = r.get("lag", {})
        lines.append(
            f"  {name}  up  open events {r['open_events']}  epoch lag mean "
            f"{_s(lag.get('mean_s'))} p99 <= {_s(lag.get('p99_s'))}"
        )
        for cluster, backlog in sorted(r["backlog"].items()):
            pushed = r["events_pushed"].get(cluster, 0)
            lines.append(f"    cluster {cluster}: backlog {backlog} epochs, {pushed} events pushed")
    zk = report["zookeeper"]
    if zk is not None:
        state = "ok" if zk["ok"] else f"DOWN: {zk['error']}"
        lines.append(f"zookeeper {zk['hosts']}: {state}")
    return "\n".join(lines)


@click.command()
@click.option("--node", "nodes", multiple=True, cls=FlagEnvOption,
              help="A Riak node URL (repeat).")  # fmt: skip
@click.option("--companion", "companions", multiple=True, help="A companion URL (repeat).")
@click.option("--relocator", "relocators", multiple=True,
              help="A relocator's ops URL (metrics_listen; repeat).")  # fmt: skip
@click.option("--zookeeper", default=None, metavar="HOSTS",
              help="Find live companions, their nodes and relocators here.")  # fmt: skip
@click.option("--zk-root", default="/riak-events", show_default=True)
@click.option("--timeout-s", type=click.FloatRange(min=0.1), default=3.0, show_default=True,
              help="Per request, seconds.")  # fmt: skip
@json_option
def status(  # noqa: PLR0917 (one parameter per click option)
    nodes: tuple[str, ...],
    companions: tuple[str, ...],
    relocators: tuple[str, ...],
    zookeeper: str | None,
    zk_root: str,
    timeout_s: float,
    as_json: bool,
) -> None:
    """Show the whole system: nodes, hook, companions and substreams, relocators."""
    for noisy in ("httpx", "kazoo.client"):  # not a line per request or connection
        logging.getLogger(noisy).setLevel(logging.WARNING)
    nodes = check_node_urls(nodes)
    companions = check_node_urls(companions, param_hint="--companion")
    relocators = check_node_urls(relocators, param_hint="--relocator")
    if not (nodes or companions or relocators or zookeeper):
        nodes, companions, relocators = _LOCAL["nodes"], _LOCAL["companions"], _LOCAL["relocators"]
    report = collect(
        nodes=nodes,
        companions=companions,
        relocators=relocators,
        zookeeper=zookeeper,
        zk_root=zk_root,
        timeout_s=timeout_s,
    )
    found = problems(report)
    report["problems"] = found
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report))
    for line in found:
        click.echo(f"problem: {line}", err=True)
    if found:
        raise SystemExit(1)
