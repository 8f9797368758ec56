"""`tune PROFILE [HOST]`: deploy each setting (method x k), measure tok/s, acceptance and time to first
token on a fixed workload, recommend the best, then restore what was serving."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, Exit, Verb, checked_by, opt
from bot.errors import InputError

if TYPE_CHECKING:
    from bot.core.results.tune import TunePlan, TuneResult


@dataclass(frozen=True)
class Args:
    profile: str | None = opt(None, help="the profile to tune (its model, vLLM, host settings)")
    host: str | None = opt("--host", help="the host (inventory name) to measure on", required=True)
    k: str | None = opt("--k", "1,2,4,8", help="num_speculative_tokens to try, e.g. 1,2,4,8",
                        check=checked_by("bot.app.tuning.tune", "parse_ks"))
    methods: str | None = opt("--methods", "dflash,mtp,none", check=checked_by("bot.app.tuning.tune", "parse_methods"),
                              help="methods to try (no speculation, k=0, is measured too unless --no-k0)")
    concurrency: str | None = opt("--concurrency", "1,8", help="concurrent requests to measure at, e.g. 1,8",
                                  check=checked_by("bot.app.tuning.tune", "parse_concurrency"))
    requests: int = opt("--requests", 4, help="completions per setting and concurrency", low=1, high=1000)
    prompts: Path | None = opt("--prompts", help="the probe workload (YAML; default: the shipped set)", cli_only=True)
    keep_best: bool = opt("--keep-best", False, help="leave the best setting serving")
    current: bool = opt("--current/--no-current", True,
                        help="measure the profile's own k too (the gain over it is measured)")
    k0: bool = opt("--k0/--no-k0", True, help="measure no speculation (k=0: the profile served without a "
                   "speculative config) in the same sweep")
    chart: Path | None = opt("--chart", help="write tok/s vs k (PNG)", cli_only=True)
    dry_run: bool = _host.dry_run("print the settings it would measure; deploy nothing")


def run(call: Call, args: Args) -> TunePlan | TuneResult:
    """The plan (--dry-run: what it would measure, and what it skips and why), else the sweep."""
    from bot.app.tuning import tune as tuning
    from bot.app.tuning import workload

    if args.host is None or args.profile is None:
        raise InputError("`tune` needs a profile and a host")
    svc = call.graph
    req = tuning.TuneRequest(
        svc.config, args.host, args.profile, owner=call.owner, progress=call.progress, cancel=call.cancel,
        store=svc.store, hosts=svc.hosts, ks=tuning.parse_ks(str(args.k)),
        methods=tuning.parse_methods(str(args.methods)),
        concurrency=tuning.parse_concurrency(str(args.concurrency)),
        requests=tuning.check_requests(args.requests),
        workload=workload.load_prompts(args.prompts), keep_best=args.keep_best, include_current=args.current,
        include_none=args.k0)
    plan = tuning.plan(req)
    if args.dry_run:
        return plan
    for s in plan.skipped:
        call.note(f"skipping {s.method}" + (f" k={s.k}" if s.k else "") + f": {s.reason}")
    return tuning.tune(req)


def _exit(result: TunePlan | TuneResult, _args: Args) -> Exit:
    from bot.core.results.tune import TuneResult

    if not isinstance(result, TuneResult):
        return Exit()
    if result.cancelled:
        return Exit(130)
    restore_failed = result.restored is not None and result.restored.status == "failed"
    return Exit(1 if result.recommended is None or restore_failed else 0)


VERB: Verb[Args, TunePlan | TuneResult] = Verb(
    name="tune",
    summary="deploy each setting (no speculation, then method × k: 1, 2, 4, 8; dflash, mtp), measure tok/s, "
            "acceptance and time to first token, recommend the best (and a k per load), then restore what was "
            "serving (shows the plan; you confirm); options `--k 1,2,4`, `--methods dflash,none`, "
            "`--concurrency 1,8`, `--requests N`, `--keep-best`, `--no-current`, `--no-k0`",
    chat=("profile", "host"), args=Args, run=run, exit=_exit, access="change", cancellable=True,
    results=("bot.core.results.tune.TunePlan", "bot.core.results.tune.TuneResult"),
    on_interrupt="interrupted: finishing the current step, then restoring the previous deployment "
                 "(Ctrl-C again to leave at once)",
    cli_help="Measure the best speculative setting on the host: deploy no speculation (k=0) and each method x k, "
             "drive a fixed workload, measure tok/s (one request and under load), acceptance and time to first "
             "token; recommend one setting and a k per concurrency; then restore what was serving (or keep the "
             "best). Ctrl-C restores too.",
)
