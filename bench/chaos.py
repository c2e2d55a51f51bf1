"""The chaos campaign: the whole stack on one machine, faults at seeded random points
while events flow, then everything read back and counted.

    sudo .venv/bin/python bench/chaos.py --seed 7 --faults 120 --duration-s 900 [--json]

The stack (``chaos_stack.py``): ZooKeeper, a devnode in a network namespace of its own,
a companion (gunicorn) with the example plugins and a slow one, two relocators sharing
a spool directory and ZooKeeper (the first on a small tmpfs), two TCP producers (one per
relocator) and a spool writer, every event with a unique id. The faults
(``chaos_faults.py``): kill -9 of each daemon, also during its recovery; ZooKeeper
stopped or killed and restarted; a ZooKeeper session expired; a byte flipped in a
relocator's journal; a stored chunk corrupted through the HTTP API; the devnode stopped;
the link to it cut; the relocator's disk filled. Afterwards the load stops, the
relocators drain, the companion's auditor gets its time, and ``chaos_check.py`` reads
everything back through ``consumer_lib``.

It prints acknowledged / found / lost / duplicated events, dangling metadata entries,
chunks without a result record, faults by kind with the time to recover from each, and
daemon exits nobody asked for. Exit code 1 when anything was lost, a metadata entry
dangles, or a chunk lacks a result; 2 when the stack could not be started.

Needs root (network namespace, tmpfs mount); ``--no-netns --tmpfs-mb 0`` runs without
(then the link and disk faults are left out). Everything created is removed on exit,
Ctrl-C included; logs stay in the work directory when the run fails or with ``--keep``.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chaos_check import listed_chunks, missing_results, read_back
from chaos_faults import EXTRA_KINDS, KINDS, Fault, Injector, flatten, plan
from chaos_stack import Stack, StackOptions
from chaos_system import CLEANUP, system_support

from consumer_lib import EventsClient
from relocator.testing import drained
from substreams.loader import load_file

log = logging.getLogger("chaos")

__all__ = ["Campaign", "main", "run"]


@dataclass(frozen=True)
class Campaign:
    """One run's parameters (the command-line options)."""

    seed: int = 1
    faults: int = 20
    duration_s: float = 120.0
    kinds: tuple[str, ...] = KINDS
    stack: StackOptions = field(default_factory=StackOptions)
    drain_timeout_s: float = 180.0
    results_timeout_s: float = 90.0
    recovery_timeout_s: float = 60.0


