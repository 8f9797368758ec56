"""Reading a managed known_hosts as OpenSSH does: `@revoked` keys refused, junk lines skipped with a warning.

paramiko's own loader raises on a line it cannot parse and does not know `@revoked`; a file that is
not text (or not readable) is a clear error here instead of an internal one.
"""

from __future__ import annotations

import base64
import binascii
import logging
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry

log = logging.getLogger("specops.ssh")
MAX_BYTES = 4 << 20


class KnownHostsError(ValueError):
    """The file is missing, unreadable or not text."""


@dataclass
class KnownHosts:
    entries: list[tuple[str, str, paramiko.PKey]] = field(default_factory=list)  # (host pattern, type, key)
    revoked: set[bytes] = field(default_factory=set)  # key blobs
    skipped: list[int] = field(default_factory=list)  # line numbers that were not entries

    def is_revoked(self, key: paramiko.PKey) -> bool:
        return key.asbytes() in self.revoked


def load(path: Path) -> KnownHosts:
    text = _read_text(path)
    out = KnownHosts()
    entries: list[HostKeyEntry] = []
    for n, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("@"):
            _marker_line(out, n, stripped)
            continue
        entry = _entry(stripped, n)
        if entry is None:
            out.skipped.append(n)
        else:
            entries.append(entry)
    # after the whole file: a `@revoked` line may come after the entry it revokes
    for entry in entries:
        if entry.key.asbytes() in out.revoked:
            continue  # a revoked key listed again is still revoked
        for host in entry.hostnames:  # a hashed name (|1|…) works as is: paramiko matches it
            out.entries.append((host, entry.key.get_name(), entry.key))
    if out.skipped:
        log.warning("known_hosts %s: skipped line(s) %s (not a host key entry)", path,
                    ", ".join(str(n) for n in out.skipped[:10]))
    return out


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise KnownHostsError(f"known_hosts file {path} does not exist") from None
    except OSError as exc:
        raise KnownHostsError(f"cannot read known_hosts {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES or b"\0" in raw:
        raise KnownHostsError(f"known_hosts {path} is not a known_hosts file (binary, or over 4 MiB)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KnownHostsError(f"known_hosts {path} is not a text file") from None


def _marker_line(out: KnownHosts, n: int, line: str) -> None:
    marker, _, rest = line.partition(" ")
    # @cert-authority is skipped like junk: certificates are not used here
    blob = _blob(rest) if marker == "@revoked" else None
    if blob is None:
        out.skipped.append(n)
    else:
        out.revoked.add(blob)


def _entry(line: str, n: int) -> HostKeyEntry | None:
    """The line as paramiko reads it, or None where paramiko would raise or finds no key it knows."""
    try:
        entry = HostKeyEntry.from_line(line, n)
    except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey, binascii.Error, ValueError, IndexError):
        return None
    return entry if entry is not None and entry.key is not None else None


def _blob(rest: str) -> bytes | None:
    """The key of a `@revoked hosts keytype base64` line."""
    parts = rest.split()
    if len(parts) < 3:
        return None
    try:
        return base64.b64decode(parts[2], validate=True)
    except (binascii.Error, ValueError):
        return None
