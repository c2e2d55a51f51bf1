"""Plugin files for tests and benchmarks (no test framework needed).

:func:`plugin_source` writes the smallest plugin file there is, one ``@substream`` over
all events, for the tests of the loader, the companion's reload and the registry;
:func:`plugin_dir` puts a plugin file in a folder of its own, to point a loader at;
:func:`stubborn_sleeper_source` is a plugin only the hard limit stops.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["plugin_dir", "plugin_source", "stubborn_sleeper_source"]


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


def plugin_dir(parent: Path, filename: str, source: str) -> Path:
    """Make the folder ``parent/plugins`` holding one plugin file.

    Args:
        parent: where the folder is made (it must not exist there yet).
        filename: the plugin file's name, e.g. ``"count.py"``.
        source: the file's text.

    Returns:
        The folder (``parent/plugins``).
    """
    directory = parent / "plugins"
    directory.mkdir()
    (directory / filename).write_text(source)
    return directory


def stubborn_sleeper_source(name: str, sleep_s: float) -> str:
    """The text of a substream over ``web`` events declared with a 0.5 s limit that
    sleeps ``sleep_s`` seconds, swallowing the sandbox's soft alarm (only the SIGKILL
    ends it), then counts its events. The file it goes into imports ``time`` and
    ``substream``.

    Args:
        name: the substream's name.
        sleep_s: how long it sleeps, seconds.
    """
    return (
        f'@substream(name={name!r}, types=["web"], timeout_s=0.5)\n'
        "def slow(events, ctx):\n"
        f"    # Sleeps {sleep_s} s and swallows the soft alarm: only the SIGKILL ends it.\n"
        f"    until = time.monotonic() + {sleep_s}\n"
        "    while time.monotonic() < until:\n"
        "        try:\n"
        "            time.sleep(max(0.0, until - time.monotonic()))\n"
        "        except BaseException:\n"
        "            pass\n"
        "    return len(events)\n"
    )
