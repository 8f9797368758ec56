"""`specops check PROFILE --host HOST`: read over SSH what the host already holds for a profile — the vLLM version
its install reports, the target's and the drafter's config.json (a local path, or the Hugging Face cache's snapshot
of a hub name; nothing is downloaded) — and check the pair against that release (bot/core/prelaunch.py).

A read that fails is said in the check it feeds ("could not read …"), never passed over."""

from __future__ import annotations

import json
import re
from typing import Any

from bot.config import Config, Profile
from bot.core.atlas import load_atlas
from bot.core.prelaunch import PairFacts, run_checks
from bot.core.results.prelaunch import PrelaunchReport
from bot.core.triage.knowledge import load_knowledge
from bot.engine.hosts import HostError, HostPool

__all__ = ["prelaunch"]

# the snapshot of a hub name in the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub),
# newest first; the name comes in as a positional argument, never through the script's text
_HUB_CONFIG = r'''
cache="${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}"
for f in $(ls -t "$cache/models--$1"/snapshots/*/config.json 2>/dev/null); do cat "$f"; exit 0; done
echo "no config.json for $1 in $cache" >&2; exit 3
'''
# what a checkpoint's weight files hold: its safetensors index (metadata.total_size), else the files' sizes summed
# (`stat -L`: the cache's files are links to its blobs); the directory comes in as a positional argument
_WEIGHTS = r'''
d="$1"
case "$d" in /*) ;; *)
  cache="${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}"
  d=$(ls -td "$cache/models--$d"/snapshots/*/ 2>/dev/null | head -n 1) ;;
esac
[ -n "$d" ] && [ -d "$d" ] || { echo "no directory for $1" >&2; exit 3; }
if [ -f "$d/model.safetensors.index.json" ]; then echo INDEX; cat "$d/model.safetensors.index.json"; exit 0; fi
total=0; n=0
for f in "$d"/*.safetensors "$d"/*.bin; do
  [ -e "$f" ] || continue; s=$(stat -L -c %s "$f") || continue; total=$((total + s)); n=$((n + 1))
done
echo "FILES $n $total"
'''
# the script's interpreter (its `#!` line) asked for the `vllm` distribution's version; an install whose script is not
# a Python one (a wrapper) answers `vllm --version`. The path comes in as a positional argument
_VERSION_READ = r'''
py=$(head -n 1 "$1" 2>/dev/null | sed -n 's/^#![[:space:]]*//p' | cut -d' ' -f1)
case "$py" in
  */python*) "$py" -c 'import importlib.metadata as m; print(m.version("vllm"))' 2>/dev/null && exit 0 ;;
esac
exec "$1" --version
'''
_HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_VERSION = re.compile(r"(\d+\.\d+\.\d+[\w.+-]*)")


def prelaunch(config: Config, profile: str, host: str, *, hosts: HostPool | None = None) -> PrelaunchReport:
    """Every pre-launch check of `profile` as `host` would run it. Never raises for the host: a host that cannot
    be reached makes every check that needed it "unknown"."""
    p = config.served_profile(profile, host) or config.profile(profile)
    pool = hosts or HostPool(config)
    unread: dict[str, str] = {}
    version = target = drafter = None
    gpus: tuple[tuple[str, tuple[int, int] | None], ...] | None = None
    memory: tuple[tuple[int, int], ...] | None = None
    weights: dict[str, int | None] = {"target": None, "drafter": None}
    try:
        with pool.session(host) as session:
            version = _version(session, p, unread)
            target = _config(session, p.model, "target", unread)
            if p.drafter:
                drafter = _config(session, p.drafter, "drafter", unread)
            if p.device == "cuda":
                gpus, memory = _gpus(session, unread)
                weights["target"] = _weights(session, p.model, "weights", unread)
                if p.drafter:
                    weights["drafter"] = _weights(session, p.drafter, "drafter weights", unread)
    except HostError as exc:
        for what in ("version", "target", "drafter", "gpus", "weights"):
            unread.setdefault(what, f"{host} could not be reached: {exc}")
    if drafter is not None and p.drafter_config:
        drafter = {**drafter, **p.drafter_config}
    facts = PairFacts(
        profile=profile, method=None if p.method == "none" else p.method, vllm_version=version, drafter=p.drafter,
        speculative_config=p.speculative_config(), target_config=target, drafter_config=drafter,
        max_model_len=_int(p.extra_args.get("max-model-len")), env=dict(p.env), unread=unread,
        dtype=str(p.extra_args["dtype"]) if "dtype" in p.extra_args else None,
        tensor_parallel_size=p.tensor_parallel_size, device=p.device, gpus=gpus, gpu_memory=memory,
        target_weights=weights["target"], drafter_weights=weights["drafter"],
        gpu_memory_utilization=_float(p.extra_args.get("gpu-memory-utilization")),
        kv_cache_dtype=str(p.extra_args["kv-cache-dtype"]) if "kv-cache-dtype" in p.extra_args else None,
        attention_backend=str(p.extra_args["attention-backend"]) if "attention-backend" in p.extra_args else None,
        quantization=str(p.extra_args["quantization"]) if "quantization" in p.extra_args else None)
    checks = run_checks(facts, load_knowledge(), load_atlas())
    return PrelaunchReport(host, profile, version, tuple(checks))


