"""The ``riak-events`` command.

One console script with a subcommand per capability. Subcommands are not imported here:
each package declares its click commands in the ``riak_events.commands`` entry-point group
of pyproject.toml, so a new package adds commands without touching this module. Every
option can also be given as an environment variable ``RIAK_EVENTS_<COMMAND>_<OPTION>``.
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from typing import Any

import click

ENTRY_POINT_GROUP = "riak_events.commands"


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


@click.group(cls=PluginGroup, context_settings={"auto_envvar_prefix": "RIAK_EVENTS"})
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@click.version_option(package_name="riak-events")
def main(log_level: str) -> None:
    """riak-events: event storage on Riak KV with server-side substreams."""
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
