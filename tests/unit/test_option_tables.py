"""Each daemon's options are declared once (:mod:`eventstore.optiontable`), and the TOML
loader, the CLI, the environment variables and the example config agree with the table.

Per daemon (companion, relocator, devnode): the committed ``example-config.toml`` is the
table's rendering; the loader gives the table's default for every option not set, and
the example's value for every one the example sets; the command's options are exactly
the table's flagged options (plus ``--config``...), each with the table's help and the
one environment variable it declares; an unknown key and a value out of bounds are
errors naming the key, the known keys, the value and the bound.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
import tomllib

from companion.options import OPTIONS as COMPANION
from companion.settings import load as load_companion
from devnode.options import OPTIONS as DEVNODE
from devnode.settings import load as load_devnode
from eventstore.cli import main
from eventstore.optiontable import Option, OptionTable, Section, toml_value
from eventstore.settings import SettingsError
from relocator.options import OPTIONS as RELOCATOR
from relocator.settings import load as load_relocator
from relocator.settings import parse_cluster_option

REPO = Path(__file__).parents[2]


@dataclass(frozen=True)
class Daemon:
    table: OptionTable
    example: Path
    load: Callable[[Path | None], Any]
    value: Callable[[Any, str], Any]  # settings, dest -> the option's value in it
    cli_only: frozenset[str]  # flags of the command that are not table options


def _companion_value(s: Any, dest: str) -> Any:
    return s.riak.nodes if dest == "riak_nodes" else getattr(s, dest)


def _relocator_value(s: Any, dest: str) -> Any:
    if dest.startswith("zk_"):
        zk = s.zookeeper
        name = dest.removeprefix("zk_")
        return getattr(zk, name) if zk else RELOCATOR[dest].default
    return getattr(s, dest)


def _devnode_value(s: Any, dest: str) -> Any:
    if dest.startswith("hook_"):
        return getattr(s.hook, dest.removeprefix("hook_"))
    if dest == "listen":
        return f"{s.host}:{s.port}"
    if dest == "down_nodes":
        return tuple(sorted(s.down_nodes))
    return getattr(s, dest)


def _has_data_dir(config: Path | None) -> bool:
    return config is not None and "data_dir" in tomllib.loads(config.read_text()).get("devnode", {})


_CLUSTER = (parse_cluster_option("a=http://127.0.0.1:8098"),)
_DATA_DIR = "/tmp/riak-events-test-option-tables"  # never created: load only

DAEMONS = {
    "companion": Daemon(
        COMPANION,
        REPO / "companion" / "example-config.toml",
        load_companion,
        _companion_value,
        frozenset({"--config"}),
    ),
    "relocator": Daemon(
        RELOCATOR,
        REPO / "relocator" / "example-config.toml",
        # The example names its clusters; with no file, one must be given.
        lambda config: load_relocator(config, clusters=() if config else _CLUSTER),
        _relocator_value,
        frozenset({"--config", "--cluster"}),
    ),
    "devnode": Daemon(
        DEVNODE,
        REPO / "devnode" / "example-config.toml",
        lambda config: load_devnode(config, data_dir=None if _has_data_dir(config) else _DATA_DIR),
        _devnode_value,
        frozenset({"--config"}),
    ),
}


def _same(option: Option, loaded: Any, declared: Any, base_dir: Path | None) -> bool:
    if option.kind == "path":
        declared = str(base_dir / declared) if base_dir and declared else declared
        return str(loaded) == str(declared)
    if option.kind == "paths":
        return tuple(str(p) for p in loaded) == tuple(
            str(base_dir / p) if base_dir else p for p in declared
        )
    if option.kind in ("strs",):
        return tuple(loaded) == tuple(declared)
    return bool(loaded == declared)


@pytest.mark.parametrize("name", sorted(DAEMONS))
def test_the_example_config_is_the_tables_rendering(name: str) -> None:
    daemon = DAEMONS[name]
    assert daemon.example.read_text() == daemon.table.render(), (
        f"{daemon.example} is not generated from the {name} option table: run "
        f"python -m eventstore.optiontable <package>.options > {daemon.example.relative_to(REPO)}"
    )


@pytest.mark.parametrize("name", sorted(DAEMONS))
def test_every_option_is_in_the_example_and_the_example_in_the_table(name: str) -> None:
    daemon = DAEMONS[name]
    text = daemon.example.read_text()
    # Uncommented, it is still valid TOML whose keys are the table's.
    data = tomllib.loads(_COMMENTED.sub(r"\1", text))
    for option in daemon.table.options:
        assert f"\n{option.name} = " in text or f"\n# {option.name} = " in text, option.key
        assert option.name in data.get(option.section, {}), option.key
    for section in daemon.table.sections:
        if section.free_form is None:
            known = {o.name for o in daemon.table.in_section(section.name)}
            assert set(data.get(section.name, {})) <= known, section.name


@pytest.mark.parametrize("name", sorted(DAEMONS))
def test_the_loader_gives_the_declared_defaults(name: str) -> None:
    daemon = DAEMONS[name]
    settings = daemon.load(None)
    for option in daemon.table.options:
        if option.default is None:  # computed by the loader (said in its help)
            continue
        loaded = daemon.value(settings, option.dest)
        assert _same(option, loaded, option.default, None), (option.key, loaded)


@pytest.mark.parametrize("name", sorted(DAEMONS))
def test_the_loader_reads_every_key_of_the_example(name: str) -> None:
    daemon = DAEMONS[name]
    settings = daemon.load(daemon.example)
    for option in daemon.table.options:
        section = next(s for s in daemon.table.sections if s.name == option.section)
        if option.commented or section.commented:
            continue
        loaded = daemon.value(settings, option.dest)
        expected = option.example_value
        assert _same(option, loaded, expected, daemon.example.parent), (option.key, loaded)


#: Non-default values that need more than the kind's rule (checks, cross-checks).
_OTHER: dict[str, Any] = {
    "listen": "127.0.0.1:7001",
    "udp_listen": "127.0.0.1:7002",
    "tcp_listen": "127.0.0.1:7003",
    "metrics_listen": "",
    "node": "n2@h",
    "ring_nodes": ("n1@h", "n2@h"),
    "nodes": ("n1@h", "n2@h"),
    "nodename": "n2@h",
    "down_nodes": ("n2@h",),
    "ring_size": 128,
    "peers": ("10.0.0.0/8",),
    "status_peers": ("10.1.0.0/16",),
    "metrics_peers": ("10.2.0.0/16",),
    "zk_hosts": "z1:2181,z2:2181",
    "zk_root": "/elsewhere",
    "zk_auth": "user:secret",
    "trusted_keys": (),
    "riak_nodes": ("http://127.0.0.2:8098",),
    "writer_id": 17,
}


def _other(option: Option) -> Any:
    """A valid value of ``option`` that is not its default."""
    if option.dest in _OTHER:
        return _OTHER[option.dest]
    if option.choices:
        return next(c for c in option.choices if c != option.default)
    default = option.default
    others: dict[str, Any] = {
        "int": (default or 0) + 1 if option.kind == "int" else None,
        "float": (default or 0.0) + 0.5 if option.kind == "float" else None,
        "bool": not default,
        "str": f"{default or 'x'}-other",
        "path": "elsewhere",
        "paths": ("p1", "p2"),
        "strs": ("a1", "a2"),
    }
    return others[option.kind]


@pytest.mark.parametrize("name", sorted(DAEMONS))
def test_the_loader_reads_every_key_into_its_field(name: str, tmp_path: Path) -> None:
    daemon = DAEMONS[name]
    lines = []
    for section in daemon.table.sections:
        options = [o for o in daemon.table.in_section(section.name)]
        if section.free_form is not None:
            continue
        lines.append(f"[{section.name}]")
        lines += [f"{o.name} = {toml_value(_other(o))}" for o in options]
    if name == "relocator":
        lines.append('[clusters.a]\nnodes = ["http://127.0.0.1:8098"]')
    config = tmp_path / "all.toml"
    config.write_text("\n".join(lines) + "\n")
    settings = daemon.load(config)
    for option in daemon.table.options:
        if (
            daemon.table.sections[
                [s.name for s in daemon.table.sections].index(option.section)
            ].free_form
            is not None
        ):
            continue
        loaded = daemon.value(settings, option.dest)
        assert _same(option, loaded, _other(option), tmp_path), (option.key, loaded)


#: A commented-out key or table of an example config (not a help line).
_COMMENTED = re.compile(r"^# ([a-z0-9_]+ = .*|\[[a-z0-9_.]+\])$", re.MULTILINE)


def _command(name: str) -> click.Command:
    command = main.get_command(click.Context(main), name)
    assert command is not None, name
    return command


@pytest.mark.parametrize("name", sorted(DAEMONS))
def test_the_cli_options_are_the_tables(name: str) -> None:
    daemon = DAEMONS[name]
    params = {
        p.opts[0]: p for p in _command(name).params if isinstance(p, click.Option) and not p.hidden
    }
    flagged = {o.cli: o for o in daemon.table.cli_options() if o.cli}
    assert set(params) - daemon.cli_only == set(flagged)
    for flag, option in flagged.items():
        param = params[flag]
        assert param.name == option.dest, flag
        assert param.envvar == option.env, flag
        assert param.help == daemon.table.cli_help(option), flag
        assert param.default in (None, ()), flag  # the file or the default decides
        hidden = {
            q.opts[0] for q in _command(name).params if isinstance(q, click.Option) and q.hidden
        }
        assert set(option.cli_aliases) <= hidden, flag


def _env_text(option: Option) -> str:
    fallback = {
        "zk_hosts": "127.0.0.1:2181",
        "riak_nodes": ("http://127.0.0.1:8098",),
        "spool_dir": "spool",
        "plugin_dirs": ("plugins",),
        "node": "dev1@127.0.0.1",
        "data_dir": "data",
    }
    value = fallback.get(option.dest, option.example_value)
    if option.kind == "bool":
        return "false" if value else "true"  # not the default: it must come from the env
    if isinstance(value, tuple):
        return " ".join(value)
    return str(value)


@pytest.mark.parametrize("name", sorted(DAEMONS))
def test_each_cli_option_reads_its_declared_variable_and_no_other(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = DAEMONS[name]
    command = _command(name)
    for option in daemon.table.cli_options():
        assert option.env and option.env.startswith(f"RIAK_EVENTS_{name.upper()}_"), option.key
        monkeypatch.setenv(option.env, _env_text(option))
    ctx = command.make_context(name, [], auto_envvar_prefix=f"RIAK_EVENTS_{name.upper()}")
    for option in daemon.table.cli_options():
        assert ctx.params[option.dest] not in (None, ()), option.env
        source = ctx.get_parameter_source(option.dest)
        assert source is click.core.ParameterSource.ENVIRONMENT, option.env


def test_the_riak_url_variable_does_not_set_the_node_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # --node-name's parameter is "node": click's automatic variable for it would be
    # RIAK_EVENTS_COMPANION_NODE, the variable of --node (the Riak URL).
    monkeypatch.setenv("RIAK_EVENTS_COMPANION_NODE", "http://127.0.0.1:8098")
    ctx = _command("companion").make_context(
        "companion", [], auto_envvar_prefix="RIAK_EVENTS_COMPANION"
    )
    assert ctx.params["riak_nodes"] == ("http://127.0.0.1:8098",)
    assert ctx.params["node"] is None


@pytest.mark.parametrize("name", sorted(DAEMONS))
def test_an_unknown_key_names_it_and_the_known_ones(name: str, tmp_path: Path) -> None:
    daemon = DAEMONS[name]
    section = daemon.table.sections[0]
    config = tmp_path / "c.toml"
    config.write_text(f"[{section.name}]\nbogus_key = 1\n")
    with pytest.raises(SettingsError) as raised:
        daemon.load(config)
    message = str(raised.value)
    assert "bogus_key" in message and f"[{section.name}]" in message
    assert "known: " + ", ".join(o.name for o in daemon.table.in_section(section.name)) in message
    config.write_text("[bogus_table]\n")
    with pytest.raises(SettingsError, match=r"unknown table\(s\) \[bogus_table\] \(known: "):
        daemon.load(config)


@pytest.mark.parametrize("name", sorted(DAEMONS))
def test_a_value_out_of_bounds_names_key_value_and_bound(name: str, tmp_path: Path) -> None:
    daemon = DAEMONS[name]
    bounded = [o for o in daemon.table.options if o.bound_text() and o.kind in ("int", "float")]
    assert bounded
    config = tmp_path / "c.toml"
    for option in bounded:
        low = option.gt if option.gt is not None else option.ge
        bad = low - 1 if low is not None else (option.le or 0) + 1
        value: int | float = int(bad) if option.kind == "int" else float(bad)
        config.write_text(f"[{option.section}]\n{option.name} = {value!r}\n")
        with pytest.raises(SettingsError) as raised:
            daemon.load(config)
        message = str(raised.value)
        assert f"{option.name} = {value!r} is out of bounds" in message, message
        assert option.bound_text() in message, message
        assert str(config) in message and f"[{option.section}]" in message, message


def test_a_value_given_in_code_or_on_the_command_line_is_bound_checked_too() -> None:
    with pytest.raises(SettingsError, match=r"--workers: workers = 0 is out of bounds"):
        load_companion(None, workers=0)
    with pytest.raises(SettingsError, match=r"--writer-id: writer_id = 9001 .* <= 9000"):
        load_relocator(None, writer_id=9001, clusters=_CLUSTER)
    with pytest.raises(SettingsError, match=r"--listen: listen = 'nowhere': not HOST:PORT"):
        load_devnode(None, data_dir=_DATA_DIR, listen="nowhere")


def test_a_listen_address_is_checked_and_the_relocator_may_leave_one_empty() -> None:
    with pytest.raises(SettingsError, match=r"udp_listen = 'nowhere': not HOST:PORT \(or \"\""):
        load_relocator(None, clusters=_CLUSTER, udp_listen="nowhere")
    assert load_relocator(None, clusters=_CLUSTER, udp_listen="").udp_listen == ""
    with pytest.raises(SettingsError, match=r"listen = '': not HOST:PORT$"):
        load_devnode(None, data_dir=_DATA_DIR, listen="")


def test_a_wrong_type_names_the_key_and_the_type(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[companion]\nworkers = "2"\n')
    with pytest.raises(SettingsError, match=r"\[companion\]: workers must be an integer, not '2'"):
        load_companion(config)


def test_a_table_refuses_an_option_declared_twice_or_outside_its_sections() -> None:
    a = Option("s", "x", "int", 1, "x.")
    with pytest.raises(ValueError, match="declared twice"):
        OptionTable("d", "", [Section("s")], [a, Option("s", "x", "int", 2, "x again.")])
    with pytest.raises(ValueError, match="undeclared section"):
        OptionTable("d", "", [Section("t")], [a])
