"""The general rules the eighteenth blind batch's first sight asked for (issue 35): a warning that vLLM ignored
something is a note unless the same process then fails; a wait for a Ray placement group is current only while
nothing goes on after it; a model name the Hub cannot take says whether it was a missing path or a URI; a model
directory without weights names the load format; a missing shared library names where the loader looks; a
refusal in the V1 engine's words offers the V0 engine; a release between two read ones keeps their switch; a
library's message that names a setting gives vLLM's flag for it; a processor's instruction sets are the device's.
Lines as vLLM (or the library) prints them, none of them a line of the evaluation cases."""

from __future__ import annotations

from bot.core import switches
from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings

API = "(APIServer pid=7) "


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))


def test_a_warning_that_something_was_ignored_is_a_note_unless_the_process_then_fails() -> None:
    # OpenAIBaseModel's own warning (vllm/entrypoints/openai/protocol.py) for a field it does not read
    line = API + "WARNING 03-02 10:00:00 [protocol.py:53] The following fields were present in the request but " \
                 "ignored: {'top_z'}"
    alone = report([line])
    assert alone.verdict != "degraded" and not any(f.severity != "info" for f in alone.findings if "ignored" in f.title)
    failed = report([line, API + "Traceback (most recent call last):",
                     API + "ERROR 03-02 10:00:01 [serving_chat.py:200] Error in preprocessing prompt inputs"])
    assert any(f.severity == "warning" and "ignored" in f.title for f in failed.findings)


def test_a_placement_group_wait_is_current_only_while_nothing_goes_on_after_it() -> None:
    # vLLM's own wait line (vllm/v1/executor/ray_utils.py, _wait_until_pg_ready)
    wait = ("(EngineCore_DP0 pid=9) INFO 05-01 10:00:10 [ray_utils.py:240] Waiting for creating a placement group of "
            "specs for 10 seconds. specs=[{'node:127.0.0.1': 0.001, 'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` "
            "and `ray list nodes` to see if you have enough resources, and make sure the IP addresses used by ray "
            "cluster are the same as VLLM_HOST_IP environment variable specified in each node if you are running on "
            "a multi-node.")
    stuck = report([wait])
    f = next(f for f in stuck.findings if f.id == "ray-placement-group-unavailable")
    assert f.severity == "critical" and "VLLM_HOST_IP" in f.knobs and stuck.verdict == "failing"
    went_on = report([wait, "(EngineCore_DP0 pid=9) INFO 05-01 10:01:02 [gpu_model_runner.py:2000] Model loading took "
                            "14.9 GiB and 40.1 seconds"])
    assert next(f for f in went_on.findings if f.id == "ray-placement-group-unavailable").severity == "info"


def test_a_model_name_the_hub_cannot_take_says_what_the_name_was() -> None:
    # huggingface_hub's validate_repo_id refusal, quoting what vLLM passed it
    path = report(["huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
                   "'namespace/repo_name': '/data/models/llama-3-8b'. Use `repo_type` argument if needed."])
    f = next(f for f in path.findings if f.severity == "critical")
    assert f.id == "hub-name-not-a-repository" and "checkpoint" in f.inputs and "config.json" in f.remediation[0]
    uri = report(["huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
                  "'namespace/repo_name': 'gs://bucket/llama'. Use `repo_type` argument if needed."])
    g = next(f for f in uri.findings if f.severity == "critical")
    assert "--load-format" in g.knobs and "upgrade" in g.advice


def test_a_model_directory_without_weights_names_the_load_format() -> None:
    r = report(["RuntimeError: Cannot find any model weights with `/srv/models/qwen2-7b`"])
    f = next(f for f in r.findings if f.id == "no-model-weights-found")
    assert "--load-format" in f.knobs and "checkpoint" in f.advice


def test_a_missing_shared_library_names_where_the_loader_looks() -> None:
    # glibc's loader message (elf/dl-load.c) for a vendor library no entry names
    r = report(["ImportError: libfoo_runtime.so.3: cannot open shared object file: No such file or directory"])
    f = next(f for f in r.findings if f.severity == "critical")
    assert "library" in f.host and any("LD_LIBRARY_PATH" in x for x in f.remediation)


def test_a_refusal_in_the_v1_engines_words_offers_the_v0_engine_on_releases_that_have_it() -> None:
    r = report(["ValueError: vLLM V1 does not support per request user provided logits processors."],
               vllm_version="0.8.5")
    f = next(f for f in r.findings if f.severity == "critical")
    assert "VLLM_USE_V1" in f.knobs and "VLLM_USE_V1" in f.inputs


def test_a_release_between_two_read_ones_keeps_their_switch() -> None:
    sw = switches.by_id("v1-engine")
    assert sw is not None and sw.offer("0.8.0") is not None and sw.offer("0.30.0") is None


def test_a_librarys_message_that_names_a_setting_gives_vllms_flag_and_the_device() -> None:
    # IPEX's own assert (intel_extension_for_pytorch/frontend.py) on a processor without AVX-512
    r = report(["Traceback (most recent call last):",
                '  File "/opt/venv/lib/python3.11/site-packages/intel_extension_for_pytorch/frontend.py", line 557, '
                'in optimize',
                "    assert core.onednn_has_bf16_support(), (",
                "AssertionError: BF16 weight prepack needs the cpu support avx_ne_convert or avx512bw, avx512vl and "
                "avx512dq, but the desired instruction sets are not available. Please set dtype to torch.float or set "
                "weights_prepack to False."])
    f = next(f for f in r.findings if f.severity == "critical")
    assert "--dtype" in f.knobs and "gpu" in f.inputs and f.part == "platform"


def test_a_lookup_vllm_logs_and_goes_on_after_is_not_the_hub_refusal() -> None:
    # vLLM's own metadata lookup (vllm/transformers_utils/repo_utils.py) logs the Hub's refusal of a local path and
    # retries; the server is not stopped by it
    r = report([API + "ERROR 02-02 14:28:39 [repo_utils.py:47] Error retrieving safetensors: Repo id must be in the "
                      "form 'repo_name' or 'namespace/repo_name': '/srv/models/qwen'. Use `repo_type` argument if "
                      "needed., retrying 1 of 2"])
    assert not any(f.id == "hub-name-not-a-repository" for f in r.findings)
