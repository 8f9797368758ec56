"""What a library says of itself, without a traceback: two of its packages at different versions (`flashinfer-cubin
version (0.6.13) does not match flashinfer version (0.6.14)`), or an exception its own module path names
(`transformers.integrations.….AmbiguousGlobalPerLayerAttributeError:`) where vLLM's code read it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.atlas_readers.same_line import step_back
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

_MISMATCH_RE = re.compile(r"(?P<a>[A-Za-z][\w.-]{1,40}) version \(?v?(?P<va>\d[\w.+-]{0,30}?)\)? (?:does not|doesn't) "
                          r"match (?:the )?(?P<b>[A-Za-z][\w.-]{1,40}) version \(?v?(?P<vb>\d[\w.+-]{0,30}?)\)?[.,;]")
_BYPASS_RE = re.compile(r"(?i)\bSet `?(?P<var>[A-Z][A-Z0-9_]{3,60})=\w+`? to (?:bypass|skip|disable)")
# an exception printed with its module path, the package first (`transformers.….SomeError:`)
_QUALIFIED_RE = re.compile(r"(?:^|\s)(?P<pkg>[a-z_]{3,40})\.(?:[A-Za-z_]\w*\.){0,8}(?P<cls>[A-Z]\w*(?:Error|Exception))"
                           r":")
# what an API that moved between releases raises: a name, an attribute or a signature that is not where the
# caller looks, or a value's shape that changed ("a per-layer attribute", "no longer", "deprecated")
_API_DRIFT = re.compile(r"(?i)Attribute|Import|TypeError|Version|Compat|Deprecat|\bno longer\b|\bremoved\b|"
                        r"\bmoved\b|per-layer|has no attribute|unexpected keyword")
_VLLM_PATH_RE = re.compile(r"(?:^|[\s/\"'])vllm/[\w/]+\.py\b")


def package_words(st: State) -> None:
    """Findings for packages that say what is wrong with themselves."""
    problems = [*st.ev.parsed.problems, *st.ev.parsed.loose]
    for p in problems:
        text = p.origin.text or p.message
        if _mismatch(st, text, p) or _vllm_range(st, text, p) or _version_asked(st, text, p):
            return
    if any(f.severity == "critical" and f.confidence in ("high", "medium") for f in st.findings):
        return
    vllm_read = any(_VLLM_PATH_RE.search(f"{q.origin.text} {q.message}") for q in problems) or any(
        _VLLM_PATH_RE.search(c.origin.text or "") for c in st.ev.parsed.clues)
    for p in st.ev.parsed.problems:
        if p.kind != "exception":
            continue
        m = _QUALIFIED_RE.search(p.origin.text or "")
        owner = owners.of_package(m["pkg"]) if m else None
        if m is None or owner is None or owner.name in ("vllm", "python") or m["pkg"] not in owners.LIBRARIES:
            continue  # only a package the report knows by name
        if not _API_DRIFT.search(f"{m['cls']} {p.message}"):
            continue  # a library's error about what it was given (a port taken, a file missing) is no version drift
        st.findings.append(Finding(
            id=f"package-raised:{owner.name}", title=f"{m['cls']} from {owner.title} (`{m['pkg']}`)",
            severity="critical", confidence="medium",
            summary=(f"The exception's own module path names {owner.title}"
                     + (", and the log names vLLM's code that read it" if vllm_read else "")
                     + f": {clip(p.message, 160)}"),
            evidence=[quoted(p)],
            remediation=[f"The installed `{m['pkg']}` and this vLLM release disagree: install the `{m['pkg']}` version "
                         f"this vLLM release supports (its requirements pin it; `pip show {m['pkg']} vllm`), or "
                         "upgrade vLLM to a release made for the newer one."],
            priority=36, owner=owner.name, deps=[owner.name], advice=["upgrade"] if vllm_read else []))
        return


def _mismatch(st: State, text: str, p: ProblemLine) -> bool:
    m = _MISMATCH_RE.search(text[:2000])
    if m is None:
        return False
    a, b = m["a"], m["b"]
    owner = owners.of_package(b.replace("-", "_"))
    bypass = _BYPASS_RE.search(text[:2000])
    remediation = [f"Install the same version of both: `pip install '{a}=={m['vb']}' '{b}=={m['vb']}'` (or the "
                   f"versions this vLLM release pins), in the environment — or image — the server runs in."]
    if bypass is not None:
        remediation.append(f"The message names the switch that skips the check: `{bypass['var']}=1` (a way to start "
                           "meanwhile; mismatched packages may still fail later).")
    st.findings.append(Finding(
        id="package-versions-disagree", title=f"`{a}` {m['va']} and `{b}` {m['vb']} do not match",
        severity="critical", confidence="high",
        summary=f"{b}'s own check found {a} at another version than itself: {clip(text, 200)}",
        evidence=[quoted(p)],
        remediation=remediation, priority=28, part="platform", owner=owner.name, deps=[owner.name, a.lower()],
        knobs=[bypass["var"]] if bypass is not None else []))
    return True


# a package's own words asking for another version of a package than the one it found (`Please upgrade to torch >=
# 2.11.0 (found 2.10.0+cu128)`, `requires transformers>=4.56 but found 4.51.3`)
_ASKED_RE = re.compile(r"(?i)\b(?:upgrade to|requires?|needs?|install)\s+`?(?P<pkg>[A-Za-z][\w.-]{1,40})`?\s*"
                       r"(?P<op>>=|==|<=|>|<)\s*v?(?P<want>\d[\w.]{0,20})[^\n]{0,60}?\b(?:found|got|have|installed)"
                       r":?\s*v?(?P<have>\d[\w.+-]{0,30})")
# a package's check of the one it extends (Intel's extension for PyTorch: `… needs to work with PyTorch 2.6.*, but
# PyTorch 2.7.0+cpu is found`): the two were installed at versions not made for each other
_WORKS_WITH_RE = re.compile(r"(?i)\bneeds? to (?:work|run) with\s+(?P<pkg>[A-Za-z][\w.-]{1,40})\s+v?(?P<want>\d[\w.*]"
                            r"{0,20}),?\s+but\s+(?P=pkg)\s+v?(?P<have>\d[\w.+-]{0,30}?)\s+is found")
_PACKAGE_NAMES = {"pytorch": "torch"}
# the code went on without what needed the version (an import skipped, a feature turned off)
_WENT_ON_RE = re.compile(r"(?i)\bskipp(?:ing|ed)\b|\bfalling back\b|\bdisabl(?:ing|ed)\b|\bwithout\b")


def _version_asked(st: State, text: str, p: ProblemLine) -> bool:
    m = _ASKED_RE.search(text) or _WORKS_WITH_RE.search(text)
    if m is None:
        return False
    pkg = _PACKAGE_NAMES.get(m["pkg"].lower(), m["pkg"])
    owner = owners.of_package(pkg.replace("-", "_"))
    pairing = "op" not in m.groupdict()  # an extension's check of the package it extends: the pair disagrees
    want = f"{m['pkg']} {m['want']}" if pairing else f"{m['pkg']} {m['op']} {m['want']}"
    went_on = _WENT_ON_RE.search(text) is not None
    st.findings.append(Finding(
        id=f"version-asked:{owner.name}", title=f"`{m['pkg']}` {m['have']} is not what the code asks ({want})",
        severity="warning" if went_on else "critical", confidence="medium",
        summary=(f"The message asks for {want} and says it found {m['have']}"
                 + (": the code went on without what needed it (slower or missing features)." if went_on else ".")),
        evidence=[quoted(p)],
        remediation=[f"Install {want} in the environment that printed this, or pin the package that printed it to "
                     f"its release made for {m['pkg']} {m['have']} (the one whose requirements allow it)."],
        priority=36, owner="other" if pairing else owner.name, deps=[owner.name], advice=["pin"],
        part="platform" if pairing else None))
    return True


# a program's requirement of vLLM in transformers' `require_version` words (`vllm>=0.4.3,<=0.7.3 is required for a
# normal functioning of this module, but found vllm==0.8.1.`): transformers never requires vLLM, so the requirement
# is the program's that runs vLLM (a trainer, a serving framework), whatever file the words come from
_VLLM_RANGE_RE = re.compile(r"\bvllm(?P<spec>(?:\s*(?:[<>!~]=?|==)\s*[\w.+*]{1,30}\s*,?){1,4}) is required for a "
                            r"normal functioning of this module, but found vllm==(?P<have>[\w.+-]{1,40}?)\.?(?:\s|$)")


def _vllm_range(st: State, text: str, p: ProblemLine) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    from bot.core.triage.evidence import position

    m = _VLLM_RANGE_RE.search(text[:2000])
    if m is None:
        return False
    try:
        spec, have = SpecifierSet(m["spec"].replace(" ", "")), Version(m["have"])
    except (InvalidSpecifier, InvalidVersion):
        return False
    above = any(s.operator in ("<", "<=") and have > Version(s.version) for s in spec)
    bypass = _BYPASS_RE.search(text[:2000])
    remediation = [f"Install a vLLM the program allows (`pip install 'vllm{m['spec'].strip()}'`): "
                   + ("the installed one is newer than it supports — pin vLLM back" if above else
                      "the installed one is older than it needs — upgrade vLLM")
                   + ", or install the program's release made for vLLM " + m["have"] + "."]
    if bypass is not None:
        remediation.append(f"The message names the switch that skips the check: `{bypass['var']}=1` (the program "
                           "may then fail later where the two disagree).")
    at = position(p.origin)
    # the words are transformers' utility's; the requirement is not transformers'
    step_back(st, at, lambda f: f.owner == "transformers")
    st.findings.append(Finding(
        id="vllm-range-required", title=f"The program requires vllm{m['spec'].strip()}; vLLM {m['have']} is installed",
        severity="critical", confidence="medium",
        summary=("A version check of the program that runs vLLM (in transformers' `require_version` words) refused "
                 f"the installed vLLM {m['have']}: it requires vllm{m['spec'].strip()}."),
        evidence=[quoted(p)], remediation=remediation, priority=30, owner="other", inputs=["vllm"],
        advice=["pin"] if above else ["upgrade"], knobs=[bypass["var"]] if bypass is not None else []))
    return True
