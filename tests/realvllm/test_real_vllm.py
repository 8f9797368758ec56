"""specops against a real `vllm serve` (vLLM 0.32.0, CPU build) over a real OpenSSH sshd.

Prepared once per machine by tests/support/realvllm.py (.ci/run calls it); skipped, with the
reason, when the CPU build cannot be installed here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app import ops
from bot.config import Config, Profile, Settings, VllmInstall
from bot.core.report import Report
from bot.store import Store
from tests.support import realvllm as prepare
from tests.support.sshd import Sshd, free_port

pytestmark = pytest.mark.realvllm
STATUS = prepare.status()
if not STATUS.get("ready"):
    pytest.skip(f"real vLLM not available: {STATUS.get('reason')}", allow_module_level=True)

REPETITIVE = " ".join(["one two three four five six seven eight"] * 12)


@pytest.fixture(scope="module")
def cfg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Config]:
    root = tmp_path_factory.mktemp("realvllm")
    sshd = Sshd(root / "sshd").start()
    for d in ("srv", "cache", "tmp"):
        (root / d).mkdir()
    models = Path(str(STATUS["models"]))
    host = {"address": "127.0.0.1", "port": sshd.port, "user": sshd.user, "key": sshd.client_key,
            "known_hosts": sshd.known_hosts, "workdir": str(root / "srv"), "connect_timeout": 10}
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_NO_USAGE_STATS": "1", "VLLM_CACHE_ROOT": str(root / "cache"), "TMPDIR": str(root / "tmp"),
           "VLLM_LOG_STATS_INTERVAL": "2"}
    common = {"model": str(models / "tiny-a"), "served_model_name": "tiny", "device": "cpu", "port": free_port(),
              "vllm": VllmInstall(bin=str(prepare.vllm_bin()), version=prepare.VLLM_VERSION),
              "extra_args": {"max-model-len": 512, "dtype": "bfloat16", "enforce-eager": True}, "env": env,
              "startup_timeout": 300.0, "probe_max_tokens": 96, "probe_prompt": REPETITIVE}
    profiles = {
        "ngram-cpu": Profile(**common, method="ngram", num_speculative_tokens=3,
                             speculative_extra={"prompt_lookup_max": 4, "prompt_lookup_min": 2}),
        "draft-cpu": Profile(**common, method="draft_model", drafter=str(models / "tiny-a"), num_speculative_tokens=3),
        "draft-cpu-mismatched": Profile(**common, method="draft_model", drafter=str(models / "tiny-b"),
                                        num_speculative_tokens=3),
        # vLLM refuses an unknown method: the real error, read from the real log
        "invalid-cpu": Profile(**common, method="ngram", num_speculative_tokens=3,
                               speculative_extra={"method": "magic"}),
    }
    config = Config.model_validate({"hosts": {"cpu": host},
                                    "profiles": {k: v.model_dump() for k, v in profiles.items()},
                                    "settings": Settings(state=root / "specops.db").model_dump()})
    try:
        yield config
    finally:
        try:
            ops.stop(ops.HostRequest(config, "cpu"))
        finally:
            sshd.stop()


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def stop_and_check(cfg: Config) -> None:
    pid = int((Path(cfg.hosts["cpu"].workdir) / "server.pid").read_text())
    assert len(group_members(pid)) >= 3  # API server, engine core, worker (and the resource tracker)
    report = ops.stop(ops.HostRequest(cfg, "cpu"))
    assert report.operation is not None and report.operation.status == "changed", report.operation
    deadline = time.monotonic() + 30
    while group_members(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert group_members(pid) == []


def deploy(cfg: Config, profile: str) -> Report:
    return ops.deploy(ops.HostRequest(cfg, "cpu", profile))


def test_ngram_deploys_diagnoses_and_stops(cfg: Config) -> None:
    report = deploy(cfg, "ngram-cpu")
    assert report.operation is not None and report.operation.status == "changed", report.headline
    assert str(report.context.get("vllm_version", "")).startswith("0.32.0")
    assert report.metrics.mean_acceptance_length is not None and report.metrics.mean_acceptance_length > 1.0
    assert not any(f.upstream for f in report.findings), [f.id for f in report.findings]  # never a bug PR
    assert report.verdict in ("healthy", "degraded")
    diag = ops.diagnose_host(ops.HostRequest(cfg, "cpu"))
    m = diag.metrics
    assert m.mean_acceptance_length is not None and m.prometheus_mean_acceptance_length is not None
    # the /metrics counters and the log lines tell the same story
    assert abs(m.prometheus_mean_acceptance_length - m.mean_acceptance_length) < 0.6
    assert not any(f.is_bug for f in diag.findings)
    log = Path(cfg.hosts["cpu"].workdir) / "server.log"
    assert "SpecDecoding metrics" in log.read_text()
    stop_and_check(cfg)


def test_mismatched_drafter_collapses_and_is_not_called_an_upstream_bug(cfg: Config) -> None:
    report = deploy(cfg, "draft-cpu-mismatched")
    assert report.operation is not None and report.operation.status == "changed", report.headline
    ids = [f.id for f in report.findings]
    assert "drafter-mismatch" in ids, ids
    assert not any(f.upstream for f in report.findings)
    stop_and_check(cfg)


def test_an_invalid_speculative_config_fails_fast_on_vllms_own_error(cfg: Config) -> None:
    t0 = time.monotonic()
    report = deploy(cfg, "invalid-cpu")
    assert time.monotonic() - t0 < 120
    assert report.operation is not None and report.operation.status == "failed"
    assert report.operation.failed_step is not None and "wait for /health" in report.operation.failed_step
    assert "spec-method-unknown" in [f.id for f in report.findings]
    assert Store(cfg.settings.state).lock_of("cpu") is None
    assert not (Path(cfg.hosts["cpu"].workdir) / "server.pid").exists()
