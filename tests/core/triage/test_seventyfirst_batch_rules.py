"""Rules from the seventy-first batch's misses, general: `vllm bench`'s refusal of its own arguments or dataset is the
benchmark's failure (not a symptom of the server's answers) and its words are no part of the server; a refusal
listing an empty set of accepted values admits nothing; a model check naming only vLLM's own Transformers-backend
classes says vLLM has no implementation of the architecture."""

from __future__ import annotations

from bot.core.triage.atlas_readers.refused_input import _newer_than_listed
from tests.core.triage.reports import claims_of, report_of


def test_the_benchmarks_refusal_of_its_own_arguments_fails_the_benchmark() -> None:
    line = ("vllm bench <bench_type> [options] serve: error: Cannot use 'random' dataset with --dataset-path. Please "
            "specify the appropriate --dataset-name (e.g., 'sharegpt', 'custom', 'sonnet') for your dataset file: x\n")
    assert report_of(line).verdict == "failing"


def test_a_refusal_that_admits_nothing() -> None:
    line = "ValueError: Multi-modal content is not supported on backend 'vllm'; use one of [].\n"
    (found,) = claims_of(line)
    assert {"upgrade", "pin"} <= set(found.advice) and found.part != "multimodal"  # the benchmark's words
    # a list with values in it is a choice to make, not a defect
    listed = "ValueError: Multi-modal content is not supported on backend 'vllm'; use one of ['vllm-chat'].\n"
    assert not [f for f in claims_of(listed) if "pin" in f.advice]


def test_vllms_own_transformers_backend_named_by_a_model_check() -> None:
    line = "Model architectures ['TransformersModel'] failed to be inspected.\n"
    (found,) = claims_of(line)
    assert "checkpoint" in found.advice and "--model-impl" not in found.knobs
    assert not any("--model-impl transformers" in r for r in found.remediation)
    # an architecture of the checkpoint's own: the switch to the Transformers backend stays a way to prove it
    own = "Model architectures ['AcmeForCausalLM'] failed to be inspected.\n"
    assert not [f for f in claims_of(own) if "vLLM named its own Transformers backend" in " ".join(f.remediation)]


def test_the_review_of_these_rules() -> None:
    # a benchmark's own refusal stays critical whatever value it quotes; what the server answered is a warning
    for path in ("x", "/data/status_prompts.jsonl", "https://host/d.json", "/srv/server/d.json"):
        line = (f"vllm bench <bench_type> [options] serve: error: Cannot use 'random' dataset with --dataset-path. "
                "Please specify the appropriate --dataset-name (e.g., 'sharegpt', 'custom', 'sonnet') for your "
                f"dataset file: {path}\n")
        assert report_of(line).verdict == "failing", path
    # an empty list as the value given is no empty set of accepted values
    for line in ("ValueError: Invalid boolean value: []. Expected 'true' or 'false'.\n",
                 "ValueError: Unexpected tool_call value: []\n"):
        assert not [f for f in claims_of(line) if "pin" in f.advice], line
    # the Transformers backend asked for by the user: their setting, not vLLM's fallback
    asked = ("INFO 01-01 00:00:00 [api_server.py:1] non-default args: {'model': 'm', 'model_impl': 'transformers'}\n"
             "Model architectures ['TransformersForCausalLM'] failed to be inspected.\n")
    assert not [f for f in claims_of(asked) if "vLLM named its own Transformers backend" in " ".join(f.remediation)]
    (fell,) = claims_of("Model architectures ['TransformersModel'] failed to be inspected.\n")
    assert "transformers" in fell.deps


def test_a_version_newer_than_every_one_listed() -> None:
    line = "ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0. Got version: (4, 5)\n"
    assert [f for f in claims_of(line)
            if "upgrade" in f.advice and any("newer than every one" in r for r in f.remediation)]
    listed = "ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0. Got version: (3, 0)\n"
    assert not [f for f in claims_of(listed) if any("newer than every one" in r for r in f.remediation)]


def test_vllm_inside_a_daemonic_process() -> None:
    (found,) = claims_of("AssertionError: daemonic processes are not allowed to have children\n")
    assert found.id == "daemonic-process-children" and found.owner == "user-script" and "fix-script" in found.advice
    # the assertion alone shows no frame of whose code started the process: medium, not high
    assert found.confidence == "medium"
    (script,) = [f for f in claims_of(_started_from('/home/u/run.py", line 12, in work', 'llm = LLM(model="m")'))
                 if f.id == "daemonic-process-children"]
    assert script.owner == "user-script" and script.confidence == "high"


def _started_from(where: str, code: str) -> str:
    """Python's assertion under a traceback whose frame above multiprocessing's `start` is `where`."""
    return (f'  File "{where}\n    {code}\n'
            '  File "/usr/lib/python3.12/multiprocessing/process.py", line 118, in start\n'
            "    assert not _current_process._config.get('daemon'), \\\\\n"
            "AssertionError: daemonic processes are not allowed to have children\n")


def test_a_tokenizers_own_method_refusing_what_transformers_passes() -> None:
    (found,) = [f for f in claims_of("TypeError: AcmeTokenizer._pad() got an unexpected keyword argument "
                                     "'padding_side'\n") if f.id.startswith("words:")]
    assert "transformers" in found.deps and found.part == "tokenizer" and "fix-script" not in found.advice
    # another callee's keyword stays the caller's to change
    (other,) = [f for f in claims_of("TypeError: AcmeRunner.step() got an unexpected keyword argument 'x'\n")
                if f.id.startswith("words:")]
    assert "fix-script" in other.advice and "transformers" not in other.deps
    # printed by vLLM's own (daemonic) worker: the code running inside it tried, not the program around the engine
    inside = ("(VllmWorkerProcess pid=7) AssertionError: daemonic processes are not allowed to have children\n")
    (worker,) = claims_of(inside)
    assert worker.owner is None and "fix-script" not in worker.advice


def test_the_review_of_the_seventy_second_rules() -> None:
    # only a version newer than every one listed, read without gaps, lists and long numbers refused
    for line in ("only supports versions 2.0, 2.5, and 4.0. Got version: (3, 0)",
                 "supports versions 2.0 - 4.0. Got (3, 0)", "supports v1, v3. Got 2",
                 "supports versions 1, 2. Got version: [2.5, 3.0]", "supports versions 1, 2. Got version: 20240101",
                 "supports versions 2.6, 4. Got 4.0"):
        assert _newer_than_listed(line) is None, line
    # a plain `vllm serve`, or a package's frame that started the process: not the user's script
    served = ("INFO 01-01 00:00:00 [api_server.py:1] non-default args: {'model': 'm'}\n"
              "AssertionError: daemonic processes are not allowed to have children\n")
    (server,) = [f for f in claims_of(served) if f.id == "daemonic-process-children"]
    assert server.owner is None
    framed = _started_from('/opt/venv/lib/python3.12/site-packages/lmcache/server.py", line 9, in start', "p.start()")
    (package,) = [f for f in claims_of(framed) if f.id == "daemonic-process-children"]
    assert package.owner is None
    # transformers' own tokenizer classes and vLLM's wrappers are no checkpoint's code
    for cls in ("PreTrainedTokenizerFast._batch_encode_plus", "CachedQwen2TokenizerFast.encode", "AnyTokenizer.encode"):
        (own,) = [f for f in claims_of(f"TypeError: {cls}() got an unexpected keyword argument 'x'\n")
                  if f.id.startswith("words:")]
        assert own.part != "tokenizer", cls
