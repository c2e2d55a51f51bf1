"""One interface: every ``riak-events`` command names the same thing the same way.

Walks every command of the installed ``riak-events`` group (entry points included, so
a new command is checked too) and checks the conventions of :mod:`eventstore.options`:
the old names (``--riak``, ``--devnode``, ``--zk-hosts``, ``--until``) exist only as
hidden aliases next to their canonical option; ``--start`` never comes without
``--end``; ``--json`` is a flag; commands that print a report or a list have ``--json``;
every command but the daemons takes its addresses from the context
(:mod:`eventstore.context`), with the precedence flag > variable > context > default.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from eventstore.cli import main
from eventstore.context import KEYS, resolve
from eventstore.options import (
    DEPRECATED,
    NO_CONTEXT,
    FlagEnvOption,
    aliased_option,
    apply_context,
    option_source,
)

#: Commands that print a report or a list.
REPORTS = {
    "substream list", "substream test", "substream check", "spark export", "spark backfill",
    "status", "chunk get", "chunk ls", "metadata get", "sereal decode", "dev status",
}  # fmt: skip
#: Old names of one command only, besides the project-wide ones.
LOCAL_ALIASES = {"tail": {"--until": "--end"}}


def commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    """(path, command) of every subcommand of ``group``, depth first."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        path = f"{prefix}{name}"
        yield path, command
        if isinstance(command, click.Group):
            yield from commands(command, path + " ")


ALL = dict(commands(main))


def options(command: click.Command) -> dict[str, click.Option]:
    """Every option name (``--x``) of ``command`` -> its option."""
    return {
        name: p
        for p in command.params
        if isinstance(p, click.Option)
        for name in (*p.opts, *p.secondary_opts)
        if name.startswith("--")
    }


def test_every_command_is_walked() -> None:
    assert {"read", "tail", "companion", "relocator", "substream test", "spark export"} <= set(ALL)


@pytest.mark.parametrize("path", sorted(ALL))
def test_old_names_are_hidden_aliases_of_the_canonical_ones(path: str) -> None:
    named = options(ALL[path])
    aliases = {**DEPRECATED, **LOCAL_ALIASES.get(path, {})}
    for old, canonical in aliases.items():
        if old in named:
            assert named[old].hidden, f"{path}: {old} must be a hidden alias of {canonical}"
            assert canonical in named, f"{path}: {old} without {canonical}"
            assert not named[canonical].hidden
    visible = {n for n, p in named.items() if not p.hidden}
    assert not visible & set(DEPRECATED), f"{path}: visible old names {visible & set(DEPRECATED)}"


@pytest.mark.parametrize("path", sorted(ALL))
def test_ranges_and_json_are_spelled_alike(path: str) -> None:
    named = options(ALL[path])
    if "--start" in named:
        assert "--end" in named, f"{path}: --start without --end (ranges are [start, end))"
    if "--json" in named:
        assert named["--json"].is_flag and named["--json"].name == "as_json", path
    if "--zookeeper" in named:
        assert not named["--zookeeper"].multiple, path
    for flag, suffix in (("--node", "_NODE"), ("--zookeeper", "_ZOOKEEPER")):
        if flag in named:  # the same variable name in every command
            option = named[flag]
            envvar = option.envvar if isinstance(option.envvar, str) else None
            assert (
                isinstance(option, FlagEnvOption)
                or (envvar or "").endswith(suffix)
                or (envvar is None and option.name == flag[2:])
            ), f"{path}: {flag} reads {envvar or option.name}"
    if "--node" in named and path not in ("dev up",):
        assert (
            "http" in (named["--node"].help or "").lower()
            or "url" in (named["--node"].help or "").lower()
        ), f"{path}: --node must be a Riak HTTP URL"


@pytest.mark.parametrize("path", sorted(REPORTS))
def test_report_commands_take_json(path: str) -> None:
    assert "--json" in options(ALL[path])


# -- the context: one place for the addresses, read by every command -------------------

