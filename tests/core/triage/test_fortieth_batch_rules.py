"""What the fortieth batch's misses taught, general (issue 35): a client quoting the server's 4xx answer (vLLM's
error body, the request's validation, mistral_common's message checks) is one request refused; XLA's "Attempting to
reserve … at the bottom of memory" on a TPU is HBM the KV cache left too small (`--gpu-memory-utilization`); an
argument a call passes that is an engine argument is named as its flag; code with a `vllm/` folder that no frame of
vLLM's calls is a program that runs vLLM, not a plugin; a vLLM module the history shows removed says the release to
pin. Lines in the shapes public threads show (tests/cases-fortieth)."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _report(text: str, version: str | None = None) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags(vllm_version=version))))


def _claims(text: str, version: str | None = None) -> list[Finding]:
    return [f for f in _report(text, version).findings if f.severity in ("critical", "warning")]


def test_a_client_quoting_the_servers_4xx_answer_is_one_request_refused() -> None:
    for text in (
        'Error: HTTP 400: Bad Request — {"error":{"message":"Conversation roles must alternate","type":'
        '"BadRequestError","param":null,"code":400}}\n',
        "request failed: HTTP 400: 2 validation errors for ChatCompletionRequest messages.0.name Extra inputs are "
        "not permitted [type=extra_forbidden]\n",
        "mistral_common.exceptions.InvalidAssistantMessageException: Assistant message must have content\n",
    ):
        r = _report(text)
        f = next(c for c in _claims(text) if c.id.startswith(("client-request-refused", "mistral-request-invalid:")))
        assert r.verdict == "failing" and f.inputs == ["request"] and "request" in f.advice, text
    # a message vLLM's own code words is placed at its site, which names the server's setting the check reads
    flags = ('Error: HTTP 400: {"object":"error","message":"\\"auto\\" tool choice requires --enable-auto-tool-choice '
             'and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}\n')
    assert not any(c.id == "client-request-refused" for c in _claims(flags, "0.8.5"))


def test_a_refusal_without_the_servers_error_body_or_the_tokenizers_own_error_is_not_a_request() -> None:
    for text in ("Error: HTTP 400 from the proxy, retrying\n",
                 "mistral_common.exceptions.TokenizerException: tokenizer file not found\n",
                 # a config's validation (pydantic's words) with no client's status: the settings, not a request
                 "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"):
        assert not any(c.id.startswith(("client-request-refused", "mistral-request-invalid:"))
                       for c in _claims(text)), text


def test_xlas_program_that_cannot_reserve_hbm_names_the_memory_fraction() -> None:
    text = ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Error loading program 'jit_step_fn': Attempting to "
            "reserve 2.50G at the bottom of memory. That was not possible. There are 1.10G free, 0B reserved, and "
            "1.10G reservable.\n")
    f = next(c for c in _claims(text) if c.id == "tpu-hbm-program-load-exhausted")
    assert f.inputs == ["--gpu-memory-utilization"] and f.part == "kv-cache"
    # the compiler's scalar memory is another space: not the KV cache's share of HBM
    smem = ("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
            "memory in memory space smem.\n")
    assert not any(c.id == "tpu-hbm-program-load-exhausted" for c in _claims(smem))


_LLM_CALL = ('Traceback (most recent call last):\n'
             '  File "/usr/local/lib/python3.10/dist-packages/trainer/serve.py", line 238, in main\n'
             '    llm = LLM(\n'
             '  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/llm.py", line 212, in __init__\n'
             '    engine_args = EngineArgs(\n'
             "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'worker_extension_cls'\n")


def test_an_argument_the_call_passes_that_is_an_engine_flag_is_named_as_the_flag() -> None:
    # with no release known, the frames' reading: the argument and its flag
    f = next(c for c in _claims(_LLM_CALL) if c.id.startswith("frame:"))
    assert {"worker_extension_cls", "--worker-extension-cls"} <= set(f.inputs)
    # with the release known, the caller's age names the flag as well
    g = next(c for c in _claims(_LLM_CALL, "0.7.3") if c.id.startswith("newer-argument:"))
    assert g.inputs == ["--worker-extension-cls"] and g.advice == ["upgrade"]


_PROGRAM = ('Traceback (most recent call last):\n'
            '  File "/usr/lib/python3.10/asyncio/base_events.py", line 649, in run_until_complete\n'
            '    return future.result()\n'
            '  File "/srv/modelserver/model_server.py", line 297, in _serve\n'
            '    await asyncio.gather(*self.servers)\n'
            '  File "/srv/hfserver/hfserver/vllm/vllm_model.py", line 141, in start_engine\n'
            '    OpenAIServingChat(\n'
            "TypeError: OpenAIServingChat.__init__() got an unexpected keyword argument 'enable_reasoning'\n")


def test_code_with_a_vllm_folder_that_no_frame_of_vllms_calls_is_a_program_that_runs_vllm() -> None:
    f = next(c for c in _claims(_PROGRAM, "0.9.0") if c.id.startswith("frame:"))
    assert f.owner == "other" and "pin" in f.advice and f.deps == ["hfserver"]
    assert "a program that runs vLLM" in f.title
    # the same code under vLLM's own frames is a plugin vLLM loaded
    plugin = ('Traceback (most recent call last):\n'
              '  File "/usr/local/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 200, in load_model\n'
              '    self.model_runner.load_model()\n'
              '  File "/srv/hfserver/hfserver/vllm/model_runner.py", line 41, in load_model\n'
              '    Attention(\n'
              "TypeError: Attention.__init__() got an unexpected keyword argument 'prefix_x'\n")
    g = next(c for c in _claims(plugin, "0.9.0") if c.id.startswith("frame:"))
    assert g.owner == "plugin" and "disable-plugin" in g.advice


def test_a_vllm_module_the_releases_show_removed_says_the_last_release_that_has_it() -> None:
    text = "ModuleNotFoundError: No module named 'vllm.entrypoints.serve.render'\n"
    f = next(c for c in _claims(text, "0.25.0") if c.id.startswith("missing-vllm-module:"))
    assert "pin" in f.advice and "upgrade" not in f.advice and "removed it after 0.24.0" in f.summary
    # a range names no one release: still removed (the newest release read lacks it), no upgrade claimed
    g = next(c for c in _claims(text, ">=0.25.0") if c.id.startswith("missing-vllm-module:"))
    assert "pin" in g.advice and "upgrade" not in g.advice
