"""A config field's own constraint (pydantic's `gpu_memory_utilization: Input should be less than or equal to 1`),
and the flag that sets the field."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas


def config_part(atlas: Atlas, cls: str) -> str:
    """The part a config class belongs to, from its module (`CacheConfig` lives in vllm/config/cache.py)."""
    stem = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.removesuffix("Config")).lower()
    return atlas.part_of(f"vllm/config/{stem}.py") if stem else "config"


def field_finding(atlas: Atlas, p: ProblemLine, version: str | None) -> Finding:
    """No vLLM message to place, but the field is named, and with it the flag that sets it."""
    assert p.config_field is not None
    cls, _, name = p.config_field.partition(".")
    knobs = atlas.knobs_for([p.config_field], version)
    remediation = [f"The value comes from {'`' + k.flag + '`' + (f' (its `{k.key}` key)' if k.key else '')}"
                   + (f": {clip(k.help, 220)}" if k.help else "") for k in knobs]
    if not knobs:
        remediation.append(f"No flag of {version or 'this release'} maps to `{p.config_field}` in the atlas; "
                           "look for it in the config file or the code that builds the engine.")
    return Finding(
        id=f"config-field:{p.config_field}", title=f"Invalid `{name}` ({cls}): {clip(p.message, 90)}",
        severity="critical", confidence="high" if knobs else "medium",
        summary=(f"vLLM's config validation refused the value of `{p.config_field}` before the engine started "
                 f"(pydantic: {clip(p.message, 200)})."),
        evidence=[quoted(p)], remediation=remediation,
        priority=40, part=config_part(atlas, cls), knobs=[k.flag for k in knobs])
