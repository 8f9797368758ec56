"""The fake `vllm` as the ops tool sees it: a separate process, its log file, its HTTP port.

Every server is started with `python -m bot.sim.fake_vllm` and stopped by its PID in the fixture's
teardown. Waits poll a condition against a deadline; nothing sleeps for long.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import yaml

from bot.core.logparse import parse_text
from bot.core.parsed_log import ParsedLog, SpecDecodeSample
from bot.sim.ports import free_port
from bot.sim.vllm_acceptance import (
    MIXED_SWA_025,
    MIXED_SWA_026,
    DrafterFacts,
    acceptance_rates,
    dflash_rates,
    drafter_facts,
)
from bot.sim.vllm_engine import Engine
from bot.sim.vllm_serve_args import SpecConfig, parse_serve_args
from bot.sim.vllm_settings import parse_version
from bot.sim.vllm_tracebacks import StartupError

ROOT = Path(__file__).resolve().parents[2]
TARGET = "Qwen/Qwen3.6-27B"
ZLAB_DRAFTER = "z-lab/Qwen3.6-27B-DFlash"
DFLASH_15 = {"method": "dflash", "model": ZLAB_DRAFTER, "num_speculative_tokens": 15}
T = TypeVar("T")

# urllib would route 127.0.0.1 through a proxy named in the environment
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# --- helpers ------------------------------------------------------------------------------------

def sim_env(extra: dict[str, str] | None) -> dict[str, str]:
    """The caller's environment without any sim or vLLM knobs, plus fast test timings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECOPS_SIM_", "VLLM_"))}
    env.update({
        "SPECOPS_SIM_STARTUP_SECONDS": "0.2",
        "VLLM_LOG_STATS_INTERVAL": "0.5",
        "SPECOPS_SIM_MAX_REQUEST_SECONDS": "1.0",
    })
    env.update(extra or {})
    return env


@dataclass
class Sim:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def parsed(self) -> ParsedLog:
        return parse_text(self.log())

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Sim]]:
    started: list[subprocess.Popen[bytes]] = []
    numbers = itertools.count()

    def _launch(*argv: str, env: dict[str, str] | None = None, port: int | None = None,
                cmd: list[str] | None = None, cwd: Path = ROOT) -> Sim:
        port = free_port() if port is None else port
        args = list(argv) + (["--port", str(port)] if argv[:1] == ("serve",) else [])
        log_path = tmp_path / f"vllm-{next(numbers)}.log"
        with log_path.open("wb") as out:
            proc = subprocess.Popen(
                [*(cmd or [sys.executable, "-m", "bot.sim.fake_vllm"]), *args],
                cwd=cwd, env=sim_env(env), stdout=out, stderr=subprocess.STDOUT,
            )
        started.append(proc)
        return Sim(proc, port, log_path)

    yield _launch
    for proc in started:
        stop(proc)


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def http(url: str, body: object | None = None, raw: bytes | None = None) -> tuple[int, bytes]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"} if data else {})
    try:
        with OPENER.open(request, timeout=10) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()
    except OSError:
        return 0, b""  # not listening yet


def wait_exit(sim: Sim, timeout: float = 8.0) -> int:
    try:
        return sim.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after {timeout} s:\n{sim.log()}") from None


def wait_ready(sim: Sim) -> None:
    def healthy() -> bool:
        if sim.proc.poll() is not None:
            raise AssertionError(f"exited with {sim.proc.returncode}:\n{sim.log()}")
        return http(sim.url("/health"))[0] == 200

    wait_for(healthy, 8.0, "/health 200")


def complete(sim: Sim, max_tokens: int, chat: bool = False) -> dict[str, object]:
    if chat:
        path, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": "Write a poem."}]}
    else:
        path, body = "/v1/completions", {"prompt": "def fibonacci(n):"}
    status, payload = http(sim.url(path), {"model": TARGET, "max_tokens": max_tokens, **body})
    assert status == 200, payload
    result = json.loads(payload)
    assert isinstance(result, dict)
    return result


SERIES_RE = re.compile(r"^(?P<series>[\w:]+\{[^}]*\}) (?P<value>\S+)$", re.MULTILINE)


def scrape(sim: Sim) -> dict[str, float]:
    status, body = http(sim.url("/metrics"))
    assert status == 200
    return {m["series"]: float(m["value"]) for m in SERIES_RE.finditer(body.decode())}


