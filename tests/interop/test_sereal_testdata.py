"""The test data of Sereal's own Perl distribution, decoded by our implementations.

``fetch_testdata.sh`` (run by ``make test``) fetches Debian's source package of
Sereal::Decoder into ``.cache/sereal-testdata/``; ``perl/sereal_testdata.pl`` turns its
test data into documents (see that script for the four sets) with Perl's decoding of
each. We are not allowed to carry those files in this repository, hence the fetch.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .canon import canon_decoded, first_difference, project_perl
from .perl_runner import run_perl

CACHE = Path(__file__).resolve().parents[2] / ".cache" / "sereal-testdata"
SETS = [("basic", v) for v in range(1, 6)] + [("roundtrip", v) for v in range(1, 6)]
SETS += [("corpus", 1), ("corpus", 4)] + [("backcompat", v) for v in range(2, 6)]
# Documents whose Perl decoding depends on weak-reference semantics we do not represent
# (DESIGN.md: WEAKEN x decodes as x): Perl frees the weakly held root while decoding.
WEAKNESS_DEPENDENT = {"weak thing (aliased root)"}
MIN_DOCS = {"basic": 40, "roundtrip": 1000, "corpus": 200, "backcompat": 1}


@pytest.fixture(scope="session")
def testdata_docs() -> dict[tuple[str, int], list[dict[str, Any]]]:
    dists = sorted(CACHE.glob("Sereal-Decoder-*/t/lib/Sereal/TestSet.pm"))
    if not (CACHE / "ready").exists() or not dists:
        pytest.fail(
            f"Sereal's test data is not in {CACHE}: run tests/interop/fetch_testdata.sh "
            "(`make test` does)",
            pytrace=False,
        )
    dist = dists[-1].parents[3]
    values: dict[int, Any] = {}
    docs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for line in run_perl("sereal_testdata.pl", cwd=dist).splitlines():
        rec = json.loads(line)
        if rec["kind"] == "value":
            values[rec["id"]] = rec["canon"]
        else:
            if "value" in rec:
                rec["canon"] = values[rec["value"]]
            docs.setdefault((rec["set"], rec["version"]), []).append(rec)
    return docs


@pytest.mark.parametrize("set_version", SETS, ids=[f"{s}-v{v}" for s, v in SETS])
def test_decode_sereal_testdata(
    codec: ModuleType,
    testdata_docs: dict[tuple[str, int], list[dict[str, Any]]],
    set_version: tuple[str, int],
) -> None:
    docs = testdata_docs.get(set_version, [])
    assert len(docs) >= MIN_DOCS[set_version[0]], f"only {len(docs)} documents"
    failures: list[str] = []
    for rec in docs:
        if rec["name"] in WEAKNESS_DEPENDENT:
            continue
        data = bytes.fromhex(rec["hex"])
        if "perl_error" in rec:  # Perl rejects it: so must we
            try:
                codec.decode(data)
            except ValueError:
                continue
            failures.append(
                f"{rec['name']}: Perl rejects it ({rec['perl_error'].strip()}), we do not"
            )
            continue
        for mode in ("utf8", "bytes"):
            try:
                got = canon_decoded(codec.decode(data, binary=mode))
            except Exception as exc:
                failures.append(
                    f"{rec['name']} [{mode}]: {type(exc).__name__}: {exc} (doc {rec['hex'][:120]})"
                )
                continue
            diff = first_difference(got, project_perl(rec["canon"], mode))
            if diff:
                failures.append(f"{rec['name']} [{mode}]: {diff} (doc {rec['hex'][:120]})")
    assert not failures, f"{len(failures)} of {len(docs)} documents:\n" + "\n".join(failures[:40])
