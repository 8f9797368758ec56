"""`check PROFILE [HOST]`: before launch, the drafter, the target and the release checked against each other, and
the known failures this deploy would meet."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, Exit, Verb, opt
from bot.errors import InputError

if TYPE_CHECKING:
    from bot.core.results.prelaunch import PrelaunchReport


@dataclass(frozen=True)
class Args:
    profile: str | None = opt(None, help="the profile to check", required=True, metavar="PROFILE")
    host: str | None = _host.host()


def run(call: Call, args: Args) -> PrelaunchReport:
    from bot.app.operations.prelaunch import prelaunch

    if args.profile is None or args.host is None:
        raise InputError("`check` needs a profile and a host")
    call.config.profile(args.profile)  # an unknown profile is bad input (exit 2), not a check that failed
    return prelaunch(call.config, args.profile, args.host, hosts=call.graph.hosts)


def _exit(result: PrelaunchReport, _args: Args) -> Exit:
    refused = result.refused
    if refused:
        return Exit(1, f"refused: {refused[0].title}")
    unread = [c for c in result.checks if c.verdict == "unknown"]
    # a check that could not read its inputs did not pass: say which, and do not exit 0
    return Exit(1 if unread else 0, f"could not check: {unread[0].title}" if unread else "")


VERB: Verb[Args, PrelaunchReport] = Verb(
    name="check", summary="before launch: the drafter, the target and the vLLM release checked against each other",
    chat=("profile", "host"), args=Args, run=run, exit=_exit, results=("bot.core.results.prelaunch.PrelaunchReport",),
    cli_help="Check a profile before launch, from what the host already has (nothing is downloaded): the method "
             "and its fields in the host's vLLM release, the drafter against the target (vocabulary, hidden size, "
             "target_layer_ids, rope, context), the known failures whose release range and drafter facts this "
             "deploy meets, and the VLLM_ variables the release reads. Exit 0: every check passed or warned; 1: a "
             "refusal, or a check that could not read its inputs; 2: bad input.",
)
