"""`check PROFILE [HOST]`: before launch, the drafter, the target and the release checked against each other, and
the known failures this deploy would meet."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.app.verbs.spec import Call, ChatArgs, Exit, Opt, Verb
from bot.errors import InputError

if TYPE_CHECKING:
    from bot.core.results.prelaunch import PrelaunchReport


def run(call: Call, args: ChatArgs) -> PrelaunchReport:
    from bot.app.prelaunch import prelaunch

    if args.profile is None or args.host is None:
        raise InputError("`check` needs a profile and a host")
    return prelaunch(call.config, args.profile, args.host, hosts=call.graph.hosts)


def cli(call: Call, o: dict[str, object]) -> tuple[PrelaunchReport, Exit]:
    from bot.app.prelaunch import prelaunch

    profile = str(o["profile"])
    call.config.profile(profile)  # an unknown profile is bad input (exit 2), not a check that failed
    result = prelaunch(call.config, profile, str(o["host"]), hosts=call.graph.hosts)
    refused = result.refused
    if refused:
        return result, Exit(1, f"refused: {refused[0].title}")
    unread = [c for c in result.checks if c.verdict == "unknown"]
    # a check that could not read its inputs did not pass: say which, and do not exit 0
    return result, Exit(1 if unread else 0, f"could not check: {unread[0].title}" if unread else "")


VERB = Verb(
    name="check", usage="check PROFILE [HOST]",
    summary="before launch: the drafter, the target and the vLLM release checked against each other",
    chat=("profile", "host"), run=run, result="PrelaunchReport",
    cli_help="Check a profile before launch, from what the host already has (nothing is downloaded): the method "
             "and its fields in the host's vLLM release, the drafter against the target (vocabulary, hidden size, "
             "target_layer_ids, rope, context), the known failures whose release range and drafter facts this "
             "deploy meets, and the VLLM_ variables the release reads. Exit 0: every check passed or warned; 1: a "
             "refusal, or a check that could not read its inputs; 2: bad input.",
    cli_options=(Opt("profile", None, help="the profile to check", required=True, metavar="PROFILE"),
                 Opt("host", "--host", help="the host (inventory name) it would run on", required=True)),
    cli=cli,
)
