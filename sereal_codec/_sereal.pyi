"""Type stub of the compiled Sereal core (C sources in csrc/; contract in DESIGN.md)."""

from collections.abc import Sequence
from typing import Any

from sereal_codec.document import DecodeBody

MAX_DEPTH_CAP: int

decode_body: DecodeBody  # max_objects=-1 (no limit), projection=None (everything)

def encode_body(obj: object, dedupe_strings: bool, max_depth: int) -> bytes: ...
def array_layout(data: bytes, pos: int, end: int, base: int) -> list[int]: ...
def extract_array(data: bytes, pos: int, end: int, base: int, first: int, stop: int) -> bytes: ...
def join_bodies(
    parts: Sequence[bytes | tuple[bytes | bytearray | memoryview, int, int, int]],
    max_depth: int = 512,
) -> bytes: ...
def array_to_json_lines(
    data: bytes, pos: int, end: int, base: int, binary: int, max_depth: int
) -> list[bytes]: ...
def array_to_json_packed(
    data: bytes, pos: int, end: int, base: int, binary: int, max_depth: int
) -> tuple[bytes, bytes]: ...
def json_to_variant_packed(
    text: bytes, offsets: bytes, max_depth: int = 512
) -> tuple[bytes, bytes, bytes, bytes]: ...
def project_events(
    events: list[Any], tree: dict[str, Any] | None, strict: Any = None
) -> list[Any]: ...
def query_evaluate(
    data: bytes,
    pos: int,
    end: int,
    base: int,
    binary: int,
    max_depth: int,
    max_objects: int,
    words: bytes,
    pool: bytes,
    names: Any,
    consts: Any,
) -> list[Any] | None: ...
