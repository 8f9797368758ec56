"""The knowledge base of failure signatures: one YAML file per family in `bot/core/knowledge/`.

Each entry is a fact sourced from public threads: its loose patterns (the stable part of a message
that varies across versions), the cause, the versions affected and the first release with the fix
where a thread establishes it, the remediation and the URLs it comes from. `bot/core/failures.py`
compiles the patterns into the one failure table the log parser uses; `kb check` tests every entry
against the real lines quoted in `tests/fixtures/kb/<id>.txt`.

Reading the package's own data files is the only I/O in the core; it happens once per process.
A diagnosis pays milliseconds for it: `compiled.json` beside the YAML holds the entries, each pattern's
pre-scan needles and the triage facts (`triage/known_issues.yaml`), keyed by the SHA-256 of the YAML
files. When the YAML changed since (`specops kb compile` writes the file; `kb check` says when it is
stale), the YAML itself is read, with the same result.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from bot.core.lines import strip_for_matching
from bot.core.upstream import Upstream

Family = Literal[
    "gpu-visibility", "driver-mismatch", "nccl-shm", "spec-config-parse", "cli-config-bug", "kv-memory",
    "scheduler-budget", "interface-refusal", "drafter-config", "parallelism", "compile-cudagraph",
    "disaggregation", "platform", "acceptance-bug", "runtime-crash", "process",
]
Kind = Literal["launch-failure", "runtime-failure", "acceptance", "informational"]
KBSeverity = Literal["failing", "degraded", "info"]
FAMILY_TITLES: dict[str, str] = {
    "gpu-visibility": "GPUs and driver libraries visible in containers, LXC and VMs",
    "driver-mismatch": "Driver, CUDA runtime and compat-package mismatches",
    "nccl-shm": "NCCL, shared memory and GPU peer access",
    "spec-config-parse": "--speculative-config that does not parse",
    "cli-config-bug": "Upstream CLI and config bugs around speculative decoding",
    "kv-memory": "KV cache and GPU memory sizing (the drafter's share included)",
    "scheduler-budget": "Scheduler and token-budget limits at large k",
    "interface-refusal": "Drafter/target interface and architecture refusals",
    "drafter-config": "Drafter config errors",
    "parallelism": "Tensor, pipeline, data and expert parallel limits of drafters",
    "compile-cudagraph": "torch.compile, CUDA graphs and attention backends with speculation",
    "disaggregation": "Prefill/decode disaggregation",
    "platform": "Platform quirks (ROCm, Ascend, XPU, CPU, TPU, WSL)",
    "acceptance-bug": "Upstream bugs that cost acceptance without an error",
    "runtime-crash": "Crashes while serving with speculation",
    "process": "Launching the server process",
}
_GITHUB = re.compile(r"^https://(github\.com|discuss\.vllm\.ai|docs\.vllm\.ai)/")

# What a report built from an entry says for machines (tests/CASES.md): the part of vLLM at fault, who owns the failing
# code when it is not vLLM, and the kinds of fix (knob:FLAG|ENVVAR, advice:KIND, dep:PACKAGE, host:CHANGE)
PARTS: frozenset[str] = frozenset({
    "drafter", "spec-config", "structured-output", "quantization", "attention", "compilation", "kv-cache", "scheduler",
    "parallel", "lora", "multimodal", "tokenizer", "model-loading", "models", "entrypoint", "config", "engine",
    "worker", "platform",
})
OWNERS: frozenset[str] = frozenset({
    "plugin", "transformers", "huggingface_hub", "torch", "triton", "flashinfer", "xformers", "flash-attn", "nccl",
    "cuda-runtime", "driver", "loader", "container-runtime", "user-script", "ray", "numpy", "other",
})
ADVICE: frozenset[str] = frozenset({
    "upgrade", "pin", "lower-k", "disable-plugin", "checkpoint", "request", "fix-script",
})
HOST_CHANGES: frozenset[str] = frozenset({
    "driver", "container-toolkit", "shm", "p2p", "mig", "cuda-toolkit", "library", "gpu", "memory", "network",
    "permissions", "device-visibility", "os",
})
_KNOB = re.compile(r"^(--[a-z0-9][a-z0-9-]*|[A-Z][A-Z0-9_]*)$")  # a flag (--max-model-len) or a variable (VLLM_PORT)
_DEP = re.compile(r"^[a-z0-9][a-z0-9._-]*$")  # a package name as its installer spells it


def _once_each(value: list[str], what: str) -> list[str]:
    if len(set(value)) != len(value):
        raise ValueError(f"{what}: {value}")
    return value


def _fix_problem(tag: str) -> str | None:
    """What is wrong with one `fix` tag, or None when it is well formed."""
    kind, sep, value = tag.partition(":")
    if not sep or kind not in ("knob", "advice", "dep", "host"):
        return "must start with knob:, advice:, dep: or host:"
    if kind == "knob" and not _KNOB.match(value):
        return "knob: names a flag (--max-model-len) or an environment variable (VLLM_PORT)"
    if kind == "advice" and value not in ADVICE:
        return f"advice: is one of {', '.join(sorted(ADVICE))}"
    if kind == "dep" and not _DEP.match(value):
        return "dep: names a package (dep:transformers)"
    if kind == "host" and value not in HOST_CHANGES:
        return f"host: is one of {', '.join(sorted(HOST_CHANGES))}"
    return None


class Affected(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    versions: str = "unknown"
    methods: list[str] = Field(default_factory=lambda: ["any"])
    platform: str | None = None


class FrameSignature(BaseModel):
    """Frames that tell a failure when its exception line is cut (a paste that stops inside the traceback): each
    `path/suffix.py:function` (`path/suffix.py:` for any function of the file), matched against the traceback's
    innermost frame, or against any of its frames."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    innermost: str | None = None
    anywhere: str | None = None
    confidence: Literal["medium", "low"] = "low"

    @staticmethod
    def _hit(want: str, frame: tuple[str, str]) -> bool:
        path, _, function = want.partition(":")
        return frame[0].replace("\\", "/").endswith("/" + path) and (not function or frame[1] == function)

    def matches(self, frames: list[tuple[str, str]]) -> bool:
        """`frames`: (file, function) of one traceback, outermost first."""
        if not frames or (self.innermost is None and self.anywhere is None):
            return False
        if self.innermost is not None and not self._hit(self.innermost, frames[-1]):
            return False
        return self.anywhere is None or any(self._hit(self.anywhere, f) for f in frames)