def series(name: str, model: str = TARGET, **extra: str) -> str:
    labels = {"engine": "0", "model_name": model, **extra}
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def check_identities(sample: SpecDecodeSample) -> None:
    """vLLM's identities, recomputed from the integer counts the line carries."""
    k = len(sample.per_position)
    assert sample.drafted % k == 0
    drafts = sample.drafted // k
    assert f"{1 + sample.accepted / drafts:.2f}" == f"{sample.mean_acceptance_length:.2f}"
    per_position = [round(rate * drafts) for rate in sample.per_position]  # exact for < 1000 drafts
    assert [f"{n / drafts:.3f}" for n in per_position] == [f"{r:.3f}" for r in sample.per_position]
    assert sum(per_position) == sample.accepted
    assert all(a >= b for a, b in itertools.pairwise(sample.per_position))
    assert sample.avg_draft_acceptance_rate is not None
    assert f"{sample.accepted / sample.drafted * 100:.1f}" == f"{sample.avg_draft_acceptance_rate:.1f}"


def wait_logged(sim: Sim, k: int) -> list[SpecDecodeSample]:
    """The SpecDecoding samples, once they add up to every draft the counters hold."""
    def settled() -> list[SpecDecodeSample] | None:
        samples = sim.parsed().samples
        drafted = sum(s.drafted for s in samples)
        counter = scrape(sim)[series("vllm:spec_decode_num_draft_tokens_total")]
        assert drafted <= counter
        return samples if samples and drafted == counter and drafted % k == 0 else None

    return wait_for(settled, 5.0, "the SpecDecoding lines to catch up with /metrics")


def mean_of(samples: list[SpecDecodeSample]) -> float:
    k = len(samples[0].per_position)
    return 1 + sum(s.accepted for s in samples) / (sum(s.drafted for s in samples) / k)


def write_drafter(root: Path, name: str, layer_types: list[str], ids: list[int]) -> Path:
    path = root / name
    path.mkdir(parents=True)
    config = {"architectures": ["DFlashDraftModel"], "layer_types": layer_types,
              "dflash_config": {"mask_token_id": 248070, "target_layer_ids": ids}}
    (path / "config.json").write_text(json.dumps(config))
    return path


MIXED = ["sliding_attention"] * 4 + ["full_attention"]


# --- command line and startup failures ----------------------------------------------------------

def test_version(launch: Callable[..., Sim]) -> None:
    sim = launch("--version")
    assert wait_exit(sim) == 0
    assert sim.log() == "0.20.1\n"
    sim = launch("--version", env={"SPECOPS_SIM_VLLM_VERSION": "0.26.0"})
    assert wait_exit(sim) == 0
    assert sim.log() == "0.26.0\n"


def test_runs_as_a_plain_script_from_another_directory(launch: Callable[..., Sim], tmp_path: Path) -> None:
    # run as a plain script, isolated (no PYTHONPATH, no cwd): it needs no installed `bot`, its parts sit beside it
    script = str(ROOT / "bot" / "sim" / "fake_vllm.py")
    sim = launch("--version", cmd=[sys.executable, "-I", script], cwd=tmp_path)
    assert wait_exit(sim) == 0
    assert sim.log() == "0.20.1\n"


def test_mangled_speculative_config_exits_2_with_vllms_message(launch: Callable[..., Sim]) -> None:
    sim = launch("serve", TARGET, "--speculative-config", "{method:")
    assert wait_exit(sim) == 2
    text = sim.log()
    assert re.search(
        r"^vllm serve: error: argument --speculative-config/-sc: Value \{method: cannot be converted to "
        r"<function loads at 0x[0-9a-f]+>\.$", text, re.MULTILINE), text
    events = [e for e in parse_text(text).events if e.kind == "spec-config-json-split"]
    assert events and events[0].detail["value"] == "{method:"


def test_unknown_method_exits_1(launch: Callable[..., Sim]) -> None:
    sim = launch("serve", TARGET, "--speculative-config", '{"method": "dflash2", "num_speculative_tokens": 3}')
    assert wait_exit(sim) == 1
    text = sim.log()
    assert ("Input should be 'ngram', 'medusa', 'mlp_speculator', 'draft_model', 'suffix', 'eagle', 'eagle3', "
            "'mtp', 'dflash', 'ngram_gpu' or 'dspark' [type=literal_error, input_value='dflash2', input_type=str]"
            ) in text
    assert "Starting vLLM server" not in text
    assert "spec-method-unknown" in {e.kind for e in parse_text(text).events}


