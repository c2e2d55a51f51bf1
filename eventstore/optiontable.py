"""A daemon's options, each declared once: name, type, default, bounds, help, env variable.

Each daemon declares one :class:`OptionTable` (``companion/options.py``,
``relocator/options.py``, ``devnode/options.py``). Everything else follows
from it, so an option is added, renamed or re-bounded in one place:

- the TOML loader: :meth:`OptionTable.parse` checks every table and key of a file
  (an unknown one is an error naming it and the known ones), converts each value to its
  type and checks its bounds (an error names the key, the value and the bound);
  :meth:`OptionTable.check` applies the same bounds to a value from the command line;
- the command line: :meth:`OptionTable.click` makes an option's click option (its flag,
  type and range, help, and the environment variable declared with it, the only one
  it reads);
- the annotated example config: :meth:`OptionTable.render` writes it; a test asserts
  that each committed ``example-config.toml`` equals it. Regenerate one with::

      python -m eventstore.optiontable companion.options:OPTIONS > companion/example-config.toml

Tables whose keys are checked by a parser of their own (``[riak]``:
:class:`eventstore.riak.settings.RiakSettings`; ``[namespaces]``; ``[clusters.NAME]``)
are declared as free-form :class:`Section` s with their example text; an option may still
be declared in one, for its flag and environment variable (``[riak] nodes``, ``--node``).

Defaults stay in each daemon's ``defaults.py`` (with the reasons for them); the table
refers to them. Pure: reads no file and no environment.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

from eventstore.options import aliased_option
from eventstore.settings import SettingsError, parse_listen, table

__all__ = ["Kind", "Option", "OptionTable", "Section"]

F = TypeVar("F", bound=Callable[..., Any])

#: ``path``/``paths``: strings in the file, relative ones taken from the file's directory.
Kind = Literal["int", "float", "bool", "str", "strs", "path", "paths"]

_KIND_TEXT: dict[str, str] = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "strs": "a list of strings",
    "path": "a path (string)",
    "paths": "a list of paths (strings)",
}

_SAME = object()  # Option.example: show the default


@dataclass(frozen=True)
class Option:
    """One option of a daemon.

    Attributes:
        section: its TOML table (``companion`` for ``[companion]``).
        name: its key in that table.
        kind: its type (see :data:`Kind`).
        default: the value when not given (``None``: computed by the loader, said in
            ``help``).
        help: one or two sentences, for ``--help`` and the example config.
        field: the settings dataclass field it fills (default: ``name``); the loaders
            and :meth:`OptionTable.click` use it as the option's identity.
        ge, gt, le: bounds of a number, inclusive (``ge``, ``le``) or not (``gt``).
        choices: the allowed strings, if only some are.
        check: a further check of a converted value: returns what is wrong, or None.
        env: the environment variable the command line reads it from (None: none).
        cli: its command-line flag (None: file only).
        cli_aliases, alias_envs: old flags and the variables they read (hidden, warned).
        example: the value shown in the example config (default: ``default``).
        commented: shown commented out in the example (a value that depends on the
            machine, or a default computed by the loader).
    """

    section: str
    name: str
    kind: Kind
    default: Any
    help: str
    field: str = ""
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    choices: tuple[str, ...] = ()
    check: Callable[[Any], str | None] | None = None
    env: str | None = None
    cli: str | None = None
    cli_aliases: tuple[str, ...] = ()
    alias_envs: tuple[str, ...] = ()
    example: Any = _SAME
    commented: bool = False

    @property
    def dest(self) -> str:
        """The settings field (and CLI parameter) this option fills."""
        return self.field or self.name

    @property
    def key(self) -> str:
        """``[section] name``, as errors and help name it."""
        return f"[{self.section}] {self.name}"

    @property
    def example_value(self) -> Any:
        """The value the example config shows."""
        return self.default if self.example is _SAME else self.example

    def bound_text(self) -> str:
        """The bounds in words (``>= 1``, ``> 0 (positive)``), or ``""``."""
        parts = []
        if self.gt is not None:
            parts.append(f"> {_num(self.gt)}" + (" (positive)" if self.gt == 0 else ""))
        if self.ge is not None:
            parts.append(f">= {_num(self.ge)}" + (" (non-negative)" if self.ge == 0 else ""))
        if self.le is not None:
            parts.append(f"<= {_num(self.le)}")
        return " and ".join(parts)


@dataclass(frozen=True)
class Section:
    """One TOML table of a daemon's config file.

    Attributes:
        name: the table's name.
        help: a comment written above it in the example config.
        free_form: if not None, the table's keys are checked by a parser of its own
            (not by :meth:`OptionTable.parse`) and this is its example text (TOML).
        commented: the example shows the whole table commented out (its presence
            turns something on, e.g. the relocator's ``[zookeeper]``).
    """

    name: str
    help: str = ""
    free_form: str | None = None
    commented: bool = False


class OptionTable:
    """Every option of one daemon, and what follows from them.

    Args:
        command: the daemon's command (``companion``), for messages and the example.
        header: the example config's opening comment (plain text, no ``#``).
        sections: its tables, in the order the example shows them.
        options: its options, in the order the example and ``--help`` show them.

    Raises:
        ValueError: an option in an undeclared section, or two with one ``dest`` or key.
    """

    def __init__(
        self, command: str, header: str, sections: Sequence[Section], options: Sequence[Option]
    ) -> None:
        self.command = command
        self.header = header
        self.sections = tuple(sections)
        self.options = tuple(options)
        names = {s.name for s in self.sections}
        self._by_dest: dict[str, Option] = {}
        keys = set()
        for o in self.options:
            if o.section not in names:
                raise ValueError(f"{command}: option {o.key} in an undeclared section")
            if o.dest in self._by_dest or o.key in keys:
                raise ValueError(f"{command}: option {o.key} ({o.dest}) declared twice")
            self._by_dest[o.dest] = o
            keys.add(o.key)

    def __getitem__(self, dest: str) -> Option:
        """The option filling settings field ``dest``.

        Raises:
            KeyError: no such option.
        """
        return self._by_dest[dest]

    def in_section(self, section: str) -> tuple[Option, ...]:
        """The options of table ``section``, in declaration order."""
        return tuple(o for o in self.options if o.section == section)

    # -- the TOML loader --------------------------------------------------------------

    def parse(
        self, data: Mapping[str, Any], *, source: str, base_dir: Path | None = None
    ) -> dict[str, Any]:
        """Check a whole config file and convert the values it gives.

        Args:
            data: the file as read (:func:`eventstore.settings.read_toml`).
            source: the file's name, for messages.
            base_dir: what relative paths are relative to (None: left relative).

        Returns:
            ``dest`` -> converted value, for each option the file gives (free-form
            tables are not looked into: their own parsers do that).

        Raises:
            SettingsError: an unknown table or key (naming it and the known ones), a
                value of the wrong type, out of its bounds, or refused by its check.
        """
        known_tables = [s.name for s in self.sections]
        extra = sorted(set(data) - set(known_tables))
        if extra:
            raise SettingsError(
                f"{source}: unknown table(s) {', '.join(f'[{t}]' for t in extra)} "
                f"(known: {', '.join(known_tables)})"
            )
        values: dict[str, Any] = {}
        for section in self.sections:
            body = table(data, section.name, source=source)
            if section.free_form is not None:
                continue
            where = f"{source} [{section.name}]"
            options = {o.name: o for o in self.in_section(section.name)}
            unknown = sorted(set(body) - set(options))
            if unknown:
                raise SettingsError(
                    f"{where}: unknown setting(s) {', '.join(unknown)} "
                    f"(known: {', '.join(options)})"
                )
            for name, raw in body.items():
                option = options[name]
                values[option.dest] = self.convert(option, raw, where=where, base_dir=base_dir)
        return values

    def convert(self, option: Option, raw: Any, *, where: str, base_dir: Path | None = None) -> Any:
        """One value from a file: type-checked, converted, bound-checked.

        Returns:
            an ``int``, ``float``, ``bool`` or ``str``; a tuple of strings for ``strs``
            and ``paths``; ``path``/``paths`` relative to ``base_dir`` when given and
            the value is not empty or absolute.

        Raises:
            SettingsError: naming ``where``, the key, and what was wrong.
        """
        kind = option.kind
        ok = {
            "int": isinstance(raw, int) and not isinstance(raw, bool),
            "float": isinstance(raw, int | float) and not isinstance(raw, bool),
            "bool": isinstance(raw, bool),
            "str": isinstance(raw, str),
            "path": isinstance(raw, str),
            "strs": isinstance(raw, list) and all(isinstance(v, str) for v in raw),
            "paths": isinstance(raw, list) and all(isinstance(v, str) for v in raw),
        }[kind]
        if not ok:
            raise SettingsError(f"{where}: {option.name} must be {_KIND_TEXT[kind]}, not {raw!r}")
        value: Any = raw
        if kind == "float":
            value = float(raw)
        elif kind == "path":
            value = _resolve(raw, base_dir)
        elif kind == "paths":
            value = tuple(_resolve(v, base_dir) for v in raw)
        elif kind == "strs":
            value = tuple(raw)
        self.check(option, value, where=where)
        return value

    def overrides(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Values from the command line (by ``dest``; ``None`` and ``()`` mean not
        given), converted like the file's and bound-checked. Paths are made absolute:
        on the command line they are relative to the current directory.

        Raises:
            KeyError: an unknown ``dest``; SettingsError: a value out of bounds, named
                by its flag.
        """
        out: dict[str, Any] = {}
        for dest, raw in given.items():
            if raw is None or raw == ():
                continue
            option = self[dest]
            value: Any = raw
            if option.kind == "path":  # "" stays "" (none)
                value = str(Path(raw).absolute()) if str(raw) else ""
            elif option.kind == "paths":
                value = tuple(str(Path(p).absolute()) for p in raw)
            elif option.kind == "strs":
                value = tuple(raw)
            self.check(option, value, where=option.cli or dest)
            out[dest] = value
        return out

    def check(self, option: Option, value: Any, *, where: str) -> None:
        """Bounds, choices and the option's own check, for a converted value (from a
        file, the command line or a settings object built in code).

        Raises:
            SettingsError: naming ``where``, the key, the value and the bound.
        """
        if option.kind in ("int", "float") and not _within(option, value):
            raise SettingsError(
                f"{where}: {option.name} = {value!r} is out of bounds: "
                f"it must be {option.bound_text()}"
            )
        if option.choices and value not in option.choices:
            raise SettingsError(
                f"{where}: {option.name} = {value!r} is not one of "
                f"{', '.join(repr(c) for c in option.choices)}"
            )
        problem = option.check(value) if option.check else None
        if problem:
            raise SettingsError(f"{where}: {option.name} = {value!r}: {problem}")

    def check_object(self, settings: Any, *, source: str) -> None:
        """:meth:`check` every option that is a field of the dataclass ``settings``
        (values given on the command line or in code go through the same bounds).

        Raises:
            SettingsError: the first value out of bounds, named.
        """
        assert is_dataclass(settings)
        names = {f.name for f in fields(settings)}
        for option in self.options:
            if option.dest in names and not self._free_form(option):
                self.check(option, getattr(settings, option.dest), where=source)

    def _free_form(self, option: Option) -> bool:
        return any(s.name == option.section and s.free_form is not None for s in self.sections)

    # -- the command line ------------------------------------------------------------

    def click(self, dest: str, **extra: Any) -> Callable[[F], F]:
        """The click option of option ``dest``: its flag (``--x/--no-x`` for a bool),
        type and range, help (with its key and default), and its environment variable,
        the only one it reads. Its default is None: unset, the file or the default
        applies (the loader decides).

        Args:
            dest: the option's ``dest``.
            extra: more click settings (``callback``, ``type``, ``metavar``...).

        Raises:
            KeyError: no such option; ValueError: it has no flag.
        """
        option = self[dest]
        if option.cli is None:
            raise ValueError(f"{self.command}: {option.key} has no command-line flag")
        settings: dict[str, Any] = {
            "help": self.cli_help(option),
            "envvar": option.env,
            "show_envvar": option.env is not None,
            "allow_from_autoenv": False,
            "default": None,
        }
        multiple = option.kind in ("strs", "paths")
        if multiple:
            settings["multiple"] = True
            settings["default"] = ()
        settings.setdefault("type", _click_type(option))
        settings.update(extra)
        if option.kind == "bool":
            return click.option(f"{option.cli}/--no-{option.cli[2:]}", option.dest, **settings)
        if option.cli_aliases:
            return aliased_option(
                option.cli,
                option.dest,
                aliases=option.cli_aliases,
                alias_envvars=option.alias_envs,
                **settings,
            )
        return click.option(option.cli, option.dest, **settings)

    def cli_help(self, option: Option) -> str:
        """The ``--help`` text of an option: its help, its key, its default."""
        shown = option.default
        if isinstance(shown, tuple):
            shown = toml_value(shown)
        default = "" if shown in (None, "", ()) else f"; default: {shown}"
        return f"{option.help} ({option.key}{default})"

    def cli_options(self) -> tuple[Option, ...]:
        """The options that have a flag."""
        return tuple(o for o in self.options if o.cli is not None)

    # -- the annotated example config -------------------------------------------------

    def render(self) -> str:
        """The annotated example config: every table and key, with its help, flag and
        environment variable, set to its example value (TOML)."""
        lines = [_comment(self.header, indent="")]
        for section in self.sections:
            lines.append("")
            if section.help:
                lines.append(_comment(section.help, indent=""))
            if section.free_form is not None:
                lines.append(section.free_form.rstrip("\n"))
                continue
            lines.append(f"# [{section.name}]" if section.commented else f"[{section.name}]")
            for i, option in enumerate(self.in_section(section.name)):
                if i:
                    lines.append("")
                lines.append(_comment(self._example_note(option), indent=""))
                text = f"{option.name} = {toml_value(option.example_value)}"
                lines.append(f"# {text}" if option.commented or section.commented else text)
        return "\n".join(lines) + "\n"

    def _example_note(self, option: Option) -> str:
        given = [g for g in (option.cli, f"${option.env}" if option.env else None) if g]
        note = option.help
        if option.bound_text():
            note += f" Must be {option.bound_text()}."
        if option.choices:
            note += f" One of {', '.join(json.dumps(c) for c in option.choices)}."
        if given:
            note += f" [{', '.join(given)}]"
        return note


def check_listen(value: str) -> str | None:
    """An :attr:`Option.check` for a listen address: None when ``value`` is ``HOST:PORT``
    (:func:`eventstore.settings.parse_listen`), else what is wrong."""
    try:
        parse_listen(value, source="listen")
    except SettingsError:
        return "not HOST:PORT"
    return None


def check_listen_or_empty(value: str) -> str | None:
    """As :func:`check_listen`, with "" (no listener) allowed too."""
    if not value or check_listen(value) is None:
        return None
    return 'not HOST:PORT (or "" for none)'


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _within(option: Option, value: float) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return False
    return not (
        (option.gt is not None and value <= option.gt)
        or (option.ge is not None and value < option.ge)
        or (option.le is not None and value > option.le)
    )


def _resolve(text: str, base_dir: Path | None) -> str:
    if not text or base_dir is None or Path(text).is_absolute():
        return text
    return str(base_dir / text)


def _click_type(option: Option) -> Any:
    if option.choices:
        return click.Choice(option.choices)
    if option.kind in ("int", "float"):
        low = option.gt if option.gt is not None else option.ge
        if low is None and option.le is None:
            return int if option.kind == "int" else float
        if option.kind == "float":
            return click.FloatRange(min=low, max=option.le, min_open=option.gt is not None)
        return click.IntRange(
            min=None if low is None else int(low),
            max=None if option.le is None else int(option.le),
            min_open=option.gt is not None,
        )
    if option.kind in ("path", "paths"):
        return click.Path(file_okay=False)  # a str: "" stays "" (none), not "."
    return None


def _comment(text: str, *, indent: str) -> str:
    out: list[str] = []
    for paragraph in text.split("\n"):
        wrapped = textwrap.wrap(paragraph, width=86, break_on_hyphens=False) or [""]
        out.extend(f"{indent}# {w}".rstrip() for w in wrapped)
    return "\n".join(out)


def toml_value(value: Any) -> str:
    """``value`` (bool, int, float, str or a sequence of them) as TOML text.

    Raises:
        TypeError: another type.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))  # a JSON string is a TOML basic string
    if isinstance(value, Iterable):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _load(spec: str) -> OptionTable:
    module, _, attr = spec.partition(":")
    found = getattr(importlib.import_module(module), attr or "OPTIONS")
    # Run as ``python -m``, this module is ``__main__``: its OptionTable is not the
    # class the daemons' tables are made of, so the type is checked by name.
    if type(found).__name__ != "OptionTable":
        raise SystemExit(f"{spec} is not an OptionTable")
    return found  # type: ignore[no-any-return]


def main(argv: Sequence[str]) -> int:
    """``python -m eventstore.optiontable MODULE[:ATTR]``: print the example config."""
    if len(argv) != 1:
        print("usage: python -m eventstore.optiontable MODULE[:ATTR]", file=sys.stderr)
        return 2
    sys.stdout.write(_load(argv[0]).render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
