"""What a failure's own words name beyond its site: another package and the version it needs, support that is
not there yet, a checkpoint and a loader that disagree.

- "Numba needs NumPy 2.2 or less", "requires transformers>=4.56", "not supported by xgrammar": the package named
  is the one whose installed version to change;
- "X does not support LoRA yet", "architectures [...] are not supported for now": support a later release may have;
- a failure while vLLM loads a model's weights (its loader, a weight's shape or name): the checkpoint's layout and
  this release's loader disagree — a later loader, or a checkpoint in a layout this one knows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.core import owners

if TYPE_CHECKING:
    from bot.core.triage.findings import Advice, Finding

# a package and a version it needs, or a refusal in a library's name
_NEEDS = re.compile(r"\b(?P<who>[A-Za-z][\w-]{1,30})\s+(?:needs|requires|require|is incompatible with|is not "
                    r"compatible with)\s+(?P<pkg>[A-Za-z][\w-]{1,30})\s*(?:[<>=!~]=?\s*|version\s+|v)?\d",
                    re.IGNORECASE)
_PIN = re.compile(r"\b(?P<pkg>[A-Za-z][\w-]{1,30})\s*(?:[<>=!~]=|>|<)\s*\d+\.\d+")
_BY_LIBRARY = re.compile(r"\bnot supported (?:by|in|with) (?:the )?(?P<pkg>[A-Za-z][\w-]{1,30})\b", re.IGNORECASE)
_YET = re.compile(r"\bnot (?:yet )?supported (?:yet|for now)\b|\bdoes not (?:yet )?support\b[^.]{0,60}\byet\b|"
                  r"\bnot (?:yet )?implemented\b[^.]{0,40}\byet\b|\bare not supported for now\b", re.IGNORECASE)
_LOADING = re.compile(r"load_weights|weight_loader|_load_\w+|load_model|default_weight_loader|track_weights_loading")
_KNOWN = {name.lower(): name for name in owners.LIBRARIES} | {"numpy": "numpy", "mlx-lm": "mlx-lm",
                                                              "mlx_lm": "mlx-lm", "vllm": "vllm"}


@dataclass
class Named:
    deps: list[str] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)
    remediation: list[str] = field(default_factory=list)


def packages_named(text: str) -> list[str]:
    """Packages a message names with a version it needs, or as the one that refuses."""
    out: list[str] = []
    for rx in (_NEEDS, _PIN, _BY_LIBRARY):
        for m in rx.finditer(text[:2000]):
            pkg = _KNOWN.get(m.group("pkg").lower().replace("_", "-")) or _KNOWN.get(m.group("pkg").lower())
            if pkg and pkg != "vllm":
                out.append(owners.of_package(pkg).name if pkg in owners.LIBRARIES else pkg)
    return list(dict.fromkeys(out))


def named_in_words(message: str, function: str | None, part: str | None) -> Named:
    """What the message (and where it failed) says to change, beyond the settings its site reads."""
    out = Named()
    for pkg in packages_named(message):
        out.deps.append(pkg)
        out.remediation.append(f"The message names `{pkg}` and the version it needs: install the `{pkg}` version it "
                               "asks for (`pip show " + pkg + "`).")
    if _YET.search(message):
        out.advice.append("upgrade")
        out.remediation.append("The message says it is not supported yet: a later vLLM release may support it — "
                               "read the newest release's notes, and upgrade if it does.")
    if part == "model-loading" or (function and _LOADING.search(function)):
        out.advice += ["upgrade", "checkpoint"]
        out.remediation.append("vLLM failed loading the weights: the checkpoint's layout and this release's loader "
                               "for the architecture disagree — a later release's loader may read it (loaders learn "
                               "new layouts), or use a checkpoint in a layout this release loads.")
    return out


def apply_named(f: Finding, named: Named) -> None:
    f.deps = list(dict.fromkeys([*f.deps, *named.deps]))
    f.advice = list(dict.fromkeys([*f.advice, *named.advice]))
    f.remediation = list(dict.fromkeys([*f.remediation, *named.remediation]))
