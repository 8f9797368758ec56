"""`rollout PROFILE HOSTS|GROUP`: roll a profile over hosts batch by batch (the canary first), each host gated on
the acceptance and tok/s it measures against what it served before; a failed gate restores the batch and stops.
`--resume` / `--abort` act on a rollout whose process died."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bot.app.verbs.spec import Call, ChatArgs, Exit, Opt, Verb
from bot.errors import InputError

if TYPE_CHECKING:
    from bot.app.rollout import RolloutRequest
    from bot.store.rollouts import RolloutRecord


def _request(call: Call, profile: str, hosts: list[str], **how: object) -> RolloutRequest:
    from bot.app import rollout as ro

    svc = call.graph
    return ro.RolloutRequest(svc.config, profile, hosts, owner=call.owner, progress=call.progress,
                             cancel=call.cancel, store=svc.store, pool=svc.hosts, **how)  # type: ignore[arg-type]


def _check_gate(text: str) -> object:
    from bot.core.gate import parse_gate

    return parse_gate(text)


def _check_soak(text: str) -> object:
    from bot.app.rollout import parse_duration

    return parse_duration(text)


def _check_concurrency(text: str) -> object:
    from bot.app.tune import parse_concurrency

    return parse_concurrency(text)


def run(call: Call, args: ChatArgs) -> object:
    """From chat: over the named hosts or group, with the gate, canary, batch, soak, concurrency and requests
    given (`--soak 90s`, `--gate "bugs == 0 and tps_ratio >= 0.9"`; else the command line's defaults); its plan
    is the dry run."""
    from bot.app import rollout as ro

    if args.profile is None or not args.selector:
        raise InputError("`rollout` needs a profile and hosts or a group: `rollout PROFILE GROUP`")
    how = _how({opt.name: args.option(opt.name, opt.default) for opt in VERB.cli_options if opt.name in _HOW})
    req = _request(call, args.profile, call.config.select_hosts(args.selector), **how)
    return ro.plan(req) if args.dry_run else ro.rollout(req)


_HOW = ("canary", "batch", "gate", "soak", "concurrency", "requests", "prompts", "force")  # what `_how` reads


def _how(o: dict[str, object]) -> dict[str, object]:
    from bot.app import rollout as ro
    from bot.app.tune import parse_concurrency
    from bot.app.workload import load_prompts
    from bot.core.gate import DEFAULT_GATE, parse_gate

    prompts = o.get("prompts")
    return {"canary": int(str(o["canary"])), "batch": int(str(o["batch"])),
            "gate": parse_gate(str(o["gate"] or DEFAULT_GATE)), "soak": ro.parse_duration(str(o["soak"])),
            "concurrency": parse_concurrency(str(o["concurrency"])), "requests": int(str(o["requests"])),
            "workload": load_prompts(Path(str(prompts)) if prompts else None), "force": bool(o.get("force"))}


def cli(call: Call, o: dict[str, object]) -> tuple[object, Exit]:
    from bot.app import rollout as ro

    how = _how(o)  # a gate that does not parse, a bad duration: said before anything runs
    if o["resume"] or o["abort"]:
        if o["resume"] and o["abort"]:
            raise InputError("--resume or --abort, not both")

        def req_for(record: RolloutRecord) -> RolloutRequest:
            from bot.core.gate import parse_gate

            plan = record.plan
            return _request(call, record.profile, [h for b in plan["batches"] for h in b],
                            **{**how, "gate": parse_gate(str(plan["gate"])), "canary": int(plan["canary"]),
                               "batch": int(plan["batch"]), "soak": float(plan["soak_s"]),
                               "concurrency": tuple(plan["concurrency"]), "requests": int(plan["requests"])})

        rollout_id = str(o["id"]) if o["id"] else None
        if o["dry_run"]:  # what it would do, and nothing done
            return ro.preview(req_for, call.graph.store, rollout_id, "resume" if o["resume"] else "abort"), Exit(0)
        act = ro.resume if o["resume"] else ro.abort
        result = act(req_for, call.graph.store, rollout_id)
    else:
        profile = str(o["profile"] or "")
        if not profile:
            raise InputError("rollout needs a profile (or --resume / --abort)")
        if bool(o["hosts"]) == bool(o["group"]):
            raise InputError("name the hosts with --hosts H1,H2 or a group with --group G (one of the two)")
        hosts = call.config.select_hosts(str(o["hosts"] or o["group"]))
        req = _request(call, profile, hosts, **how)
        if o["dry_run"]:
            return ro.plan(req), Exit(0)
        result = ro.rollout(req)
    if result.state in ("cancelled", "interrupted") or call.cancel.is_set():
        return result, Exit(130)
    return result, Exit(0 if result.state in ("passed", "aborted") and result.verdict != "failing" else 1)


VERB = Verb(
    name="rollout", usage="rollout PROFILE HOSTS|GROUP [--dry-run]",
    # the options are in the help line, not the usage: the Slack manifests' usage_hint repeats every usage
    summary="roll a profile over hosts, the canary first, each host gated on acceptance and tok/s against what "
            "it served before; a failed gate restores the batch and stops (shows the plan; you confirm); "
            "options `--canary N`, `--batch N`, `--soak 90s`, `--concurrency 1,8`, `--requests N`, "
            "`--gate \"bugs == 0 and tps_ratio >= 0.95\"` (in quotes)",
    chat=("profile", "targets"), run=run, access="change", cancellable=True, result="RolloutResult",
    # --prompts names a file on the bot's machine: the CLI's only (a gate with spaces is quoted in chat)
    chat_options=("canary", "batch", "gate", "soak", "concurrency", "requests", "force"),
    on_interrupt="interrupted: finishing the current step, then restoring every host the rollout changed "
                 "(Ctrl-C again to leave at once)",
    cli_help="Roll PROFILE over hosts batch by batch (the canary first). On each host: measure what it serves on the "
             "shipped workload, deploy, drive the workload for the soak time, triage, and gate (default: no bug "
             "finding, tok/s >= 0.95x and mean acceptance >= 0.9x before). A failed gate restores the batch and "
             "stops; Ctrl-C restores every host changed. --resume / --abort act on a rollout whose process died.",
    cli_options=(
        Opt("profile", None, default="", help="the profile to roll out (omit with --resume / --abort)"),
        Opt("hosts", "--hosts", help="hosts of the inventory, comma-separated (or groups)"),
        Opt("group", "--group", help="a group of the inventory (config: groups)"),
        Opt("canary", "--canary", "int", 1, help="hosts in the first batch", low=1, high=64),
        Opt("batch", "--batch", "int", 1, help="hosts per batch after the canary", low=1, high=64),
        Opt("gate", "--gate", default=None, help="the gate, e.g. 'bugs == 0 and tps_ratio >= 0.95 and "
                                                 "acceptance_ratio >= 0.9' (the default)", check=_check_gate),
        Opt("soak", "--soak", default="5m", help="how long to drive the workload on each new setting (90s, 5m)",
            check=_check_soak),
        Opt("concurrency", "--concurrency", default="1,8", help="concurrent requests to measure at",
            check=_check_concurrency),
        Opt("requests", "--requests", "int", 4, help="completions per concurrency and round", low=1, high=1000),
        Opt("prompts", "--prompts", "path", help="the workload (YAML; default: the shipped set tune uses)"),
        Opt("force", "--force", "bool", False, help="deploy on each host although a check before launch refuses "
            "it (written to each deploy's report)"),
        Opt("resume", "--resume", "bool", False, help="carry on the rollout whose process died"),
        Opt("abort", "--abort", "bool", False, help="restore every host the dead rollout changed"),
        Opt("id", "--id", help="which rollout --resume / --abort act on (default: the latest stopped one)"),
        Opt("dry_run", "--dry-run", "bool", False, help="print the batches and the gate (with --resume / --abort: what "
            "each host would get); run nothing"),
        Opt("chart", "--chart", "path", help="write before/after per host (PNG)"),
    ),
    cli=cli,
)
