"""Turn the part off to prove it: the parts of vLLM a crash can be tested against, and the flag, variable or config
that switches each off (or swaps it) on the user's release (`knowledge/catalogs/switches.yaml`, read from vLLM's
released source, every range with its file and line).

A crash whose frames lie in such a part gets that switch as the plan's first step, with what each outcome means:
gone (the part is at fault: keep it off, report it, upgrade past it) or stays (look elsewhere).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from packaging.version import InvalidVersion, Version

SOURCE = "knowledge/catalogs/switches.yaml"
OLDEST_READ = "0.6.6.post1"


@dataclass(frozen=True)
class Off:
    how: str  # the flag, ENV=VALUE, or a --compilation-config / --speculative-config JSON
    kind: str  # flag | env | config
    first: str | None
    last: str | None
    note: str
    sources: tuple[str, ...]

    @property
    def knob(self) -> str:
        """The flag or variable name the switch turns (`--enforce-eager`, `NCCL_P2P_DISABLE`)."""
        m = re.match(r"\s*([A-Z][A-Z0-9_]+)=|\s*(--[a-z][a-z0-9-]*|-O\d?)", self.how)
        if m is None:
            return self.how.split()[0]
        return m.group(1) or m.group(2)

    def covers(self, version: str | None) -> bool:
        v = _version(version)
        if v is None:
            return True
        # the oldest release the table was read from: the switch may be older still
        lo = None if self.first in (None, OLDEST_READ) else _version(self.first)
        hi = _version(self.last)
        return (lo is None or v >= lo) and (hi is None or v <= hi)

    @property
    def span(self) -> str:
        if self.first is None and self.last is None:
            return "any release"
        return f"vLLM {self.first or '…'}–{self.last or 'now'}"


@dataclass(frozen=True)
class Switch:
    id: str
    part: str
    what: str
    files: tuple[str, ...]
    functions: re.Pattern[str] | None
    off: tuple[Off, ...]
    gone: str
    stays: str
    cost: str

    def for_release(self, version: str | None) -> Off | None:
        """The way to turn it off on this release (the newest range that covers it; when the release is unknown, a
        way the newest release still has, before one a span of releases only had)."""
        v = _version(version)
        if v is None:
            return next((o for o in self.off if o.last is None), self.off[0] if self.off else None)
        hit = next((o for o in self.off if o.covers(version)), None)
        if hit is not None:
            return hit
        # a release the table was not read from, between two read ones that turn it off the same way: so does it
        return next((later for later in self.off for earlier in self.off
                     if later.how == earlier.how and (lo := _version(earlier.last)) is not None
                     and (hi := _version(later.first)) is not None and lo < v < hi), None)

    def offer(self, version: str | None) -> tuple[str, str] | None:
        """What a finding says and turns to try this switch on this release: (the advice, the knob), or None when
        the release has no way to turn it off."""
        off = self.for_release(version)
        text = self.advice(version)
        return (text, off.knob) if off is not None and text else None

    def advice(self, version: str | None) -> str | None:
        off = self.for_release(version)
        if off is None:
            return None
        note = f" ({off.note})" if off.note and len(off.note) <= 160 else ""
        unknown = _version(version) is None
        # (one range for the way only where its ranges say the same of it: a note true of one range is not of all)
        same = len({o.note for o in self.off if o.how == off.how}) == 1
        span = self._span_of(off.how) if unknown and same else off.span
        return (f"Turn {self.what.split(';')[0].split(' (')[0]} off to prove it: `{off.how}` ({span}){note}"
                f"{self._older(off, span) if unknown else ''}. "
                f"If the failure goes away: {_end(self.gone)} If it stays: {_end(self.stays)}"
                + (f" Cost while off: {_end(self.cost)}" if self.cost else ""))

    def _span_of(self, how: str) -> str:
        """Every release a way covers, its ranges taken as one (a gap between two is releases the table was not read
        from, which for_release counts as covered too); the oldest read release as `…`: the way may be older."""
        offs = [o for o in self.off if o.how == how]
        firsts = [v for o in offs if o.first != OLDEST_READ and (v := _version(o.first)) is not None]
        lasts = [v for o in offs if (v := _version(o.last)) is not None]
        first = min(firsts) if len(firsts) == len(offs) else None
        last = max(lasts) if len(lasts) == len(offs) else None
        return f"vLLM {first or '…'}–{last or 'now'}"

    def _older(self, chosen: Off, span: str) -> str:
        """With the release unknown, the other ways releases older than the chosen way's `span` turn it off (the
        newest way may not exist there)."""
        first = _version(span.removeprefix("vLLM ").split("–")[0])
        if first is None:
            return ""
        older = [o.how for o in self.off if o.how != chosen.how
                 and ((v := _version(o.first)) is None or o.first == OLDEST_READ or v < first)]
        return "".join(f"; on {self._span_of(how)}: `{how}`" for how in list(dict.fromkeys(older))[:2])


def _end(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def _version(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(Version(str(text).strip().lstrip("v")).public)
    except InvalidVersion:
        return None


def _clean(text: Any) -> str:
    return " ".join(str(text or "").split())


@lru_cache(maxsize=1)
def load_switches() -> tuple[Switch, ...]:
    import yaml

    raw = (resources.files("bot.core") / "knowledge" / "catalogs" / "switches.yaml").read_text(encoding="utf-8")
    data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    out = []
    for s in data["switches"]:
        funcs = s.get("functions") or []
        meaning = s.get("meaning") or {}
        offs = s.get("off") or s.get(False) or []  # `off` unquoted is YAML 1.1's false
        out.append(Switch(
            id=s["id"], part=s["part"], what=_clean(s.get("what")), files=tuple(s.get("files") or ()),
            functions=re.compile("|".join(f"(?:{f})" for f in funcs)) if funcs else None,
            off=tuple(Off(_clean(o["how"]), o.get("kind", ""), _str(o.get("first")), _str(o.get("last")),
                          _clean(o.get("note")), tuple(o.get("sources") or ())) for o in offs),
            gone=_clean(meaning.get("gone")), stays=_clean(meaning.get("stays")), cost=_clean(s.get("cost"))))
    return tuple(out)


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def release_hint(version: str | None, path: str | None) -> str | None:
    """The release a switch is chosen for: the user's, else — a release the log does not say — the newest one whose
    source has the failing file (a frame in `vllm/attention/backends/` is from a release that still had it)."""
    if version or not path:
        return version
    from bot.core.history import load_history

    hist = load_history()
    rels = hist.module_releases(path) if hist is not None and path.endswith(".py") else []
    return rels[-1] if rels and rels[-1] != hist.releases[-1] else None  # type: ignore[union-attr]


def for_frame(path: str, function: str | None) -> Switch | None:
    """The most specific switch whose files hold the frame (a repository path) and whose function names (when it
    has them) match; the table lists the specific before the broad."""
    matched = [s for s in load_switches() if any(path.startswith(f) for f in s.files)]
    for s in matched:
        # a class's name in a qualified one (`FlashAttentionImpl.__init__`) as the snake-case names are written
        if s.functions is None or (function and (s.functions.search(function) or s.functions.search(function.lower()))):
            return s
    return matched[0] if matched else None


def by_id(switch_id: str) -> Switch | None:
    return next((s for s in load_switches() if s.id == switch_id), None)
