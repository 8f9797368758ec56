"""Below vLLM: sourced catalogs of what the CUDA runtime and driver, NCCL, the dynamic loader and container GPU
runtimes print, each entry with the vendor document (or source file) that states it (`knowledge/catalogs/*.yaml`).

A log line that holds one of these texts is answered by the layer that printed it: its owner (cuda-runtime, driver,
nccl, loader, container-runtime), what it means, how to isolate it and the kinds of fix (`host:…`, `dep:…`, `knob:…`,
`switch`, `report`). Read once per process, when a problem line needs it; every regex is linear (no nested
quantifier) and runs on at most MAX_TEXT characters of a line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

MAX_TEXT = 4000


@dataclass(frozen=True)
class Refinement:
    """What a captured name (a library, a symbol, a detail) narrows the meaning to."""

    match: re.Pattern[str]
    means: str
    fix: tuple[str, ...]
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Entry:
    kind: str  # cuda | nccl | nccl-hint | loader | container
    name: str
    owner: str  # cuda-runtime | driver | torch | nccl | loader | container-runtime
    meaning: str
    fix: tuple[str, ...]
    sources: tuple[str, ...]
    isolate: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()  # exact texts that identify it (a substring of the line)
    regex: re.Pattern[str] | None = None
    refine: tuple[tuple[str, tuple[Refinement, ...]], ...] = ()  # (capture group, refinements)
    inputs: tuple[str, ...] = ()  # the setting at fault when it happens in vLLM's process (its memory share)
    remedy: str = ""  # what the `knob:` fixes do, in words
    # a kernel library's own kernel of one part of vLLM (FlashInfer's attention): that part, and the switch that
    # turns the library's use there off (an id of switches.yaml)
    part: str = ""
    switch: str = ""

    @property
    def switches(self) -> list[str]:
        """The switches its isolating steps name: an environment variable set (`NCCL_P2P_DISABLE=1`) or a flag."""
        return [m.group(1) or m.group(2) for item in self.isolate for m in _SWITCH.finditer(item)]


_SWITCH = re.compile(r"\b([A-Z][A-Z0-9_]{3,}=\w+(?:[:.,]\w+)*)|(--[a-z][a-z0-9-]+)")


@dataclass(frozen=True)
class Hit:
    entry: Entry
    detail: str = ""  # what the regex captured (the library, the symbol, the CUDA text inside NCCL's line)
    means: str = ""  # the refinement's meaning, when one applied
    fix: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    nested: tuple[Hit, ...] = field(default=())  # a CUDA error named inside an NCCL line


@dataclass(frozen=True)
class NcclEnv:
    name: str
    value: str
    effect: str
    when: str
    sources: tuple[str, ...]
    transport: str = ""  # the NCCL transport it turns off, as NCCL's source names it (`src/transport/p2p.cc`)


# NCCL's WARN and INFO lines name the source file they come from (`transport/nvls.cc:254 NCCL WARN …`)
_TRANSPORT = re.compile(r"\btransport/(\w+)(?:\.cc|/)")


@dataclass(frozen=True)
class Catalogs:
    entries: tuple[Entry, ...]
    nccl_env: tuple[NcclEnv, ...]

    def transport_switch(self, text: str) -> tuple[str, NcclEnv] | None:
        """The NCCL source file a line names, and the variable that turns that transport off."""
        for m in _TRANSPORT.finditer(text):
            env = next((v for v in self.nccl_env if v.transport == m.group(1)), None)
            if env is not None:
                return m.group(0).rstrip("/"), env
        return None

    def hits(self, text: str) -> list[Hit]:
        """Every entry the line holds, most specific first (a loader or container pattern, then a CUDA error, then
        an NCCL result or hint; a CUDA text inside an NCCL line is nested in the NCCL hit)."""
        line = text[:MAX_TEXT]
        out: list[Hit] = []
        for e in self.entries:
            hit = _hit(e, line)
            if hit is not None:
                out.append(hit)
        cuda = [h for h in out if h.entry.kind == "cuda"]
        if cuda and any(h.entry.kind.startswith("nccl") for h in out):
            out = [h if not h.entry.kind.startswith("nccl") else Hit(h.entry, h.detail, h.means, h.fix, h.sources,
                                                                     tuple(cuda)) for h in out]
        rank = {"loader": 0, "container": 1, "cuda": 2, "nccl": 3, "nccl-hint": 4}
        # a library's own wording around a CUDA error (PyTorch's: which API failed; FlashInfer's: which kernel) before
        # the bare error name
        return sorted(out, key=lambda h: (rank[h.entry.kind], not library_named(h.entry.name)))


# an entry named for the library that prints it (`pytorch: …`, `flashinfer: …`), not for a CUDA error
_LIBRARY_NAMED = re.compile(r"^[a-z][\w-]{1,20}: ")


def library_named(name: str) -> bool:
    return _LIBRARY_NAMED.match(name) is not None


def _hit(e: Entry, line: str) -> Hit | None:
    if e.texts and not any(t in line for t in e.texts):
        return None
    if e.regex is None:
        return Hit(e, fix=e.fix, sources=e.sources) if e.texts else None
    m = e.regex.search(line)
    if m is None:
        return None
    detail = next((v for v in m.groupdict().values() if v), "")
    for group, refinements in e.refine:
        value = m.groupdict().get(group) or ""
        for r in refinements:
            if r.match.search(value):
                return Hit(e, detail, r.means, r.fix or e.fix, r.sources + e.sources)
    return Hit(e, detail, fix=e.fix, sources=e.sources)


def _t(values: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in values or ())


def _refinements(items: Any) -> tuple[Refinement, ...]:
    return tuple(Refinement(re.compile(str(r["match"])), str(r.get("means", "")), _t(r.get("fix")),
                            _t(r.get("sources"))) for r in items or ())


def _load(name: str) -> Any:
    import yaml

    raw = (resources.files("bot.core") / "knowledge" / "catalogs" / name).read_text(encoding="utf-8")
    return yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@lru_cache(maxsize=1)
def load_catalogs() -> Catalogs:
    entries: list[Entry] = []
    for e in _load("loader.yaml")["patterns"]:
        refine = tuple((g, _refinements(e.get(k))) for g, k in (("lib", "libraries"), ("symbol", "symbols"))
                       if e.get(k))
        entries.append(Entry("loader", e["id"], "loader", e["meaning"], _t(e.get("fix")), _t(e.get("sources")),
                             regex=re.compile(e["regex"]), refine=refine))
    for e in _load("containers.yaml")["patterns"]:
        refine = (("detail", _refinements(e.get("details"))),) if e.get("details") else ()
        entries.append(Entry("container", e["id"], "container-runtime", e["meaning"], _t(e.get("fix")),
                             _t(e.get("sources")), regex=re.compile(e["regex"]), refine=refine))
    for e in _load("cuda.yaml")["errors"]:
        texts = tuple(t for t in (e.get("message"), *(e.get("also_printed_as") or ()), e.get("name"))
                      if t and ":" not in str(t)[:9])
        entries.append(Entry("cuda", e["name"], e.get("owner", "cuda-runtime"), e["meaning"], _t(e.get("fix")),
                             _t(e.get("sources")), isolate=_t(e.get("isolate")), causes=_t(e.get("usual_causes")),
                             texts=tuple(str(t) for t in texts), inputs=_t(e.get("inputs")),
                             remedy=" ".join(str(e.get("remedy", "")).split()), part=str(e.get("part") or ""),
                             switch=str(e.get("switch") or "")))
    nccl = _load("nccl.yaml")
    for e in nccl["results"]:
        texts = tuple(t for t in (e.get("name"), e.get("message_current")) if t)
        entries.append(Entry("nccl", e["name"], "nccl", e["meaning"], _t(e.get("fix")), _t(e.get("sources")),
                             isolate=_t(e.get("isolate")), texts=tuple(str(t) for t in texts)
                             + ((f"NCCL error: {e['message']}", f", {e['message']}") if e.get("message") else ())))
    for h in nccl.get("hints") or ():
        pattern = h.get("pattern")
        # a hint printed by another layer beside NCCL (torch's Gloo group) names its owner
        entries.append(Entry("nccl-hint", str(pattern or h.get("regex")), str(h.get("owner") or "nccl"), h["points_at"],
                             _t(h.get("fix")), _t(h.get("sources")), isolate=_t(h.get("isolate")),
                             texts=(str(pattern),) if pattern else (),
                             regex=re.compile(h["regex"]) if h.get("regex") else None))
    env = tuple(NcclEnv(v["name"], str(v.get("value", "")), str(v.get("effect") or v.get("turns_off") or ""),
                        str(v.get("when", "")), _t(v.get("sources")), str(v.get("transport") or ""))
                for v in nccl.get("env") or ())
    return Catalogs(tuple(entries), env)
