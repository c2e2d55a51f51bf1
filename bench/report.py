"""One benchmark report: every benchmark in bench/ in a short mode, one table.

    .venv/bin/python bench/report.py [--budget-s 600] [--only sereal,relocator]
                                     [--format text|markdown] [--json-out report.json]

Each benchmark runs as a subprocess with its short arguments and ``--json``, which makes
it print its headline figures as one JSON object on its last line of output (see
:func:`emit`); a benchmark that crashes, times out or lacks an optional dependency is a
row saying so, not a dead report. The table has, per figure: the path measured, the
figure, its anchor (measured in the same run where the benchmark has one, else the
figure bench/README.md records), the figure divided by the anchor and the target; per
benchmark: its wall time, the CPU seconds of its whole process tree (the benchmark and
every process it started and reaped: ``wait4``) with the benchmark's own split by
process where it measures one, and the 1-minute load average at its start and end. The
machine is shared: read the ratios and the CPU seconds, not the wall times.

The benchmarks' long modes are unchanged (each script's own defaults); this only picks
small sizes. Every benchmark's output goes to a log directory, printed at the end.

Protocol for a benchmark (``--json``): ``emit([figure(...), ...], cpu_s={...})`` as the
last thing it prints.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import resource
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

_T = TypeVar("_T")

BENCH_DIR = Path(__file__).resolve().parent
#: SIGINT first (the benchmark's ``finally`` stops the servers it started), then SIGKILL
#: of every process it had started, this long after.
INTERRUPT_GRACE_S = 20.0


def figure(
    path: str,
    value: float,
    unit: str,
    *,
    anchor: str = "",
    anchor_value: float | None = None,
    target: str = "",
) -> dict[str, Any]:
    """One headline figure of a benchmark.

    Args:
        path: what was measured, e.g. ``"Sereal decode, compiled"``.
        value: the figure, in ``unit``.
        unit: e.g. ``"events/s"``, ``"ms CPU/chunk"``, ``"s p99"``.
        anchor: what the figure is compared with, e.g. ``"Perl Sereal XS (same run)"``.
        anchor_value: the anchor in the same unit (the report prints value / anchor).
        target: the goal as text, e.g. ``">= 1.3x"``.
    """
    return {
        "path": path,
        "value": value,
        "unit": unit,
        "anchor": anchor,
        "anchor_value": anchor_value,
        "target": target,
    }


def emit(figures: Sequence[dict[str, Any]], cpu_s: dict[str, float] | None = None) -> None:
    """Print a benchmark's headline figures as the one JSON line the report reads.

    Args:
        figures: from :func:`figure`.
        cpu_s: CPU seconds by process (role) the benchmark measured itself, if any.
    """
    rounded = {k: round(v, 2) for k, v in (cpu_s or {}).items()}
    print(json.dumps({"figures": list(figures), "cpu_s": rounded}), flush=True)


def best(repeat: int, run: Callable[[], _T]) -> tuple[float, _T]:
    """Call ``run`` ``repeat`` times (at least once).

    Returns:
        The least wall time of a call, seconds, and what the last call returned.
    """
    least = float("inf")
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        out = run()
        least = min(least, time.perf_counter() - t0)
    return least, out


@dataclass(frozen=True)
class Bench:
    """A benchmark of bench/ and how the report runs it."""

    name: str
    script: str
    args: str = ""  # the short mode, as shell words
    cap_s: float = 120.0  # at most this much of the budget
    json: bool = True  # the script has --json
    needs: tuple[str, ...] = ()  # optional modules it cannot run without
    extra: str = ""  # the pip extra that installs them
    excluded: str = ""  # why the short report does not run it


BENCHES = (
    Bench("checksum", "checksum_bench.py", "--seconds 0.5", cap_s=30),
    Bench(
        "sereal",
        "sereal_bench.py",
        "--events 10000 --repeat 5 --pure-repeat 1",
        cap_s=90,
    ),
    Bench("sandbox", "sandbox_bench.py", "--runs 100 --rounds 3", cap_s=60),
    Bench("devnode", "devnode_bench.py", "--seconds 0.5", cap_s=60),
    Bench(
        "relocator",
        "relocator_bench.py",
        "--mode all --events 100000 --frames 20000 --spool-files 8 --spool-events 2000 --seconds 5",
        cap_s=180,
    ),
    Bench(
        "companion",
        "companion_bench.py",
        "--chunks 10 --epochs 1 --isolation chunk",
        cap_s=180,
    ),
    Bench(
        "consumer",
        "consumer_bench.py",
        "--epochs 6 --events 2000 --repeat 2 --tail-s 5",
        cap_s=150,
    ),
    Bench(
        "fallback",
        "fallback_bench.py",
        "--epochs 3 --events 2000 --repeat 1",
        cap_s=90,
    ),
    Bench(
        "fairness",
        "fairness_bench.py",
        "--chunks 12 --per-epoch 6 --quarantine on",
        cap_s=120,
        json=False,
    ),
    Bench(
        "spark",
        "spark_bench.py",
        "--epochs 30 --repeat 2 --rows anchor,variant",
        cap_s=180,
        needs=("pyspark",),
        extra="spark",
    ),
    Bench(
        "spark_jobs",
        "spark_jobs_bench.py",
        "--epochs 30 --repeat 2 --live-epochs 5 --live-events 200",
        cap_s=180,
        needs=("pyspark",),
        extra="spark",
    ),
    Bench(
        "http_client",
        "http_client_bench.py",
        "--rounds 20",
        cap_s=60,
        json=False,
        needs=("aiohttp", "urllib3"),
        extra="bench",
    ),
    Bench(
        "chaos",
        "chaos.py",
        excluded="a campaign, not a figure: its smallest meaningful run takes minutes and "
        "root (sudo .venv/bin/python bench/chaos.py --faults 20 --duration-s 120)",
    ),
)


@dataclass
class Outcome:
    """What one benchmark's run gave."""

    bench: Bench
    status: str  # "ok", or why there are no figures
    figures: list[dict[str, Any]] = field(default_factory=list)
    cpu_s: dict[str, float] = field(default_factory=dict)
    tree_cpu_s: float | None = None
    wall_s: float | None = None
    load: tuple[float, float] | None = None
    log: Path | None = None


