"""`specops tune`: measure which speculative setting (method x num_speculative_tokens) serves fastest on a host.

For each setting the named profile is copied with the method and k changed (a derived profile, e.g.
`mtp@mtp-k2`, valid like any profile, in an in-memory copy of the config) and deployed through the
normal deploy path (`ops.deploy`: the lock, the pre-flight, the doctor, the health wait). Then the
probe workload (bot/app/tune_prompts.yaml, or --prompts FILE) runs through an SSH forward: a warm-up,
then at each concurrency a fixed number of completions (generation tok/s = tokens / wall time), the
mean acceptance and per-position curve from /metrics counter deltas, and the time to first token of
streamed requests. Afterwards the deployment that was serving before is restored (or the best setting
kept, with keep_best; with nothing serving before, the server is stopped).

The result is a JSON dict (the contract of `--format json`); bot/present/tune.py renders it.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bot.app import ops
from bot.app.prometheus_text import parse_prometheus
from bot.config import Config, Profile
from bot.core.logparse import PromSnapshot, window
from bot.core.report import MetricsOut, OperationOut, Report, Verdict
from bot.engine.playbook import Progress, ProgressFn
from bot.engine.steps import process_matches
from bot.errors import InputError, SpecopsError
from bot.remote.ssh import SSHSession
from bot.store import Store, default_owner

PROMPTS_FILE = Path(__file__).with_name("tune_prompts.yaml")
METHODS: tuple[str, ...] = ("dflash", "mtp", "eagle", "eagle3", "ngram", "draft_model", "none")
NEEDS_DRAFTER = frozenset({"dflash", "eagle", "eagle3", "draft_model"})
DEFAULT_KS: tuple[int, ...] = (1, 2, 4, 8)
DEFAULT_METHODS: tuple[str, ...] = ("dflash", "mtp", "none")
DEFAULT_CONCURRENCY: tuple[int, ...] = (1, 8)
DEFAULT_REQUESTS = 4
MAX_K = 64
MAX_CONCURRENCY = 256
MAX_REQUESTS = 1000
REQUEST_TIMEOUT = 300.0
TTFT_REQUESTS = 2


# --- inputs -------------------------------------------------------------------------------------

def _int_list(text: str, what: str, low: int, high: int) -> list[int]:
    words = [w.strip() for w in str(text).split(",")]
    if not words or any(not w for w in words):
        raise InputError(f"{what} {text!r}: give whole numbers separated by commas, e.g. 1,2,4")
    out: list[int] = []
    for w in words:
        if not w.isdigit():
            raise InputError(f"{what} {text!r}: {w[:20]!r} is not a whole number")
        n = int(w)
        if not low <= n <= high:
            raise InputError(f"{what} {text!r}: {n} is out of range ({low}..{high})")
        if n not in out:
            out.append(n)
    return out


def parse_ks(text: str) -> list[int]:
    return _int_list(text, "--k", 1, MAX_K)


def parse_concurrency(text: str) -> list[int]:
    return sorted(_int_list(text, "--concurrency", 1, MAX_CONCURRENCY))


def parse_methods(text: str) -> list[str]:
    words = [w.strip().lower() for w in str(text).split(",")]
    if not words or any(not w for w in words):
        raise InputError(f"--methods {text!r}: give methods separated by commas, e.g. dflash,mtp,none")
    out: list[str] = []
    for w in words:
        if w not in METHODS:
            raise InputError(f"--methods: unknown method {w[:24]!r}; known: {', '.join(METHODS)}")
        if w not in out:
            out.append(w)
    return out


def check_requests(n: int) -> int:
    if not 1 <= n <= MAX_REQUESTS:
        raise InputError(f"--requests {n}: must be from 1 to {MAX_REQUESTS}")
    return n


@dataclass(frozen=True)
class Prompt:
    id: str
    kind: str
    text: str


@dataclass(frozen=True)
class Workload:
    prompts: tuple[Prompt, ...]
    max_tokens: int | None
    source: str


def load_prompts(path: Path | None = None) -> Workload:
    """The probe workload: the shipped prompt set, or a file of the same shape. Raises InputError."""
    file = path or PROMPTS_FILE
    shown = str(path) if path else "the shipped prompt set (bot/app/tune_prompts.yaml)"
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read --prompts {file}: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"--prompts {file} is not valid YAML: {str(exc).splitlines()[0]}") from None
    items = data.get("prompts") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise InputError(f"--prompts {file}: expected `prompts:` with a list of prompts")
    prompts: list[Prompt] = []
    for i, item in enumerate(items, 1):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or not item["text"].strip():
            raise InputError(f"--prompts {file}: prompt {i} has no text")
        prompts.append(Prompt(str(item.get("id") or f"prompt-{i}"), str(item.get("kind") or "chat"), item["text"]))
    max_tokens = data.get("max_tokens") if isinstance(data, dict) else None
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                   or not 1 <= max_tokens <= 4096):
        raise InputError(f"--prompts {file}: max_tokens must be a whole number from 1 to 4096")
    return Workload(tuple(prompts), max_tokens, shown)


# --- settings -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    method: str
    k: int | None  # None: no speculation

    @property
    def label(self) -> str:
        return "none" if self.k is None else f"{self.method} k={self.k}"

    def profile_name(self, profile: str) -> str:
        return f"{profile}@none" if self.k is None else f"{profile}@{self.method}-k{self.k}"


def derive_profile(base: Profile, s: Setting) -> Profile:
    """The profile with method and k changed, validated as any profile. Raises ValueError."""
    data = base.model_dump()
    data["method"] = s.method
    data["num_speculative_tokens"] = s.k
    if s.method not in NEEDS_DRAFTER:
        data["drafter"] = None
        data["drafter_config"] = None
    if s.method != base.method:
        data["speculative_extra"] = {}  # e.g. ngram's prompt_lookup_max means nothing to MTP
    if data.get("playbook") in ("deploy-dflash", "deploy-mtp"):
        data["playbook"] = "deploy"  # the deploy picks the playbook by the method
    return Profile.model_validate(data)


def plan_settings(config: Config, profile: str, ks: Sequence[int], methods: Sequence[str],
                  include_current: bool = True) -> tuple[list[tuple[Setting, Profile]], list[dict[str, Any]]]:
    """The settings a sweep deploys, each with its derived profile, and those that cannot exist (and why).
    `include_current`: the profile's own k is measured too (when its method is swept), so the gain over the
    current setting is a measured one."""
    base = config.profile(profile)
    out: list[tuple[Setting, Profile]] = []
    skipped: list[dict[str, Any]] = []
    for method in methods:
        method_ks = list(ks)
        current_k = base.num_speculative_tokens
        if include_current and method == base.method and current_k is not None and current_k not in method_ks:
            method_ks = sorted([*method_ks, current_k])
        candidates = [Setting("none", None)] if method == "none" else [Setting(method, k) for k in method_ks]
        if method in NEEDS_DRAFTER and not base.drafter:
            skipped += [{"method": s.method, "k": s.k, "reason": f"{method} needs a drafter; profile {profile} "
                         "names none"} for s in candidates]
            continue
        if method in NEEDS_DRAFTER and method != base.method and base.method in NEEDS_DRAFTER:
            skipped += [{"method": s.method, "k": s.k, "reason": f"the drafter of {profile} is a {base.method} "
                         f"drafter, not a {method} one"} for s in candidates]
            continue
        for s in candidates:
            try:
                out.append((s, derive_profile(base, s)))
            except ValueError as exc:
                skipped.append({"method": s.method, "k": s.k, "reason": str(exc).splitlines()[-1][:200]})
    return out, skipped


def derived_config(config: Config, profile: str, settings: Sequence[tuple[Setting, Profile]]) -> Config:
    profiles = dict(config.profiles)
    for s, p in settings:
        profiles[s.profile_name(profile)] = p
    return config.model_copy(update={"profiles": profiles})


@dataclass
class TuneRequest:
    config: Config
    host: str
    profile: str
    ks: Sequence[int] = DEFAULT_KS
    methods: Sequence[str] = DEFAULT_METHODS
    concurrency: Sequence[int] = DEFAULT_CONCURRENCY
    requests: int = DEFAULT_REQUESTS
    workload: Workload | None = None
    keep_best: bool = False
    include_current: bool = True
    owner: str = field(default_factory=default_owner)
    progress: ProgressFn | None = None  # one line per setting
    step_progress: ProgressFn | None = None  # the deploys' steps
    cancel: threading.Event = field(default_factory=threading.Event)


# --- measuring ----------------------------------------------------------------------------------

def _scrape(http: Any) -> PromSnapshot:
    resp = http.get("/metrics")
    resp.raise_for_status()
    return parse_prometheus(resp.text)


def _complete(http: Any, model: str, prompt: str, max_tokens: int) -> int:
    resp = http.post("/v1/completions", json={"model": model, "prompt": prompt, "max_tokens": max_tokens,
                                              "temperature": 0, "ignore_eos": True})
    if resp.status_code != 200:
        raise SpecopsError(f"completion answered {resp.status_code}: {resp.text[:200]}")
    try:
        return int(resp.json()["usage"]["completion_tokens"])
    except (ValueError, KeyError, TypeError):
        raise SpecopsError("completion answer has no usage") from None


def _ttft(http: Any, model: str, prompt: str, max_tokens: int) -> float | None:
    """Seconds from sending a streamed request to its first chunk with text."""
    t0 = time.monotonic()
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True}
    first: float | None = None
    with http.stream("POST", "/v1/completions", json=body) as resp:
        if resp.status_code != 200:
            return None
        for line in resp.iter_lines():
            if first is not None or not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                chunk = json.loads(data)
                text = chunk["choices"][0].get("text") or (chunk["choices"][0].get("delta") or {}).get("content")
            except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                continue
            if text:
                first = time.monotonic() - t0
    return first


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or x != x else round(x, digits)


def measure(session: SSHSession, port: int, model: str, workload: Workload, max_tokens: int,
            concurrency: Sequence[int], requests: int, cancel: threading.Event) -> list[dict[str, Any]]:
    """One row per concurrency: tok/s (generated tokens / wall time), the /metrics window, TTFT (at 1)."""
    import httpx

    prompts = [p.text for p in workload.prompts]
    rows: list[dict[str, Any]] = []
    limits = httpx.Limits(max_connections=max(concurrency) + 4, max_keepalive_connections=max(concurrency) + 4)
    with session.forward(port) as fwd, httpx.Client(base_url=fwd.url, timeout=REQUEST_TIMEOUT, limits=limits) as http:
        _complete(http, model, prompts[0], min(16, max_tokens))  # warm-up: the first request pays for compiling
        for c in concurrency:
            if cancel.is_set():
                break
            n = max(requests, c)
            before = _scrape(http)
            t0 = time.monotonic()
            if c == 1:
                tokens = [_complete(http, model, prompts[i % len(prompts)], max_tokens) for i in range(n)]
            else:
                with ThreadPoolExecutor(max_workers=c) as pool:
                    tokens = list(pool.map(lambda i: _complete(http, model, prompts[i % len(prompts)], max_tokens),
                                           range(n)))
            wall = time.monotonic() - t0
            after = _scrape(http)
            w = window(before, after)
            ttft: float | None = None
            if c == min(concurrency):
                seen = [t for t in (_ttft(http, model, prompts[i % len(prompts)], max_tokens)
                                    for i in range(min(TTFT_REQUESTS, n))) if t is not None]
                ttft = statistics.median(seen) if seen else None
            rows.append({
                "concurrency": c, "requests": n, "tokens": sum(tokens), "seconds": round(wall, 3),
                "tokens_per_s": round(sum(tokens) / wall, 2) if wall > 0 else None,
                "mean_acceptance_length": _round(w.mean_acceptance_length) if w else None,
                "per_position": [_round(r) for r in w.per_position] if w else [],
                "ttft_s": _round(ttft, 4),
            })
    return rows


# --- the sweep ----------------------------------------------------------------------------------

def _serving_before(config: Config, host: str) -> str | None:
    """The profile specops has serving on the host now: the store's latest deployment, if it is serving there
    (the host's meta file names it and its PID is that server)."""
    with closing(Store(config.settings.state)) as store:
        dep = store.latest_deployment(host)
    if dep is None or dep.status != "serving" or dep.profile not in config.profiles:
        return None
    v = ops.host_variables(config, host, None)
    with SSHSession(host, config.host(host)) as session:
        raw = session.read_file(v["meta_file"])
        try:
            meta = json.loads(raw) if raw else {}
        except ValueError:
            meta = {}
        pid = meta.get("pid") if isinstance(meta, dict) else None
        if not isinstance(pid, int) or meta.get("profile") != dep.profile:
            return None
        ours, _, _ = process_matches(session, pid, v["config_file"])
    return dep.profile if ours else None


def _best(rows: Sequence[dict[str, Any]], concurrency: int) -> dict[str, Any] | None:
    ok = [r for r in rows if r.get("concurrency") == concurrency and r.get("tokens_per_s")]
    return max(ok, key=lambda r: r["tokens_per_s"]) if ok else None


def _row_for(rows: Sequence[dict[str, Any]], method: str, k: int | None, concurrency: int) -> dict[str, Any] | None:
    return next((r for r in rows if r.get("concurrency") == concurrency and r["method"] == method
                 and (r["k"] == k or method == "none")), None)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def _yaml_lines(profile: str, method: str, k: int | None, drafter: str | None) -> str:
    lines = ["profiles:", f"  {profile}:", f"    method: {method}"]
    if k is not None:
        lines.append(f"    num_speculative_tokens: {k}")
    else:
        lines.append("    # remove num_speculative_tokens (and drafter)")
    if method not in NEEDS_DRAFTER and drafter:
        lines.append("    # remove drafter")
    return "\n".join(lines)


def plan(req: TuneRequest) -> dict[str, Any]:
    settings, skipped = plan_settings(req.config, req.profile, req.ks, req.methods, req.include_current)
    req.config.host(req.host)
    return {"host": req.host, "profile": req.profile, "settings": [s.label for s, _ in settings],
            "skipped": skipped, "concurrency": list(req.concurrency), "requests": req.requests,
            "keep_best": req.keep_best}


def tune(req: TuneRequest) -> dict[str, Any]:
    """The sweep. Raises InputError before anything ran (unknown profile or host, nothing to measure);
    after that every failure is recorded in the result, and the previous deployment is restored."""
    started = time.monotonic()
    base = req.config.profile(req.profile)
    req.config.host(req.host)
    settings, skipped = plan_settings(req.config, req.profile, req.ks, req.methods, req.include_current)
    if not settings:
        raise InputError("nothing to measure: " + "; ".join(sorted({s["reason"] for s in skipped}))
                         if skipped else "nothing to measure")
    workload = req.workload or load_prompts()
    max_tokens = workload.max_tokens or base.probe_max_tokens
    cfg = derived_config(req.config, req.profile, settings)
    previous = _serving_before(req.config, req.host)
    results: list[dict[str, Any]] = []
    cancelled = False
    interrupted = False
    total = len(settings)

    def say(i: int, s: Setting, status: str, message: str = "") -> None:
        if req.progress is not None:
            req.progress(Progress(i, total, f"tune {s.label}", status, time.monotonic() - started, message))

    try:
        for i, (s, p) in enumerate(settings, 1):
            if req.cancel.is_set():
                cancelled = True
                break
            name = s.profile_name(req.profile)
            say(i, s, "running", f"deploying {name}")
            row_base = {"k": s.k, "method": s.method, "profile": name}
            try:
                report = ops.deploy(ops.HostRequest(cfg, req.host, name, owner=req.owner, progress=req.step_progress,
                                                    cancel=req.cancel))
            except SpecopsError as exc:
                results.append({**row_base, "concurrency": None, "tokens_per_s": None, "error": str(exc),
                                "failed_step": None})
                say(i, s, "failed", str(exc))
                continue
            op = report.operation
            if op is None or op.status == "failed":
                if req.cancel.is_set():
                    cancelled = True
                    break
                results.append({**row_base, "concurrency": None, "tokens_per_s": None,
                                "error": report.headline, "failed_step": op.failed_step if op else None})
                say(i, s, "failed", report.headline)
                continue
            try:
                with SSHSession(req.host, cfg.host(req.host)) as session:
                    rows = measure(session, p.port, p.served_model_name or p.model, workload, max_tokens,
                                   req.concurrency, req.requests, req.cancel)
            except Exception as exc:  # a request failed, the host went away: this setting's failure
                results.append({**row_base, "concurrency": None, "tokens_per_s": None,
                                "error": f"measuring failed: {type(exc).__name__}: {str(exc)[:300]}",
                                "failed_step": "measure"})
                say(i, s, "failed", f"measuring failed: {exc}")
                continue
            for r in rows:
                results.append({**row_base, **r})
            one = rows[0] if rows else {}
            say(i, s, "ok", f"{one.get('tokens_per_s')} tok/s at concurrency {one.get('concurrency')}, mean "
                f"acceptance {one.get('mean_acceptance_length') or '—'}, TTFT {one.get('ttft_s') or '—'} s")
            if req.cancel.is_set():
                cancelled = True
                break
    except KeyboardInterrupt:  # Ctrl-C in the CLI: restore, then say so
        cancelled = interrupted = True
    low = min(req.concurrency)
    best = _best(results, low)
    restored = _restore(req, cfg, previous, best, cancelled, base)
    return _result(req, base, settings, skipped, results, best, low, restored, workload, max_tokens, cancelled,
                   interrupted, started, previous)


def _restore(req: TuneRequest, cfg: Config, previous: str | None, best: dict[str, Any] | None, cancelled: bool,
             base: Profile) -> dict[str, Any]:
    fresh = threading.Event()  # the sweep's cancel must not cancel the restore
    target: str | None = None
    status = "redeployed"
    if req.keep_best and best is not None and not cancelled:
        same = best["method"] == base.method and (best["k"] == base.num_speculative_tokens or base.method == "none")
        target = req.profile if same else best["profile"]
        status = "kept-best"
    elif previous is not None:
        target = previous
    try:
        if target is None:
            rep = ops.stop(ops.HostRequest(cfg, req.host, owner=req.owner, cancel=fresh))
            return {"profile": None, "status": "stopped", "message": rep.headline}
        rep = ops.deploy(ops.HostRequest(cfg, req.host, target, owner=req.owner, progress=req.step_progress,
                                         cancel=fresh))
    except SpecopsError as exc:
        return {"profile": target, "status": "failed", "message": str(exc)}
    except KeyboardInterrupt:
        return {"profile": target, "status": "failed", "message": "interrupted while restoring"}
    ok = rep.operation is not None and rep.operation.status in ("changed", "unchanged")
    return {"profile": target, "status": status if ok else "failed", "message": rep.headline}


def _result(req: TuneRequest, base: Profile, settings: Sequence[tuple[Setting, Profile]],
            skipped: list[dict[str, Any]], results: list[dict[str, Any]], best: dict[str, Any] | None, low: int,
            restored: dict[str, Any], workload: Workload, max_tokens: int, cancelled: bool, interrupted: bool,
            started: float, previous: str | None) -> dict[str, Any]:
    none_row = _row_for(results, "none", None, low)
    cur_k = base.num_speculative_tokens if base.method != "none" else None
    cur_row = _row_for(results, base.method, cur_k, low)
    baseline: dict[str, Any] = {"method": "none", "tokens_per_s": none_row["tokens_per_s"] if none_row else None,
                "source": "measured" if none_row else ("profile baseline_tps" if base.baseline_tps else None)}
    if none_row is None and base.baseline_tps:
        baseline["tokens_per_s"] = base.baseline_tps
    current: dict[str, Any] = {"profile": req.profile, "method": base.method, "k": cur_k,
               "tokens_per_s": cur_row["tokens_per_s"] if cur_row else None}
    recommended: dict[str, Any] | None = None
    change: dict[str, Any] | None = None
    if best is not None:
        recommended = {"k": best["k"], "method": best["method"], "concurrency": low,
                       "tokens_per_s": best["tokens_per_s"],
                       "gain": _ratio(best["tokens_per_s"], current["tokens_per_s"]),
                       "gain_over_none": _ratio(best["tokens_per_s"], baseline["tokens_per_s"])}
        if best["method"] != base.method or (best["k"] != cur_k):
            change = {"profile": req.profile, "from": {"method": base.method, "num_speculative_tokens": cur_k},
                      "to": {"method": best["method"], "num_speculative_tokens": best["k"]},
                      "yaml": _yaml_lines(req.profile, best["method"], best["k"], base.drafter)}
    under_load = []
    for c in req.concurrency:
        if c == low:
            continue
        b = _best(results, c)
        if b is not None:
            under_load.append({"concurrency": c, "method": b["method"], "k": b["k"], "tokens_per_s": b["tokens_per_s"]})
    return {"host": req.host, "profile": req.profile, "settings": [s.label for s, _ in settings], "skipped": skipped,
            "concurrency": list(req.concurrency), "requests": req.requests,
            "workload": {"source": workload.source, "prompts": len(workload.prompts), "max_tokens": max_tokens},
            "results": results, "recommended": recommended, "best_under_load": under_load, "baseline": baseline,
            "current": current, "profile_change": change, "previous": previous, "restored": restored,
            "cancelled": cancelled, "interrupted": interrupted, "duration_s": round(time.monotonic() - started, 1)}


# --- chat ---------------------------------------------------------------------------------------

def tune_report_for_chat(result: dict[str, Any], planned: bool = False) -> Report:
    """The sweep (or its plan) as a Report for the chat front ends: the headline carries the recommendation,
    one note per setting, context={"tune": result}."""
    host, profile = result["host"], result["profile"]
    skipped = [f"skipped {s['method']}" + (f" k={s['k']}" if s.get("k") else "") + f": {s['reason']}"
               for s in result.get("skipped", [])]
    if planned:
        op = OperationOut(kind="deploy", host=host, profile=profile, status="planned",
                          message=f"dry run: {len(result['settings'])} settings, nothing ran")
        planned_notes = [f"would deploy and measure {label}" for label in result["settings"]] + skipped
        keep = " (or keep the best)" if result.get("keep_best") else ""
        planned_notes.append("then restore the deployment serving now" + keep)
        return Report(verdict="unknown", headline=f"Plan: tune {profile} on {host} — {len(result['settings'])} "
                      "settings, each deployed and measured", metrics=MetricsOut(), findings=[], operation=op,
                      plan=planned_notes, notes=planned_notes,
                      context={"host": host, "profile": profile, "tune": result, "version_text": "n/a",
                               "version_label": "n/a", "method": "tune"})
    rec = result.get("recommended")
    notes: list[str] = []
    for r in result["results"]:
        label = "none" if r["k"] is None else f"{r['method']} k={r['k']}"
        if r.get("error"):
            notes.append(f"{label} — failed" + (f" at {r['failed_step']}" if r.get("failed_step") else "")
                         + f": {r['error']}")
            continue
        notes.append(f"{label} × {r['concurrency']} — {r['tokens_per_s']} tok/s · mean acceptance "
                     f"{r.get('mean_acceptance_length') or '—'} · TTFT {r.get('ttft_s') or '—'} s")
    notes += skipped
    restored = result.get("restored") or {}
    notes.append(f"restored: {restored.get('status')} {restored.get('profile') or ''}".rstrip())
    verdict: Verdict = "healthy" if rec else "failing"
    if rec:
        label = "none" if rec["k"] is None else f"{rec['method']} k={rec['k']}"
        gains = []
        if rec.get("gain"):
            gains.append(f"{rec['gain']:.2f}x the current setting")
        if rec.get("gain_over_none"):
            gains.append(f"{rec['gain_over_none']:.2f}x no speculation")
        headline = (f"Tune {profile} on {host}: best {label}, {rec['tokens_per_s']} tok/s for one request"
                    + (f" ({', '.join(gains)})" if gains else ""))
    else:
        headline = f"Tune {profile} on {host}: no setting could be measured"
    if result.get("cancelled"):
        headline += " — cancelled"
        verdict = "unknown" if rec else "failing"
    op = OperationOut(kind="deploy", host=host, profile=profile,
                      status="failed" if restored.get("status") == "failed" else "changed",
                      message=f"tune: {len(result['settings'])} settings; restored {restored.get('status')}",
                      duration=float(result.get("duration_s") or 0.0))
    change = result.get("profile_change")
    todo = ([f"set in the specops config: {change['yaml'].replace(chr(10), ' / ')}"] if rec and change else
            ["keep the profile as it is: its setting measured best"] if rec else [])
    return Report(verdict=verdict, headline=headline, metrics=MetricsOut(), findings=[], notes=notes, operation=op,
                  plan=todo, context={"host": host, "profile": profile, "tune": result, "version_text": "n/a",
                                      "version_label": "n/a", "method": "tune"})


def tune_command(config: Config, host: str, profile: str | None, *, dry_run: bool, owner: str,
                 progress: ProgressFn | None, cancel: threading.Event) -> Report:
    """`tune PROFILE [HOST]` from chat: the default sweep, confirmed like a deploy."""
    if profile is None:
        raise InputError("tune needs a profile")
    req = TuneRequest(config, host, profile, owner=owner, progress=progress, cancel=cancel)
    if dry_run:
        return tune_report_for_chat(plan(req), planned=True)
    return tune_report_for_chat(tune(req))



