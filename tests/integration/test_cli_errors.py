"""One error policy for every command: each routine mistake is one line naming what to
fix, a non-zero exit status (2 for bad arguments, 1 for a failure, 3 for a range
without data), and no traceback; inputs are checked before Spark or gunicorn starts.

Each case runs the real ``riak-events`` console script in a subprocess (its
environment without ``RIAK_EVENTS_*``) against real servers where one is needed.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devnode.testing import DevnodeProcess, free_port
from fleet.harness import environment_without
from relocator.testing import write_config

CLI = str(Path(sys.executable).with_name("riak-events"))
#: What Spark prints when its JVM starts; none of these cases may get that far.
SPARK_STARTED = ("log4j", "SparkContext", "Setting default log level")
#: What gunicorn prints when its master starts.
GUNICORN_STARTED = ("Starting gunicorn", "Booting worker", "HaltServer")


def run(
    *args: str, cwd: Path | None = None, timeout_s: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``riak-events ARGS`` to its end; text stdout and stderr."""
    return subprocess.run(
        [CLI, *args],
        capture_output=True,
        text=True,
        env=environment_without(("RIAK_EVENTS_", "PROMETHEUS_MULTIPROC_DIR")),
        cwd=cwd,
        timeout=timeout_s,
        check=False,
    )


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one ``Error: ...`` line of stderr; fails unless there is exactly one, and no
    traceback anywhere."""
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    lines = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback TCP port held (listening) by this process."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


# -- relocator ---------------------------------------------------------------------------


def test_relocator_with_its_intake_port_in_use(tmp_path: Path, busy_port: int) -> None:
    config = write_config(
        tmp_path / "r.toml",
        data_dir=tmp_path / "data",
        clusters={"local": "http://127.0.0.1:1"},
        tcp_port=busy_port,
        metrics_port=free_port(),
    )
    done = run("relocator", "--config", str(config))
    assert done.returncode == 1
    assert error_line(done) == (
        f"Error: relocator: cannot listen on 127.0.0.1:{busy_port} (tcp_listen): "
        "address already in use"
    )


def test_relocator_with_its_metrics_port_in_use(tmp_path: Path, busy_port: int) -> None:
    config = write_config(
        tmp_path / "r.toml",
        data_dir=tmp_path / "data",
        clusters={"local": "http://127.0.0.1:1"},
        tcp_port=free_port(),
        metrics_port=busy_port,
    )
    done = run("relocator", "--config", str(config))
    assert done.returncode == 1
    assert error_line(done) == (
        f"Error: relocator: cannot listen on 127.0.0.1:{busy_port} (metrics_listen): "
        "address already in use"
    )


def test_relocator_cluster_url_without_scheme(tmp_path: Path) -> None:
    done = run(
        "relocator",
        "--data-dir",
        str(tmp_path / "data"),
        "--udp-listen",
        "",
        "--tcp-listen",
        f"127.0.0.1:{free_port()}",
        "--metrics-listen",
        "",
        "--cluster",
        "local=127.0.0.1:8098",
    )
    assert done.returncode == 1
    assert error_line(done) == (
        "Error: settings: cluster local: '127.0.0.1:8098' is not a Riak HTTP URL: "
        "give http://HOST:PORT, e.g. http://127.0.0.1:8098"
    )


def test_relocator_config_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    """A relative data_dir in the file is the file's directory's, wherever it is run
    from: a second relocator on it is refused naming that directory."""
    (tmp_path / "etc").mkdir()
    config = tmp_path / "etc" / "r.toml"
    config.write_text(
        '[relocator]\ndata_dir = "state"\nudp_listen = ""\n'
        f'tcp_listen = "127.0.0.1:{free_port()}"\nmetrics_listen = ""\n'
        '[clusters.local]\nnodes = ["http://127.0.0.1:1"]\n'
    )
    from relocator.settings import load

    assert load(config).data_dir == tmp_path / "etc" / "state"
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    from eventstore.dirlock import lock_directory

    lock = lock_directory(tmp_path / "etc" / "state")
    try:
        done = run("relocator", "--config", str(config), cwd=elsewhere)
    finally:
        lock.release()
    assert done.returncode == 1
    assert str(tmp_path / "etc" / "state") in error_line(done)
    assert not (elsewhere / "state").exists()


def test_loadgen_with_a_bad_target() -> None:
    done = run("loadgen", "--target", "localhost", "--duration-s", "0.1")
    assert done.returncode == 1
    assert "--target" in error_line(done)


# -- companion ---------------------------------------------------------------------------


def test_companion_node_without_scheme_is_refused_before_gunicorn(tmp_path: Path) -> None:
    done = run("companion", "--riak", "127.0.0.1:8098", "--state-dir", str(tmp_path / "s"))
    assert done.returncode == 2
    assert error_line(done) == (
        "Error: Invalid value for --node: '127.0.0.1:8098' is not a Riak HTTP URL: "
        "give http://HOST:PORT, e.g. http://127.0.0.1:8098"
    )
    assert "warning: --riak is deprecated; use --node" in done.stderr
    assert not any(s in done.stdout + done.stderr for s in GUNICORN_STARTED)
    assert not (tmp_path / "s").exists()


def test_companion_config_node_without_scheme(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[riak]\nnodes = ["127.0.0.1:8098"]\n')
    done = run("companion", "--config", str(config))
    assert done.returncode == 1
    assert error_line(done) == (
        f"Error: {config} [riak] nodes: '127.0.0.1:8098' is not a Riak HTTP URL: "
        "give http://HOST:PORT, e.g. http://127.0.0.1:8098"
    )
    assert not any(s in done.stdout + done.stderr for s in GUNICORN_STARTED)


def test_companion_old_node_name_meaning_is_explained(tmp_path: Path) -> None:
    done = run("companion", "--node", "dev1@127.0.0.1", "--state-dir", str(tmp_path / "s"))
    assert done.returncode == 2
    assert "give the logical name as --node-name" in error_line(done)


# -- read, tail --------------------------------------------------------------------------


def test_read_from_an_unreachable_node() -> None:
    port = free_port()
    done = run("read", "--node", f"http://127.0.0.1:{port}", "--dc", "ams4",
               "--start", "now-1m", "--end", "now")  # fmt: skip
    assert done.returncode == 1
    assert error_line(done).startswith(f"Error: node http://127.0.0.1:{port}: cannot reach it")
    assert "is Riak (or the devnode) running there?" in done.stderr


def test_read_node_without_scheme() -> None:
    done = run("read", "--node", "127.0.0.1:8098", "--dc", "ams4", "--start", "now-1m",
               "--end", "now")  # fmt: skip
    assert done.returncode == 2
    assert "'127.0.0.1:8098' is not a Riak HTTP URL" in error_line(done)


def test_read_bad_dc_and_bad_bound_name_the_option() -> None:
    done = run("read", "--dc", "ams-4", "--start", "now-1m", "--end", "now")
    assert done.returncode == 2
    assert error_line(done) == (
        "Error: Invalid value for --dc: 'ams-4' is not a dc: a dc is letters, digits and "
        "'_' (e.g. ams4)"
    )
    done = run("read", "--dc", "ams4", "--start", "yesterday", "--end", "now")
    assert done.returncode == 2
    assert error_line(done).startswith("Error: Invalid value for --start: 'yesterday' is not")


def test_read_missing_plugin_dir(tmp_path: Path) -> None:
    done = run("read", "--dc", "ams4", "--start", "now-1m", "--end", "now", "--substream",
               "web_5xx", "--plugin-dir", str(tmp_path / "nope"))  # fmt: skip
    assert done.returncode == 2
    assert f"Directory '{tmp_path / 'nope'}' does not exist" in error_line(done)


def test_tail_backwards_range(session_devnode: DevnodeProcess) -> None:
    done = run("tail", "--node", session_devnode.url, "--dc", "ams4", "--start", "now",
               "--end", "now-1h")  # fmt: skip
    assert done.returncode == 2
    assert "ends before it starts" in error_line(done)


def test_tail_checks_the_node_answers_as_riak(busy_port: int) -> None:
    """Something listens but does not answer HTTP as Riak (here: never answers)."""
    done = run("tail", "--node", f"http://127.0.0.1:{busy_port}", "--dc", "ams4",
               "--end", "now")  # fmt: skip
    assert done.returncode == 1
    assert error_line(done) == (
        f"Error: node http://127.0.0.1:{busy_port}: cannot reach it (timed out); is Riak "
        "(or the devnode) running there?"
    )


# -- substream test ----------------------------------------------------------------------

PLUGIN = Path(__file__).parents[2] / "substreams" / "examples" / "web_5xx.py"


def test_substream_test_backwards_range(session_devnode: DevnodeProcess) -> None:
    done = run("substream", "test", str(PLUGIN), "--node", session_devnode.url, "--dc", "ams4",
               "--start", "1700000010", "--end", "1700000000")  # fmt: skip
    assert done.returncode == 2
    assert error_line(done) == (
        "Error: Invalid value for --end: the range [1700000010, 1700000000) ends before it "
        "starts ('1700000000' < --start '1700000010'); ranges are [start, end), end exclusive"
    )


def test_substream_test_range_without_chunks(session_devnode: DevnodeProcess, dc: str) -> None:
    done = run("substream", "test", str(PLUGIN), "--devnode", session_devnode.url, "--dc", dc,
               "--start", "1700000000", "--end", "1700000005")  # fmt: skip
    assert done.returncode == 3
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert "warning: --devnode is deprecated; use --node" in done.stderr
    assert f"no chunks for dc {dc} in [1700000000, 1700000005)" in done.stderr


def test_substream_test_node_that_is_down() -> None:
    port = free_port()
    done = run("substream", "test", str(PLUGIN), "--node", f"http://127.0.0.1:{port}",
               "--dc", "ams4", "--start", "now-1m")  # fmt: skip
    assert done.returncode == 1
    assert error_line(done).startswith(f"Error: node http://127.0.0.1:{port}: cannot reach it")


# -- spark -------------------------------------------------------------------------------


def test_spark_export_bad_dc_fails_before_spark_starts(tmp_path: Path) -> None:
    done = run("spark", "export", "--node", "http://127.0.0.1:8098", "--dc", "ams-4",
               "--start", "now-1h", "--end", "now", "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 2
    assert "'ams-4' is not a dc" in error_line(done)
    assert not any(s in done.stdout + done.stderr for s in SPARK_STARTED)


def test_spark_export_against_a_down_node_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    done = run("spark", "export", "--node", f"http://127.0.0.1:{port}", "--dc", "ams4",
               "--start", "now-1h", "--end", "now", "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 1
    assert error_line(done).startswith(f"Error: node http://127.0.0.1:{port}: cannot reach it")
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert not any(s in done.stdout + done.stderr for s in SPARK_STARTED)


def test_spark_backfill_missing_plugin_dir_and_bad_dcs(tmp_path: Path) -> None:
    done = run("spark", "backfill", "--node", "http://127.0.0.1:8098", "--dc", "ams4",
               "--substream", "web_5xx", "--start", "now-1h", "--end", "now",
               "--plugin-dir", str(tmp_path / "nope"))  # fmt: skip
    assert done.returncode == 2
    assert "does not exist" in error_line(done)
    done = run("spark", "backfill", "--node", "http://127.0.0.1:8098", "--dc", "ams4,",
               "--substream", "web_5xx", "--start", "now-1h", "--end", "now")  # fmt: skip
    assert done.returncode == 2
    assert "no dc in 'ams4,'" in error_line(done)
    assert not any(s in done.stdout + done.stderr for s in SPARK_STARTED)
