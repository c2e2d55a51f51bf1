"""The ``riak-events`` command.

One console script with a subcommand per capability. Subcommands are not imported here:
each package declares its click commands in the ``riak_events.commands`` entry-point group
of pyproject.toml, so a new package adds commands without touching this module. Every
option can also be given as an environment variable ``RIAK_EVENTS_<COMMAND>_<OPTION>``.

The context (``eventstore.context``: ``RIAK_EVENTS_NODE``, ``..._ZOOKEEPER``,
``..._COMPANION``, ``..._RELOCATOR``, ``..._ZK_ROOT`` and the context file that
``riak-events dev up`` writes) gives the defaults of ``--node``, ``--zookeeper``,
``--zk-root``, ``--companion`` and ``--relocator`` of every command but the daemons and
``dev`` (:func:`eventstore.options.apply_context`).

Error policy: a failure a command did not turn into a message of its own is printed as
one line (``Error: <what>: <message>``) with exit status 1; the traceback is shown only
with ``riak-events --debug <command> ...`` (or ``RIAK_EVENTS_DEBUG=1``). Ctrl-C exits
with status 130 and no traceback. A reader that goes away (``... | head``) ends the
command quietly with status 141 (128 + SIGPIPE, as a process killed by SIGPIPE).
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import entry_points
from typing import Any

import click

from eventstore.logformat import FORMATS, configure
from eventstore.options import apply_context

ENTRY_POINT_GROUP = "riak_events.commands"

#: Exit status after the reader of standard output went away (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


def _quiet_broken_pipe() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush does not
    fail again on the closed pipe (and print "Exception ignored ...")."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test runner's buffer)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class PluginGroup(click.Group):
    """A click group whose subcommands come from an entry-point group, loaded lazily."""

    def _commands(self) -> dict[str, Any]:
        return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._commands()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        ep = self._commands().get(cmd_name)
        if ep is None:
            return None
        loaded = ep.load()
        if not isinstance(loaded, click.Command):
            raise click.ClickException(
                f"entry point {ep.value!r} for command {cmd_name!r} is not a click command"
            )
        return loaded

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:  # `riak-events ... | head`: the reader is gone
            _quiet_broken_pipe()
            ctx.exit(EXIT_BROKEN_PIPE)
        except Exception as e:
            if (ctx.obj or {}).get("debug"):
                raise
            text = str(e) or "(no message)"
            raise click.ClickException(
                f"{type(e).__name__}: {text} (riak-events --debug shows the traceback)"
            ) from e


@click.group(cls=PluginGroup, context_settings={"auto_envvar_prefix": "RIAK_EVENTS"})
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@click.option(
    "--log-format",
    default="plain",
    show_default=True,
    type=click.Choice(FORMATS),
    help="One readable line per record, or one JSON object per line.",
)
@click.option("--debug", is_flag=True, help="Show the traceback of an unexpected failure.")
@click.version_option(package_name="riak-events")
@click.pass_context
def main(ctx: click.Context, log_level: str, log_format: str, debug: bool) -> None:
    """riak-events: event storage on Riak KV with server-side substreams."""
    ctx.obj = {"debug": debug, "log_format": log_format}
    configure(log_level, log_format)
    if ctx.invoked_subcommand is not None:
        apply_context(ctx, ctx.invoked_subcommand, os.environ)
