"""Playbooks: YAML validated by pydantic, rendered with Jinja2 (StrictUndefined), run step by step.

A playbook is data; each step is one idempotent action with a timeout, a dry-run behaviour and a
result (ok / changed / failed / skipped) with its output tail. Values come from the inventory and
the profile, never from chat; every argv element is rendered on its own, so a value can never
become two arguments or shell syntax.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.core.logread import DEFAULT_TAIL_BYTES
from bot.core.parsed_log import ParsedLog
from bot.core.report import StepResult
from bot.core.startup import StartupHistory, StartupRun
from bot.errors import UserError
from bot.paths import playbooks_dir, templates_dir

if TYPE_CHECKING:
    import jinja2


class PlaybookError(UserError):
    """A playbook file that does not validate, or a step that does not render."""


class StepBase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    timeout: float | str = 60.0  # a number, or a template such as "{{ startup_timeout }}"
    when: str | None = None  # a Jinja expression; the step is skipped when it is false
    on_fail: Literal["stop", "continue"] = "stop"


class RunStep(StepBase):
    kind: Literal["run"]
    argv: list[str] = Field(min_length=1)
    expect_exit: list[int] = Field(default_factory=lambda: [0])
    check: str | None = None  # a named check in bot/preflight.py that reads the output
    save_as: str | None = None  # keep stdout (or the check's facts) for later steps
    fail_message: str | None = None
    changes: bool = False  # success means something changed on the host


class UploadStep(StepBase):
    kind: Literal["upload"]
    template: str | None = None  # a file in templates/
    content: str | None = None
    dest: str
    mode: str = "0644"


class StartStep(StepBase):
    kind: Literal["start"]
    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    env_from: str | None = None  # a variable holding more environment (the profile's `env`)
    pid_file: str
    log_file: str


class StopStep(StepBase):
    kind: Literal["stop"]
    pid_file: str
    marker: str  # the recorded PID's command line must contain this, or it is not our server
    grace: float = Field(20.0, gt=0)


class WaitStep(StepBase):
    kind: Literal["wait"]
    port: str
    path: str = "/health"
    log_file: str | None = None
    pid_file: str | None = None
    interval: float = Field(1.0, gt=0)


class ProbeStep(StepBase):
    kind: Literal["probe"]
    port: str
    model: str
    prompt: str = "Write a Python function that returns the n-th Fibonacci number, with a docstring."  # a template
    max_tokens: str = "64"
    requests: int = Field(1, ge=1, le=20)
    log_file: str | None = None  # its size before the probe tells `collect` which metrics lines are new


class CollectStep(StepBase):
    kind: Literal["collect"]
    port: str | None = None  # scrape /metrics through the forward
    log_file: str | None = None
    head_bytes: int = 256 * 1024
    tail_bytes: int = DEFAULT_TAIL_BYTES  # the bound; the read stops earlier on a window of samples
    wait_for_metrics: float | str = 0.0  # wait up to this long for a SpecDecoding line newer than the last probe


class HttpStep(StepBase):
    kind: Literal["http"]
    port: str
    path: str = "/health"
    expect_status: int = 200
    save_as: str | None = None


StepKind = Literal["run", "upload", "start", "stop", "wait", "probe", "collect", "http"]
PlaybookStep = RunStep | UploadStep | StartStep | StopStep | WaitStep | ProbeStep | CollectStep | HttpStep
Step = Annotated[PlaybookStep, Field(discriminator="kind")]
StepT = TypeVar("StepT", bound=StepBase)


class Playbook(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    steps: list[Step] = Field(min_length=1)


def _describe(loc: tuple[int | str, ...], data: Any) -> str:
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
        idx = loc[1]
        name = ""
        try:
            name = str(data["steps"][idx].get("name", ""))
        except (KeyError, IndexError, TypeError, AttributeError):
            pass
        rest = [str(x) for x in loc[2:] if x not in get_args(StepKind)]  # pydantic names the union's member
        return f"step {idx + 1}" + (f" ({name})" if name else "") + (f": {'.'.join(rest)}" if rest else "")
    return ".".join(str(x) for x in loc) or "(top level)"


def load_playbook(name_or_path: str | Path) -> Playbook:
    import yaml

    path = Path(name_or_path)
    if not path.suffix:
        path = playbooks_dir() / f"{name_or_path}.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlaybookError(f"cannot read playbook {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise PlaybookError(f"{path}: not valid YAML: {exc}") from None
    try:
        return Playbook.model_validate(data)
    except ValidationError as exc:
        lines = [f"{path}: {len(exc.errors())} problem(s):"]
        for err in exc.errors():
            lines.append(f"  {_describe(err['loc'], data)}: {err['msg']}")
        raise PlaybookError("\n".join(lines)) from None


# --- rendering ------------------------------------------------------------------------------------

_ENV_CACHE: dict[bool, jinja2.Environment] = {}


def jinja_env(dry_run: bool = False) -> jinja2.Environment:
    import jinja2

    if dry_run not in _ENV_CACHE:
        class DryUndefined(jinja2.Undefined):
            """In a dry run, values that earlier steps would find are shown as <name>."""

            def __str__(self) -> str:
                return f"<{self._undefined_name}>"

            def __getattr__(self, name: str) -> jinja2.Undefined:
                if name.startswith("__"):
                    raise AttributeError(name)
                return DryUndefined(name=f"{self._undefined_name}.{name}")

        undefined: type[jinja2.Undefined] = DryUndefined if dry_run else jinja2.StrictUndefined
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())), undefined=undefined,
                                 autoescape=False, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
        _ENV_CACHE[dry_run] = env
    return _ENV_CACHE[dry_run]


def render_value(text: str, variables: Mapping[str, object], dry_run: bool = False) -> str:
    import jinja2

    if "{" not in text:
        return text
    try:
        return str(jinja_env(dry_run).from_string(text).render(**variables))
    except jinja2.TemplateError as exc:
        raise PlaybookError(f"cannot render {text!r}: {exc}") from None


def evaluate(expr: str, variables: Mapping[str, object], dry_run: bool = False) -> object:
    import jinja2

    try:
        return jinja_env(dry_run).compile_expression(expr, undefined_to_none=False)(**variables)
    except jinja2.TemplateError as exc:
        raise PlaybookError(f"cannot evaluate {expr!r}: {exc}") from None


def render_template(name: str, variables: Mapping[str, object], dry_run: bool = False) -> str:
    import jinja2

    try:
        return str(jinja_env(dry_run).get_template(name).render(**variables))
    except jinja2.TemplateError as exc:
        raise PlaybookError(f"cannot render template {name}: {exc}") from None


# --- running --------------------------------------------------------------------------------------

@dataclass
class Progress:
    step: int
    total: int
    name: str
    status: str  # "running", or a final status
    elapsed: float
    message: str = ""

    def line(self) -> str:
        mins, secs = divmod(int(self.elapsed), 60)
        tail = f": {self.message}" if self.message else ""
        return f"step {self.step}/{self.total}: {self.name} — {self.status} ({mins:02d}:{secs:02d}){tail}"


ProgressFn = Callable[[Progress], None]


class Cancelled(Exception):
    pass


class Gpu(TypedDict):
    """One line of `nvidia-smi --query-gpu=index,name,memory.total,memory.free`."""

    index: int
    name: str
    total_mib: int
    free_mib: int


class Facts(TypedDict, total=False):
    """What steps found on the host, for the use case that reads the run afterwards. A key is absent until a
    step recorded it: a skipped or failed step leaves it out, and a dry run records none of the host's."""

    # by the named checks (preflight.py); also copied into the variables for later steps
    gpus: list[Gpu]
    vllm_version: str
    drafter_config: dict[str, object]  # the drafter's config.json with the profile's override applied
    doctor: list[str]  # ids of the doctor checks that failed
    # by the steps themselves
    pid: int  # start
    probe_log_offset: int  # probe: the log's size before the first request (collect waits for a newer line)
    probe_tps: float  # probe: the best single-request rate
    startup: StartupRun  # wait: the server's startup phases and the time until /health answered