def run(campaign: Campaign, workdir: Path) -> dict[str, Any]:
    """Run the campaign in ``workdir``; the report (see :func:`render`).

    Raises:
        RuntimeError: the stack could not be started.
    """
    kinds = campaign.kinds
    if not campaign.stack.netns:
        kinds = tuple(k for k in kinds if k != "store_link")
    if not campaign.stack.spool_interval_s:
        kinds = tuple(k for k in kinds if k != "big_spool")
    if not campaign.stack.tmpfs_mb:
        kinds = tuple(k for k in kinds if k != "disk_full")
    planned = plan(campaign.seed, campaign.faults, campaign.duration_s, kinds=kinds)
    load_start = os.getloadavg()
    t0 = time.monotonic()
    first_epoch = int(time.time()) - 2
    stack = Stack(workdir, campaign.stack, t0)
    injector: Injector | None = None
    faults: list[Fault] = []
    try:
        stack.start()
        log.info(
            "stack up in %.1fs; %d faults planned over %.0fs",
            time.monotonic() - t0,
            len(planned),
            campaign.duration_s,
        )
        injector = Injector(stack, campaign.seed, recovery_timeout_s=campaign.recovery_timeout_s)
        for p in planned:
            time.sleep(max(0.0, t0 + p.at_s - time.monotonic()))
            faults.append(injector.inject(p))
        time.sleep(max(0.0, t0 + campaign.duration_s - time.monotonic()))
        faulting_s = time.monotonic() - t0
        sessions = _settled_sessions(injector)
        flushed = stack.stop_load(flush_s=60.0)
        drained = _drain(stack, campaign.drain_timeout_s)
        last_epoch = int(time.time()) + 1
        plugins = [s for f in sorted(stack.plugin_dir.glob("*.py")) for s in load_file(f)]
        with EventsClient([stack.devnode_url], use_entry_points=False, timeout_s=30.0) as client:
            epochs = range(first_epoch, last_epoch)
            results_wait_s = _wait_results(
                client, stack, epochs, plugins, campaign.results_timeout_s
            )
            every = flatten(faults)
            corrupted_chunks = {f.corrupted_key: f.exempt_ids for f in every if f.corrupted_key}
            readback = read_back(
                client,
                dcs=campaign.stack.dcs,
                epochs=epochs,
                acknowledged=stack.acked_ids(),
                corrupted_records=[
                    i for f in every if f.kind == "journal_corrupt" for i in f.exempt_ids
                ],
                corrupted_chunks=corrupted_chunks,
                plugins=plugins,
                sources=stack.id_sources(),
                refused=stack.spool.refused if stack.spool else {},
                rejected_dir=stack.root / "spool" / ".rejected",
            )
        exits = [e for d in stack.daemons for e in d.exits]
        not_recovered = [
            f"fault {f.index} {f.kind} {f.target}".strip()
            for f in every
            if not f.skipped and (f.recovered_s is None or "injection failed" in f.note)
        ]
        return {
            "run": {
                "seed": campaign.seed,
                "faults_planned": len(planned),
                "duration_s": campaign.duration_s,
                "faulting_s": round(faulting_s, 1),
                "total_s": round(time.monotonic() - t0, 1),
                "rate_per_producer": campaign.stack.rate,
                "legacy_rate": campaign.stack.legacy_rate,
                "ack_cuts": {p.name: p.proxy.cuts for p in stack.producers if p.proxy},
                "dcs": list(campaign.stack.dcs),
                "netns": campaign.stack.netns,
                "tmpfs_mb": campaign.stack.tmpfs_mb,
                "cpus": os.cpu_count(),
                "load_average_start": [round(x, 2) for x in load_start],
                "load_average_end": [round(x, 2) for x in os.getloadavg()],
                "producers_flushed": flushed,
                "drained": drained,
                "results_wait_s": results_wait_s,
                "workdir": str(workdir),
                "spool_files": stack.spool.files if stack.spool else 0,
            },
            "readback": readback.as_dict(),
            "failed": readback.failed or bool(not_recovered),
            "not_recovered": not_recovered,
            "faults_by_kind": _by_kind(every),
            "faults": [f.as_dict() for f in faults],
            "zookeeper_sessions": sessions,
            "exits": [_exit(e.as_dict(), every) for e in exits],
            "start_failures": {d.name: d.start_failures for d in stack.daemons if d.start_failures},
        }
    finally:
        if injector is not None:
            injector.close()
        stack.close()
        CLEANUP.run()


def _drain(stack: Stack, timeout_s: float) -> bool:
    """Wait until both relocators hold nothing unpushed and the spool is empty."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        statuses = [stack.relocator_status(d) for d in stack.relocators]
        spool = list((stack.root / "spool").glob("*.srl"))
        if not spool and all(s and drained(s) for s in statuses):
            return True
        time.sleep(0.5)
    log.warning(
        "relocators did not drain in %.0fs: %s",
        timeout_s,
        [stack.relocator_status(d) for d in stack.relocators],
    )
    return False


def _wait_results(
    client: EventsClient, stack: Stack, epochs: range, plugins: list[Any], timeout_s: float
) -> float:
    """Give the companion (hook, then auditor) up to ``timeout_s`` to store every result;
    the seconds waited."""
    start = time.monotonic()
    keys = listed_chunks(client, stack.options.dcs, epochs)
    while time.monotonic() - start < timeout_s:
        keys_missing = {k for _, k in missing_results(client, keys, plugins)[0]}
        if not keys_missing:
            break
        keys = [k for k in keys if k in keys_missing]
        time.sleep(5.0)
    return round(time.monotonic() - start, 1)


def _settled_sessions(injector: Injector, wait_s: float = 15.0) -> dict[str, bool]:
    """Each daemon's session znode at the end of the faults (given ``wait_s`` to appear)."""
    deadline = time.monotonic() + wait_s
    while True:
        sessions: dict[str, bool] = injector.sessions()
        if all(sessions.values()) or time.monotonic() > deadline:
            return sessions
        time.sleep(0.5)


