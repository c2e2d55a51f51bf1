"""Plugin files for tests and benchmarks (no test framework needed).

:func:`plugin_source` writes the smallest plugin file there is, one ``@substream`` over
all events, for the tests of the loader, the companion's reload and the registry.
"""

from __future__ import annotations

__all__ = ["plugin_source"]


def plugin_source(name: str, body: str = "return len(events)") -> str:
    """The text of a plugin file declaring one substream.

    Args:
        name: the substream's name (also its function's name).
        body: the function's one line of body, over ``events`` and ``ctx``.
    """
    return (
        "from substreams import substream\n"
        f"@substream(name={name!r})\n"
        f"def {name}(events, ctx):\n"
        f"    {body}\n"
    )
