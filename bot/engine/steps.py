"""What each playbook step kind does on a host (and what it shows in a dry run)."""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable

import paramiko

from bot.core.failures import default_table
from bot.core.kb import load_kb
from bot.core.logparse import LineParser
from bot.core.logread import read_tail
from bot.core.report import StepResult
from bot.core.startup import StartupPhases, is_progress_bar, last_activity, waiting_line
from bot.core.startup import clock as startup_clock
from bot.core.startup import summary as phase_summary
from bot.engine.hostvars import as_host_vars
from bot.engine.playbook import (
    CollectStep,
    HttpStep,
    PlaybookError,
    PlaybookStep,
    ProbeStep,
    RunState,
    RunStep,
    StartStep,
    StepBase,
    StepKind,
    StepT,
    StopStep,
    UploadStep,
    WaitStep,
    render_template,
    render_value,
)
from bot.engine.preflight import CHECKS
from bot.remote.ssh import HostVanished, SSHError, SSHSession

# Starts argv in a new session with its PID written first: the values arrive as positional
# parameters ($1, $2, "$@"), never inside the script text, so nothing is re-parsed by the shell.
# The log is opened in append mode (after truncating it) so that anything else appending to it, and
# logrotate's copytruncate, never get overwritten at the server's own file offset.
START_SCRIPT = ('pf=$1; lf=$2; ef=$3; shift 3; echo $$ > "$pf"; : > "$lf"; '
                'if [ -n "$ef" ]; then set -a; . "$ef"; set +a; rm -f "$ef"; fi; '
                'exec "$@" >>"$lf" 2>&1 </dev/null')
# The server's environment travels in a file only its owner can read (0600, removed once read), so its
# values never show in the host's process list, in a plan or in a log of the command line.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def launch_failures() -> frozenset[str]:
    """The knowledge base's signatures that end a launch (one table: bot/core/failures.py)."""
    return default_table().fatal_ids


def _failure_title(kind: str) -> str:
    entry = load_kb().get(kind)
    return entry.title if entry else kind.replace("-", " ")


def _t(step: StepBase) -> float:
    """The step's timeout, already a number (resolve_numbers ran before the step)."""
    return float(step.timeout)


def _r(text: str, state: RunState) -> str:
    return render_value(text, state.variables, state.dry_run)


def _argv(argv: list[str], state: RunState) -> list[str]:
    return [_r(a, state) for a in argv]


def execute(step: PlaybookStep, index: int, session: SSHSession | None, state: RunState) -> StepResult:
    """Run one step (session None: a dry run, which plans it). A broken connection fails the step, never the
    run: the runner decides from the step's `on_fail` whether to go on."""
    try:
        result = HANDLERS[step.kind](step, index, session, state)
    except SSHError as exc:
        return StepResult(index, step.name, step.kind, "failed", message=str(exc))
    except (paramiko.SSHException, EOFError, OSError, ValueError) as exc:
        # a connection that broke in the middle of SFTP or a forward: the step failed, the run stops cleanly
        return StepResult(index, step.name, step.kind, "failed", message=f"{type(exc).__name__}: {exc}")
    return result


def _run(step: RunStep, i: int, session: SSHSession | None, state: RunState) -> StepResult:
    argv = _argv(step.argv, state)
    command = SSHSession.command_line(argv, _t(step))
    if session is None:
        return StepResult(i, step.name, "run", "planned", command=command)
    r = session.run(argv, timeout=_t(step))
    out = r.tail(15)
    if r.timed_out:
        return StepResult(i, step.name, "run", "failed", message=f"timed out after {_t(step):.0f} s",
                          output=out, command=command)
    if step.check:
        checked = CHECKS[step.check](r, as_host_vars(state.variables))
        if checked.shown is not None:
            out = checked.shown[:30]
        state.facts.update(checked.facts)
        state.variables.update(checked.facts)
        if step.save_as:
            state.variables[step.save_as] = checked.facts or r.out().strip()
        return StepResult(i, step.name, "run", "ok" if checked.ok else "failed", message=checked.message, output=out,
                          command=command)
    if r.exit_status not in step.expect_exit:
        message = (_r(step.fail_message, state) if step.fail_message else f"exit status {r.exit_status}")
        return StepResult(i, step.name, "run", "failed", message=message, output=out, command=command)
    if step.save_as:
        state.variables[step.save_as] = r.out().strip()
    return StepResult(i, step.name, "run", "changed" if step.changes else "ok", output=out, command=command)


