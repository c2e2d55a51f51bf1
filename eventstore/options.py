"""The command-line conventions every ``riak-events`` command shares.

One name per meaning across all subcommands: ``--node`` (a Riak HTTP URL, repeatable),
``--zookeeper`` (``host:port[,host:port]``), ``--dc``, ``--start``/``--end`` (an epoch
range ``[start, end)``), ``--json`` (the report as JSON). Names used before these were
chosen (``--riak``, ``--devnode``, ``--zk-hosts``) stay as hidden aliases that print a
deprecation warning; :data:`CANONICAL` and :data:`DEPRECATED` list them, and a test
walks every command to check that no command drifts.

Also the checks that turn a routine mistake into one line naming what to fix, made
before anything is started: :func:`node_url_error` (a node given without ``http://``),
:func:`check_riak_node` (a URL that does not answer as Riak), :func:`check_dc`,
:func:`cli_range` (``--start``/``--end`` in the forms of :mod:`eventstore.ranges`).

The context (:mod:`eventstore.context`: global variables and a context file holding the
nodes, ZooKeeper, companions and relocators) reaches every command through one place:
the root command calls :func:`apply_context`, which turns it into click's ``default_map``
for the command invoked, so its precedence is the flag, the command's own variable, the
context, the built-in default; :func:`option_source` says which one gave a value.

Pure click and the standard library; nothing here reads the environment except through
click and the ``environ`` given to :func:`apply_context`.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click

from eventstore.context import KEYS, LISTS, ContextError, Setting, resolve
from eventstore.errors import InvalidName, InvalidRange
from eventstore.names import MetadataKey
from eventstore.ranges import EpochRange, parse_when

__all__ = [
    "CANONICAL",
    "DEPRECATED",
    "NO_CONTEXT",
    "FlagEnvOption",
    "aliased_option",
    "apply_context",
    "check_dc",
    "check_node_urls",
    "check_riak_node",
    "cli_range",
    "json_option",
    "node_url_error",
    "option_source",
    "parse_bound",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Option name -> its one meaning, the same in every command that takes it.
CANONICAL = {
    "--node": "a Riak HTTP URL, http://HOST:PORT (repeatable)",
    "--zookeeper": "ZooKeeper hosts HOST:PORT[,HOST:PORT]",
    "--dc": "a data centre token [A-Za-z0-9_]+",
    "--start": "first epoch of [start, end): epoch, ISO-8601 (UTC if no zone), now, now-5m",
    "--end": "exclusive end of [start, end), same forms as --start",
    "--json": "print the report or list as JSON",
}

#: Old option name -> the canonical one; accepted, hidden from --help, warned about.
DEPRECATED = {"--riak": "--node", "--devnode": "--node", "--zk-hosts": "--zookeeper"}

_ALIAS_META = "riak_events.aliases"
_CONTEXT_META = "riak_events.context"

#: Commands that do not read the context: the daemons (their addresses are their own
#: configuration) and ``dev``, which writes it.
NO_CONTEXT = frozenset({"companion", "relocator", "devnode", "dev", "loadgen"})

#: Option -> context key (:data:`eventstore.context.KEYS` the other way round).
_CONTEXT_KEY = {option: key for key, option in KEYS.items()}


class FlagEnvOption(click.Option):
    """An option whose automatic environment variable is named after its flag, not its
    parameter: ``--node`` (parameter ``nodes`` or ``url``) reads
    ``RIAK_EVENTS_<COMMAND>_NODE`` in every command, ``--zk-hosts`` its old
    ``..._ZK_HOSTS``."""

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        value = click.Parameter.resolve_envvar_value(self, ctx)  # an explicit envvar
        if value is not None or not self.allow_from_autoenv or not ctx.auto_envvar_prefix:
            return value
        flag = next(o for o in self.opts if o.startswith("--"))
        return os.environ.get(f"{ctx.auto_envvar_prefix}_{flag[2:].replace('-', '_').upper()}")


def aliased_option(
    *decls: str, aliases: Sequence[str] = (), alias_envvars: Sequence[str] = (), **kw: Any
) -> Callable[[F], F]:
    """A click option plus hidden deprecated aliases of it.

    Args:
        decls: the canonical option's declarations (``"--node", "nodes"``).
        aliases: old names (``"--riak"``): accepted, hidden, and each use prints
            ``warning: --riak is deprecated; use --node`` on stderr.
        alias_envvars: environment variables the old names were read from (still read).
        kw: the canonical option's click settings; ``required=True`` is checked after
            the aliases are taken into account.

    Returns:
        A decorator adding the aliases and the option (the value arrives under the
        canonical option's parameter name).
    """
    required = bool(kw.pop("required", False))
    canonical = next(d for d in decls if d.startswith("--"))
    user_callback = kw.pop("callback", None)
    multiple = bool(kw.get("multiple"))

    def take(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        assert param.name is not None
        source = ctx.get_parameter_source(param.name)
        aliased = ctx.meta.get(_ALIAS_META, {}).get(param.name)
        if aliased is not None and source is not click.core.ParameterSource.COMMANDLINE:
            value = aliased
        if required and value in (None, ()):
            raise click.MissingParameter(ctx=ctx, param=param)
        return user_callback(ctx, param, value) if user_callback else value

    def decorate(f: F) -> F:
        f = click.option(*decls, callback=take, required=False, cls=FlagEnvOption, **kw)(f)
        dest = f.__click_params__[-1].name  # type: ignore[attr-defined]
        for i, old in enumerate(aliases):

            def stash(
                ctx: click.Context, param: click.Parameter, value: Any, old: str = old
            ) -> None:
                if value in (None, ()):
                    return
                click.echo(f"warning: {old} is deprecated; use {canonical}", err=True)
                ctx.meta.setdefault(_ALIAS_META, {})[dest] = value

            envvar = alias_envvars[i] if i < len(alias_envvars) else None
            f = click.option(
                old,
                f"{dest}__alias_{i}",
                hidden=True,
                expose_value=False,
                multiple=multiple,
                callback=stash,
                envvar=envvar,
                type=kw.get("type"),
                cls=FlagEnvOption,
            )(f)
        return f

    return decorate


def context_default_map(command: click.Command, settings: dict[str, Setting]) -> dict[str, Any]:
    """click's ``default_map`` for ``command`` (and, for a group, each subcommand):
    parameter name -> the context's value, for each option the context covers."""
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        found = {}
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                found[name] = context_default_map(sub, settings)
        return found
    defaults: dict[str, Any] = {}
    for param in command.params:
        if not isinstance(param, click.Option) or param.name is None:
            continue
        key = next((_CONTEXT_KEY[o] for o in param.opts if o in _CONTEXT_KEY), None)
        if key is None or key not in settings:
            continue
        value = settings[key].value
        if param.multiple:
            defaults[param.name] = tuple(value) if key in LISTS else (value,)
        else:
            defaults[param.name] = value[0] if isinstance(value, tuple) else value
    return defaults


def apply_context(ctx: click.Context, command_name: str, environ: Mapping[str, str]) -> None:
    """Make the context (global variables over the context file) the defaults of the
    options of command ``command_name`` about to run under ``ctx`` (the root's).

    Raises:
        click.ClickException: the context file cannot be used (one line naming it).
    """
    if command_name in NO_CONTEXT or not isinstance(ctx.command, click.Group):
        return
    command = ctx.command.get_command(ctx, command_name)
    if command is None:
        return
    try:
        settings = resolve(environ)
    except ContextError as e:
        raise click.ClickException(str(e)) from None
    if not settings:
        return
    ctx.meta[_CONTEXT_META] = settings
    ctx.default_map = {command_name: context_default_map(command, settings)}


def option_source(ctx: click.Context, param_name: str, key: str) -> str:
    """Where the value of ``param_name`` (the option of context ``key``) came from:
    ``"flag"``, ``"env"`` (the command's variable or a global one), ``"context"`` (the
    context file) or ``"default"``."""
    source = ctx.get_parameter_source(param_name)
    if source is click.core.ParameterSource.COMMANDLINE:
        return "flag"
    if source is click.core.ParameterSource.ENVIRONMENT:
        return "env"
    if source is click.core.ParameterSource.DEFAULT_MAP:
        setting = ctx.meta.get(_CONTEXT_META, {}).get(key)
        return setting.source if setting is not None else "context"
    return "default"


def json_option(f: F) -> F:
    """``--json``: print the report or list as JSON (parameter ``as_json``)."""
    return click.option("--json", "as_json", is_flag=True, help=CANONICAL["--json"] + ".")(f)


def node_url_error(url: str) -> str | None:
    """Why ``url`` is not a Riak HTTP URL (``http://host:port``), or None if it is."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme != "http" or not parts.hostname or port == -1:
        return f"{url!r} is not a Riak HTTP URL: give http://HOST:PORT, e.g. http://127.0.0.1:8098"
    return None


def check_node_urls(urls: Sequence[str], *, param_hint: str = "--node") -> tuple[str, ...]:
    """The URLs (comma-separated entries split), each checked by :func:`node_url_error`.

    Raises:
        click.BadParameter: a URL without ``http://``, host or valid port.
    """
    found = tuple(n.strip().rstrip("/") for raw in urls for n in raw.split(",") if n.strip())
    for url in found:
        problem = node_url_error(url)
        if problem:
            raise click.BadParameter(problem, param_hint=param_hint)
    return found


def check_riak_node(url: str, *, timeout_s: float = 5.0) -> None:
    """Raise ``click.ClickException`` unless ``url`` answers Riak's ``GET /ping`` with 200.

    A companion, a relocator or any other HTTP server answers 404 there: reading from it
    would look like a range without data.
    """
    problem = node_url_error(url)
    if problem:
        raise click.ClickException(f"node {problem}")
    ping = url.rstrip("/") + "/ping"
    try:
        with urllib.request.urlopen(ping, timeout=timeout_s) as answer:
            status = int(answer.status)
    except urllib.error.HTTPError as e:
        status = e.code
    except (OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise click.ClickException(
            f"node {url}: cannot reach it ({reason}); is Riak (or the devnode) running there?"
        ) from None
    if status != 200:
        what = _what_answers(url, timeout_s=timeout_s)
        raise click.ClickException(
            f"node {url} does not answer as Riak: GET /ping answered HTTP {status}"
            + (f"; it is {what}" if what else "")
            + " (Riak's HTTP port is 8098 by default)"
        )


def _what_answers(url: str, *, timeout_s: float) -> str | None:
    """Which of our daemons answers at ``url`` (for the wrong-port hint), or None."""
    base = url.rstrip("/")
    probes = (
        ("/v1/status", "a companion (its default port is 5000)", "workers"),
        ("/status", "a relocator's ops port (its default is 9141)", "backlog"),
    )
    for path, what, field in probes:
        try:
            with urllib.request.urlopen(base + path, timeout=timeout_s) as answer:
                body = json.loads(answer.read(1 << 20))
        except urllib.error.HTTPError as e:
            if e.code == 403 and path == "/v1/status":  # a companion, not for our address
                return what
            continue
        except (OSError, ValueError, http.client.HTTPException):
            continue
        if isinstance(body, dict) and field in body:
            return what
    return None


def check_dc(value: str, *, param_hint: str = "--dc", several: bool = False) -> list[str]:
    """The dc (or, with ``several``, the comma-separated dcs), each a valid token.

    Raises:
        click.BadParameter: a dc that is not ``[A-Za-z0-9_]+`` (``ams-4``), or none.
    """
    dcs = [d.strip() for d in value.split(",")] if several else [value]
    if not dcs or not all(dcs):
        raise click.BadParameter(f"no dc in {value!r}", param_hint=param_hint)
    for dc in dcs:
        try:
            MetadataKey(0, dc)
        except InvalidName:
            raise click.BadParameter(
                f"{dc!r} is not a dc: a dc is letters, digits and '_' (e.g. ams4)",
                param_hint=param_hint,
            ) from None
    return dcs


def parse_bound(value: str, option: str, *, now: float) -> int:
    """One ``--start``/``--end`` value as an epoch: an epoch, an ISO-8601 datetime (UTC
    when it has no zone), ``now`` or ``now-N[smhd]`` (:func:`eventstore.ranges.parse_when`).

    Raises:
        click.BadParameter: naming ``option`` and the forms accepted.
    """
    try:
        return parse_when(value, now=now)
    except InvalidRange as e:
        raise click.BadParameter(str(e), param_hint=option) from None


def cli_range(start: str, end: str, *, now: float | None = None) -> EpochRange:
    """``--start``/``--end`` as the epoch range ``[start, end)``.

    Args:
        start: the ``--start`` text.
        end: the ``--end`` text.
        now: the current unix time, seconds, for ``now-5m`` (default: the clock).

    Raises:
        click.BadParameter: a bound of no known form, or ``--end`` before ``--start``.
    """
    now = time.time() if now is None else now
    first = parse_bound(start, "--start", now=now)
    stop = parse_bound(end, "--end", now=now)
    if stop < first:
        raise click.BadParameter(
            f"the range [{first}, {stop}) ends before it starts ({end!r} < --start "
            f"{start!r}); ranges are [start, end), end exclusive",
            param_hint="--end",
        )
    return EpochRange(first, stop)
