"""The one translation of a deployment profile into the facts triage works from (a diagnosis over SSH, the
health report over the watches, an instance Prometheus scrapes that is one of the inventory's hosts)."""

from __future__ import annotations

from collections.abc import Mapping

from bot.config import Profile
from bot.core.triage.acceptance import first_position_floor
from bot.core.triage.context import Flags

V2_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"


def profile_flags(profile: Profile | None, *, host: str | None, origin: str = "the profile",
                  env: Mapping[str, str] | None = None, floors: Mapping[str, float] | None = None,
                  **observed: object) -> Flags:
    """What `profile` says of the deployment on `host`. `env`: the environment the server runs with (the host's
    `vllm_env` and the profile's `env`); `observed`: what was seen on the host or in its metrics (a version read
    from the venv, the drafter's own config, probe tok/s, liveness, the GPU) — where given, it wins. `floors`:
    the config's watch.rules.first_position_floor, so a diagnosis judges acceptance as the watch does."""
    facts: dict[str, object] = {}
    if profile is not None:
        run_env = {**(env or {}), **profile.env}
        facts = {"vllm_version": profile.vllm.version, "method": None if profile.method == "none" else profile.method,
                 "target_model": profile.model, "drafter": profile.drafter, "drafter_config": profile.drafter_config,
                 "num_speculative_tokens": profile.num_speculative_tokens,
                 # a reference measured with this very method is this setting's own number, not another's
                 "baseline_tps": None if profile.baseline_method == profile.method else profile.baseline_tps,
                 "model_runner_v2": run_env.get(V2_RUNNER_ENV) == "1",
                 "first_position_floor": first_position_floor(profile.method, floors)}
    facts.update({k: v for k, v in observed.items() if v is not None})
    return Flags.model_validate({**facts, "host": host, "origin": origin})
