"""`rollout PROFILE HOSTS|GROUP`: roll a profile over hosts batch by batch (the canary first), each host gated on
the acceptance and tok/s it measures against what it served before; a failed gate restores the batch and stops.
`--resume` / `--abort` act on a rollout whose process died."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.app.verbs.spec import Call, Exit, Verb, checked_by, opt
from bot.errors import InputError

if TYPE_CHECKING:
    from bot.app.rollout import RolloutRequest
    from bot.core.results.rollout import RolloutPlan, RolloutResult
    from bot.store.rollouts import RolloutRecord


def _request(call: Call, profile: str, hosts: list[str], **how: object) -> RolloutRequest:
    from bot.app import rollout as ro

    svc = call.graph
    return ro.RolloutRequest(svc.config, profile, hosts, owner=call.owner, progress=call.progress,
                             cancel=call.cancel, store=svc.store, pool=svc.hosts, **how)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Args:
    profile: str | None = opt(None, "", help="the profile to roll out (omit with --resume / --abort)")
    hosts: str | None = opt("--hosts", help="hosts of the inventory, comma-separated (or groups)")
    group: str | None = opt("--group", help="a group of the inventory (config: groups)", cli_only=True)
    canary: int = opt("--canary", 1, help="hosts in the first batch", low=1, high=64)
    batch: int = opt("--batch", 1, help="hosts per batch after the canary", low=1, high=64)
    gate: str | None = opt("--gate", help="the gate, e.g. 'bugs == 0 and tps_ratio >= 0.95 and acceptance_ratio >= "
                           "0.9' (the default)", check=checked_by("bot.core.gate", "parse_gate"))
    soak: str | None = opt("--soak", "5m", help="how long to drive the workload on each new setting (90s, 5m)",
                           check=checked_by("bot.app.rollout", "parse_duration"))
    concurrency: str | None = opt("--concurrency", "1,8", help="concurrent requests to measure at",
                                  check=checked_by("bot.app.tuning.tune", "parse_concurrency"))
    requests: int = opt("--requests", 4, help="completions per concurrency and round", low=1, high=1000)
    # --prompts names a file on the bot's machine: the command line's only
    prompts: Path | None = opt("--prompts", help="the workload (YAML; default: the shipped set tune uses)",
                               cli_only=True)
    force: bool = opt("--force", False, help="deploy on each host although a check before launch refuses it "
                      "(written to each deploy's report)")
    resume: bool = opt("--resume", False, help="carry on the rollout whose process died", cli_only=True)
    abort: bool = opt("--abort", False, help="restore every host the dead rollout changed", cli_only=True)
    id: str | None = opt("--id", help="which rollout --resume / --abort act on (default: the latest stopped one)",
                         cli_only=True)
    dry_run: bool = opt("--dry-run", False, help="print the batches and the gate (with --resume / --abort: what each "
                        "host would get); run nothing")
    chart: Path | None = opt("--chart", help="write before/after per host (PNG)", cli_only=True)


def _how(args: Args) -> dict[str, object]:
    from bot.app import rollout as ro
    from bot.app.tuning.tune import parse_concurrency
    from bot.app.tuning.workload import load_prompts
    from bot.core.gate import DEFAULT_GATE, parse_gate

    return {"canary": args.canary, "batch": args.batch, "gate": parse_gate(args.gate or DEFAULT_GATE),
            "soak": ro.parse_duration(str(args.soak)), "concurrency": parse_concurrency(str(args.concurrency)),
            "requests": args.requests, "workload": load_prompts(args.prompts), "force": args.force}


def run(call: Call, args: Args) -> RolloutPlan | RolloutResult:
    """Over the named hosts or group, with the gate, canary, batch, soak, concurrency and requests given
    (`--soak 90s`, `--gate "bugs == 0 and tps_ratio >= 0.9"`); its plan is the dry run. `--resume` / `--abort`
    act on a rollout whose process died."""
    from bot.app import rollout as ro

    how = _how(args)  # a gate that does not parse, a bad duration: said before anything runs
    if args.resume or args.abort:
        if args.resume and args.abort:
            raise InputError("--resume or --abort, not both")

        def req_for(record: RolloutRecord) -> RolloutRequest:
            from bot.core.gate import parse_gate

            plan = record.plan
            return _request(call, record.profile, [h for b in plan["batches"] for h in b],
                            **{**how, "gate": parse_gate(str(plan["gate"])), "canary": int(plan["canary"]),
                               "batch": int(plan["batch"]), "soak": float(plan["soak_s"]),
                               "concurrency": tuple(plan["concurrency"]), "requests": int(plan["requests"])})

        if args.dry_run:  # what it would do, and nothing done
            return ro.preview(req_for, call.graph.store, args.id, "resume" if args.resume else "abort")
        act = ro.resume if args.resume else ro.abort
        return act(req_for, call.graph.store, args.id)
    if not args.profile:
        raise InputError("rollout needs a profile (or --resume / --abort): `rollout PROFILE HOSTS|GROUP`")
    if bool(args.hosts) == bool(args.group):
        raise InputError("name the hosts with --hosts H1,H2 or a group with --group G (one of the two)")
    req = _request(call, args.profile, call.config.select_hosts(str(args.hosts or args.group)), **how)
    return ro.plan(req) if args.dry_run else ro.rollout(req)


def _exit(result: RolloutPlan | RolloutResult, _args: Args) -> Exit:
    from bot.core.results.rollout import RolloutResult

    if not isinstance(result, RolloutResult):
        return Exit()
    if result.state in ("cancelled", "interrupted"):
        return Exit(130)
    return Exit(0 if result.state in ("passed", "aborted") and result.verdict != "failing" else 1)


VERB: Verb[Args, RolloutPlan | RolloutResult] = Verb(
    name="rollout",
    summary="roll a profile over hosts, the canary first, each host gated on acceptance and tok/s against what "
            "it served before; a failed gate restores the batch and stops (shows the plan; you confirm); "
            "options `--canary N`, `--batch N`, `--soak 90s`, `--concurrency 1,8`, `--requests N`, "
            "`--gate \"bugs == 0 and tps_ratio >= 0.95\"` (in quotes)",
    chat=("profile", "targets"), args=Args, run=run, exit=_exit, access="change", cancellable=True,
    results=("bot.core.results.rollout.RolloutPlan", "bot.core.results.rollout.RolloutResult"),
    on_interrupt="interrupted: finishing the current step, then restoring every host the rollout changed "
                 "(Ctrl-C again to leave at once)",
    cli_help="Roll PROFILE over hosts batch by batch (the canary first). On each host: measure what it serves on the "
             "shipped workload, deploy, drive the workload for the soak time, triage, and gate (default: no bug "
             "finding, tok/s >= 0.95x and mean acceptance >= 0.9x before). A failed gate restores the batch and "
             "stops; Ctrl-C restores every host changed. --resume / --abort act on a rollout whose process died.",
)
