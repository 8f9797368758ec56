"""`tune PROFILE [HOST]`: deploy each setting (method x k), measure tok/s, acceptance and time to first
token on a fixed workload, recommend the best, then restore what was serving."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.app.verbs.spec import Call, ChatArgs, Exit, Opt, Verb
from bot.errors import InputError

if TYPE_CHECKING:
    from bot.app.tune import TuneRequest


def _request(call: Call, host: str, profile: str, **sweep: Any) -> TuneRequest:
    from bot.app import tune as tuning

    svc = call.graph
    return tuning.TuneRequest(svc.config, host, profile, owner=call.owner, progress=call.progress,
                              cancel=call.cancel, store=svc.store, hosts=svc.hosts, **sweep)


def run(call: Call, args: ChatArgs) -> object:
    """From chat: the default sweep; its plan is the dry run."""
    from bot.app import tune as tuning

    if args.host is None or args.profile is None:
        raise InputError("`tune` needs a profile and a host")
    req = _request(call, args.host, args.profile)
    return tuning.plan(req) if args.dry_run else tuning.tune(req)


def cli(call: Call, o: dict[str, object]) -> tuple[object, Exit]:
    from bot.app import tune as tuning
    from bot.app import workload

    prompts = o.get("prompts")
    req = _request(call, str(o["host"]), str(o["profile"]), ks=tuning.parse_ks(str(o["k"])),
                   methods=tuning.parse_methods(str(o["methods"])),
                   concurrency=tuning.parse_concurrency(str(o["concurrency"])),
                   requests=tuning.check_requests(int(str(o["requests"]))),
                   workload=workload.load_prompts(Path(str(prompts)) if prompts else None),
                   keep_best=bool(o["keep_best"]), include_current=bool(o["current"]),
                   include_none=bool(o["k0"]))
    for s in tuning.plan(req).skipped:
        call.note(f"skipping {s.method}" + (f" k={s.k}" if s.k else "") + f": {s.reason}")
    result = tuning.tune(req)
    if result.cancelled or call.cancel.is_set():
        return result, Exit(130)
    restore_failed = result.restored is not None and result.restored.status == "failed"
    return result, Exit(1 if result.recommended is None or restore_failed else 0)


VERB = Verb(
    name="tune", usage="tune PROFILE [HOST]",
    summary="deploy each setting (no speculation, then method × k: 1, 2, 4, 8; dflash, mtp), measure tok/s, "
            "acceptance and time to first token, recommend the best (and a k per load), then restore what was "
            "serving (shows the plan; you confirm)",
    chat=("profile", "host"), run=run, access="change", cancellable=True, result="TuneResult",
    on_interrupt="interrupted: finishing the current step, then restoring the previous deployment "
                 "(Ctrl-C again to leave at once)",
    cli_help="Measure the best speculative setting on the host: deploy no speculation (k=0) and each method x k, "
             "drive a fixed workload, measure tok/s (one request and under load), acceptance and time to first "
             "token; recommend one setting and a k per concurrency; then restore what was serving (or keep the "
             "best). Ctrl-C restores too.",
    cli_options=(
        Opt("profile", None, help="the profile to tune (its model, vLLM, host settings)"),
        Opt("host", "--host", help="the host (inventory name) to measure on", required=True),
        Opt("k", "--k", default="1,2,4,8", help="num_speculative_tokens to try, e.g. 1,2,4,8"),
        Opt("methods", "--methods", default="dflash,mtp,none",
            help="methods to try (no speculation, k=0, is measured too unless --no-k0)"),
        Opt("concurrency", "--concurrency", default="1,8", help="concurrent requests to measure at, e.g. 1,8"),
        Opt("requests", "--requests", "int", 4, help="completions per setting and concurrency"),
        Opt("prompts", "--prompts", "path", help="the probe workload (YAML; default: the shipped set)"),
        Opt("keep_best", "--keep-best", "bool", False, help="leave the best setting serving"),
        Opt("current", "--current/--no-current", "bool", True,
            help="measure the profile's own k too (the gain over it is measured)"),
        Opt("k0", "--k0/--no-k0", "bool", True,
            help="measure no speculation (k=0: the profile served without a speculative config) in the same sweep"),
        Opt("chart", "--chart", "path", help="write tok/s vs k (PNG)"),
    ),
    cli=cli,
)
