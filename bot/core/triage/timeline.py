"""Time and context: the verdict is about now.

A warning vLLM prints while it starts (a fallback, an uncalibrated scale, a deprecated flag, a stall notice while
it compiles) and then goes on starting is a note, not a degraded server; a warning or an error that the log shows
serving after (metrics, requests answered, the server up) is past; a line after the last sign of health is current.
Exceptions stay what they are: a traceback ends what raised it.

Reads the positions the parser recorded: progress lines (weights loaded, caches sized, graphs compiled — and the
server up, requests answered), SpecDecoding samples and Engine lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.core.triage.evidence import Evidence, latest_launch, position
from bot.core.triage.findings import Finding

# vLLM's words for choosing another implementation than the one asked for or preferred ("Falling back to
# PyTorch-native implementation", "falls back to the Triton kernel")
_FALLBACK = re.compile(r"\bfall(?:ing|s)?[ -]?back to\b", re.IGNORECASE)
# what the scheduler logs at run time (a preemption, a request it cannot fit) is printed only while serving
_SERVING_FILE = re.compile(r"^vllm/(?:v1/)?core/(?:sched/)?scheduler\.py$")
# the levels a line finding can rest on that never end a process by themselves
_NOTICE_LEVELS = frozenset({"WARNING", "WARN", "INFO", None})


@dataclass(frozen=True)
class Progress:
    """How far the latest launch got, by the log's own lines (positions; -1 when none)."""

    startup: int  # the last line that shows startup going on
    serving: int  # the last line that shows the server serving (up, answering, measuring)
    startup_text: str = ""
    serving_text: str = ""

    @property
    def served(self) -> bool:
        return self.serving >= 0

    @property
    def last(self) -> int:
        return max(self.startup, self.serving)


def progress_of(ev: Evidence) -> Progress:
    start = latest_launch(ev.parsed)
    startup = serving = -1
    startup_text = serving_text = ""
    for c in ev.parsed.clues:
        at = position(c.origin)
        if at < start:
            continue
        if c.kind == "progress" and c.value == "serving" and at > serving:
            serving, serving_text = at, c.origin.text
        elif c.kind in ("progress", "start", "args", "version", "logo_version") and at > startup:
            startup, startup_text = at, c.origin.text
    for s in ev.window.samples if ev.window is not None else ():
        at = position(s.origin)
        if at > serving:
            serving, serving_text = at, s.origin.text if s.origin else ""
    for e in ev.parsed.engine:
        at = position(e.origin)
        # generating, or idle with nothing asked of it (no request running or waiting): the engine is up either way;
        # a stats line with requests held and nothing generated is no sign of serving
        idle = e.generation_tps == 0 and e.running == 0 and e.waiting == 0
        if at >= start and at > serving and ((e.generation_tps or 0) > 0 or idle):
            serving, serving_text = at, e.origin.text if e.origin else ""
    return Progress(startup, serving, startup_text, serving_text)


# where vLLM resolves its settings before anything runs (the config classes' own checks and defaults)
_SETTLING = ("vllm/config/", "vllm/config.py")  # the one-file config of older releases too


# a function that runs as a process ends (`shutdown_prometheus`, `Worker.shutdown`, `__del__`, an atexit hook)
_TEARDOWN = re.compile(r"(?:^|[._])(?:shutdown|cleanup|teardown|__del__|atexit|close)(?:_\w+)?$")


def at_teardown(f: Finding) -> str | None:
    """A warning a teardown printed (shutdown, cleanup, close): the process was already ending, by whatever ended
    it — a note; the lines before it say whether anything failed."""
    if f.severity != "warning" or f.at is None or f.site is None or not _TEARDOWN.search(f.site.function):
        return None
    return (f"printed while vLLM shut down (`{f.site.function}`): the process was ending; the log's lines before it "
            "say whether anything failed")


def past_or_startup(f: Finding, p: Progress) -> str | None:
    """Why a warning finding is not about now, or None when it is: it was followed by the server serving, or it is a
    notice printed while the server was still starting — or a wait the log shows going on past."""
    if f.waits and f.at is not None and p.last > f.at:
        return f"a wait the log shows going on past (`{_clip(p.serving_text if p.serving > f.at else p.startup_text)}`)"
    if f.severity != "warning" or f.at is None or f.at < 0:
        return None
    level = (f.level or "").upper() or None
    if level not in _NOTICE_LEVELS and level != "ERROR":
        return None
    if _FALLBACK.search(f"{f.title} {' '.join(f.evidence[:1])}") and level in _NOTICE_LEVELS:
        # vLLM says which other implementation it used and goes on: a choice made, not a fault (it may cost speed)
        return "a fallback notice: vLLM used another implementation and went on — a note, not a degraded server"
    if level in _NOTICE_LEVELS and f.site is not None and f.site.file.startswith(_SETTLING) \
            and f.site.condition is not None:
        # vLLM's configuration settling the settings before anything runs: what it chose, adjusted or ignored, and
        # went on with — the log after it says whether that mattered
        return ("a note of how vLLM's configuration settled the settings (it went on with them), not a degraded "
                "server")
    if p.served and f.at < p.serving and "request" not in f.inputs:
        # (a refused request is refused again each time a client sends one like it: serving after it is no cure)
        return (f"printed before the server went on serving (`{_clip(p.serving_text)}`): past, not current")
    # a line whose level the log does not say (a paste: "ERROR ... [file.py:1]") is a notice only where the log
    # shows a start around it: alone it may as well be from serving
    if level in _NOTICE_LEVELS and (level is not None or p.startup >= 0) and not p.served and not f.after_start \
            and "request" not in f.inputs and not (f.site is not None and _SERVING_FILE.match(f.site.file)):
        went_on = "; startup went on after it" if p.startup > f.at else ""
        return f"a notice printed while the server was starting, not an error{went_on} — a note, not a degraded server"
    return None


# an access line of a request answered (uvicorn's `"POST /v1/… HTTP/1.1" 200 OK`)
_ANSWERED = re.compile(r'HTTP/[\d.]{1,5}" 2\d\d\b')


def answered(ev: Evidence) -> str | None:
    """The first access line of a request the server answered, if the log holds one."""
    return next((c.origin.text for c in ev.parsed.clues
                 if c.kind == "progress" and c.value == "serving" and _ANSWERED.search(c.origin.text or "")), None)


def apply(findings: list[Finding], ev: Evidence) -> list[str]:
    """Demote, in place, the warnings that are not about now to notes; the notes saying so."""
    p = progress_of(ev)
    notes: list[str] = []
    served = answered(ev) if any(f.per_request for f in findings) else None
    for f in findings:
        torn = at_teardown(f)
        why = (f"other requests were answered (`{_clip(served)}`): one client's requests refused, not the server"
               if f.per_request and served else torn or past_or_startup(f, p))
        if why is None or f.standing:
            # (the whole engine falling back for a flag the user gave is the server's state, served or not)
            continue
        f.severity = "info"
        f.priority = max(f.priority, 80)
        if torn is not None and f.at is not None:
            f.covers = list(dict.fromkeys([*f.covers, f.at]))  # the teardown's error line is accounted for
        f.summary = (f.summary + f" Not current: {why}.").strip()
        notes.append(f"{f.title}: {why}")
    return notes


def _clip(text: str, n: int = 90) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"
