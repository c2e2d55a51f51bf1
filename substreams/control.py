"""``riak-events substream enable | disable | status | refill NAME``: a substream on
running companions.

    riak-events substream status web_5xx --zookeeper zk1:2181          # every live node
    riak-events substream enable web_5xx --companion http://riak1:5000
    riak-events substream disable web_5xx --zookeeper zk1:2181
    riak-events substream refill web_5xx --dc ams4 --start now-1h --end now

The companions are the ones given (``--companion URL``, repeatable) or, with
``--zookeeper``, every live one (``<root>/companions/<node>``); with neither, the local
default ``http://127.0.0.1:5000``. ``enable`` and ``disable`` POST
``/v1/substreams/NAME/enable|disable`` to each (the companion's ``peers`` only);
``status`` reads ``/v1/status``: its state (enabled, disabled, not loaded: the status
page's words, ``substreams/state.py``), the versions loaded, runs, failures (the
plugin's), shed results (apart: the plugin did not run), p50/p99, the last error and
whether the node disabled it (and why). Each command takes ``--json``. A node disables
a substream by itself after ``disable_after`` failures in a row; ``enable`` undoes that.

``refill`` fills the gaps a disabled (or shed) period left: it reads the metadata of
each epoch of the range (one GET each; keys are never listed) and POSTs its chunk keys
to ``/v1/substreams/NAME/refill`` of every companion (``{"epoch", "dc", "keys",
"dry_run"}``; ``companion/refill.py``). Each companion keeps the keys it owns (its
``[ring]``, the auditor's rule: so the command needs no ring) and runs again those
whose result is missing, ``shed`` or ``disabled``, never one the plugin answered. The
sum of the companions' ``owned`` counts shows keys no companion reached owns. While a
companion sheds (its inbox full) or cannot read its store, the epoch is sent to it
again, backing off (0.5 s doubling to 8 s; 8 tries in a row that admit nothing end
it); then the command waits for the results (``dry_run`` answers), sending an epoch
again when its gaps outlast 10 s.

Failure semantics: a companion that refuses (4xx: not a peer, no such substream, the
substream disabled there) or is still busy after its tries ends the command with one
line; the epochs before were sent and are refilled anyway; running it again is
harmless (a filled gap is no longer a gap).

Exit status: 0 done on every companion (refill: no gap left); 1 a companion refused or
could not be reached (one line each), or gaps left; 3 (status) no companion has the
substream, (refill) no metadata in the range.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
import httpx

from eventstore.errors import EventStoreError
from eventstore.names import DEFAULT_NAMESPACES, MetadataKey, check_bucket_name, parse_metadata
from eventstore.options import (
    CANONICAL,
    FlagEnvOption,
    check_dc,
    check_node_urls,
    check_riak_node,
    cli_range,
    json_option,
)
from eventstore.riak import NotFound, RiakClient
from eventstore.statusjson import get_json
from substreams.errors import RefillRefused
from substreams.registry import live_companions
from substreams.state import state_of

__all__ = ["COMMANDS"]

log = logging.getLogger(__name__)

#: Exit status of ``status`` when no companion has the substream.
EXIT_NOT_FOUND = 3

#: Companion URL when neither --companion nor --zookeeper is given.
LOCAL_COMPANION = "http://127.0.0.1:5000"


def _companion_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--timeout-s", type=click.FloatRange(min=0.1), default=5.0,
                     show_default=True, help="Per request, seconds.")(f)  # fmt: skip
    f = click.option("--zk-root", default="/riak-events", show_default=True)(f)
    f = click.option("--zookeeper", default=None, metavar="HOSTS",
                     help="Act on every live companion registered here.")(f)  # fmt: skip
    return click.option("--companion", "companions", multiple=True,
                        help="A companion URL (repeat).")(f)  # fmt: skip


def _options(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.argument("name")(_companion_options(f))


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
            live = live_companions(client, zk_root)
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


# -- refill --------------------------------------------------------------------------

#: The fields of a companion's refill answer (``companion/refill.py``, ``RefillAnswer``).
_ANSWER_FIELDS = ("owned", "keys", "gaps", "accepted", "shed", "kept", "unreadable")
#: Backoff between tries of one epoch on one companion (it shed gaps, its store was
#: unreadable, it did not answer): first delay and cap in seconds, and the tries in a
#: row that admit nothing before giving up (a try that admits some starts again).
_BACKOFF_S = (0.5, 8.0)
_TRIES = 8
#: While confirming, an epoch whose gaps are still there this long after it was sent is
#: sent again (a run shed meanwhile, or a worker that died with it), seconds.
_RESEND_S = 10.0
#: Progress lines at most this often, seconds.
_PROGRESS_S = 2.0


def _utc(epoch: int) -> str:
    return f"{epoch} ({time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(epoch))})"


@dataclass(frozen=True)
class _Sent:
    """What the companions answered for one epoch, summed."""

    gaps: int
    kept: int
    unowned: int


@dataclass
class _Refill:
    """One refill's companions and its POSTs (see :func:`refill`)."""

    name: str
    dc: str
    urls: list[str]
    timeout_s: float
    retries: int = 0

    def _post_once(
        self, url: str, epoch: int, keys: list[str], dry_run: bool
    ) -> tuple[dict[str, int] | None, str]:
        """One POST: the answer (None when there is none), and why it is worth trying
        again (words; empty when done).

        Raises:
            RefillRefused: the companion answered 4xx (not a peer, no such substream,
                disabled there, a bad body): trying again would not help.
        """
        body = {"epoch": epoch, "dc": self.dc, "keys": keys, "dry_run": dry_run}
        target = f"{url}/v1/substreams/{self.name}/refill"
        try:
            answer = httpx.post(target, json=body, timeout=self.timeout_s)
        except httpx.HTTPError as e:
            return None, f"unreachable ({type(e).__name__})"
        try:
            data = answer.json()
        except ValueError:
            data = None
        if 400 <= answer.status_code < 500:
            if isinstance(data, dict) and "message" in data:
                raise RefillRefused(f"{url}: {data.get('error')}: {data['message']}")
            if answer.status_code in (404, 405):
                raise RefillRefused(f"{url}: this companion has no refill endpoint (POST {target})")
            raise RefillRefused(f"{url}: HTTP {answer.status_code}")
        if answer.status_code != 200 or not isinstance(data, dict):
            return None, f"HTTP {answer.status_code}"
        counts = {f: data.get(f, 0) for f in _ANSWER_FIELDS}
        if not all(type(n) is int and n >= 0 for n in counts.values()):
            raise RefillRefused(f"{url}: not a refill answer: {answer.text[:200]}")
        if counts["shed"] or counts["unreadable"]:
            why = f"{counts['shed']} gaps shed (busy), {counts['unreadable']} results unreadable"
            return counts, why
        return counts, ""

    def _post(
        self, url: str, epoch: int, keys: list[str], dry_run: bool
    ) -> tuple[dict[str, int], dict[str, int]]:
        """POST one epoch to one companion, backing off while it sheds, its store is
        unreadable or it does not answer: the first answer (what was found) and the
        last (all admitted).

        Raises:
            RefillRefused: refused for good, or still not done after the tries.
        """
        base, cap = _BACKOFF_S
        delay, idle = base, 0
        first: dict[str, int] | None = None
        while True:
            counts, why = self._post_once(url, epoch, keys, dry_run)
            first = first or counts
            if counts is not None and not why:
                return first or counts, counts
            if counts is not None and counts["accepted"]:
                delay, idle = base, 0  # it took some: the rest soon, as fast
            else:
                idle += 1
                if idle >= _TRIES:
                    raise RefillRefused(
                        f"{url}: epoch {_utc(epoch)} not done after {_TRIES} tries: {why}"
                    )
            self.retries += 1
            log.debug("refill: %s epoch=%d: %s; again in %.1f s", url, epoch, why, delay)
            time.sleep(delay)
            delay = min(cap, delay * 2)

    def send(self, epoch: int, keys: list[str], *, dry_run: bool = False) -> _Sent:
        """Send ``epoch``'s keys to every companion (each takes the ones it owns): the
        gaps and kept results found at the first answer."""
        answers = [self._post(url, epoch, keys, dry_run)[0] for url in self.urls]
        owned = sum(a["owned"] for a in answers)
        return _Sent(
            gaps=sum(a["gaps"] for a in answers),
            kept=sum(a["kept"] for a in answers),
            unowned=max(0, len(keys) - owned),
        )


