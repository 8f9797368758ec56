"""Rules from the forty-seventh batch's misses, general: another package importing a module vLLM moved (which way
to move vLLM, from the code's history); a module-level function of vLLM's API refusing a keyword; the divisor of a
division by zero that a flag sets, read from the code line a paste kept above the exception."""

from __future__ import annotations

from tests.core.triage.reports import claims_of


def test_another_package_importing_a_module_vllm_moved_says_which_way_to_move_vllm() -> None:
    text = """\
Traceback (most recent call last):
  File "/srv/env/lib/python3.11/site-packages/acme_gateway/routes.py", line 5, in <module>
    from vllm.entrypoints.openai.speech_to_text.protocol import TranscriptionRequest
ModuleNotFoundError: No module named 'vllm.entrypoints.openai.speech_to_text'
"""
    later = [f for f in claims_of(text, version="0.30.0") if f.id.startswith("stale-import:")]
    assert later and later[0].advice == ["pin"] and later[0].owner == "other" and later[0].part == "entrypoint"
    assert not any("upgrade" in r.lower() for r in later[0].remediation)  # the frames' library advice is not added
    earlier = [f for f in claims_of(text, version="0.8.5") if f.id.startswith("stale-import:")]
    assert earlier and earlier[0].advice == ["upgrade"]


def test_a_module_level_function_of_vllms_api_refusing_a_keyword_is_the_callers() -> None:
    claims = claims_of("apply_hf_chat_template() got an unexpected keyword argument 'tokenize_mode'\n")
    found = [f for f in claims if f.id.startswith("api-call:")]
    assert found and found[0].part == "entrypoint" and {"fix-script", "pin"} <= set(found[0].advice)
    # a function no vLLM release defines is no call into vLLM's API
    assert not any(f.id.startswith("api-call:") for f in claims_of(
        "frobnicate_the_widgets() got an unexpected keyword argument 'x'\n"))


def test_a_divisor_a_flag_sets_is_that_flag_and_a_local_count_names_nothing() -> None:
    text = ("    if num_kv_heads % pipeline_parallel_size != 0:\n        ^^^^^^^^^^^^^^^^^^\n"
            "ZeroDivisionError: integer modulo by zero\n")
    words = [f for f in claims_of(text) if f.id.startswith("words:")]
    assert words and "--pipeline-parallel-size" in words[0].inputs and "--pipeline-parallel-size" in words[0].knobs
    local = claims_of("    share = total / count\nZeroDivisionError: float division by zero\n")
    assert not any("count" in f.inputs for f in local)
