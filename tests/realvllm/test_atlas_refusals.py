"""Real refusals of a real `vllm serve` (vLLM 0.32.0, CPU build), diagnosed through the atlas.

No knowledge-base entry knows these three messages; vLLM prints them itself when a flag is wrong (each
run stops at config validation, ~30 s, all three at once). The report must say which part of vLLM
refused, in which file and function, and which flag the check reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from bot.app.diagnosis.diagnose import diagnose_text
from bot.core.triage.context import Flags
from tests.support import realvllm as prepare
from tests.support.sshd import free_port

pytestmark = pytest.mark.realvllm
STATUS = prepare.status()
if not STATUS.get("ready"):
    pytest.skip(f"real vLLM not available: {STATUS.get('reason')}", allow_module_level=True)

# (name, extra flags, part, file, function, a flag the finding must name)
REFUSALS = [
    ("max-model-len", ["--max-model-len", "100000"], "model-loading", "vllm/config/model.py",
     "_get_and_verify_max_len", None),
    ("ngram-window", ["--max-model-len", "512", "--speculative-config",
                      json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2,
                                  "prompt_lookup_min": 5})],
     "spec-config", "vllm/config/speculative.py", "SpeculativeConfig.__post_init__", "--speculative-config"),
    ("tp-heads", ["--max-model-len", "512", "--tensor-parallel-size", "3"], "model-loading",
     "vllm/config/model.py", "ModelConfig.verify_with_parallel_config", "--tensor-parallel-size"),
]


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("refusals")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1",
               VLLM_NO_USAGE_STATS="1", VLLM_CACHE_ROOT=str(root / "cache"), TMPDIR=str(root))
    model = str(Path(str(STATUS["models"])) / "tiny-a")
    procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    for name, extra, *_ in REFUSALS:
        out = root / f"{name}.log"
        argv = [str(prepare.vllm_bin()), "serve", model, "--host", "127.0.0.1", "--port", str(free_port()),
                "--dtype", "bfloat16", "--enforce-eager", *extra]
        with out.open("wb") as f:
            procs[name] = (subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True), out)
    deadline = time.monotonic() + 240
    try:
        for proc, _ in procs.values():
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for proc, _ in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
    return {name: out.read_text(errors="replace") for name, (_, out) in procs.items()}


@pytest.mark.parametrize(("name", "part", "file", "function", "knob"),
                         [(n, p, f, fn, k) for n, _, p, f, fn, k in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_a_refusal_no_entry_knows_is_placed_in_vllm_source(logs: dict[str, str], name: str, part: str, file: str,
                                                             function: str, knob: str | None) -> None:
    report = diagnose_text(logs[name], Flags(vllm_version="0.32.0"))
    placed = [f for f in report.findings if f.site is not None]
    assert placed, [f.id for f in report.findings]
    top = placed[0]
    assert report.verdict == "failing"
    assert top.severity == "critical"
    assert top.part == part
    assert top.site is not None and top.site.file == file and top.site.function == function
    assert top.site.url.startswith(f"https://github.com/vllm-project/vllm/blob/v0.32.0/{file}#L")
    if knob is not None:
        assert knob in top.knobs
    # the catch-all "an error no known signature explains" gives way to the placed one
    assert "engine-crashed" not in [f.id for f in report.findings]
