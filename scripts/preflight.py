"""The external programs riak-events runs, checked before anything is started.

``make test`` calls this after installing the Debian packages, so a
machine that lacks one (a package list that missed it, a non-Debian host, an install
that failed half way) gets one line per missing program naming its Debian package,
instead of an error deep inside a test (``netavark: No such file or directory`` was one:
netavark runs ``iptables``).

    python3 scripts/preflight.py          # what the suite needs (`make test` runs it)

Exit status 0 when everything is there, 2 (with the list on stderr) when not. Standard
library only: it runs before the virtualenv exists. The table below is the one list;
``tests/unit/test_preflight.py`` holds it to the Makefile's ``APT_PACKAGES`` and to the
programs the tests look up.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: Directories searched besides PATH: iptables and ip live in /usr/sbin, which a
#: non-root PATH may not hold, though the programs that run them (netavark) find them.
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


@dataclass(frozen=True)
class Tool:
    """One external program.

    Attributes:
        name: what the line calls it.
        packages: the Debian packages that provide it (all are installed by ``make``).
        needed_by: who runs it, for the reader of the line.
        program: a program looked up on PATH (plus :data:`SBIN`), or an absolute path.
        perl_modules: Perl modules ``perl`` must load (the program is then ``perl``).
    """

    name: str
    packages: tuple[str, ...]
    needed_by: str
    program: str
    perl_modules: tuple[str, ...] = ()


TOOLS: tuple[Tool, ...] = (
    Tool(
        "perl with Sereal",
        ("libsereal-encoder-perl", "libsereal-decoder-perl", "libjson-pp-perl"),
        "the codec's interop tests (an independent Sereal implementation)",
        "perl",
        perl_modules=("Sereal::Encoder", "Sereal::Decoder", "JSON::PP"),
    ),
    Tool("erl", ("erlang-nox",), "the ring check against riak_core's hash", "erl"),
    Tool("erlc", ("erlang-nox",), "building and EUnit-testing the Riak hook", "erlc"),
    Tool("java", ("default-jre-headless",), "ZooKeeper and Spark", "java"),
    Tool(
        "zookeeper",
        ("zookeeper",),
        "relocator ownership, the substream registry (tests and `dev up`)",
        "/usr/share/java/zookeeper.jar",
    ),
    Tool("chromium", ("chromium",), "the status page checked in a browser", "/usr/bin/chromium"),
    Tool("promtool", ("prometheus",), "checking deploy/prometheus's rules", "promtool"),
    Tool("valgrind", ("valgrind",), "the codec's instruction-count guard (tests/perf)", "valgrind"),
    Tool("systemd-analyze", ("systemd",), "checking deploy/systemd's units", "systemd-analyze"),
    Tool("ip", ("iproute2",), "the chaos campaign's network namespaces", "ip"),
    Tool("podman", ("podman",), "the container tests (Docker Engine API)", "podman"),
    Tool("runc", ("runc",), "podman's container runtime", "runc"),
    Tool("netavark", ("netavark",), "podman's container networks", "/usr/lib/podman/netavark"),
    Tool(
        "aardvark-dns",
        ("aardvark-dns",),
        "names on podman's networks",
        "/usr/lib/podman/aardvark-dns",
    ),
    Tool("iptables", ("iptables",), "netavark's firewall rules for container networks", "iptables"),
    Tool("debootstrap", ("debootstrap",), "the containers' base image", "debootstrap"),
)


def packages() -> set[str]:
    """Every Debian package the table names."""
    return {p for tool in TOOLS for p in tool.packages}


def _found(program: str, path: str) -> bool:
    if program.startswith("/"):
        return Path(program).exists()
    return shutil.which(program, path=os.pathsep.join([path, *SBIN])) is not None


def _perl_loads(modules: Sequence[str], path: str) -> bool:
    perl = shutil.which("perl", path=path)
    if perl is None:
        return False
    args = [perl, *(f"-M{m}" for m in modules), "-e", "1"]
    return subprocess.run(args, capture_output=True, check=False).returncode == 0


def missing(*, path: str | None = None) -> list[Tool]:
    """The tools this machine lacks, in table order.

    Args:
        path: the PATH to search (default: the environment's).
    """
    search = os.environ.get("PATH", "") if path is None else path
    lacking = []
    for tool in TOOLS:
        there = _found(tool.program, search)
        if there and tool.perl_modules:
            there = _perl_loads(tool.perl_modules, search)
        if not there:
            lacking.append(tool)
    return lacking


def report(lacking: Sequence[Tool]) -> str:
    """One line per missing tool, then the one command that installs them all."""
    lines = [
        f"missing: {t.name} (Debian: {' '.join(t.packages)}), needed by {t.needed_by}"
        for t in lacking
    ]
    every = sorted({p for t in lacking for p in t.packages})
    lines.append(f"install them with: sudo apt-get install {' '.join(every)}")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    if argv:
        print("usage: preflight.py (no arguments)", file=sys.stderr)
        return 2
    lacking = missing()
    if lacking:
        print(report(lacking), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
