"""``riak-events substream enable | disable | status NAME``: a substream on running
companions.

    riak-events substream status web_5xx --zookeeper zk1:2181          # every live node
    riak-events substream enable web_5xx --companion http://riak1:5000
    riak-events substream disable web_5xx --zookeeper zk1:2181

The companions are the ones given (``--companion URL``, repeatable) or, with
``--zookeeper``, every live one (``<root>/companions/<node>``); with neither, the local
default ``http://127.0.0.1:5000``. ``enable`` and ``disable`` POST
``/v1/substreams/NAME/enable|disable`` to each (the companion's ``peers`` only);
``status`` reads ``/v1/status``: its state (enabled, disabled, not loaded: the status
page's words, ``substreams/state.py``), the versions loaded, runs, failures (the
plugin's), shed results (apart: the plugin did not run), p50/p99, the last error and
whether the node disabled it (and why). Each command takes ``--json``. A node disables
a substream by itself after ``disable_after`` failures in a row; ``enable`` undoes that.

Exit status: 0 done on every companion; 1 a companion refused or could not be reached
(one line each); 3 (status) no companion has the substream.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import click
import httpx

from eventstore.names import check_bucket_name
from eventstore.options import check_node_urls, json_option
from eventstore.system_status import companions_from_zookeeper, get_json
from substreams.state import state_of

__all__ = ["COMMANDS"]

#: Exit status of ``status`` when no companion has the substream.
EXIT_NOT_FOUND = 3

#: Companion URL when neither --companion nor --zookeeper is given.
LOCAL_COMPANION = "http://127.0.0.1:5000"


def _options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--timeout-s", type=click.FloatRange(min=0.1), default=5.0,
                     show_default=True, help="Per request, seconds.")(f)  # fmt: skip
    f = click.option("--zk-root", default="/riak-events", show_default=True)(f)
    f = click.option("--zookeeper", default=None, metavar="HOSTS",
                     help="Act on every live companion registered here.")(f)  # fmt: skip
    f = click.option("--companion", "companions", multiple=True,
                     help="A companion URL (repeat).")(f)  # fmt: skip
    return click.argument("name")(f)


def _companions(companions: tuple[str, ...], zookeeper: str | None, zk_root: str) -> list[str]:
    """The companion URLs to act on.

    Raises:
        click.ClickException: ZooKeeper unreachable, or no live companion in it.
    """
    urls = list(check_node_urls(companions, param_hint="--companion"))
    if zookeeper:
        logging.getLogger("kazoo.client").setLevel(logging.WARNING)
        try:
            from kazoo.client import KazooClient  # noqa: PLC0415 (optional dependency)
        except ImportError:
            raise click.ClickException(
                "--zookeeper needs kazoo: pip install 'riak-events[zookeeper]'"
            ) from None
        client = KazooClient(hosts=zookeeper, timeout=5.0)
        try:
            client.start(timeout=10.0)
        except Exception as e:  # kazoo's own timeout and connection errors
            client.close()
            raise click.ClickException(f"ZooKeeper at {zookeeper}: {e}") from None
        try:
            live = companions_from_zookeeper(client, zk_root)
        finally:
            client.stop()
            client.close()
        found = [z.get("endpoints", {}).get("companion") for z in live.values()]
        urls += [u.rstrip("/") for u in found if isinstance(u, str) and u not in urls]
        if not urls:
            raise click.ClickException(f"no live companion under {zk_root} in {zookeeper}")
    return urls or [LOCAL_COMPANION]


def _check_name(name: str) -> None:
    try:
        check_bucket_name(name, "substream")
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="NAME") from None


def _post(url: str, name: str, action: str, timeout_s: float) -> str | None:
    """POST the action; None when done, else why not in words."""
    target = f"{url}/v1/substreams/{name}/{action}"
    try:
        answer = httpx.post(target, timeout=timeout_s)
    except httpx.HTTPError as e:
        return f"unreachable ({type(e).__name__})"
    if answer.status_code == 200:
        return None
    try:
        body = answer.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "message" in body:
        return f"{body.get('error')}: {body['message']}"
    if answer.status_code in (404, 405):
        return f"this companion has no {action} endpoint (POST /v1/substreams/NAME/{action})"
    return f"HTTP {answer.status_code}"


def _act(action: str, name: str, urls: list[str], timeout_s: float, as_json: bool) -> None:
    """POST ``action`` to every companion; one line each (or, with ``as_json``, one
    object ``{"substream", "action", "companions": [{"companion", "done", "error"}]}``).
    Exit 1 if a companion refused or could not be reached."""
    logging.getLogger("httpx").setLevel(logging.WARNING)
    answers = []
    for url in urls:
        problem = _post(url, name, action, timeout_s)
        answers.append({"companion": url, "done": problem is None, "error": problem})
        if as_json:
            continue
        if problem is None:
            click.echo(f"{url}: {name} {action}d")
        else:
            click.echo(f"{url}: {name} not {action}d: {problem}", err=True)
    if as_json:
        report = {"substream": name, "action": action, "companions": answers}
        click.echo(json.dumps(report, indent=2))
    if any(not a["done"] for a in answers):
        raise SystemExit(1)


@click.command()
@_options
@json_option
def enable(name: str, companions: tuple[str, ...], zookeeper: str | None,  # noqa: PLR0917
           zk_root: str, timeout_s: float, as_json: bool) -> None:  # fmt: skip
    """Enable substream NAME again where a node disabled it (after failures)."""
    _check_name(name)
    _act("enable", name, _companions(companions, zookeeper, zk_root), timeout_s, as_json)


@click.command()
@_options
@json_option
def disable(name: str, companions: tuple[str, ...], zookeeper: str | None,  # noqa: PLR0917
            zk_root: str, timeout_s: float, as_json: bool) -> None:  # fmt: skip
    """Disable substream NAME on the companions (consumers then see gaps with reason
    ``disabled``) until enabled again."""
    _check_name(name)
    _act("disable", name, _companions(companions, zookeeper, zk_root), timeout_s, as_json)


def _node_status(url: str, name: str, timeout_s: float) -> dict[str, Any]:
    view, error = get_json(f"{url}/v1/status", timeout_s=timeout_s)
    if not isinstance(view, dict):
        return {"companion": url, "error": error or "unexpected /v1/status"}
    stats = view.get("substreams", {}).get(name)
    versions = sorted(view.get("loaded", {}).get(name, {}))
    disabled = view.get("disabled", {}).get(name)
    if stats is None and not versions and disabled is None:
        return {"companion": url, "state": "not loaded"}
    stats = stats or {}
    failures = dict(stats.get("failures", {}))
    # A companion from before issue 21 counted shed results among the failures.
    shed = int(stats.get("shed", 0)) + int(failures.pop("shed", 0))
    return {
        "companion": url,
        "state": state_of(versions, disabled),
        "versions": versions,
        "runs": stats.get("runs", 0),
        "ok": stats.get("ok", 0),
        "failures": failures,
        "shed": shed,
        "p50_ms": stats.get("p50_ms"),
        "p99_ms": stats.get("p99_ms"),
        "last_error": stats.get("last_error"),
        "last_error_key": stats.get("last_error_key"),
        "disabled": disabled,
    }


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}"


def _status_line(s: dict[str, Any]) -> str:
    if "error" in s:
        return f"{s['companion']}: ERROR {s['error']}"
    if s["state"] == "not loaded":
        return f"{s['companion']}: not loaded"
    line = (
        f"{s['companion']}: {s['state']}  version {','.join(s['versions']) or '-'}  "
        f"runs {s['runs']} ok {s['ok']} failures {json.dumps(s['failures'])} "
        f"shed {s['shed']}  "
        f"p50 {_ms(s['p50_ms'])} ms p99 {_ms(s['p99_ms'])} ms"
    )
    if s["disabled"]:
        line += f"\n    disabled: {s['disabled'].get('reason')}"
    if s["last_error"]:
        line += f"\n    last error ({s['last_error_key']}): {s['last_error']}"
    return line


@click.command()
@_options
@json_option
def status(  # noqa: PLR0917 (one parameter per click option)
    name: str,
    companions: tuple[str, ...],
    zookeeper: str | None,
    zk_root: str,
    timeout_s: float,
    as_json: bool,
) -> None:
    """Show substream NAME on each companion: state, version, runs, failures, p50/p99."""
    _check_name(name)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    nodes = [_node_status(u, name, timeout_s) for u in _companions(companions, zookeeper, zk_root)]
    if as_json:
        click.echo(json.dumps({"substream": name, "companions": nodes}, indent=2))
    else:
        click.echo(f"substream {name}:")
        for s in nodes:
            click.echo(f"  {_status_line(s)}")
    if any("error" in s for s in nodes):
        raise SystemExit(1)
    if all(s.get("state") == "not loaded" for s in nodes):
        click.echo(f"substream {name} is on none of these companions", err=True)
        raise SystemExit(EXIT_NOT_FOUND)


#: Added to ``riak-events substream`` by :mod:`substreams.cli`.
COMMANDS = (enable, disable, status)
