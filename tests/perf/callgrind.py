"""Count the compiled codec's instructions with valgrind's callgrind.

Wall time on a shared 2-core machine swings by 2x from run to run; the number of
instructions a fixed workload executes does not. ``workload.py`` calls each codec path
once on a fixed input (``EVENTS`` events of the shared generator, seed ``SEED``), with
the cyclic garbage collector off, each step right after a marker call. valgrind writes
a profile each time a compiled entry function returns (``--dump-after``: the marker's
and each step's, ``STEPS``), so a step's count is every instruction from the marker's
return to its last entry function's return: the codec's Python layer, decompression,
the compiled walk and the objects it builds, CPython's allocator included; not the
interpreter's start, the imports, nor what the step does after its compiled call
(compression, freeing), which land in the marker's discarded profiles. Profiles are
assigned to steps in the order they were written (the i-th marker starts the i-th
step), so two steps may share an entry function (decode and decode_fields).
(``--toggle-collect`` on the entry functions would count the compiled part alone,
but callgrind misses the entry of several of them, such as ``array_layout``, and the
toggles then run out of step.) ``PYTHONHASHSEED=0`` fixes string hashes, on which the
dedupe and key tables' probing depends.

The committed baseline (``codec_instructions.json``) holds each step's count, the input's
digest and where it was measured. Refresh it on purpose, after a change meant to cost
more or after a new compiler or Python (it checks that two runs agree):

    .venv/bin/python -m tests.perf.refresh
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sereal_codec as sereal
from relocator.events import generate_events

from .workload import encode

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "codec_instructions.json"
WORKLOAD = HERE / "workload.py"
EVENTS = 2000
SEED = 16
#: A step may cost this much more than its baseline (instruction counts are exact for
#: one binary; this leaves room for small, deliberate changes).
TOLERANCE = 0.10
#: Each step of workload.py and the compiled entry functions (module.c) it goes through.
STEPS: dict[str, tuple[str, ...]] = {
    "encode": ("encode_body",),
    "decode": ("decode_body",),
    "json_lines": ("array_to_json_lines",),
    "variant": ("srl_py_array_to_variant",),
    "variant_via_json": ("array_to_json_packed", "srl_py_json_to_variant"),
    "split": ("array_layout", "extract_array"),
    "join": ("srl_py_join_bodies",),
    "decode_fields": ("decode_body",),
    "project": ("srl_py_project_events",),
    "project_strict": ("srl_py_project_events",),
}
#: workload.mark: its returns separate the steps.
MARKER = "srl_py_frame_positions"
REFRESH = ".venv/bin/python -m tests.perf.refresh"
_TRIGGER = re.compile(r"^desc: Trigger: --dump-after=(\S+)$", re.MULTILINE)
_SUMMARY = re.compile(r"^summary: (\d+)$", re.MULTILINE)
_PART = re.compile(r"^part: (\d+)$", re.MULTILINE)


class MeasurementError(Exception):
    """valgrind is missing, failed, or counted nothing for a step."""


@dataclass(frozen=True)
class Measurement:
    """Instructions per step, the input's digest, and where they were counted."""

    instructions: dict[str, int]
    input_sha256: str
    environment: dict[str, str]


def write_input(path: Path) -> str:
    """Write the workload's input (pickled) to ``path``; returns its digest (hex)."""
    events = generate_events(EVENTS, seed=SEED)
    blob = encode(events)
    documents = [sereal.encode(event) for event in events]
    data = pickle.dumps((events, blob, documents), protocol=4)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def environment() -> dict[str, str]:
    """What the counts depend on besides the code: Python, valgrind, the binary."""
    from sereal_codec import _sereal

    extension = Path(_sereal.__file__)
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "valgrind": _valgrind_version(),
        "extension": extension.name,
        "extension_sha256": hashlib.sha256(extension.read_bytes()).hexdigest(),
    }


