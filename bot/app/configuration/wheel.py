"""The wheel of the specops that runs, for the Containerfile `specops init --deploy-files` writes: the image is
built from that folder alone (a pip user has no checkout), so the package goes there as a wheel.

Installed from a wheel (the usual case), the installed files are zipped back into one, checked against the
install's RECORD so the image gets what was installed and nothing edited since. Run from a checkout, hatchling
(the project's build backend) builds it, offline. Otherwise the caller is told how to make one.
"""

from __future__ import annotations

import base64
import hashlib
import io
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path, PurePosixPath

from bot.paths import repo_root

_PKG = Path(__file__).resolve().parents[2]  # bot/
NOT_IN_A_WHEEL = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"})  # pip's, about this install


def wheel_name(version: str) -> str:
    return f"specops-{version}-py3-none-any.whl"  # pure Python (the WHEEL file's Tag)


class NoWheel(Exception):
    """Why no wheel could be made here; the message says how to make one."""


def build_wheel() -> tuple[str, bytes]:
    """(file name, bytes) of this specops as a wheel."""
    dist = _installed_here()
    if dist is not None:
        return wheel_name(dist.version), _repack(dist)
    root = repo_root()
    if root is not None:
        return _from_checkout(root)
    raise NoWheel("this specops is neither installed from a wheel nor a checkout: copy the wheel you installed "
                  "from into wheels/")


def _installed_here() -> metadata.Distribution | None:
    """The installed distribution whose files are the `bot` package that runs (not an editable install's)."""
    try:
        dist = metadata.distribution("specops")
    except metadata.PackageNotFoundError:
        return None
    listed = {str(f) for f in dist.files or ()}
    init = Path(str(dist.locate_file("bot/__init__.py")))
    if "bot/__init__.py" not in listed or not init.is_file() or init.resolve() != _PKG / "__init__.py":
        return None
    return dist


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _in_the_wheel(name: str) -> bool:
    """The package and its metadata; not the console script in bin/, bytecode or pip's notes."""
    parts = PurePosixPath(name).parts
    if len(parts) < 2:
        return False
    if parts[0] == "bot":
        return "__pycache__" not in parts and not name.endswith(".pyc")
    return parts[0].endswith(".dist-info") and not (len(parts) == 2 and parts[1] in NOT_IN_A_WHEEL)


def _wheel_members(dist: metadata.Distribution) -> list[tuple[str, bytes]]:
    members: list[tuple[str, bytes]] = []
    for f in dist.files or ():
        if not _in_the_wheel(str(f)):
            continue
        data = Path(str(f.locate())).read_bytes()
        if f.hash is not None and f.hash.mode == "sha256" and _record_hash(data) != f"sha256={f.hash.value}":
            raise NoWheel(f"{f} was changed after specops was installed: copy the wheel you installed from into "
                          "wheels/ (or reinstall it)")
        members.append((str(f), data))
    return sorted(members)


def _repack(dist: metadata.Distribution) -> bytes:
    members = _wheel_members(dist)
    info = next(name.split("/")[0] for name, _ in members if name.split("/")[0].endswith(".dist-info"))
    record = [f"{name},{_record_hash(data)},{len(data)}" for name, data in members] + [f"{info}/RECORD,,"]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")  # last, as the wheel spec recommends
    return out.getvalue()


def _from_checkout(root: Path) -> tuple[str, bytes]:
    try:
        from hatchling.builders.wheel import WheelBuilder
    except ImportError:
        raise NoWheel(f"hatchling is not installed to build it from the checkout {root}: "
                      f"`pip wheel --no-deps -w DIR/wheels {root}`") from None
    with tempfile.TemporaryDirectory(prefix="specops-wheel-") as tmp:
        [built] = list(WheelBuilder(str(root)).build(directory=tmp, versions=["standard"]))
        path = Path(built)
        return path.name, path.read_bytes()
