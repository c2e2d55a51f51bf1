"""``riak-events dev up | down | status``: a whole local stack in one command.

    riak-events dev up                       # foreground: merged log, Ctrl-C stops it all
    riak-events dev up --detach --loadgen    # background, with a load generator
    riak-events dev status [--json]          # what runs, or why the last stack ended
    riak-events dev stop companion           # one process; the others run on
    riak-events dev start companion          # ... and back (restart: both)
    riak-events dev down

Every option is also an environment variable ``RIAK_EVENTS_DEV_<COMMAND>_<OPTION>``.
The data directory (default ``$XDG_STATE_HOME/riak-events/dev``, i.e.
``~/.local/state/riak-events/dev``: outside any source tree, and found again by
``status`` and ``down`` from any directory) holds every process's data, configs and
logs, and the state file (:mod:`fleet.devstack.state`). ``up`` writes the context file
(``$RIAK_EVENTS_CONTEXT``, default ``~/.config/riak-events/context.toml``;
:mod:`eventstore.context`) with the stack's addresses, so every command finds a stack on
``--free-ports`` without flags; the stack's end removes it.

Exit status: ``up`` 0 after a clean stop, 1 when a process failed to start or died;
``status`` 0 when every process is healthy, 1 when one is not (a process stopped with
``dev stop`` included), 3 when no stack runs; ``stop|start|restart`` 0 done, 1 refused
or failed, 3 when no stack runs; ``down`` 0 (also when nothing ran).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import click

from eventstore.context import context_path
from eventstore.options import json_option
from fleet.devstack import supervisor
from fleet.devstack.control import ACTIONS, send
from fleet.devstack.errors import DevStackError
from fleet.devstack.state import read_ended, read_state

__all__ = ["dev"]

#: Outside any source tree, and the same from every directory (status and down find it).
DEFAULT_DATA_DIR = (
    Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    / "riak-events"
    / "dev"
)

_DATA_DIR = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DATA_DIR,
    show_default=True,
    help="Where the stack keeps its data, configs, logs and state file.",
)


@click.group()
def dev() -> None:
    """A local stack (ZooKeeper, devnode, companion, relocator) in one command."""


@dev.command()
@_DATA_DIR
@click.option("--plugin-dir", "plugin_dirs", multiple=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="The companion's plugins directory, hot reloaded (repeat; default "
              "DATA_DIR/plugins). The installed example plugins run too.")  # fmt: skip
@click.option("--zookeeper", default=None, metavar="HOSTS",
              help="Use this ZooKeeper instead of starting Debian's.")  # fmt: skip
@click.option("--no-zookeeper", is_flag=True, help="Run without ZooKeeper.")
@click.option("--zk-root", default="/riak-events", show_default=True)
@click.option("--loadgen", is_flag=True, help="Also run a load generator.")
@click.option("--loadgen-rate", type=click.FloatRange(min=0, min_open=True), default=200.0,
              show_default=True, help="Its events per second.")  # fmt: skip
@click.option("--free-ports", is_flag=True,
              help="Let the OS pick free ports instead of the documented defaults "
              "(8098, 5000, 5140-5141, 9141, 2181).")  # fmt: skip
@click.option("--detach", is_flag=True, help="Run in the background (dev status, dev down).")
@click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path), hidden=True,
              help="Write the merged log here instead of stdout.")  # fmt: skip
def up(  # noqa: PLR0917 (one parameter per click option)
    data_dir: Path,
    plugin_dirs: tuple[Path, ...],
    zookeeper: str | None,
    no_zookeeper: bool,
    zk_root: str,
    loadgen: bool,
    loadgen_rate: float,
    free_ports: bool,
    detach: bool,
    log_file: Path | None,
) -> None:
    """Start ZooKeeper, a devnode whose hook drives a companion, a relocator and
    (--loadgen) a producer; print the endpoints; stream one merged log; stop everything
    on Ctrl-C."""
    data_dir = data_dir.expanduser().absolute()
    options = supervisor.options_for(
        data_dir,
        plugin_dirs=tuple(p.expanduser().absolute() for p in plugin_dirs),
        zookeeper=zookeeper,
        no_zookeeper=no_zookeeper,
        zk_root=zk_root,
        loadgen_rate=loadgen_rate if loadgen else 0.0,
        free_ports=free_ports,
        context_file=context_path(os.environ),
    )
    if detach:
        argv = ["up", "--data-dir", str(data_dir), "--zk-root", zk_root]
        argv += [a for p in options.plugin_dirs for a in ("--plugin-dir", str(p))]
        argv += ["--zookeeper", zookeeper] if zookeeper else []
        argv += ["--no-zookeeper"] if no_zookeeper else []
        argv += ["--loadgen", "--loadgen-rate", f"{loadgen_rate:g}"] if loadgen else []
        argv += ["--free-ports"] if free_ports else []
        _detach(data_dir, argv)
        return
    with contextlib.ExitStack() as files:
        out: TextIO = sys.stdout
        if log_file is not None:
            out = files.enter_context(log_file.open("a", buffering=1))
        try:
            code = supervisor.run(options, out)
        except DevStackError as e:
            raise click.ClickException(str(e)) from None
    if code:
        raise SystemExit(code)


def _detach(data_dir: Path, argv: list[str], timeout_s: float = 180.0) -> None:
    """Run ``dev up`` as a background supervisor and return once the stack is up."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / "dev.log"
    argv += ["--log-file", str(log)]
    start_size = log.stat().st_size if log.exists() else 0
    child = subprocess.Popen(
        [sys.executable, "-m", "fleet.devstack", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log.open("a"),
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = read_state(data_dir)
        if state and state.get("pid") == child.pid and state.get("phase") == "running":
            click.echo(
                supervisor.banner(state["endpoints"], detached=True, context=state.get("context"))
            )
            return
        if child.poll() is not None:
            raise click.ClickException(_why_not_started(log, start_size, child.returncode))
        time.sleep(0.2)
    child.send_signal(signal.SIGTERM)
    raise click.ClickException(
        f"the dev stack was not up after {timeout_s:g} s; stopping it. Log: {log}"
    )


def _why_not_started(log: Path, offset: int, code: int) -> str:
    """The detached supervisor's failure, as ``dev up`` in the foreground says it: its
    own one-line error as is (without a second ``Error:``), else its log's tail."""
    tail = _tail(log, offset).splitlines()
    errors = [line.removeprefix("Error: ") for line in tail if line.startswith("Error: ")]
    if len(errors) == 1 and len(tail) == 1:
        return errors[0]
    text = "\n".join(line.removeprefix("Error: ") for line in tail)
    return f"the dev stack did not start (exit {code}; log {log}):\n{text}"


def _tail(path: Path, offset: int, lines: int = 25) -> str:
    with contextlib.suppress(OSError):
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])
    return ""


