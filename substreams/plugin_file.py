"""One plugin file imported: in this process (:func:`import_file`, what
:mod:`substreams.loader` does), or first in a forked, limited child
(:func:`check_import`, what the loader and the registry's mirror do before that), so a
file that hangs or crashes at import costs only the child.

Failure semantics: whatever the file does at import (a syntax error, an exception,
``SystemExit``, a bad declaration) or a file that declares nothing becomes one
:class:`~substreams.errors.PluginLoadError` naming the file; only ``KeyboardInterrupt``
and the sandbox's ``SoftTimeout`` pass through.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from substreams import defaults
from substreams.api import Substream, declaration_of, version_of
from substreams.child import Reported
from substreams.errors import PluginLoadError, SoftTimeout
from substreams.protocol import Limits
from substreams.sandbox import run_in_child

__all__ = ["check_import", "declared_in", "import_file", "read_source", "summary"]


def summary(e: BaseException) -> str:
    """The exception as one short text (type and message), capped at
    ``defaults.ERROR_MAX_BYTES``."""
    lines = traceback.format_exception_only(type(e), e)
    return "".join(lines).strip()[: defaults.ERROR_MAX_BYTES]


def declared_in(module: ModuleType, *, version: str, origin: str) -> list[Substream]:
    """The substreams declared by functions defined in ``module`` (not imported into it),
    each with ``version`` and ``origin`` set."""
    found = []
    for value in vars(module).values():
        declared = declaration_of(value)
        if declared is None or getattr(value, "__module__", None) != module.__name__:
            continue
        found.append(declared.with_origin(version=version, origin=origin))
    return found


def read_source(path: Path) -> bytes:
    """The file's bytes.

    Raises:
        PluginLoadError: it cannot be read.
    """
    try:
        return path.read_bytes()
    except OSError as e:
        raise PluginLoadError(str(path), f"cannot read: {e}") from e


def _import_source(path: Path, source: bytes, version: str) -> ModuleType:
    name = f"riak_events_plugin_{path.stem}_{version}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot make an import spec for {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        code = compile(source, str(path), "exec")
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def import_file(path: Path, source: bytes | None = None) -> list[Substream]:
    """Import one plugin file and return the substreams it declares.

    Args:
        path: the ``.py`` file.
        source: its bytes, when already read (None: read now).

    Returns:
        Its declarations, each with ``version`` = hash of the bytes and ``origin`` = path.

    Raises:
        PluginLoadError: it cannot be read, does not import, or declares no substream.
    """
    origin = str(path)
    if source is None:
        source = read_source(path)
    version = version_of(source)
    try:
        module = _import_source(path, source, version)
    except BaseException as e:  # a plugin may raise anything at import, even SystemExit
        if isinstance(e, KeyboardInterrupt | SoftTimeout):
            raise
        raise PluginLoadError(origin, summary(e)) from e
    found = declared_in(module, version=version, origin=origin)
    if not found:
        raise PluginLoadError(origin, "declares no @substream function")
    return found


def check_import(
    path: Path, *, timeout_s: float, expect: Sequence[str] | None = None
) -> str | None:
    """Import a plugin file in a limited child; returns why it failed, or None if it loads.

    Args:
        path: the plugin file.
        timeout_s: the import's wall-clock limit, seconds.
        expect: the substream names it must declare (a registry entry's), or None.
    """

    def target() -> bytes:
        try:
            found = import_file(path)
        except PluginLoadError as e:
            raise Reported(e.reason) from None
        return ",".join(s.name for s in found).encode()

    limits = Limits(timeout_s=timeout_s, memory_mb=1024, max_result_bytes=65536)
    (outcome,) = run_in_child([(str(path), target, limits)])
    if outcome.ok:
        declared = sorted(filter(None, outcome.payload.decode().split(",")))
        if expect is not None and declared != sorted(expect):
            return f"declares {declared}, not {sorted(expect)} as published"
        return None
    if outcome.kind == "timeout":
        return f"import did not finish within {timeout_s}s"
    return outcome.error or outcome.kind
