"""Type stub of the consumer's compiled tagger (consumer_lib/csrc; reference in
consumer_lib/types.py)."""

from typing import Any

def tag_events(cls: type, slots: Any, values: Any, events: list[Any]) -> list[Any]: ...