class Entry(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{2,80}$")
    family: Family
    kind: Kind
    severity: KBSeverity
    fatal_at_launch: bool = False
    fallback: bool = False  # any other entry that matches the same line wins
    # names only that something failed, not why: a line the message atlas places is explained better
    catch_all: bool = False
    # a wait vLLM logs while it cannot go on (a placement group, a peer): current only while nothing goes on after it
    waits: bool = False
    # one client's request refused (an access line's 401, 404): the server's failure only while no request is answered
    per_request: bool = False
    # a line vLLM prints only once its engine is up (sleep, wake-up): never a notice of the start
    after_start: bool = False
    title: str
    patterns: list[str] = Field(default_factory=list)
    needle: str | None = None  # an explicit pre-scan literal; by default derived from each pattern
    frames: list[FrameSignature] = Field(default_factory=list)  # the failure told by its frames alone
    cause: str
    part: str | None = None  # the part of vLLM at fault (PARTS): drafter, kv-cache, parallel, platform, …
    owner: str | None = None  # who owns the failing code when it is not vLLM (OWNERS): driver, nccl, plugin, …
    inputs: list[str] = Field(default_factory=list)  # the inputs at fault: a flag, an env var, a key, gpu, checkpoint
    fix: list[str] = Field(default_factory=list)  # the kinds of fix the remediation gives: knob:, advice:, dep:, host:
    affected: Affected = Field(default_factory=Affected)
    fixed_in: str | None = None
    upstream: list[Upstream] = Field(default_factory=list)
    remediation: list[str] = Field(default_factory=list)
    sources: list[str] = Field(min_length=1)
    no_fix: str | None = None
    # acceptance entries: the triage hypothesis whose finding this entry's fixtures must produce
    hypothesis: str | None = None

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if info.context and info.context.get("compiled"):
            return value  # checked when compiled.json was written; compiled again only when a line needs it
        for p in value:
            try:
                re.compile(p, re.IGNORECASE)
            except re.error as exc:
                raise ValueError(f"pattern {p!r} does not compile: {exc}") from None
        return value

    @field_validator("part")
    @classmethod
    def _part(cls, value: str | None) -> str | None:
        if value is not None and value not in PARTS:
            raise ValueError(f"part {value!r} is not one of {', '.join(sorted(PARTS))}")
        return value

    @field_validator("owner")
    @classmethod
    def _owner(cls, value: str | None) -> str | None:
        if value is not None and value not in OWNERS:
            raise ValueError(f"owner {value!r} is not one of {', '.join(sorted(OWNERS))} "
                             "(leave it out when the failing code is vLLM's own)")
        return value

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, value: list[str]) -> list[str]:
        bad = [i for i in value if not i.strip() or i != i.strip()]
        if bad:
            raise ValueError(f"inputs must be names without surrounding blanks: {bad}")
        return _once_each(value, "inputs repeat a name")

    @field_validator("fix")
    @classmethod
    def _fix(cls, value: list[str]) -> list[str]:
        bad = [f"{t!r} ({why})" for t in value if (why := _fix_problem(t))]
        if bad:
            raise ValueError(f"fix tags not understood: {'; '.join(bad)}")
        return _once_each(value, "fix repeats a tag")

    @field_validator("sources")
    @classmethod
    def _urls(cls, value: list[str]) -> list[str]:
        bad = [u for u in value if not _GITHUB.match(u)]
        if bad:
            raise ValueError(f"sources must be public thread URLs: {bad}")
        return value