def _upload(step: UploadStep, i: int, session: SSHSession | None, state: RunState) -> StepResult:
    dest = _r(step.dest, state)
    if step.template:
        content = render_template(step.template, state.variables, state.dry_run)
    elif step.content is not None:
        content = _r(step.content, state)
    else:
        raise PlaybookError(f"step {step.name!r}: upload needs a template or content")
    try:
        mode = int(step.mode, 8)
    except ValueError:
        raise PlaybookError(f"step {step.name!r}: mode {step.mode!r} is not octal") from None
    if session is None:
        preview = [f"--- {dest} (mode {step.mode})", *content.splitlines()]
        return StepResult(i, step.name, "upload", "planned", output=preview, command=f"upload {dest}")
    current = session.read_file(dest)
    if current == content.encode():
        return StepResult(i, step.name, "upload", "ok", message=f"{dest} unchanged")
    session.put(content.encode(), dest, mode)
    return StepResult(i, step.name, "upload", "changed", message=f"wrote {dest} ({len(content)} bytes)")


def _start(step: StartStep, i: int, session: SSHSession | None, state: RunState) -> StepResult:
    pid_file, log_file = _r(step.pid_file, state), _r(step.log_file, state)
    env = {k: _r(v, state) for k, v in step.env.items()}
    if step.env_from:
        extra = state.variables.get(step.env_from) or {}
        if not isinstance(extra, dict):
            raise PlaybookError(f"step {step.name!r}: env_from {step.env_from!r} is not a mapping")
        env.update({str(k): str(v) for k, v in extra.items()})
    bad = [k for k in env if not ENV_NAME.match(k)]
    if bad:
        raise PlaybookError(f"step {step.name!r}: not an environment variable name: {', '.join(sorted(bad))}")
    env_file = f"{pid_file}.env" if env else ""
    argv = ["setsid", "-f", "sh", "-c", START_SCRIPT, "specops-start", pid_file, log_file, env_file]
    argv += _argv(step.argv, state)
    command = SSHSession.command_line(argv, background=True)
    if env:
        command += f"   # environment from {env_file} (0600): {', '.join(sorted(env))}"
    if session is None:
        return StepResult(i, step.name, "start", "planned", command=command)
    session.run(["rm", "-f", pid_file], timeout=10)
    if env:
        body = "".join(f"{k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))
        session.put(body.encode(), env_file, 0o600)
    r = session.run(argv, timeout=_t(step), background=True)
    if r.exit_status != 0:
        return StepResult(i, step.name, "start", "failed", message=f"could not start (exit {r.exit_status})",
                          output=r.tail(), command=command)
    deadline = time.monotonic() + min(_t(step), 15.0)
    while time.monotonic() < deadline:
        raw = session.read_file(pid_file)
        if raw and raw.strip().isdigit():
            pid = int(raw.strip())
            state.variables["pid"] = pid
            state.facts["pid"] = pid
            return StepResult(i, step.name, "start", "changed", message=f"started, PID {pid}", command=command)
        time.sleep(0.1)
    return StepResult(i, step.name, "start", "failed", message=f"no PID in {pid_file} after start", command=command)


def process_matches(session: SSHSession, pid: int, marker: str) -> tuple[bool | None, str, int | None]:
    """(alive and ours? None if gone, its command line, its process group). A zombie is gone: it has exited and
    only waits for its parent to read its status; its command line reads empty, which is no sign of a reused
    PID (a stopped server was refused as "not the server specops started" until its parent reaped it)."""
    r = session.run(["cat", f"/proc/{pid}/cmdline", f"/proc/{pid}/stat"], timeout=10)
    if r.exit_status != 0:
        return None, "", None
    raw = r.stdout
    cmd_raw, _, stat = raw.rpartition(f"{pid} (".encode())
    cmdline = cmd_raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    pgid = None
    fields = stat.decode("utf-8", "replace").rsplit(")", 1)[-1].split()
    if fields and fields[0] in ("Z", "X"):
        return None, cmdline, None
    if len(fields) >= 3 and fields[2].isdigit():
        pgid = int(fields[2])
    return marker in cmdline, cmdline, pgid


def alive(session: SSHSession, pid: int) -> bool:
    """Running, and not a zombie waiting for its parent (a dead server that nobody reaped yet)."""
    r = session.run(["cat", f"/proc/{pid}/stat"], timeout=10)
    if r.exit_status != 0:
        return False
    fields = r.out().rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] not in ("Z", "X")


