"""vLLM's own environment variables in a failure: named by the failing lines, or read where it was raised. An
outside value under one of those names (a container platform's service links set `<NAME>_PORT`) breaks vLLM
where it reads it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas

_ENV_RE = re.compile(r"\bVLLM_[A-Z0-9_]{2,}\b")


def env_vars(atlas: Atlas, cand: Candidate, version: str | None) -> tuple[list[str], list[str]]:
    """The advice on the variables the failing lines name (in the message, or in a frame's code), and their
    names."""
    known = atlas.env_vars(version)
    texts = [cand.line.message, *(f.source or "" for f in cand.frames), *(b.message for b in cand.before)]
    names = [n for n in dict.fromkeys(n for t in texts for n in _ENV_RE.findall(t)) if n in known]
    if not names:
        return [], []
    in_envs = reads_env(cand)
    out = []
    for n in names[:3]:
        help_text = f": {clip(known[n], 220)}" if known[n] else ""
        lead = (f"vLLM failed reading the environment variable `{n}`; check the value the process gets "
                f"(`env | grep {n}`; a Kubernetes service named `vllm` sets `VLLM_PORT=tcp://…`), unset it or "
                "set it to what vLLM expects") if in_envs else f"The line names vLLM's environment variable `{n}`"
        out.append(f"{lead}{help_text}")
    return out, names[:3]


def reads_env(cand: Candidate) -> bool:
    code = [f.source or "" for f in cand.frames] + [b.message for b in cand.before]
    return any((f.frame_file or "").endswith("vllm/envs.py") for f in cand.frames) or any(
        "getenv" in c or "environ" in c for c in code)


def env_finding(atlas: Atlas, cand: Candidate, version: str | None) -> Finding | None:
    """An exception raised where vLLM reads its environment, with one of its variables named there."""
    if not reads_env(cand):
        return None
    fix, names = env_vars(atlas, cand, version)
    if not names:
        return None
    p = cand.line
    return Finding(
        id="env-var-collision", title=f"vLLM cannot read its environment variable {names[0]}: "
                                      f"{clip(p.message, 80)}",
        severity="critical", confidence="medium",
        summary=(f"The exception is raised where vLLM reads `{names[0]}` from the environment: the value the process "
                 "got is not one vLLM understands — often not set for vLLM at all, but by the platform (a "
                 "Kubernetes service named `vllm` gives every pod `VLLM_PORT=tcp://…`, `VLLM_SERVICE_HOST`, …)."),
        evidence=[quoted(b, 200) for b in cand.before[-2:]] + [quoted(p)],
        remediation=fix, priority=38, part="config", knobs=names, inputs=list(names))


_FEW = 4  # a stem more variables share than this is a family (ROCm's, FlashInfer's), not one component's settings


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].split(".", 1)[0].split("_", 1)[0].upper()


def component_vars(atlas: Atlas, path: str, version: str | None) -> list[str]:
    """vLLM's variables named for the component a file (or a thread) is named for: `nixl_connector.py` ->
    `VLLM_NIXL_*`, not `VLLM_VIDEO_LOADER_*`; none for a stem too short to name one."""
    stem = _stem(path)
    if len(stem) < 4 or stem in _GENERIC_STEMS:
        return []
    return [n for n in atlas.env_vars(version) if n.split("_")[1:2] == [stem]]


# a file named for what every part has (`config.py`: the engine's settings; VLLM_CONFIG_ROOT is vLLM's folder for
# its own files), not for one component
_GENERIC_STEMS = frozenset({"CONFIG", "UTILS", "BASE", "COMMON", "MAIN", "CORE", "TYPES", "INTERFACE"})


def component_env(atlas: Atlas, path: str, version: str | None) -> tuple[list[str], list[str]]:
    """The variables named for the component whose file raised (`nixl_connector.py` -> `VLLM_NIXL_*`): where
    two processes must agree (a handshake, a side channel), these are what each was given. Only a stem few
    variables share names a component."""
    stem = _stem(path)
    known = atlas.env_vars(version)
    names = component_vars(atlas, path, version)
    if not names or len(names) > _FEW:
        return [], []
    listed = ", ".join(f"`{n}`" for n in names)
    helps = "; ".join(f"`{n}`: {clip(known[n], 140)}" for n in names if known[n])
    told = (f"`{path.rsplit('/', 1)[-1]}` is set up by vLLM's environment variables {listed}: check what each "
            f"process was given (`env | grep -i {stem.lower()}`), on every node")
    return [told + (f" ({helps})" if helps else "") + "."], names


# a wait of vLLM's own that ran out (`RPC call to sample_tokens timed out`, `Timed out waiting for …`)
_TIMED_OUT = re.compile(r"(?i)\btimed out\b|\btimeout\b")
_WORD = re.compile(r"[a-z][a-z0-9_]{2,}")


def _stems(text: str) -> set[str]:
    """Words and their snake_case pieces of four letters or more, cut to six (multiproc ~ multiprocessing)."""
    return {piece[:6] for w in _WORD.findall(text.lower()) for piece in (w, *w.split("_")) if len(piece) >= 4}


def timeout_vars(atlas: Atlas, path: str, message: str, version: str | None) -> tuple[list[str], list[str]]:
    """vLLM's own timeout variable for a wait that ran out: the one (in the user's release) whose name and help share
    at least two words with the message and the raising file's name that no other timeout variable's help has
    (`multiproc_executor.py` and "RPC" -> `VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS`, "execute_model RPC calls in
    multiprocessing executor"). None when no variable wins alone."""
    if not _TIMED_OUT.search(message):
        return [], []
    said = _stems(f"{message} {path.rsplit('/', 1)[-1]}")
    helps = {n: _stems(f"{n} {h}") for n, h in atlas.env_vars(version).items() if "TIMEOUT" in n}
    # a word many timeout variables' help texts share (timeout, seconds, waiting) tells none of them apart
    common = {w for w in set().union(*helps.values()) if sum(w in h for h in helps.values()) > 1} if helps else set()
    scored = sorted(((len((said & h) - common), n) for n, h in helps.items()), reverse=True)
    if not scored or scored[0][0] < 2 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return [], []
    name = scored[0][1]
    help_text = atlas.env_vars(version).get(name, "")
    return [f"{TIMEOUT_LEAD} `{name}` bounds ({clip(help_text, 160)}): raise it when the work is only slow (a large "
            "model, slow GPUs), after checking that no worker is stuck."], [name]


TIMEOUT_LEAD = "Likely the wait"