def test_dflash_before_0_20_is_an_unknown_method(launch: Callable[..., Sim]) -> None:
    sim = launch("serve", TARGET, "--speculative-config", json.dumps(DFLASH_15),
                 env={"SPECOPS_SIM_VLLM_VERSION": "0.19.1"})
    assert wait_exit(sim) == 1
    assert "input_value='dflash', input_type=str" in sim.log()


def test_dflash_without_drafter_exits_1(launch: Callable[..., Sim]) -> None:
    sim = launch("serve", TARGET, "--speculative-config", '{"method": "dflash", "num_speculative_tokens": 3}')
    assert wait_exit(sim) == 1
    lines = sim.log().splitlines()
    head = lines.index("pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig")
    assert any("Value error, num_speculative_tokens was provided but without speculative model." in line
               for line in lines[head + 1:])


def test_port_in_use_exits_1(launch: Callable[..., Sim]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        sim = launch("serve", TARGET, port=int(taken.getsockname()[1]))
        assert wait_exit(sim) == 1
    lines = sim.log().splitlines()
    assert "Traceback (most recent call last):" in lines
    assert lines[-1] == "OSError: [Errno 98] Address already in use"
    assert lines.index("Traceback (most recent call last):") < len(lines) - 1


# --- the DFlash failure modes -------------------------------------------------------------------

def test_0_20_1_zlab_drafter_shows_the_cliff(launch: Callable[..., Sim], tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(yaml.safe_dump({
        "port": 1,  # the command line's --port must win
        "tensor-parallel-size": 2,
        "max_num_batched_tokens": 32768,
        "attention-backend": "flash_attn",
        "speculative-config": DFLASH_15,
    }))
    sim = launch("serve", TARGET, "--config", str(config))
    wait_ready(sim)

    before = scrape(sim)  # the spec counters exist at 0 before the first request
    assert before[series("vllm:spec_decode_num_drafts_total")] == 0.0
    assert all(before[series("vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i))] == 0.0
               for i in range(15))

    result = complete(sim, 64)
    assert result["usage"] == {"prompt_tokens": 5, "completion_tokens": 64, "total_tokens": 69}

    samples = wait_logged(sim, 15)
    for sample in samples:
        check_identities(sample)
        assert sample.origin is not None and sample.origin.source_line == 101
        assert sample.per_position[0] < 0.5
        assert all(rate == 0.0 for rate in sample.per_position[2:])
    parsed = sim.parsed()
    assert {e.origin.source_line for e in parsed.engine if e.origin} == {271}
    assert any((e.generation_tps or 0) > 0 for e in parsed.engine)

    after = scrape(sim)
    accepted = after[series("vllm:spec_decode_num_accepted_tokens_total")]
    assert sum(s.accepted for s in samples) == accepted
    assert after[series("vllm:spec_decode_num_drafts_total")] * 15 == sum(s.drafted for s in samples)
    per_position = [after[series("vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i))]
                    for i in range(15)]
    assert sum(per_position) == accepted and not any(per_position[2:])
    assert after[series("vllm:generation_tokens_total")] == 64
    assert after[series("vllm:request_success_total", finished_reason="length")] == 1

    args = next(c.value for c in parsed.clues if c.kind == "args")
    assert isinstance(args, dict)
    assert args["speculative_config"] == DFLASH_15
    assert args["tensor_parallel_size"] == 2 and args["port"] == sim.port
    spec = next(c.value for c in parsed.clues if c.kind == "engine_spec_config")
    assert spec == {"method": "dflash", "model": ZLAB_DRAFTER, "num_speculative_tokens": 15}


def test_0_26_mixed_drafter_needs_the_v2_runner(launch: Callable[..., Sim]) -> None:
    sim = launch("serve", TARGET, "--speculative-config", json.dumps(DFLASH_15),
                 env={"SPECOPS_SIM_VLLM_VERSION": "0.26.0"})
    assert wait_exit(sim) == 1
    text = sim.log()
    assert text.rstrip().splitlines()[-1] == MIXED_SWA_026
    assert "Initializing a V1 LLM engine (v0.26.0)" in text and "Starting vLLM server" not in text
    assert "dflash-mixed-swa-refused" in {e.kind for e in parse_text(text).events}


def test_0_26_mixed_drafter_on_the_v2_runner_is_healthy(launch: Callable[..., Sim]) -> None:
    sim = launch("serve", TARGET, "--speculative-config", json.dumps(DFLASH_15),
                 env={"SPECOPS_SIM_VLLM_VERSION": "0.26.0", "VLLM_USE_V2_MODEL_RUNNER": "1"})
    wait_ready(sim)
    complete(sim, 1000, chat=True)
    samples = wait_logged(sim, 15)
    for sample in samples:
        check_identities(sample)
        assert sample.origin is not None and sample.origin.source_line == 120
    assert 4.0 <= mean_of(samples) <= 6.0
    assert {e.origin.source_line for e in sim.parsed().engine if e.origin} == {273}


def test_0_25_local_mixed_drafter_is_refused(launch: Callable[..., Sim], tmp_path: Path) -> None:
    drafter = write_drafter(tmp_path, "Qwen3.6-27B-DFlash", MIXED, [2, 17, 32, 47, 62])
    spec = {"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15}
    sim = launch("serve", TARGET, "--speculative-config", json.dumps(spec),
                 env={"SPECOPS_SIM_VLLM_VERSION": "0.25.0", "VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert wait_exit(sim) == 1
    assert sim.log().rstrip().splitlines()[-1] == MIXED_SWA_025
    assert "dflash-mixed-swa-refused" in {e.kind for e in sim.parsed().events}


# --- control file, speed, shutdown --------------------------------------------------------------

def test_control_file_collapses_acceptance_and_fails_health(launch: Callable[..., Sim], tmp_path: Path) -> None:
    control = tmp_path / "control.json"  # absent at first: defaults
    sim = launch("serve", TARGET, "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}',
                 env={"SPECOPS_SIM_CONTROL": str(control)})
    wait_ready(sim)
    complete(sim, 300)
    healthy = wait_logged(sim, 3)
    assert mean_of(healthy) > 2.5

    control.write_text(json.dumps({"acceptance_scale": 0.05}))
    complete(sim, 300)
    collapsed = wait_logged(sim, 3)[len(healthy):]
    assert collapsed and mean_of(collapsed) < 1.3

    control.write_text(json.dumps({"fail_health": True}))
    assert http(sim.url("/health"))[0] == 503
    control.unlink()
    assert http(sim.url("/health"))[0] == 200


def test_speed_is_base_tps_times_mean_over_step_cost(launch: Callable[..., Sim]) -> None:
    sim = launch("serve", TARGET, "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}',
                 env={"SPECOPS_SIM_BASE_TPS": "200"})
    wait_ready(sim)
    start = time.monotonic()
    complete(sim, 200)
    elapsed = time.monotonic() - start
    drafts = scrape(sim)[series("vllm:spec_decode_num_drafts_total")]
    expected = drafts * 1.4 / 200  # one decode step per draft, at MTP's step cost
    assert expected * 0.9 <= elapsed <= expected + 0.5


def test_requests_and_errors_over_http(launch: Callable[..., Sim]) -> None:
    sim = launch("serve", TARGET, "--served-model-name", "qwen", "--host", "0.0.0.0")
    wait_ready(sim)  # on 127.0.0.1: the sim never binds anything but loopback
    assert "Starting vLLM server on http://127.0.0.1:" in sim.log()
    status, body = http(sim.url("/v1/models"))
    assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == ["qwen"]
    status, body = http(sim.url("/v1/chat/completions"), raw=b"{not json")
    assert status == 400 and json.loads(body)["error"]["code"] == 400
    status, body = http(sim.url("/v1/completions"), {"model": "qwen", "prompt": "hi"})
    assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 16  # vLLM's default
    metrics = scrape(sim)
    assert series("vllm:spec_decode_num_drafts_total", model="qwen") not in metrics  # no speculation
    assert metrics[series("vllm:generation_tokens_total", model="qwen")] == 16
    assert 0.0 <= metrics[series("vllm:kv_cache_usage_perc", model="qwen")] <= 1.0
    assert re.search(r'^\(APIServer pid=\d+\) INFO:     127\.0\.0\.1:\d+ - "POST /v1/completions HTTP/1\.1" 200 OK$',
                     sim.log(), re.MULTILINE)


def test_sigterm_logs_the_shutdown_and_exits_0(launch: Callable[..., Sim]) -> None:
    sim = launch("serve", TARGET)
    wait_ready(sim)
    time.sleep(0.6)  # one stats interval with no traffic: an idle vLLM prints no stats at INFO
    assert "Engine 000" not in sim.log()
    os.kill(sim.proc.pid, signal.SIGTERM)
    start = time.monotonic()
    assert wait_exit(sim) == 0
    assert time.monotonic() - start < 2.0
    text = sim.log()
    assert re.search(r"^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[launcher\.py:1\] "
                     r"\[shutdown\] API server: shutdown triggered$", text, re.MULTILINE)
    assert "shutdown" in {e.kind for e in parse_text(text).events}


# --- the acceptance model and argument handling, in-process -------------------------------------

def _dflash(version: str, facts: DrafterFacts, k: int = 4) -> list[float]:
    return [round(r, 4) for r in dflash_rates(k, facts, parse_version(version))]


@pytest.mark.parametrize(("version", "ids", "mixed", "first"), [
    ("0.20.1", [1, 16, 31, 46, 61], True, 0.166),  # the offset bug: the cliff
    ("0.20.1", [2, 17, 32, 47, 62], True, 0.704),  # fixed locally; SWA still run as full attention
    ("0.20.1", [2, 17, 32, 47, 62], False, 0.88),
    ("0.22.0", [1, 16, 31, 46, 61], True, 0.704),  # fixed upstream
    ("0.22.0", [2, 17, 32, 47, 62], False, 0.45),  # the local fix on top: shifted twice
    ("0.22.0", [2, 17, 32, 47, 62], True, 0.36),
    ("0.26.0", [1, 16, 31, 46, 61], True, 0.88),
])
def test_dflash_rates_by_version_and_drafter(version: str, ids: list[int], mixed: bool, first: float,
                                             tmp_path: Path) -> None:
    drafter = write_drafter(tmp_path, "Qwen3.6-27B-DFlash", MIXED if mixed else ["full_attention"] * 5, ids)
    rates = _dflash(version, drafter_facts(str(drafter)))
    assert rates[0] == first
    assert rates == sorted(rates, reverse=True)
    if first == 0.166:
        assert rates == [0.166, 0.017, 0.0, 0.0]


def test_drafter_facts_built_in_and_unknown() -> None:
    zlab = drafter_facts(ZLAB_DRAFTER)
    assert zlab.mixed and zlab.target_layer_ids == (1, 16, 31, 46, 61)
    other = drafter_facts("someone/Qwen3.5-27B-DFlash")
    assert not other.mixed and other.target_layer_ids is None
    assert _dflash("0.20.1", other)[0] == 0.88  # ids unknown: no offset effect


def test_other_methods_rates() -> None:
    version = parse_version("0.20.1")

    def rates(method: str, model: str | None = None) -> list[float]:
        spec = SpecConfig(method, model, 3)
        return [round(r, 4) for r in acceptance_rates(spec, DrafterFacts(), TARGET, version)]

    assert rates("mtp") == [0.95, 0.8265, 0.7191]  # ~75 tok/s for one request: the brief's MTP
    assert rates("eagle3", "x/eagle3") == [0.8, 0.6, 0.45]
    assert rates("ngram") == [0.6, 0.42, 0.294]
    assert rates("draft_model", TARGET) == [0.97, 0.9215, 0.8754]
    assert rates("draft_model", "other/model") == [0.0, 0.0, 0.0]


def test_seeded_plans_repeat_and_track_the_rates() -> None:
    rates = [0.88 * 0.8**i for i in range(15)]
    plan = Engine(rates, seed=7, version=(0, 26, 0)).plan(20000, 1.0)
    assert plan == Engine(rates, seed=7, version=(0, 26, 0)).plan(20000, 1.0)
    assert sum(1 + a for a in plan) == 20000
    observed = [sum(1 for a in plan if a > i) / len(plan) for i in range(15)]
    assert all(abs(o - r) < 0.03 for o, r in zip(observed, rates, strict=True))


def test_config_file_and_unknown_options(tmp_path: Path) -> None:
    config = tmp_path / "c.yml"
    config.write_text(yaml.safe_dump({"port": 9000, "max_num_seqs": 8, "enable_prefix_caching": True,
                                      "speculative_config": {"method": "ngram", "num_speculative_tokens": 3}}))
    args = parse_serve_args([TARGET, "--config", str(config), "--port", "9001", "--kv-cache-dtype", "fp8",
                                "--some-flag"])
    assert args.port == 9001
    assert args.speculative == {"method": "ngram", "num_speculative_tokens": 3}
    assert args.non_default == {
        "model_tag": TARGET, "port": 9001, "model": TARGET,
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 3},
        "max_num_seqs": 8, "enable_prefix_caching": True, "kv_cache_dtype": "fp8", "some_flag": True,
    }
    with pytest.raises(StartupError, match="yaml/yml"):
        parse_serve_args([TARGET, "--config", str(tmp_path / "c.json")])
