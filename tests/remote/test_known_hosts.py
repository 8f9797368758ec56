"""The known_hosts reader on its own: entries, `@revoked` wherever it stands, junk skipped by line."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from bot.remote.known_hosts import KnownHostsError, load


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return paramiko.RSAKey.generate(1024).get_base64(), paramiko.RSAKey.generate(1024).get_base64()


def test_entries_revocations_and_skipped_lines(tmp_path: Path, keys: tuple[str, str]) -> None:
    one, two = keys
    path = tmp_path / "known_hosts"
    path.write_text("\n".join([
        "# comment", "", f"a,b ssh-rsa {one}", f"c ssh-rsa {two}", "junk", f"@cert-authority * ssh-rsa {one}",
        "@revoked too short", f"@revoked * ssh-rsa {two}",  # after the entry it revokes
    ]) + "\n")
    got = load(path)
    assert [(host, kind) for host, kind, _ in got.entries] == [("a", "ssh-rsa"), ("b", "ssh-rsa")]
    assert got.skipped == [5, 6, 7]
    assert len(got.revoked) == 1


@pytest.mark.parametrize(("content", "said"), [(b"\0\1", "not a known_hosts file"), (b"\xff\xfe", "not a text file")])
def test_a_file_that_is_not_text_is_a_clear_error(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "known_hosts"
    path.write_bytes(content)
    with pytest.raises(KnownHostsError, match=said):
        load(path)
    with pytest.raises(KnownHostsError, match="does not exist"):
        load(tmp_path / "missing")