def _metadata_keys(riak: Any, dc: str, epoch: int) -> list[str] | None:
    """The epoch's chunk keys, from its metadata; None when there is none.

    Raises:
        click.ClickException: the metadata could not be read or parsed.
    """
    meta = MetadataKey(epoch, dc)
    try:
        value = riak.get(*DEFAULT_NAMESPACES.metadata_location(meta)).value
        refs = parse_metadata(value, key=meta.format())
    except NotFound:
        return None
    except EventStoreError as e:  # RiakError too: the client has retried already
        raise click.ClickException(f"metadata of epoch {_utc(epoch)} dc {dc}: {e}") from None
    return [meta.chunk_key(ref).format() for ref in refs]


class _Progress:
    """Progress lines on stderr, at most every ``_PROGRESS_S`` (and the last one)."""

    def __init__(self, quiet: bool) -> None:
        self._quiet = quiet
        self._at = 0.0

    def __call__(self, line: str, *, last: bool = False) -> None:
        now = time.monotonic()
        if self._quiet or (not last and now - self._at < _PROGRESS_S):
            return
        self._at = now
        click.echo(line, err=True)


def _confirm(
    job: _Refill, pending: dict[int, list[str]], wait_s: float, progress: _Progress
) -> int:
    """Wait until the gaps of ``pending`` (epoch -> keys, sent just now) are filled,
    sending an epoch again when its gaps outlast ``_RESEND_S``; the gaps left after
    ``wait_s`` seconds."""
    sent_at = dict.fromkeys(pending, time.monotonic())
    left = dict.fromkeys(pending, -1)
    deadline = time.monotonic() + wait_s
    delay = 0.5
    while pending:
        time.sleep(delay)
        delay = min(4.0, delay * 2)
        for epoch, keys in list(pending.items()):
            left[epoch] = job.send(epoch, keys, dry_run=True).gaps
            if not left[epoch]:
                del pending[epoch]
            elif time.monotonic() - sent_at[epoch] > _RESEND_S:
                job.send(epoch, keys)
                sent_at[epoch] = time.monotonic()
        waiting = sum(left[e] for e in pending)
        if pending:
            progress(f"refill {job.name} {job.dc}: waiting for {waiting} results in "
                     f"{len(pending)} epochs")  # fmt: skip
        if time.monotonic() > deadline:
            break
    return sum(left[e] for e in pending)


