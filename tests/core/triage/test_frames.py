"""Frames before words: the traceback decides where a built-in exception came from and which input it read."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.triage.frames import frames_agree, generic_words, inputs_of, raiser


def test_pythons_own_words_are_generic() -> None:
    assert generic_words("IndexError", "list index out of range")
    assert generic_words("TypeError", "forward() got an unexpected keyword argument 'positions'")
    assert generic_words("KeyError", "'layers.0.mlp.gate.g_idx'")
    assert generic_words("AttributeError", "'RoutedExperts' object has no attribute 'w2_weight'. Did you mean: "
                                           "'w2_qweight'?")
    assert generic_words("FileNotFoundError", "[Errno 2] No such file or directory: 'nvcc'")
    assert not generic_words("ValueError", "The model's max seq len (163840) is larger than the maximum number of "
                                           "tokens that can be stored in KV cache (13360).")
    assert not generic_words("MyError", "list index out of range")


def test_the_code_line_names_the_input() -> None:
    [config] = inputs_of("IndexError", "list index out of range", "and config.layer_types[layer_idx]")
    assert (config.kind, config.name) == ("config", "layer_types")
    [env] = inputs_of("ValueError", "invalid literal for int() with base 10: 'tcp://127.0.0.1:8000'",
                      'port = int(os.environ["VLLM_PORT"])')
    assert (env.kind, env.name) == ("env", "VLLM_PORT")
    [ckpt] = inputs_of("KeyError", "'layers.35.mlp.gate.g_idx'", "param = params_dict[name]")
    assert ckpt.kind == "checkpoint"
    [rope] = inputs_of("KeyError", "'type'", 'if rope_scaling["type"] == "yarn":')
    assert (rope.kind, rope.name) == ("config", "rope_scaling")
    [kw] = inputs_of("TypeError", "__init__() got an unexpected keyword argument 'rope_theta'", "")
    assert (kw.kind, kw.name) == ("argument", "rope_theta")
    [weight] = inputs_of("AttributeError", "'RoutedExperts' object has no attribute 'w2_weight'. Did you mean: "
                                           "'w2_qweight'?", "")
    assert weight.kind == "checkpoint"


TRACEBACK = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/sample/ops/topk_topp_sampler.py", line 248, in flashinfer_sample
    next_token_ids = flashinfer.sampling.top_k_top_p_sampling_from_logits(
  File "/usr/local/lib/python3.12/dist-packages/flashinfer/sampling.py", line 47, in get_sampling_module
    module = load()
  File "/usr/local/lib/python3.12/dist-packages/torch/_ops.py", line 1123, in __call__
    return self._op(*args, **(kwargs or {}))
FileNotFoundError: [Errno 2] No such file or directory: 'nvcc'
"""


def test_the_innermost_frame_that_says_something_raised_it() -> None:
    problems = parse_text(TRACEBACK).problems
    frames = [p for p in problems if p.kind == "frame"]
    r = raiser(frames, "FileNotFoundError", "[Errno 2] No such file or directory: 'nvcc'")
    # torch's op dispatch only passes the call on: the library frame before it raised, called from vLLM's sampler
    assert r is not None and r.owner.name == "flashinfer" and r.frame.frame_function == "get_sampling_module"
    assert r.vllm_frame is not None and r.vllm_frame.frame_function == "flashinfer_sample"
    assert not frames_agree("src/huggingface_hub/cli/upload.py", "run_upload", frames)
    assert frames_agree("vllm/v1/sample/ops/topk_topp_sampler.py", "flashinfer_sample", frames)