def _stop(step: StopStep, i: int, session: SSHSession | None, state: RunState) -> StepResult:
    pid_file, marker = _r(step.pid_file, state), _r(step.marker, state)
    if session is None:
        return StepResult(i, step.name, "stop", "planned",
                          command=f"read {pid_file}; check /proc/PID/cmdline contains {marker!r}; "
                                  f"kill -TERM -- -PGID; after {step.grace:.0f} s kill -KILL -- -PGID")
    raw = session.read_file(pid_file)
    if not raw or not raw.strip().isdigit():
        return StepResult(i, step.name, "stop", "ok", message="no server recorded: nothing to stop")
    pid = int(raw.strip())
    ours, cmdline, pgid = process_matches(session, pid, marker)
    if ours is None:
        session.run(["rm", "-f", pid_file], timeout=10)
        return StepResult(i, step.name, "stop", "ok", message=f"PID {pid} is not running (stale pid file removed)")
    if not ours:
        return StepResult(i, step.name, "stop", "failed",
                          message=f"PID {pid} is not the server specops started (its command line: "
                                  f"{cmdline[:160]!r}); not killed. The recorded PID was reused.")
    target = [f"-{pgid}"] if pgid == pid else [str(pid)]  # our own session: stop the whole group
    session.run(["kill", "-TERM", "--", *target], timeout=10)
    deadline = time.monotonic() + step.grace
    while time.monotonic() < deadline:
        if not alive(session, pid):
            break
        time.sleep(0.2)
    else:
        session.run(["kill", "-KILL", "--", *target], timeout=10)
        deadline = time.monotonic() + 10  # CUDA teardown can take a while even after SIGKILL
        while alive(session, pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if alive(session, pid):
            return StepResult(i, step.name, "stop", "failed", message=f"PID {pid} survived SIGKILL")
        session.run(["rm", "-f", pid_file], timeout=10)
        return StepResult(i, step.name, "stop", "changed", message=f"PID {pid} killed after {step.grace:.0f} s grace")
    session.run(["rm", "-f", pid_file], timeout=10)
    return StepResult(i, step.name, "stop", "changed", message=f"stopped PID {pid} (SIGTERM)")


def _feed_log(session: SSHSession, state: RunState, log_file: str, parser: LineParser, offset: int,
              line_no: int, partial: bytearray | None = None) -> tuple[int, int]:
    """The log's new whole lines into the parser and `state.log_bytes`; the partial last one (a progress bar
    redrawn with \\r) is read again next time, and copied into `partial` for a look at it meanwhile."""
    data, new_offset = session.read_from(log_file, offset, 4 << 20)
    if data and b"\n" not in data and len(data) >= 4 << 20:
        return new_offset, line_no  # one endless line is not vLLM output: skip it, do not re-read it forever
    state.log_bytes += data
    lines = data.split(b"\n")
    for line in lines[:-1] if not data.endswith(b"\n") else lines:
        if line:
            line_no += 1
            parser.feed(line, line_no)
    if partial is not None and data:
        partial[:] = b"" if data.endswith(b"\n") else lines[-1]
    if data and not data.endswith(b"\n"):
        new_offset -= len(lines[-1])  # re-read the partial last line next time
        del state.log_bytes[len(state.log_bytes) - len(lines[-1]):]
    return new_offset, line_no


class _Startup:
    """The phases of the starting server, from its log as the wait reads it, timed on the log's own clock:
    the host's clock now is the last stamp read plus the time since it was read (the two machines' clocks
    may differ; the stamps have a one-second grain either way)."""

    def __init__(self, state: RunState, began: float) -> None:
        self.phases = StartupPhases()
        self.history = state.startup_history
        self.began = began  # the wait began right after the server was started
        self._fed = len(state.log_bytes)
        self._seen: tuple[float, float] | None = None  # (last stamp, monotonic time it was read)

    def update(self, state: RunState, partial: bytes) -> None:
        new = bytes(state.log_bytes[self._fed:])
        self._fed = len(state.log_bytes)
        before = self.phases.last_stamp
        self.phases.feed(new.decode("utf-8", "replace"))
        if self.phases.last_stamp is not None and self.phases.last_stamp != before:
            if self._seen is None:  # the first lines: the server began before them, when the wait did
                self.phases.launched(self.phases.last_stamp - (time.monotonic() - self.began))
            self._seen = (self.phases.last_stamp, time.monotonic())
        if partial:
            self.phases.peek(partial.decode("utf-8", "replace"))

    def host_now(self) -> float | None:
        return None if self._seen is None else self._seen[0] + (time.monotonic() - self._seen[1])

    def done(self, waited: float) -> str:
        """What the ok line adds: the time to ready, each phase's, and the earlier starts' for comparison."""
        times = self.phases.times(self.host_now())
        shown = f" after {startup_clock(waited)}" + (f" ({phase_summary(times)})" if times else "")
        before = self.history.ready_seconds() if self.history is not None else None
        if before is not None and self.history is not None:
            shown += f"; ready after {startup_clock(before)} {self.history.source()}"
        return shown


def _waiting(waited: float, limit: float, state: RunState, startup: _Startup | None = None) -> str:
    """"waited 0:38 of up to 15:00 · now: loading weights 0:12 (after start 0:21) · weights took 41 s last
    time; expected ready in ~2 min": the phase vLLM is in, from its log, with the time of each phase so far
    and, after an earlier start of the profile here, what that one took — so a long start does not look
    frozen. Without a phase to name, the log's last message; a progress bar either way."""
    activity = last_activity(state.log_bytes[-65536:].decode("utf-8", "replace"))
    shown = f"waited {int(waited) // 60}:{int(waited) % 60:02d} of up to {int(limit) // 60}:{int(limit) % 60:02d}"
    phase = None
    if startup is not None:
        phase = waiting_line(startup.phases, startup.host_now(), startup.history, waited)
        if startup.phases.current() is not None and activity and not is_progress_bar(activity):
            activity = None  # the phase says it better than the last line of the log
    return shown + "".join(f" · {part}" for part in (phase, activity) if part)


def _wait(step: WaitStep, i: int, session: SSHSession | None, state: RunState) -> StepResult:
    port = int(_r(step.port, state)) if not state.dry_run else 0
    path = _r(step.path, state)
    log_file = _r(step.log_file, state) if step.log_file else None
    if session is None:
        return StepResult(i, step.name, "wait", "planned",
                          command=f"GET http://127.0.0.1:{_r(step.port, state)}{path} through an SSH forward every "
                                  f"{step.interval:g} s, up to {_t(step):.0f} s"
                                  + (f"; watch {log_file} for known failures" if log_file else ""))
    import httpx

    pid = state.variables.get("pid")
    parser = LineParser()
    offset, line_no = 0, 0
    began = time.monotonic()
    startup, partial = _Startup(state, began), bytearray()
    deadline = began + _t(step)
    with session.forward(port) as fwd, httpx.Client(base_url=fwd.url, timeout=3.0) as http:
        while True:
            state.check_cancel()
            if log_file:
                offset, line_no = _feed_log(session, state, log_file, parser, offset, line_no, partial)
                startup.update(state, bytes(partial))
                bad = [e for e in parser.result.events if e.kind in launch_failures()]
                if bad:
                    return StepResult(i, step.name, "wait", "failed",
                                      message=f"vLLM failed to start: {_failure_title(bad[0].kind)}",
                                      output=[e.origin.text for e in bad[:5]])
            try:
                resp = http.get(path)
                if resp.status_code == 200:
                    return _ready(step, i, state, startup, time.monotonic() - began, path)
            except httpx.HTTPError:
                pass
            if isinstance(pid, int) and not alive(session, pid):
                if log_file:
                    offset, line_no = _feed_log(session, state, log_file, parser, offset, line_no)
                tail = state.log_bytes.decode("utf-8", "replace").splitlines()[-15:]
                bad = [e for e in parser.result.events if e.kind in launch_failures()]
                reason = _failure_title(bad[0].kind) if bad else "see the log lines"
                return StepResult(i, step.name, "wait", "failed",
                                  message=f"the server (PID {pid}) exited before answering: {reason}", output=tail)
            if time.monotonic() > deadline:
                tail = state.log_bytes.decode("utf-8", "replace").splitlines()[-15:]
                return StepResult(i, step.name, "wait", "failed",
                                  message=f"{path} did not answer within {_t(step):.0f} s", output=tail)
            state.tick(_waiting(time.monotonic() - began, _t(step), state, startup))
            state.cancel.wait(step.interval)


def _ready(step: WaitStep, i: int, state: RunState, startup: _Startup, waited: float, path: str) -> StepResult:
    """/health answered: the phases' times (the log's lines up to now) for the ok line and, for the use case
    to keep for the next start of this profile, in `state.facts["startup"]`."""
    if step.log_file and startup.phases.spans:
        state.facts["startup"] = startup.phases.run(waited)
        return StepResult(i, step.name, "wait", "ok", message=f"{path} answered 200{startup.done(waited)}")
    return StepResult(i, step.name, "wait", "ok", message=f"{path} answered 200")


def _probe(step: ProbeStep, i: int, session: SSHSession | None, state: RunState) -> StepResult:
    port_text, model = _r(step.port, state), _r(step.model, state)
    max_tokens_text = _r(step.max_tokens, state)
    if session is None:
        return StepResult(i, step.name, "probe", "planned",
                          command=f"POST http://127.0.0.1:{port_text}/v1/completions model={model} "
                                  f"max_tokens={max_tokens_text} x{step.requests}")
    import httpx

    max_tokens = int(max_tokens_text)
    rates: list[float] = []
    if step.log_file:
        try:
            state.facts["probe_log_offset"] = session.sftp().stat(_r(step.log_file, state)).st_size or 0
        except OSError:
            state.facts["probe_log_offset"] = 0
    with session.forward(int(port_text)) as fwd, httpx.Client(base_url=fwd.url, timeout=_t(step)) as http:
        for _ in range(step.requests):
            state.check_cancel()
            t0 = time.monotonic()
            try:
                resp = http.post("/v1/completions", json={
                    "model": model, "prompt": _r(step.prompt, state), "max_tokens": max_tokens, "temperature": 0,
                    "ignore_eos": True})
            except httpx.HTTPError as exc:
                return StepResult(i, step.name, "probe", "failed", message=f"completion request failed: {exc}")
            elapsed = time.monotonic() - t0
            if resp.status_code != 200:
                return StepResult(i, step.name, "probe", "failed",
                                  message=f"completion answered {resp.status_code}", output=[resp.text[:500]])
            try:
                tokens = int(resp.json()["usage"]["completion_tokens"])
            except (ValueError, KeyError, TypeError):
                return StepResult(i, step.name, "probe", "failed", message="completion answer has no usage")
            rate = tokens / elapsed if elapsed > 0 else 0.0
            rates.append(rate)
    best = max(rates)
    state.facts["probe_tps"] = best
    return StepResult(i, step.name, "probe", "ok",
                      message=f"{len(rates)} completion(s); {best:.1f} tokens/s for one request")


def _collect(step: CollectStep, i: int, session: SSHSession | None, state: RunState) -> StepResult:
    log_file = _r(step.log_file, state) if step.log_file else None
    port_text = (_r(step.port, state) if step.port else None) or None
    if session is None:
        parts = []
        if log_file:
            parts.append(f"read the head of {log_file} and its tail back to a window of SpecDecoding samples "
                         f"(at most {step.tail_bytes >> 20} MB)")
        if port_text:
            parts.append(f"GET http://127.0.0.1:{port_text}/metrics through an SSH forward")
        return StepResult(i, step.name, "collect", "planned", command="; ".join(parts))
    notes: list[str] = []
    if log_file and float(step.wait_for_metrics) > 0 and "probe_log_offset" in state.facts:
        _wait_for_metrics_line(session, state, log_file, float(step.wait_for_metrics), notes)
    if log_file:
        try:
            with session.random_reader(log_file) as (size, read_at):
                read = read_tail(read_at, size, head_bytes=step.head_bytes, tail_bytes=step.tail_bytes)
        except SSHError as exc:
            if isinstance(exc, HostVanished):
                raise
            notes.append(f"{log_file} does not exist" if "No such file" in str(exc) else str(exc))
        else:
            state.parsed_log = read.parsed
            notes.append(f"log {size} bytes" + (f" ({read.notes[0]})" if read.notes else ""))
    if port_text:
        import httpx

        with session.forward(int(port_text)) as fwd, httpx.Client(base_url=fwd.url, timeout=10.0) as http:
            try:
                resp = http.get("/metrics")
                if resp.status_code == 200:
                    state.scrapes.append(resp.text)
                    notes.append(f"/metrics scrape {len(state.scrapes)}")
                else:
                    notes.append(f"/metrics answered {resp.status_code}")
            except httpx.HTTPError as exc:
                notes.append(f"/metrics unreachable: {type(exc).__name__}")
    return StepResult(i, step.name, "collect", "ok", message="; ".join(notes))


def _wait_for_metrics_line(session: SSHSession, state: RunState, log_file: str, limit: float,
                           notes: list[str]) -> None:
    """vLLM logs SpecDecoding every VLLM_LOG_STATS_INTERVAL s after traffic: wait for a line logged after
    the probe began (found from the log's size then, not from clocks that may differ)."""
    offset = int(state.facts.get("probe_log_offset", 0))
    parser = LineParser()
    scratch = RunState(variables={})
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        state.check_cancel()
        offset, _ = _feed_log(session, scratch, log_file, parser, offset, 0)
        if parser.result.samples:
            return
        state.cancel.wait(0.5)
    notes.append(f"no SpecDecoding line within {limit:.0f} s of the probe")


def _http(step: HttpStep, i: int, session: SSHSession | None, state: RunState) -> StepResult:
    port_text, path = _r(step.port, state), _r(step.path, state)
    if session is None:
        return StepResult(i, step.name, "http", "planned", command=f"GET http://127.0.0.1:{port_text}{path}")
    import httpx

    with session.forward(int(port_text)) as fwd, httpx.Client(base_url=fwd.url, timeout=_t(step)) as http:
        try:
            resp = http.get(path)
        except httpx.HTTPError as exc:
            if step.save_as:
                state.variables[step.save_as] = None
            return StepResult(i, step.name, "http", "failed", message=f"{path}: no answer ({type(exc).__name__})")
    if step.save_as:
        state.variables[step.save_as] = resp.status_code
    ok = resp.status_code == step.expect_status
    return StepResult(i, step.name, "http", "ok" if ok else "failed", message=f"{path} answered {resp.status_code}")


Handler = Callable[[PlaybookStep, int, SSHSession | None, RunState], StepResult]


def _handler(model: type[StepT], run: Callable[[StepT, int, SSHSession | None, RunState], StepResult]) -> Handler:
    """`run` as a handler of any step. mypy checks here, once per kind, that `run` takes `model`'s steps, so
    the table needs no cast. pydantic chose the model by the same `kind`, so the isinstance check fails only
    for a table entry that pairs a kind with another kind's model (a bug, raised as one)."""
    def handle(step: PlaybookStep, index: int, session: SSHSession | None, state: RunState) -> StepResult:
        if not isinstance(step, model):
            raise TypeError(f"step {step.name!r} of kind {step.kind!r} is not a {model.__name__}")
        return run(step, index, session, state)
    return handle


HANDLERS: dict[StepKind, Handler] = {
    "run": _handler(RunStep, _run),
    "upload": _handler(UploadStep, _upload),
    "start": _handler(StartStep, _start),
    "stop": _handler(StopStep, _stop),
    "wait": _handler(WaitStep, _wait),
    "probe": _handler(ProbeStep, _probe),
    "collect": _handler(CollectStep, _collect),
    "http": _handler(HttpStep, _http),
}
