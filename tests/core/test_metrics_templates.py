"""Property: every stats line vLLM's own source can print parses back to the numbers it was given.

The templates are vLLM's, read off each release's source by the atlas (`bot/core/knowledge/atlas/
metrics_templates.json`: kind, first/last release, the %-format text, its arguments, and for the Engine
line of 0.11+ the parts joined at run time). Without that file the test runs on the templates quoted in
shared/reference/vllm-logs.md, which the file would contain anyway.
"""

from __future__ import annotations

import json
import math
import re
from importlib import resources
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.line_kinds import split_prefix
from bot.core.metrics_lines import parse_engine_message, parse_spec_message

# shared/reference/vllm-logs.md, "SpecDecoding metrics" and "Engine 000:" sections
QUOTED: list[dict[str, Any]] = [
    {"kind": "v1-spec", "first": "0.10.2", "last": "0.33.0", "template": (
        "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted "
        "throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s, "
        "Avg Draft acceptance rate: %.1f%%")},
    {"kind": "v1-spec", "first": "0.8.5", "last": "0.10.1", "template": (
        "SpecDecoding metrics: Draft acceptance rate: %.1f%%, Mean acceptance length: %.2f, Accepted: %d tokens, "
        "Drafted: %d tokens, Per-position acceptance rate: %s")},
    {"kind": "v0-spec", "first": "0.6.0", "last": "0.8.5", "template": (
        "Speculative metrics: Draft acceptance rate: %.3f, System efficiency: %.3f, Number of speculative tokens: "
        "%s, Number of accepted tokens: %s, Number of draft tokens: %s, Number of emitted tokens: %s.")},
    {"kind": "engine", "first": "0.8.5", "last": "0.11.0", "template": (
        "Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d "
        "reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%")},
]


def _templates() -> tuple[list[dict[str, Any]], str]:
    path = resources.files("bot.core") / "knowledge" / "atlas" / "metrics_templates.json"
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return QUOTED, "shared/reference/vllm-logs.md"
    items = data["templates"] if isinstance(data, dict) else data
    return list(items), "metrics_templates.json"


TEMPLATES, ORIGIN = _templates()
SPEC = [t for t in TEMPLATES if t["kind"] in ("v1-spec", "v0-spec")]
ENGINE = [t for t in TEMPLATES if t["kind"] == "engine"]


def test_the_templates_are_there() -> None:
    assert SPEC and ENGINE, f"no templates read from {ORIGIN}"


