"""An import refused for another package's version, in the refusing package's own words (`ImportError: Numba needs
NumPy 2.4 or less. Got NumPy 2.5.`): the installed version of the package it names is the fix — that package at a
version the refusing one accepts, or the refusing package at a release made for the installed one. Logged as a
warning, vLLM went on without the package that refused: what needs it is off for the whole run, so the finding
stands whether or not the server served."""

from __future__ import annotations

import re

from bot.core import owners
from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

_NEEDS = re.compile(r"^(?P<who>[A-Za-z][\w.-]{1,40}) (?:needs|requires) (?P<pkg>[A-Za-z][\w.-]{1,40}) (?:version )?"
                    r"(?P<want>(?:[<>=!~]{1,2} ?)?\d{1,4}(?:\.\d{1,4}){0,3}\+?(?: or (?:less|lower|older|earlier|"
                    r"greater|higher|newer|later))?)")
_GOT = re.compile(r"\bGot (?P<pkg>[A-Za-z][\w.-]{1,40}) (?P<got>\d{1,4}(?:\.\d{1,4}){0,3})")
# a record a logger printed (vLLM's optional import caught and went on), not an exception raised
# (not ERROR: the engine core logs a crash's traceback at ERROR too)
_LOGGED = ("WARNING", "INFO")


def needed_version(cand: Candidate, exc: str) -> Finding | None:
    """An ImportError in which one package names another and the version it needs: the refusing one a library vLLM
    runs with, or the message naming the version it got of the other (`Got NumPy 2.5`)."""
    p = cand.line
    hit = _NEEDS.match(p.message.strip()[:400]) if exc == "ImportError" else None
    if hit is None:
        return None
    who, pkg, want = hit["who"], hit["pkg"], hit["want"]
    got = _GOT.search(p.message[:400])
    named = got is not None and got["pkg"].lower() == pkg.lower()
    if not named and who.lower() not in owners.LIBRARIES:
        return None  # `This requires torch 2.6`, `Quantization requires …`: no package refused another
    installed = f" (installed: {got['got']})" if got is not None and named else ""
    logged = (p.origin.level or "").upper() in _LOGGED
    dep = owners.of_package(pkg.lower()).package.lower()
    remediation = [f"Install a {pkg} that {who} accepts ({want}){installed} in the environment — or image — the "
                   f"server runs in, or a {who} release made for the installed {pkg}."]
    if logged:
        remediation.append(f"vLLM logged this and went on without {who}: what needs it is off for the run.")
    return Finding(
        id=f"package-version:{who.lower()}:{dep}", title=f"{who} refused the installed {pkg}: it needs {want}",
        severity="warning" if logged else "critical", confidence="medium",  # logged: it went on
        summary=(f"{who}'s own import check refused the installed {pkg}{installed}: the two packages' versions "
                 f"disagree, and {who} does not load."),
        evidence=[quoted(p)], remediation=remediation, priority=36, owner=owners.of_package(who.lower()).name,
        inputs=[dep], deps=[dep], advice=["pin"], at=position(p.origin), standing=logged)