def descendants(pid: int) -> dict[int, str]:
    """Every live process under ``pid`` (from /proc's children lists), with its start
    time (so that a pid reused after it exits is not taken for it)."""
    found: dict[int, str] = {}
    pending = [pid]
    while pending:
        p = pending.pop()
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found.update((c, _started(c)) for c in children)
            pending += children
    return found


def _started(pid: int) -> str:
    """The process's start time in clock ticks since boot ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _wait(pid: int, deadline: float) -> tuple[int, resource.struct_rusage] | None:
    """Reap ``pid`` by ``deadline``: (wait status, its rusage), or None if still running."""
    while True:
        got, status, usage = os.wait4(pid, os.WNOHANG)
        if got == pid:
            return status, usage
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)


def run_one(bench: Bench, timeout_s: float, log_dir: Path, python: str) -> Outcome:
    """Run one benchmark in its short mode; never raises for the benchmark's failure."""
    log = log_dir / f"{bench.name}.log"
    argv = [python, str(BENCH_DIR / bench.script), *shlex.split(bench.args)]
    if bench.json:
        argv.append("--json")
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    with log.open("w") as out, (log_dir / f"{bench.name}.stderr").open("w") as err:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        pid = os.posix_spawn(
            python, argv, dict(os.environ, PYTHONUNBUFFERED="1"),
            file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                          (os.POSIX_SPAWN_DUP2, err.fileno(), 2)],
        )  # fmt: skip
        reaped = _wait(pid, t0 + timeout_s)
        timed_out = reaped is None
        if reaped is None:
            started = descendants(pid)
            os.kill(pid, signal.SIGINT)  # its finally clauses stop the servers it started
            reaped = _wait(pid, time.monotonic() + INTERRUPT_GRACE_S)
            if reaped is None:
                os.kill(pid, signal.SIGKILL)
                reaped = _wait(pid, time.monotonic() + 10)
            for p, since in started.items():  # what is left of them
                if since and _started(p) == since:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(p, signal.SIGKILL)
    outcome = Outcome(
        bench, "ok", wall_s=time.monotonic() - t0, load=(load0, os.getloadavg()[0]), log=log
    )
    if reaped is not None:
        status, usage = reaped
        outcome.tree_cpu_s = usage.ru_utime + usage.ru_stime
        code = os.waitstatus_to_exitcode(status)
    else:
        code = None
    parsed = _headline(log.read_text(errors="replace")) if bench.json else None
    if parsed is not None:  # kept even when it failed afterwards (e.g. a target missed)
        outcome.figures = list(parsed["figures"])
        outcome.cpu_s = dict(parsed.get("cpu_s") or {})
    if timed_out:
        outcome.status = f"failed: over its time limit ({timeout_s:.0f} s), interrupted"
    elif code != 0:
        outcome.status = f"failed: exit {code}; {_last_line(log_dir / f'{bench.name}.stderr')}"
    elif not bench.json:
        outcome.status = "ok (no --json: figures in its log)"
    elif parsed is None:
        outcome.status = "failed: no headline JSON on its last lines"
    return outcome