@click.command()
@click.argument("name")
@click.option("--node", "nodes", multiple=True, default=("http://127.0.0.1:8098",),
              cls=FlagEnvOption, show_default=True, help="Riak HTTP URL to read the "
              "metadata from (repeatable).")  # fmt: skip
@click.option("--dc", required=True, help=CANONICAL["--dc"] + ".")
@click.option("--start", required=True, help=CANONICAL["--start"] + ".")
@click.option("--end", required=True, help=CANONICAL["--end"] + ".")
@_companion_options
@click.option("--wait-s", type=click.FloatRange(min=0), default=120.0, show_default=True,
              help="How long to wait for the refilled results to be written (0: do not "
              "wait).")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Count the gaps; change nothing.")
@json_option
def refill(  # noqa: PLR0917 (one parameter per click option)
    name: str,
    nodes: tuple[str, ...],
    dc: str,
    start: str,
    end: str,
    companions: tuple[str, ...],
    zookeeper: str | None,
    zk_root: str,
    timeout_s: float,
    wait_s: float,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Refill substream NAME's gaps in the epochs [--start, --end) of --dc: its results
    missing, shed, or marked disabled (after `substream enable NAME`).

    Walks the range from the metadata (one GET per epoch, never a key listing), sends
    each epoch's chunk keys to every companion (each takes the keys it owns and reads
    their results; the gaps are run again, a result of the plugin's own, ok or failed,
    is never touched), backs off while a companion sheds, then waits up to --wait-s for
    the results. Progress on stderr. Exit status: 0 no gap left; 1 gaps left, or a
    companion refused or did not answer; 2 bad arguments; 3 no metadata in the range."""
    _check_name(name)
    (dc,) = check_dc(dc)
    epochs = cli_range(start, end)
    urls = check_node_urls(nodes)
    check_riak_node(urls[0])
    logging.getLogger("httpx").setLevel(logging.WARNING)
    job = _Refill(name, dc, _companions(companions, zookeeper, zk_root), timeout_s)
    progress = _Progress(quiet=False)
    total = epochs.end - epochs.start
    found = {"epochs_with_data": 0, "keys": 0, "gaps": 0, "kept": 0, "unowned": 0}
    pending: dict[int, list[str]] = {}
    left: int | None = None
    with RiakClient(list(urls)) as riak:
        try:
            for done, epoch in enumerate(range(epochs.start, epochs.end), start=1):
                keys = _metadata_keys(riak, dc, epoch)
                if keys:
                    sent = job.send(epoch, keys, dry_run=dry_run)
                    found["epochs_with_data"] += 1
                    found["keys"] += len(keys)
                    found["gaps"] += sent.gaps
                    found["kept"] += sent.kept
                    found["unowned"] += sent.unowned
                    if sent.gaps:
                        pending[epoch] = keys
                progress(f"refill {name} {dc}: {done}/{total} epochs, {found['gaps']} gaps "
                         f"{'found' if dry_run else 'sent to be run'}, {found['kept']} "
                         f"results kept", last=done == total)  # fmt: skip
            if not found["epochs_with_data"]:
                click.echo(f"no metadata for dc {dc} in [{_utc(epochs.start)}, "
                           f"{_utc(epochs.end)})", err=True)  # fmt: skip
                raise SystemExit(EXIT_NOT_FOUND)
            # None: not waited for (a dry run, or --wait-s 0).
            left = None if dry_run or not wait_s else _confirm(job, pending, wait_s, progress)
        except RefillRefused as e:
            raise click.ClickException(str(e)) from None
    refilled = None if left is None else found["gaps"] - left
    report = {
        "substream": name, "dc": dc, "start": epochs.start, "end": epochs.end,
        "dry_run": dry_run, "epochs": total, **found, "refilled": refilled, "left": left,
        "companions": job.urls, "retries": job.retries,
    }  # fmt: skip
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(_refill_summary(report))
    if left or found["unowned"]:
        raise SystemExit(1)


def _refill_summary(r: dict[str, Any]) -> str:
    head = f"{r['substream']} {r['dc']} [{_utc(r['start'])}, {_utc(r['end'])}): "
    head += f"{r['epochs_with_data']} of {r['epochs']} epochs with data, {r['keys']} chunks"
    if r["dry_run"]:
        line = f"{head}: {r['gaps']} gaps to refill, {r['kept']} results kept (dry run)"
    elif r["left"] is not None:
        line = f"{head}: {r['refilled']} results refilled, {r['left']} gaps left, "
        line += f"{r['kept']} results kept"
    else:
        line = f"{head}: {r['gaps']} gaps sent to be run (not waited for), "
        line += f"{r['kept']} results kept"
    if r["unowned"]:
        line += f"\n{r['unowned']} chunks are owned by none of the companions reached "
        line += f"({', '.join(r['companions'])}): give them all (--companion, --zookeeper)"
    return line


#: Added to ``riak-events substream`` by :mod:`substreams.cli`.
COMMANDS = (enable, disable, status, refill)
