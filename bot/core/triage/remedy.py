"""What a finding tells its reader to do, as a reader gathers it: the words, the kinds of advice, the flags and
variables, the packages, the host changes and the inputs at fault. Every reader that builds a finding piece by piece
(frames first, below vLLM, a refusal, the command line) fills one, then hands its lists to the Finding."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.core.triage.findings import Advice, Finding


@dataclass
class Remedy:
    remediation: list[str] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)
    knobs: list[str] = field(default_factory=list)
    deps: list[str] = field(default_factory=list)
    host: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)

    def add(self, lines: list[str], advice: Iterable[Advice] = ()) -> None:
        self.remediation += lines
        self.advice += [a for a in advice if a not in self.advice]


_NOT_A_DEFECT = re.compile(r"(?i)\bnot (?:yet )?(?:supported|allowed|compatible|valid|found|available)\b|"
                           r"\bunsupported\b|\binvalid\b|\bmust (?:be|not)\b|\bcannot be\b|\bshould (?:be|not)\b|"
                           r"\bonly supports?\b|\bexceeds?\b|\btoo (?:large|small|long|many|few)\b|root cause|"
                           r"see (?:the )?(?:above|stack ?trace|log)|failed to start|initiali[sz]ation failed|"
                           r"Failed core proc|died unexpectedly|worker failed|has errored|encountered a fatal error|"
                           r"hit an exception|out of memory|no module named|cannot import|insufficient|not enough|"
                           r"no space|out of space")


# code of vLLM's that is a client of a server, not the server (`vllm bench serve`)
CLIENT_FILES = ("vllm/benchmarks/",)
# where a benchmark client reads the server (its request functions, its wait for the endpoint, the model it asks the
# server for, its initial test run), by the site's function and its message's own words — never the values in them
_READS_THE_SERVER = re.compile(r"request_func|wait_for_endpoint|ready_check|get_first_model|\btest run\b|"
                               r"\brespon|status code|\bserver\b|\bconnect", re.IGNORECASE)


def benchmark_reads_server(f_file: str, function: str, template: str) -> bool | None:
    """For a site of vLLM's benchmark client: does it report what the server answered (True), or the benchmark's
    own refusal of its arguments or dataset (False)? None for any other site."""
    if not f_file.startswith(CLIENT_FILES):
        return None
    literal = re.sub(r"\{[^{}]*\}", " ", template)  # the message's words, not the values put into them
    return _READS_THE_SERVER.search(f"{f_file} {function} {literal}") is not None


def vllm_defect(f: Finding, newest: str | None) -> None:
    """A crash in vLLM's own code that names nothing the user set (no input, no setting, no package, no host change,
    no checkpoint, no request): what is left to change is the release — the upgrade, and the report if it stays."""
    if f.severity != "critical" or f.owner != "vllm" or f.inputs or f.deps or f.host:
        return
    if set(f.advice) & {"upgrade", "pin", "checkpoint", "request", "fix-script", "disable-plugin"}:
        return
    if any(not (f.switch and k in f.switch) for k in f.knobs):  # a setting besides the part's own switch
        return
    # (a critical finding there: the site's own words did not speak of the server, or it would be a warning)
    reads = benchmark_reads_server(f.site.file, f.site.function, "") if f.site is not None else None
    if reads is False:
        f.remediation.append("`vllm bench` refused its own arguments or dataset before measuring anything: change the "
                             "benchmark's command (the message names what), not the server.")
        f.advice.append("fix-script")
        return
    if reads:
        # vLLM's benchmark client saying what the server it measured answered: the server's log says why
        f.remediation.append("This is vLLM's benchmark client reporting the server's answer, not the server's own "
                             "failure: read the server's log for the crash or refusal behind it (`specops diagnose "
                             "--host <host>`), and check the benchmark's arguments against the server (its "
                             "`--backend`, endpoint, model name).")
        return
    said = " ".join([f.title, *f.evidence[:1]])
    if _NOT_A_DEFECT.search(said):
        # a refusal of something given (unsupported, invalid, must be) or a wrapper pointing at the root cause above
        return
    f.remediation.append("Nothing this names is yours to set: treat it as a defect of this vLLM release — upgrade "
                         f"to the newest ({newest or 'see the release notes'}) and search vLLM's issues for the "
                         "message; if it persists there, report it with this log, and pin the last release that "
                         "worked meanwhile.")
    f.advice.append("upgrade")