CONTEXT_FILE = """
nodes = ["http://10.0.0.1:18098", "http://10.0.0.2:18098"]
zookeeper = "10.0.0.9:12181"
zk_root = "/ctx-root"
companions = ["http://10.0.0.1:15000"]
relocators = ["http://10.0.0.3:19141"]
"""


@pytest.mark.parametrize("path", sorted(p for p in ALL if not isinstance(ALL[p], click.Group)))
def test_every_command_takes_its_addresses_from_the_context(path: str, tmp_path: Path) -> None:
    context = tmp_path / "context.toml"
    context.write_text(CONTEXT_FILE)
    settings = resolve({"RIAK_EVENTS_CONTEXT": str(context)})
    top, *rest = path.split()
    ctx = click.Context(main, info_name="riak-events", resilient_parsing=True)
    apply_context(ctx, top, {"RIAK_EVENTS_CONTEXT": str(context)})  # as the root does
    for i, name in enumerate([top, *rest]):
        command = ALL[" ".join([top, *rest][: i + 1])]
        ctx = command.make_context(name, [], parent=ctx, resilient_parsing=True)
    named = options(ALL[path])
    for key, flag in KEYS.items():
        if flag not in named or named[flag].hidden:
            continue
        option = named[flag]
        value = ctx.params[option.name]
        if top in NO_CONTEXT:  # a daemon's addresses are its own configuration
            assert value != settings[key].value and value != settings[key].value[0], path
            continue
        expected = settings[key].value
        if option.multiple:
            assert tuple(value) == (expected if isinstance(expected, tuple) else (expected,))
        else:
            assert value == (expected[0] if isinstance(expected, tuple) else expected), path
        assert option_source(ctx, option.name, key) == "context", path


@click.command("where")
@click.option("--node", "nodes", multiple=True, cls=FlagEnvOption)
@click.option("--zookeeper", default="127.0.0.1:2181", cls=FlagEnvOption)
@click.pass_context
def where(ctx: click.Context, nodes: tuple[str, ...], zookeeper: str) -> None:
    click.echo(f"{','.join(nodes)} {option_source(ctx, 'nodes', 'nodes')}")
    click.echo(f"{zookeeper} {option_source(ctx, 'zookeeper', 'zookeeper')}")


def test_precedence_flag_variable_context_default(tmp_path: Path) -> None:
    context = tmp_path / "context.toml"
    context.write_text(CONTEXT_FILE)
    main.add_command(where)
    runner = CliRunner()
    try:
        no_context = {"RIAK_EVENTS_CONTEXT": ""}
        done = runner.invoke(main, ["where"], env=no_context)
        assert done.stdout.splitlines() == [" default", "127.0.0.1:2181 default"]
        env: dict[str, str | None] = {"RIAK_EVENTS_CONTEXT": str(context)}
        done = runner.invoke(main, ["where"], env=env)
        assert done.stdout.splitlines() == [
            "http://10.0.0.1:18098,http://10.0.0.2:18098 context",
            "10.0.0.9:12181 context",
        ]
        env["RIAK_EVENTS_NODE"] = "http://a:1,http://b:1"  # a global variable
        done = runner.invoke(main, ["where"], env=env)
        assert done.stdout.splitlines()[0] == "http://a:1,http://b:1 env"
        env["RIAK_EVENTS_WHERE_NODE"] = "http://c:1"  # the command's own variable
        done = runner.invoke(main, ["where"], env=env)
        assert done.stdout.splitlines()[0] == "http://c:1 env"
        done = runner.invoke(main, ["where", "--node", "http://d:1"], env=env)
        assert done.stdout.splitlines()[0] == "http://d:1 flag"
        (tmp_path / "bad.toml").write_text("nodes = [1]\n")
        bad = runner.invoke(
            main, ["where"], env={"RIAK_EVENTS_CONTEXT": str(tmp_path / "bad.toml")}
        )
        assert bad.exit_code == 1
        assert bad.stderr == (
            f"Error: context file {tmp_path / 'bad.toml'}: nodes must be a list of strings, "
            "not [1]\n"
        )
    finally:
        main.commands.pop("where")
        logging.getLogger().handlers.clear()


