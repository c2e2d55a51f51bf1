"""``riak-events status``: the whole system in one table, or JSON (``--json``).

    riak-events status                                    # the local defaults (dev up)
    riak-events status --zookeeper zk1:2181 --relocator http://reloc1:9141
    riak-events status --node http://riak1:8098 --companion http://riak1:5000 --json

Nodes (up, the hook's counters where served), companions (given, or the live ones in
ZooKeeper) with each substream's state and p50/p99, relocators with their backlog per
cluster and epoch lag, and what is wrong. The addresses asked are those given (flags or
``RIAK_EVENTS_STATUS_<OPTION>``); with none given, the context's (``RIAK_EVENTS_NODE``...
or the context file ``dev up`` writes: ``eventstore/context.py``); with no context
either, the documented local defaults (devnode 8098, companion 5000, relocator 9141).
Each address is labelled with where it came from: flag, env, context, default, or the
ZooKeeper znode it was found in.

A problem (one ``problem:`` line each on stderr): a daemon down or answering badly; a
substream disabled, or failing more than ``--max-failure-rate`` (default 1%) of its runs
in the last ``--failure-window-s`` (default 600 s, all a companion keeps); a plugin file
or entry point that failed to load; a registry plugin a companion rejected; a relocator
backlog; ZooKeeper unreachable.

Exit status: 0 nothing wrong, 1 something is.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import click

from eventstore.options import FlagEnvOption, check_node_urls, json_option, option_source
from fleet.status import FAILURE_WINDOW_S, MAX_FAILURE_RATE, collect, problems

__all__ = ["format_report", "status"]

#: Where a value the operator gave comes from (a flag, or the command's own variable).
_GIVEN = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)

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
            lines.append(f"  {n['url']} ({n.get('source', 'given')})  DOWN: {n['error']}")
            continue
        where = f"{n['url']} ({n.get('source', 'given')})"
        if n["hook"] is not None:
            hook = " ".join(f"{k.removesuffix('_total')} {v}" for k, v in sorted(n["hook"].items()))
            lines.append(f"  {where}  up  {n['kind']}  hook: {hook}")
        else:
            lines.append(f"  {where}  up  {n['kind']}  ({n['hook_note']})")
    lines.append("companions:")
    for c in report["companions"]:
        where = f"{c['url']} ({c['source']})"
        if not c["up"]:
            lines.append(f"  {where}  DOWN: {c['error']}")
            continue
        lines.append(f"  {where}  up  workers {c['workers']}  queue {c['queue_depth']}")
        header = f"    {'substream':<20} {'state':<9} {'version':<17} {'runs':>7} {'ok':>7}"
        lines.append(header + f" {'failed':>7} {'shed':>7} {'p50 ms':>8} {'p99 ms':>8}")
        for name, s in c["substreams"].items():
            # The plugin's failures; a shed result (it did not run) is counted apart.
            failed = sum(n for kind, n in s["failures"].items() if kind != "shed")
            shed = s.get("shed", 0) + s["failures"].get("shed", 0)
            version = ",".join(s["versions"]) or "-"
            lines.append(
                f"    {name:<20} {s['state']:<9} {version:<17} {s['runs']:>7} {s['ok']:>7}"
                f" {failed:>7} {shed:>7} {_ms(s['p50_ms']):>8} {_ms(s['p99_ms']):>8}"
            )
    lines.append("relocators:")
    for r in report["relocators"]:
        name = f"{r['url'] or '(no URL)'}" + (f" ({r['id']})" if r.get("id") else "")
        name += f" ({r['source']})" if r.get("source") else ""
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
@click.option("--failure-window-s", type=click.FloatRange(min=10, max=FAILURE_WINDOW_S),
              default=FAILURE_WINDOW_S, show_default=True,
              help="A substream's failure rate is over this many last seconds.")  # fmt: skip
@click.option("--max-failure-rate", type=click.FloatRange(min=0, max=1),
              default=MAX_FAILURE_RATE, show_default=True,
              help="A substream failing more than this fraction of its runs in the window "
              "is a problem.")  # fmt: skip
@json_option
@click.pass_context
def status(  # noqa: PLR0917 (one parameter per click option)
    ctx: click.Context,
    nodes: tuple[str, ...],
    companions: tuple[str, ...],
    relocators: tuple[str, ...],
    zookeeper: str | None,
    zk_root: str,
    timeout_s: float,
    failure_window_s: float,
    max_failure_rate: float,
    as_json: bool,
) -> None:
    """Show the whole system: nodes, hook, companions and substreams, relocators."""
    for noisy in ("httpx", "kazoo.client"):  # not a line per request or connection
        logging.getLogger(noisy).setLevel(logging.WARNING)
    where: dict[str, Any] = {"nodes": nodes, "companions": companions,
                             "relocators": relocators, "zookeeper": zookeeper}  # fmt: skip
    sources = {key: option_source(ctx, key, key) for key in where}
    given = {k for k, v in where.items() if v and ctx.get_parameter_source(k) in _GIVEN}
    if given:  # addresses given: ask those alone, not the context's others too
        where = {k: v if k in given else None for k, v in where.items()}
    nodes = check_node_urls(where["nodes"] or ())
    companions = check_node_urls(where["companions"] or (), param_hint="--companion")
    relocators = check_node_urls(where["relocators"] or (), param_hint="--relocator")
    zookeeper = where["zookeeper"]
    if not (nodes or companions or relocators or zookeeper):
        nodes, companions, relocators = _LOCAL["nodes"], _LOCAL["companions"], _LOCAL["relocators"]
        sources = dict.fromkeys(sources, "default")
    report = collect(
        nodes=nodes,
        companions=companions,
        relocators=relocators,
        zookeeper=zookeeper,
        zk_root=zk_root,
        timeout_s=timeout_s,
        failure_window_s=failure_window_s,
        max_failure_rate=max_failure_rate,
        sources=sources,
    )
    found = problems(report)
    report["problems"] = found
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report))
    for line in found:
        click.echo(f"problem: {line}", err=True)
    if found:
        raise SystemExit(1)
