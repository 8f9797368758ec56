"""Release order for advice: whether a release is newer than the user's, and the upgrade step to suggest."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.findings import Advice


def newer(release: str, version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(release) > Version(Version(version).base_version)
    except InvalidVersion:
        return True


def one_release(version: str | None) -> str | None:
    """The version when it names one release (`0.10.1+cu128`), None for a range or a pattern (`>=0.25.0`, `0.22.x`):
    only one release can say which side of a change the user is on."""
    from packaging.version import InvalidVersion, Version

    if not version:
        return None
    try:
        Version(version)
    except InvalidVersion:
        return None
    return version


def public_release(version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version)
    except InvalidVersion:
        return False
    return not (v.is_devrelease or v.local)


def upgrade_steps(version: str | None, what: str, rels: tuple[str, ...],
                  pin_previous: bool = False) -> tuple[list[str], list[Advice]]:
    """The upgrade to suggest; with `pin_previous` (a defect of the user's release), also the release before it."""
    newer_ones = [r for r in rels if version is None or newer(r, version)]
    if not newer_ones:
        return [], []
    latest = newer_ones[-1]
    link = (f" (what changed: https://github.com/vllm-project/vllm/compare/v{version}...v{latest})"
            if version and public_release(version) else "")
    lines = [f"Upgrade: {what} change from release to release; try {latest} (newest the atlas read){link}. If it "
             "still fails there, report it upstream with this traceback."]
    advice: list[Advice] = ["upgrade"]
    older = [r for r in rels if version is not None and newer(version, r)]
    if pin_previous and older:
        # a defect the user's release brought is absent from the one before it, when that one served the same setup
        lines.append(f"If an earlier release served this setup (the one before yours the atlas read is {older[-1]}), "
                     "pin it meanwhile.")
        advice.append("pin")
    return lines, advice


def frames_release(frames: list[ProblemLine]) -> str | None:
    """A log that does not say its release: the newest release read whose source has every vLLM frame's code line
    (None when the frames fit the newest too, or fit no release together) — a switch's name changes by release."""
    from bot.core.history import load_history
    from bot.core.parts import repo_path

    lines = [(path, q.frame_function, q.source) for q in frames
             if q.source and q.frame_function and (path := repo_path(q.frame_file or "")) and path.startswith("vllm/")]
    hist = load_history() if lines else None
    fit = hist.releases_fitting(lines) if hist is not None else []
    return fit[-1] if fit and hist is not None and fit[-1] != hist.releases[-1] else None
