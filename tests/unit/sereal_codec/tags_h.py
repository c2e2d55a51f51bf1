"""``sereal_codec/csrc/tags.h`` read as text: the C core's tag table (its X-macro
lines), for the tests that hold the Python side and the walkers to it."""

from __future__ import annotations

import re
from pathlib import Path

from sereal_codec import tags

#: The C core's one tag table.
TAGS_H = Path(tags.__file__).resolve().parent / "csrc" / "tags.h"

#: Names in tags.py that are not tag bytes (header, modes).
NOT_TAGS = {"TRACK_FLAG", "HEADER_BIT_USER_META", "BINARY_UTF8", "BINARY_LATIN1", "BINARY_BYTES"}


def _block(text: str, macro: str) -> str:
    """The body of ``#define macro(X) ...`` (its continued lines)."""
    match = re.search(rf"#define {macro}\(\w\)((?:.*\\\n)*.*\n)", text)
    assert match, f"{macro} not found in {TAGS_H}"
    return match[1]


def entries(macro: str, arity: int) -> list[tuple[str, ...]]:
    text = _block(TAGS_H.read_text(), macro)
    pattern = r"\b[A-Z]\(" + r",\s*".join([r"([\w]+)"] * arity) + r"\)"
    return [tuple(m) for m in re.findall(pattern, text)]


def c_tags() -> dict[str, tuple[int, str]]:
    """NAME -> (byte, kind) of SRL_TAGS."""
    return {name: (int(byte, 0), kind) for name, byte, kind in entries("SRL_TAGS", 3)}


def c_ranges() -> dict[str, tuple[int, int, str]]:
    """NAME -> (low byte, count, kind) of SRL_TAG_RANGES."""
    return {
        name: (int(low, 0), int(count), kind)
        for name, low, count, kind in entries("SRL_TAG_RANGES", 4)
    }


def c_kind_of_byte() -> dict[int, str]:
    kinds = {byte: kind for byte, kind in c_tags().values()}
    for low, count, kind in c_ranges().values():
        kinds.update(dict.fromkeys(range(low, low + count), kind))
    return kinds


def python_tags() -> dict[str, int]:
    """The tag constants of tags.py (upper-case ints that are not header or mode names)."""
    return {
        name: value
        for name, value in vars(tags).items()
        if name.isupper()
        and isinstance(value, int)
        and not name.startswith("TYPE_")
        and name not in NOT_TAGS
    }
