"""Publisher keys and plugin signatures: Ed25519, through the ``cryptography`` library.

A publisher holds a private key (``riak-events substream keygen`` writes it, PEM
PKCS#8, mode 0600, and its public half beside it as ``<file>.pub``). ``publish --key``
signs a :func:`message` naming the plugin file and the SHA-256 of its source; the
registry entry carries the signature and the signing key's id. A node trusts a set of
public keys (:class:`TrustedKeys`, from the ``trusted_keys`` setting: files or base64
keys) and accepts an entry only when :meth:`TrustedKeys.verify` finds its signature
good under one of them.

What a signature covers: the file name and the exact source bytes (so the version, the
substreams it declares and its limits, all derived from the source). Not covered:
``published_at``, and which signed version is current: someone who can write the
registry could put back an older signed version; the registry's ACL is what stops
that (``substreams/DESIGN.md``, "Threat model").

Pure logic apart from reading and writing key files.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from substreams.errors import InvalidSigningKey, SignatureRejected

__all__ = [
    "PublisherKey",
    "TrustedKeys",
    "generate",
    "is_inline_key",
    "key_id",
    "load_private_key",
    "message",
    "public_key_text",
]

#: Prefix of every signed message: a signature made for anything else never verifies.
_DOMAIN = b"riak-events substream plugin v1\n"
_RAW_KEY_BYTES = 32


def message(file: str, source: bytes) -> bytes:
    """The bytes a publisher signs for plugin ``file`` with ``source``."""
    return _DOMAIN + file.encode() + b"\n" + hashlib.sha256(source).hexdigest().encode()


def _raw(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public: Ed25519PublicKey) -> str:
    """A key's id: the first 16 hex digits of the SHA-256 of its raw 32 bytes."""
    return hashlib.sha256(_raw(public)).hexdigest()[:16]


def public_key_text(public: Ed25519PublicKey) -> str:
    """The base64 form of a public key, as accepted in ``trusted_keys``."""
    return base64.b64encode(_raw(public)).decode()


@dataclass(frozen=True)
class PublisherKey:
    """A publisher's private key and its id."""

    private: Ed25519PrivateKey
    id: str

    def sign(self, file: str, source: bytes) -> str:
        """Returns: the base64 signature of :func:`message` ``(file, source)``."""
        return base64.b64encode(self.private.sign(message(file, source))).decode()


def generate(path: Path) -> tuple[Path, str]:
    """Write a new key pair: ``path`` (private, mode 0600) and ``path.pub`` (public).

    Returns:
        (the public key file, the public key as base64).

    Raises:
        InvalidSigningKey: ``path`` exists already (never overwritten).
    """
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_path = path.with_name(path.name + ".pub")
    for existing in (path, public_path):
        if existing.exists():
            raise InvalidSigningKey(f"{existing} exists: refusing to overwrite a key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    text = public_key_text(private.public_key())
    public_path.write_text(text + "\n")
    return public_path, text


def load_private_key(path: Path) -> PublisherKey:
    """Read a publisher's private key (PEM PKCS#8 Ed25519, unencrypted).

    Raises:
        InvalidSigningKey: unreadable, not PEM, or not an Ed25519 key.
    """
    try:
        private = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as e:
        raise InvalidSigningKey(f"private key {path}: {e}") from e
    if not isinstance(private, Ed25519PrivateKey):
        raise InvalidSigningKey(f"private key {path}: not an Ed25519 key")
    return PublisherKey(private, key_id(private.public_key()))


def is_inline_key(entry: str) -> bool:
    """Whether a ``trusted_keys`` entry is a base64 key itself (else it names a file)."""
    # A base64 raw Ed25519 key is 44 characters ending in one "=" (a path never is, in
    # practice); anything else is a file.
    return len(entry) == 44 and entry.endswith("=") and "=" not in entry[:-1]


def _parse_public(text: str, where: str) -> Ed25519PublicKey:
    text = text.strip()
    if text.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_public_key(text.encode())
        except ValueError as e:
            raise InvalidSigningKey(f"trusted key {where}: {e}") from e
        if not isinstance(key, Ed25519PublicKey):
            raise InvalidSigningKey(f"trusted key {where}: not an Ed25519 key")
        return key
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as e:
        raise InvalidSigningKey(f"trusted key {where}: not base64: {e}") from e
    if len(raw) != _RAW_KEY_BYTES:
        raise InvalidSigningKey(f"trusted key {where}: {len(raw)} bytes, an Ed25519 key has 32")
    return Ed25519PublicKey.from_public_bytes(raw)


class TrustedKeys:
    """The public keys a node accepts registry plugins from.

    Args:
        keys: key id -> public key.
    """

    def __init__(self, keys: Mapping[str, Ed25519PublicKey] | None = None) -> None:
        self.keys = dict(keys or {})

    @classmethod
    def load(cls, entries: Iterable[str], *, base_dir: Path | None = None) -> TrustedKeys:
        """Keys from setting entries: each a file (base64 or PEM public key) or a base64
        key inline; relative paths are relative to ``base_dir``.

        Raises:
            InvalidSigningKey: naming the entry that is not a readable Ed25519 public key.
        """
        keys: dict[str, Ed25519PublicKey] = {}
        for entry in entries:
            if is_inline_key(entry):
                key = _parse_public(entry, f"{entry[:8]}...")
            else:
                path = Path(entry)
                if base_dir is not None and not path.is_absolute():
                    path = base_dir / path
                try:
                    text = path.read_text()
                except OSError as e:
                    raise InvalidSigningKey(f"trusted key file {path}: {e}") from e
                key = _parse_public(text, str(path))
            keys[key_id(key)] = key
        return cls(keys)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def verify(self, file: str, source: bytes, signature: str | None, signer: str | None) -> str:
        """Check a registry entry's signature.

        Args:
            file: the plugin's file name.
            source: its source bytes.
            signature: the base64 signature (None: unsigned).
            signer: the key id the entry names.

        Returns:
            The id of the trusted key that signed it.

        Raises:
            SignatureRejected: no trusted keys, unsigned, an unknown key, or a signature
                that does not verify; the message says which.
        """
        if not self.keys:
            raise SignatureRejected("no trusted_keys configured: registry plugins are not run")
        if not signature or not signer:
            raise SignatureRejected("not signed (publish with --key)")
        public = self.keys.get(signer)
        if public is None:
            raise SignatureRejected(f"signed by key {signer}, which is not a trusted key")
        try:
            public.verify(base64.b64decode(signature, validate=True), message(file, source))
        except (InvalidSignature, binascii.Error, ValueError) as e:
            raise SignatureRejected(
                f"bad signature: does not verify under trusted key {signer} "
                "(source or file name changed after signing, or a forged signature)"
            ) from e
        return signer
