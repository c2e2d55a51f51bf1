"""Publisher keys, signatures and trusted keys (substreams.signing); what a backfill may
overwrite (substreams.overwrite)."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest

from substreams.errors import InvalidSigningKey, SignatureRejected
from substreams.overwrite import decide
from substreams.results import ResultRecord
from substreams.signing import TrustedKeys, generate, load_private_key

SOURCE = b"from substreams import substream\n"


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(
    tmp_path: Path,
) -> None:
    public, text = generate(tmp_path / "k")
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600
    assert public.read_text().strip() == text
    with pytest.raises(InvalidSigningKey, match="exists"):
        generate(tmp_path / "k")


def test_a_signature_verifies_only_for_its_file_and_source_under_a_trusted_key(
    tmp_path: Path,
) -> None:
    public, text = generate(tmp_path / "k")
    key = load_private_key(tmp_path / "k")
    signature = key.sign("p.py", SOURCE)
    # from the file, or inline: the same key
    for trust in (TrustedKeys.load([str(public)]), TrustedKeys.load([text])):
        assert trust.verify("p.py", SOURCE, signature, key.id) == key.id
        with pytest.raises(SignatureRejected, match="bad signature"):
            trust.verify("p.py", SOURCE + b"#", signature, key.id)
        with pytest.raises(SignatureRejected, match="bad signature"):
            trust.verify("q.py", SOURCE, signature, key.id)  # moved to another name
        with pytest.raises(SignatureRejected, match="not signed"):
            trust.verify("p.py", SOURCE, None, None)
    generate(tmp_path / "other")
    stranger = load_private_key(tmp_path / "other")
    with pytest.raises(SignatureRejected, match="not a trusted key"):
        TrustedKeys.load([text]).verify("p.py", SOURCE, stranger.sign("p.py", SOURCE), stranger.id)
    with pytest.raises(SignatureRejected, match="no trusted_keys"):
        TrustedKeys().verify("p.py", SOURCE, signature, key.id)


def test_bad_key_material_is_named(tmp_path: Path) -> None:
    (tmp_path / "junk.pub").write_text("not a key\n")
    with pytest.raises(InvalidSigningKey, match=r"junk\.pub"):
        TrustedKeys.load([str(tmp_path / "junk.pub")])
    with pytest.raises(InvalidSigningKey, match=r"missing\.pub"):
        TrustedKeys.load([str(tmp_path / "missing.pub")])
    (tmp_path / "short.pub").write_text(base64.b64encode(b"k" * 31).decode())
    with pytest.raises(InvalidSigningKey, match="31 bytes, an Ed25519 key has 32"):
        TrustedKeys.load([str(tmp_path / "short.pub")])
    (tmp_path / "junk.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    with pytest.raises(InvalidSigningKey, match=r"junk\.key"):
        load_private_key(tmp_path / "junk.key")


def _record(version: str, status: str = "ok") -> ResultRecord:
    return ResultRecord(status, "s", version)  # type: ignore[arg-type]


def test_a_backfill_overwrites_only_what_its_own_version_did_not_compute() -> None:
    assert decide(None, "v1", replace_version=False) == "write"
    assert decide(_record("v1"), "v1", replace_version=False) == "keep"
    assert decide(_record("v1", "error"), "v1", replace_version=False) == "keep"
    assert decide(_record("v1", "shed"), "v1", replace_version=False) == "write"
    assert decide(_record("v0"), "v1", replace_version=False) == "other_version"
    assert decide(_record("v0"), "v1", replace_version=True) == "write"