def _version(session: Any, p: Profile, unread: dict[str, str]) -> str | None:
    """The install's vLLM version: from its package metadata through the interpreter its `vllm` script names (a
    few ms), else `vllm --version` (which imports vLLM: seconds)."""
    r = session.run(["sh", "-c", _VERSION_READ, "version", p.vllm.bin], timeout=120)
    text = (r.out() + r.err()).strip()
    found = _VERSION.search(text.splitlines()[-1]) if r.exit_status == 0 and text else None
    if found is None:
        unread["version"] = f"`{p.vllm.bin} --version` said {text[-160:]!r} (exit {r.exit_status})"
        return None
    return found[1]


def _config(session: Any, where: str, what: str, unread: dict[str, str]) -> dict[str, Any] | None:
    """A model's config.json: from its directory, or from the Hugging Face cache for a hub name."""
    if where.startswith("/"):
        raw = session.read_file(f"{where.rstrip('/')}/config.json")
        if raw is None:
            unread[what] = f"{where}/config.json is not on the host"
            return None
    elif _HUB_NAME.match(where):
        r = session.run(["sh", "-c", _HUB_CONFIG, "check", where.replace("/", "--")], timeout=60)
        if r.exit_status != 0:
            unread[what] = r.err().strip()[:200] or f"no config.json for {where} in the host's Hugging Face cache"
            return None
        raw = r.out().encode()
    else:
        unread[what] = f"{where!r} is neither a path nor a hub name"
        return None
    try:
        cfg = json.loads(raw)
    except ValueError as exc:
        unread[what] = f"its config.json is not JSON: {exc}"
        return None
    if not isinstance(cfg, dict):
        unread[what] = "its config.json is not a JSON object"
        return None
    return cfg


def _gpus(session: Any, unread: dict[str, str]) -> tuple[tuple[tuple[str, tuple[int, int] | None], ...] | None,
                                                        tuple[tuple[int, int], ...] | None]:
    """Each GPU's name and compute capability (`compute_cap`; a driver too old to report it: NVIDIA's table by
    name), and its memory (total and used, MiB)."""
    from bot.core import gpus

    r = session.run(["nvidia-smi", "--query-gpu=name,compute_cap,memory.total,memory.used",
                     "--format=csv,noheader,nounits"], timeout=60)
    if r.exit_status != 0:
        unread["gpus"] = f"nvidia-smi said {(r.out() + r.err()).strip()[:160]!r} (exit {r.exit_status})"
        return None, None
    found: list[tuple[str, tuple[int, int] | None]] = []
    memory: list[tuple[int, int]] = []
    for line in r.out().splitlines():
        parts = [part.strip() for part in line.rsplit(",", 3)]
        if len(parts) != 4 or not parts[0]:
            continue
        name, cap, total, used = parts
        hit = re.fullmatch(r"(\d+)\.(\d+)", cap)
        known = gpus.lookup(name)
        found.append((name, (int(hit[1]), int(hit[2])) if hit else known.capability if known else None))
        if total.isdigit() and used.isdigit():
            memory.append((int(total), int(used)))
    return tuple(found), (tuple(memory) if len(memory) == len(found) else None)


def _weights(session: Any, where: str, what: str, unread: dict[str, str]) -> int | None:
    """Bytes a checkpoint's weight files hold, read without opening them."""
    if not (where.startswith("/") or _HUB_NAME.match(where)):
        unread[what] = f"{where!r} is neither a path nor a hub name"
        return None
    r = session.run(["sh", "-c", _WEIGHTS, "weigh", where if where.startswith("/") else where.replace("/", "--")],
                    timeout=60)
    text = r.out()
    if r.exit_status == 0 and text.startswith("INDEX"):
        try:
            total = json.loads(text[len("INDEX"):])["metadata"]["total_size"]
        except (ValueError, KeyError, TypeError):
            total = None
        if isinstance(total, int) and total > 0:
            return total
        unread[what] = "its model.safetensors.index.json states no metadata.total_size"
        return None
    files = text.split()
    if r.exit_status == 0 and len(files) == 3 and files[0] == "FILES" and files[1] != "0":
        return int(files[2])
    unread[what] = r.err().strip()[:200] or f"no weight files (*.safetensors, *.bin) in {where}"
    return None


def _float(value: object) -> float | None:
    try:
        return float(str(value)) if value is not None else None
    except ValueError:
        return None


def _int(value: object) -> int | None:
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None