# What templates see: the host's variables (hostvars.HostVars) and, added as the run goes, what steps
# register: a check's facts, `save_as`, the started PID. The names are the playbook's (`save_as: anything`),
# so no TypedDict can list them; `object` makes every reader narrow what it takes out. Typed reads of the
# host's own keys go through hostvars.as_host_vars.
RunVars = dict[str, object]


@dataclass
class RunState:
    """What a run carries from step to step: variables, collected evidence, results."""

    variables: RunVars
    dry_run: bool = False
    progress: ProgressFn | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    results: list[StepResult] = field(default_factory=list)
    log_bytes: bytearray = field(default_factory=bytearray)
    parsed_log: ParsedLog | None = None  # what a collect step read of the log (head and tail)
    scrapes: list[str] = field(default_factory=list)
    facts: Facts = field(default_factory=lambda: Facts())
    current: tuple[int, str, StepKind] | None = None  # (index, name, kind) of the step running now
    running: tuple[int, int, str, float] | None = None  # (step, total, name, run start) for tick()
    startup_history: StartupHistory | None = None  # earlier starts of this profile here: the wait's estimate

    def report(self, step: int, total: int, name: str, status: str, started: float, message: str = "") -> None:
        if status == "running":
            self.running = (step, total, name, started)
        if self.progress is not None:
            self.progress(Progress(step, total, name, status, time.monotonic() - started, message))

    def tick(self, message: str) -> None:
        """Progress inside a long step (a wait of minutes): the same step, still running, a new message."""
        if self.running is not None:
            step, total, name, started = self.running
            self.report(step, total, name, "running", started, message)

    def check_cancel(self) -> None:
        if self.cancel.is_set():
            raise Cancelled("cancelled")


@dataclass
class RunOutcome:
    playbook: str
    results: list[StepResult]
    state: RunState

    @property
    def failed(self) -> StepResult | None:
        return next((r for r in self.results if r.status == "failed"), None)


def _number(value: float | str, what: str, state: RunState) -> float:
    if isinstance(value, int | float):
        return float(value)
    text = render_value(value, state.variables, state.dry_run)
    try:
        return float(text)
    except ValueError:
        if state.dry_run:
            return 0.0
        raise PlaybookError(f"{what} {value!r} rendered to {text!r}, not a number") from None


def resolve_numbers(step: StepT, state: RunState) -> StepT:
    """Templated timeouts (and waits) become numbers once the variables are known."""
    update: dict[str, float] = {"timeout": _number(step.timeout, "timeout", state)}
    if isinstance(step, CollectStep):
        update["wait_for_metrics"] = _number(step.wait_for_metrics, "wait_for_metrics", state)
    return step.model_copy(update=update)
