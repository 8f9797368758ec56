"""`diagnose [HOST] [options]`: one pass over a deployment — what is wrong, how sure, what to do. On the command line
it also reads a vLLM log and /metrics scrapes offline, or an instance from Prometheus.

In chat, a log pasted (or attached) after `diagnose` and its flags is this verb's own input (`Args.paste`, with the
attached files' texts in `Args.files`): app/diagnosis/paste.py reads it, secrets masked first.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bot.app.diagnosis.flagcheck import fail_on
from bot.app.verbs import _host
from bot.app.verbs.spec import Call, Exit, Verb, opt

if TYPE_CHECKING:
    from bot.app.diagnosis.offline import DiagnoseOptions
    from bot.app.diagnosis.paste import Paste, PastedFile
    from bot.core.report import Report


@dataclass(frozen=True)
class Args:
    log: Path | None = opt("--log", help="a vLLM server log (any size); - reads stdin", cli_only=True)
    metrics: tuple[Path, ...] | None = opt(
        "--metrics", help="a /metrics scrape; give two (or one file with two) for a window", cli_only=True)
    chart: Path | None = opt("--chart", help="write the per-position chart (PNG)", cli_only=True)
    all: bool = opt("--all", False, help="scan the whole log, not the head and tail", cli_only=True)
    samples: int | None = opt("--samples", 30, help="judge the last N samples", low=1, high=100_000, cli_only=True)
    vllm_version: str | None = opt("--vllm-version", help="vLLM version on the host, e.g. 0.20.1", cli_only=True)
    method: str | None = opt("--method", help="dflash | mtp | eagle3 | ngram | draft_model", cli_only=True)
    target_model: str | None = opt("--target-model", help="the served (target) model", cli_only=True)
    drafter: str | None = opt("--drafter", help="the drafter, e.g. z-lab/Qwen3.6-27B-DFlash", cli_only=True)
    drafter_config: Path | None = opt("--drafter-config", help="the drafter's config.json", cli_only=True)
    num_speculative_tokens: int | None = opt("--num-speculative-tokens", low=1, high=64, cli_only=True)
    baseline_tps: float | None = opt(
        "--baseline-tps", low=0.0, cli_only=True,
        help="the reference: tokens/s for one request of what the team served before (the brief's MTP: 73.5)")
    host: str | None = opt("--host", help="a host to diagnose over SSH; with --log, the name used in advice")
    profile: str | None = opt("--profile", help="with --host: the profile, if not the one recorded")
    probe: bool = opt("--probe/--no-probe", True, help="with --host: send a completion probe")
    fail_on: str | None = opt("--fail-on", "never", cli_only=True, check=fail_on,
                              help="exit 1 when the verdict is this or worse: degraded | failing | never (for cron "
                                   "jobs)")
    prometheus: str | None = opt("--prometheus", cli_only=True, help="a Prometheus that scrapes the server (default: "
                                 "the config's prometheus.url), with --instance")
    instance: str | None = opt("--instance", cli_only=True, help="with --prometheus: the instance, HOST:PORT or a "
                               "label selector like 'job=\"vllm\"'")
    since: str | None = opt("--since", "1h", help="with --prometheus: the window, e.g. 30m, 1h", cli_only=True)
    # chat's own input, no option: the pasted log with the flags typed before it, and the attached files' texts
    paste: Paste | None = field(default=None, compare=False, repr=False)
    files: tuple[PastedFile, ...] = field(default=(), compare=False, repr=False)


def run(call: Call, args: Args) -> Report:
    from bot.app.diagnosis.offline import DiagnoseOptions, diagnose_files

    if args.paste is not None:
        from bot.app.diagnosis.paste import diagnose_paste

        return diagnose_paste(args.paste, args.files, redactor=call.graph.redactor)
    opts = DiagnoseOptions.of({f.name: getattr(args, f.name) for f in dataclasses.fields(args)
                               if f.name not in ("paste", "files")})
    if opts.prometheus is not None or opts.instance is not None:
        return _from_prometheus(call, opts)
    if opts.host is not None and opts.log is None and not opts.metrics:
        from bot.app.operations import ops  # paramiko: only when a host is reached

        return ops.diagnose_host(_host.request(call, opts.host, opts.profile, probe=opts.probe))
    return diagnose_files(opts)


def _exit(report: Report, args: Args) -> Exit:
    return _host.report_exit(report, fail_on(args.fail_on))


def _from_prometheus(call: Call, opts: DiagnoseOptions) -> Report:
    from bot.app.fleet import diagnose_instance, settings_for
    from bot.app.prometheus.promql import parse_since

    config = call.config_or_none
    settings = settings_for(config, opts.prometheus)
    store = call.services.existing_store() if call.services is not None else None
    return diagnose_instance(config, settings, str(opts.instance), parse_since(opts.since), store=store)


VERB: Verb[Args, Report] = Verb(
    name="diagnose", summary="one pass over the deployment: what is wrong, how sure, what to do",
    chat=("host",), args=Args, run=run, exit=_exit, config="optional",
    cli_help="Diagnose a host over SSH (--host), a vLLM log and/or /metrics scrape offline (--log, --metrics), or an "
             "instance from Prometheus (--prometheus URL --instance HOST:PORT).",
)
