"""`fleet [SELECTOR] [--limit N] [--only-problems]`: every vLLM instance Prometheus scrapes, worst first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.app.flagcheck import fail_on, worse_than
from bot.app.verbs.spec import Call, ChatArgs, Exit, Opt, Verb

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


def run(call: Call, args: ChatArgs) -> FleetReport:
    from bot.app.fleet import fleet, settings_for

    asked = args.option("limit")  # checked by the chat parser with the command line's bounds (0 or more)
    limit = CHAT_LIMIT if asked is None else min(int(str(asked)), CHAT_LIMIT)
    return fleet(call.config, settings_for(call.config, None), args.selector or "", 3600.0,
                 store=call.graph.existing_store(), limit=limit, only_problems=bool(args.option("only_problems")))


def cli(call: Call, o: dict[str, object]) -> tuple[FleetReport, Exit]:
    from bot.app.fleet import fleet, settings_for
    from bot.app.promql import parse_since

    threshold = fail_on(o["fail_on"])
    url = o.get("prometheus")
    settings = settings_for(call.config_or_none, str(url) if url else None)
    store = call.services.existing_store() if call.services is not None else None
    limit = o.get("limit")
    result = fleet(call.config_or_none, settings, str(o["selector"] or ""), parse_since(str(o["since"])), store=store,
                   limit=None if limit is None else int(str(limit)), only_problems=bool(o.get("only_problems")))
    # every instance counts, listed or not: --limit does not hide a failing one from --fail-on
    worst = any(worse_than(verdict, threshold) for verdict in result.totals.by_verdict)
    return result, Exit(1 if worst else 0)


VERB = Verb(
    # the options are in the help line, not the usage: the Slack manifests' usage_hint repeats every usage
    name="fleet", usage="fleet [SELECTOR]",
    summary="every vLLM instance Prometheus scrapes, worst first (e.g. `fleet job=\"vllm\"`); `--limit N` lists at "
            "most N, `--only-problems` none that is healthy (all are judged and counted)",
    chat=("selector",), chat_options=("limit", "only_problems"), run=run, needs=_needs, result="FleetReport",
    config="optional",
    cli_help="Every vLLM instance Prometheus scrapes, judged on its window: worst first, with the fleet's totals.",
    cli_options=(
        Opt("prometheus", "--prometheus", help="the Prometheus URL (default: the config's prometheus.url)"),
        Opt("selector", "--selector", default="", help="label matchers, e.g. 'job=\"vllm\"' (added to the config's)"),
        Opt("since", "--since", default="1h", help="the window, e.g. 30m, 1h"),
        Opt("fail_on", "--fail-on", default="never", help="exit 1 when any instance is this or worse"),
        Opt("limit", "--limit", type="int", low=0, metavar="N",
            help="list at most N instances, worst first (all are judged and counted)"),
        Opt("only_problems", "--only-problems", type="bool", default=False,
            help="list only the instances that are not healthy (all are judged and counted)"),
    ),
    cli=cli,
)
