"""`fleet [SELECTOR] [--limit N] [--only-problems]`: every vLLM instance Prometheus scrapes, worst first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.app.diagnosis.flagcheck import fail_on, worse_than
from bot.app.prometheus.promql import selector_of
from bot.app.verbs.spec import Call, Exit, Verb, checked_by, opt

if TYPE_CHECKING:
    from bot.config import Config
    from bot.core.results.fleet import FleetReport


def _needs(config: Config) -> str | None:
    if config.prometheus is None:
        return "`fleet` reads Prometheus: add `prometheus: {url: …}` to the specops config"
    return None


# Slack takes 50 blocks a message: the header, the totals and "… and N more" leave 47 for instances. Chat lists
# the worst that fit; every instance is still judged and counted.
CHAT_LIMIT = 47


@dataclass(frozen=True)
class Args:
    prometheus: str | None = opt("--prometheus", help="the Prometheus URL (default: the config's prometheus.url)",
                                 cli_only=True)
    selector: str | None = opt("--selector", "", convert=selector_of,
                               help="label matchers, e.g. 'job=\"vllm\"' (added to the config's)")
    since: str | None = opt("--since", "1h", help="the window, e.g. 30m, 1h",
                            check=checked_by("bot.app.prometheus.promql", "parse_since"))
    fail_on: str | None = opt("--fail-on", "never", help="exit 1 when any instance is this or worse", cli_only=True,
                              check=fail_on)
    limit: int | None = opt("--limit", low=0, metavar="N",
                            help="list at most N instances, worst first (all are judged and counted)")
    only_problems: bool = opt("--only-problems", False,
                              help="list only the instances that are not healthy (all are judged and counted)")


def run(call: Call, args: Args) -> FleetReport:
    from bot.app.fleet import fleet, settings_for
    from bot.app.prometheus.promql import parse_since

    limit = args.limit
    if call.in_chat:
        limit = CHAT_LIMIT if limit is None else min(limit, CHAT_LIMIT)
    config = call.config_or_none
    store = call.services.existing_store() if call.services is not None else None
    return fleet(config, settings_for(config, args.prometheus), args.selector or "", parse_since(str(args.since)),
                 store=store, limit=limit, only_problems=args.only_problems)


def _exit(result: FleetReport, args: Args) -> Exit:
    # every instance counts, listed or not: --limit does not hide a failing one from --fail-on
    threshold = fail_on(args.fail_on)
    return Exit(1 if any(worse_than(verdict, threshold) for verdict in result.totals.by_verdict) else 0)


VERB: Verb[Args, FleetReport] = Verb(
    name="fleet",
    summary="every vLLM instance Prometheus scrapes, worst first (e.g. `fleet job=\"vllm\"`); `--limit N` lists at "
            "most N, `--only-problems` none that is healthy, `--since 30m` the window (all are judged and counted)",
    chat=("selector",), args=Args, run=run, exit=_exit, needs=_needs, config="optional",
    results=("bot.core.results.fleet.FleetReport",),
    cli_help="Every vLLM instance Prometheus scrapes, judged on its window: worst first, with the fleet's totals.",
)
