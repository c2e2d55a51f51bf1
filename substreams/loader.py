"""Finding and loading plugins: plugin directories (watched) and installed entry points.

A plugin is a ``*.py`` file (not starting with ``_``) whose module defines one or more
functions decorated with ``@substream``, or queries declared with
``substreams.query.query`` (loaded the same way: a query is its evaluator, carrying
the same declaration; SQL outside the subset fails the file's import with one line).
Sources, in priority order when two declare the same name: the directories in the
order given, then the ``riak_events.substreams`` entry points. Only files in the
configured directories and entry points installed in the environment are ever
imported: never a module named by a request.

Failure semantics: every file is loaded on its own; a file that does not import
(syntax error, exception or ``SystemExit`` at import, a bad declaration) or declares
nothing becomes a :class:`~substreams.errors.PluginLoadError` in the report and the
others load normally. A file that does not change is not imported again (its version,
the hash of its bytes, is the cache key). With ``check_in_child`` a file is first
imported in a forked, time-limited child, so a plugin that hangs or crashes at import
is reported instead of hanging or killing the loading process.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from eventstore.logonce import once
from substreams import defaults
from substreams.api import Substream, declaration_of, version_of
from substreams.errors import DuplicateSubstream, PluginLoadError
from substreams.plugin_file import check_import, declared_in, import_file, read_source, summary

log = logging.getLogger(__name__)

__all__ = ["LoadReport", "PluginSet", "load_entry_points", "load_file", "plugin_files"]

#: Import-time limit of a plugin checked in a child, seconds.
IMPORT_TIMEOUT_S = 5.0


@dataclass
class LoadReport:
    """What a load found.

    Attributes:
        substreams: name -> declaration, in load order.
        failures: one error per plugin that did not load, or duplicate name.
    """

    substreams: dict[str, Substream] = field(default_factory=dict)
    failures: list[PluginLoadError] = field(default_factory=list)

    def add(self, found: Iterable[Substream]) -> None:
        for sub in found:
            if sub.name in self.substreams:
                first = self.substreams[sub.name]
                self.failures.append(
                    DuplicateSubstream(
                        sub.origin, f"substream {sub.name!r} is already declared by {first.origin}"
                    )
                )
                continue
            self.substreams[sub.name] = sub


def plugin_files(directory: Path) -> list[Path]:
    """Returns: the plugin files of ``directory`` (``*.py`` not starting with ``_``), sorted."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.py") if not p.name.startswith("_") and p.is_file())


def load_file(path: Path, *, check_in_child: bool = False) -> list[Substream]:
    """Import one plugin file and return the substreams it declares.

    Args:
        path: the ``.py`` file.
        check_in_child: import it first in a forked child with a time limit.

    Returns:
        Its declarations, each with ``version`` = hash of the file and ``origin`` = path.

    Raises:
        PluginLoadError: it does not import, or declares no substream.
    """
    source = read_source(path)
    if check_in_child:
        problem = check_import(path, timeout_s=IMPORT_TIMEOUT_S)
        if problem is not None:
            raise PluginLoadError(str(path), problem)
    return import_file(path, source)


def load_entry_points(report: LoadReport, group: str = defaults.ENTRY_POINT_GROUP) -> None:
    """Load every installed plugin of entry-point ``group`` into ``report``.

    An entry point may name a decorated function or a module; a module contributes
    every substream declared in it.
    """
    for ep in entry_points(group=group):
        origin = f"entry point {ep.name} = {ep.value}"
        try:
            obj = ep.load()
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            report.failures.append(PluginLoadError(origin, summary(e)))
            continue
        module = obj if isinstance(obj, ModuleType) else sys.modules.get(obj.__module__)
        source_file = getattr(module, "__file__", None)
        version = version_of(Path(source_file).read_bytes()) if source_file else ""
        if isinstance(obj, ModuleType):
            found = declared_in(obj, version=version, origin=origin)
        else:
            declared = declaration_of(obj)
            found = (
                [] if declared is None else [declared.with_origin(version=version, origin=origin)]
            )
        if not found:
            report.failures.append(
                PluginLoadError(origin, "declares no @substream function or query")
            )
        report.add(found)


class PluginSet:
    """The plugins of some directories and entry points, reloaded when files change.

    Args:
        directories: plugin directories, in priority order.
        use_entry_points: also load the installed ``riak_events.substreams`` plugins.
        check_in_child: import each new or changed file first in a time-limited child.
    """

    def __init__(
        self,
        directories: Sequence[Path],
        *,
        use_entry_points: bool = True,
        check_in_child: bool = False,
    ) -> None:
        self.directories = tuple(directories)
        self._use_entry_points = use_entry_points
        self._check_in_child = check_in_child
        self._cache: dict[tuple[Path, int, int], list[Substream] | PluginLoadError] = {}
        self._fingerprint: tuple[tuple[Path, int, int], ...] | None = None
        self.report = LoadReport()
        self.generation = 0

    def _scan(self) -> tuple[tuple[Path, int, int], ...]:
        entries = []
        for directory in self.directories:
            for path in plugin_files(directory):
                try:
                    st = path.stat()
                except OSError:
                    continue
                entries.append((path, st.st_mtime_ns, st.st_size))
        return tuple(entries)

    def refresh(self) -> bool:
        """Rescan the directories; reload what changed.

        Returns:
            True when the set of substreams (or their failures) may have changed.
        """
        fingerprint = self._scan()
        if fingerprint == self._fingerprint:
            return False
        report = LoadReport()
        cache: dict[tuple[Path, int, int], list[Substream] | PluginLoadError] = {}
        for entry in fingerprint:
            loaded = self._cache.get(entry)
            if loaded is None:
                try:
                    loaded = load_file(entry[0], check_in_child=self._check_in_child)
                except PluginLoadError as e:
                    loaded = e
            cache[entry] = loaded
            if isinstance(loaded, PluginLoadError):
                report.failures.append(loaded)
            else:
                report.add(loaded)
        if self._use_entry_points:
            load_entry_points(report)
        for failure in report.failures:
            if failure not in self.report.failures:
                # Every companion worker loads the same files: the detail once per node.
                log.warning(
                    "substream plugin not loaded: %s",
                    failure,
                    extra=once(
                        f"plugin-load:{failure}",
                        brief=f"substream plugin not loaded: {failure.origin}",
                    ),
                )
        before = {n: s.version for n, s in self.report.substreams.items()}
        after = {n: s.version for n, s in report.substreams.items()}
        if before != after:
            log.info("substreams loaded: %s", ", ".join(f"{n}@{v}" for n, v in after.items()))
        self._cache, self._fingerprint, self.report = cache, fingerprint, report
        self.generation += 1
        return True

    @property
    def substreams(self) -> dict[str, Substream]:
        """name -> declaration, as of the last :meth:`refresh`."""
        return self.report.substreams
