"""`diagnose [HOST]`: one pass over a deployment — what is wrong, how sure, what to do. On the command line
it also reads a vLLM log and /metrics scrapes offline, or an instance from Prometheus.

(A log pasted in chat is its own path: app/chat.py hands it to app/pasted.py.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, ChatArgs, Exit, Opt, Verb

if TYPE_CHECKING:
    from bot.app.offline import DiagnoseOptions
    from bot.core.report import Report


def run(call: Call, args: ChatArgs) -> Report:
    from bot.app import ops

    return ops.diagnose_host(_host.request(call, args.host))


def cli(call: Call, o: dict[str, object]) -> tuple[Report, Exit]:
    from bot.app.offline import DiagnoseOptions, diagnose_files

    opts = DiagnoseOptions.of(o)
    if opts.prometheus is not None or opts.instance is not None:
        report = _from_prometheus(call, opts)
    elif opts.host is not None and opts.log is None and not opts.metrics:
        from bot.app import ops  # paramiko: only when a host is reached

        report = ops.diagnose_host(_host.request(call, opts.host, opts.profile, probe=opts.probe))
    else:
        report = diagnose_files(opts)
    return report, _host.report_exit(report, opts.fail_on)


def _from_prometheus(call: Call, opts: DiagnoseOptions) -> Report:
    from bot.app.fleet import diagnose_instance, settings_for
    from bot.app.promql import parse_since

    config = call.config_or_none
    settings = settings_for(config, opts.prometheus)
    store = call.services.existing_store() if call.services is not None else None
    return diagnose_instance(config, settings, str(opts.instance), parse_since(opts.since), store=store)


VERB = Verb(
    name="diagnose", usage="diagnose [HOST]",
    summary="one pass over the deployment: what is wrong, how sure, what to do",
    chat=("host",), run=run, config="optional",
    cli_help="Diagnose a host over SSH (--host), a vLLM log and/or /metrics scrape offline (--log, --metrics), or an "
             "instance from Prometheus (--prometheus URL --instance HOST:PORT).",
    cli_options=(
        Opt("log", "--log", "path", help="a vLLM server log (any size); - reads stdin"),
        Opt("metrics", "--metrics", "paths", help="a /metrics scrape; give two (or one file with two) for a window"),
        Opt("chart", "--chart", "path", help="write the per-position chart (PNG)"),
        Opt("all", "--all", "bool", False, help="scan the whole log, not the head and tail"),
        Opt("samples", "--samples", "int", 30, help="judge the last N samples", low=1, high=100_000),
        Opt("vllm_version", "--vllm-version", help="vLLM version on the host, e.g. 0.20.1"),
        Opt("method", "--method", help="dflash | mtp | eagle3 | ngram | draft_model"),
        Opt("target_model", "--target-model", help="the served (target) model"),
        Opt("drafter", "--drafter", help="the drafter, e.g. z-lab/Qwen3.6-27B-DFlash"),
        Opt("drafter_config", "--drafter-config", "path", help="the drafter's config.json"),
        Opt("num_speculative_tokens", "--num-speculative-tokens", "int", low=1, high=64),
        Opt("baseline_tps", "--baseline-tps", "float", low=0.0,
            help="the reference: tokens/s for one request of what the team served before (the brief's MTP: 73.5)"),
        Opt("host", "--host", help="a host to diagnose over SSH; with --log, the name used in advice"),
        Opt("profile", "--profile", help="with --host: the profile, if not the one recorded"),
        Opt("probe", "--probe/--no-probe", "bool", True, help="with --host: send a completion probe"),
        Opt("fail_on", "--fail-on", default="never",
            help="exit 1 when the verdict is this or worse: degraded | failing | never (for cron jobs)"),
        Opt("prometheus", "--prometheus",
            help="a Prometheus that scrapes the server (default: the config's prometheus.url), with --instance"),
        Opt("instance", "--instance",
            help="with --prometheus: the instance, HOST:PORT or a label selector like 'job=\"vllm\"'"),
        Opt("since", "--since", default="1h", help="with --prometheus: the window, e.g. 30m, 1h"),
    ),
    cli=cli,
)
