"""The canonical, lossless form in which Perl and Python values are compared.

Perl prints it as JSON (``tests/interop/perl/Canon.pm``, which documents the tags); this
module builds the same form from Python values and projects Perl's form onto what each
``binary=`` mode of our decoder must produce. Comparison is then plain ``==`` on JSON-like
Python values (dicts, lists, str, bool, None).

Three functions:

- :func:`canon_decoded` -- the form of a value our decoder returned.
- :func:`project_perl` -- Perl's form as our decoder must render it in a ``binary`` mode
  (Perl strings without the UTF-8 flag become ``str`` or ``bytes`` per the mode; hash keys
  always become ``str``).
- :func:`perl_view` -- the form Perl must print after decoding what our encoder wrote for
  a Python value (ASCII ``str`` arrives as a byte string, other ``str`` as a UTF-8 one).
"""

from __future__ import annotations

import math
from typing import Any

from sereal_codec.types import PerlObject, PerlRef, PerlRegexp

Canon = Any  # JSON-like: None | bool | str | list[Canon] | dict[str, Canon]

ESCAPED_SURROGATES = range(0xDC80, 0xDD00)


def _float(x: float) -> dict[str, str]:
    if math.isnan(x):
        return {"float": "nan"}
    return {"float": format(x, ".17g")}


def _key_bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


class _Walker:
    """Depth-first traversal state shared by both canonicalizers: lists and dicts are
    numbered in order of first visit (keys sorted by their bytes); a chain of PerlRefs
    that loops is ``{"refs_forever": True}`` wherever it is entered (Perl's ``$x = \\$x``
    may decode as one self-referencing PerlRef or as a PerlRef to one)."""

    def __init__(self) -> None:
        self.seen: dict[int, int] = {}
        self.keep: list[object] = []  # keeps ids stable for the walk's lifetime

    def first_visit(self, obj: object) -> int | None:
        """None on the first visit (and numbers obj); the number on a later one."""
        if id(obj) in self.seen:
            return self.seen[id(obj)]
        self.seen[id(obj)] = len(self.seen)
        self.keep.append(obj)
        return None


def _loops(ref: PerlRef) -> bool:
    """Whether following ``.value`` from ``ref`` through PerlRefs (and objects blessing
    one) comes back round."""
    seen: set[int] = set()
    r: object = ref
    while isinstance(r, (PerlRef, PerlObject)):
        if isinstance(r, PerlObject) and not isinstance(r.value, PerlRef):
            return False
        if id(r) in seen:
            return True
        seen.add(id(r))
        r = r.value
    return False


def _text(s: str | bytes) -> str:
    return s if isinstance(s, str) else s.decode("utf-8", "surrogateescape")


def canon_decoded(value: object) -> Canon:
    """The canonical form of a value returned by ``sereal_codec.decode``.

    ``str`` -> ``{"str"}``, ``bytes`` -> ``{"bin"}`` (hex); hash keys are their text;
    regexp parts are their text.
    """
    return _canon_decoded(value, _Walker())


def _canon_decoded(v: object, w: _Walker) -> Canon:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return {"int": str(v)}
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, str):
        return {"str": v}
    if isinstance(v, bytes):
        return {"bin": v.hex()}
    if isinstance(v, list):
        n = w.first_visit(v)
        if n is not None:
            return {"backref": n}
        return {"array": [_canon_decoded(x, w) for x in v]}
    if isinstance(v, dict):
        n = w.first_visit(v)
        if n is not None:
            return {"backref": n}
        keys = sorted(v, key=lambda k: _key_bytes(_text(k)))
        return {"hash": {_text(k): _canon_decoded(v[k], w) for k in keys}}
    if isinstance(v, PerlRef):
        if _loops(v):
            return {"refs_forever": True}
        return {"ref": _canon_decoded(v.value, w)}
    if isinstance(v, PerlRegexp):
        return {"regexp": [_text(v.pattern), _text(v.flags)]}
    if isinstance(v, PerlObject):
        tag = "frozen" if v.frozen else "obj"
        return {tag: [v.class_name, _canon_decoded(v.value, w)]}
    raise TypeError(f"no canonical form for {type(v).__name__}")


