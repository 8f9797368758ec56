"""Diagnosis of what was read: a log file, pasted text, /metrics scrapes -> the core's triage -> a Report.

Only the reading is done here: `bot.core.triage.diagnose` is the whole triage, `build_report` its JSON form."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot.app.diagnosis.logfile import read_log
from bot.core.parsed_log import ParsedLog, SpecDecodeSample
from bot.core.prom_samples import split_scrapes, window
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.vllm_metrics import REQUESTS_RUNNING, value_of
from bot.errors import InputError


@dataclass
class DiagnoseRequest:
    log: Path | None = None
    metrics: list[Path] = field(default_factory=list)
    flags: Flags = field(default_factory=Flags)
    samples: int = 30
    full: bool = False
    log_label: str | None = None  # what to call the log in the report (stdin spooled to a file)


def read_scrapes(paths: list[Path]) -> list[str]:
    """Each file's scrapes; a file none of whose lines is a Prometheus sample is refused (exit 2), never read as
    "no metrics"."""
    texts: list[str] = []
    for path in paths:
        try:
            scrapes = split_scrapes(path.read_text(encoding="utf-8", errors="replace"))
        except OSError as exc:
            raise InputError(f"cannot read metrics file {path}: {exc.strerror or exc}") from None
        _check_scrape(path, "\n".join(scrapes))
        texts += scrapes
    return texts


def _check_scrape(path: Path, text: str) -> None:
    from bot.app.prometheus.text import first_unreadable

    bad = first_unreadable(text)
    if bad is None:
        return
    if not bad:
        raise InputError(f"{path} is empty: no /metrics samples to read")
    shown = bad if len(bad) <= 60 else bad[:59] + "…"
    raise InputError(f"{path} is not a Prometheus /metrics scrape: no line of it is a sample "
                     f"(first line: {shown!r}); save one with `curl -s http://HOST:PORT/metrics`")


def running_of(scrapes: list[str]) -> float | None:
    """How many requests the server was running at the last scrape (`vllm:num_requests_running`)."""
    if not scrapes:
        return None
    from bot.app.prometheus.text import parse_prometheus

    return value_of(parse_prometheus(scrapes[-1]).gauges, REQUESTS_RUNNING)


def prom_window(scrapes: list[str]) -> tuple[SpecDecodeSample | None, list[str]]:
    """The speculative-decoding sample of a series of /metrics scrapes: the last two give a window
    (counter deltas); one, or a window with nothing drafted, gives the counters since the start."""
    if not scrapes:
        return None, []
    from bot.app.prometheus.text import parse_prometheus  # ~20 ms of imports only a scrape pays

    snaps = [parse_prometheus(text) for text in scrapes]
    spec = [s for s in snaps if s.has_spec_decode]
    if not spec:
        return None, ["the /metrics scrape has no vllm:spec_decode_* counters"]
    if len(spec) >= 2:
        w = window(spec[-2], spec[-1])
        if w is None:
            return spec[-1].as_sample(), ["the /metrics counters went down between the scrapes: the server "
                                          "restarted; counters since it started"]
        if w.drafted > 0:
            return w, ["/metrics window from the last two scrapes (counter deltas)"]
    return spec[-1].as_sample(), ["/metrics: counters since the server started"]


def diagnose_offline(req: DiagnoseRequest) -> Report:
    if req.log is None and not req.metrics:
        raise InputError("nothing to diagnose: give --log FILE and/or --metrics FILE")
    parsed = ParsedLog()
    notes: list[str] = []
    source: list[str] = []
    if req.log is not None:
        try:
            read = read_log(req.log, samples=req.samples, full=req.full)
        except IsADirectoryError:
            raise InputError(f"{req.log} is a directory, not a log file") from None
        except OSError as exc:
            raise InputError(f"cannot read log {req.log}: {exc.strerror or exc}") from None
        parsed = read.parsed
        notes += read.notes
        source.append(f"{req.log_label or req.log} ({read.mode}, {read.bytes_read} of {read.size} bytes)")
    scrapes = read_scrapes(req.metrics)
    prom, prom_notes = prom_window(scrapes)
    notes += prom_notes
    source += [str(p) for p in req.metrics]
    return diagnose_parsed(parsed, req.flags, prom, notes=notes, samples=req.samples, source=", ".join(source),
                           running=running_of(scrapes), metrics_from="scrape" if scrapes else "")


def diagnose_text(text: str, flags: Flags, *, source: str = "pasted text") -> Report:
    """A log (or a fragment of one) pasted in chat or handed over as a string."""
    from bot.core.logparse import parse_text

    parsed = parse_text(text)
    return diagnose_parsed(parsed, flags, notes=[], source=source)


def diagnose_parsed(parsed: ParsedLog, flags: Flags, prom: SpecDecodeSample | None = None, *,
                    notes: list[str] | None = None, samples: int | None = None, source: str = "",
                    running: float | None = None, metrics_from: str = "") -> Report:
    """Triage of what was read (from a file, a remote tail or a scrape) into a Report. `running`: requests
    running at once by the last /metrics scrape (the load the k advice is for, when no Engine line says)."""
    return build_report(diagnose(Readings(parsed=parsed, flags=flags, prom=prom, running=running,
                                          notes=tuple(notes or ()), samples=samples, source=source,
                                          metrics_from=metrics_from)))