@dev.command()
@_DATA_DIR
@click.option("--timeout-s", type=click.FloatRange(min=1), default=90.0, show_default=True,
              help="How long to wait for a clean stop before killing what is left.")  # fmt: skip
def down(data_dir: Path, timeout_s: float) -> None:
    """Stop the stack running from DATA_DIR (started with dev up --detach, or in
    another terminal)."""
    data_dir = data_dir.expanduser().absolute()
    state = read_state(data_dir)
    if state is None:
        click.echo(f"no dev stack runs from {data_dir}")
        return
    killed = supervisor.stop_stack(data_dir, state, timeout_s=timeout_s)
    if killed:
        click.echo(f"killed what was left: {', '.join(killed)}", err=True)
    click.echo(f"dev stack in {data_dir} stopped")


@dev.command()
@_DATA_DIR
@json_option
def status(data_dir: Path, as_json: bool) -> None:
    """Show what runs: each process, its health and its endpoint."""
    data_dir = data_dir.expanduser().absolute()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per health probe
    state = read_state(data_dir)
    if state is None:
        ended = read_ended(data_dir)
        if as_json:
            report = {"data_dir": str(data_dir), "running": False}
            if ended is not None:
                report["ended"] = ended.get("ended")
            click.echo(json.dumps(report))
        else:
            last = f"; {supervisor.ended_text(ended)}" if ended is not None else ""
            click.echo(f"no dev stack runs from {data_dir}{last}", err=True)
        raise SystemExit(3)
    report = supervisor.describe(state)
    click.echo(json.dumps(report, indent=2) if as_json else _status_text(report))
    if not report["healthy"]:
        raise SystemExit(1)


def _status_text(report: dict[str, Any]) -> str:
    sup = report["supervisor"]
    up_s = int(report["uptime_s"] or 0)
    lines = [
        f"dev stack in {report['data_dir']}: {report['phase']}"
        + (f", up {up_s // 60}m{up_s % 60:02d}s" if sup["alive"] else "")
        + f" (supervisor pid {sup['pid']}{'' if sup['alive'] else ', GONE'})"
    ]
    lines.append(f"  {'process':<10} {'pid':>7}  {'health':<24} endpoint")
    for name, p in report["processes"].items():
        lines.append(f"  {name:<10} {p['pid'] or '-':>7}  {p['health']:<24} {p['endpoint'] or ''}")
    lines.append(f"  status page: {report['endpoints'].get('status_page', '-')}")
    return "\n".join(lines)


def _one_process(action: str) -> click.Command:
    """``dev stop|start|restart PROCESS``: asked of the stack's supervisor."""

    @click.command(action, help=f"{action.capitalize()} one process of the stack; the "
                   "others run on (PROCESS: zookeeper, devnode, companion, relocator, "
                   "loadgen).")  # fmt: skip
    @click.argument("process", type=click.Choice(["zookeeper", "devnode", "companion",
                                                  "relocator", "loadgen"]))  # fmt: skip
    @_DATA_DIR
    @click.option("--timeout-s", type=click.FloatRange(min=1), default=150.0, show_default=True,
                  help="How long to wait for the supervisor (a start waits for its "
                  "health check).")  # fmt: skip
    def command(process: str, data_dir: Path, timeout_s: float) -> None:
        data_dir = data_dir.expanduser().absolute()
        state = read_state(data_dir)
        if state is None:
            click.echo(f"no dev stack runs from {data_dir}", err=True)
            raise SystemExit(3)
        pid, start = state.get("pid"), state.get("pid_start")
        if not supervisor.same_process(pid, start):
            raise click.ClickException(
                f"the supervisor of the stack in {data_dir} (pid {pid}) is gone: dev down "
                f"--data-dir {data_dir}, then dev up"
            )
        answer = send(data_dir, action, process, timeout_s=timeout_s,
                      alive=lambda: supervisor.same_process(pid, start))  # fmt: skip
        if answer is None:
            raise click.ClickException(
                f"the supervisor (pid {pid}) did not answer in {timeout_s:g} s; log: "
                f"{data_dir / 'dev.log'} (detached) or its terminal"
            )
        if not answer.get("ok"):
            raise click.ClickException(str(answer.get("message")))
        click.echo(str(answer.get("message")))

    return command


for _action in ACTIONS:
    dev.add_command(_one_process(_action))
