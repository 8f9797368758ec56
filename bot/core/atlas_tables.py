"""What each vLLM release read into the atlas has, apart from its messages: the config classes' fields and their
docstrings, the flags that set them (`arg_utils.py`), every long flag of its parsers, its environment variables
(`vllm/envs.py`), the model registry's architectures and each quantization method's least compute capability.

Each row carries the runs of releases that have it; a question about a release the atlas did not read is answered
from the nearest one read before it. `Atlas` (atlas.py) adds the sites and their matching on top of these tables.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

CONFIG_ATTRS = {"speculative_config": "SpeculativeConfig", "parallel_config": "ParallelConfig",
                "cache_config": "CacheConfig", "model_config": "ModelConfig", "scheduler_config": "SchedulerConfig",
                "compilation_config": "CompilationConfig", "load_config": "LoadConfig",
                "device_config": "DeviceConfig", "structured_outputs_config": "StructuredOutputsConfig",
                "decoding_config": "DecodingConfig", "observability_config": "ObservabilityConfig",
                "kv_transfer_config": "KVTransferConfig", "multimodal_config": "MultiModalConfig",
                "lora_config": "LoRAConfig", "attention_config": "AttentionConfig"}
CONFIG_FILES = {"speculative": "SpeculativeConfig", "parallel": "ParallelConfig", "cache": "CacheConfig",
                 "model": "ModelConfig", "scheduler": "SchedulerConfig", "compilation": "CompilationConfig",
                 "load": "LoadConfig", "device": "DeviceConfig", "structured_outputs": "StructuredOutputsConfig",
                 "observability": "ObservabilityConfig", "kv_transfer": "KVTransferConfig",
                 "multimodal": "MultiModalConfig", "lora": "LoRAConfig", "attention": "AttentionConfig"}


@dataclass(frozen=True)
class Knob:
    """A config field the condition or the message names, and its CLI flag in that release; or one of vLLM's
    environment variables (`field` starts with "envs."; `flag` is then the variable's name)."""

    flag: str  # "--kv-cache-dtype", "--speculative-config" for a JSON key, "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
    key: str | None  # "num_speculative_tokens" when flag is a JSON config flag
    field: str  # "CacheConfig.kv_cache_dtype", "envs.VLLM_ALLOW_LONG_MAX_MODEL_LEN"
    help: str  # the field's docstring, or the comment above the variable in vllm/envs.py (a sentence or two)


def parse_runs(text: str) -> list[int]:
    out: list[int] = []
    for item in text.split(","):
        a, _, b = item.partition("-")
        out.extend([int(a), int(b or a)])
    return out


def runs_has(runs: list[int], i: int) -> bool:
    return any(runs[k] <= i <= runs[k + 1] for k in range(0, len(runs), 2))


def runs_members(runs: list[int]) -> list[int]:
    return [i for k in range(0, len(runs), 2) for i in range(runs[k], runs[k + 1] + 1)]


def public_version(version: str) -> Version | None:
    try:
        v = Version(version.strip().lstrip("v"))
    except InvalidVersion:
        return None
    return Version(v.public)


class ReleaseTables:
    """The per-release tables of the atlas's data (the `fields`, `flags`, `metrics`, `envs`, `cli`, `archs`,
    `quant_caps` columns), and the questions asked of them."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._strings: list[str] = data["strings"]
        self.package_releases: dict[str, tuple[str, ...]] = {
            p: tuple(v["releases"]) for p, v in data["packages"].items()}
        self.releases: tuple[str, ...] = self.package_releases.get("vllm", ())
        self._versions = {p: [Version(r) for r in rs] for p, rs in self.package_releases.items()}
        self._fields: list[list[Any]] = data["fields"]
        self._flags: list[list[Any]] = data["flags"]
        self._metrics: list[list[Any]] = data["metrics"]
        self._envs: list[list[Any]] = data.get("envs", [])  # [name, help string index, release runs]
        self._cli: list[list[Any]] = data.get("cli", [])  # [--flag, help string index, release runs]
        self._archs: list[list[Any]] = data.get("archs", [])  # [architecture, registry dict, release runs]
        self._quant_caps: list[list[Any]] = data.get("quant_caps", [])  # [method, least capability, release runs]
        self._env_cache: dict[int, dict[str, str]] = {}

    def _index(self, package: str, version: str | None) -> tuple[int | None, Version | None]:
        """The atlas index of the user's release (None when the atlas did not read that release)."""
        if version is None:
            return None, None
        v = public_version(version)
        if v is None:
            return None, None
        vs = self._versions.get(package, [])
        i = bisect_left(vs, v)
        return (i if i < len(vs) and vs[i] == v else None), v

    # ---- knobs -------------------------------------------------------------------------------------

    def knobs_for(self, names: Iterable[str], version: str | None, owner: str | None = None) -> tuple[Knob, ...]:
        """The config fields behind `self.x`, `cache_config.x`, `Class.x` names, each with the CLI flag its
        release (or the nearest release that has one) maps to it (`self.x` is a field of `owner`, the config class
        whose code names it). Only mappings read in arg_utils.py."""
        ri, v = self._index("vllm", version)
        out: list[Knob] = []
        seen: set[str] = set()
        for name in names:
            knob = self._knob_named(name, owner, version, ri, v, seen)
            if knob is not None and knob.field not in seen:
                seen.add(knob.field)
                out.append(knob)
        return tuple(out)

    def _knob_named(self, name: str, owner: str | None, version: str | None, ri: int | None, v: Version | None,
                    seen: set[str]) -> Knob | None:
        head, _, attr = name.rpartition(".")
        head = head.rsplit(".", 1)[-1]
        if head in ("envs", "env"):
            # `envs.VLLM_X` is one whatever the release says; a name the message spells, only if it is one
            return self._env_knob(attr, version, known_only=head == "env")
        fld = self._field_named(head, attr, owner)
        if fld is None or fld in seen:
            return None
        return self._knob(fld, ri, v)

    def _field_named(self, head: str, attr: str, owner: str | None) -> str | None:
        """The config field (`Class.attr`) a name in a condition or a hole stands for, or None."""
        if head in CONFIG_ATTRS:
            return f"{CONFIG_ATTRS[head]}.{attr}"
        if head.endswith("Config"):
            return f"{head}.{attr}"
        if head == "self" and owner:
            return f"{owner}.{attr}"
        if head == "flag":  # named as a flag in the message: only that flag's own dest, in this release
            by_dest = self._dest_fields(attr)
            return by_dest[0] if len(by_dest) == 1 else None
        if "_" in attr and len(attr) >= 8:  # `self.model`, `self.device` are anything's: no knob
            return self._field_of_bare(attr)
        return None

    def _dest_fields(self, attr: str) -> list[str]:
        """The fields set by the plain flags whose argparse dest is `attr`: where a release also passed the flag's value
        on under another name (V0's `SpeculativeConfig(target_dtype=self.dtype)`), the field of the flag's own name."""
        found = sorted({r[2] for r in self._flags if r[1] is None and r[0].lstrip("-").replace("-", "_") == attr})
        own = [f for f in found if f.split(".", 1)[1] == attr]
        return own if len(found) > 1 and len(own) == 1 else found

    def _field_of_bare(self, attr: str) -> str | None:
        """`self.kv_cache_dtype` in an attention backend, `config.x`: the flag whose argparse dest is that name in
        this release (`--kv-cache-dtype` sets CacheConfig.cache_dtype), else the one config class with such a
        field; ambiguous names get no knob rather than a guessed one."""
        by_dest = self._dest_fields(attr)
        if len(by_dest) == 1:
            return by_dest[0]
        by_field: list[str] = sorted({r[2] for r in self._flags if r[2].split(".", 1)[1] == attr})
        if len({f.split(".")[0] for f in by_field}) == 1:
            return by_field[0]
        # a local named for the field it holds (`resolved_cache_dtype` for CacheConfig.cache_dtype)
        by_suffix: list[str] = sorted({r[2] for r in self._flags if "_" in r[2].split(".", 1)[1]
                                       and attr.endswith("_" + r[2].split(".", 1)[1])})
        return by_suffix[0] if len(by_suffix) == 1 else None

    def _knob(self, fld: str, ri: int | None, v: Version | None) -> Knob | None:
        rows = [r for r in self._flags if r[2] == fld]
        if not rows:
            return None
        vs = self._versions["vllm"]
        target = ri if ri is not None else (max(0, bisect_left(vs, v) - 1) if v is not None else len(vs) - 1)
        row = _nearest_flag(rows, fld, ri, target)
        if row is None:
            return None
        flag, key, _, help_idx, _ = row
        doc = self._field_doc(fld, target)
        if not doc and help_idx >= 0:
            doc = self._strings[help_idx]
        return Knob(flag=flag, key=key, field=fld, help=_sentences(doc))

    def _field_doc(self, fld: str, target: int) -> str:
        """The field's docstring in the release nearest the target: "" lets the flag's own help stand in."""
        cls, attr = fld.split(".", 1)
        docs = [r for r in self._fields if r[0] == cls and r[1] == attr and r[2] >= 0]
        if not docs:
            return ""
        docs.sort(key=lambda r: min(abs(target - k) for k in runs_members(r[3])))
        doc: str = self._strings[docs[0][2]]
        return doc

    def _env_knob(self, name: str, version: str | None, *, known_only: bool) -> Knob | None:
        mine = self._env_at(self._release_index(version))
        if name in mine:
            return Knob(flag=name, key=None, field=f"envs.{name}", help=_sentences(mine[name]))
        rows = [r for r in self._envs if r[0] == name]
        if known_only and rows and version is not None:
            return None  # a variable of other releases, not of this one
        if not rows and (known_only or not name.startswith("VLLM_")):
            return None
        # read in code (`envs.VLLM_X`) but not in this release's envs.py: the help of the nearest release
        target = self._release_index(version)
        rows.sort(key=lambda r: min(abs(target - k) for k in runs_members(r[2])))
        help_idx = next((r[1] for r in rows if r[1] >= 0), -1)
        return Knob(flag=name, key=None, field=f"envs.{name}",
                    help=_sentences(self._strings[help_idx]) if help_idx >= 0 else "")

    # ---- other views -------------------------------------------------------------------------------

    def _release_index(self, release: str | None) -> int:
        """The vLLM release a question about `release` is answered from: that one if read, else the newest read
        before it (the oldest read, before them all), and the newest without a release."""
        vs = self._versions.get("vllm", [])
        ri, v = self._index("vllm", release)
        if ri is None:
            ri = len(vs) - 1 if v is None else max(0, bisect_left(vs, v) - (0 if v in vs else 1))
        return ri

    def env_vars(self, version: str | None = None) -> dict[str, str]:
        """vLLM's own environment variables (`vllm/envs.py`) in the user's release, or the nearest release read:
        name -> help (the comment above it in the source). A user's variable of such a name is read by vLLM
        (Kubernetes injects `VLLM_PORT=tcp://...` for a service named `vllm`)."""
        if not self._versions.get("vllm"):
            return {}
        return dict(self._env_at(self._release_index(version)))

    def _env_at(self, ri: int) -> dict[str, str]:
        got = self._env_cache.get(ri)
        if got is None:
            got = self._env_cache[ri] = {name: self._strings[h] if h >= 0 else ""
                                         for name, h, runs in self._envs if runs_has(runs, ri)}
        return got

    def cli_flags(self, version: str | None = None) -> dict[str, str]:
        """Every long flag an argparse parser of the user's release (or the nearest read) adds — the engine's,
        the API server's, the `vllm` command's: flag -> help."""
        if not self._versions.get("vllm"):
            return {}
        ri = self._release_index(version)
        return {f: self._strings[h] if h >= 0 else "" for f, h, runs in self._cli if runs_has(runs, ri)}

    def config_fields(self, cls: str, version: str | None = None) -> frozenset[str]:
        """The fields of one of vLLM's config classes (`SpeculativeConfig`) in the user's release, or the nearest
        read."""
        ri = self._release_index(version)
        return frozenset(r[1] for r in self._fields if r[0] == cls and runs_has(r[3], ri))

    def field_span(self, cls: str, attr: str) -> tuple[str, str] | None:
        """The first and the last release read whose `cls` has the field `attr`, or None when none has it."""
        rels = self.package_releases.get("vllm", ())
        members = sorted({m for r in self._fields if r[0] == cls and r[1] == attr for m in runs_members(r[3])})
        return (rels[members[0]], rels[members[-1]]) if members else None

    def flag_span(self, flag: str) -> tuple[str, str] | None:
        """The first and the last release read that have `flag`, or None when none has it."""
        rels = self.package_releases.get("vllm", ())
        members = sorted({m for f, _h, runs in self._cli if f == flag for m in runs_members(runs)})
        return (rels[members[0]], rels[members[-1]]) if members else None

    def architectures(self, version: str | None = None) -> dict[str, str]:
        """The architecture names vLLM's model registry holds in the user's release (or the nearest read): name
        -> the registry dict (`_SPECULATIVE_DECODING_MODELS`). Empty when the atlas has no registry."""
        if not self._archs:
            return {}
        ri = self._release_index(version)
        return {a: g for a, g, runs in self._archs if runs_has(runs, ri)}

    def architecture_span(self, name: str) -> tuple[str, str] | None:
        """The first and the last release read whose registry holds `name`."""
        rels = self.package_releases.get("vllm", ())
        members = sorted({m for a, _g, runs in self._archs if a == name for m in runs_members(runs)})
        return (rels[members[0]], rels[members[-1]]) if members else None

    def quant_min_capability(self, method: str, version: str | None = None) -> int | None:
        """A quantization method's least compute capability in the user's release (vLLM's `get_min_capability()`,
        75 for 7.5), or None when the atlas does not know it."""
        ri = self._release_index(version)
        return next((c for m, c, runs in self._quant_caps if m == method and runs_has(runs, ri)), None)


def _nearest_flag(rows: list[list[Any]], fld: str, ri: int | None, target: int) -> list[Any] | None:
    """Of the flag rows that set a field, the one of the release nearest the target (None: the user's release was
    read and has no flag for it)."""

    def distance(r: list[Any]) -> int:
        return min(abs(target - k) for k in runs_members(r[4]))
    if ri is not None:
        # the user's release was read: its own arg_utils.py decides, a later release's flag would mislead
        rows = [r for r in rows if runs_has(r[4], ri)]
        if not rows:
            return None
    near = min(distance(r) for r in rows)
    rows = [r for r in rows if distance(r) == near]
    # a SpeculativeConfig field is a key of the one --speculative-config JSON where the release has it
    rows.sort(key=lambda r: (0 if (r[1] is not None) == fld.startswith("SpeculativeConfig.") else 1, r[0]))
    return rows[0]


def config_owner(file: str, function: str) -> str | None:
    """The config class whose code a function of a file is (`self.x` there is that class's field)."""
    if not file.startswith("vllm/config/"):
        return None
    cls_name = function.split(".")[0]
    if cls_name.endswith("Config"):
        return cls_name
    return CONFIG_FILES.get(file.rsplit("/", 1)[-1].removesuffix(".py"))


def _sentences(doc: str, n: int = 2) -> str:
    parts = re.split(r"(?<=[.!?])\s+", doc.strip())
    return " ".join(parts[:n])
