"""`diagnose --log/--metrics`: a log and scrapes read from local files (or stdin), through the core."""

from __future__ import annotations

import json
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, Any

from bot.app.diagnosis import flagcheck
from bot.app.diagnosis.diagnose import DiagnoseRequest, diagnose_offline
from bot.core.report import Report
from bot.core.triage.context import Flags
from bot.errors import InputError


@dataclass(frozen=True)
class DiagnoseOptions:
    """The command line's request, checked before anything is read. A dataclass, not a pydantic model: it is
    built on every `diagnose`, and a model's class costs ~9 ms of start-up (bench/tail.py's one-line run)."""

    log: Path | None = None
    metrics: tuple[Path, ...] = ()
    all: bool = False
    samples: int = 30
    vllm_version: str | None = None
    method: str | None = None
    target_model: str | None = None
    drafter: str | None = None
    drafter_config: Path | None = None
    num_speculative_tokens: int | None = None
    baseline_tps: float | None = None
    host: str | None = None
    profile: str | None = None
    probe: bool = True
    fail_on: str = "never"
    prometheus: str | None = None
    instance: str | None = None
    since: str = "1h"

    @classmethod
    def of(cls, values: Mapping[str, object]) -> DiagnoseOptions:
        """From the command line's options (others, such as --chart, are the front end's). Raises InputError."""
        known = {f.name for f in fields(cls)}
        given = {k: v for k, v in values.items() if k in known and v is not None}
        given["metrics"] = tuple(given.get("metrics") or ())  # type: ignore[arg-type]
        for name in ("vllm_version", "method", "drafter"):
            if name in given:
                given[name] = flagcheck.check(name, str(given[name]))
        given["fail_on"] = flagcheck.fail_on(given.get("fail_on"))
        opts = cls(**given)  # type: ignore[arg-type]
        opts._one_source()
        return opts

    def _one_source(self) -> None:
        if (self.prometheus is not None or self.instance is not None) and (
                self.log is not None or self.metrics or self.host is not None):
            raise InputError("--prometheus/--instance read Prometheus: not with --log, --metrics or --host")
        if self.prometheus is not None and not self.instance:
            raise InputError("--prometheus needs --instance HOST:PORT (or a selector); `specops fleet` shows every "
                             "instance")
        if self.prometheus is None and self.instance is None and self.host is None and self.log is None \
                and not self.metrics:
            raise InputError("nothing to diagnose: give --host HOST, or --log FILE and/or --metrics FILE")


def diagnose_files(opts: DiagnoseOptions) -> Report:
    cfg = _json_object(opts.drafter_config, "drafter config") if opts.drafter_config else None
    flags = Flags(vllm_version=opts.vllm_version, method=opts.method, target_model=opts.target_model,
                  drafter=opts.drafter, drafter_config=cfg, num_speculative_tokens=opts.num_speculative_tokens,
                  baseline_tps=opts.baseline_tps, host=opts.host)
    spool = spool_stream(opts.log) if opts.log is not None else None
    label = ("stdin" if str(opts.log) == "-" else str(opts.log)) if spool else None
    try:
        return diagnose_offline(DiagnoseRequest(log=spool or opts.log, metrics=list(opts.metrics), flags=flags,
                                                samples=opts.samples, full=opts.all, log_label=label))
    except InputError as exc:
        raise InputError(str(exc).replace(str(spool), str(opts.log)) if spool else str(exc)) from None
    finally:
        if spool is not None:
            spool.unlink(missing_ok=True)


def _json_object(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{what} {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{what} {path} must hold a JSON object")
    return data


def spool_stream(log: Path) -> Path | None:
    """`--log -` or a pipe (/dev/stdin, a FIFO): the log is read from its start to its end, so it is spooled
    to a file first; a regular file is read in place (head and tail). None: read in place."""
    if str(log) != "-":
        try:
            mode = log.stat().st_mode
            if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)):
                return None  # a regular file (or a folder, which the reader refuses)
        except OSError:
            return None  # the reader says what is wrong with it
        src: IO[bytes] = log.open("rb")
    else:
        src = sys.stdin.buffer
    with tempfile.NamedTemporaryFile(prefix="specops-log-", suffix=".txt", delete=False) as spool:
        shutil.copyfileobj(src, spool, 1 << 20)
    if src is not sys.stdin.buffer:
        src.close()
    return Path(spool.name)
