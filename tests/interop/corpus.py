"""The Python values encoded for Perl to decode (Python -> Perl direction)."""

from __future__ import annotations

from typing import Any

from sereal_codec.types import PerlObject, PerlRef, PerlRegexp


def _events(n: int) -> list[dict[str, Any]]:
    hosts = [f"app-{i:03d}.ams4.example.com" for i in range(1, 8)]
    urls = ["/search?q=h\u00f4tel", "/book/confirm", "/", "/api/v2/availability"]
    events: list[dict[str, Any]] = []
    for i in range(n):
        ev: dict[str, Any] = {
            "epoch": 1_700_000_000 + i,
            "type": ("web", "cron", "lb")[i % 3],
            "host": hosts[i % len(hosts)],
            "dc": 4,
            "duration_ms": (i * 7919 % 100_000) / 1000,
            "status": (200, 200, 302, 404, 500)[i % 5],
            "ok": i % 4 != 0,
            "user": None if i % 3 else f"u{i}",
            "http": {"method": "GET" if i % 2 else "POST", "url": urls[i % len(urls)]},
            "tags": ["alpha", "beta", "gamma"][: i % 4],
            "city": ("Amsterdam", "K\u00f8benhavn", "\u6771\u4eac")[i % 3],
        }
        if i % 2:
            ev["timings"] = {f"t{j}": j * 11 for j in range(i % 5)}
        events.append(ev)
    return events


def corpus() -> list[tuple[str, object]]:
    """(name, value) pairs; fresh objects on every call (some are cyclic)."""
    shared_list = [1, 2]
    shared_dict = {"k": "v"}
    cyclic_list: list[object] = [1]
    cyclic_list.append(cyclic_list)
    cyclic_dict: dict[str, object] = {"name": "c"}
    cyclic_dict["self"] = cyclic_dict
    self_ref = PerlRef()
    self_ref.value = self_ref
    shared_obj = PerlObject("Shared::Obj", {"id": 7})
    return [
        ("int_scalar", 0),
        ("uv_max", 2**64 - 1),
        ("int_boundaries", [0, 15, 16, -16, -17, 127, 128, 2**32, 2**63 - 1, -(2**63), 2**64 - 1]),
        (
            "floats",
            [
                0.5,
                -1.25,
                3.141592653589793,
                1e300,
                -1e-300,
                0.1,
                float("inf"),
                float("-inf"),
                float("nan"),
                -0.0,
            ],
        ),
        ("none", None),
        ("bools", [True, False, None]),
        ("bool_scalar", False),
        ("strings_ascii", ["", "a", "x" * 31, "y" * 32, "z" * 5000, "with\0nul"]),
        ("strings_unicode", ["caf\u00e9 \u263a \U0001f600", "\u6771\u4eac", "\u263a" * 40]),
        ("strings_surrogateescape", ["caf\udce9", "\udcff\udcfe"]),
        ("bytes", [b"", b"\x00\xff\xfe\x80", bytes(range(256)), bytearray(b"ba")]),
        ("tuple", (1, "two", 3.0)),
        ("nested", {"a": {"b": {"c": [1, [2, [3, {"d": None}]]]}}, "e": [[], {}, [{}]]}),
        ("big_hash", {f"key_{i}": i * 3 for i in range(40)}),
        ("big_array", [f"s{i}" if i % 7 else i for i in range(100)]),
        ("hash_keys", {"cl\u00e9": 1, "\u263a": 3, "": 4, "k" * 40: 5, b"raw\xe9": 6}),
        (
            "shared",
            {"x": shared_list, "y": shared_list, "z": [shared_list, shared_dict], "w": shared_dict},
        ),
        ("cyclic_list", cyclic_list),
        ("cyclic_dict", cyclic_dict),
        (
            "scalar_refs",
            [
                PerlRef("str"),
                PerlRef(42),
                PerlRef(None),
                PerlRef(PerlRef("x")),
                PerlRef([1, 2]),
                PerlRef({"a": 1}),
            ],
        ),
        ("self_scalar_ref", self_ref),
        (
            "objects",
            [
                PerlObject("Foo::Bar", {"a": 1, "b": [1, 2]}),
                PerlObject("Baz", [1, 2]),
                PerlObject("Scal", PerlRef("v")),
                PerlObject("Foo::Bar", {}),
                PerlObject("Baz", {}),
            ],
        ),
        ("shared_object", [shared_obj, shared_obj]),
        (
            "regexps",
            [
                PerlRegexp("ab+c", "i"),
                PerlRegexp("^\\d+$", "msx"),
                PerlRegexp("caf\u00e9\u263a", ""),
            ],
        ),
        (
            "repeated",
            {
                "hosts": ["web-01.ams4.example.com"] * 20,
                **{f"k{i}": "value-repeated-long-enough" for i in range(10)},
            },
        ),
        ("events", _events(40)),
    ]


HEADER = {"dc": "ams4", "epoch": 1_700_000_000, "tags": ["a", "b", "a"], "caf\u00e9": 1.5}