def _perl_string(s: dict[str, str], binary: str) -> str | bytes:
    """A Perl string form ({"str"} or {"bin"}) as our decoder renders it in a mode."""
    if "str" in s:
        return s["str"]
    raw = bytes.fromhex(s["bin"])
    if binary == "bytes":
        return raw
    if binary == "latin1":
        return raw.decode("latin-1")
    return raw.decode("utf-8", "surrogateescape")


def _perl_key(s: dict[str, str], binary: str) -> str:
    if "str" in s:
        return s["str"]
    raw = bytes.fromhex(s["bin"])
    return raw.decode("latin-1") if binary == "latin1" else raw.decode("utf-8", "surrogateescape")


def project_perl(c: Canon, binary: str) -> Canon:
    """Perl's canonical form as our decoder must produce it with ``binary=`` mode."""
    if c is None or isinstance(c, bool):
        return c
    if isinstance(c, dict):
        if "str" in c or "bin" in c:
            s = _perl_string(c, binary)
            return {"str": s} if isinstance(s, str) else {"bin": s.hex()}
        if "array" in c:
            return {"array": [project_perl(x, binary) for x in c["array"]]}
        if "hash" in c:
            return {"hash": {_perl_key(k, binary): project_perl(v, binary) for k, v in c["hash"]}}
        if "ref" in c:
            return {"ref": project_perl(c["ref"], binary)}
        if "obj" in c:
            return {"obj": [c["obj"][0], project_perl(c["obj"][1], binary)]}
        if "regexp" in c:
            mode = "latin1" if binary == "latin1" else "utf8"
            return {"regexp": [_text(_perl_string(part, mode)) for part in c["regexp"]]}
        return c  # int, float, backref, refs_forever
    raise TypeError(f"not a canonical form: {c!r}")


def _perl_view_str(s: str) -> dict[str, str]:
    if s.isascii():
        return {"bin": s.encode("ascii").hex()}
    if any(ord(ch) in ESCAPED_SURROGATES for ch in s):
        return {"bin": s.encode("utf-8", "surrogateescape").hex()}
    return {"str": s}


def perl_view(value: object) -> Canon:
    """The form Perl prints (via Canon.pm) after decoding our encoding of ``value``."""
    return _perl_view(value, _Walker())


def _perl_view(v: object, w: _Walker) -> Canon:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return {"int": str(v)}
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, str):
        return _perl_view_str(v)
    if isinstance(v, (bytes, bytearray)):
        return {"bin": bytes(v).hex()}
    if isinstance(v, (list, tuple)):
        n = w.first_visit(v)
        if n is not None:
            return {"backref": n}
        return {"array": [_perl_view(x, w) for x in v]}
    if isinstance(v, dict):
        n = w.first_visit(v)
        if n is not None:
            return {"backref": n}
        keys = sorted(v, key=lambda k: k if isinstance(k, bytes) else _key_bytes(k))
        pairs = [[_perl_view(k, w), _perl_view(v[k], w)] for k in keys]
        return {"hash": pairs}
    if isinstance(v, PerlRef):
        if _loops(v):
            return {"refs_forever": True}
        return {"ref": _perl_view(v.value, w)}
    if isinstance(v, PerlRegexp):
        return {"regexp": [_perl_view_str(v.pattern), _perl_view_str(v.flags)]}
    if isinstance(v, PerlObject):
        return {"obj": [v.class_name, _perl_view(v.value, w)]}
    raise TypeError(f"no Perl view of {type(v).__name__}")


def first_difference(left: Canon, right: Canon, path: str = "$") -> str | None:
    """A short description of where two canonical forms first differ, or None."""
    if type(left) is not type(right):
        return f"{path}: {_short(left)} != {_short(right)}"
    if isinstance(left, dict):
        if left.keys() != right.keys():
            return f"{path}: keys {sorted(left)} != {sorted(right)}"
        for k in left:
            d = first_difference(left[k], right[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(left, list):
        if len(left) != len(right):
            return f"{path}: length {len(left)} != {len(right)}"
        for i, (a, b) in enumerate(zip(left, right, strict=True)):
            d = first_difference(a, b, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if left == right else f"{path}: {_short(left)} != {_short(right)}"


def _short(x: object) -> str:
    r = repr(x)
    return r if len(r) <= 120 else r[:117] + "..."