def _exit(exit_: dict[str, Any], faults: list[Fault]) -> dict[str, Any]:
    """An exit with the fault (or overlap part: ``faults`` holds both) last started
    before it, and whether the design asks for it: a relocator whose journal disk is
    full exits (relocator/DESIGN.md, scenario 13);
    the watcher notices within a second, a restart may die again until the disk is freed
    and a few seconds after, when a write queued before the free fails."""
    at = exit_["at_s"]
    last = max((f for f in faults if f.started_s <= at), key=lambda f: f.started_s, default=None)
    exit_["during"] = (
        f"fault {last.index} ({last.kind} {last.target})".replace(" )", ")")
        if last
        else "before the first fault"
    )
    exit_["expected"] = exit_["daemon"] == "relocator-1" and any(
        f.kind == "disk_full" and f.started_s <= at <= f.ended_s + 5.0 for f in faults
    )
    return exit_


def _name(f: Fault) -> str:
    return "overlap" if f.kind == "overlap" else f"{f.kind} {f.target}".strip()


def _by_kind(faults: list[Fault]) -> dict[str, dict[str, Any]]:
    """Per kind and target (every overlap under one name; its parts under theirs)."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted({_name(f) for f in faults}):
        of_kind = [f for f in faults if _name(f) == name]
        done = [f.recovered_s for f in of_kind if f.recovered_s is not None and not f.skipped]
        out[name] = {
            "injected": sum(1 for f in of_kind if not f.skipped),
            "skipped": sum(1 for f in of_kind if f.skipped),
            "not_recovered": sum(1 for f in of_kind if f.recovered_s is None and not f.skipped),
            "recover_s_median": round(statistics.median(done), 2) if done else None,
            "recover_s_max": round(max(done), 2) if done else None,
            "probe": of_kind[0].probe,
        }
    return out


def render(report: dict[str, Any]) -> str:
    """The report as text."""
    r, rb = report["run"], report["readback"]
    lines = [
        f"chaos campaign: seed {r['seed']}, {r['faults_planned']} faults in "
        f"{r['faulting_s']}s (total {r['total_s']}s), {r['rate_per_producer']:g} events/s "
        f"per producer, {r['cpus']} cpus, load average {r['load_average_start'][0]} -> "
        f"{r['load_average_end'][0]}",
        f"  drained: {r['drained']}; producers flushed: {r['producers_flushed']}; "
        f"results waited {r['results_wait_s']}s; spool files {r['spool_files']}",
        "",
        f"  acknowledged events       {rb['acknowledged']}",
        f"  found                     {rb['found']}",
        f"  LOST                      {rb['lost']}  {rb['lost_sample'] or ''}",
        f"  lost by injected journal corruption  {rb['lost_injected_journal']}",
        f"  lost by injected store corruption    {rb['lost_injected_store']}",
        f"  DUPLICATED (producers with ids, spool) {rb['duplicated']}  "
        f"{rb['duplicated_by_source'] or ''}",
        f"  duplicated by the legacy producer (at-least-once by design) {rb['duplicated_legacy']}",
        f"  spool events refused by design (a file with an event no chunk holds) "
        f"{rb['refused']}; stored anyway {rb['refused_found']}; files not kept "
        f"{rb['refused_not_kept'] or 0}",
        f"  unacknowledged but stored            {rb['unacknowledged_found']}",
        f"  epochs / chunks read      {rb['epochs']} / {rb['chunks']}",
        f"  DANGLING metadata entries {rb['dangling']}  {rb['dangling_sample'] or ''}",
        f"  corrupt chunks: injected {rb['corrupt_injected']}, other {rb['corrupt_other']} "
        f"{rb['corrupt_other_sample'] or ''}",
        f"  CHUNKS WITHOUT A RESULT   {rb['without_result']}  "
        f"{rb['without_result_by_substream'] or ''} {rb['without_result_sample'] or ''}",
        f"  results by status         {rb['results_by_status']}",
        "",
        f"  {'fault kind and target':<40}{'injected':>9}{'skipped':>8}{'not rec.':>9}"
        f"{'recover p50':>12}{'max':>8}  probe",
    ]
    for kind, k in report["faults_by_kind"].items():
        lines.append(
            f"  {kind:<40}{k['injected']:>9}{k['skipped']:>8}{k['not_recovered']:>9}"
            f"{_s(k['recover_s_median']):>12}{_s(k['recover_s_max']):>8}  {k['probe']}"
        )
    overlaps = [f for f in report["faults"] if f["kind"] == "overlap"]
    lines.append(
        f"  overlaps: {len(overlaps)} ({sum(len(f.get('parts', [])) for f in overlaps)} "
        "parts, counted by kind above with the single faults)"
    )
    notable = [
        g
        for f in report["faults"]
        for g in (f, *f.get("parts", []))
        if g.get("skipped") or g["recovered_s"] is None
    ]
    for f in notable:
        lines.append(
            f"  fault {f['index']} {f['kind']} {f['target']}: "
            f"{'skipped' if f.get('skipped') else 'not recovered'}: {f.get('note', '')}"
        )
    lines.append("")
    missing = [path for path, ok in report["zookeeper_sessions"].items() if not ok]
    lines.append(f"  session znodes missing after the faults: {missing or 'none'}")
    unexpected = [e for e in report["exits"] if not e["expected"]]
    lines.append(
        f"  daemon exits nobody asked for: {len(unexpected)} "
        f"(+{len(report['exits']) - len(unexpected)} by design: journal disk full)"
    )
    for e in unexpected:
        last = [x for x in e["log_tail"].splitlines() if x.strip()][-1:] or [""]
        lines.append(
            f"    {e['daemon']} at {e['at_s']}s code {e['code']} during {e['during']}: "
            f"{last[0][:160]}"
        )
    if report["start_failures"]:
        lines.append(f"  failed restarts (retried): {report['start_failures']}")
    lines.append("")
    lines.append(
        "RESULT: "
        + (
            f"FAILED (lost, duplicated, dangling, chunks without a result, refused spool "
            f"files, or faults not recovered: {report['not_recovered'] or 'none'})"
            if report["failed"]
            else "ok: 0 lost, 0 duplicated, 0 dangling, 0 without result, every fault recovered"
        )
    )
    return "\n".join(lines)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", type=int, default=20)
    parser.add_argument(
        "--duration-s",
        type=float,
        default=120.0,
        help="time over which the faults are spread (longer if they overrun)",
    )
    parser.add_argument("--kinds", default=",".join(KINDS), help="fault kinds to draw from")
    parser.add_argument(
        "--rate", type=float, default=300.0, help="events/s per producer with an id"
    )
    parser.add_argument(
        "--legacy-rate",
        type=float,
        default=30.0,
        help="events/s of the producer without an id (at-least-once; 0: none)",
    )
    parser.add_argument("--no-netns", action="store_true", help="devnode on loopback")
    parser.add_argument(
        "--tmpfs-mb",
        type=int,
        default=48,
        help="the first relocator's data directory size (0: no tmpfs)",
    )
    parser.add_argument("--workdir", type=Path, help="default: a new temporary directory")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if unknown := set(kinds) - set(KINDS) - set(EXTRA_KINDS):
        parser.error(
            f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS + EXTRA_KINDS)}"
        )
    netns = not args.no_netns
    if (netns or args.tmpfs_mb) and (why := system_support()):
        parser.error(
            f"network namespace and tmpfs need root with iproute2 ({why}); "
            "use --no-netns --tmpfs-mb 0"
        )
    campaign = Campaign(
        seed=args.seed,
        faults=args.faults,
        duration_s=args.duration_s,
        kinds=kinds,
        stack=StackOptions(
            rate=args.rate,
            legacy_rate=args.legacy_rate,
            netns=netns,
            tmpfs_mb=args.tmpfs_mb,
            seed=args.seed,
        ),
    )
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="chaos-"))
    signal.signal(signal.SIGTERM, _interrupt)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1: every stack
    try:
        report = run(campaign, workdir)
    except RuntimeError as e:
        print(f"chaos: the stack did not start: {e}", file=sys.stderr)
        print(f"chaos: logs in {workdir}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else render(report))
    if report["failed"] or args.keep:
        print(f"chaos: logs in {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