def test_an_alias_warns_and_gives_its_value_to_the_canonical_option() -> None:
    @click.command()
    @aliased_option("--node", "nodes", multiple=True, aliases=("--riak",), required=True)
    @aliased_option("--zookeeper", aliases=("--zk-hosts",), default="127.0.0.1:2181")
    def command(nodes: tuple[str, ...], zookeeper: str) -> None:
        click.echo(f"{','.join(nodes)} {zookeeper}")

    runner = CliRunner()
    done = runner.invoke(command, ["--riak", "http://a:1", "--riak", "http://b:1"])
    assert done.exit_code == 0
    assert done.stdout == "http://a:1,http://b:1 127.0.0.1:2181\n"
    assert done.stderr == "warning: --riak is deprecated; use --node\n"
    done = runner.invoke(command, ["--node", "http://a:1", "--zk-hosts", "z:1"])
    assert done.stdout == "http://a:1 z:1\n"
    done = runner.invoke(command, [])
    assert done.exit_code == 2 and "Missing option '--node'" in done.stderr
    assert "--riak" not in runner.invoke(command, ["--help"]).stdout


# -- paths: the config file's directory, the current directory, never the source tree --

REPO = Path(__file__).parents[2]


def test_example_configs_put_no_state_next_to_the_code() -> None:
    from companion.settings import load as load_companion
    from relocator.settings import load as load_relocator

    companion = load_companion(REPO / "companion" / "example-config.toml")
    relocator = load_relocator(REPO / "relocator" / "example-config.toml")
    # Unset in the examples: relative to wherever the daemon is started.
    assert companion.state_dir == Path("var/companion")
    assert relocator.data_dir == Path("var/relocator")


def test_relative_paths_of_a_config_file_are_the_files(tmp_path: Path) -> None:
    from companion.settings import load as load_companion
    from relocator.settings import load as load_relocator

    (tmp_path / "etc").mkdir()
    companion_file = tmp_path / "etc" / "c.toml"
    companion_file.write_text('[companion]\nstate_dir = "st"\nplugin_dirs = ["p"]\n')
    relocator_file = tmp_path / "etc" / "r.toml"
    relocator_file.write_text(
        '[relocator]\ndata_dir = "d"\nspool_dir = "s"\n[clusters.a]\nnodes = ["http://h:1"]\n'
    )
    companion = load_companion(companion_file)
    assert companion.state_dir == tmp_path / "etc" / "st"
    assert companion.plugin_dirs == (tmp_path / "etc" / "p",)
    relocator = load_relocator(relocator_file)
    assert (relocator.data_dir, relocator.spool_dir) == (
        tmp_path / "etc" / "d",
        str(tmp_path / "etc" / "s"),
    )
    # Given on the command line: the current directory's.
    given = load_companion(companion_file, state_dir=Path("here"), plugin_dirs=(Path("q"),))
    assert given.state_dir == Path.cwd() / "here"
    assert given.plugin_dirs == (Path.cwd() / "q",)


def test_a_missing_plugins_directory_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from companion.cli import _warn_missing_dirs
    from companion.settings import load as load_companion

    config = tmp_path / "c.toml"
    config.write_text('[companion]\nplugin_dirs = ["plugins", "there"]\n')
    (tmp_path / "there").mkdir()
    with caplog.at_level(logging.WARNING, logger="companion.cli"):
        _warn_missing_dirs(load_companion(config), config)
    assert [r.getMessage() for r in caplog.records] == [
        f"companion: plugins directory {tmp_path / 'plugins'} does not exist (plugin_dirs of "
        f"{config}; relative paths are taken from the config file's directory); create it or "
        "fix the setting"
    ]
