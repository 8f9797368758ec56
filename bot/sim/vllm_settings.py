"""The fake vLLM's knobs: the settings its environment fixes at start (release, timings, seed) and the control
file a test or the demo rewrites while it runs (acceptance collapse, failing /health).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

Version = tuple[int, int, int]

DEFAULT_VERSION = "0.20.1"


def parse_version(text: str) -> Version:
    """'0.20.1', '0.32.0+cpu', '0.26.0rc1' -> (major, minor, patch); unreadable -> the default."""
    m = re.match(r"\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text)
    if not m:
        return parse_version(DEFAULT_VERSION)
    return (int(m[1]), int(m[2] or 0), int(m[3] or 0))


def env_float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(env.get(name, ""))
    except ValueError:
        return default
    return value if math.isfinite(value) else default


@dataclass(frozen=True)
class Settings:
    version_text: str
    version: Version
    startup_seconds: float
    stats_interval: float
    base_tps: float
    max_request_seconds: float
    seed: int
    control_path: str | None
    v2_runner: bool


def load_settings(env: Mapping[str, str]) -> Settings:
    version_text = env.get("SPECOPS_SIM_VLLM_VERSION") or DEFAULT_VERSION
    try:
        seed = int(env.get("SPECOPS_SIM_SEED", "0"))
    except ValueError:
        seed = 0
    return Settings(
        version_text=version_text,
        version=parse_version(version_text),
        startup_seconds=max(0.0, env_float(env, "SPECOPS_SIM_STARTUP_SECONDS", 2.0)),
        # a zero or negative interval would spin the stats loop
        stats_interval=max(0.05, env_float(env, "VLLM_LOG_STATS_INTERVAL", 10.0)),
        base_tps=max(1e-3, env_float(env, "SPECOPS_SIM_BASE_TPS", 30.0)),
        max_request_seconds=max(0.0, env_float(env, "SPECOPS_SIM_MAX_REQUEST_SECONDS", 5.0)),
        seed=seed,
        control_path=env.get("SPECOPS_SIM_CONTROL") or None,
        v2_runner=env.get("VLLM_USE_V2_MODEL_RUNNER") == "1",
    )


@dataclass(frozen=True)
class Control:
    acceptance_scale: float = 1.0
    fail_health: bool = False


def read_control(path: str | None) -> Control:
    """Knobs for a running sim (inject a collapse, fail /health). Read fresh on every use, so a test
    or the demo flips them by rewriting the file; a missing or broken file means the defaults."""
    if not path:
        return Control()
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Control()
    if not isinstance(data, dict):
        return Control()
    scale = data.get("acceptance_scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale) or scale < 0:
        scale = 1.0
    return Control(acceptance_scale=float(scale), fail_health=data.get("fail_health") is True)