class KB(BaseModel):
    model_config = ConfigDict(defer_build=True)

    entries: list[Entry]

    def get(self, entry_id: str) -> Entry | None:
        return self._by_id().get(entry_id)

    def _by_id(self) -> dict[str, Entry]:
        return {e.id: e for e in self.entries}

    def search(self, text: str) -> list[Entry]:
        """Entries whose patterns match `text` (a log line), else whose words contain every word of it."""
        line = strip_for_matching(text)
        hits = [e for e in self.entries if any(re.search(p, line, re.IGNORECASE) for p in e.patterns)]
        if hits:
            return hits
        words = [w for w in re.findall(r"\w+", text.lower()) if len(w) > 1]
        if not words:
            return []

        def blob(e: Entry) -> str:
            ups = " ".join(f"#{u.number} {u.title or ''}" for u in e.upstream)
            return " ".join([e.id, e.family, e.title, e.cause, " ".join(e.remediation), ups]).lower()

        return [e for e in self.entries if all(w in blob(e) for w in words)]


COMPILED = "compiled.json"


def _sources() -> list[tuple[str, bytes]]:
    """The YAML the knowledge base is made of: knowledge/*.yaml and triage/known_issues.yaml, in order."""
    folder = resources.files("bot.core") / "knowledge"
    out = [(item.name, item.read_bytes()) for item in sorted(folder.iterdir(), key=lambda p: p.name)
           if item.name.endswith(".yaml")]
    facts = resources.files("bot.core") / "triage" / "known_issues.yaml"
    return [*out, ("triage/known_issues.yaml", facts.read_bytes())]


def digest(sources: list[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for name, data in sources:
        h.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def _yaml(data: bytes) -> Any:
    import yaml  # only when compiled.json is stale or being written

    return yaml.load(data.decode("utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _from_yaml(sources: list[tuple[str, bytes]]) -> tuple[KB, Any]:
    entries: list[Entry] = []
    facts: Any = None
    for name, raw in sources:
        data = _yaml(raw)
        if name == "triage/known_issues.yaml":
            facts = data
            continue
        data = data or []
        if not isinstance(data, list):
            raise ValueError(f"{name}: a list of entries expected")
        entries += [Entry.model_validate(item) for item in data]
    seen: set[str] = set()
    for e in entries:
        if e.id in seen:
            raise ValueError(f"duplicate knowledge-base id {e.id}")
        seen.add(e.id)
    return KB(entries=entries), facts


@lru_cache(maxsize=1)
def _loaded() -> tuple[KB, Any, dict[str, list[list[str] | None]] | None]:
    sources = _sources()
    want = digest(sources)
    try:
        compiled = json.loads((resources.files("bot.core") / "knowledge" / COMPILED).read_bytes())
    except (OSError, ValueError):
        compiled = None
    if isinstance(compiled, dict) and compiled.get("digest") == want:
        kb = KB.model_validate({"entries": compiled["entries"]}, context={"compiled": True})
        return kb, compiled["known_issues"], compiled["needles"]
    kb, facts = _from_yaml(sources)
    return kb, facts, None


def load_kb() -> KB:
    return _loaded()[0]


def known_issues_data() -> Any:
    """triage/known_issues.yaml as data (the triage facts), from the compiled form when it is fresh."""
    return _loaded()[1]


def compiled_needles() -> dict[str, list[list[str] | None]] | None:
    """Each entry's pre-scan needles per pattern, as compiled; None when compiled.json is stale."""
    return _loaded()[2]


def compile_kb(needles: dict[str, list[list[str] | None]]) -> str:
    """The text of compiled.json for the YAML as it is now (`needles` from bot.core.failures)."""
    sources = _sources()
    kb, facts = _from_yaml(sources)
    data = {"digest": digest(sources), "entries": [e.model_dump(mode="json", exclude_defaults=True)
                                                    for e in kb.entries],
            "needles": needles, "known_issues": facts}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "\n"


def compiled_is_fresh() -> bool:
    try:
        compiled = json.loads((resources.files("bot.core") / "knowledge" / COMPILED).read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(compiled, dict) and compiled.get("digest") == digest(_sources())


class Fixture(BaseModel):
    model_config = ConfigDict(defer_build=True)

    name: str
    source: str | None
    lines: list[str]


def parse_fixture(name: str, text: str) -> Fixture:
    """`# source: URL` first, other `#` lines are notes, the rest are the quoted log lines."""
    source = None
    lines: list[str] = []
    for raw in text.splitlines():
        if raw.startswith("# source:"):
            source = source or raw.split(":", 1)[1].strip()
        elif raw.startswith("# "):
            continue
        elif raw.strip():
            lines.append(raw)
    return Fixture(name=name, source=source, lines=lines)