def _headline(stdout: str) -> dict[str, Any] | None:
    """The last stdout line that is a JSON object with figures (see :func:`emit`)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and "figures" in value:
                return value
    return None


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:160] if lines else "(no stderr)"


def _num(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def table(outcomes: Sequence[Outcome]) -> list[tuple[str, ...]]:
    """The report's rows: header first."""
    rows: list[tuple[str, ...]] = [
        ("bench", "path", "figure", "anchor", "x anchor", "target", "wall s", "CPU s", "load")
    ]
    for o in outcomes:
        cpu = "" if o.tree_cpu_s is None else f"tree {o.tree_cpu_s:.1f}"
        if o.cpu_s:
            cpu += " (" + ", ".join(f"{k} {v:.1f}" for k, v in o.cpu_s.items()) + ")"
        wall = "" if o.wall_s is None else f"{o.wall_s:.0f}"
        load = "" if o.load is None else f"{o.load[0]:.1f} -> {o.load[1]:.1f}"
        if o.status != "ok" or not o.figures:
            ran = f" ({wall} s, CPU s {cpu}, load {load})" if wall else ""
            rows.append((o.bench.name, o.status + ran))  # a note across the row
            wall = cpu = load = ""
        for i, f in enumerate(o.figures):
            anchor = f["anchor"]
            if f.get("anchor_value") is not None:
                anchor = (
                    f"{anchor}: {_num(f['anchor_value'])}" if anchor else _num(f["anchor_value"])
                )
            ratio = ""
            if f.get("anchor_value"):
                ratio = f"{f['value'] / f['anchor_value']:.2f}"
            first = i == 0 and o.status == "ok"
            rows.append(
                (
                    o.bench.name if first else "",
                    f["path"],
                    f"{_num(f['value'])} {f['unit']}",
                    anchor,
                    ratio,
                    f.get("target", ""),
                    wall if first else "",
                    cpu if first else "",
                    load if first else "",
                )
            )
    return rows


def render(rows: list[tuple[str, ...]], fmt: str) -> str:
    """The rows as aligned text or a Markdown table; two-cell rows are notes."""
    columns = len(rows[0])
    if fmt == "markdown":
        lines = ["| " + " | ".join(r + ("",) * (columns - len(r))) + " |" for r in rows]
        lines.insert(1, "|" + " --- |" * columns)
        return "\n".join(lines)
    full = [r for r in rows if len(r) == columns]
    widths = [max(len(r[i]) for r in full) for i in range(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget-s", type=float, default=600.0, help="for all benchmarks")
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    parser.add_argument("--format", choices=["text", "markdown"], default="text")
    parser.add_argument("--json-out", type=Path, help="also write every outcome as JSON")
    parser.add_argument("--log-dir", type=Path, help="default: a new temporary directory")
    args = parser.parse_args(argv)
    chosen = [b for b in BENCHES if not args.only or b.name in args.only.split(",")]
    if unknown := set(filter(None, args.only.split(","))) - {b.name for b in BENCHES}:
        parser.error(f"unknown benchmarks {sorted(unknown)}; known: {[b.name for b in BENCHES]}")
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="bench-report-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    start = time.monotonic()
    outcomes: list[Outcome] = []
    for bench in chosen:
        left = args.budget_s - (time.monotonic() - start)
        missing = [m for m in bench.needs if importlib.util.find_spec(m) is None]
        if bench.excluded:
            outcomes.append(Outcome(bench, f"not run: {bench.excluded}"))
        elif missing:
            why = f"needs {', '.join(missing)} (pip install -e '.[{bench.extra}]')"
            outcomes.append(Outcome(bench, f"skipped: {why}"))
        elif left < 10:
            outcomes.append(Outcome(bench, f"not run: the budget ({args.budget_s:.0f} s) is spent"))
        else:
            print(f"{bench.name}: running (up to {min(bench.cap_s, left):.0f} s) ...",
                  file=sys.stderr, flush=True)  # fmt: skip
            outcomes.append(run_one(bench, min(bench.cap_s, left), log_dir, sys.executable))
    load1 = os.getloadavg()
    print(
        f"bench report: {os.cpu_count()} cores, {time.monotonic() - start:.0f} s; load average "
        f"{' '.join(f'{x:.1f}' for x in load0)} at the start, "
        f"{' '.join(f'{x:.1f}' for x in load1)} at the end"
    )
    print(render(table(outcomes), args.format))
    print(f"logs: {log_dir}")
    if args.json_out:
        args.json_out.write_text(
            json.dumps(
                [
                    {
                        "bench": o.bench.name,
                        "status": o.status,
                        "figures": o.figures,
                        "cpu_s": o.cpu_s,
                        "tree_cpu_s": o.tree_cpu_s,
                        "wall_s": o.wall_s,
                        "load": o.load,
                    }
                    for o in outcomes
                ],
                indent=1,
            )
        )
    return 1 if any(o.status.startswith("failed") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