@st.composite
def spec_line(draw: st.DrawFn, template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A line vLLM would print for one interval: counts first, then every printed number from them."""
    k = draw(st.integers(1, 15))
    drafts = draw(st.integers(1, 5000))
    per_pos: list[int] = []
    top = drafts
    for _ in range(k):
        top = draw(st.integers(0, top))
        per_pos.append(top)
    accepted = sum(per_pos)
    drafted = drafts * k
    rates = [a / drafts for a in per_pos]
    facts = {
        "k": k, "accepted": accepted, "drafted": drafted,
        "rates": [float(f"{r:.3f}") for r in rates],
        "mean": float(f"{1 + accepted / drafts:.2f}"),
        "pct": float(f"{100 * accepted / drafted:.1f}"),
        "atps": float(f"{draw(st.floats(0, 5000)):.2f}"), "dtps": float(f"{draw(st.floats(0, 5000)):.2f}"),
    }
    text = template["template"]
    if template["kind"] == "v0-spec":
        rate = accepted / drafted
        values: list[Any] = [rate, draw(st.floats(0, 1)), k, accepted, drafted, accepted + drafts]
        facts["pct"] = float(f"{rate:.3f}") * 100
        return _render(text, values), facts
    rates_str = ", ".join(f"{r:.3f}" for r in rates)
    by_label = {
        "Mean acceptance length": 1 + accepted / drafts, "Accepted throughput": facts["atps"],
        "Drafted throughput": facts["dtps"], "Accepted": accepted, "Drafted": drafted,
        "Per-position acceptance rate": rates_str, "Avg Draft acceptance rate": 100 * accepted / drafted,
        "Draft acceptance rate": 100 * accepted / drafted,
    }
    labels = re.findall(r"([A-Z][A-Za-z -]+?): %", text)
    return _render(text, [by_label[label] for label in labels]), facts


def _render(text: str, values: list[Any]) -> str:
    out = text.replace("{}", "%s")
    return out % tuple(values)


@pytest.mark.parametrize("template", SPEC, ids=lambda t: f"{t['kind']}-{t['first']}-{t['last']}")
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_spec_templates_parse_back_exactly(template: dict[str, Any], data: st.DataObject) -> None:
    line, facts = data.draw(spec_line(template))
    prefixed = f"(APIServer pid=7) INFO 05-08 16:26:29 [metrics.py:101] {line}"
    origin, msg = split_prefix(prefixed)
    s = parse_spec_message(msg, origin)
    assert s is not None, line
    assert (s.accepted, s.drafted) == (facts["accepted"], facts["drafted"]), line
    if template["kind"] == "v0-spec":
        assert s.form == "V0" and s.avg_draft_acceptance_rate == pytest.approx(facts["pct"], abs=1e-6)
        return
    assert s.per_position == facts["rates"], line
    assert s.mean_acceptance_length == pytest.approx(facts["mean"], abs=1e-9), line
    assert s.avg_draft_acceptance_rate == pytest.approx(facts["pct"], abs=1e-9), line
    if "Accepted throughput" in template["template"]:
        assert (s.accepted_tps, s.drafted_tps) == (facts["atps"], facts["dtps"]), line


@st.composite
def engine_line(draw: st.DrawFn, template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    facts = {"prompt": float(f"{draw(st.floats(0, 1e5)):.1f}"), "gen": float(f"{draw(st.floats(0, 1e5)):.1f}"),
             "running": draw(st.integers(0, 512)), "waiting": draw(st.integers(0, 512)),
             "kv": float(f"{draw(st.floats(0, 100)):.1f}"), "prefix": float(f"{draw(st.floats(0, 100)):.1f}"),
             "device": draw(st.sampled_from(["GPU", "XPU", "CPU"]))}
    parts = template.get("parts")
    if parts:  # 0.11+: the parts joined at run time, the optional ones only when their condition holds
        chosen = [p["text"] for p in parts if not p["optional"] or draw(st.booleans())]
        body = (template.get("joiner") or ", ").join(chosen)
        text = "Engine 000: " + body
    else:
        text = template["template"]

    def repl(m: re.Match[str]) -> str:  # each conversion gets the value its label names

        before = text[:m.start()].rsplit(", ", 1)[-1].lower()
        spec = m.group(0)
        if spec == "%%":
            return "%"
        key = ("prompt" if "prompt throughput" in before else "gen" if "generation throughput" in before
               else "running" if before.startswith("running")
               else "waiting" if before.startswith(("waiting", "pending"))
               else "kv" if "kv cache usage" in before and "prefix" not in before
               else "prefix" if before.startswith("prefix cache hit rate") else None)
        if spec == "%s":  # an f-string's hole (0.2–0.3): a count where a label names one, else the device
            return str(facts[key]) if key in ("running", "waiting") else str(facts["device"])
        if "engine" in before and ":" not in before:
            return spec % 0
        if key is not None:
            return spec % facts[key]
        return spec % (draw(st.integers(0, 99)) if spec.endswith("d") else draw(st.floats(0, 100)))

    line = re.sub(r"%(?:\.\d+)?0?\d*[dfs%]", repl, text)
    return line, facts


@pytest.mark.parametrize("template", ENGINE, ids=lambda t: f"engine-{t['first']}-{t['last']}")
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_engine_templates_parse_back_exactly(template: dict[str, Any], data: st.DataObject) -> None:
    line, facts = data.draw(engine_line(template))
    e = parse_engine_message(line)
    assert e is not None, line
    assert (e.prompt_tps, e.generation_tps, e.running, e.waiting) == (
        facts["prompt"], facts["gen"], facts["running"], facts["waiting"]), line
    if "KV cache usage" in line:
        assert e.kv_cache_usage == facts["kv"], line
    if "Prefix cache hit rate" in line:
        assert e.prefix_cache_hit_rate == facts["prefix"] and not math.isnan(facts["prefix"]), line
