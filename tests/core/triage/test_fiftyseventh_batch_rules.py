"""Rules from the fifty-seventh batch's misses, general: msgspec's refusal of a keyword by vLLM's parameter structs,
read against the releases whose checks name the field; KV specs that cannot be unified while a drafter runs; pytest's
gutter before pydantic's lines; a config built by a plugin's code; a flag of vLLM's server refused by another
entrypoint's parser; a request-parameter check is the request's; vLLM on native Windows."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding
from tests.core.triage.reports import claims_of


def test_msgspecs_refused_keyword_is_the_callers_with_the_release_side() -> None:
    removed = [f for f in claims_of("Error code: 400 - {'message': \"Unexpected keyword argument 'best_of'\", "
                                    "'object': 'error'}\n") if f.id == "struct-keyword:best_of"]
    assert removed and "pin" in removed[0].advice and removed[0].inputs == ["best_of"]
    added = [f for f in claims_of("Unexpected keyword argument 'structured_outputs'\n", version="0.9.2")
             if f.id == "struct-keyword:structured_outputs"]
    assert added and "upgrade" in added[0].advice
    # another library's site with the same words steps back; Python's own wording is not msgspec's
    assert not [f for f in claims_of("Unexpected keyword argument 'structured_outputs'\n")
                if f.site is not None and f.site.package != "vllm"]
    assert not [f for f in claims_of("TypeError: f() got an unexpected keyword argument 'best_of'\n")
                if f.id.startswith("struct-keyword:")]


def _unify_site(method: str | None) -> list[Finding]:
    line = ("ValueError: Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one unified "
            "type.\n")
    report = build_report(diagnose(Readings(parsed=parse_text(line), flags=Flags(method=method))))
    return [f for f in report.findings
            if f.site is not None and f.site.function.endswith("unify_hybrid_kv_cache_specs")]


def test_kv_specs_that_cannot_be_unified_with_a_drafter_on_name_the_drafter() -> None:
    on = _unify_site("eagle3")
    assert on and "checkpoint" in on[0].inputs and "checkpoint" in on[0].advice and on[0].confidence == "medium"
    off = _unify_site(None)
    assert off and "checkpoint" not in off[0].advice


def test_pydantic_lines_behind_pytests_gutter_and_a_config_a_plugin_built() -> None:
    text = "\n".join([
        "E       pydantic_core._pydantic_core.ValidationError: 1 validation error for LoRAConfig",
        "E       max_lora_rank",
        "E         Input should be 1, 8, 16, 32, 64, 128, 256, 320 or 512 [type=literal_error, input_value=48, "
        "input_type=int]", "", "vllm_omni/diffusion/lora/manager.py:302: ValidationError", ""])
    found = [f for f in claims_of(text) if f.id == "config-field:LoRAConfig.max_lora_rank"]
    assert found and found[0].owner == "plugin" and "disable-plugin" in found[0].advice
    # the same refusal with no plugin's frame is the flag's
    plain = [f for f in claims_of(text.replace("vllm_omni/diffusion/lora/manager.py:302: ValidationError\n", ""))
             if f.id == "config-field:LoRAConfig.max_lora_rank"]
    assert plain and plain[0].owner is None and "--max-lora-rank" in plain[0].knobs


def test_a_server_flag_refused_by_another_parser_is_another_entrypoint() -> None:
    found = [f for f in claims_of("api_server.py: error: unrecognized arguments: --chat-template t.jinja\n")
             if f.id == "cli-refused"]
    assert found and found[0].inputs == ["--chat-template"] and "fix-script" in found[0].advice
    assert "vllm serve" in found[0].remediation[0]
    # vLLM's own parser refusing it, or a flag later releases added with no release named: the release's reading
    for line in ("vllm serve: error: unrecognized arguments: --chat-template t.jinja\n",
                 "api_server.py: error: unrecognized arguments: --api-key x\n"):
        own = [f for f in claims_of(line) if f.id == "cli-refused"]
        assert own and "fix-script" not in own[0].advice


def test_a_request_parameter_check_is_the_requests() -> None:
    found = [f for f in claims_of("The min_p and logit_bias sampling parameters are not yet supported with "
                                  "speculative decoding.\n") if f.site is not None]
    assert found and found[0].inputs[:3] == ["request", "min_p", "logit_bias"] and "request" in found[0].advice


def test_vllm_on_native_windows() -> None:
    found = [f for f in claims_of("vLLM only supports Linux platform (including WSL) and MacOS.Building on win32, "
                                  "so vLLM may not be able to run correctly\n")
             if f.id == "vllm-built-on-unsupported-os"]
    assert found and found[0].host == ["os"]
