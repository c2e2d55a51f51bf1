"""Bucket types and bucket properties: validation, merging, quorum arithmetic (no I/O).

Riak resolves a bucket's properties as: the bucket type's props, overridden by props set
on the bucket itself. The ``default`` bucket type holds Riak's built-in defaults. The
registry here is in memory; ``app.py`` persists every change through the store before
it applies it, so a restart gives the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devnode.errors import InvalidProps, UnknownBucketType

DEFAULT_TYPE = "default"

QUORUM_PROPS = frozenset({"r", "w", "dw", "rw", "pr", "pw"})
BOOLEAN_PROPS = frozenset(
    {"allow_mult", "last_write_wins", "notfound_ok", "basic_quorum", "dvv_enabled", "write_once"}
)
INTEGER_PROPS = frozenset({"n_val", "big_vclock", "small_vclock", "old_vclock", "young_vclock"})
HOOK_PROPS = frozenset({"precommit", "postcommit"})
#: Props a client may not set: Riak derives them.
READ_ONLY_PROPS = frozenset({"name", "active", "claimant"})
QUORUM_WORDS = frozenset({"one", "quorum", "all", "default"})


def validate_props(props: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """Check property values are of the kinds Riak accepts; return a clean copy.

    Read-only props (name, active, claimant) are dropped; unknown props are kept as
    given (Riak stores them too).

    Raises:
        InvalidProps: naming ``where`` and the property.
    """
    clean: dict[str, Any] = {}
    for name, value in props.items():
        if name in READ_ONLY_PROPS:
            continue
        if name in QUORUM_PROPS:
            if not is_quorum(value):
                raise InvalidProps(
                    f"{where}: {name} must be a non-negative integer or one of "
                    f"'one', 'quorum', 'all', 'default', not {value!r}"
                )
        elif name in BOOLEAN_PROPS:
            if not isinstance(value, bool):
                raise InvalidProps(f"{where}: {name} must be true or false, not {value!r}")
        elif name in INTEGER_PROPS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidProps(f"{where}: {name} must be a non-negative integer")
            if name == "n_val" and value < 1:
                raise InvalidProps(f"{where}: n_val must be at least 1")
        elif name in HOOK_PROPS and not (
            isinstance(value, list)
            and all(isinstance(h, dict) and {"mod", "fun"} <= set(h) for h in value)
        ):
            raise InvalidProps(f"{where}: {name} must be a list of {{mod, fun}} objects")
        clean[name] = value
    return clean


def is_quorum(value: object) -> bool:
    """Whether ``value`` is a valid Riak quorum: an integer >= 0 or one of Riak's words."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    return isinstance(value, str) and value in QUORUM_WORDS


def resolve_quorum(value: int | str, n_val: int, bucket_value: int | str) -> int:
    """The number a quorum value stands for, for a bucket of ``n_val`` replicas.

    ``default`` takes the bucket's own value (``bucket_value``).
    """
    if value == "default":
        value = bucket_value if bucket_value != "default" else "quorum"
    if value == "one":
        return 1
    if value == "quorum":
        return n_val // 2 + 1
    if value == "all":
        return n_val
    return int(value)


class BucketRegistry:
    """The configured bucket types and the props set on individual buckets."""

    def __init__(self, types: Mapping[str, Mapping[str, Any]]) -> None:
        """Args:
        types: bucket type name -> its full props (including ``default``).
        """
        self._types: dict[str, dict[str, Any]] = {name: dict(p) for name, p in types.items()}
        self._buckets: dict[tuple[str, str], dict[str, Any]] = {}
        self._cache: dict[tuple[str, str], dict[str, Any]] = {}

    def type_names(self) -> list[str]:
        """Names of every bucket type, sorted."""
        return sorted(self._types)

    def has_type(self, bucket_type: str) -> bool:
        """Whether the bucket type exists."""
        return bucket_type in self._types

    def type_props(self, bucket_type: str) -> dict[str, Any]:
        """The bucket type's props (a copy).

        Raises:
            UnknownBucketType: the type is not configured.
        """
        try:
            return dict(self._types[bucket_type])
        except KeyError:
            raise UnknownBucketType(bucket_type) from None

    def bucket_props(self, bucket_type: str, bucket: str) -> dict[str, Any]:
        """The effective props of a bucket: its type's, overridden by its own, plus name.

        The result is shared and must not be modified.

        Raises:
            UnknownBucketType: the type is not configured.
        """
        cached = self._cache.get((bucket_type, bucket))
        if cached is None:
            cached = self.type_props(bucket_type)
            cached.update(self._buckets.get((bucket_type, bucket), {}))
            cached["name"] = bucket
            self._cache[(bucket_type, bucket)] = cached
        return cached

    def bucket_overrides(self, bucket_type: str, bucket: str) -> dict[str, Any]:
        """The props set on the bucket itself (a copy)."""
        return dict(self._buckets.get((bucket_type, bucket), {}))

    def set_bucket_overrides(
        self, bucket_type: str, bucket: str, overrides: Mapping[str, Any]
    ) -> None:
        """Replace the props set on one bucket (already validated and persisted)."""
        self.type_props(bucket_type)
        self._buckets[(bucket_type, bucket)] = dict(overrides)
        self._cache.pop((bucket_type, bucket), None)

    def set_type_props(self, bucket_type: str, props: Mapping[str, Any]) -> None:
        """Replace a bucket type's props (already validated and persisted)."""
        self.type_props(bucket_type)
        self._types[bucket_type] = dict(props)
        self._cache = {k: v for k, v in self._cache.items() if k[0] != bucket_type}