def _valgrind_version() -> str:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise MeasurementError("valgrind is not installed (`make system-deps` installs it)")
    return subprocess.run(
        [valgrind, "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()


def measure() -> Measurement:
    """Run the workload once under callgrind; count per step.

    Raises:
        MeasurementError: valgrind missing or failing, or a step counted nothing (an
            entry function renamed: update ``STEPS``).
    """
    # A new directory of the same name length on every run (see below).
    with tempfile.TemporaryDirectory(prefix="callgrind-") as name:
        return _measure(Path(name))


def _measure(workdir: Path) -> Measurement:
    env = environment()
    input_path = workdir / "input.pickle"
    digest = write_input(input_path)
    functions = [MARKER, *(f for names in STEPS.values() for f in names)]
    valgrind = shutil.which("valgrind") or "valgrind"
    argv = [
        valgrind,
        "--tool=callgrind",
        "--callgrind-out-file=callgrind.out",
        *(f"--dump-after={f}" for f in functions),
        sys.executable,
        str(WORKLOAD),
        input_path.name,
    ]
    # The same argv, environment and working directory (names of the same length) on
    # every run: their bytes end up in the child's heap, and the heap's layout moves the
    # counts (0.1-0.5%: the codec's object tables hash addresses). No PYTHONMALLOC & co.;
    # the codec this process imported (and fingerprinted above), wherever the editable
    # install points. No bytecode written: a first run that writes it would count apart.
    child_env = {
        "PATH": os.defpath,
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": str(Path(sereal.__file__).parents[1]),
    }
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=child_env,
        cwd=workdir,
        timeout=240,
        check=False,
    )
    if proc.returncode != 0:
        raise MeasurementError(f"valgrind exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    counts = by_step(read_profiles(workdir))
    for step, names in STEPS.items():
        if not counts[step]:
            raise MeasurementError(
                f"no instructions counted in {', '.join(names)} (step {step!r}): "
                f"renamed in sereal_codec/csrc/module.c? update STEPS in {__file__}"
            )
    return Measurement(counts, digest, env)


def read_profiles(workdir: Path) -> list[tuple[str, int]]:
    """(the function whose ``--dump-after`` wrote it, instructions) of each profile,
    in the order they were written."""
    dumps: list[tuple[int, str, int]] = []
    for path in workdir.glob("callgrind.out*"):
        text = path.read_text(errors="replace")
        part, trigger = _PART.search(text), _TRIGGER.search(text)
        summary = _SUMMARY.search(text)
        if part and trigger and summary:
            dumps.append((int(part[1]), trigger[1], int(summary[1])))
    return [(trigger, count) for _, trigger, count in sorted(dumps)]


def by_step(dumps: list[tuple[str, int]]) -> dict[str, int]:
    """Each step's instructions: the profiles its entry functions wrote after the
    step's marker (the i-th marker starts the i-th step of ``STEPS``), so two steps may
    go through the same entry function."""
    names = list(STEPS)
    counts = dict.fromkeys(names, 0)
    step = -1
    for trigger, count in dumps:
        if trigger == MARKER:
            step += 1
        elif 0 <= step < len(names) and trigger in STEPS[names[step]]:
            counts[names[step]] += count
    return counts


def load_baseline(path: Path = BASELINE) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(path.read_text())
    return value


def write_baseline(measurement: Measurement, path: Path = BASELINE) -> None:
    path.write_text(
        json.dumps(
            {
                "about": "Instructions (callgrind Ir) of each step of tests/perf/workload.py "
                f"(how: tests/perf/callgrind.py); refresh on purpose: {REFRESH}",
                "events": EVENTS,
                "seed": SEED,
                "input_sha256": measurement.input_sha256,
                "environment": measurement.environment,
                "instructions": measurement.instructions,
            },
            indent=2,
        )
        + "\n"
    )


def not_comparable(baseline: dict[str, Any], env: dict[str, str]) -> str | None:
    """Why counts from here cannot be compared with the baseline's, if they cannot."""
    then = baseline["environment"]
    minor = ".".join(env["python"].split(".")[:2])
    if minor != ".".join(then["python"].split(".")[:2]) or env["machine"] != then["machine"]:
        return (
            f"baseline counted on Python {then['python']} {then['machine']}, this is "
            f"Python {env['python']} {env['machine']}: counts differ; {REFRESH} to compare here"
        )
    return None


def regressions(
    baseline: dict[str, Any], measurement: Measurement, tolerance: float = TOLERANCE
) -> list[str]:
    """One line per step that costs more than ``tolerance`` over its baseline."""
    problems = []
    for step, count in measurement.instructions.items():
        before = baseline["instructions"].get(step)
        if before is None:
            problems.append(f"{step}: no baseline; {REFRESH}")
        elif count > before * (1 + tolerance):
            problems.append(
                f"{step}: {count:,} instructions, baseline {before:,} "
                f"(+{(count / before - 1) * 100:.1f}%, more than {tolerance:.0%})"
            )
    return problems


def describe(baseline: dict[str, Any], measurement: Measurement) -> str:
    """Every step's count against the baseline, and what changed around them."""
    lines = [f"{'step':<12}{'instructions':>16}{'baseline':>16}{'change':>9}"]
    for step, count in measurement.instructions.items():
        before = baseline["instructions"].get(step)
        change = f"{(count / before - 1) * 100:+.1f}%" if before else ""
        lines.append(f"{step:<12}{count:>16,}{before or 0:>16,}{change:>9}")
    if measurement.input_sha256 != baseline["input_sha256"]:
        lines.append("the input changed (the event generator or the encoder's output)")
    then = baseline["environment"]
    for key, value in measurement.environment.items():
        if then.get(key) != value:
            lines.append(f"{key}: {then.get(key)} then, {value} now")
    lines.append(f"if the cost is intended: {REFRESH}")
    return "\n".join(lines)
