"""A config field's own constraint (pydantic's `gpu_memory_utilization: Input should be less than or equal to 1`),
and the flag that sets the field."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.input_knobs import PLUGIN_ENV
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas


def config_part(atlas: Atlas, cls: str) -> str:
    """The part a config class belongs to, from its module (`CacheConfig` lives in vllm/config/cache.py)."""
    stem = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.removesuffix("Config")).lower()
    return atlas.part_of(f"vllm/config/{stem}.py") if stem else "config"


def field_finding(atlas: Atlas, p: ProblemLine, version: str | None,
                  frames: list[ProblemLine] | tuple[ProblemLine, ...] = ()) -> Finding:
    """No vLLM message to place, but the field is named, and with it the flag that sets it — or, when a plugin's or
    a program's code built the config (its frame raised it), that code."""
    assert p.config_field is not None
    cls, _, name = p.config_field.partition(".")
    knobs = atlas.knobs_for([p.config_field], version)
    remediation = [f"The value comes from {'`' + k.flag + '`' + (f' (its `{k.key}` key)' if k.key else '')}"
                   + (f": {clip(k.help, 220)}" if k.help else "") for k in knobs]
    if not knobs:
        remediation.append(f"No flag of {version or 'this release'} maps to `{p.config_field}` in the atlas; "
                           "look for it in the config file or the code that builds the engine.")
    builder = next((o for f in reversed(frames) if (o := owners.of_path(f.frame_file or "")) is not None
                    and o.name not in ("pydantic", "python")), None)
    if builder is not None and builder.name in ("plugin", "other"):
        # the config was built by that package's code with a value of its own, not from a flag the user gave
        remediation.insert(0, f"{builder.title[0].upper()}{builder.title[1:]} built `{cls}` with this value (its "
                              "frame raised it): install its release made for this vLLM, or run without it "
                              f"(`{PLUGIN_ENV}=` empty for general plugins) to confirm.")
        return Finding(
            id=f"config-field:{p.config_field}", title=f"{builder.package} built `{cls}` with an invalid `{name}`: "
                                                      f"{clip(p.message, 80)}",
            severity="critical", confidence="medium", summary=(
                f"vLLM's config validation refused the value of `{p.config_field}` that {builder.title} passed "
                f"(pydantic: {clip(p.message, 200)})."),
            evidence=[quoted(p)], remediation=remediation, priority=40, part=config_part(atlas, cls),
            knobs=[k.flag for k in knobs], owner=builder.name, deps=[builder.package],
            advice=["disable-plugin", "upgrade"] if builder.name == "plugin" else ["fix-script"])
    return Finding(
        id=f"config-field:{p.config_field}", title=f"Invalid `{name}` ({cls}): {clip(p.message, 90)}",
        severity="critical", confidence="high" if knobs else "medium",
        summary=(f"vLLM's config validation refused the value of `{p.config_field}` before the engine started "
                 f"(pydantic: {clip(p.message, 200)})."),
        evidence=[quoted(p)], remediation=remediation,
        priority=40, part=config_part(atlas, cls), knobs=[k.flag for k in knobs])
