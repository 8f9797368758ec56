"""The last word: no metrics to judge acceptance by, or healthy (by the metrics, or a clean start)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.line_kinds import PY_WARNING_LINE_RE
from bot.core.triage.detectors.common import base_params, spec_decoding, window_evidence
from bot.core.triage.detectors.state import Found, State, issue_finding
from bot.core.triage.evidence import Evidence, latest_launch, position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.timeline import Progress


def no_metrics(st: State) -> Found:
    out = Found()
    ev = st.ev
    if ev.window is not None:
        return out
    if spec_decoding(ev) != "on" and any(f.severity == "critical" for f in st.findings):
        return out  # a crash of a server not known to speculate: its missing acceptance lines say nothing
    where = ""
    if any("no SpecDecoding metrics in the last" in n or "no SpecDecoding line" in n for n in ev.notes):
        where = " in the part that was read"
    params = base_params(ev) | _missing_in(ev, where)
    evidence = [f"{ev.parsed.stats.lines} line(s) read, {len(ev.parsed.engine)} Engine line(s)"]
    if ev.parsed.stats.skipped:
        evidence.append(f"{ev.parsed.stats.skipped} metrics-like line(s) were truncated or garbled and skipped")
        evidence += [f"could not read: {x}" for x in ev.parsed.stats.skipped_examples[:1]]
    out.findings.append(issue_finding(st, "no-metrics", severity="info", confidence="high", evidence=evidence,
                                      params=params, priority=90))
    return out


def _missing_in(ev: Evidence, where: str) -> dict[str, str]:
    """What was read and found without metrics: a log, a /metrics scrape, both, or Prometheus' series (the title
    names it)."""
    if ev.metrics_from == "prometheus" and ev.parsed.stats.lines == 0:
        return {"in_what": "in Prometheus for this instance",
                "missing": "Prometheus holds no `vllm:spec_decode_*` series for this instance: this server reports no "
                           "speculative decoding (or Prometheus has not scraped it since it started)."}
    scraped = ev.metrics_from == "scrape"
    logged = ev.parsed.stats.lines > 0 or not scraped
    in_log = f"The log has no `SpecDecoding metrics` line{where}."
    in_scrape = ("The /metrics scrape has no `vllm:spec_decode_*` counters: this server reports no speculative "
                 "decoding.")
    if scraped and logged:
        return {"in_what": "in the log or the /metrics scrape", "missing": f"{in_log} {in_scrape}"}
    if scraped:
        return {"in_what": "in the /metrics scrape", "missing": in_scrape}
    return {"in_what": "in this log", "missing": in_log}


def healthy(st: State) -> Found:
    ev, kb, c = st.ev, st.kb, st.curve
    w = ev.window
    started = next((f for f in st.findings if f.id == "server-started"), None)
    if w is None:
        return _started_clean(st, started)
    # the metrics say more than the startup line
    out = Found(withdrawn=[started.id] if started is not None else [])
    if w is None or c is None or any(f.severity in ("critical", "warning") for f in st.findings):
        return out
    facts = kb.method(ev.context.method)
    parts = [f"Mean acceptance length {w.mean:.2f}"
             + (f" of at most {c.ceiling:.0f} (k = {c.k}, {100 * (c.efficiency or 0):.0f}% of drafted tokens "
                "accepted)" if c.ceiling else "") + f" over {len(w.samples)} sample(s)"]
    if w.per_position:
        parts.append(f"per position {w.per_position[0]:.3f} → {w.per_position[-1]:.3f}, {c.describe()}")
    if facts.healthy_range:
        parts.append(f"typical for {ev.context.method}: {facts.healthy_range}")
    if c.speedup is not None:
        parts.append(f"estimated speedup ≈ {c.speedup:.1f}× over no speculation")
    if ev.context.baseline_tps and ev.engine and ev.engine.single_request_tps:
        parts.append(f"{ev.engine.single_request_tps:.1f} tok/s for one request vs the reference "
                     f"{ev.context.baseline_tps:.1f}")
    if ev.context.method is None:
        parts.append("judged without knowing the method (give --method for a sharper judgement)")
    params = base_params(ev) | {"detail": "; ".join(parts) + "."}
    out.findings.append(issue_finding(st, "healthy", severity="info",
                                      confidence="high" if ev.context.method else "medium",
                                      evidence=window_evidence(w, c), params=params, priority=100))
    return out


_TROUBLE_RE = re.compile(r"error|exception|traceback|fail|fatal|warn|abort|denied|refused|killed|timeout|"
                         r"cannot|unable|not (?:found|supported)", re.IGNORECASE)


# vLLM's benchmark report counting no failed request: the words say nothing failed
_NONE_FAILED = re.compile(r"^\s*Failed requests:\s+0\s*$")


def _started_clean(st: State, started: Finding | None) -> Found:
    """A log with no metrics yet: healthy when the server started (or its startup went on) and nothing current is
    wrong — no error, traceback or warning finding left once past warnings and startup notices are notes. A log that
    shows no startup progress at all (a banner, a stray line) stays unknown: a hang looks so."""
    from bot.core.triage.timeline import progress_of

    ev = st.ev
    if any(f.severity in ("critical", "warning") for f in st.findings) or _unexplained(st) or _device_trouble(st):
        return Found()
    progress = progress_of(ev)
    # notices placed at their sites (vLLM's, or a library's own logger: transformers' deprecations) and the lines a
    # note accounts for (an import probe logged and passed); an error or a raise there is _unexplained above
    notices = [f for f in st.findings if f.severity == "info"
               and (f.site is not None or f.covers)]
    # (and Python's own warnings, `file.py:8: RuntimeWarning: …`: the interpreter printed them and went on)
    deprecations = [p for p in ev.parsed.loose if _DEPRECATION_RE.search(p.message)
                    or PY_WARNING_LINE_RE.search(p.origin.text or p.message)]
    if started is None and progress.last < 0 and not notices and not deprecations:
        return Found()
    spec = "speculative decoding configured; " if spec_decoding(ev) == "on" else ""
    notes = sum(1 for f in st.findings if f.severity == "info" and f.id not in ("no-metrics", "server-started"))
    noted = f" ({notes} notice(s) below, none current)" if notes else ""
    title, what = _how_it_started(started, progress, len(notices) + len(deprecations))
    return Found(withdrawn=[started.id] if started is not None else [], findings=[Finding(
        id="healthy", title=title, severity="info", confidence="medium",
        summary=(f"{what}; no error or traceback in {ev.parsed.stats.lines} line(s){noted}. {spec}No SpecDecoding "
                 "metrics yet, so acceptance is not judged: send traffic, then diagnose again."),
        evidence=list(started.evidence) if started is not None else [progress.startup_text[:300]],
        sources=list(started.sources) if started is not None else [], priority=100)])


# a warning that quotes the device's own failure: a CUDA error code, memory the device did not have, a wait that ran
# out — vLLM goes on after such a warning, but the log does not show that it served
_DEVICE_TROUBLE_RE = re.compile(r"\bCUDA_ERROR_[A-Z_]{3,40}\b|\bCUDA error\b|\bout of memory\b|\btimed out\b",
                                re.IGNORECASE)


def _device_trouble(st: State) -> bool:
    """A warning of the latest launch that quotes a device error or a timeout, with no sign the server then served:
    not "only notices" (the verdict stays unknown)."""
    from bot.core.triage.timeline import progress_of

    ev = st.ev
    start = latest_launch(ev.parsed)
    troubled = any(position(p.origin) >= start and (p.origin.level or "").upper() == "WARNING"
                   and _DEVICE_TROUBLE_RE.search(p.message) for p in ev.parsed.problems)
    return troubled and not progress_of(ev).served


def _unexplained(st: State) -> bool:
    """An error or a traceback of the latest launch no finding took up, or a stray line whose words say something
    went wrong."""
    ev = st.ev
    start = latest_launch(ev.parsed)
    covered = {at for f in st.findings for at in f.covers}
    return any(position(p.origin) >= start and position(p.origin) not in covered
               and (p.kind in ("exception", "frame") or (p.origin.level or "").upper() in ("ERROR", "CRITICAL"))
               for p in ev.parsed.problems) \
        or any(position(p.origin) >= start and _TROUBLE_RE.search(p.message) and not _NOTICE_RE.search(p.message)
               and not _NONE_FAILED.match(p.message)
               and (p.origin.level or "").upper() not in ("INFO", "DEBUG") for p in ev.parsed.loose)


def _how_it_started(started: Finding | None, progress: Progress, notices: int) -> tuple[str, str]:
    if started is not None or progress.served:
        what = started.evidence[0] if started is not None and started.evidence else "The server is up and serving"
        return "The server started and the log shows nothing wrong", what
    if progress.last < 0:
        return ("Only notices: nothing in the log failed",
                f"The log holds only notices ({notices}), each a note vLLM prints and goes on after")
    return ("Starting normally so far: nothing wrong in the log",
            f"Startup was going on at the last line (`{_clip(progress.startup_text)}`)")


# a line at INFO or DEBUG level, also under another logger's prefix (`[2025-06-16 15:50:30,791] LMCache INFO: …`,
# uvicorn's `INFO:     127.0.0.1 …`), or a warning: a note, whatever words it carries
# a warning that something is deprecated (Python's DeprecationWarning/FutureWarning, torch's c10 `Warning: … is
# deprecated`): it says what will change, never that anything failed
_DEPRECATION_RE = re.compile(r"(?i)(?:DeprecationWarning|FutureWarning|\bwarn(?:ing)?\b[^\n]{0,200}\bdeprecated\b)")
_NOTICE_RE = re.compile(r"^\s*(?:INFO|DEBUG)\b|^[^\n]{0,80}?(?<![\w-])(?:INFO|DEBUG)(?::|\s)|(?i:warning)")


def _clip(text: str, n: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"
