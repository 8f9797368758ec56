"""What triage concludes: findings with evidence, upstream references and remediation."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from bot.core.upstream import Upstream

Severity = Literal["critical", "warning", "info"]
Confidence = Literal["high", "medium", "low"]
SEVERITY_RANK: dict[str, int] = {"critical": 0, "warning": 1, "info": 2}
CONFIDENCE_RANK: dict[str, int] = {"high": 0, "medium": 1, "low": 2}


# kinds of remedy, for machines: upgrade vLLM, pin an earlier release (a regression), fewer speculative tokens, run
# without a plugin, another checkpoint (or its files fixed), another request, a change to the user's own program
Advice = Literal["upgrade", "pin", "lower-k", "disable-plugin", "checkpoint", "request", "fix-script"]
ADVICE_KINDS: frozenset[str] = frozenset(get_args(Advice))


class SiteRef(BaseModel):
    """Where in vLLM's (or a library's) released source a line was printed or raised (the message atlas)."""

    model_config = ConfigDict(defer_build=True)

    package: str
    file: str
    function: str
    line: int
    release: str  # the release whose line is linked: the user's, or the nearest one that has the site
    url: str
    first: str  # the release range that has the site
    last: str
    condition: str | None = None  # the guarding `if`, as source text
    compare_url: str | None = None  # the user's release against the first one that no longer prints it


class Finding(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str
    title: str
    severity: Severity
    confidence: Confidence
    summary: str = ""
    evidence: list[str] = Field(default_factory=list)
    upstream: list[Upstream] = Field(default_factory=list)
    remediation: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)  # the public threads the facts come from
    is_bug: bool = False  # an upstream or deployment defect, as opposed to tuning or information
    priority: int = 50  # ties within severity and confidence: lower first
    part: str | None = None  # the part of vLLM that raised it (drafter, attention, kv-cache, …), when known
    knobs: list[str] = Field(default_factory=list)  # CLI flags the fix turns ("--max-model-len")
    advice: list[Advice] = Field(default_factory=list)  # kinds of remedy the finding advises, for machines
    site: SiteRef | None = None
    # who owns the code that failed (bot/core/owners.py): vllm, plugin, torch, nccl, cuda-runtime, driver, loader, …
    owner: str | None = None
    inputs: list[str] = Field(default_factory=list)  # the inputs that failed, named: a flag, an env var, a key, "gpu"
    deps: list[str] = Field(default_factory=list)  # packages whose installed version the fix changes
    host: list[str] = Field(default_factory=list)  # host or container changes the fix asks for (driver, shm, p2p, …)
    # where in the log the finding rests (the latest line's position, as evidence.position gives it) and that line's
    # level: what the verdict's time and context rules read; not part of the report's JSON
    at: int | None = Field(default=None, exclude=True)
    level: str | None = Field(default=None, exclude=True)
    # "turn the part off to prove it": the switch for the part the failure lies in, on the user's release (the plan's
    # first step when this finding leads)
    switch: str | None = Field(default=None, exclude=True)
    # a catch-all entry's ("the engine crashed"): it says that something failed, never which part
    catch_all: bool = Field(default=False, exclude=True)
    # a wait the log shows (a placement group never created): past once the log shows startup or serving after it
    waits: bool = Field(default=False, exclude=True)
    # a request refused (an access line): a note where the log shows other requests answered
    per_request: bool = Field(default=False, exclude=True)
    # printed only once the engine is up (a KB entry's `after_start`): not a notice of the start
    after_start: bool = Field(default=False, exclude=True)
    # positions of the log's problem lines this finding accounts for (a harmless traceback's lines, all of them)
    covers: list[int] = Field(default_factory=list, exclude=True)
    # the fix is the release of the code that calls vLLM (it imports or reads what this vLLM lacks): the frames'
    # library-boundary advice does not apply
    callers_release: bool = Field(default=False, exclude=True)
    # a state of the whole engine that a setting chose (it fell back for a flag): current whether or not it served
    standing: bool = Field(default=False, exclude=True)

    def rank_key(self) -> tuple[int, int, int]:
        return (SEVERITY_RANK[self.severity], CONFIDENCE_RANK[self.confidence], self.priority)


Status = Literal["fits", "possible", "ruled-out", "not-applicable"]
STATUS_RANK: dict[str, int] = {"fits": 0, "possible": 1, "ruled-out": 2, "not-applicable": 3}


class Considered(BaseModel):
    """One hypothesis of the differential diagnosis and what the evidence said of it."""

    model_config = ConfigDict(defer_build=True)

    id: str
    title: str
    status: Status
    why: str
    upstream: list[Upstream] = Field(default_factory=list)
