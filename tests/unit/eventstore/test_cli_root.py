"""The ``riak-events`` root command: one error line unless --debug, and the log formats."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from eventstore.cli import main


@click.command("boom")
@click.option("--kind", default="oserror")
def boom(kind: str) -> None:
    logging.getLogger("riak_events.test").warning("about to fail: %s", kind)
    if kind == "oserror":
        raise OSError(98, "Address already in use")
    if kind == "interrupt":
        raise KeyboardInterrupt
    if kind == "pipe":  # `riak-events ... | head`: the reader went away
        raise BrokenPipeError(32, "Broken pipe")
    raise click.ClickException("a message the command wrote itself")


@pytest.fixture
def runner() -> Iterator[CliRunner]:
    main.add_command(boom)
    try:
        yield CliRunner()
    finally:
        main.commands.pop("boom")
        logging.getLogger().handlers.clear()


def test_an_unexpected_failure_is_one_line_and_exit_1(runner: CliRunner) -> None:
    done = runner.invoke(main, ["boom"])
    assert done.exit_code == 1
    lines = [x for x in done.output.splitlines() if not x.startswith("20")]  # log lines
    assert lines == [
        "Error: OSError: [Errno 98] Address already in use "
        "(riak-events --debug shows the traceback)"
    ]
    assert "Traceback" not in done.output


def test_debug_shows_the_exception(runner: CliRunner) -> None:
    done = runner.invoke(main, ["--debug", "boom"])
    assert done.exit_code == 1
    assert isinstance(done.exception, OSError)  # re-raised, so the traceback is printed


def test_own_messages_and_ctrl_c(runner: CliRunner) -> None:
    done = runner.invoke(main, ["boom", "--kind", "click"])
    assert done.exit_code == 1
    assert done.output.endswith("Error: a message the command wrote itself\n")
    stopped = runner.invoke(main, ["boom", "--kind", "interrupt"])
    assert stopped.exit_code == 130
    assert stopped.output.endswith("interrupted\n")


def test_json_log_format(runner: CliRunner) -> None:
    done = runner.invoke(main, ["--log-format", "json", "boom", "--kind", "click"])
    record = json.loads(done.output.splitlines()[0])
    assert record["level"] == "WARNING"
    assert record["logger"] == "riak_events.test"
    assert record["msg"] == "about to fail: click"
    assert record["ts"].endswith("+00:00")


def test_library_chatter_is_quiet_unless_debug(runner: CliRunner) -> None:
    runner.invoke(main, ["boom", "--kind", "click"])
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
    assert logging.getLogger("kazoo.client").getEffectiveLevel() == logging.WARNING
    assert logging.getLogger("riak_events.test").getEffectiveLevel() == logging.INFO
    runner.invoke(main, ["--log-level", "DEBUG", "boom", "--kind", "click"])
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.DEBUG


def test_a_reader_that_goes_away_is_no_error(runner: CliRunner) -> None:
    done = runner.invoke(main, ["boom", "--kind", "pipe"])
    assert done.exit_code == 141  # 128 + SIGPIPE, as a process killed by SIGPIPE
    assert "Error" not in done.output and "BrokenPipe" not in done.output
